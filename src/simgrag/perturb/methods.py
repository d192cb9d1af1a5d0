"""The four OKGQA-P perturbation heuristics (Sui et al., 2025, §3.2, after Raman et al., 2020).

- ``rs`` **relation swapping**: "randomly chooses two edges from 𝒯 and swaps their relations";
- ``rr`` **relation replacement**: replaces the relation of a random edge (v₁, e, v₂) by
  argmin_r s_𝒢(v₁, r, v₂) under a triple scorer trained on 𝒢 (:mod:`simgrag.perturb.scorer`);
- ``er`` **edge rewiring**: replaces the tail v₂ of a random edge by an entity v₃ ∈ 𝒱 \\ 𝒩₁(v₁),
  outside the head's 1-hop neighbourhood in 𝒢 (either direction; v₁ itself excluded), relation kept;
- ``ed`` **edge deletion**: deletes a random edge.

Every method is a pure function of (store, level, seed[, scorer]) → :class:`Perturbation` and changes
exactly :func:`perturbed_count` (level, n) edges (see :mod:`simgrag.perturb.base`). The edges are
visited in the order of one ``numpy.random.default_rng(seed).permutation``, and an edge that cannot be
changed validly (see below) is passed over for the next one; so, for one seed, the edges changed at a
lower level are those changed first at a higher one (exactly for ``ed``, ``er``, ``rr``; for ``rs``
up to its last group). When the KG cannot give that many valid changes, :class:`KGError` says so.

What "valid" means, so that every changed edge really changes and no duplicate triple appears:

- ``rs``: the two edges have different relations, and neither swapped triple is in 𝒢 or made
  already. Swaps change edges two at a time; when the count is odd, the last group is three edges
  with three distinct relations whose relations are rotated (each takes the next one's), which keeps
  the spirit (relations move between existing edges) and the exact count. An odd count of 1, or any
  odd count on a KG with fewer than three relations, is impossible; it is then lowered by one (logged).
- ``rr``: the argmin runs over relations r ≠ e with (v₁, r, v₂) in neither 𝒢 nor the triples made
  already (ties: lowest relation id). An edge with no such relation is passed over.
- ``er``: (v₁, e, v₃) must not have been made already (two edges of one head and relation rewired to
  the same v₃); v₃ is drawn uniformly from 𝒱 \\ 𝒩₁(v₁) \\ {v₁}.
- ``ed``: always valid. Entities keep their table rows even with no edge left (see ``files.py`` for
  how a written KG file keeps them).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from simgrag.errors import ConfigError, KGError
from simgrag.kg.store import KGStore
from simgrag.perturb.base import DELETED, Perturbation, TripleScorer, TripleSet, perturbed_count

__all__ = [
    "METHODS",
    "edge_deletion",
    "edge_rewiring",
    "perturb",
    "relation_replacement",
    "relation_swapping",
]

logger = logging.getLogger(__name__)

#: method code → what it does
METHODS: dict[str, str] = {
    "rs": "relation swapping: swap the relations of pairs of edges",
    "rr": "relation replacement: give an edge its least plausible relation under a triple scorer",
    "er": "edge rewiring: move an edge's tail outside the head's 1-hop neighbourhood",
    "ed": "edge deletion: delete edges (entities stay in the entity table)",
}

_Change = tuple[int, tuple[int, int, int]]
_Generator = Callable[[np.random.Generator, int], Iterator[_Change]]


# ------------------------------------------------------------------------------------------ public
def relation_swapping(store: KGStore, level: float, *, seed: int = 0) -> Perturbation:
    """``rs``: swap the relations of random pairs of edges with different relations."""
    k = perturbed_count(level, store.num_triples)
    if k % 2 and (k < 3 or store.num_relations < 3):
        logger.warning("relation swapping cannot change an odd number (%d) of edges here (%d relation(s)); "
                       "it changes %d", k, store.num_relations, k - 1)
        k -= 1
    return _collect(store, "rs", level, seed, k, lambda rng, k: _swaps(store, rng, k))


def relation_replacement(store: KGStore, level: float, *, seed: int = 0, scorer: TripleScorer,
                         batch_size: int = 4096) -> Perturbation:
    """``rr``: give random edges the relation the scorer finds least plausible for them."""
    k = perturbed_count(level, store.num_triples)
    return _collect(store, "rr", level, seed, k,
                    lambda rng, k: _replacements(store, rng, scorer, batch_size))


def edge_rewiring(store: KGStore, level: float, *, seed: int = 0) -> Perturbation:
    """``er``: move the tails of random edges to entities outside their head's 1-hop neighbourhood."""
    k = perturbed_count(level, store.num_triples)
    return _collect(store, "er", level, seed, k, lambda rng, k: _rewirings(store, rng))


def edge_deletion(store: KGStore, level: float, *, seed: int = 0) -> Perturbation:
    """``ed``: delete random edges; every entity keeps its row in the entity table."""
    k = perturbed_count(level, store.num_triples)
    return _collect(store, "ed", level, seed, k, lambda rng, k: _deletions(store, rng))


def perturb(store: KGStore, method: str, level: float, *, seed: int = 0,
            scorer: TripleScorer | None = None) -> Perturbation:
    """Apply the method named by its code (:data:`METHODS`); ``rr`` needs a ``scorer``."""
    code = method.strip().lower()
    if code == "rr":
        if scorer is None:
            raise ConfigError("relation replacement (rr) needs a triple scorer: train one with "
                              "simgrag.perturb.train_scorer(store) or load one with DistMultScorer.load(DIR).")
        return relation_replacement(store, level, seed=seed, scorer=scorer)
    functions = {"rs": relation_swapping, "er": edge_rewiring, "ed": edge_deletion}
    if code not in functions:
        raise ConfigError(f"unknown perturbation method {method!r}; use one of {', '.join(METHODS)}.")
    return functions[code](store, level, seed=seed)


