"""OKGQA's triplet and path retrieval (Sui et al., "Can Knowledge Graphs Make LLMs More Trustworthy?",
§4.1 and App. A.6), over the topic entities' neighbourhood.

*Triplet retrieval* keeps the ``k`` triples of the 2-hop neighbourhood whose verbalization
(``head relation tail``) is most cosine-similar to the question. OKGQA ranks a triple by the summed
prizes of its head, relation and tail; we rank it by the similarity of the whole verbalized triple,
which needs no prize thresholds and keeps the ranking continuous.

*Path retrieval* is a best-first search with a priority queue. It starts at the topic entities, and
pops the best path so far and extends it along each of the ``branch`` triples of its last entity most
similar to the question, never revisiting an entity (no cycles), up to ``max_length`` triples. A path
is scored by the cosine similarity of its verbalization (its triples joined by ``"; "``) to the
question. OKGQA scores a path by its summed node and edge prizes minus edge costs instead; similarity
of the whole path text plays the same role and, unlike a sum, does not favour long paths by itself.
The search stops after ``max_expansions`` pops; the ``k`` best paths found are returned, best first.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from simgrag.index.directory import IndexDir
from simgrag.kg.store import Triple
from simgrag.retrievers._graph import (
    DEFAULT_MAX_TRIPLES,
    TripleEncoder,
    cosine,
    top_k,
    verbalize_triple,
)
from simgrag.retrievers.base import RetrievedContext, TopicEntities
from simgrag.retrievers.kaping import KapingRetriever
from simgrag.retrievers.linking import EntityLinker, TopicRetriever

__all__ = ["PathRetriever", "ScoredPath", "TripletRetriever"]


class TripletRetriever(KapingRetriever):
    """OKGQA triplet retrieval: top-``k`` triples of the ``hops``-hop neighbourhood by similarity —
    KAPING's ranking over a wider neighbourhood (2 hops, 30 triples by default)."""

    name = "triplets"

    def __init__(self, index: IndexDir, k: int = 30, *, hops: int = 2, max_triples: int = DEFAULT_MAX_TRIPLES,
                 encoder: TripleEncoder | None = None, linker: EntityLinker | None = None) -> None:
        super().__init__(index, k, hops=hops, max_triples=max_triples, encoder=encoder, linker=linker)


@dataclass(frozen=True)
class ScoredPath:
    """A path from a topic entity: its triple ids in walking order, the entities it visits (the
    topic first) and the cosine similarity of its verbalization to the question."""

    score: float
    triple_ids: tuple[int, ...]
    nodes: tuple[int, ...]


class PathRetriever(TopicRetriever):
    """OKGQA path retrieval: best-first search of paths of at most ``max_length`` triples."""

    name = "paths"

    def __init__(self, index: IndexDir, k: int = 10, *, max_length: int = 3, branch: int = 8,
                 max_expansions: int = 64, max_fanout: int = 500, encoder: TripleEncoder | None = None,
                 linker: EntityLinker | None = None) -> None:
        super().__init__(index, linker)
        self.k = k
        self.max_length = max_length
        self.branch = branch
        self.max_expansions = max_expansions
        self.max_fanout = max_fanout
        self.encoder = encoder or TripleEncoder(index)

    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        """The ``k`` best paths; ``triples`` is their union in path order (see the module docstring)."""
        start = time.perf_counter()
        found = self.search(question, topic.ids)
        store = self.index.store
        paths = tuple(tuple(store.triple(t) for t in p.triple_ids) for p in found)
        triples, scores = _union_in_path_order(paths, [p.score for p in found])
        return RetrievedContext(
            retriever=self.name, question=question, triples=triples, topic=topic, paths=paths,
            scores=scores, timings={"search_s": time.perf_counter() - start},
            info={"path_scores": [p.score for p in found]},
        )

    def search(self, question: str, seeds: Sequence[int]) -> list[ScoredPath]:
        """The ``k`` best distinct paths from ``seeds``, best first."""
        best: dict[frozenset[int], ScoredPath] = {}
        for path in _best_first(self, self.encoder.encode_question(question), seeds):
            key = frozenset(path.triple_ids)
            if key not in best or best[key].score < path.score:
                best[key] = path
        ranked = sorted(best.values(), key=lambda p: (-p.score, len(p.triple_ids), p.triple_ids))
        return ranked[:self.k]

    def _extensions(self, question_vector: np.ndarray, path: ScoredPath) -> list[ScoredPath]:
        """``path`` extended by the ``branch`` triples of its last entity most similar to the question."""
        store = self.index.store
        nbrs, _, tids = store.neighbors(path.nodes[-1])
        visited = set(path.nodes)
        options = [(int(n), int(t)) for n, t in zip(nbrs[:self.max_fanout], tids[:self.max_fanout], strict=True)
                   if int(n) not in visited]
        if not options:
            return []
        triple_ids = np.array([t for _, t in options], dtype=np.int64)
        keep = top_k(cosine(question_vector, self.encoder.encode_triples(triple_ids)), self.branch)
        chosen = [options[i] for i in keep]
        texts = [_path_text(store.triple, (*path.triple_ids, t)) for _, t in chosen]
        scores = cosine(question_vector, self.encoder.encode_texts(texts))
        return [ScoredPath(float(s), (*path.triple_ids, t), (*path.nodes, n))
                for (n, t), s in zip(chosen, scores, strict=True)]


def _best_first(retriever: PathRetriever, question_vector: np.ndarray, seeds: Sequence[int]) -> Iterator[ScoredPath]:
    """Every path the search scores, as it scores them (the algorithm, once, as a generator)."""
    heap: list[tuple[float, int, ScoredPath]] = []
    counter = 0
    for seed in dict.fromkeys(int(s) for s in seeds):
        for path in retriever._extensions(question_vector, ScoredPath(0.0, (), (seed,))):
            yield path
            heapq.heappush(heap, (-path.score, counter, path))
            counter += 1
    pops = 0
    while heap and pops < retriever.max_expansions:
        _, _, path = heapq.heappop(heap)
        pops += 1
        if len(path.triple_ids) >= retriever.max_length:
            continue
        for longer in retriever._extensions(question_vector, path):
            yield longer
            heapq.heappush(heap, (-longer.score, counter, longer))
            counter += 1


def _path_text(triple_of: Callable[[int], Triple], triple_ids: Sequence[int]) -> str:
    """``Titanic directed by James Cameron; Avatar directed by James Cameron``."""
    return "; ".join(verbalize_triple(triple_of(t)) for t in triple_ids)


def _union_in_path_order(paths: Sequence[Sequence[Triple]],
                         scores: Sequence[float]) -> tuple[tuple[Triple, ...], tuple[float, ...]]:
    """Each triple once, in the order the paths list them; its score is its best path's."""
    seen: dict[Triple, float] = {}
    for path, score in zip(paths, scores, strict=True):
        for triple in path:
            seen.setdefault(triple, score)
    return tuple(seen), tuple(seen.values())
