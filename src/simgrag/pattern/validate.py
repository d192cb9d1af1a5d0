"""Checks on a pattern before it goes to the subgraph search; messages name the offending triple.

A pattern is usable when every triple is exactly three non-empty strings, it is not absurdly large,
each connected component anchors on something (a known node or a *typed* unknown such as
``UNKNOWN director 1``), and — when ``require_connected`` — it is one connected graph. The matcher
can search each component on its own, so connectivity is optional. Exact repeats of a triple (a
small model's stutter) are dropped, and a path written as one list (``[A, r1, B, r2, C]``) is split
into its triples.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from simgrag.errors import PatternError
from simgrag.pattern.graph import Pattern, normalize_text

__all__ = ["MAX_QUESTION_CHARS", "MAX_TRIPLES", "validate_pattern", "validate_question", "validate_triples"]

MAX_TRIPLES = 12
#: raw triples accepted before exact repeats are dropped (a stutter), as a multiple of the limit
RAW_LIMIT_FACTOR = 8
MAX_QUESTION_CHARS = 10_000

logger = logging.getLogger(__name__)


def validate_triples(
    triples: Sequence[Any],
    *,
    require_connected: bool = False,
    max_triples: int = MAX_TRIPLES,
) -> Pattern:
    """Check raw triples (e.g. from :func:`~simgrag.pattern.parse.parse_pattern_text`) → :class:`Pattern`."""
    if isinstance(triples, (str, bytes)) or not isinstance(triples, Sequence):
        raise PatternError(f"A pattern is a list of [head, relation, tail] triples, got {triples!r:.300}")
    raw_limit = RAW_LIMIT_FACTOR * max_triples
    if len(triples) > raw_limit or len(triples := _split_paths(triples, raw_limit)) > raw_limit:
        raise PatternError(
            f"The pattern has {len(triples)} triples, more than the limit of {max_triples}; "
            "a question's pattern should only hold the facts the question mentions")
    for i, triple in enumerate(triples):
        _check_triple(i, triple)
    unique = _without_repeats(triples)  # a small model's stutter repeats one triple many times
    if len(unique) > max_triples:
        raise PatternError(
            f"The pattern has {len(unique)} triples, more than the limit of {max_triples}; "
            "a question's pattern should only hold the facts the question mentions")
    pattern = Pattern.from_triples(unique)
    return validate_pattern(pattern, require_connected=require_connected, max_triples=max_triples)


def validate_pattern(
    pattern: Pattern,
    *,
    require_connected: bool = False,
    max_triples: int = MAX_TRIPLES,
) -> Pattern:
    """Check an already built :class:`Pattern`; returns it unchanged when valid."""
    if len(pattern.edges) > max_triples:
        raise PatternError(f"The pattern has {len(pattern.edges)} triples, more than {max_triples}")
    components = pattern.components()
    if require_connected and len(components) > 1:
        raise PatternError(
            f"The pattern is not connected: it falls into {len(components)} parts "
            + "; ".join(_describe(pattern, edges) for _, edges in components)
            + ". Link the parts through shared node names")
    for node_ids, edge_ids in components:
        if not any(_anchors(pattern, v) for v in node_ids):
            raise PatternError(
                f"The part {_describe(pattern, edge_ids)} has no known entity and no typed unknown "
                "node: name an entity from the question, or give each unknown a type, "
                "e.g. 'UNKNOWN director 1'")
    return pattern


def validate_question(text: Any, what: str = "question") -> str:
    """A question or claim as the LLM may see it: a non-empty string of valid Unicode, not too long."""
    if not isinstance(text, str):
        raise PatternError(f"The {what} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise PatternError(f"The {what} is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise PatternError(f"The {what} has {len(text):,} characters, more than {MAX_QUESTION_CHARS:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PatternError(f"The {what} holds invalid Unicode (a lone surrogate at character {exc.start}): "
                           f"{text!r:.200}") from None
    return text


def _check_triple(i: int, triple: Any) -> None:
    where = f"triple {i + 1} {triple!r:.300}"
    if isinstance(triple, (str, bytes)) or not isinstance(triple, Sequence):
        raise PatternError(f"{where}: expected a list [head, relation, tail]")
    if len(triple) != 3:
        raise PatternError(f"{where}: expected exactly 3 items [head, relation, tail], got {len(triple)}")
    for name, item in zip(("head", "relation", "tail"), triple, strict=True):
        if not isinstance(item, str):
            raise PatternError(f"{where}: the {name} must be a string, got {type(item).__name__}")
        if not item.strip():
            raise PatternError(f"{where}: the {name} is empty")
    if normalize_text(triple[0]) == normalize_text(triple[2]):  # "william  talbot" is "william talbot"
        raise PatternError(f"{where}: head and tail are the same node; a triple links two different nodes")


def _split_paths(triples: Sequence[Any], limit: int) -> list[Any]:
    """A path written as one list — ``[A, r1, B, r2, C]``, an odd number (≥ 5) of strings — split into its
    triples ``[A, r1, B]``, ``[B, r2, C]`` (a small model's shorthand for a chain); anything else, and a path
    of more than ``limit`` triples (reported as it is, not copied), as it is."""
    out: list[Any] = []
    for triple in triples:
        if (not isinstance(triple, (str, bytes)) and isinstance(triple, Sequence)
                and 5 <= len(triple) <= 2 * limit + 1 and len(triple) % 2 == 1
                and all(isinstance(x, str) for x in triple)):
            logger.info("split the path %.300r into %d triples", triple, len(triple) // 2)
            out += [list(triple[k:k + 3]) for k in range(0, len(triple) - 2, 2)]
        else:
            out.append(triple)
    return out


def _without_repeats(triples: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    """Drop exact repeats of a triple (a small model's stutter; never meant as a second edge)."""
    seen: set[tuple[str, ...]] = set()
    kept: list[Sequence[str]] = []
    for triple in triples:
        key = tuple(normalize_text(x) for x in triple)
        if key not in seen:
            seen.add(key)
            kept.append(triple)
    if len(kept) < len(triples):
        logger.info("dropped %d repeated triple(s) from the pattern", len(triples) - len(kept))
    return kept


def _anchors(pattern: Pattern, v: int) -> bool:
    node = pattern.nodes[v]
    return not node.unknown or node.type_hint is not None


def _describe(pattern: Pattern, edge_ids: Sequence[int]) -> str:
    triples = pattern.triples()
    return "[" + ", ".join(str(list(triples[i])) for i in edge_ids) + "]"
