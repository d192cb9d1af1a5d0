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

from simgrag.index.directory import IndexDir
from simgrag.retrievers._graph import DEFAULT_MAX_TRIPLES, TripleEncoder, k_hop, rank_triples
from simgrag.retrievers.base import RetrievedContext, TopicEntities
from simgrag.retrievers.linking import EntityLinker, TopicRetriever

__all__ = ["KapingRetriever"]


class KapingRetriever(TopicRetriever):
    """Top-``k`` one-hop triples of the topic entities by similarity to the question."""

    name = "kaping"

    def __init__(self, index: IndexDir, k: int = 10, *, hops: int = 1, max_triples: int = DEFAULT_MAX_TRIPLES,
                 encoder: TripleEncoder | None = None, linker: EntityLinker | None = None) -> None:
        super().__init__(index, linker)
        self.k = k
        self.hops = hops
        self.max_triples = max_triples
        self.encoder = encoder or TripleEncoder(index)

    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        """The ``k`` best triples around the topic entities (see the module docstring)."""
        start = time.perf_counter()
        hood = k_hop(self.index.store, topic.ids, hops=self.hops, max_triples=self.max_triples)
        tids, sims = rank_triples(self.encoder, self.encoder.encode_question(question), hood.triple_ids, self.k)
        return RetrievedContext(
            retriever=self.name, question=question,
            triples=tuple(self.index.store.triple(int(t)) for t in tids), topic=topic,
            scores=tuple(float(s) for s in sims), timings={"rank_s": time.perf_counter() - start},
            info={"candidates": len(hood.triple_ids), "truncated": hood.truncated},
        )
