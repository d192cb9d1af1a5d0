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

With an answer set (every match as good as the best, :mod:`simgrag.match.answers`),
:func:`verbalize_retrieval` writes the set compactly first — one graph line per path shape, a node bound
to several entities as ``{a; b; …}`` — then the top-k subgraphs that are not in it::

    graph [1]: (Heat, starred_actors, {Al Pacino; Val Kilmer}), ({Ronin; +40 more}, starred_actors, {…})
    graph [2]: (Heat, has_genre, Crime)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from simgrag.kg.store import Triple
from simgrag.match.retrieve import Evidence, Retrieval

Triples = tuple[tuple[str, str, str], ...]

#: characters of evidence at most in a prompt: ~2,400 tokens of hyphenated names (~2.5 characters a token), which
#: leaves the question, the instructions and the answer room in the embedded model's 4,096-token context
MAX_EVIDENCE_CHARS = 6000

__all__ = [
    "MAX_EVIDENCE_CHARS", "Triples", "distinct_graphs", "evidence_entities", "format_triple", "retrieval_entities",
    "verbalize_evidence", "verbalize_graphs", "verbalize_retrieval", "within_chars",
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


def verbalize_retrieval(retrieval: Retrieval, *, compact: bool = False, max_groups: int = 8,
                        max_names: int = 40, max_chars: int | None = MAX_EVIDENCE_CHARS) -> str:
    """The evidence block of a retrieval: its answer set's path shapes (at most ``max_groups`` lines, at
    most ``max_names`` names per node), then the subgraphs outside the set; without an answer set,
    :func:`verbalize_evidence`. Within ``max_chars`` (``None``: no limit): fewer names per node first (a chain of
    unknown nodes over a family tree bound 40 names to each of four nodes: 13,908 characters, more than the
    embedded model's 4,096-token context), then fewer lines, then the text cut."""
    text = _verbalized(retrieval, compact, max_groups, max_names)
    if max_chars is None or len(text) <= max_chars:
        return text
    for fewer in (20, 10, 5, 3, 1):
        if fewer < max_names:
            text = _verbalized(retrieval, compact, max_groups, fewer)
            if len(text) <= max_chars:
                return text
    return within_chars(text, max_chars)


def within_chars(text: str, max_chars: int | None = MAX_EVIDENCE_CHARS) -> str:
    """``text`` in at most ``max_chars`` characters (``None``: as it is): whole lines from the end dropped first (the
    evidence blocks list the best first), then the last line left cut, marked with " …"."""
    if max_chars is None or len(text) <= max_chars:
        return text
    lines = text.splitlines()
    while len(lines) > 1 and len("\n".join(lines)) > max_chars:
        lines.pop()
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 2] + " …" if max_chars >= 2 else text[: max(max_chars, 0)]


def _verbalized(retrieval: Retrieval, compact: bool, max_groups: int, max_names: int) -> str:
    found = retrieval.answer_set
    if found is None or not found.groups:
        return verbalize_evidence(retrieval.evidence, compact=compact)
    lines = [g.line(max_names=max_names) for g in found.groups[:max_groups]]
    outside = [ev for ev in retrieval.evidence if ev.gsd > found.best_gsd + found.tolerance]
    rest = verbalize_evidence(outside, compact=compact).splitlines()
    if compact:
        return "\n".join([*lines, *rest])
    rest = [line.split(": ", 1)[1] for line in rest]
    return "\n".join(f"graph [{i}]: {line}" for i, line in enumerate([*lines, *rest], start=1))


def retrieval_entities(retrieval: Retrieval) -> list[str]:
    """Every entity name of the evidence (:func:`evidence_entities`) and of the answer set."""
    names = dict.fromkeys(evidence_entities(retrieval.evidence))
    if retrieval.answer_set is not None:
        for group in retrieval.answer_set.groups:
            for bound in group.nodes:
                names.update(dict.fromkeys(bound))
    return list(names)
