"""The VectorIndex protocol: nearest neighbours by L2 distance (the paper's metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["VectorIndex"]


@runtime_checkable
class VectorIndex(Protocol):
    """Vectors get ids 0, 1, 2, … in insertion order.

    ``search`` returns ``(distances, ids)``, both shaped ``(n_queries, k)``: *plain* L2 distances
    (not squared), float32, ascending per row; ids int64. Rows with fewer than ``k`` hits are padded
    with distance ``inf`` and id ``-1``.
    """

    kind: str
    dim: int

    @property
    def ntotal(self) -> int: ...

    def add(self, vectors: np.ndarray) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def save(self, directory: Path) -> None:
        """Persist into ``directory`` (exists); files are written atomically."""
        ...
