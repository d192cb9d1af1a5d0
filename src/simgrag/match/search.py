"""Exact top-k subgraph search by Graph Semantic Distance (SimGRAG §4.2–§5, eq. 3, Algorithm 1).

``search_subgraphs`` is the one public entry: it plans a DFS order over the pattern, hands the
work to the compiled core in :mod:`simgrag.match._kernel` in chunks, and honours a deadline
between chunks (best-so-far results, ``complete=False`` and the lower bound of everything not yet
explored). ``algorithm="naive"`` runs Algorithm 1 (no pruning, no greedy order);
``"optimized"`` runs §5.2. Both return exactly the brute-force top-k.

Matching semantics:

- a pattern node maps to one KG entity, a pattern edge to one KG triple joining the two mapped
  entities in either direction (direction is ignored, §4.2), with a candidate relation;
- ``injective=True`` (default): distinct pattern nodes map to distinct entities and distinct
  pattern edges to distinct triples (so two parallel pattern edges need two KG triples);
  ``injective=False`` is the reference implementation's homomorphism: entities and triples may
  repeat;
- results are ordered by (GSD, entity ids in pattern-node order, triple ids in pattern-edge order);
- a disconnected pattern is matched per connected component; the combined matches are the k best
  sums of one match per component (entities may repeat across components), and the result lists
  each component's own matches too.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from simgrag.errors import MatchError
from simgrag.kg.store import KGStore
from simgrag.match import _kernel
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.restrict import RestrictedGraph, restrict
from simgrag.pattern.graph import Pattern

__all__ = ["Match", "SearchResult", "search_subgraphs"]

Algorithm = Literal["optimized", "naive"]
_CHUNK_STEPS = 20_000


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


@dataclass(frozen=True)
class SearchResult:
    """Top-k matches. ``lower_bound``: every match *not* returned has GSD ≥ this value (the
    optimality gap when ``complete`` is False; the k-th GSD, or inf, when it is True)."""

    matches: tuple[Match, ...]
    complete: bool
    lower_bound: float
    steps: int
    seconds: float
    algorithm: str
    components: tuple[tuple[Match, ...], ...] = field(default=())
    combination: str = "single"


@dataclass(frozen=True)
class _Plan:
    start: int
    order: np.ndarray  # (5, n_edges) int64, see _kernel.run_search
    rest: np.ndarray  # (n_edges + 1,) float64


def _plan(pattern: Pattern, counts: Sequence[int], node_min: Sequence[float], rel_min: Sequence[float]) -> _Plan:
    """DFS order from the node with the fewest candidates; closing edges as early as possible,
    then tree edges towards the neighbour with the fewest candidates."""
    n_nodes, n_edges = len(pattern.nodes), len(pattern.edges)
    incident: list[list[int]] = [[] for _ in range(n_nodes)]
    for i, edge in enumerate(pattern.edges):
        incident[edge.source].append(i)
        if edge.target != edge.source:
            incident[edge.target].append(i)
    start = min(range(n_nodes), key=lambda v: (counts[v], v))
    visited = {start}
    used: set[int] = set()
    rows: list[tuple[int, int, int, int]] = []

    def other(e: int, u: int) -> int:
        edge = pattern.edges[e]
        return edge.target if edge.source == u else edge.source

    def visit(u: int) -> None:
        while True:
            free = [e for e in incident[u] if e not in used]
            if not free:
                return
            closing = [e for e in free if other(e, u) in visited]
            if closing:
                e = min(closing)
                used.add(e)
                rows.append((e, u, other(e, u), 0))
                continue
            e = min(free, key=lambda x: (counts[other(x, u)], x))
            w = other(e, u)
            used.add(e)
            visited.add(w)
            rows.append((e, u, w, 1))
            visit(w)

    visit(start)
    if len(rows) != n_edges:
        raise MatchError("internal: pattern component is not connected")
    order = np.zeros((5, n_edges), dtype=np.int64)
    for d, row in enumerate(rows):
        order[:4, d] = row
    order[4, 0] = start
    rest = np.zeros(n_edges + 1, dtype=np.float64)
    for d in range(n_edges - 1, -1, -1):
        e, _, w, new = rows[d]
        rest[d] = rest[d + 1] + rel_min[e] + (node_min[w] if new else 0.0)
    return _Plan(start, order, rest)


def _candidate_arrays(nodes: Sequence[NodeCandidates]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    node_any = np.array([c.any_entity for c in nodes], dtype=np.bool_)
    sizes = [0 if c.any_entity else len(c.ids) for c in nodes]
    ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    ids = np.concatenate([c.ids for c in nodes] + [np.zeros(0, np.int64)]).astype(np.int64)
    dists = np.concatenate([c.dists for c in nodes] + [np.zeros(0, np.float64)]).astype(np.float64)
    return node_any, ptr, ids, dists


def _root(cands: NodeCandidates, num_entities: int, greedy: bool) -> tuple[np.ndarray, np.ndarray]:
    if cands.any_entity:
        return np.arange(num_entities, dtype=np.int64), np.zeros(num_entities, dtype=np.float64)
    ids, dists = cands.ids.astype(np.int64), cands.dists.astype(np.float64)
    if greedy:
        order = np.lexsort((ids, dists))
        ids, dists = ids[order], dists[order]
    return np.ascontiguousarray(ids), np.ascontiguousarray(dists)


class _Run:
    """State of one resumable search over a connected pattern."""

    def __init__(self, store: KGStore | RestrictedGraph, pattern: Pattern, table: CandidateTable, k: int,
                 injective: bool, algorithm: Algorithm) -> None:
        self.store, self.pattern, self.k = store, pattern, k
        self.injective = injective
        self.prune = self.greedy = algorithm == "optimized"
        n_nodes, n_edges = len(pattern.nodes), len(pattern.edges)
        counts = [c.count(store.num_entities) for c in table.nodes]
        node_min = [c.min_dist() for c in table.nodes]
        rel_min = [table.rel_min(e) for e in range(n_edges)]
        self.empty = min(counts) == 0 or any(np.isinf(rel_min))
        self.plan = _plan(pattern, counts, node_min, rel_min)
        self.node_any, self.cand_ptr, self.cand_ids, self.cand_dist = _candidate_arrays(table.nodes)
        self.rel_dist = np.ascontiguousarray(table.rel_dists, dtype=np.float64)
        self.root_ids, self.root_cost = _root(table.nodes[self.plan.start], store.num_entities, self.greedy)
        self.f = np.full(n_nodes, -1, dtype=np.int64)
        self.edge_tid = np.full(n_edges, -1, dtype=np.int64)
        self.edge_rel = np.full(n_edges, 0, dtype=np.int64)
        self.part = np.zeros(n_edges + 1, dtype=np.float64)
        self.lo = np.zeros(n_edges, dtype=np.int64)
        self.hi = np.zeros(n_edges, dtype=np.int64)
        self.cur = np.zeros(n_edges, dtype=np.int64)
        self.stk_j = np.zeros(4096, dtype=np.int64)
        self.stk_c = np.zeros(4096, dtype=np.float64)
        self.res_gsd = np.full(k, np.inf)
        self.res_nodes = np.zeros((k, n_nodes), dtype=np.int64)
        self.res_tids = np.zeros((k, n_edges), dtype=np.int64)
        self.res_rels = np.zeros((k, n_edges), dtype=np.int64)
        self.state = np.zeros(_kernel.N_STATE, dtype=np.int64)
        self.state[_kernel.S_DEPTH] = -1
        self.done = self.empty

    def advance(self, max_steps: int) -> None:
        """Run up to ``max_steps`` steps of the compiled search."""
        if self.done:
            return
        s = self.store
        status = _kernel.run_search(
            s.indptr, s.adj_nbr, s.adj_rel, s.adj_tid, self.plan.order, self.plan.rest,
            self.node_any, self.cand_ptr, self.cand_ids, self.cand_dist, self.rel_dist,
            self.root_ids, self.root_cost, self.k, self.injective, self.prune, self.greedy, max_steps,
            self.f, self.edge_tid, self.edge_rel, self.part, self.stk_j, self.stk_c,
            self.lo, self.hi, self.cur, self.res_gsd, self.res_nodes, self.res_tids, self.res_rels,
            self.state,
        )
        if status == _kernel.GROW:
            size = max(int(self.state[_kernel.S_NEED]), 2 * len(self.stk_j))
            self.stk_j = np.resize(self.stk_j, size)
            self.stk_c = np.resize(self.stk_c, size)
        self.done = status == _kernel.DONE

    @property
    def steps(self) -> int:
        return int(self.state[_kernel.S_STEPS])

    def frontier_bound(self) -> float:
        """Lower bound on the GSD of every mapping not explored yet (inf when done)."""
        if self.done:
            return float("inf")
        best = float("inf")
        root_i = int(self.state[_kernel.S_ROOT])
        if root_i < len(self.root_cost):
            best = float(self.root_cost[root_i:].min() + self.plan.rest[0])
        depth = int(self.state[_kernel.S_DEPTH])
        n_edges = len(self.pattern.edges)
        if depth == n_edges:
            best = min(best, float(self.part[n_edges]))
        for d in range(min(depth + 1, n_edges)):
            lo, hi = int(self.cur[d]), int(self.hi[d])
            if lo < hi:
                best = min(best, float(self.part[d] + self.stk_c[lo:hi].min() + self.plan.rest[d + 1]))
        return best

    def matches(self, table: CandidateTable) -> tuple[Match, ...]:
        count = int(self.state[_kernel.S_COUNT])
        out = []
        for i in range(count):
            nodes = tuple(int(x) for x in self.res_nodes[i])
            node_d = tuple(table.nodes[p].dist_of(v) or 0.0 for p, v in enumerate(nodes))
            edge_d = tuple(float(self.rel_dist[e, r]) for e, r in enumerate(self.res_rels[i]))
            out.append(Match(float(self.res_gsd[i]), nodes, tuple(int(x) for x in self.res_tids[i]),
                             node_d, edge_d))
        return tuple(sorted(out, key=Match.key))


def _search_connected(store: KGStore, pattern: Pattern, table: CandidateTable, k: int, injective: bool,
                      algorithm: Algorithm, deadline: float | None,
                      max_steps: int | None) -> tuple[tuple[Match, ...], bool, float, int]:
    small = restrict(store, pattern, table, injective=injective) if algorithm == "optimized" else None
    if small is not None:  # the same matches, searched on the KG cut down to the candidates' triples
        run = _Run(small, pattern, small.table, k, injective, algorithm)
    else:
        run = _Run(store, pattern, table, k, injective, algorithm)
    budget = max_steps
    while not run.done:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if budget is not None and run.steps >= budget:
            break
        chunk = _CHUNK_STEPS if budget is None else max(1, min(_CHUNK_STEPS, budget - run.steps))
        run.advance(chunk)
    matches = run.matches(table) if small is None else _global(run.matches(small.table), small.entities)
    kth = matches[-1].gsd if len(matches) == k else float("inf")
    lower = min(kth, run.frontier_bound())
    return matches, run.done, lower, run.steps


def _global(matches: tuple[Match, ...], entities: np.ndarray) -> tuple[Match, ...]:
    """Matches of a restricted graph with their nodes' global entity ids (the order is unchanged:
    local ids follow global ids)."""
    return tuple(Match(m.gsd, tuple(int(entities[v]) for v in m.nodes), m.triples, m.node_dists, m.edge_dists)
                 for m in matches)


def search_subgraphs(
    store: KGStore,
    pattern: Pattern,
    candidates: CandidateTable,
    *,
    k: int = 3,
    injective: bool = True,
    algorithm: Algorithm = "optimized",
    deadline_s: float | None = None,
    max_steps: int | None = None,
) -> SearchResult:
    """Top-k subgraphs of ``store`` with the smallest GSD to ``pattern`` (see module docstring).

    ``deadline_s``: seconds from now; when it passes the best matches so far are returned with
    ``complete=False``. ``max_steps``: the same, counted in search steps (deterministic).
    """
    _check_inputs(store, pattern, candidates, k, algorithm)
    t0 = time.perf_counter()
    deadline = None if deadline_s is None else t0 + deadline_s
    comps = pattern.components()
    if len(comps) == 1:
        matches, complete, lower, steps = _search_connected(
            store, pattern, candidates, k, injective, algorithm, deadline, max_steps)
        return SearchResult(matches, complete, lower, steps, time.perf_counter() - t0, algorithm)
    parts = []
    for node_ids, edge_ids in comps:
        sub = pattern.subpattern(node_ids, edge_ids)
        sub_table = CandidateTable(tuple(candidates.nodes[i] for i in node_ids), candidates.rel_dists[edge_ids])
        parts.append(_search_connected(store, sub, sub_table, k, injective, algorithm, deadline, max_steps))
    combined = _combine(pattern, comps, [p[0] for p in parts], k)
    complete = all(p[1] for p in parts)
    lower = combined[-1].gsd if len(combined) == k else float("inf")
    if not complete:
        lower = min(lower, sum(min(p[2], p[0][0].gsd if p[0] else p[2]) for p in parts))
    return SearchResult(combined, complete, lower, sum(p[3] for p in parts), time.perf_counter() - t0,
                        algorithm, tuple(p[0] for p in parts), "sum-of-components")


def _check_inputs(store: KGStore, pattern: Pattern, table: CandidateTable, k: int, algorithm: str) -> None:
    if k <= 0:
        raise MatchError(f"k must be positive, got {k}")
    if algorithm not in ("optimized", "naive"):
        raise MatchError(f"unknown algorithm {algorithm!r}: use 'optimized' or 'naive'")
    if len(table.nodes) != len(pattern.nodes):
        raise MatchError(f"{len(table.nodes)} node candidate sets for {len(pattern.nodes)} pattern nodes")
    if table.rel_dists.shape != (len(pattern.edges), store.num_relations):
        raise MatchError(f"rel_dists has shape {table.rel_dists.shape}, expected "
                         f"({len(pattern.edges)}, {store.num_relations})")


def _combine(pattern: Pattern, comps: list[tuple[list[int], list[int]]],
             lists: list[tuple[Match, ...]], k: int) -> tuple[Match, ...]:
    """The k best sums picking one match per component (a best-first walk over index tuples)."""
    if any(len(lst) == 0 for lst in lists):
        return ()

    def total(idx: tuple[int, ...]) -> float:
        return sum(lists[c][i].gsd for c, i in enumerate(idx))

    first = tuple(0 for _ in lists)
    heap = [(total(first), first)]
    seen = {first}
    out: list[Match] = []
    while heap and len(out) < k:
        gsd, idx = heapq.heappop(heap)
        out.append(_merge(pattern, comps, [lists[c][i] for c, i in enumerate(idx)], gsd))
        for c in range(len(lists)):
            nxt = (*idx[:c], idx[c] + 1, *idx[c + 1:])
            if nxt[c] < len(lists[c]) and nxt not in seen:
                seen.add(nxt)
                heapq.heappush(heap, (total(nxt), nxt))
    return tuple(out)


def _merge(pattern: Pattern, comps: list[tuple[list[int], list[int]]], parts: list[Match], gsd: float) -> Match:
    nodes = [0] * len(pattern.nodes)
    node_d = [0.0] * len(pattern.nodes)
    triples = [0] * len(pattern.edges)
    edge_d = [0.0] * len(pattern.edges)
    for (node_ids, edge_ids), m in zip(comps, parts, strict=True):
        for local, p in enumerate(node_ids):
            nodes[p], node_d[p] = m.nodes[local], m.node_dists[local]
        for local, e in enumerate(edge_ids):
            triples[e], edge_d[e] = m.triples[local], m.edge_dists[local]
    return Match(gsd, tuple(nodes), tuple(triples), tuple(node_d), tuple(edge_d))
