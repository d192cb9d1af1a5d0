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
  repeat; a set of node-index pairs keeps exactly those pairs of pattern nodes apart (distinct pattern
  edges still take distinct triples) — with :func:`typed_pairs`, *typed* matching: nodes of one kind
  stay apart (a chain does not come back to the film it started from) but one person may be the
  writer and the director, and the answer is never an entity the question names;
- results are ordered by (GSD, entity ids in pattern-node order, triple ids in pattern-edge order);
- a disconnected pattern is matched per connected component; the combined matches are the k best
  sums of one match per component (entities may repeat across components), and the result lists
  each component's own matches too.

``within=ε`` adds, in the same run, **every** match whose GSD is at most the best GSD plus ε (ties
included), not only the top k (:class:`MatchSet`): the pruning threshold becomes ``max(k-th best,
best + ε)``, so the set is exact, and the top-k are unchanged. It holds at most ``within_cap`` matches
(``capped`` when more exist) and stops with the search at its deadline (``complete=False``).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from simgrag.errors import IndexDirError, MatchError
from simgrag.kg.store import KGStore
from simgrag.match import _kernel
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.limits import MAX_K
from simgrag.match.matches import Distinct, Match, MatchSet, distinct_matrix
from simgrag.match.restrict import RestrictedGraph, restrict
from simgrag.pattern.graph import Pattern, singular

__all__ = ["WITHIN_CAP", "Distinct", "Match", "MatchSet", "SearchResult", "compile_root_bounds", "search_subgraphs",
           "typed_pairs"]

Algorithm = Literal["optimized", "naive"]
CHUNK_STEPS = 2_000  # steps between two deadline checks (~4 ms on a hub; 99.9 % of MetaQA searches need fewer)
STACK_SIZE = 4096  # initial entries of the candidate stack (it grows on demand)
WITHIN_CAP = 10_000  # matches a within set holds at most
#: the tight per-root bound (``_kernel.root_bounds``) is computed when the roots' adjacency has at most this
#: many entries (a few ms); a start node with more (one that matches any entity) keeps the plain bound
ROOT_BOUND_MAX_ENTRIES = 2_000_000
#: … and when they have at least this many (below it the plain search is as fast: MetaQA's, ~0.5 ms)
ROOT_BOUND_MIN_ENTRIES = 4096
ROOT_BOUND_MAX_ROOTS = 500_000  # (and this many roots: their per-depth shares are kept, n_roots x n_edges)
_WITHIN_START = 256  # initial rows of the within buffers (they grow on demand up to the cap)


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _TurnSlots:
    """A semaphore that hands a released slot to the longest waiter (a plain one lets the releasing
    thread take it straight back, so two long searches could hold both cores until their deadlines)."""

    def __init__(self, slots: int) -> None:
        self._lock = threading.Lock()
        self._free = slots
        self._waiters: deque[threading.Event] = deque()

    def acquire(self, timeout: float | None) -> bool:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return True
            turn = threading.Event()
            self._waiters.append(turn)
        if turn.wait(timeout):
            return True
        with self._lock:
            if turn.is_set():  # handed over just as the wait timed out
                return True
            self._waiters.remove(turn)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._free += 1


#: chunks of compiled search running at once in this process (one per core). Concurrent searches (the
#: HTTP service's threads) take turns chunk by chunk, in arrival order, so a short search is not starved
#: of CPU by long ones spending their deadlines; one whose deadline passes while it waits stops there.
SEARCH_SLOTS = _TurnSlots(_cores())


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
    within: MatchSet | None = None  # with ``within=ε``: every match within ε of the best


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


