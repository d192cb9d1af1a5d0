"""The subgraph search core, compiled with numba: SimGRAG Algorithm 1 and its optimized form (§5.2).

One resumable depth-first search serves both algorithms:

- ``prune=False, greedy=False`` is Algorithm 1: every candidate-consistent mapping is enumerated
  and the best ``k`` are kept;
- ``prune=True, greedy=True`` is the optimized search: candidates at each depth are expanded in
  ascending cost (greedy), and a branch stops as soon as its lower bound (eq. 11) exceeds the k-th
  best GSD found so far. Because the candidates of a depth are sorted, the first one over the bound
  ends the whole depth.

The bound is admissible on any pattern, cyclic ones included: ``rest[d]`` adds, for the pattern
edges at depths ≥ d, their smallest candidate relation distance and, only for the nodes those edges
*introduce*, their smallest candidate node distance. A node already bound (the far end of a
cycle-closing edge) adds nothing. Pruning is strict (``bound > kth + eps``), so ties with the k-th
result are still explored and resolved by the deterministic key (GSD, entity ids in pattern-node
order, triple ids in pattern-edge order). Per root the bound is tighter (:func:`root_bounds`): an edge
the search expands from the start node to a new node costs at least the cheapest such entry of *that
root's* adjacency, not the cheapest over all candidates; the roots are taken in ascending bound, and
within a root its subtree is pruned with its own bound (``rest_now``). On a star whose centre has many
candidates with a few good leaves each, this prunes whole centres before any leaf is expanded.

The search is a loop over an explicit stack held in numpy arrays, so it can stop after
``max_steps`` and resume later: the Python driver checks the deadline between chunks and can
report the best results so far with the lower bound of everything unexplored. A step is one stack
move plus one per ``SCAN_PER_STEP`` adjacency entries scanned when a depth is expanded, so a chunk of
steps takes bounded time even when it expands hubs with tens of thousands of neighbours.

The core never reads out of bounds, whatever the store arrays hold: every entity id (root candidate
or adjacency neighbour), CSR span, relation id and triple id is range-checked before it is used as
an index, and a bad one stops the search with ``CORRUPT`` (``state[S_NEED]`` names the offender)
instead of reading foreign memory. The checks cost a few integer comparisons per scanned entry.

Within mode (``within >= 0``): besides the top-k, every full mapping whose GSD is at most the best
GSD found so far plus ``within`` is written to the ``set_*`` buffers (``state[S_SET]`` of them). The
pruning threshold becomes ``max(k-th best, best + within)``, so nothing within ``within`` of the final
best is pruned; entries that fall out as the best improves are dropped when the buffer is compacted
(and by the caller at the end). A full buffer returns ``SET_FULL`` with the mapping not yet recorded,
so the caller can grow the buffer and resume; once the caller sets ``state[S_SET_CAP]`` (the buffer is
at its cap), the buffer keeps the best mappings offered: the worse of the new mapping and the buffer's
worst entry (``set_f[2]`` holds its row, -1 when unknown) is dropped and the smallest dropped GSD is kept
in ``set_f[0]``. A dropped GSD within the final cut then means that the cap entries kept beside it were
members too, i.e. more than the cap exist (dropping the newcomer instead could lose a member of a set
that fits the cap, once the best improves and the worse entries fall out).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DONE = 0
PAUSED = 1
GROW = 2
CORRUPT = 3
SET_FULL = 4

# integer state slots
S_DEPTH, S_ROOT, S_TOP, S_COUNT, S_STEPS, S_NEED, S_SET, S_SET_CAP = 0, 1, 2, 3, 4, 5, 6, 7
N_STATE = 8
SCAN_PER_STEP = 64  # adjacency entries scanned per counted step


@njit(cache=True, nogil=True)
def _node_dist(p, v, node_any, cand_ptr, cand_ids, cand_dist):
    """Distance of entity v for pattern node p; -1.0 when v is not a candidate."""
    if node_any[p]:
        return 0.0
    lo = cand_ptr[p]
    hi = cand_ptr[p + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if cand_ids[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    if lo < cand_ptr[p + 1] and cand_ids[lo] == v:
        return cand_dist[lo]
    return -1.0


@njit(cache=True, nogil=True)
def _canonical_gsd(f, edge_rel, node_any, cand_ptr, cand_ids, cand_dist, rel_dist):
    """GSD summed in a fixed order (nodes, then edges) so every algorithm reports the same float."""
    gsd = 0.0
    for p in range(f.shape[0]):
        gsd += _node_dist(p, f[p], node_any, cand_ptr, cand_ids, cand_dist)
    for e in range(edge_rel.shape[0]):
        gsd += rel_dist[e, edge_rel[e]]
    return gsd


@njit(cache=True, nogil=True)
def _is_better(gsd, f, tids, res_gsd, res_nodes, res_tids, i):
    """Is the current mapping strictly before result i in (gsd, nodes, triples) order?"""
    if gsd != res_gsd[i]:
        return gsd < res_gsd[i]
    for p in range(f.shape[0]):
        if f[p] != res_nodes[i, p]:
            return f[p] < res_nodes[i, p]
    for e in range(tids.shape[0]):
        if tids[e] != res_tids[i, e]:
            return tids[e] < res_tids[i, e]
    return False


@njit(cache=True, nogil=True)
def _record(gsd, f, tids, rels, res_gsd, res_nodes, res_tids, res_rels, state, k):
    """Insert the current full mapping into the top-k; return the new pruning threshold."""
    count = state[S_COUNT]
    if count < k:
        slot = count
        state[S_COUNT] = count + 1
    else:
        worst = 0
        for i in range(1, k):
            if _is_better(res_gsd[worst], res_nodes[worst], res_tids[worst], res_gsd, res_nodes, res_tids, i):
                worst = i
        if not _is_better(gsd, f, tids, res_gsd, res_nodes, res_tids, worst):
            return _threshold(res_gsd, state, k)
        slot = worst
    res_gsd[slot] = gsd
    res_nodes[slot, :] = f
    res_tids[slot, :] = tids
    res_rels[slot, :] = rels
    return _threshold(res_gsd, state, k)


@njit(cache=True, nogil=True)
def _threshold(res_gsd, state, k):
    if state[S_COUNT] < k:
        return np.inf
    return res_gsd[:k].max()


@njit(cache=True, nogil=True)
def _span(graph_indptr, h, n_adj):
    """Degree of entity h, or -1 when h or its CSR span lies outside the arrays (a corrupt store)."""
    if h < 0 or h + 1 >= graph_indptr.shape[0]:
        return -1
    s = graph_indptr[h]
    t = graph_indptr[h + 1]
    if s < 0 or t < s or t > n_adj:
        return -1
    return t - s


@njit(cache=True, nogil=True)
def _limit(res_gsd, state, k, within):
    """The pruning threshold: the k-th best GSD, or in within mode at least the best plus ``within``."""
    thr = _threshold(res_gsd, state, k)
    if within >= 0.0 and state[S_COUNT] > 0:
        thr = max(thr, res_gsd[:state[S_COUNT]].min() + within)
    return thr


@njit(cache=True, nogil=True)
def _worst_row(set_gsd, n):
    """The row of the largest GSD among the first ``n`` of the within buffer (the first of equals)."""
    worst = 0
    for i in range(1, n):
        if set_gsd[i] > set_gsd[worst]:
            worst = i
    return worst


@njit(cache=True, nogil=True)
def _keep_within(gsd, f, tids, rels, res_gsd, state, within, set_gsd, set_nodes, set_tids, set_rels, set_f):
    """Within mode: write the current mapping to the set buffers when its GSD is within ``within`` of
    the best so far (itself included). A full buffer first drops the entries the best has left behind
    (only when the best improved since the last time: ``set_f[1]``); still full, the worse of the mapping
    and the buffer's worst entry is dropped (its GSD kept in ``set_f[0]``) when
    ``state[S_SET_CAP]`` says the buffer is at its cap, else False is returned and nothing recorded."""
    best = gsd
    if state[S_COUNT] > 0:
        best = min(best, res_gsd[:state[S_COUNT]].min())
    cut = best + within
    if gsd > cut:
        return True
    n = state[S_SET]
    if n >= set_gsd.shape[0] and cut < set_f[1]:
        set_f[1] = cut
        kept = 0
        for i in range(n):
            if set_gsd[i] <= cut:
                if kept != i:
                    set_gsd[kept] = set_gsd[i]
                    set_nodes[kept, :] = set_nodes[i]
                    set_tids[kept, :] = set_tids[i]
                    set_rels[kept, :] = set_rels[i]
                kept += 1
        n = kept
        state[S_SET] = n
        set_f[2] = -1.0  # the worst row moved
    if n >= set_gsd.shape[0]:
        if state[S_SET_CAP] == 0:
            return False
        # at the cap the buffer keeps the best mappings: the worse of this one and the buffer's worst
        # (ties: this one) is dropped, so a dropped GSD within the final cut means more than the cap exist
        if set_f[2] < 0.0:
            set_f[2] = _worst_row(set_gsd, n)
        worst = int(set_f[2])
        if gsd >= set_gsd[worst]:
            set_f[0] = min(set_f[0], gsd)
            return True
        set_f[0] = min(set_f[0], set_gsd[worst])
        set_gsd[worst] = gsd
        set_nodes[worst, :] = f
        set_tids[worst, :] = tids
        set_rels[worst, :] = rels
        set_f[2] = _worst_row(set_gsd, n)
        return True
    set_gsd[n] = gsd
    set_nodes[n, :] = f
    set_tids[n, :] = tids
    set_rels[n, :] = rels
    state[S_SET] = n + 1
    return True


@njit(cache=True, nogil=True)
def _generate(d, graph_indptr, adj_nbr, adj_rel, adj_tid, n_triples, plan, f, edge_tid,
              node_any, cand_ptr, cand_ids, cand_dist, rel_dist, rest, part,
              stk_j, stk_c, lo, hi, cur, state, thr, distinct, edge_distinct, prune, greedy):
    """Push the candidate (relation, node) expansions of depth d onto the stack, sorted by cost.

    Returns the number of steps the scan is worth (adjacency entries scanned / ``SCAN_PER_STEP``),
    or -1 when an adjacency entry points outside the store (``state[S_NEED]``: the entry)."""
    e = plan[0, d]
    a = plan[1, d]
    b = plan[2, d]
    new = plan[3, d] == 1
    h = f[a]
    n_nodes = graph_indptr.shape[0] - 1
    n_rel = rel_dist.shape[1]
    if _span(graph_indptr, h, adj_nbr.shape[0]) < 0:
        state[S_NEED] = h
        return -1
    s = graph_indptr[h]
    t = graph_indptr[h + 1]
    target = -1
    if not new:
        target = f[b]
        lo_s, hi_s = s, t
        while lo_s < hi_s:  # entries are sorted by neighbour: jump to the target's run
            mid = (lo_s + hi_s) >> 1
            if adj_nbr[mid] < target:
                lo_s = mid + 1
            else:
                hi_s = mid
        s = lo_s
    top = state[S_TOP]
    start_top = top
    limit = thr + 1e-9 * (1.0 + abs(thr)) if thr < np.inf else np.inf
    for j in range(s, t):
        v = adj_nbr[j]
        r = adj_rel[j]
        if v < 0 or v >= n_nodes or r < 0 or r >= n_rel or adj_tid[j] < 0 or adj_tid[j] >= n_triples:
            state[S_NEED] = j
            return -1
        if not new and v != target:
            break
        rd = rel_dist[e, r]
        if rd == np.inf:
            continue
        nd = 0.0
        if new:
            nd = _node_dist(b, v, node_any, cand_ptr, cand_ids, cand_dist)
            if nd < 0.0:
                continue
            if _node_taken(v, d, plan, f, distinct):
                continue
        if edge_distinct and _edge_taken(adj_tid[j], d, plan, edge_tid):
            continue
        cost = rd + nd
        if prune and part[d] + cost + rest[d + 1] > limit:
            continue
        stk_j[top] = j
        stk_c[top] = cost
        top += 1
    if greedy and top - start_top > 1:
        order = np.argsort(stk_c[start_top:top], kind="mergesort")
        js = stk_j[start_top:top][order]
        cs = stk_c[start_top:top][order]
        stk_j[start_top:top] = js
        stk_c[start_top:top] = cs
    lo[d] = start_top
    hi[d] = top
    cur[d] = start_top
    state[S_TOP] = top
    return (t - s) // SCAN_PER_STEP


@njit(cache=True, nogil=True)
def _node_taken(v, d, plan, f, distinct):
    """Is entity v already bound to a pattern node mapped before depth d that the node of depth d must
    differ from (``distinct[a, b]``: pattern nodes a and b take distinct entities)?"""
    b = plan[2, d]
    s = plan[4, 0]  # the start node
    if distinct[b, s] and f[s] == v:
        return True
    for dd in range(d):  # noqa: SIM110 (a plain loop compiles best in numba)
        if plan[3, dd] == 1 and distinct[b, plan[2, dd]] and f[plan[2, dd]] == v:
            return True
    return False


@njit(cache=True, nogil=True)
def _edge_taken(tid, d, plan, edge_tid):
    """Is KG triple tid already matched by a pattern edge of an earlier depth? (parallel edges)"""
    for dd in range(d):  # noqa: SIM110
        if edge_tid[plan[0, dd]] == tid:
            return True
    return False


@njit(cache=True, nogil=True)
def root_bounds(graph_indptr, adj_nbr, adj_rel, plan, rest, node_any, cand_ptr, cand_ids, cand_dist, rel_dist,
                root_ids, root_cost, terms):
    """Per root candidate, a lower bound on the GSD of every full mapping that starts from it, tighter than
    ``root_cost + rest[0]`` (eq. 11), returned; and in ``terms[i, d]`` (n_roots x n_edges) the share of depth
    ``d`` in it. For each pattern edge the search expands *from the start node to a new node*, the share is
    the cheapest (relation + node distance) entry of this root's own adjacency instead of the edge's
    smallest relation and node distances over all candidates (``inf`` when the root has no such entry: no
    mapping starts there); the other depths keep their share of ``rest``. Distinctness is ignored, so
    these stay lower bounds. On a corrupt entry the root keeps the plain shares, so the search itself
    reaches it and reports it."""
    n_edges = plan.shape[1]
    start = plan[4, 0]
    n_nodes = graph_indptr.shape[0] - 1
    n_rel = rel_dist.shape[1]
    n_adj = adj_nbr.shape[0]
    out = np.empty(root_ids.shape[0], dtype=np.float64)
    tight = np.empty(n_edges, dtype=np.float64)  # this root's shares, written to terms[i] unless corrupt
    for i in range(root_ids.shape[0]):
        v = root_ids[i]
        for d in range(n_edges):
            terms[i, d] = rest[d] - rest[d + 1]
        out[i] = root_cost[i] + rest[0]  # the plain bound, kept for a corrupt root
        if _span(graph_indptr, v, n_adj) < 0:
            continue
        tight[:] = terms[i]
        corrupt = False
        for d in range(n_edges):
            if plan[1, d] != start or plan[3, d] != 1:
                continue
            e = plan[0, d]
            b = plan[2, d]
            best = np.inf
            for j in range(graph_indptr[v], graph_indptr[v + 1]):
                w = adj_nbr[j]
                r = adj_rel[j]
                if w < 0 or w >= n_nodes or r < 0 or r >= n_rel:
                    corrupt = True
                    break
                rd = rel_dist[e, r]
                if rd >= best:
                    continue
                nd = _node_dist(b, w, node_any, cand_ptr, cand_ids, cand_dist)
                if nd >= 0.0 and rd + nd < best:
                    best = rd + nd
            if corrupt:
                break
            tight[d] = max(best, tight[d])
        if corrupt:
            continue
        terms[i] = tight
        out[i] = max(root_cost[i] + tight.sum(), out[i])
    return out


@njit(cache=True, nogil=True)
def run_search(graph_indptr, adj_nbr, adj_rel, adj_tid, n_triples, plan,
               node_any, cand_ptr, cand_ids, cand_dist, rel_dist,
               root_ids, root_cost, root_bound, root_terms, rest_now, k, distinct, edge_distinct, prune, greedy,
               max_steps,
               f, edge_tid, edge_rel, part, stk_j, stk_c, lo, hi, cur,
               res_gsd, res_nodes, res_tids, res_rels, state,
               within, set_gsd, set_nodes, set_tids, set_rels, set_f):
    """Advance the search by at most ``max_steps`` steps. Returns DONE, PAUSED, GROW, CORRUPT or SET_FULL.

    ``plan`` rows: 0 pattern edge, 1 mapped end, 2 other end, 3 1 if the other end is new,
    4 (column 0) the start node. ``root_bound[i]``: a lower bound on every full mapping from root ``i``
    (at least ``root_cost[i] + rest[0]``; with ``greedy`` the roots come in ascending bound, so the first
    one over the threshold ends the search); ``root_terms[i]`` its per-depth shares (:func:`root_bounds`),
    or no rows. ``rest_now``: the bound of eq. 11 the current root's subtree is pruned with (``rest[d]``:
    the share of the depths from ``d`` on), rewritten from ``root_terms`` as each root starts; with no rows
    the caller's ``rest`` serves every root. The caller keeps it between calls. GROW asks the caller for a
    stack of ``state[S_NEED]`` entries;
    CORRUPT reports an id or CSR span outside the store arrays (``state[S_NEED]``: the offender).
    ``within`` >= 0 turns within mode on (module docstring); below 0 the ``set_*`` buffers are unused.
    ``distinct`` (n_nodes x n_nodes, uint8): pattern nodes a and b must take distinct entities where
    ``distinct[a, b]``; ``edge_distinct``: distinct pattern edges take distinct triples.
    """
    n_edges = plan.shape[1]
    n_adj = adj_nbr.shape[0]
    start = plan[4, 0]
    n_root = root_ids.shape[0]
    thr = _limit(res_gsd, state, k, within)
    steps = 0
    while steps < max_steps:
        steps += 1
        depth = state[S_DEPTH]
        limit = thr + 1e-9 * (1.0 + abs(thr)) if thr < np.inf else np.inf
        if depth == -1:
            i = state[S_ROOT]
            if i >= n_root:
                state[S_STEPS] += steps
                return DONE
            c = root_cost[i]
            if prune and root_bound[i] > limit:
                state[S_ROOT] = n_root if greedy else i + 1
                continue
            v = root_ids[i]
            degree = _span(graph_indptr, v, n_adj)
            if degree < 0:
                state[S_NEED] = v
                state[S_STEPS] += steps
                return CORRUPT
            need = state[S_TOP] + degree
            if need > stk_j.shape[0]:
                state[S_NEED] = need
                state[S_STEPS] += steps
                return GROW
            state[S_ROOT] = i + 1
            if root_terms.shape[0] > 0:
                rest_now[n_edges] = 0.0
                for dd in range(n_edges - 1, -1, -1):
                    rest_now[dd] = rest_now[dd + 1] + root_terms[i, dd]
            f[start] = v
            part[0] = c
            state[S_DEPTH] = 0
            scanned = _generate(0, graph_indptr, adj_nbr, adj_rel, adj_tid, n_triples, plan, f, edge_tid, node_any,
                                cand_ptr, cand_ids, cand_dist, rel_dist, rest_now, part, stk_j, stk_c,
                                lo, hi, cur, state, thr, distinct, edge_distinct, prune, greedy)
            if scanned < 0:
                state[S_STEPS] += steps
                return CORRUPT
            steps += scanned
        elif depth == n_edges:
            gsd = _canonical_gsd(f, edge_rel, node_any, cand_ptr, cand_ids, cand_dist, rel_dist)
            if within >= 0.0 and not _keep_within(gsd, f, edge_tid, edge_rel, res_gsd, state, within,
                                                  set_gsd, set_nodes, set_tids, set_rels, set_f):
                state[S_STEPS] += steps
                return SET_FULL
            _record(gsd, f, edge_tid, edge_rel, res_gsd, res_nodes, res_tids, res_rels, state, k)
            thr = _limit(res_gsd, state, k, within)
            state[S_DEPTH] = n_edges - 1
        else:
            d = depth
            if cur[d] >= hi[d]:
                state[S_TOP] = lo[d]
                state[S_DEPTH] = d - 1
                continue
            j = stk_j[cur[d]]
            c = stk_c[cur[d]]
            if prune and part[d] + c + rest_now[d + 1] > limit:
                cur[d] = hi[d] if greedy else cur[d] + 1
                continue
            if plan[3, d] == 1:
                f[plan[2, d]] = adj_nbr[j]
            if d + 1 < n_edges:
                degree = _span(graph_indptr, f[plan[1, d + 1]], n_adj)
                if degree < 0:
                    state[S_NEED] = f[plan[1, d + 1]]
                    state[S_STEPS] += steps
                    return CORRUPT
                need = state[S_TOP] + degree
                if need > stk_j.shape[0]:
                    state[S_NEED] = need
                    state[S_STEPS] += steps
                    return GROW
            cur[d] += 1
            e = plan[0, d]
            edge_tid[e] = adj_tid[j]
            edge_rel[e] = adj_rel[j]
            part[d + 1] = part[d] + c
            state[S_DEPTH] = d + 1
            if d + 1 < n_edges:
                scanned = _generate(d + 1, graph_indptr, adj_nbr, adj_rel, adj_tid, n_triples, plan, f, edge_tid,
                                    node_any, cand_ptr, cand_ids, cand_dist, rel_dist, rest_now, part, stk_j, stk_c,
                                    lo, hi, cur, state, thr, distinct, edge_distinct, prune, greedy)
                if scanned < 0:
                    state[S_STEPS] += steps
                    return CORRUPT
                steps += scanned
    state[S_STEPS] += steps
    return PAUSED
