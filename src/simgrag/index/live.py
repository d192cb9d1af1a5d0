"""The entity vector index as seen by searches: entities without triples left out.

A live update (:mod:`simgrag.kg.delta`) retires an entity that loses its last triple but keeps its
row in the vector index (HNSW graphs cannot delete a vector). :class:`LiveEntityIndex` wraps the
index and skips those rows: it asks the index for more neighbours than wanted, drops retired ids and
asks again with a wider net (×4) while a row is still short, so the top-k it returns are the top-k
live entities whenever the wrapped index is exact. ``ntotal`` counts live entities, so
``min(k_n, ntotal)`` is what a from-scratch build of the same triples would use.

:func:`~simgrag.index.directory.open_index_dir` wraps the entity index only when the store has such
entities; a fresh build never does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import VectorIndexError
from simgrag.index._checks import check_k, pad_results
from simgrag.index.base import VectorIndex

__all__ = ["LiveEntityIndex"]


class LiveEntityIndex:
    """``inner`` without the ids in ``retired`` (module docstring); read-only."""

    def __init__(self, inner: VectorIndex, retired: np.ndarray) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.dim = inner.dim
        self._dead = np.zeros(inner.ntotal, dtype=bool)
        self._dead[np.asarray(retired, dtype=np.int64)] = True
        self.retired = int(self._dead.sum())

    @property
    def ntotal(self) -> int:
        return int(self.inner.ntotal) - self.retired

    @property
    def params(self) -> Mapping[str, Any]:
        return self.inner.params

    def __getattr__(self, name: str) -> Any:  # tune(), close(), vectors() … of the wrapped index
        if name == "inner":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def add(self, vectors: np.ndarray) -> None:
        raise VectorIndexError("this entity index is a read-only view without retired entities; "
                               "update the index directory with `simgrag update` instead")

    def save(self, directory: Path) -> None:
        raise VectorIndexError("this entity index is a read-only view without retired entities; save the "
                               "wrapped index (.inner) instead")

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest live entities: ``(distances, ids)``, padded with inf / -1."""
        k = check_k(k)
        total = int(self.inner.ntotal)
        ask = min(total, k + min(self.retired, k))
        while True:
            dists, ids = self.inner.search(queries, ask)
            found = ids >= 0
            live = found & ~self._dead[np.where(found, ids, 0)]
            short = (live.sum(axis=1) < k) & found.all(axis=1)
            if ask >= total or not bool(short.any()):
                break
            ask = min(total, ask * 4)
        out_d = np.full((len(ids), k), np.inf, dtype=np.float32)
        out_i = np.full((len(ids), k), -1, dtype=np.int64)
        for row in range(len(ids)):
            keep = np.flatnonzero(live[row])[:k]
            out_d[row, : len(keep)] = dists[row, keep]
            out_i[row, : len(keep)] = ids[row, keep]
        return pad_results(out_d, out_i, k)
