"""What the similarity-based retrievers share: verbalized triples, their cached embeddings, cosine
ranking and the bounded k-hop neighbourhood of the topic entities.

A triple is verbalized as ``head relation tail`` with the relation made readable
(``directed_by`` → ``directed by``, :func:`~simgrag.index.directory.relation_text`), the text KAPING
(Baek et al., 2023, §3) and OKGQA (§4.1) embed. Triple embeddings are computed on demand and kept in
an LRU cache keyed by triple id, since the same neighbourhoods recur across the questions of a
benchmark (G-Retriever and OKGQA pre-compute them for the whole graph instead).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.store import KGStore, Triple

__all__ = [
    "Neighbourhood",
    "TripleEncoder",
    "cosine",
    "k_hop",
    "rank_triples",
    "top_k",
    "verbalize_triple",
]

DEFAULT_MAX_TRIPLES = 2000
_EPS = 1e-12


def verbalize_triple(triple: Triple) -> str:
    """``Titanic directed by James Cameron``: head, readable relation, tail."""
    return f"{triple.head} {relation_text(triple.relation)} {triple.tail}"


def cosine(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of one vector to every row of ``matrix`` (zero rows score 0)."""
    if len(matrix) == 0:
        return np.zeros(0, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32).ravel()
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * max(float(np.linalg.norm(q)), _EPS)
    return (m @ q) / np.maximum(norms, _EPS)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; ties keep the earlier index."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return order[:max(0, k)]


@dataclass(frozen=True)
class Neighbourhood:
    """Triples within ``hops`` of the seeds, in discovery order, and the entities they touch
    (seeds first). ``truncated``: the triple cap was reached."""

    triple_ids: np.ndarray
    nodes: np.ndarray
    truncated: bool


def k_hop(store: KGStore, seeds: Sequence[int], *, hops: int, max_triples: int = DEFAULT_MAX_TRIPLES) -> Neighbourhood:
    """Breadth-first ``hops``-hop neighbourhood of ``seeds``, at most ``max_triples`` triples.

    Within one hop the frontier is expanded lowest degree first, so a hub (a genre, a language) only
    fills what room is left instead of crowding out every other node's triples.
    """
    triples: dict[int, None] = {}
    nodes: dict[int, None] = dict.fromkeys(int(s) for s in seeds)
    frontier = list(nodes)
    truncated = False
    for _ in range(hops):
        following: list[int] = []
        for node in sorted(frontier, key=store.degree):
            nbrs, _, tids = store.neighbors(node)
            for nbr, tid in zip(nbrs.tolist(), tids.tolist(), strict=True):
                if tid in triples:
                    continue
                if len(triples) >= max_triples:
                    truncated = True
                    break
                triples[tid] = None
                if nbr not in nodes:
                    nodes[nbr] = None
                    following.append(nbr)
            if truncated:
                break
        if truncated:
            break
        frontier = following
    return Neighbourhood(np.fromiter(triples, dtype=np.int64, count=len(triples)),
                         np.fromiter(nodes, dtype=np.int64, count=len(nodes)), truncated)


class TripleEncoder:
    """Embeds questions, texts and (verbalized, cached) triples with an index's embedder."""

    def __init__(self, index: IndexDir, *, cache_size: int = 50_000) -> None:
        self.index = index
        self.cache_size = cache_size
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()

    @property
    def dim(self) -> int:
        return int(self.index.embedder.dim)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), dim)`` float32 array."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.index.embedder.encode(list(texts), show_progress=False), dtype=np.float32)

    def encode_question(self, question: str) -> np.ndarray:
        return self.encode_texts([question])[0]

    def encode_triples(self, triple_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Embeddings of the verbalized triples ``triple_ids`` (rows in the same order)."""
        ids = [int(t) for t in triple_ids]
        missing = list(dict.fromkeys(t for t in ids if t not in self._cache))
        if missing:
            vectors = self.encode_texts([verbalize_triple(self.index.store.triple(t)) for t in missing])
            for tid, vec in zip(missing, vectors, strict=True):
                self._cache[tid] = vec
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for row, tid in enumerate(ids):
            out[row] = self._cache[tid]
            self._cache.move_to_end(tid)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out


def rank_triples(encoder: TripleEncoder, question_vector: np.ndarray, triple_ids: np.ndarray,
                 k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` triples of ``triple_ids`` most similar to the question: (triple ids, cosines), best first."""
    if len(triple_ids) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    sims = cosine(question_vector, encoder.encode_triples(triple_ids))
    best = top_k(sims, k)
    return np.asarray(triple_ids)[best], sims[best]
