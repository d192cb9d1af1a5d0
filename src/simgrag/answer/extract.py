"""LLM answer text → entity names from the evidence (no ``eval``, no JSON needed).

The QA prompt asks for one line ``answer: name1 | name2``. Small models do not always comply, so
:func:`extract_entities` reads what it gets, in this order:

1. The *answer segment*: the text after the last ``answer:`` (or ``the answer is``); without one,
   the whole text is scanned for evidence names (step 4).
2. Evidence names that contain a separator (``Pride and Prejudice``, ``Walker (footballer, born
   1940)``) are protected, then the segment is split on ``|``, ``,``, ``;``, ``/``, ``&``, ``or``,
   ``and`` and new lines; quotes, brackets, list markers and trailing dots are stripped from each item.
3. Each item is matched against the evidence names, case-insensitively and with an underscore read as a
   space (``Fidel Martinez`` is ``Fidel_MARTINEZ``): an exact match first; else
   the names the item contains (``the writer is Ben Hecht``); else the single name that contains the
   item (``Hecht``, at least 3 characters). Items that match nothing stay in the answer text only.
4. Fallback scan: every evidence name occurring in the text, in order of position.

Names shorter than 4 characters (``Up``, ``It``) are matched case-sensitively when they are looked
for *inside* a longer text, so ``look it up`` does not name the films *It* and *Up*. The LLM's order
is kept and duplicates dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["answer_segment", "extract_entities", "split_items"]

_ANSWER = re.compile(r"\banswers?\s*(?:is|are)?\s*\**\s*[:：=]\**[ \t]*(.*)", re.IGNORECASE)
_ANSWER_IS = re.compile(r"\bthe\s+answers?\s+(?:is|are)\s+(.*)", re.IGNORECASE)
_SEPARATORS = re.compile(r"\s*(?:\||,|;|/|&|\n|\s(?:or|and)\s)\s*", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_LIST_MARKER = re.compile(r"^(?:[-*•]+|\d+[.)])\s+")
_EDGE_CHARS = " \t\"'`“”‘’[]{}<>*_.:;!?"
_SHORT = 4
_MIN_PARTIAL = 3
_PLACEHOLDER = "\x00{}\x00"
_PLACEHOLDER_RE = re.compile("\x00(\\d+)\x00")


def _norm(text: str) -> str:
    """Compared form: lower case, single spaces, an underscore read as a space (``Fidel_MARTINEZ``, as KGs
    built from IRIs spell names, is the model's ``Fidel Martinez``)."""
    return _SPACES.sub(" ", text.replace("_", " ")).strip().lower()


def answer_segment(text: str) -> str | None:
    """The text after the last ``answer:`` marker (or ``the answer is``), else ``None``."""
    found = list(_ANSWER.finditer(text))
    if found:
        last = found[-1]
        segment = last.group(1).strip()
        if not segment:  # "answer:\nBen Hecht": take the next non-empty line
            rest = [line.strip() for line in text[last.end():].splitlines() if line.strip()]
            segment = rest[0] if rest else ""
        return segment
    said = list(_ANSWER_IS.finditer(text))
    return said[-1].group(1).strip() if said else None


def _name_pattern(name: str) -> re.Pattern[str]:
    flags = 0 if len(name) < _SHORT else re.IGNORECASE
    spelled = re.escape(_SPACES.sub(" ", name).strip()).replace("_", "[_ ]")  # an underscore may come back as a space
    return re.compile(r"(?<!\w)" + spelled + r"(?!\w)", flags)


def _find_names(text: str, names: Sequence[str]) -> list[tuple[int, str]]:
    """Non-overlapping occurrences of ``names`` in ``text`` (longest name first), by position."""
    text = _SPACES.sub(" ", text)
    taken: list[tuple[int, int]] = []
    hits: list[tuple[int, str]] = []
    for name in sorted(names, key=len, reverse=True):
        for m in _name_pattern(name).finditer(text):
            if all(m.end() <= s or m.start() >= e for s, e in taken):
                taken.append((m.start(), m.end()))
                hits.append((m.start(), name))
    return sorted(hits)


def _clean_item(item: str) -> str:
    item = _LIST_MARKER.sub("", item.strip())
    item = item.strip(_EDGE_CHARS)
    if item.startswith("(") and item.endswith(")"):
        item = item[1:-1].strip(_EDGE_CHARS)
    return item


def split_items(segment: str, names: Sequence[str] = ()) -> list[str]:
    """Split an answer segment into cleaned items, keeping separator-bearing ``names`` whole."""
    protected = [n for n in names if _SEPARATORS.search(n)]
    kept: list[str] = []

    def protect(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return _PLACEHOLDER.format(len(kept) - 1)

    text = _SPACES.sub(" ", segment) if "\n" not in segment else segment
    for name in sorted(protected, key=len, reverse=True):
        text = _name_pattern(name).sub(protect, text)
    items = (_PLACEHOLDER_RE.sub(lambda m: kept[int(m.group(1))], part) for part in _SEPARATORS.split(text))
    return [c for c in (_clean_item(i) for i in items) if c]


def _match_item(item: str, by_norm: dict[str, str], names: Sequence[str]) -> list[str]:
    exact = by_norm.get(_norm(item))
    if exact is not None:
        return [exact]
    inside = [name for _, name in _find_names(item, names)]
    if inside:
        return inside
    key = _norm(item)
    if len(key) < _MIN_PARTIAL:
        return []
    holders = [n for n in names if re.search(r"(?<!\w)" + re.escape(key) + r"(?!\w)", _norm(n))]
    return holders if len(holders) == 1 else []


def extract_entities(text: str, names: Sequence[str]) -> list[str]:
    """Evidence ``names`` the LLM answered with, in the LLM's order (see the module docstring)."""
    if not names or not text.strip():
        return []
    by_norm: dict[str, str] = {}
    for name in names:
        by_norm.setdefault(_norm(name), name)
    segment = answer_segment(text)
    if segment is None:
        found = [name for _, name in _find_names(text, names)]
    else:
        found = [m for item in split_items(segment, names) for m in _match_item(item, by_norm, names)]
    return list(dict.fromkeys(found))