def typed_pairs(pattern: Pattern, relation_keys: Sequence[object] | None = None) -> frozenset[tuple[int, int]]:
    """The node pairs *typed* matching keeps apart: nodes of one kind, every two named nodes, and the
    asked node (when the pattern has one) from every named node.

    Two nodes are of one kind when their ``UNKNOWN`` type words agree (singular, lower case) or when
    they take the same side of the same relation (``Basquiat`` and ``UNKNOWN movie 2`` are both
    heads of ``written by``); kinds are closed under both rules. ``relation_keys`` (one per edge) say
    which edges have the same relation — e.g. each edge's nearest KG relation, so that "writer of" and
    "written by" agree —; by default, the same relation text. So a writer may also be the director,
    and a chain may not come back to the film it started from."""
    n = len(pattern.nodes)
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    first_type: dict[str, int] = {}
    for i, pattern_node in enumerate(pattern.nodes):
        if pattern_node.type_hint:
            union(i, first_type.setdefault(singular(pattern_node.type_hint.lower()), i))
    first_slot: dict[tuple[object, str], int] = {}
    for e, edge in enumerate(pattern.edges):
        relation = relation_keys[e] if relation_keys is not None else " ".join(edge.relation.lower().split())
        for end, side in ((edge.source, "head"), (edge.target, "tail")):
            union(end, first_slot.setdefault((relation, side), end))
    named = [i for i, p_node in enumerate(pattern.nodes) if not p_node.unknown]
    asked = pattern.asked_node()
    pairs = {(a, b) for a in range(n) for b in range(a + 1, n) if find(a) == find(b)}
    pairs |= {(a, b) for a in named for b in named if a < b}
    if asked is not None:
        pairs |= {(min(asked, v), max(asked, v)) for v in named if v != asked}
    return frozenset(pairs)


