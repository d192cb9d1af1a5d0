"""Candidate-restricted search graphs: the KG cut down to what a pattern's matches can use.

When every node of a connected pattern has an explicit candidate set (named nodes, typed unknowns at
scale; no ``any_entity`` node), a match maps each pattern edge ``(a, b)`` to a KG triple between a
candidate of ``a`` and a candidate of ``b`` whose relation is a candidate of the edge. So before the
search:

1. **arc consistency**: a candidate of ``a`` that has no such triple towards any live candidate of
   ``b`` (for some edge ``(a, b)``) is in no match and is dropped; the pass repeats until nothing
   changes. A pass scans the edges it can afford (cheapest first, within :data:`MAX_SCAN_ENTRIES`
   and the time left): on a path ``named – typed – typed – named`` the two named ends' edges prune the
   typed nodes first, and the edge between them is scanned once they are small. For a star whose
   centre is a typed unknown with millions of entities, this keeps the centres adjacent to a
   candidate of *every* named leaf: the leaves' neighbourhoods intersected before the search expands
   anything. Each edge is scanned from its side with the smaller adjacency
   total, so a hub is scanned only when it is on the cheap side.
2. **the restricted graph**: the triples that join live candidates of the two ends of some pattern
   edge through one of its candidate relations, in a small CSR over *local* ids (the live candidates,
   numbered in global id order, so every order the search uses is kept).

The search then runs unchanged on the small graph: it holds every triple any match can use, so the
top-k is the same as on the whole KG (``tests/test_match_property.py`` compares them). Hubs keep
only the edges that lead to candidates, so expanding one no longer scans its whole neighbourhood for
every partial match that reaches it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from simgrag.kg.store import KGStore
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.matches import Distinct, distinct_matrix
from simgrag.pattern.graph import Pattern

__all__ = ["MAX_SCAN_ENTRIES", "MIN_CANDIDATES", "RestrictedGraph", "restrict"]

#: restrict only when some node has more candidates than this (small problems search fast as they are)
MIN_CANDIDATES = 4096
#: give up (search the whole KG) when one arc-consistency pass would scan more adjacency entries
MAX_SCAN_ENTRIES = 50_000_000
#: adjacency entries a consistency pass (or the build) scans per second, a conservative guess for one
#: busy core: with a deadline, a pass whose scan would not end before the give-up time is not started
SCAN_ENTRIES_PER_S = 10_000_000
#: with a deadline, the share of the time left that restricting may use (the search on the restricted graph,
#: or on the whole KG when restricting gives up, gets the rest). A half gave up on a 10M path whose restriction
#: took 0.33 s of 0.66 s left, and the whole-KG search then stopped at the deadline (BENCHMARKS §13)
RESTRICT_SHARE = 0.75
_MAX_PASSES = 4
#: an edge costing more than this many times the cheaper edges of its pass waits for the next pass
DEFER_RATIO = 8


@dataclass(frozen=True)
class RestrictedGraph:
    """The small graph and candidate table a connected pattern is searched on; ``entities[local]`` is
    the global id of local entity ``local``. ``num_entities``/``indptr``/``adj_*`` mirror a
    :class:`~simgrag.kg.store.KGStore` so the search takes it in the store's place; ``adj_tid`` keeps
    the KG's triple ids (``num_triples`` is the KG's)."""

    entities: np.ndarray
    indptr: np.ndarray
    adj_nbr: np.ndarray
    adj_rel: np.ndarray
    adj_tid: np.ndarray
    table: CandidateTable
    num_triples: int  # the KG's (adj_tid holds its triple ids; the search checks them against it)

    @property
    def num_entities(self) -> int:
        return len(self.entities)


def restrict(store: KGStore, pattern: Pattern, table: CandidateTable, *,
             injective: Distinct = True,
             deadline: float | None = None) -> RestrictedGraph | None:
    """The restricted graph for a connected ``pattern``, or ``None`` when it does not apply
    (a node that matches any entity, a self-loop edge, more than 16 nodes or 32 edges, no large
    candidate set, or too much to scan). A KG self-loop is kept only for the pattern edges whose two ends
    may map to one entity (``injective`` False, or a pair typed matching does not keep apart): an edge
    between two nodes kept apart never maps to one. ``injective`` as in
    :func:`~simgrag.match.search.search_subgraphs`.

    ``deadline`` (a ``time.perf_counter()`` value) is the search's: restricting may use at most
    :data:`RESTRICT_SHARE` of the time left to it; past that it gives up (``None``) and the search runs on
    the whole KG with the rest."""
    now = time.perf_counter()
    give_up = None if deadline is None else now + RESTRICT_SHARE * (deadline - now)
    nodes, edges = table.nodes, pattern.edges
    if (any(c.unanchored for c in nodes) or len(nodes) > 16 or len(edges) > 32 or not edges
            or any(e.source == e.target for e in edges) or max(len(c.ids) for c in nodes) <= MIN_CANDIDATES):
        return None
    cand_ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum([len(c.ids) for c in nodes], out=cand_ptr[1:])
    cand_ids = np.concatenate([c.ids for c in nodes]).astype(np.int64)
    origin = np.arange(len(cand_ids))  # position of each kept candidate in the first concatenation
    e_src = np.array([e.source for e in edges], dtype=np.int64)
    e_dst = np.array([e.target for e in edges], dtype=np.int64)
    rel_ok = np.ascontiguousarray(np.isfinite(table.rel_dists))
    alive = np.ones(len(cand_ids), dtype=np.bool_)
    mask = np.zeros(store.num_entities, dtype=np.uint16)  # bit p: a live candidate of node p
    _mark(mask, cand_ptr, cand_ids, alive)
    scan_from = np.zeros(len(edges), dtype=np.int64)
    converged = False
    defer = True
    for _ in range(_MAX_PASSES + 1):
        degrees = _degree_sums(store.indptr, cand_ptr, cand_ids, alive)
        scan_from[:] = np.where(degrees[e_src] <= degrees[e_dst], e_src, e_dst)
        chosen = _affordable(degrees[scan_from], give_up, defer=defer)
        if len(chosen) == 0:
            return None
        removed = _consistency_pass(store.indptr, store.adj_nbr, store.adj_rel, mask, cand_ptr, cand_ids, alive,
                                    e_src[chosen], e_dst[chosen], np.ascontiguousarray(rel_ok[chosen]),
                                    scan_from[chosen])
        if removed == 0:
            if len(chosen) == len(edges):
                converged = True
                break
            if defer:  # the cheap edges pruned nothing more: the deferred ones are scanned as they are
                defer = False
                continue
            return None  # the edges left out are too costly to scan, and scanning the rest changed nothing
        # later passes and the build walk the survivors only (a typed centre shrinks from millions)
        owner = np.repeat(np.arange(len(nodes)), np.diff(cand_ptr))[alive]
        cand_ptr[1:] = np.cumsum(np.bincount(owner, minlength=len(nodes)))
        cand_ids, origin = cand_ids[alive], origin[alive]
        alive = np.ones(len(cand_ids), dtype=np.bool_)
    if not converged:  # the last pass dropped candidates: the build scans the survivors' sides
        degrees = _degree_sums(store.indptr, cand_ptr, cand_ids, alive)
        scan_from[:] = np.where(degrees[e_src] <= degrees[e_dst], e_src, e_dst)
    if len(_affordable(degrees[scan_from], give_up)) < len(edges):  # the build scans every edge
        return None
    dists = np.concatenate([c.dists for c in nodes]).astype(np.float64)[origin]
    # a KG self-loop may match an edge only where its two ends may take one entity
    loop_ok = ((distinct_matrix(len(nodes), injective)[0][e_src, e_dst] == 0) if store.has_self_loops
               else np.zeros(len(edges), np.bool_))
    return _build(store, table, cand_ptr, cand_ids, dists, alive, mask, e_src, e_dst, rel_ok, scan_from, loop_ok)


def _affordable(costs: np.ndarray, give_up: float | None, *, defer: bool = False) -> np.ndarray:
    """The edges (cheapest first) one pass can scan: at most ``MAX_SCAN_ENTRIES`` adjacency entries in
    all, ending before ``give_up``. Pruning through the cheap edges first (a named end's few candidates)
    shrinks the typed nodes between them, so the costly edges become affordable in a later pass. With
    ``defer``, an edge costing more than :data:`DEFER_RATIO` times the cheaper ones together waits for
    the next pass even when it fits (on ``named – typed – typed – named`` the middle edge costs tens of
    millions of entries before the named ends have pruned its two typed ends, thousands after)."""
    order = np.argsort(costs, kind="stable")
    total = np.cumsum(costs[order])
    fits = total <= MAX_SCAN_ENTRIES
    if give_up is not None:
        fits &= time.perf_counter() + total / SCAN_ENTRIES_PER_S < give_up
    if defer and len(order) > 1:
        before = np.concatenate(([0], total[:-1]))  # what the cheaper edges cost together
        fits &= (before == 0) | (costs[order] <= DEFER_RATIO * np.maximum(before, 1))
    return np.sort(order[: int(np.argmin(fits)) if not fits.all() else len(order)])


def _build(store: KGStore, table: CandidateTable, cand_ptr: np.ndarray, cand_ids: np.ndarray, dists: np.ndarray,
           alive: np.ndarray,
           mask: np.ndarray, e_src: np.ndarray, e_dst: np.ndarray, rel_ok: np.ndarray,
           scan_from: np.ndarray, loop_ok: np.ndarray) -> RestrictedGraph:
    entities = np.unique(cand_ids[alive])
    graph = (store.indptr, store.adj_nbr, store.adj_rel, store.adj_tid, mask, cand_ptr, cand_ids, alive,
             e_src, e_dst, rel_ok, scan_from, loop_ok)
    none = np.empty(0, np.int64)
    n = _entries(*graph, False, none, none, none, none)
    src, nbr = np.empty(n, np.int64), np.empty(n, np.int64)
    rel, tid = np.empty(n, np.int64), np.empty(n, np.int64)
    _entries(*graph, True, src, nbr, rel, tid)
    src, nbr = np.searchsorted(entities, src), np.searchsorted(entities, nbr)
    order = np.lexsort((tid, rel, nbr, src))
    src, nbr, rel, tid = src[order], nbr[order], rel[order], tid[order]
    keep = np.ones(len(src), dtype=np.bool_)  # a triple found for two pattern edges is listed once
    keep[1:] = (src[1:] != src[:-1]) | (nbr[1:] != nbr[:-1]) | (tid[1:] != tid[:-1])
    src, nbr, rel, tid = src[keep], nbr[keep], rel[keep], tid[keep]
    indptr = np.zeros(len(entities) + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=len(entities)), out=indptr[1:])
    local_nodes = []
    for p in range(len(table.nodes)):
        part = slice(cand_ptr[p], cand_ptr[p + 1])
        live = alive[part]
        local_nodes.append(NodeCandidates(False, np.searchsorted(entities, cand_ids[part][live]).astype(np.int64),
                                          dists[part][live]))
    return RestrictedGraph(entities, indptr, nbr.astype(np.int32), rel.astype(np.int32), tid.astype(np.int32),
                           CandidateTable(tuple(local_nodes), table.rel_dists), store.num_triples)


# ---------------------------------------------------------------------------------------------- compiled
@njit(cache=True, nogil=True)
def _mark(mask, cand_ptr, cand_ids, alive):  # type: ignore[no-untyped-def]
    for p in range(cand_ptr.shape[0] - 1):
        bit = np.uint16(1 << p)
        for i in range(cand_ptr[p], cand_ptr[p + 1]):
            if alive[i]:
                mask[cand_ids[i]] |= bit


@njit(cache=True, nogil=True)
def _degree_sums(indptr, cand_ptr, cand_ids, alive):  # type: ignore[no-untyped-def]
    out = np.zeros(cand_ptr.shape[0] - 1, dtype=np.int64)
    for p in range(cand_ptr.shape[0] - 1):
        for i in range(cand_ptr[p], cand_ptr[p + 1]):
            if alive[i]:
                v = cand_ids[i]
                out[p] += indptr[v + 1] - indptr[v]
    return out


@njit(cache=True, nogil=True)
def _slot(cand_ids, lo, hi, v):  # type: ignore[no-untyped-def]
    """Index of v in the sorted cand_ids[lo:hi] (it is there: the mask said so)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if cand_ids[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _consistency_pass(indptr, adj_nbr, adj_rel, mask, cand_ptr, cand_ids, alive,  # type: ignore[no-untyped-def]
                      e_src, e_dst, rel_ok, scan_from):
    """One arc-consistency pass over every pattern edge; returns how many candidates it dropped."""
    n_edges = e_src.shape[0]
    support = np.zeros(cand_ids.shape[0], dtype=np.uint32)  # bit e: has a triple for edge e
    for e in range(n_edges):
        s = scan_from[e]
        o = e_dst[e] if s == e_src[e] else e_src[e]
        o_bit = np.uint16(1 << o)
        e_bit = np.uint32(1 << e)
        for i in range(cand_ptr[s], cand_ptr[s + 1]):
            if not alive[i]:
                continue
            u = cand_ids[i]
            for j in range(indptr[u], indptr[u + 1]):
                w = adj_nbr[j]
                if (mask[w] & o_bit) and rel_ok[e, adj_rel[j]]:
                    support[i] |= e_bit
                    support[_slot(cand_ids, cand_ptr[o], cand_ptr[o + 1], w)] |= e_bit
    removed = 0
    for p in range(cand_ptr.shape[0] - 1):
        need = np.uint32(0)
        for e in range(n_edges):
            if e_src[e] == p or e_dst[e] == p:
                need |= np.uint32(1 << e)
        keep_bits = np.uint16(0xFFFF ^ (1 << p))
        for i in range(cand_ptr[p], cand_ptr[p + 1]):
            if alive[i] and (support[i] & need) != need:
                alive[i] = False
                mask[cand_ids[i]] &= keep_bits
                removed += 1
    return removed


@njit(cache=True, nogil=True)
def _entries(indptr, adj_nbr, adj_rel, adj_tid, mask, cand_ptr, cand_ids, alive,  # type: ignore[no-untyped-def]
             e_src, e_dst, rel_ok, scan_from, loop_ok, fill, src, nbr, rel, tid):
    """How many entries: both directions of every triple joining live candidates of an edge's ends by a
    candidate relation (a self-loop once, as the store lists it, and only for an edge in ``loop_ok``);
    with ``fill`` also written into ``src``, ``nbr``, ``rel``, ``tid`` (sized by a counting call first)."""
    n = 0
    for e in range(e_src.shape[0]):
        s = scan_from[e]
        o_bit = np.uint16(1 << (e_dst[e] if s == e_src[e] else e_src[e]))
        for i in range(cand_ptr[s], cand_ptr[s + 1]):
            if alive[i]:
                u = cand_ids[i]
                for j in range(indptr[u], indptr[u + 1]):
                    w = adj_nbr[j]
                    if (w != u or loop_ok[e]) and (mask[w] & o_bit) and rel_ok[e, adj_rel[j]]:
                        if fill:
                            src[n], nbr[n], rel[n], tid[n] = u, w, adj_rel[j], adj_tid[j]
                        n += 1
                        if w != u:
                            if fill:
                                src[n], nbr[n], rel[n], tid[n] = w, u, adj_rel[j], adj_tid[j]
                            n += 1
    return n
