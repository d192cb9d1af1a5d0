"""Relations that store the same facts turned round: ``has_capital`` and ``has_capital_inverse``.

KGs built for path QA (WorldCup2014, PathQuestion) and many RDF exports store each fact twice, once per
direction. Such a *twin* adds no fact: sampling it, listing it or asking the LLM what its ends are only
doubles the work and invites the two to be described differently. :func:`twin_relations` finds them from
the triples alone (names are not trusted): relation ``b`` is a twin of ``a`` when every ``(h, b, t)`` is
also ``(t, a, h)`` and the other way round. Of a pair the one kept is the one whose name the other
contains (``has_capital`` in ``has_capital_inverse``), else the one first in the KG.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np

from simgrag.kg.store import KGStore

__all__ = ["twin_ids", "twin_relations", "without_twins"]

_FOUND: weakref.WeakKeyDictionary[KGStore, dict[int, int]] = weakref.WeakKeyDictionary()  # twin id → kept id


def _pair_keys(store: KGStore, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    return np.sort(heads.astype(np.int64) * max(store.num_entities, 1) + tails.astype(np.int64))


def twin_relations(store: KGStore) -> dict[str, str]:
    """``{twin: kept}`` for every relation whose facts are exactly another relation's turned round (a
    symmetric relation is not its own twin, but a copy of it is: ``borders_with_inverse`` of
    ``borders_with``). One sort per relation of the triples' count: O(T log T) for T triples."""
    rels = np.asarray(store.rels)
    heads, tails = np.asarray(store.heads), np.asarray(store.tails)
    order = np.argsort(rels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(rels, minlength=store.num_relations))])
    by_count: dict[int, list[int]] = {}
    for r in range(store.num_relations):
        size = int(starts[r + 1] - starts[r])
        if size:
            by_count.setdefault(size, []).append(r)
    twins: dict[str, str] = {}
    for group in by_count.values():
        if len(group) < 2:
            continue
        rows = {r: order[starts[r]: starts[r + 1]] for r in group}
        forward = {r: _pair_keys(store, heads[rows[r]], tails[rows[r]]) for r in group}
        turned = {r: _pair_keys(store, tails[rows[r]], heads[rows[r]]) for r in group}
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                name_a, name_b = store.relations[a], store.relations[b]
                if name_a in twins or name_b in twins or not np.array_equal(forward[a], turned[b]):
                    continue
                kept, twin = (name_b, name_a) if name_b in name_a and name_b != name_a else (name_a, name_b)
                twins[twin] = kept
    return twins


def _twin_to_kept(store: KGStore) -> dict[int, int]:
    found = _FOUND.get(store)
    if found is None:
        found = {}
        for twin, kept in twin_relations(store).items():
            a, b = store.relations.id_of(twin), store.relations.id_of(kept)
            if a is not None and b is not None:
                found[a] = b
        _FOUND[store] = found
    return found


def twin_ids(store: KGStore) -> dict[int, int]:
    """Relation id → the id of its twin, both ways (:func:`twin_relations`; found once per store)."""
    found = _twin_to_kept(store)
    return {**found, **{kept: twin for twin, kept in found.items()}}


def without_twins(store: KGStore, relations: Iterable[int]) -> list[int]:
    """``relations`` less each twin whose kept relation is among them (the same facts turned round)."""
    given = list(relations)
    found = _twin_to_kept(store)
    present = set(given)
    return [r for r in given if found.get(r) not in present]
