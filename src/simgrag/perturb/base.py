"""What the perturbation methods share: the edge budget, the result and the triple-scorer protocol.

OKGQA-P (Sui et al., 2025, §3.2) perturbs a KG 𝒢 = (𝒱, ℰ, 𝒯) into 𝒢′ = (𝒱, ℰ′, 𝒯′): the entity set
𝒱 is kept, edges change, and "the perturbation level [is] the percentage of KG edges being perturbed".
Here a perturbation of level ℓ on a KG with n (unique) triples changes exactly
:func:`perturbed_count` ``(ℓ, n)`` = ⌊ℓ·n + ½⌋ edges (round half up, not Python's round half to even).

A *changed edge* is one whose triple is gone from 𝒢′: deleted (``ed``) or replaced by a triple that is
in neither 𝒢 nor among the triples the perturbation made before. So |𝒯 \\ 𝒯′| is always the number of
changed edges, and no perturbation creates a duplicate triple (which a store would silently merge).

A :class:`Perturbation` keeps the original store's entity and relation tables, ids unchanged: every
entity stays in the entity table even when it loses all its edges (``ed``, and the old tails of
``er``); :meth:`Perturbation.isolated_entities` lists those.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simgrag.errors import ConfigError, KGError
from simgrag.kg.store import KGStore, Triple

__all__ = ["DELETED", "Change", "Perturbation", "TripleScorer", "TripleSet", "perturbed_count"]

#: the ``new_triples`` row of a deleted edge
DELETED = (-1, -1, -1)


@runtime_checkable
class TripleScorer(Protocol):
    """s_𝒢(h, r, t) ∈ [0, 1]: how likely the triple is to exist in the KG the scorer was trained on.

    Ids are those of that KG's store. Relation replacement (``rr``) picks the relation with the
    lowest score; ATS is the mean score of a KG's triples (OKGQA App. A.7).
    """

    def score(self, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """One float per triple, in [0, 1]."""
        ...


def perturbed_count(level: float, num_edges: int) -> int:
    """How many of ``num_edges`` edges a perturbation of ``level`` changes: ⌊level·n + ½⌋.

    ``level`` is a fraction in [0, 1]; the product is first rounded to 9 decimals so that e.g.
    0.35 × 10 gives 4 despite floating point.
    """
    if not 0.0 <= level <= 1.0 or math.isnan(level):
        raise ConfigError(f"perturbation level {level} is not a fraction of the edges; use a value in [0, 1].")
    return min(num_edges, math.floor(round(level * num_edges, 9) + 0.5))


class TripleSet:
    """The original triples (sorted int64 keys) plus the triples a perturbation has created so far.

    A triple ``(h, r, t)`` is the key ``(h·|R| + r)·|E| + t``.
    """

    def __init__(self, store: KGStore) -> None:
        self.num_entities = store.num_entities
        self.num_relations = store.num_relations
        if self.num_entities**2 * max(self.num_relations, 1) >= 2**62:
            raise KGError(f"the KG is too large to key its triples in 64 bits ({self.num_entities:,} entities, "
                          f"{self.num_relations:,} relations)")
        self.original = np.sort(self.keys(store.heads, store.rels, store.tails))
        self.created: set[int] = set()

    def keys(self, heads: Any, rels: Any, tails: Any) -> np.ndarray:
        """Keys of id arrays (broadcast)."""
        h = np.asarray(heads, dtype=np.int64)
        r = np.asarray(rels, dtype=np.int64)
        t = np.asarray(tails, dtype=np.int64)
        return (h * self.num_relations + r) * self.num_entities + t

    def in_original(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask: which keys are triples of the original KG."""
        if len(self.original) == 0:
            return np.zeros(np.shape(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(self.original, keys), len(self.original) - 1)
        return np.asarray(self.original[pos] == keys)

    def taken(self, key: int) -> bool:
        """Whether ``key`` is in the original KG or was created already."""
        return key in self.created or bool(self.in_original(np.array([key]))[0])

    def claim(self, key: int) -> bool:
        """Record ``key`` as created, unless it is taken; returns whether it was free."""
        if self.taken(key):
            return False
        self.created.add(key)
        return True


@dataclass(frozen=True)
class Change:
    """One changed edge: ``edge`` is its row in the original store, ``new`` is ``None`` when deleted."""

    method: str
    edge: int
    old: Triple
    new: Triple | None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "edge": self.edge, "old": list(self.old.as_tuple()),
                "new": None if self.new is None else list(self.new.as_tuple())}


@dataclass(frozen=True, eq=False)
class Perturbation:
    """A perturbed KG 𝒢′ as the original store plus its changes.

    ``changed`` holds the original rows of the changed edges in the order they were perturbed and
    ``new_triples`` their new ``(head, relation, tail)`` ids (:data:`DELETED` rows for ``ed``). The
    triples of 𝒢′ keep the original store's order, changed rows replaced, deleted rows dropped.
    """

    method: str
    level: float
    seed: int
    original: KGStore
    changed: np.ndarray
    new_triples: np.ndarray

    @property
    def num_changed(self) -> int:
        return len(self.changed)

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = self.original
        heads, rels, tails = (np.array(a, dtype=np.int32) for a in (g.heads, g.rels, g.tails))
        new = self.new_triples
        keep = np.ones(len(heads), dtype=bool)
        deleted = new[:, 0] < 0 if len(new) else np.zeros(0, dtype=bool)
        keep[self.changed[deleted]] = False
        rows = self.changed[~deleted]
        heads[rows], rels[rows], tails[rows] = new[~deleted, 0], new[~deleted, 1], new[~deleted, 2]
        return heads[keep], rels[keep], tails[keep]

    @property
    def heads(self) -> np.ndarray:
        return self._arrays[0]

    @property
    def rels(self) -> np.ndarray:
        return self._arrays[1]

    @property
    def tails(self) -> np.ndarray:
        return self._arrays[2]

    @property
    def num_triples(self) -> int:
        return len(self._arrays[0])

    def to_store(self) -> KGStore:
        """𝒢′ as a store over the *original* entity and relation tables (ids unchanged).

        Raises :class:`~simgrag.errors.EmptyKGError` when every edge was deleted.
        """
        g = self.original
        return KGStore.from_ids(g.entities, g.relations, self.heads, self.rels, self.tails)

    def triples(self) -> Iterator[Triple]:
        """The triples of 𝒢′ as names."""
        ent, rel = self.original.entities, self.original.relations
        for h, r, t in zip(self.heads.tolist(), self.rels.tolist(), self.tails.tolist(), strict=True):
            yield Triple(ent[h], rel[r], ent[t])

    def changes(self) -> Iterator[Change]:
        """One :class:`Change` per changed edge, in the order the edges were perturbed."""
        ent, rel = self.original.entities, self.original.relations
        for row, (h, r, t) in zip(self.changed.tolist(), self.new_triples.tolist(), strict=True):
            new = None if h < 0 else Triple(ent[h], rel[r], ent[t])
            yield Change(self.method, row, self.original.triple(row), new)

    def isolated_entities(self) -> np.ndarray:
        """Ids of entities with no edge left in 𝒢′ (they stay in the entity table)."""
        n = self.original.num_entities
        touched = np.zeros(n, dtype=bool)
        touched[self.heads] = True
        touched[self.tails] = True
        return np.flatnonzero(~touched).astype(np.int32)

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "level": self.level, "seed": self.seed,
                "edges": self.original.num_triples, "changed": self.num_changed,
                "triples_after": self.num_triples, "isolated_entities": len(self.isolated_entities())}