def _sub_distinct(injective: Distinct, node_ids: Sequence[int]) -> Distinct:
    """``injective`` for the subpattern of ``node_ids`` (pairs renumbered; pairs across parts dropped)."""
    if isinstance(injective, bool):
        return injective
    local = {p: i for i, p in enumerate(node_ids)}
    return frozenset((local[a], local[b]) for a, b in injective if a in local and b in local)


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
                 injective: Distinct, algorithm: Algorithm, stack_size: int = STACK_SIZE,
                 within: float | None = None, within_cap: int = WITHIN_CAP) -> None:
        self.store, self.pattern, self.k = store, pattern, k
        self.distinct, self.edge_distinct = distinct_matrix(len(pattern.nodes), injective)
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
        self.rest_now = self.plan.rest.copy()  # the kernel's working bound (per root with root_terms)
        self.root_terms = np.zeros((0, n_edges), dtype=np.float64)
        self.root_bound = (self._order_roots_by_bound() if self.prune and not self.empty
                           else self.root_cost + self.plan.rest[0])
        self.f = np.full(n_nodes, -1, dtype=np.int64)
        self.edge_tid = np.full(n_edges, -1, dtype=np.int64)
        self.edge_rel = np.full(n_edges, 0, dtype=np.int64)
        self.part = np.zeros(n_edges + 1, dtype=np.float64)
        self.lo = np.zeros(n_edges, dtype=np.int64)
        self.hi = np.zeros(n_edges, dtype=np.int64)
        self.cur = np.zeros(n_edges, dtype=np.int64)
        self.stk_j = np.zeros(stack_size, dtype=np.int64)
        self.stk_c = np.zeros(stack_size, dtype=np.float64)
        self.res_gsd = np.full(k, np.inf)
        self.res_nodes = np.zeros((k, n_nodes), dtype=np.int64)
        self.res_tids = np.zeros((k, n_edges), dtype=np.int64)
        self.res_rels = np.zeros((k, n_edges), dtype=np.int64)
        self.state = np.zeros(_kernel.N_STATE, dtype=np.int64)
        self.state[_kernel.S_DEPTH] = -1
        self.done = self.empty
        self.within, self.within_cap = within, within_cap
        # smallest dropped GSD, cut at the last compaction, row of the worst entry (-1: unknown)
        self.set_f = np.array([np.inf, np.inf, -1.0])
        rows = 0 if within is None else min(within_cap, _WITHIN_START)
        self.set_gsd = np.zeros(rows, dtype=np.float64)
        self.set_nodes = np.zeros((rows, n_nodes), dtype=np.int64)
        self.set_tids = np.zeros((rows, n_edges), dtype=np.int64)
        self.set_rels = np.zeros((rows, n_edges), dtype=np.int64)

    def _order_roots_by_bound(self) -> np.ndarray:
        """Per root, the kernel's lower bound from the root's own adjacency (:func:`_kernel.root_bounds`,
        its per-depth shares kept in ``root_terms``), the roots then reordered by it (ties by id); with more
        than :data:`ROOT_BOUND_MAX_ROOTS` roots, or adjacency entries among them outside
        :data:`ROOT_BOUND_MIN_ENTRIES` … :data:`ROOT_BOUND_MAX_ENTRIES` (a small search gains nothing; a start
        node that matches any entity costs too much), the plain bound ``root_cost + rest[0]``, in the order the
        roots have."""
        s, ids = self.store, self.root_ids
        plain = self.root_cost + self.plan.rest[0]
        indptr = np.asarray(s.indptr)
        if len(ids) == 0 or len(ids) > ROOT_BOUND_MAX_ROOTS or ids.min() < 0 or ids.max() + 1 >= len(indptr):
            return plain  # (an out-of-range root: the kernel reports the corrupt store)
        if not ROOT_BOUND_MIN_ENTRIES <= int((indptr[ids + 1] - indptr[ids]).sum()) <= ROOT_BOUND_MAX_ENTRIES:
            return plain
        terms = np.empty((len(ids), len(self.pattern.edges)), dtype=np.float64)
        bound = _kernel.root_bounds(s.indptr, s.adj_nbr, s.adj_rel, self.plan.order, self.plan.rest, self.node_any,
                                    self.cand_ptr, self.cand_ids, self.cand_dist, self.rel_dist, ids, self.root_cost,
                                    terms)
        order = np.lexsort((ids, bound))
        self.root_ids = np.ascontiguousarray(ids[order])
        self.root_cost = np.ascontiguousarray(self.root_cost[order])
        self.root_terms = np.ascontiguousarray(terms[order])
        return np.ascontiguousarray(bound[order])

    def advance(self, max_steps: int) -> None:
        """Run up to ``max_steps`` steps of the compiled search."""
        if self.done:
            return
        s = self.store
        status = _kernel.run_search(
            s.indptr, s.adj_nbr, s.adj_rel, s.adj_tid, s.num_triples, self.plan.order,
            self.node_any, self.cand_ptr, self.cand_ids, self.cand_dist, self.rel_dist,
            self.root_ids, self.root_cost, self.root_bound, self.root_terms, self.rest_now,
            self.k, self.distinct, self.edge_distinct, self.prune, self.greedy, max_steps,
            self.f, self.edge_tid, self.edge_rel, self.part, self.stk_j, self.stk_c,
            self.lo, self.hi, self.cur, self.res_gsd, self.res_nodes, self.res_tids, self.res_rels,
            self.state, -1.0 if self.within is None else self.within,
            self.set_gsd, self.set_nodes, self.set_tids, self.set_rels, self.set_f,
        )
        if status == _kernel.SET_FULL:
            self._grow_within()
        if status == _kernel.CORRUPT:
            raise IndexDirError(
                f"The KG store's adjacency is corrupt (entry {int(self.state[_kernel.S_NEED])} points outside the "
                "store): run `simgrag check INDEX_DIR` and rebuild the index")
        if status == _kernel.GROW:
            size = max(int(self.state[_kernel.S_NEED]), 2 * len(self.stk_j))
            self.stk_j = np.resize(self.stk_j, size)
            self.stk_c = np.resize(self.stk_c, size)
        self.done = status == _kernel.DONE

    def _grow_within(self) -> None:
        """A full within buffer grows (doubling) up to the cap; at the cap, further members are dropped."""
        rows = len(self.set_gsd)
        if rows >= self.within_cap:
            self.state[_kernel.S_SET_CAP] = 1
            return
        self.set_f[1] = np.inf  # a bigger buffer: compaction may help again later
        self.set_f[2] = -1.0
        size = min(self.within_cap, 2 * rows)
        self.set_gsd = np.resize(self.set_gsd, size)
        self.set_nodes = np.resize(self.set_nodes, (size, self.set_nodes.shape[1]))
        self.set_tids = np.resize(self.set_tids, (size, self.set_tids.shape[1]))
        self.set_rels = np.resize(self.set_rels, (size, self.set_rels.shape[1]))

    def within_set(self, table: CandidateTable) -> MatchSet | None:
        """The within set (class :class:`MatchSet`), ``None`` when the run was not in within mode."""
        if self.within is None:
            return None
        count = int(self.state[_kernel.S_COUNT])
        best = float(self.res_gsd[:count].min()) if count else float("inf")
        n = int(self.state[_kernel.S_SET])
        gsd = self.set_gsd[:n]
        keep = np.flatnonzero(gsd <= best + self.within)
        gsd, nodes, tids, rels = gsd[keep], self.set_nodes[keep], self.set_tids[keep], self.set_rels[keep]
        keys = [tids[:, e] for e in range(tids.shape[1] - 1, -1, -1)]
        keys += [nodes[:, p] for p in range(nodes.shape[1] - 1, -1, -1)]
        order = np.lexsort([*keys, gsd]) if len(gsd) else np.zeros(0, dtype=np.int64)
        gsd, nodes, tids, rels = gsd[order], nodes[order], tids[order], rels[order]
        node_d = np.zeros(nodes.shape, dtype=np.float64)
        for p in range(nodes.shape[1]):
            if not self.node_any[p]:
                lo, hi = int(self.cand_ptr[p]), int(self.cand_ptr[p + 1])
                pos = np.searchsorted(self.cand_ids[lo:hi], nodes[:, p])
                node_d[:, p] = self.cand_dist[lo:hi][pos]
        edge_d = np.zeros(tids.shape, dtype=np.float64)
        for e in range(tids.shape[1]):
            edge_d[:, e] = self.rel_dist[e, rels[:, e]]
        capped = bool(np.isfinite(self.set_f[0]) and self.set_f[0] <= best + self.within)  # a dropped member
        return MatchSet(float(self.within), best, gsd, nodes, tids, node_d, edge_d,
                        complete=self.done and not capped, capped=capped, cap=self.within_cap)

    @property
    def steps(self) -> int:
        return int(self.state[_kernel.S_STEPS])

    def frontier_bound(self) -> float:
        """Lower bound on the GSD of every mapping not explored yet (inf when done)."""
        if self.done:
            return float("inf")
        best = float("inf")
        root_i = int(self.state[_kernel.S_ROOT])
        if root_i < len(self.root_bound):
            best = float(self.root_bound[root_i:].min())
        depth = int(self.state[_kernel.S_DEPTH])
        n_edges = len(self.pattern.edges)
        if depth == n_edges:
            best = min(best, float(self.part[n_edges]))
        for d in range(min(depth + 1, n_edges)):
            lo, hi = int(self.cur[d]), int(self.hi[d])
            if lo < hi:
                best = min(best, float(self.part[d] + self.stk_c[lo:hi].min() + self.rest_now[d + 1]))
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


