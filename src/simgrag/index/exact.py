"""Exact nearest neighbours with numpy: the reference every other index is tested against."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simgrag.errors import IndexDirError, VectorIndexError
from simgrag.fileio import write_npy_atomic
from simgrag.index._checks import as_matrix, check_k, check_searchable, pad_results
from simgrag.index.manifest import open_index_file, save_index_manifest

__all__ = ["ExactIndex"]

_VECTORS_FILE = "vectors.npy"
# Cap the (queries x vectors) distance block at about 64 MiB of float32.
_BLOCK_ELEMENTS = 1 << 24


class ExactIndex:
    """Brute-force L2 search over a float32 matrix.

    Candidates come from ``||q||² + ||x||² − 2 q·x`` (clipped at 0), computed in blocks of queries so
    memory stays bounded. Top-k is exact: ``argpartition``, then a stable sort; the winners' distances
    are then recomputed directly as ``||q − x||`` (the expansion loses precision near 0) and equal
    distances are ordered by the lower id, so results are deterministic.
    """

    kind = "exact"

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise VectorIndexError(f"dim must be positive; got {dim}.")
        self.dim = int(dim)
        self._vectors = np.empty((0, self.dim), dtype=np.float32)
        self._sq_norms = np.empty(0, dtype=np.float32)

    @property
    def ntotal(self) -> int:
        return int(self._vectors.shape[0])

    @property
    def params(self) -> dict[str, object]:
        return {}

    def add(self, vectors: np.ndarray) -> None:
        """Append vectors; they get the next ids in order."""
        block = as_matrix(vectors, self.dim, what="vectors")
        self._vectors = np.concatenate([self._vectors, block]) if self.ntotal else block.copy()
        self._sq_norms = np.concatenate([self._sq_norms, np.einsum("ij,ij->i", block, block)])

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact ``k`` nearest neighbours of each query: ``(distances, ids)``, padded past ``ntotal``."""
        k = check_k(k)
        check_searchable(self.ntotal, self.kind)
        q = as_matrix(queries, self.dim, what="queries")
        kk = min(k, self.ntotal)
        rows = max(1, _BLOCK_ELEMENTS // max(self.ntotal, kk * self.dim))
        dist_blocks, id_blocks = [], []
        for start in range(0, q.shape[0], rows):
            d, i = self._search_block(q[start : start + rows], kk)
            dist_blocks.append(d)
            id_blocks.append(i)
        distances = np.concatenate(dist_blocks) if dist_blocks else np.empty((0, kk), np.float32)
        ids = np.concatenate(id_blocks) if id_blocks else np.empty((0, kk), np.int64)
        return pad_results(distances, ids, k)

    def _search_block(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sq = np.einsum("ij,ij->i", q, q)[:, None] + self._sq_norms[None, :] - 2.0 * (q @ self._vectors.T)
        np.maximum(sq, 0.0, out=sq)
        ids = np.stack([_top_k_row(row, k) for row in sq]) if len(sq) else np.empty((0, k), np.int64)
        # The expansion loses precision for near neighbours (cancellation); recompute the k winners directly.
        exact = np.linalg.norm(q[:, None, :] - self._vectors[ids], axis=2)
        order = np.lexsort((ids, exact), axis=-1)
        distances = np.take_along_axis(exact, order, axis=1).astype(np.float32)
        return distances, np.take_along_axis(ids, order, axis=1)

    def vectors(self) -> np.ndarray:
        """A read-only view of the stored matrix (row i has id i)."""
        view = self._vectors.view()
        view.flags.writeable = False
        return view

    def save(self, directory: Path) -> None:
        """Write ``vectors.npy`` and ``index.json`` into ``directory`` (each atomically)."""
        directory = Path(directory)
        write_npy_atomic(directory / _VECTORS_FILE, self._vectors)
        save_index_manifest(directory, self, "exact index")

    @classmethod
    def load(cls, directory: Path) -> ExactIndex:
        """Read an index written by :meth:`save`."""
        manifest, path = open_index_file(directory, cls.kind, _VECTORS_FILE)
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise IndexDirError(f"Cannot read {path} ({exc}); rebuild the index.") from exc
        if vectors.shape != (manifest.ntotal, manifest.dim):
            raise IndexDirError(
                f"{path} holds shape {vectors.shape}, but index.json says "
                f"({manifest.ntotal}, {manifest.dim}); the directory is inconsistent, rebuild the index."
            )
        index = cls(manifest.dim)
        if manifest.ntotal:
            index.add(vectors)
        return index


def _top_k_row(sq: np.ndarray, k: int) -> np.ndarray:
    """Ids of the ``k`` smallest entries, ascending, equal values by lower id."""
    n = sq.shape[0]
    if k >= n:
        return np.argsort(sq, kind="stable")
    part = np.argpartition(sq, k - 1)[:k]
    threshold = sq[part].max()
    candidates = np.flatnonzero(sq <= threshold)  # ascending ids; includes every tie at the boundary
    order = np.argsort(sq[candidates], kind="stable")[:k]
    return candidates[order].astype(np.int64)
