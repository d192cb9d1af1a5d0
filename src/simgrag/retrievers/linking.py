"""Entity linking: which KG entities does a question talk about?

1. Exact: the longest word n-grams of the question that equal an entity name (case-insensitive),
   non-overlapping, longest first.
2. Otherwise: vector search of the question's n-grams over the entity-name index; the closest
   (n-gram, entity) pair wins.

Given names (``topic_entities=``) are looked up exactly, then case-insensitively, then by vector
search, and reported as ``source="given"``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property

import numpy as np

from simgrag.errors import MatchError
from simgrag.index.directory import IndexDir
from simgrag.retrievers.base import RetrievedContext, TopicEntities

__all__ = ["EntityLinker", "TopicRetriever"]

MAX_NGRAM = 8


class EntityLinker:
    """Links question text to entity ids of one index directory."""

    def __init__(self, index: IndexDir, *, max_ngram: int = MAX_NGRAM) -> None:
        self.index = index
        self.max_ngram = max_ngram

    @cached_property
    def _lower(self) -> dict[str, int]:
        table: dict[str, int] = {}
        live = np.diff(np.asarray(self.index.store.indptr)) > 0  # retired entities (live updates) are left out
        for i, name in enumerate(self.index.store.entities):
            if live[i]:
                table.setdefault(name.lower(), i)
        return table

    def link(self, question: str, *, topic_entities: Sequence[str] | None = None,
             max_entities: int = 3) -> TopicEntities:
        """The topic entities of ``question`` (see module docstring)."""
        if topic_entities:
            ids, dists = zip(*(self._lookup(name) for name in topic_entities), strict=True)
            return self._result(ids, dists, "given")
        found = self._exact_spans(question, max_entities)
        if found:
            return self._result(tuple(found), (0.0,) * len(found), "linked")
        entity, dist = self._nearest_span(question)
        return self._result((entity,), (dist,), "linked")

    def _result(self, ids: Sequence[int], dists: Sequence[float], source: str) -> TopicEntities:
        names = tuple(self.index.store.entities[i] for i in ids)
        return TopicEntities(names, tuple(int(i) for i in ids), source, tuple(float(d) for d in dists))  # type: ignore[arg-type]

    def _lookup(self, name: str) -> tuple[int, float]:
        exact = self.index.store.entity_id(name)
        if exact is not None:
            return exact, 0.0
        folded = self._lower.get(name.lower())
        if folded is not None:
            return folded, 0.0
        return self._nearest([name])

    def _exact_spans(self, question: str, max_entities: int) -> list[int]:
        words = question.split()
        taken = [False] * len(words)
        found: list[int] = []
        for n in range(min(self.max_ngram, len(words)), 0, -1):
            for start in range(len(words) - n + 1):
                if any(taken[start:start + n]):
                    continue
                span = " ".join(words[start:start + n]).strip("?!.,;:\"'()[]")
                entity = self.index.store.entity_id(span)  # the exact spelling first ("Tom Hanks",
                if entity is None:                               # not the tag "tom hanks")
                    entity = self._lower.get(span.lower())
                if entity is None or (n == 1 and len(span) < 3):
                    continue
                found.append(entity)
                taken[start:start + n] = [True] * n
                if len(found) >= max_entities:
                    return found
        return found

    def _nearest_span(self, question: str) -> tuple[int, float]:
        words = question.split()
        spans = [" ".join(words[s:s + n]).strip("?!.,;:\"'()[]")
                 for n in range(1, min(self.max_ngram, len(words)) + 1) for s in range(len(words) - n + 1)]
        spans = [s for s in spans if s] or [question]
        return self._nearest(spans)

    def _nearest(self, texts: Sequence[str]) -> tuple[int, float]:
        vectors = self.index.embedder.encode(list(texts), show_progress=False)
        dists, ids = self.index.entity_index.search(np.asarray(vectors, dtype=np.float32), 1)
        best = int(np.argmin(np.where(ids[:, 0] >= 0, dists[:, 0], np.inf)))
        if ids[best, 0] < 0:
            raise MatchError("entity linking found no entity (is the index empty?)")
        return int(ids[best, 0]), float(dists[best, 0])


class TopicRetriever(ABC):
    """A retriever that starts from the question's topic entities (KAPING, paths, PCST, GSR, SubgraphRAG):
    :meth:`retrieve` links them (or takes the given ones) and hands them to :meth:`_retrieve_around`;
    the context's ``timings`` get ``link_s`` first and ``total_s`` last around the subclass's own stages."""

    name: str

    def __init__(self, index: IndexDir, linker: EntityLinker | None = None) -> None:
        self.index = index
        self.linker = linker or EntityLinker(index)

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        """The context around the question's topic entities (see the subclass)."""
        start = time.perf_counter()
        topic = self.linker.link(question, topic_entities=topic_entities)
        linked = time.perf_counter()
        context = self._retrieve_around(question, topic)
        timings = {"link_s": linked - start, **context.timings, "total_s": time.perf_counter() - start}
        return replace(context, timings=timings)

    @abstractmethod
    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        """The context of ``question`` around ``topic``, with the seconds of each own stage in ``timings``."""
