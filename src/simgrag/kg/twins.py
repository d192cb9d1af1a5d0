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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from simgrag.kg.store import KGStore

__all__ = ["twin_ids", "twin_relations", "without_twins"]


@dataclass(frozen=True)
class _Twins:
    names: Mapping[str, str]  # twin → kept, by name
    kept: Mapping[int, int]  # twin id → kept id
    pairs: Mapping[int, int]  # relation id → its twin's id, both ways


_FOUND: weakref.WeakKeyDictionary[KGStore, _Twins] = weakref.WeakKeyDictionary()


def _twins(store: KGStore) -> _Twins:
    """The store's twins, found once per store (a store's triples do not change)."""
    found = _FOUND.get(store)
    if found is None:
        ids = _find_twins(store)
        names = {store.relations[t]: store.relations[k] for t, k in ids.items()}
        found = _Twins(MappingProxyType(names), MappingProxyType(ids),
                       MappingProxyType({**ids, **{k: t for t, k in ids.items()}}))
        _FOUND[store] = found
    return found


def twin_relations(store: KGStore) -> dict[str, str]:
    """``{twin: kept}`` for every relation whose facts are exactly another relation's turned round (a
    symmetric relation is not its own twin, but a copy of it is: ``borders_with_inverse`` of
    ``borders_with``). One sort per relation of the triples' count, O(T log T) for T triples, once per store."""
    return dict(_twins(store).names)


def twin_ids(store: KGStore) -> Mapping[int, int]:
    """Relation id → the id of its twin, both ways (:func:`twin_relations`; read-only, found once per store)."""
    return _twins(store).pairs


def without_twins(store: KGStore, relations: Iterable[int]) -> list[int]:
    """``relations`` less each twin whose kept relation is among them (the same facts turned round)."""
    given = list(relations)
    kept = _twins(store).kept
    present = set(given)
    return [r for r in given if kept.get(r) not in present]


def _pair_keys(store: KGStore, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    return np.sort(heads.astype(np.int64) * max(store.num_entities, 1) + tails.astype(np.int64))


def _find_twins(store: KGStore) -> dict[int, int]:
    """Twin id → kept id (module docstring)."""
    rels = np.asarray(store.rels)
    heads, tails = np.asarray(store.heads), np.asarray(store.tails)
    order = np.argsort(rels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(rels, minlength=store.num_relations))])
    by_count: dict[int, list[int]] = {}
    for r in range(store.num_relations):
        size = int(starts[r + 1] - starts[r])
        if size:
            by_count.setdefault(size, []).append(r)
    twins: dict[int, int] = {}
    paired: set[int] = set()  # a relation is in one pair at most (three copies of one self-loop fact pair only once)
    for group in by_count.values():
        if len(group) < 2:
            continue
        rows = {r: order[starts[r]: starts[r + 1]] for r in group}
        forward = {r: _pair_keys(store, heads[rows[r]], tails[rows[r]]) for r in group}
        turned = {r: _pair_keys(store, tails[rows[r]], heads[rows[r]]) for r in group}
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a in paired or b in paired or not np.array_equal(forward[a], turned[b]):
                    continue
                name_a, name_b = store.relations[a], store.relations[b]
                twin, kept = (a, b) if name_b in name_a and name_b != name_a else (b, a)
                twins[twin] = kept
                paired.update((a, b))
    return twins

