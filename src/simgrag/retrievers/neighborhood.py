"""Graph walks the trainable retrievers need, vectorised over the store's undirected CSR adjacency.

- :func:`adjacency_of`: every (source, neighbour, relation, triple) entry of a set of nodes;
- :func:`bfs_layers`: undirected breadth-first layers (nodes at distance 0, 1, …, ``max_depth``);
- :func:`neighborhood_triples`: the triples within ``hops`` of the topic entities, capped;
- :func:`shortest_path_triples`: the triples on shortest (undirected) paths topic → answer, the weak
  supervision of SubgraphRAG (§4.1) and GSR (§4.2).

Nothing here allocates per-entity arrays, so the cost follows the neighbourhood, not the KG size.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from simgrag.kg.store import KGStore

__all__ = ["adjacency_of", "bfs_layers", "neighborhood_triples", "shortest_path_triples"]


def _ids(nodes: Iterable[int] | np.ndarray) -> np.ndarray:
    if isinstance(nodes, np.ndarray):
        return np.unique(nodes.astype(np.int64, copy=False))
    return np.unique(np.fromiter((int(n) for n in nodes), dtype=np.int64))


def adjacency_of(store: KGStore, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(source, neighbour, relation, triple id)`` of every adjacency entry of ``nodes``, in CSR order."""
    nodes = np.asarray(nodes, dtype=np.int64)
    starts = np.asarray(store.indptr[nodes], dtype=np.int64)
    lens = np.asarray(store.indptr[nodes + 1], dtype=np.int64) - starts
    total = int(lens.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
    src = np.repeat(nodes, lens)
    return (src, np.asarray(store.adj_nbr[idx], dtype=np.int64), np.asarray(store.adj_rel[idx], dtype=np.int64),
            np.asarray(store.adj_tid[idx], dtype=np.int64))


def bfs_layers(store: KGStore, sources: Iterable[int] | np.ndarray, max_depth: int) -> list[np.ndarray]:
    """Sorted node ids at undirected distance 0, 1, …, ``max_depth`` from ``sources`` (a layer may be empty)."""
    layer = _ids(sources)
    layers = [layer]
    seen = layer
    for _ in range(max_depth):
        _, nbr, _, _ = adjacency_of(store, layer)
        nbr = np.unique(nbr)
        layer = nbr[~np.isin(nbr, seen, assume_unique=True)]
        layers.append(layer)
        seen = np.union1d(seen, layer)
    return layers


def _water_fill(counts: np.ndarray, budget: int) -> np.ndarray:
    """Per-group quotas ≤ counts summing to min(budget, counts.sum()), as equal as possible."""
    if counts.sum() <= budget:
        return counts.copy()
    lo, hi = 0, int(counts.max())
    while lo < hi:  # largest q with sum(min(counts, q)) <= budget
        mid = (lo + hi + 1) // 2
        if int(np.minimum(counts, mid).sum()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    quota = np.minimum(counts, lo)
    spare = budget - int(quota.sum())
    bigger = np.flatnonzero(counts > lo)[:spare]
    quota[bigger] += 1
    return quota


def _evenly(groups: np.ndarray, quota_of_group: np.ndarray) -> np.ndarray:
    """Mask keeping ``quota`` evenly spaced entries of each run of equal (sorted, contiguous) ``groups``."""
    _, starts, counts = np.unique(groups, return_index=True, return_counts=True)
    rank = np.arange(len(groups)) - np.repeat(starts, counts)
    c = np.repeat(counts, counts)
    k = np.repeat(quota_of_group, counts)
    return ((rank + 1) * k) // c > (rank * k) // c


def neighborhood_triples(store: KGStore, topics: Iterable[int], *, hops: int = 2,
                         max_triples: int = 3000) -> tuple[np.ndarray, bool]:
    """Ids of the triples touching a node within ``hops - 1`` of ``topics`` (i.e. within ``hops`` hops),
    nearest layer first, and whether the cap cut some.

    The cap ``max_triples`` is shared fairly: layer by layer (the topics' own triples first), the
    remaining budget is water-filled over the layer's nodes, so every node keeps
    ``min(its triples, q)`` with one common ``q``; a hub (a genre, a language) gives an evenly spaced
    sample of its triples instead of crowding out everything else.
    """
    layers = bfs_layers(store, topics, max(hops - 1, 0))
    chosen: list[np.ndarray] = []
    taken = np.zeros(0, dtype=np.int64)
    capped = False
    for layer in layers:
        budget = max_triples - len(taken)
        if budget <= 0:
            capped = capped or len(layer) > 0
            break
        src, _, _, tid = adjacency_of(store, layer)
        fresh = ~np.isin(tid, taken)
        src, tid = src[fresh], tid[fresh]
        _, first = np.unique(tid, return_index=True)  # a triple between two nodes of the layer: once
        keep = np.sort(first)
        src, tid = src[keep], tid[keep]
        if len(tid) > budget:
            capped = True
            _, counts = np.unique(src, return_counts=True)  # src is sorted: CSR order of a sorted layer
            tid = tid[_evenly(src, _water_fill(counts, budget))]
        chosen.append(tid)
        taken = np.union1d(taken, tid)
    out = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    return out.astype(np.int64, copy=False), capped


def shortest_path_triples(store: KGStore, topics: Iterable[int], answers: Iterable[int], *,
                          max_hops: int = 3) -> np.ndarray:
    """Sorted ids of the triples on any shortest undirected path from a topic to an answer within
    ``max_hops`` (union over topic-answer pairs; answers farther away, or equal to the topic, add none).

    One BFS from each topic gives the layers; walking back from the answers, an entry (u, v) with
    ``dist(u) = dist(v) - 1`` lies on a shortest path exactly when v does.
    """
    answer_ids = _ids(answers)
    found: list[np.ndarray] = []
    for topic in _ids(topics):
        layers = bfs_layers(store, [int(topic)], max_hops)
        marked = [np.intersect1d(layer, answer_ids) for layer in layers]
        for depth in range(max_hops, 0, -1):
            if len(marked[depth]) == 0:
                continue
            _, nbr, _, tid = adjacency_of(store, marked[depth])
            back = np.isin(nbr, layers[depth - 1])
            found.append(tid[back])
            marked[depth - 1] = np.union1d(marked[depth - 1], nbr[back])
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
