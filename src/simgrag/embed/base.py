"""The Embedder protocol: texts in, float32 vectors out (one row per text)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "Respecifiable"]


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