@dataclass(frozen=True)
class _Limits:
    deadline: float | None
    max_steps: int | None
    chunk_steps: int
    stack_size: int


def _search_connected(store: KGStore, pattern: Pattern, table: CandidateTable, k: int, injective: Distinct,
                      algorithm: Algorithm, limits: _Limits, within: tuple[float, int] | None = None,
                      ) -> tuple[tuple[Match, ...], bool, float, int, MatchSet | None]:
    small = (restrict(store, pattern, table, injective=injective, deadline=limits.deadline)
             if algorithm == "optimized" else None)
    # on a restricted graph: the same matches, searched on the KG cut down to the candidates' triples
    graph, local_table = (store, table) if small is None else (small, small.table)
    run = _Run(graph, pattern, local_table, k, injective, algorithm, limits.stack_size, *(within or (None,)))
    budget, deadline = limits.max_steps, limits.deadline
    while not run.done:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if budget is not None and run.steps >= budget:
            break
        chunk = limits.chunk_steps if budget is None else max(1, min(limits.chunk_steps, budget - run.steps))
        wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
        if not SEARCH_SLOTS.acquire(timeout=wait):
            break  # the deadline passed while other searches held every core
        try:
            run.advance(chunk)
        finally:
            SEARCH_SLOTS.release()
    matches = run.matches(local_table)
    if small is not None:
        matches = _global(matches, small.entities)
    kth = matches[-1].gsd if len(matches) == k else float("inf")
    lower = min(kth, run.frontier_bound())
    found = run.within_set(local_table)
    if small is not None and found is not None:  # local ids follow global ids: the set's order is kept
        found = replace(found, nodes=small.entities[found.nodes].astype(np.int64))
    return matches, run.done, lower, run.steps, found


