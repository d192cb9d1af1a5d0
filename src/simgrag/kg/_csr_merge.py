"""The adjacency of an updated store, merged instead of rebuilt (:mod:`simgrag.kg.delta`).

The base store's CSR lists, per entity, its entries sorted by (neighbour, relation, triple). An
update drops the entries of removed triples, renumbers the rest (triple ids shift as triples are
inserted; relation ids when relations are dropped: both monotone, so the order holds) and inserts the
new triples' entries where they sort. Only the rows of the entities the new triples touch are
searched; the rest is one pass of copies. The result equals :func:`~simgrag.kg.store.build_csr` on
the new triples (tests/test_kg_delta.py checks it array for array).
"""

from __future__ import annotations

import logging

import numpy as np

from simgrag.kg.store import KGStore, build_csr

__all__ = ["fits", "merge_adjacency"]

logger = logging.getLogger(__name__)

_INT64_MAX = np.iinfo(np.int64).max


def fits(*factors: int) -> bool:
    """Whether the product of ``factors`` fits an int64 (the composite sort keys below)."""
    total = 1
    for f in factors:
        total *= max(1, int(f))
    return total < _INT64_MAX


def merge_adjacency(base: KGStore, n: int, n_rel: int, rel_map: np.ndarray | None, old_to_new: np.ndarray,
               heads: np.ndarray, rels: np.ndarray, tails: np.ndarray, new_tid: np.ndarray) -> dict[str, np.ndarray]:
    """The CSR of the updated triples: the base's entries (renumbered, removed ones dropped) with the
    new triples' entries inserted where they sort. Only the rows of entities the new triples touch are
    searched; the rest is one pass of copies."""
    indptr0 = np.asarray(base.indptr)
    tid = old_to_new[np.asarray(base.adj_tid)]
    nbr, rel = np.asarray(base.adj_nbr), np.asarray(base.adj_rel)
    counts = np.zeros(n, dtype=np.int64)
    counts[: base.num_entities] = np.diff(indptr0)
    keep = tid >= 0
    if not bool(keep.all()):
        dropped = np.flatnonzero(~keep)
        counts -= np.bincount(np.searchsorted(indptr0, dropped, side="right") - 1, minlength=n)
        tid, nbr, rel = tid[keep], nbr[keep], rel[keep]
    if rel_map is not None:
        rel = rel_map[rel]
    nh, nr, nt = (a[new_tid].astype(np.int64) for a in (heads, rels, tails))
    loop = nh == nt
    add_src, add_nbr = np.concatenate([nh, nt[~loop]]), np.concatenate([nt, nh[~loop]])
    add_rel, add_tid = np.concatenate([nr, nr[~loop]]), np.concatenate([new_tid, new_tid[~loop]])
    at, order = _insert_points(counts, nbr, rel, tid, heads, add_src, add_nbr, add_rel, add_tid, n, n_rel)
    if at is None:  # never expected: the base adjacency is out of order
        logger.warning("the adjacency of the base store is not in the expected order; rebuilding it")
        indptr, a_nbr, a_rel, a_tid = build_csr(n, heads, tails, rels)
    else:
        a_nbr = np.insert(nbr.astype(np.int32), at, add_nbr[order].astype(np.int32))
        a_rel = np.insert(rel.astype(np.int32), at, add_rel[order].astype(np.int32))
        a_tid = np.insert(tid.astype(np.int32), at, add_tid[order].astype(np.int32))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts + np.bincount(add_src, minlength=n), out=indptr[1:])
    return {"heads": heads, "rels": rels, "tails": tails, "indptr": indptr, "adj_nbr": a_nbr,
            "adj_rel": a_rel, "adj_tid": a_tid}


def _insert_points(counts: np.ndarray, nbr: np.ndarray, rel: np.ndarray, tid: np.ndarray, heads: np.ndarray,
                   add_src: np.ndarray, add_nbr: np.ndarray, add_rel: np.ndarray, add_tid: np.ndarray, n: int,
                   n_rel: int) -> tuple[np.ndarray | None, np.ndarray]:
    """Where each new entry goes in the kept entries (and the order to insert them in), searching only
    the rows of the entities the new entries belong to; ``None`` when those rows are out of order."""
    starts = np.concatenate([[0], np.cumsum(counts)])
    touched = np.unique(add_src)
    if not fits(len(touched) + 1, n, n_rel, 2):
        return None, np.zeros(0, dtype=np.int64)
    lo, lengths = starts[touched], counts[touched]
    seg_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = np.repeat(lo - seg_start, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
    seg = np.repeat(np.arange(len(touched), dtype=np.int64), lengths)
    span = n * n_rel * 2
    old_key = seg * span + _entry_keys(touched[seg], nbr[rows].astype(np.int64), rel[rows].astype(np.int64),
                                       tid[rows], heads, n_rel)
    if len(old_key) and not bool((old_key[1:] > old_key[:-1]).all()):
        return None, np.zeros(0, dtype=np.int64)
    rank = np.searchsorted(touched, add_src)
    new_key = rank * span + _entry_keys(add_src, add_nbr, add_rel, add_tid, heads, n_rel)
    order = np.argsort(new_key, kind="stable")
    found = np.searchsorted(old_key, new_key[order])
    r = rank[order]
    return lo[r] + (found - seg_start[r]), order


def _entry_keys(src: np.ndarray, nbr: np.ndarray, rel: np.ndarray, tid: np.ndarray, heads: np.ndarray,
                n_rel: int) -> np.ndarray:
    """One int64 per adjacency entry, in (neighbour, relation, triple) order within an entity's row.

    At most two entries of a row share (neighbour, relation): one from (a, r, b), one from (b, r, a).
    The triples are sorted by head, so the one whose head is the smaller entity has the smaller triple
    id: the last bit says which one this is.
    """
    forward = heads[tid] == src
    later = (forward != (src < nbr)) & (src != nbr)
    return (nbr * n_rel + rel) * 2 + later
