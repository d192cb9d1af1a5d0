"""SimGRAG itself behind the :class:`~simgrag.retrievers.base.Retriever` protocol (SimGRAG §4.1–4.2).

The LLM writes a pattern graph for the question (``engine.patterns.generate``), and the top-k
subgraphs with the smallest graph semantic distance are retrieved (``engine.retrieve``). The context
is the union of the subgraphs' triples in rank order (best GSD first). Each triple's score is
``−GSD`` of the first subgraph that holds it (higher is better, as for the other retrievers). The
answer candidates are the entities bound to the pattern's asked-for node
(:func:`simgrag.answer.qa.answer_candidates`).

SimGRAG finds its entities through the pattern, so given ``topic_entities`` are not used; ``info``
records that they were given, with the pattern, the GSDs and the pattern call's tokens.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from simgrag.answer.qa import answer_candidates, asked_node
from simgrag.kg.store import Triple
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.generate import PatternResult
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import RetrievedContext

__all__ = ["SimGRAGRetriever"]


class SimGRAGRetriever:
    """Pattern graph (LLM) → top-k similar subgraphs, as a :class:`RetrievedContext`."""

    name = "simgrag"

    def __init__(self, engine: SimGRAG) -> None:
        self.engine = engine

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        """Raises :class:`~simgrag.errors.PatternError` when no valid pattern comes out of the LLM."""
        t0 = time.perf_counter()
        generated = self.engine.patterns.generate(question)
        t_pattern = time.perf_counter()
        retrieval = self.engine.retrieve(generated.pattern)
        end = time.perf_counter()
        triples, scores = _evidence_triples(retrieval)
        timings = {"pattern_s": t_pattern - t0, "retrieve_s": end - t_pattern, "total_s": end - t0}
        timings.update({k: retrieval.timings[k] for k in ("embed_s", "vector_s", "graph_s") if k in retrieval.timings})
        return RetrievedContext(
            retriever=self.name, question=question, triples=triples,
            answer_candidates=answer_candidates(generated.pattern, retrieval), scores=scores, timings=timings,
            info=_info(generated, retrieval, topic_entities),
        )


def _evidence_triples(retrieval: Retrieval) -> tuple[tuple[Triple, ...], tuple[float, ...]]:
    seen: dict[Triple, float] = {}
    for ev in sorted(retrieval.evidence, key=lambda e: (e.gsd, e.rank)):
        for triple in ev.triples():
            seen.setdefault(triple, -float(ev.gsd))
    return tuple(seen), tuple(seen.values())


def _info(generated: PatternResult, retrieval: Retrieval, topic_entities: Sequence[str] | None) -> dict[str, Any]:
    pattern = generated.pattern
    index = asked_node(pattern)
    return {
        "pattern": [list(t) for t in pattern.triples()],
        "asked_node": pattern.nodes[index].text if index is not None else None,
        "pattern_attempts": generated.attempts,
        "pattern_prompt_tokens": generated.prompt_tokens,
        "pattern_completion_tokens": generated.completion_tokens,
        "gsd": [float(ev.gsd) for ev in retrieval.evidence],
        "complete": retrieval.complete,
        "topic_entities_given": list(topic_entities or []),
    }
