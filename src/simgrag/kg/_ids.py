"""What the KG readers share when they turn what they read into a store: the ``array('i')`` id
buffers as numpy, terms without a triple left out (ids renumbered densely), unique readable names."""

from __future__ import annotations

import logging
from array import array

import numpy as np

__all__ = ["drop_unlinked", "id_array", "unique_names"]

logger = logging.getLogger(__name__)


def id_array(buffer: array) -> np.ndarray:
    """An ``array('i')`` of ids as an int32 numpy array."""
    if not len(buffer):
        return np.zeros(0, dtype=np.int32)
    return np.frombuffer(buffer, dtype=np.intc).astype(np.int32, copy=False)


def drop_unlinked(
    heads: np.ndarray, tails: np.ndarray, pairs: np.ndarray, n_terms: int, what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``heads``, ``tails`` and the ``(entity, type)`` ``pairs`` with the terms that are in no triple
    left out and the others renumbered densely, and the mask of the terms kept. ``what`` names the
    left-out terms in the log line (``"… have types but no triple; left out"``)."""
    used = np.zeros(n_terms, dtype=bool)
    used[heads] = True
    used[tails] = True
    if not used.all():
        logger.info("%d %s but no triple; left out", int((~used).sum()), what)
        new_id = (np.cumsum(used) - 1).astype(np.int32)
        heads, tails = new_id[heads], new_id[tails]
        pairs = pairs[used[pairs[:, 0]]]
        pairs[:, 0] = new_id[pairs[:, 0]]
    return heads, tails, pairs, used


def unique_names(preferred: list[str], fallbacks: list[str]) -> list[str]:
    """``preferred`` made unique: the first keeps a name, later ones take their fallback, then ``(n)``."""
    taken: set[str] = set()
    names: list[str] = []
    clashes = 0
    for name, fallback in zip(preferred, fallbacks, strict=True):
        if name in taken:
            clashes += 1
            name, n = fallback, 2
            while name in taken:
                name, n = f"{fallback} ({n})", n + 1
        taken.add(name)
        names.append(name)
    if clashes:
        logger.info("%d terms share a readable name with another; they are named by their full IRI or key", clashes)
    return names