def _global(matches: tuple[Match, ...], entities: np.ndarray) -> tuple[Match, ...]:
    """Matches of a restricted graph with their nodes' global entity ids (the order is unchanged:
    local ids follow global ids)."""
    return tuple(Match(m.gsd, tuple(int(entities[v]) for v in m.nodes), m.triples, m.node_dists, m.edge_dists)
                 for m in matches)


def compile_root_bounds(store: KGStore) -> None:
    """Compile the per-root bound (``_kernel.root_bounds``) for ``store``'s array types, on no roots: a warm-up
    for the first search that needs it (a small warm-up search does not), which would otherwise compile it
    (~0.5 s once per machine and kernel version: numba caches it on disk)."""
    small = (np.zeros(2, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))  # a restricted graph's kind
    for indptr, adj_nbr, adj_rel in ((store.indptr, store.adj_nbr, store.adj_rel), small):
        _kernel.root_bounds(indptr, adj_nbr, adj_rel, np.zeros((5, 1), np.int64), np.zeros(2),
                            np.zeros(1, np.bool_), np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(1),
                            np.zeros((1, 1)), np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 1)))


def search_subgraphs(
    store: KGStore,
    pattern: Pattern,
    candidates: CandidateTable,
    *,
    k: int = 3,
    injective: Distinct = True,
    algorithm: Algorithm = "optimized",
    deadline_s: float | None = None,
    max_steps: int | None = None,
    chunk_steps: int = CHUNK_STEPS,
    stack_size: int = STACK_SIZE,
    within: float | None = None,
    within_cap: int = WITHIN_CAP,
) -> SearchResult:
    """Top-k subgraphs of ``store`` with the smallest GSD to ``pattern`` (see module docstring).

    ``deadline_s``: seconds from now; when it passes the best matches so far are returned with
    ``complete=False``. ``max_steps``: the same, counted in search steps (deterministic).
    ``chunk_steps`` (steps between deadline checks) and ``stack_size`` (initial candidate stack) change
    only how the work is cut, never the result: tests set them tiny to exercise resume and growth.
    ``within``: also every match within this GSD of the best, at most ``within_cap`` of them
    (``SearchResult.within``, a :class:`MatchSet`).
    """
    _check_inputs(store, pattern, candidates, k, algorithm)
    for name, value in (("chunk_steps", chunk_steps), ("stack_size", stack_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise MatchError(f"{name} must be a positive integer, got {value!r}")
    if within is not None and not (within >= 0.0 and np.isfinite(within)):
        raise MatchError(f"within must be a finite number >= 0, got {within!r}")
    if isinstance(within_cap, bool) or not isinstance(within_cap, (int, np.integer)) or within_cap < 1:
        raise MatchError(f"within_cap must be a positive integer, got {within_cap!r}")
    mode = None if within is None else (float(within), int(within_cap))
    t0 = time.perf_counter()
    limits = _Limits(None if deadline_s is None else t0 + deadline_s, max_steps, int(chunk_steps), int(stack_size))
    comps = pattern.components()
    if len(comps) == 1:
        matches, complete, lower, steps, found = _search_connected(
            store, pattern, candidates, k, injective, algorithm, limits, mode)
        return SearchResult(matches, complete, lower, steps, time.perf_counter() - t0, algorithm, within=found)
    parts = []
    for node_ids, edge_ids in comps:
        sub = pattern.subpattern(node_ids, edge_ids)
        sub_table = CandidateTable(tuple(candidates.nodes[i] for i in node_ids), candidates.rel_dists[edge_ids])
        parts.append(_search_connected(store, sub, sub_table, k, _sub_distinct(injective, node_ids), algorithm,
                                       limits, mode))
    combined = _combine(pattern, comps, [p[0] for p in parts], k)
    found = None if mode is None else _combine_within(pattern, comps, [p[4] for p in parts], *mode)  # type: ignore[misc]
    complete = all(p[1] for p in parts)
    lower = combined[-1].gsd if len(combined) == k else float("inf")
    if not complete:
        lower = min(lower, sum(min(p[2], p[0][0].gsd if p[0] else p[2]) for p in parts))
    return SearchResult(combined, complete, lower, sum(p[3] for p in parts), time.perf_counter() - t0,
                        algorithm, tuple(p[0] for p in parts), "sum-of-components", found)


def _check_inputs(store: KGStore, pattern: Pattern, table: CandidateTable, k: int, algorithm: str) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 < k <= MAX_K:
        raise MatchError(f"k must be an integer between 1 and {MAX_K:,}, got {k!r}")
    for name in ("indptr", "adj_nbr", "adj_rel", "adj_tid"):
        if getattr(store, name).dtype.kind not in "iu":
            raise IndexDirError(f"The KG store's {name} array has dtype {getattr(store, name).dtype}, not an "
                                "integer type: the index is corrupt; rebuild it")
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


def _combine_within(pattern: Pattern, comps: list[tuple[list[int], list[int]]], sets: list[MatchSet],
                    within: float, cap: int) -> MatchSet:
    """The within set of a disconnected pattern: one match per component, summed GSD ≤ best + ``within``
    (each component's match is then within ``within`` of that component's best), best first."""
    lists = [s.matches() for s in sets]
    out: list[Match] = []
    capped = False
    if all(lists):
        def total(idx: tuple[int, ...]) -> float:
            return sum(lists[c][i].gsd for c, i in enumerate(idx))

        first = tuple(0 for _ in lists)
        best = total(first)
        heap = [(best, first)]
        seen = {first}
        while heap:
            gsd, idx = heapq.heappop(heap)
            if gsd > best + within:
                break
            if len(out) >= cap:
                capped = True
                break
            out.append(_merge(pattern, comps, [lists[c][i] for c, i in enumerate(idx)], gsd))
            for c in range(len(lists)):
                nxt = (*idx[:c], idx[c] + 1, *idx[c + 1:])
                if nxt[c] < len(lists[c]) and nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (total(nxt), nxt))
    out.sort(key=Match.key)
    n_nodes, n_edges = len(pattern.nodes), len(pattern.edges)

    def col(values: list[tuple[float, ...]] | list[tuple[int, ...]], width: int, dtype: type) -> np.ndarray:
        return np.array(values, dtype=dtype).reshape(len(out), width)

    return MatchSet(within, out[0].gsd if out else float("inf"), np.array([m.gsd for m in out], dtype=np.float64),
                    col([m.nodes for m in out], n_nodes, np.int64), col([m.triples for m in out], n_edges, np.int64),
                    col([m.node_dists for m in out], n_nodes, np.float64),
                    col([m.edge_dists for m in out], n_edges, np.float64),
                    complete=all(s.complete for s in sets) and not capped, capped=capped or any(s.capped for s in sets),
                    cap=cap)