# ------------------------------------------------------------------------------------------ core
def _collect(store: KGStore, method: str, level: float, seed: int, k: int, generate: _Generator) -> Perturbation:
    rng = np.random.default_rng(seed)
    rows: list[int] = []
    new: list[tuple[int, int, int]] = []
    for row, triple in itertools.islice(generate(rng, k), k):
        rows.append(row)
        new.append(triple)
    if len(rows) < k:
        raise KGError(f"{METHODS[method].split(':')[0]} can change only {len(rows):,} of the {k:,} edges asked for "
                      f"(level {level} of {store.num_triples:,}) on this KG: no other edge has a valid change (one "
                      "that makes a triple new to the KG; see simgrag.perturb.methods). Use a lower level.")
    return Perturbation(method, float(level), int(seed), store, np.array(rows, dtype=np.int64),
                        np.array(new, dtype=np.int32).reshape(-1, 3))


def _deletions(store: KGStore, rng: np.random.Generator) -> Iterator[_Change]:
    for row in rng.permutation(store.num_triples).tolist():
        yield row, DELETED


def _swaps(store: KGStore, rng: np.random.Generator, k: int) -> Iterator[_Change]:
    """Groups of edges with pairwise different relations whose relations rotate (a pair: a swap).

    Edges come in permutation order; one that finds no partner waits in a queue per relation (so at
    any time the waiting edges share at most ``size - 1`` relations) and is paired with later edges.
    """
    heads, rels, tails = store.heads, store.rels, store.tails
    triples = TripleSet(store)
    waiting: dict[int, deque[int]] = {}
    made = 0
    for e in rng.permutation(store.num_triples).tolist():
        size = 3 if k - made == 3 else 2
        rel = int(rels[e])
        others = sorted((q[0], r) for r, q in waiting.items() if r != rel and q)
        if len(others) < size - 1:
            waiting.setdefault(rel, deque()).append(e)
            continue
        group = [row for row, _ in others[: size - 1]] + [e]
        group_rels = [int(rels[row]) for row in group]
        new = [(int(heads[row]), group_rels[(i + 1) % size], int(tails[row])) for i, row in enumerate(group)]
        keys = [int(key) for key in triples.keys(*np.array(new).T)]
        if any(triples.taken(key) for key in keys):
            continue  # e is passed over; the waiting edges keep waiting
        triples.created.update(keys)
        for _, r in others[: size - 1]:
            waiting[r].popleft()
            if not waiting[r]:
                del waiting[r]  # so the waiting edges span at most size - 1 relations
        made += size
        yield from zip(group, new, strict=True)


def _replacements(store: KGStore, rng: np.random.Generator, scorer: TripleScorer,
                  batch_size: int) -> Iterator[_Change]:
    n_rel = store.num_relations
    if n_rel < 2:
        raise KGError("relation replacement needs at least two relations; this KG has one.")
    triples = TripleSet(store)
    all_rels = np.arange(n_rel, dtype=np.int32)
    order = rng.permutation(store.num_triples)
    step = max(1, batch_size)
    for start in range(0, len(order), step):
        rows = order[start:start + step]
        h = np.asarray(store.heads[rows], dtype=np.int32)
        t = np.asarray(store.tails[rows], dtype=np.int32)
        scores = np.asarray(scorer.score(np.repeat(h, n_rel), np.tile(all_rels, len(rows)), np.repeat(t, n_rel)),
                            dtype=np.float64).reshape(len(rows), n_rel)
        keys = triples.keys(h[:, None], all_rels[None, :], t[:, None])
        existing = triples.in_original(keys)  # includes each edge's own relation
        ranked = np.argsort(np.where(existing, np.inf, scores), axis=1, kind="stable")
        for i, row in enumerate(rows.tolist()):
            for rel in ranked[i].tolist():
                if existing[i, rel]:
                    break  # only relations already linking v₁ and v₂ are left
                if int(keys[i, rel]) not in triples.created:
                    triples.created.add(int(keys[i, rel]))
                    yield row, (int(h[i]), rel, int(t[i]))
                    break


_DRAWS = 32


def _rewirings(store: KGStore, rng: np.random.Generator) -> Iterator[_Change]:
    triples = TripleSet(store)
    n_ent = store.num_entities
    for row in rng.permutation(store.num_triples).tolist():
        head, rel = int(store.heads[row]), int(store.rels[row])
        near = np.unique(np.append(store.neighbors(head)[0], head))  # 𝒩₁(v₁) ∪ {v₁}, sorted
        base = int(triples.keys(head, rel, 0))  # key of (v₁, e, v) is base + v
        tail = _outside(rng, n_ent, near, triples.created, base)
        if tail is None:
            continue
        triples.created.add(base + tail)
        yield row, (head, rel, tail)


def _outside(rng: np.random.Generator, n: int, near: np.ndarray, created: set[int], base: int) -> int | None:
    """A uniform draw from {0..n-1} \\ ``near`` (sorted) with ``base + v`` not in ``created``; ``None`` if
    none is left. Rejection sampling first (a neighbourhood is usually tiny), the explicit complement
    after :data:`_DRAWS` misses (hubs).
    """
    if len(near) < n:
        for _ in range(_DRAWS):
            v = int(rng.integers(n))
            pos = int(np.searchsorted(near, v))
            if (pos >= len(near) or near[pos] != v) and base + v not in created:
                return v
    pool = [v for v in np.setdiff1d(np.arange(n), near, assume_unique=True).tolist() if base + v not in created]
    return int(pool[int(rng.integers(len(pool)))]) if pool else None
