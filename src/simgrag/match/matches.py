"""The values the subgraph search returns: one matched subgraph (:class:`Match`) and a set of them held
as arrays (:class:`MatchSet`, the search's within set: every match within ε of the best); and which
pattern nodes a match keeps apart (:data:`Distinct`, read by the search and the restricted graph alike)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simgrag.errors import MatchError

__all__ = ["Distinct", "Match", "MatchSet", "distinct_matrix"]

#: which pattern nodes take distinct entities: all (``True``), none (``False``: homomorphism, triples may
#: repeat too), or the given node-index pairs (distinct pattern edges still take distinct triples)
Distinct = bool | frozenset[tuple[int, int]]


def distinct_matrix(n_nodes: int, injective: Distinct) -> tuple[np.ndarray, bool]:
    """The (n_nodes x n_nodes) ``distinct`` matrix (1 where two pattern nodes take distinct entities) and the
    ``edge_distinct`` flag (distinct pattern edges take distinct triples) for ``injective``."""
    if isinstance(injective, bool):
        matrix = np.full((n_nodes, n_nodes), 1 if injective else 0, dtype=np.uint8)
        np.fill_diagonal(matrix, 0)
        return matrix, injective
    matrix = np.zeros((n_nodes, n_nodes), dtype=np.uint8)
    for a, b in injective:
        if not (0 <= a < n_nodes and 0 <= b < n_nodes):
            raise MatchError(f"distinct node pair {(a, b)} is outside the pattern's {n_nodes} nodes")
        if a != b:
            matrix[a, b] = matrix[b, a] = 1
    return matrix, True


@dataclass(frozen=True)
class Match:
    """One matched subgraph: ``nodes[i]`` is the entity of pattern node i, ``triples[j]`` the KG
    triple of pattern edge j; per-node / per-edge distances (0 for unknowns)."""

    gsd: float
    nodes: tuple[int, ...]
    triples: tuple[int, ...]
    node_dists: tuple[float, ...]
    edge_dists: tuple[float, ...]

    def key(self) -> tuple[float, tuple[int, ...], tuple[int, ...]]:
        return (self.gsd, self.nodes, self.triples)


@dataclass(frozen=True, eq=False)
class MatchSet:
    """Every match with GSD ≤ ``best + within`` (row i: ``gsd[i]``, ``nodes[i]``, ``triples[i]`` and
    their distances), in (GSD, entity ids, triple ids) order. ``complete``: the search finished and the
    cap was not reached, so the set holds every such match; ``capped``: ``cap`` matches were kept and
    more exist."""

    within: float
    best: float
    gsd: np.ndarray  # (n,) float64
    nodes: np.ndarray  # (n, n_nodes) int64
    triples: np.ndarray  # (n, n_edges) int64
    node_dists: np.ndarray  # (n, n_nodes) float64
    edge_dists: np.ndarray  # (n, n_edges) float64
    complete: bool
    capped: bool
    cap: int

    def __len__(self) -> int:
        return len(self.gsd)

    def match(self, i: int) -> Match:
        return Match(float(self.gsd[i]), tuple(int(x) for x in self.nodes[i]), tuple(int(x) for x in self.triples[i]),
                     tuple(float(x) for x in self.node_dists[i]), tuple(float(x) for x in self.edge_dists[i]))

    def matches(self) -> tuple[Match, ...]:
        return tuple(self.match(i) for i in range(len(self)))

    def as_good_as_best(self, tolerance: float) -> np.ndarray:
        """Per row, whether its GSD is within ``tolerance`` of the best (the matches answers are read from)."""
        return np.asarray(self.gsd <= self.best + tolerance)

    def kept(self, rows: np.ndarray) -> MatchSet:
        """Only the matches at ``rows`` (ascending indices), in their order; ``best``, ``complete`` and ``capped`` keep
        describing the search (a caller drops matches on purpose, e.g. :func:`~simgrag.match.answers.followed`)."""
        return self.reordered(rows)

    def reordered(self, order: np.ndarray) -> MatchSet:
        """The same matches with its rows in ``order`` (a permutation of ``range(len(self))``)."""
        return replace(self, gsd=self.gsd[order], nodes=self.nodes[order], triples=self.triples[order],
                       node_dists=self.node_dists[order], edge_dists=self.edge_dists[order])
