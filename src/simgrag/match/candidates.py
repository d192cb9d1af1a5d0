"""Candidate tables: which KG entities/relations each pattern node/edge may match, at what distance.

This is the *filtering* step of SimGRAG §5.1: a known pattern node keeps its top-k_n nearest
entities, a known relation its top-k_r nearest relations; an unknown node matches every entity at
distance 0 (or, when typed and the KG has types, the entities of its top-k_t types), an unknown
relation every relation at distance 0 (§4.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simgrag.errors import MatchError

__all__ = ["CandidateTable", "NodeCandidates"]

_DENSE_FACTOR = 16  # groups holding more than 1/16 of the entities go through a dense array


@dataclass(frozen=True)
class NodeCandidates:
    """Entities a pattern node may map to. ``any_entity``: every entity, at distance 0. ``prior``: the ids are every
    entity (or all but a few), some at a distance: an unknown node's kind prior (:mod:`simgrag.match.kinds`), which
    narrows the search no more than ``any_entity`` does."""

    any_entity: bool
    ids: np.ndarray  # int64, sorted ascending, unique
    dists: np.ndarray  # float64, aligned with ids
    prior: bool = False

    @property
    def unanchored(self) -> bool:
        """Whether this node alone does not narrow the search (any entity, or a kind prior over every entity)."""
        return self.any_entity or self.prior

    @classmethod
    def anything(cls) -> NodeCandidates:
        return cls(True, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

    @classmethod
    def from_pairs(cls, ids: Sequence[int] | np.ndarray, dists: Sequence[float] | np.ndarray) -> NodeCandidates:
        """From (entity id, distance) pairs; a repeated id keeps its smallest distance."""
        id_arr = np.asarray(ids, dtype=np.int64).ravel()
        dist_arr = np.asarray(dists, dtype=np.float64).ravel()
        if id_arr.shape != dist_arr.shape:
            raise MatchError("candidate ids and distances differ in length")
        keep = id_arr >= 0
        id_arr, dist_arr = id_arr[keep], dist_arr[keep]
        order = np.lexsort((dist_arr, id_arr))
        id_arr, dist_arr = id_arr[order], dist_arr[order]
        first = np.ones(len(id_arr), dtype=bool)
        first[1:] = id_arr[1:] != id_arr[:-1]
        return cls(False, id_arr[first], dist_arr[first])

    @classmethod
    def from_groups(cls, groups: Sequence[tuple[np.ndarray, float]], num_entities: int) -> NodeCandidates:
        """From groups of entity ids sharing one distance (e.g. the entities of each candidate type).

        Same result as :meth:`from_pairs` on the concatenated pairs. When the groups cover a large
        part of the KG (millions of typed entities at DBpedia scale), a dense pass over the entity
        range replaces sorting every pair.
        """
        total = sum(len(ids) for ids, _ in groups)
        if total * _DENSE_FACTOR < num_entities or len(groups) >= 255:  # one byte per entity names a group
            ids = [np.asarray(g, dtype=np.int64) for g, _ in groups]
            dists = [np.full(len(g), d, dtype=np.float64) for g, d in groups]
            return cls.from_pairs(np.concatenate(ids) if ids else np.zeros(0, np.int64),
                                  np.concatenate(dists) if dists else np.zeros(0))
        ordered = sorted(groups, key=lambda group: -group[1])  # the smallest distance is written last
        group_dists = np.array([d for _, d in ordered], dtype=np.float64)
        owner = np.full(num_entities, 255, dtype=np.uint8)  # 1 byte per entity: 10 MB at 10M
        for rank, (g, _) in enumerate(ordered):
            owner[g] = rank
        ids_out = np.flatnonzero(owner != 255)
        return cls(False, ids_out.astype(np.int64), group_dists[owner[ids_out]])

    def __len__(self) -> int:
        return len(self.ids)

    def count(self, num_entities: int) -> int:
        return num_entities if self.any_entity else len(self.ids)

    def min_dist(self) -> float:
        if self.any_entity:
            return 0.0
        return float(self.dists.min()) if len(self.dists) else float("inf")

    def dist_of(self, entity: int) -> float | None:
        """Distance for ``entity``, or ``None`` when it is not a candidate."""
        if self.any_entity:
            return 0.0
        pos = int(np.searchsorted(self.ids, entity))
        if pos < len(self.ids) and self.ids[pos] == entity:
            return float(self.dists[pos])
        return None


@dataclass(frozen=True)
class CandidateTable:
    """Per pattern node a :class:`NodeCandidates`; per pattern edge a row of relation distances.

    ``rel_dists[e, r]`` is the distance between pattern edge ``e``'s relation text and KG relation
    ``r``; ``inf`` where ``r`` is not a candidate; all zeros for an unknown relation.
    """

    nodes: tuple[NodeCandidates, ...]
    rel_dists: np.ndarray  # float64 (n_edges, n_relations)

    def __post_init__(self) -> None:
        if self.rel_dists.ndim != 2:
            raise MatchError("rel_dists must be a 2-d array (pattern edges × KG relations)")

    @classmethod
    def from_relation_pairs(
        cls,
        nodes: Sequence[NodeCandidates],
        relation_candidates: Sequence[tuple[Sequence[int] | np.ndarray, Sequence[float] | np.ndarray] | None],
        num_relations: int,
    ) -> CandidateTable:
        """``relation_candidates[e]`` is (relation ids, distances), or ``None`` for an unknown relation."""
        table = np.full((len(relation_candidates), num_relations), np.inf)
        for e, cand in enumerate(relation_candidates):
            if cand is None:
                table[e, :] = 0.0
                continue
            ids, dists = cand
            for rid, dist in zip(ids, dists, strict=True):
                if 0 <= rid < num_relations:
                    table[e, rid] = min(table[e, rid], float(dist))
        return cls(tuple(nodes), table)

    def rel_min(self, edge: int) -> float:
        row = self.rel_dists[edge]
        return float(row.min()) if row.size else float("inf")
