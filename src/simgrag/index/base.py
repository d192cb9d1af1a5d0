"""The VectorIndex protocol: nearest neighbours by L2 distance (the paper's metric), and the optional
capabilities some implementations add (each a small protocol, checked with ``isinstance``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["LocalServerIndex", "StoredVectors", "VectorIndex", "VectorsAttachable"]


@runtime_checkable
class VectorIndex(Protocol):
    """Vectors get ids 0, 1, 2, … in insertion order.

    ``search`` returns ``(distances, ids)``, both shaped ``(n_queries, k)``: *plain* L2 distances
    (not squared), float32, ascending per row; ids int64. Rows with fewer than ``k`` hits are padded
    with distance ``inf`` and id ``-1``. ``params`` are the build and search settings recorded in
    the index directory's manifest.
    """

    kind: str
    dim: int

    @property
    def ntotal(self) -> int: ...

    @property
    def params(self) -> Mapping[str, Any]: ...

    def add(self, vectors: np.ndarray) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def save(self, directory: Path) -> None:
        """Persist into ``directory`` (exists); files are written atomically."""
        ...


@runtime_checkable
class VectorsAttachable(Protocol):
    """An index that re-ranks from a float vectors file it is handed instead of copying the vectors
    (compressed kinds: IVF-PQ)."""

    def attach_vectors(self, vectors: np.ndarray, path: Path) -> None: ...


@runtime_checkable
class StoredVectors(Protocol):
    """An index that can give back its vectors by row from memory (``holds_vectors``), e.g. IVF-PQ's
    8-bit re-ranking copy: cheaper than reading rows of the vectors file at random."""

    @property
    def holds_vectors(self) -> bool: ...

    def vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` (ascending ids)."""
        ...


@runtime_checkable
class LocalServerIndex(Protocol):
    """An index backed by an embedded server that locks its files (Milvus Lite) until released."""

    def release_local_server(self) -> None: ...
