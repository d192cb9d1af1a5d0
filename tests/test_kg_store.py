"""KGStore: dedup, CSR adjacency over both directions, types, persistence with mmap."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simgrag.errors import EmptyKGError, KGError
from simgrag.kg import KGStore, NameTable, Triple
from simgrag.kg.twins import twin_ids, twin_relations, without_twins

TRIPLES = [
    ("a", "r", "b"),
    ("b", "r", "a"),
    ("a", "s", "b"),
    ("c", "r", "c"),
    ("a", "r", "b"),
    ("b", "t", "c"),
]
_ARRAYS = ("heads", "rels", "tails", "indptr", "adj_nbr", "adj_rel", "adj_tid",
           "node_type_indptr", "node_types", "type_node_indptr", "type_nodes")


def check_csr(store: KGStore) -> None:
    """Every triple appears once per direction (a self-loop once), sorted by (nbr, rel, tid)."""
    seen: Counter[tuple[int, int, int, int]] = Counter()
    for v in range(store.num_entities):
        nbr, rel, tid = store.neighbors(v)
        keys = list(zip(nbr.tolist(), rel.tolist(), tid.tolist(), strict=True))
        assert keys == sorted(keys)
        for u, r, t in keys:
            assert store.rels[t] == r
            assert {int(store.heads[t]), int(store.tails[t])} == {v, u}
            seen[(v, u, r, t)] += 1
    expected: Counter[tuple[int, int, int, int]] = Counter()
    for t in range(store.num_triples):
        h, r, tl = int(store.heads[t]), int(store.rels[t]), int(store.tails[t])
        expected[(h, tl, r, t)] += 1
        if h != tl:
            expected[(tl, h, r, t)] += 1
    assert seen == expected
    assert int(store.indptr[-1]) == len(store.adj_nbr) == sum(expected.values())


def test_dedup_and_csr() -> None:
    store = KGStore.from_triples(TRIPLES, entity_types=[("a", "T"), ("c", "T"), ("c", "U"), ("zz", "T")])
    assert store.num_triples == 5 and store.duplicates_removed == 1
    assert {store.triple(i).as_tuple() for i in range(store.num_triples)} == set(TRIPLES)
    check_csr(store)
    c = store.entities.id_of("c")
    assert c is not None and store.degree(c) == 2  # self-loop once + b-t-c
    t_type = store.types.id_of("T") if store.types is not None else None
    assert t_type is not None
    assert sorted(store.entities[int(e)] for e in store.nodes_of_type(t_type)) == ["a", "c"]
    assert store.stats()["duplicates_removed"] == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 6)), min_size=1, max_size=40))
def test_csr_property(rows: list[tuple[int, int, int]]) -> None:
    store = KGStore.from_triples([(f"e{h}", f"r{r}", f"e{t}") for h, r, t in rows])
    assert store.num_triples == len(set(rows))
    check_csr(store)


def test_save_load_mmap_round_trip(tmp_path: Path) -> None:
    store = KGStore.from_triples([*TRIPLES, ("Amélie", "in", "French")], entity_types=[("a", "T")])
    store.save(tmp_path)
    for mmap in (True, False):
        loaded = KGStore.load(tmp_path, mmap=mmap)
        if mmap:
            assert isinstance(loaded.heads, np.memmap)
        for name in _ARRAYS:
            np.testing.assert_array_equal(getattr(loaded, name), getattr(store, name))
        assert list(loaded.entities) == list(store.entities)
        assert list(loaded.relations) == list(store.relations)
        assert loaded.content_hash() == store.content_hash()
        assert loaded.triple(0) == store.triple(0)
        check_csr(loaded)


def test_content_hash_distinguishes() -> None:
    one = KGStore.from_triples([("a", "r", "b")])
    assert one.content_hash() == KGStore.from_triples([Triple("a", "r", "b")]).content_hash()
    assert one.content_hash() != KGStore.from_triples([("a", "r", "c")]).content_hash()


def test_errors() -> None:
    with pytest.raises(EmptyKGError):
        KGStore.from_triples([])
    with pytest.raises(KGError, match="out of range"):
        KGStore.from_ids(["a"], ["r"], np.array([0]), np.array([0]), np.array([1]))


def test_load_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(KGError, match="Cannot load"):
        KGStore.load(tmp_path / "missing")


def test_name_table() -> None:
    table = NameTable.from_names(["x", "Amélie", ""])
    assert list(table) == ["x", "Amélie", ""] and table[-1] == "" and table.id_of("Amélie") == 1


# -- twin relations (simgrag.kg.twins) ---------------------------------------------------------------------
def test_twin_relations_are_the_facts_turned_round_found_from_the_triples() -> None:
    facts = [("France", "capital", "Paris"), ("Peru", "capital", "Lima"), ("Lyon", "in", "France"),
             ("Cusco", "in", "Peru"), ("France", "borders", "Spain"), ("Spain", "borders", "France")]
    turned = [(t, f"{r}_inverse", h) for h, r, t in facts]
    # "capital of": Paris's fact turned round, Lima's missing, a wrong one instead: not a twin
    near = [("Paris", "capital of", "France"), ("Lima", "capital of", "Chile")]
    store = KGStore.from_triples(turned[:2] + facts + turned[2:] + near)
    assert twin_relations(store) == {"capital_inverse": "capital", "in_inverse": "in", "borders_inverse": "borders"}
    # names do not decide whether two relations are twins, only which one is kept; a symmetric relation is
    # not its own twin
    renamed = KGStore.from_triples([(t, "seat of government of", h) for h, r, t in facts if r == "capital"] + facts)
    assert twin_relations(renamed) == {"capital": "seat of government of"}  # the first in the KG kept
    assert twin_relations(KGStore.from_triples(facts)) == {}
    ids = twin_ids(store)  # both ways, by id
    capital, inverse = store.relations.id_of("capital"), store.relations.id_of("capital_inverse")
    assert ids[capital] == inverse and ids[inverse] == capital and len(ids) == 6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcde"), st.sampled_from(["r", "r_inverse", "s", "t"]),
                          st.sampled_from("abcde")), min_size=1, max_size=30))
@example([("a", "r", "a"), ("a", "r_inverse", "a"), ("a", "s", "a")])  # three copies of a self-loop: one pair
def test_twins_are_exactly_the_facts_turned_round(triples: list[tuple[str, str, str]]) -> None:
    store = KGStore.from_triples(triples)
    twins = twin_relations(store)
    facts = set(triples)
    for twin, kept in twins.items():
        assert {(t, h) for h, r, t in facts if r == twin} == {(h, t) for h, r, t in facts if r == kept}
    ids = twin_ids(store)
    assert all(ids[ids[a]] == a for a in ids)
    assert len(without_twins(store, range(store.num_relations))) == store.num_relations - len(twins)
