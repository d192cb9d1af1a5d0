"""Input checks and result shaping shared by every vector index (one place for the messages)."""

from __future__ import annotations

import numpy as np

from simgrag.errors import VectorIndexError

__all__ = ["as_matrix", "check_k", "check_searchable", "pad_results"]


def as_matrix(vectors: np.ndarray, dim: int, *, what: str) -> np.ndarray:
    """Return ``vectors`` as a C-contiguous float32 ``(n, dim)`` array; a single vector becomes one row."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2:
        raise VectorIndexError(f"{what} must be a 2-D array (n, {dim}); got shape {array.shape}.")
    if array.shape[1] != dim:
        raise VectorIndexError(
            f"Dimension mismatch: {what} have {array.shape[1]} columns but the index holds {dim}-d vectors. "
            "Was the index built with another embedder?"
        )
    if not np.isfinite(array).all():
        raise VectorIndexError(f"{what} contain NaN or infinite values; check the embedder output.")
    return np.ascontiguousarray(array)


def check_k(k: int) -> int:
    """``k`` must be a positive integer."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise VectorIndexError(f"k must be a positive integer; got {k!r}.")
    return int(k)


def check_searchable(ntotal: int, kind: str) -> None:
    """Searching an empty index is a mistake upstream (nothing was added), so say so."""
    if ntotal == 0:
        raise VectorIndexError(f"The {kind} index is empty: add vectors before searching.")


def pad_results(distances: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Widen ``(n, m)`` results to ``(n, k)`` with distance ``inf`` and id ``-1``; fix dtypes."""
    n, m = ids.shape[0], min(ids.shape[1], k)
    out_d = np.full((n, k), np.inf, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    out_d[:, :m] = distances[:, :m]
    out_i[:, :m] = ids[:, :m]
    out_d[out_i < 0] = np.inf
    return out_d, out_i
