"""What a pattern's matched subgraphs say about the answer: the asked-for node and its bindings.

The asked-for node (:func:`asked_node`) is the unknown node with the highest index that lies on
exactly one pattern edge (a leaf: the end of the chain the question walks along); when no unknown
node is a leaf (a star around an unknown centre) it is the last unknown node. Node indices follow the
order of first appearance in the pattern's triples. Its bindings across the subgraphs, best GSD
first, are the answer candidates (:func:`answer_candidates`); those of the subgraphs that match the
pattern exactly are the answer itself in SimGRAG's ``auto`` answer mode (:func:`exact_bindings`).

With an answer set (:attr:`~simgrag.match.retrieve.Retrieval.answer_set`: every match within the
answer tolerance of the best, not only the top k) both read it: the candidates are the set's answers
followed by the other subgraphs' bindings, and an exact best match makes the whole set the answer.
"""

from __future__ import annotations

from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern

__all__ = ["EXACT_GSD", "answer_candidates", "asked_node", "exact_bindings"]

#: a subgraph whose GSD is at most this matches the pattern exactly (same texts, embedding noise only)
EXACT_GSD = 1e-3


def asked_node(pattern: Pattern) -> int | None:
    """Index of the asked-for node: the highest-index unknown leaf, else the last unknown node
    (:meth:`Pattern.asked_node`). ``None`` when the pattern has no unknown node."""
    return pattern.asked_node()


def asked_text(pattern: Pattern) -> str | None:
    """The asked-for node's text (``UNKNOWN director 1``), ``None`` without unknown nodes."""
    index = asked_node(pattern)
    return pattern.nodes[index].text if index is not None else None


def answer_candidates(pattern: Pattern, retrieval: Retrieval) -> tuple[str, ...]:
    """Entities bound to the asked-for node: the answer set's, then the subgraphs' (best GSD first),
    deduplicated."""
    found = _in_set(pattern, retrieval)
    return tuple(dict.fromkeys((*found, *_bindings(pattern, retrieval, tolerance=None))))


def exact_bindings(pattern: Pattern, retrieval: Retrieval, *, tolerance: float = EXACT_GSD) -> tuple[str, ...]:
    """Entities bound to the asked-for node in the matches that fit the pattern *exactly* (GSD ≤
    ``tolerance``: every known node and relation found verbatim in the KG) — the whole answer set when
    the retrieval has one, else those of the top-k subgraphs; empty when the best match is not exact."""
    if not retrieval.evidence or retrieval.evidence[0].gsd > tolerance:
        return ()
    return _in_set(pattern, retrieval) or _bindings(pattern, retrieval, tolerance=tolerance)


def _in_set(pattern: Pattern, retrieval: Retrieval) -> tuple[str, ...]:
    found = retrieval.answer_set
    if found is None or found.asked_node != asked_text(pattern):
        return ()
    return found.names()


def _bindings(pattern: Pattern, retrieval: Retrieval, *, tolerance: float | None) -> tuple[str, ...]:
    text = asked_text(pattern)
    if text is None:
        return ()
    ranked = retrieval.evidence if tolerance is not None else sorted(retrieval.evidence, key=lambda e: (e.gsd, e.rank))
    found: dict[str, None] = {}
    for ev in ranked:
        binding = ev.binding(text)
        if binding is not None and (tolerance is None or ev.gsd <= tolerance):
            found.setdefault(binding.entity, None)
    return tuple(found)
