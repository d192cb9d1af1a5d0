"""KAPING (Baek et al., 2023, "Knowledge-Augmented Language Model Prompting for Zero-Shot KGQA", §3):
the triples one hop around the question's entities, ranked by embedding similarity to the question.

1. Link the topic entities (or take the given ones): :class:`~simgrag.retrievers.linking.EntityLinker`.
2. Gather every triple touching them (1 hop, both directions, at most ``max_triples``).
3. Verbalize each as ``head relation tail`` and embed it with the index's embedder.
4. Keep the ``k`` most cosine-similar to the question (KAPING's and SimGRAG App. C.6's ``k = 10``).

The reader then lists them before the question (:mod:`simgrag.answer.reader`, style ``"kaping"``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from simgrag.index.directory import IndexDir
from simgrag.retrievers._graph import DEFAULT_MAX_TRIPLES, TripleEncoder, k_hop, rank_triples
from simgrag.retrievers.base import RetrievedContext
from simgrag.retrievers.linking import EntityLinker

__all__ = ["KapingRetriever"]


class KapingRetriever:
    """Top-``k`` one-hop triples of the topic entities by similarity to the question."""

    name = "kaping"

    def __init__(self, index: IndexDir, k: int = 10, *, hops: int = 1, max_triples: int = DEFAULT_MAX_TRIPLES,
                 encoder: TripleEncoder | None = None, linker: EntityLinker | None = None) -> None:
        self.index = index
        self.k = k
        self.hops = hops
        self.max_triples = max_triples
        self.encoder = encoder or TripleEncoder(index)
        self.linker = linker or EntityLinker(index)

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        """The ``k`` best triples around the topic entities (see the module docstring)."""
        t0 = time.perf_counter()
        topic = self.linker.link(question, topic_entities=topic_entities)
        t_link = time.perf_counter()
        hood = k_hop(self.index.store, topic.ids, hops=self.hops, max_triples=self.max_triples)
        tids, sims = rank_triples(self.encoder, self.encoder.encode_question(question), hood.triple_ids, self.k)
        end = time.perf_counter()
        return RetrievedContext(
            retriever=self.name, question=question,
            triples=tuple(self.index.store.triple(int(t)) for t in tids), topic=topic,
            scores=tuple(float(s) for s in sims),
            timings={"link_s": t_link - t0, "rank_s": end - t_link, "total_s": end - t0},
            info={"candidates": len(hood.triple_ids), "truncated": hood.truncated},
        )
