"""How many entities each class gets, and which integer ids they have.

Class sizes are heavy-tailed: a top-level class's share (``%S`` in ``types.txt``) is split over
its subtree with log-normal weights (times ``%w`` where a subclass has one), every class gets at
least one entity and capped classes (``~N``: countries, continents) at most N. Ids follow the
classes in pre-order, each class's own entities first, so *every subtree is one contiguous id
range*: "an entity of class C or a subclass" is ``start <= id < end``, and the class of an id is
one binary search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simgrag.errors import ConfigError
from simgrag.eval.synthetic_dbpedia.schema import Schema

__all__ = ["Layout", "plan_layout"]

_SIZE_SIGMA = 1.0  # spread of the log-normal class weights within a top-level class
_INTERNAL_FACTOR = 0.5  # an internal class keeps fewer entities of its own than a leaf


@dataclass(frozen=True)
class Layout:
    """Per class: ``own_start``/``own_count`` (its own entities) and ``sub_end`` (end of its subtree)."""

    own_start: np.ndarray
    own_count: np.ndarray
    sub_end: np.ndarray

    @property
    def num_entities(self) -> int:
        return int(self.own_start[-1] + self.own_count[-1])

    def class_of(self, ids: np.ndarray) -> np.ndarray:
        """Most specific class of each entity id."""
        return (np.searchsorted(self.own_start, ids, side="right") - 1).astype(np.int32)

    def subtree(self, c: int) -> tuple[int, int]:
        """``(start, end)``: the ids of class ``c`` and all its subclasses."""
        return int(self.own_start[c]), int(self.sub_end[c])


def _weights(schema: Schema, rng: np.random.Generator) -> np.ndarray:
    classes = schema.classes
    top = np.array([schema.ancestors(c)[-1] for c in range(len(classes))])
    raw = rng.lognormal(0.0, _SIZE_SIGMA, size=len(classes))
    has_child = np.zeros(len(classes), dtype=bool)
    for c in classes:
        if c.parent >= 0:
            has_child[c.parent] = True
    raw[has_child] *= _INTERNAL_FACTOR
    raw *= np.array([c.share if c.parent >= 0 else 1.0 for c in classes])  # `%w` below the top: a hint
    per_top = np.bincount(top, weights=raw, minlength=len(classes))
    share = np.array([classes[t].share for t in top])
    weights = share * raw / per_top[top]
    return np.asarray(weights / weights.sum())


def _sizes(weights: np.ndarray, caps: np.ndarray, n: int) -> np.ndarray:
    counts = np.minimum(np.maximum(1, np.floor(weights * n)), caps).astype(np.int64)
    for _ in range(64):
        diff = n - int(counts.sum())
        if diff == 0:
            return counts
        if diff > 0:
            room = (caps - counts).clip(min=0)
            if not room.any():
                break
            share = np.where(room > 0, weights, 0.0)
            add = np.minimum(np.floor(share / share.sum() * diff), room).astype(np.int64)
            if add.sum() == 0:  # the last few: one each to the heaviest classes with room
                order = np.argsort(-share, kind="stable")[: diff]
                add[order] = np.minimum(1, room[order])
            counts += add
        else:
            big = int(np.argmax(counts))
            counts[big] -= min(-diff, int(counts[big]) - 1)
    raise ConfigError(f"cannot spread {n:,} entities over the classes (caps too tight); ask for more types")


def plan_layout(schema: Schema, n_entities: int, seed: int) -> Layout:
    """Class sizes summing to ``n_entities`` (deterministic for ``seed``) and their id ranges."""
    n_classes = schema.num_classes
    if n_entities < n_classes:
        raise ConfigError(f"{n_entities:,} entities cannot fill {n_classes} types (each needs one); "
                          "ask for more entities or fewer types.")
    rng = np.random.default_rng([seed, 1])
    caps = np.array([c.cap if c.cap is not None else n_entities for c in schema.classes], dtype=np.int64)
    counts = _sizes(_weights(schema, rng), caps, n_entities)
    own_start = np.zeros(n_classes, dtype=np.int64)
    np.cumsum(counts[:-1], out=own_start[1:])
    sub_end = own_start + counts
    for c in range(n_classes - 1, -1, -1):
        parent = schema.classes[c].parent
        if parent >= 0:
            sub_end[parent] = max(sub_end[parent], sub_end[c])
    return Layout(own_start, counts, sub_end)
