"""The Embedder protocol: texts in, float32 vectors out (one row per text)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["BulkEncoder", "Embedder", "Respecifiable", "encode_bulk"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Distances between vectors are L2 (SimGRAG eq. 1–2).

    ``name`` identifies the model in index manifests (an index built with one embedder refuses to
    load with another); ``dim`` is the vector width.
    """

    name: str
    dim: int

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array. ``show_progress=None``: a bar at INFO level
        (see :mod:`simgrag.progress`)."""
        ...


@runtime_checkable
class Respecifiable(Protocol):
    """An embedder whose registry spec differs from its ``name`` (``hash:64`` for ``hash-64``); the spec
    is recorded in index manifests so the index reopens with the same embedder."""

    spec: str


@runtime_checkable
class BulkEncoder(Protocol):
    """An embedder with a faster path for many texts at once (index builds), e.g. bfloat16 matrix
    products on a CPU that has them. Its vectors may differ from :meth:`Embedder.encode`'s by a little
    (measured for the bundled MiniLM: cosine >= 0.9999, L2 <= 0.012), so it is meant for entity names
    only: exact names are matched by string at query time (distance 0), relation texts keep ``encode``."""

    def encode_bulk(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Like :meth:`Embedder.encode`, possibly in lower precision."""
        ...


def encode_bulk(embedder: Embedder, texts: Sequence[str], *, batch_size: int = 64,
                show_progress: bool | None = None) -> np.ndarray:
    """Entity names for an index: the embedder's bulk path when it has one, else ``encode``."""
    if isinstance(embedder, BulkEncoder):
        return embedder.encode_bulk(texts, batch_size=batch_size, show_progress=show_progress)
    return embedder.encode(texts, batch_size=batch_size, show_progress=show_progress)
