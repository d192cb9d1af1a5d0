"""A deterministic embedder with no model, for unit tests and quick demos.

:class:`HashEmbedder` hashes words and character trigrams into a signed bag-of-features vector and
L2-normalises it, so strings that share words or spelling land near each other ("directed by" is
nearer to "director" than to "release year") and the same text always gives the same vector, in
every process (it uses BLAKE2b, not Python's salted ``hash``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from simgrag.errors import EmbedderError

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


def _features(text: str) -> list[tuple[str, float]]:
    lowered = text.lower()
    words = _WORD.findall(lowered)
    feats = [(f"w:{word}", 1.0) for word in words]
    for word in words:
        padded = f"<{word}>"
        feats.extend((f"c:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2))
    return feats


class HashEmbedder:
    """Hashed word + trigram features, L2-normalised; ``name`` is ``hash-<dim>``.

    A text with no word characters maps to the zero vector.
    """

    def __init__(self, dim: int = 32) -> None:
        if dim <= 0:
            raise EmbedderError(f"dim must be positive; got {dim}.")
        self.dim = dim
        self.name = f"hash-{dim}"
        self.spec = f"hash:{dim}"  # how the registry recreates it (recorded in index manifests)
        self.calls = 0  # encode() calls, so tests can check caching upstream

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """A ``(len(texts), dim)`` float32 array of unit (or zero) rows."""
        if isinstance(texts, str):
            raise EmbedderError(
                "encode() takes a sequence of texts, not one string; wrap it: encode([text])."
            )
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text):
                column, sign = _bucket(feature, self.dim)
                out[row, column] += sign * weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
