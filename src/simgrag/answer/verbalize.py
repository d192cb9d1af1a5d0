"""Retrieved subgraphs → prompt text (SimGRAG §4.4): each subgraph as its set of triples.

Two forms, both in the KG's own orientation (a triple reads ``(head, relation, tail)`` as stored)::

    graph [1]: (Anastasia, starred_actors, Ingrid Bergman), (Spellbound, written_by, Ben Hecht)
    graph [2]: (Anastasia, starred_actors, John Cusack), (Floundering, written_by, Peter McCarthy)

and a *compact* form that drops the graph labels and lists each distinct triple once, one per line
(fewer tokens when the top-k subgraphs share most of their triples)::

    (Anastasia, starred_actors, Ingrid Bergman)
    (Spellbound, written_by, Ben Hecht)
    ...

Duplicates are removed: a triple repeated inside a subgraph is written once, and a subgraph whose
triples equal an earlier one's is skipped (the remaining graphs are numbered 1, 2, … in GSD order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from simgrag.kg.store import Triple
from simgrag.match.retrieve import Evidence

Triples = tuple[tuple[str, str, str], ...]

__all__ = [
    "Triples", "distinct_graphs", "evidence_entities", "format_triple", "verbalize_evidence",
    "verbalize_graphs",
]


def format_triple(triple: Triple | tuple[str, str, str]) -> str:
    """``(head, relation, tail)`` without quotes (the least tokens for a small model)."""
    h, r, t = triple.as_tuple() if isinstance(triple, Triple) else triple
    return f"({h}, {r}, {t})"


def _unique(items: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return list(dict.fromkeys(items))


def distinct_graphs(evidence: Sequence[Evidence]) -> list[list[tuple[str, str, str]]]:
    """The triples of each subgraph in GSD order, deduplicated within and across subgraphs."""
    ordered = sorted(evidence, key=lambda ev: (ev.gsd, ev.rank))
    graphs: list[list[tuple[str, str, str]]] = []
    seen: set[frozenset[tuple[str, str, str]]] = set()
    for ev in ordered:
        triples = _unique(t.as_tuple() for t in ev.triples())
        key = frozenset(triples)
        if triples and key not in seen:
            seen.add(key)
            graphs.append(triples)
    return graphs


def verbalize_graphs(graphs: Sequence[Sequence[tuple[str, str, str]]], *, compact: bool = False) -> str:
    """``graph [i]: (h, r, t), …`` lines for lists of triples, or the compact form."""
    if compact:
        return "\n".join(format_triple(t) for t in _unique(t for g in graphs for t in g))
    lines = (", ".join(format_triple(t) for t in graph) for graph in graphs)
    return "\n".join(f"graph [{i}]: {line}" for i, line in enumerate(lines, start=1))


def verbalize_evidence(evidence: Sequence[Evidence], *, compact: bool = False) -> str:
    """The evidence block of a prompt (see the module docstring); ``""`` when there is no evidence."""
    return verbalize_graphs(distinct_graphs(evidence), compact=compact)


def evidence_entities(evidence: Sequence[Evidence]) -> list[str]:
    """Every entity name in the evidence (node bindings and triple ends), first-seen order."""
    names: dict[str, None] = {}
    for ev in sorted(evidence, key=lambda e: (e.gsd, e.rank)):
        for node in ev.nodes:
            names.setdefault(node.entity, None)
        for edge in ev.edges:
            names.setdefault(edge.triple.head, None)
            names.setdefault(edge.triple.tail, None)
    return list(names)
