"""How people mis-type and re-word entity names: the noise of planted queries.

:func:`paraphrase_name` always drops a DBpedia-style qualifier (``John Smith (soccer player 2)``
→ ``John Smith``: nobody types it) and then applies edits of these kinds:

- ``typo``: one keyboard slip inside a word (swapped, dropped, doubled or neighbouring letter);
- ``order``: the last word first, library style (``Smith, John``);
- ``abbrev``: a common abbreviation (``University`` → ``Univ.``) or a first-name initial (``J. Smith``);
- ``case``: all lower case.

The same functions perturb real names (e.g. MetaQA's) to measure how well an embedder finds an
entity from a noisy mention.
"""

from __future__ import annotations

import random
import re

__all__ = ["EDIT_KINDS", "drop_qualifier", "paraphrase_name", "typo"]

EDIT_KINDS = ("typo", "order", "abbrev", "case")
_QUALIFIER = re.compile(r"\s*\([^()]*\)$")
_ABBREVIATIONS = {
    "University": "Univ.", "Saint": "St.", "Mount": "Mt.", "Company": "Co.", "International": "Intl.",
    "Association": "Assoc.", "Department": "Dept.", "Brothers": "Bros.", "Fort": "Ft.", "Street": "St.",
    "Avenue": "Ave.", "Railway": "Rly.", "Station": "Stn.", "National": "Natl.", "Corporation": "Corp.",
    "Institute": "Inst.", "Technology": "Tech.", "Football Club": "FC", "Symphony Orchestra": "SO",
    "Airport": "Apt.", "Incorporated": "Inc.", "Limited": "Ltd.", "Laboratories": "Labs",
    "North": "N.", "South": "S.", "East": "E.", "West": "W.", "Upper": "Upr.", "Great": "Gt.",
    "Doctor": "Dr.", "Professor": "Prof.", "General": "Gen.", "Captain": "Capt.", "Junior": "Jr.",
    "Senior": "Sr.", "and": "&",
}
_KEYBOARD = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
_NEIGHBOURS = {
    ch: "".join(row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)) + "".join(
        other[i] for other in _KEYBOARD if other is not row and i < len(other))
    for row in _KEYBOARD for i, ch in enumerate(row)
}


def drop_qualifier(name: str) -> str:
    """``Ashford (town 2)`` → ``Ashford``."""
    return _QUALIFIER.sub("", name) or name


def typo(text: str, rng: random.Random) -> str:
    """One keyboard slip inside a word of at least four letters (``text`` itself when there is none)."""
    words = [m for m in re.finditer(r"[^\W\d_]{4,}", text)]
    if not words:
        return text
    word = rng.choice(words)
    i = rng.randrange(word.start() + 1, word.end() - 1)
    op = rng.randrange(4)
    if op == 0:
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    if op == 1:
        return text[:i] + text[i + 1:]
    if op == 2:
        return text[:i] + text[i] + text[i:]
    near = _NEIGHBOURS.get(text[i].lower(), "aeiou")
    return text[:i] + rng.choice(near) + text[i + 1:]


def _order(text: str, rng: random.Random) -> str:
    words = text.split()
    return f"{words[-1]}, {' '.join(words[:-1])}" if len(words) >= 2 else text


def _abbrev(text: str, rng: random.Random) -> str:
    hits = [full for full in _ABBREVIATIONS if re.search(rf"\b{re.escape(full)}\b", text)]
    if hits:
        full = rng.choice(hits)
        return re.sub(rf"\b{re.escape(full)}\b", _ABBREVIATIONS[full], text, count=1)
    words = text.split()
    if len(words) >= 2 and words[0].isalpha() and words[0][:1].isupper() and len(words[0]) > 2:
        return " ".join([words[0][0] + ".", *words[1:]])
    return text


def _case(text: str, rng: random.Random) -> str:
    return text.lower()


_EDITS = {"typo": typo, "order": _order, "abbrev": _abbrev, "case": _case}


def paraphrase_name(name: str, rng: random.Random, edits: int = 1,
                    kinds: tuple[str, ...] = EDIT_KINDS) -> tuple[str, list[str]]:
    """``name`` without its qualifier and with up to ``edits`` edits; returns the text and the edits made.

    Edits that would change nothing are skipped; ``edits=0`` only drops the qualifier.
    """
    text = drop_qualifier(name)
    done: list[str] = []
    for kind in rng.sample(list(kinds), len(kinds)):
        if len(done) >= edits:
            break
        changed = _EDITS[kind](text, rng)
        if changed != text:
            text = changed
            done.append(kind)
    return text, done
