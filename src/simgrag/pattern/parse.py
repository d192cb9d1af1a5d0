"""LLM text → raw triples, without ``eval``.

Strict JSON is tried first. When it fails, the text is *repaired* step by step and parsed again:

* code fences (```` ```json … ``` ````) and prose around the JSON are dropped;
* Python-style output is normalised: single-quoted strings, tuples ``( … )``, ``True``/``None``;
* mixed quotes such as the paper's ``'divided": […]`` and trailing commas are fixed;
* a truncated output gets its missing closing brackets;
* a bare list of triples (or a single triple) is accepted as the ``triples`` value.

The result says whether a repair was needed. Anything that still cannot be read raises
:class:`~simgrag.errors.PatternParseError` carrying the offending text.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from simgrag.errors import PatternParseError

logger = logging.getLogger(__name__)

__all__ = ["ParsedOutput", "parse_pattern_text"]

_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_CLOSERS = {"[": "]", "{": "}", "(": ")"}
_STRUCTURAL_AFTER_STRING = set(":,]})")
_TRIPLE_KEYS = ("triples", "pattern", "graph", "edges")
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}
_WORD = re.compile(r"\w+")
_NON_SPACE = re.compile(r"\S")
#: longer LLM output is refused: a pattern is a few short triples, and the repairs scan the text
MAX_OUTPUT_CHARS = 50_000


@dataclass(frozen=True)
class ParsedOutput:
    """What the LLM wrote: the triples as plain lists, the optional segments, and whether repaired."""

    triples: list[Any]
    divided: list[str] | None
    repaired: bool


def parse_pattern_text(text: str) -> ParsedOutput:
    """Parse an LLM answer into triples (still unvalidated: see :mod:`simgrag.pattern.validate`)."""
    if not isinstance(text, str):
        raise PatternParseError(f"Expected the LLM output as text, got {type(text).__name__}")
    if not text or not text.strip():
        raise PatternParseError("The LLM returned an empty answer; expected {\"triples\": [...]}", text)
    if len(text) > MAX_OUTPUT_CHARS:
        raise PatternParseError(f"The LLM output has {len(text):,} characters, more than the {MAX_OUTPUT_CHARS:,} "
                                "a pattern can need", text)
    value = _strict(text.strip())
    repaired = value is None
    if value is None:
        value = _repaired(text)
    if value is None:
        raise PatternParseError(
            'Could not read the LLM output as JSON {"triples": [["head", "relation", "tail"], ...]} '
            "even after repairs (code fences, quotes, tuples, trailing commas)", text)
    triples, divided = _extract(value, text)
    if repaired:
        triples = _without_cut_last_triple(triples)
    return ParsedOutput(triples, divided, repaired or not isinstance(value, dict))


def _without_cut_last_triple(triples: list[Any]) -> list[Any]:
    """A repaired output that ran out of tokens ends in a cut triple (``["Titanic", ""`` or ``["UNKNOWN
    country 1", "borders", "``, whose string the repair closed empty): drop that one."""
    last = triples[-1] if len(triples) > 1 else None
    if isinstance(last, list) and (len(last) < 3 or any(isinstance(x, str) and not x.strip() for x in last)):
        logger.info("dropping the cut last triple %r of a truncated LLM output", last)
        return triples[:-1]
    return triples


def _strict(text: str) -> Any | None:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        return None


def _repaired(text: str) -> Any | None:
    for candidate in _candidates(text):
        value = _strict(candidate)
        if value is not None:
            return value
        value = _strict(_normalise(candidate))
        if value is not None:
            return value
    return None


def _candidates(text: str) -> list[str]:
    """Substrings worth parsing: fenced blocks, then the span from the first bracket on."""
    found: list[str] = [m.group(1).strip() for m in _FENCE.finditer(text)]
    found.append(text.strip())
    spans: list[str] = []
    for chunk in found:
        spans.append(chunk)
        start = _first_opening(chunk)
        if start is not None:
            spans.append(_balanced_span(chunk[start:]))
    unique: list[str] = []
    for span in spans:
        if span and span not in unique:
            unique.append(span)
    return unique


def _first_opening(text: str) -> int | None:
    positions = [i for i in (text.find("{"), text.find("["), text.find("(")) if i >= 0]
    return min(positions) if positions else None


def _balanced_span(text: str) -> str:
    """``text`` cut after the bracket that closes its first bracket (whole text if never closed)."""
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i, _ = _read_string(text, i)
            continue
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
            if depth == 0:
                return text[: i + 1]
        i += 1
    return text


def _closes_string(text: str, i: int, quote: str) -> bool:
    """A quote closes a string when it is the opening quote, or any quote followed by structure."""
    nxt = _NON_SPACE.search(text, i + 1)
    followed_by_structure = nxt is None or nxt.group(0) in _STRUCTURAL_AFTER_STRING
    if text[i] == quote:
        return quote == '"' or followed_by_structure
    return followed_by_structure


def _normalise(text: str) -> str:
    """Rewrite Python-ish / sloppy JSON into strict JSON (strings re-emitted with json.dumps)."""
    out: list[str] = []
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end, value = _read_string(text, i)
            out.append(json.dumps(value, ensure_ascii=False))
            i = end
            continue
        if ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
            out.append("[" if ch == "(" else ch)
        elif ch in "]})":
            if stack:
                stack.pop()
            _drop_trailing_comma(out)
            out.append("]" if ch == ")" else ch)
        elif ch.isalpha():  # a bare word (Python's True/None, or prose): any script, not just ASCII
            word = _WORD.match(text, i)
            found = word.group(0) if word is not None else ch
            out.append(_PY_WORDS.get(found, found))
            i += len(found)
            continue
        else:
            out.append(ch)
        i += 1
    _drop_trailing_comma(out)
    out.extend("]" if c == ")" else c for c in reversed(stack))
    return "".join(out)


def _read_string(text: str, start: int) -> tuple[int, str]:
    """Read a string opened at ``start`` by either quote; returns (index after it, its value)."""
    quote = text[start]
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            chars.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
            continue
        if ch in "\"'" and _closes_string(text, i, quote):
            return i + 1, "".join(chars)
        chars.append(ch)
        i += 1
    return i, "".join(chars)


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def _extract(value: Any, text: str) -> tuple[list[Any], list[str] | None]:
    """Find the triples (and segments) in the parsed value."""
    if isinstance(value, dict):
        lowered = {str(k).strip().lower(): v for k, v in value.items()}
        divided = lowered.get("divided")
        divided_list = [str(s) for s in divided] if isinstance(divided, list) else None
        for key in _TRIPLE_KEYS:
            if key in lowered:
                return _as_triple_list(lowered[key], text), divided_list
        raise PatternParseError(
            f'The LLM output is a JSON object without a "triples" key (keys: {sorted(lowered)})', text)
    if isinstance(value, list):
        return _as_triple_list(value, text), None
    raise PatternParseError(
        f'Expected {{"triples": [...]}} or a list of triples, got a JSON {type(value).__name__}', text)


def _as_triple_list(value: Any, text: str) -> list[Any]:
    if not isinstance(value, list):
        raise PatternParseError(f'"triples" must be a list of [head, relation, tail], got {value!r}', text)
    if len(value) == 3 and all(isinstance(x, str) for x in value):
        return [value]  # a single bare triple
    return value
