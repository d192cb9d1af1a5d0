"""What a pattern's matched subgraphs say about the answer: the asked-for node and its bindings.

The asked-for node (:func:`asked_node`) is the unknown node with the highest index that lies on
exactly one pattern edge (a leaf: the end of the chain the question walks along); when no unknown
node is a leaf (a star around an unknown centre) it is the last unknown node. Node indices follow the
order of first appearance in the pattern's triples. Its bindings across the subgraphs, best GSD
first, are the answer candidates (:func:`answer_candidates`); those of the subgraphs that match the
pattern exactly are the answer itself in SimGRAG's ``auto`` answer mode (:func:`exact_bindings`).
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
    """Entities bound to the asked-for node across the subgraphs, best GSD first, deduplicated."""
    return _bindings(pattern, retrieval, tolerance=None)


def exact_bindings(pattern: Pattern, retrieval: Retrieval, *, tolerance: float = EXACT_GSD) -> tuple[str, ...]:
    """Entities bound to the asked-for node in the subgraphs that match the pattern *exactly*
    (GSD ≤ ``tolerance``: every known node and relation found verbatim in the KG); empty otherwise."""
    if not retrieval.evidence or retrieval.evidence[0].gsd > tolerance:
        return ()
    return _bindings(pattern, retrieval, tolerance=tolerance)


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
