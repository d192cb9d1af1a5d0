"""pattern_bindings (the exact, unranked enumerator of evaluation and learning) against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from simgrag.kg.bindings import BindingLimitError, connected_order, pattern_bindings
from simgrag.kg.store import KGStore


def _random_store(rng: random.Random, n: int = 7, relations: int = 3, triples: int = 22) -> KGStore:
    rows = {(f"e{rng.randrange(n)}", f"r{rng.randrange(relations)}", f"e{rng.randrange(n)}") for _ in range(triples)}
    return KGStore.from_triples(sorted(rows))


def _brute(store: KGStore, edges: list[tuple[int, int, int]], fixed: dict[int, int], distinct: bool) -> set[tuple]:
    triples = {(int(h), int(r), int(t)) for h, r, t in zip(store.heads, store.rels, store.tails, strict=True)}
    slots = sorted({s for e in edges for s in (e[0], e[2])} | set(fixed))
    free = [s for s in slots if s not in fixed]
    out = set()
    for values in itertools.product(range(store.num_entities), repeat=len(free)):
        bound = {**fixed, **dict(zip(free, values, strict=True))}
        if distinct and len(set(bound.values())) < len(bound):
            continue
        if all((bound[h], r, bound[t]) in triples for h, r, t in edges):
            out.add(tuple(sorted(bound.items())))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_every_binding_and_only_those_as_brute_force_finds_them(seed: int) -> None:
    rng = random.Random(seed)
    store = _random_store(rng)
    n_edges = rng.randint(1, 3)
    edges = []
    for i in range(n_edges):  # a connected pattern: each edge touches slot 0 or an earlier edge's slot
        old = rng.randrange(i + 1)
        new = i + 1
        edges.append((old, rng.randrange(store.num_relations), new) if rng.random() < 0.5
                     else (new, rng.randrange(store.num_relations), old))
    if rng.random() < 0.3 and n_edges >= 2:  # close a cycle
        edges.append((0, rng.randrange(store.num_relations), n_edges))
    fixed = {0: rng.randrange(store.num_entities)}
    distinct = rng.random() < 0.5
    found = list(pattern_bindings(store, edges, fixed, distinct=distinct))
    assert {tuple(sorted(b.items())) for b, _ in found} == _brute(store, edges, fixed, distinct)
    for bound, used in found:  # the triple ids are the pattern's edges under the binding
        assert len(used) == len(edges)
        got = {(int(store.heads[t]), int(store.rels[t]), int(store.tails[t])) for t in used}
        assert got == {(bound[h], r, bound[t]) for h, r, t in edges}


def test_a_part_that_touches_no_named_slot_has_no_bindings() -> None:
    store = KGStore.from_triples([("a", "r", "b"), ("c", "r", "d")])
    assert connected_order([(1, 0, 2)], {0}) is None
    assert list(pattern_bindings(store, [(0, 0, 1), (2, 0, 3)], {0: 0})) == []
    assert list(pattern_bindings(store, [(0, 0, 1)], {})) == []


def test_a_loose_pattern_stops_at_the_limit() -> None:
    store = KGStore.from_triples([("hub", "r", f"x{i}") for i in range(50)])
    hub = store.entity_id("hub")
    assert hub is not None
    with pytest.raises(BindingLimitError):
        list(pattern_bindings(store, [(0, 0, 1), (0, 0, 2)], {0: hub}, limit=100))
