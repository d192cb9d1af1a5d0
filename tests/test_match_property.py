"""Property tests: optimized search == naive Algorithm 1 == brute force, on random KGs and patterns."""

from __future__ import annotations

import time
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simgrag.kg.store import KGStore
from simgrag.match import _kernel
from simgrag.match import restrict as restrict_module
from simgrag.match import search as search_module
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.search import Distinct, search_subgraphs, typed_pairs
from simgrag.pattern.graph import Pattern
from simgrag.testing.brute_force import brute_force_top_k, brute_force_within


@pytest.fixture(autouse=True)
def _root_bounds_on_small_kgs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-root bound (search.ROOT_BOUND_MIN_ENTRIES) is skipped on small searches: forced on here, so
    every optimized search of these tests runs with it."""
    monkeypatch.setattr(search_module, "ROOT_BOUND_MIN_ENTRIES", 0)


# Few distinct distances so that ties are common and tie-breaking is exercised.
DISTS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 0.1, 0.3])


@st.composite
def kg_strategy(draw: st.DrawFn) -> KGStore:
    n = draw(st.integers(3, 7))
    r = draw(st.integers(1, 3))
    triples = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, r - 1), st.integers(0, n - 1)),
                            min_size=2, max_size=16))
    if not draw(st.booleans()):  # self-loops are rare in KGs: keep them in half the cases
        triples = [t for t in triples if t[0] != t[2]] or [(0, 0, 1)]
    return KGStore.from_triples([(f"e{h}", f"r{rel}", f"e{t}") for h, rel, t in triples])


SHAPES = ["path", "star", "triangle", "cycle4", "parallel", "random", "self_loop"]


@st.composite
def pattern_edges(draw: st.DrawFn) -> list[tuple[int, int]]:
    shape = draw(st.sampled_from(SHAPES))
    if shape == "path":
        m = draw(st.integers(1, 3))
        return [(i, i + 1) for i in range(m)]
    if shape == "star":
        m = draw(st.integers(2, 3))
        return [(0, i + 1) for i in range(m)]
    if shape == "triangle":
        return [(0, 1), (1, 2), (2, 0)]
    if shape == "cycle4":
        return [(0, 1), (1, 2), (2, 3), (3, 0)]
    if shape == "parallel":
        return [(0, 1), (1, 0), *draw(st.sampled_from([[], [(1, 2)]]))]
    if shape == "self_loop":
        return [(0, 1), (1, 1)]
    n = draw(st.integers(2, 4))
    edges = [(draw(st.integers(0, i - 1)), i) for i in range(1, n)]  # spanning tree
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1]),
                          max_size=2))
    return [(a, b) if draw(st.booleans()) else (b, a) for a, b in edges + extra]


def draw_pattern(draw: st.DrawFn, store: KGStore, edges: list[tuple[int, int]], dists: st.SearchStrategy[float],
                 *, unknown_relations: int) -> tuple[Pattern, CandidateTable]:
    """A pattern over ``edges`` with candidates drawn from ``store``: a node is UNKNOWN 3 times in 10, a relation
    ``unknown_relations`` times in 10; the others get some candidates at distances drawn from ``dists``."""
    n_nodes = 1 + max(max(a, b) for a, b in edges)
    names, nodes = [], []
    for i in range(n_nodes):
        if draw(st.integers(0, 9)) < 3:
            names.append(f"UNKNOWN thing {i}")
            nodes.append(NodeCandidates.anything())
        else:
            names.append(f"node {i}")
            ids = draw(st.lists(st.integers(0, store.num_entities - 1), min_size=1, max_size=store.num_entities,
                                unique=True))
            nodes.append(NodeCandidates.from_pairs(ids, [draw(dists) for _ in ids]))
    rels: list[tuple[list[int], list[float]] | None] = []
    for _ in edges:
        if draw(st.integers(0, 9)) < unknown_relations:
            rels.append(None)
        else:
            ids = draw(st.lists(st.integers(0, store.num_relations - 1), min_size=1, unique=True,
                                max_size=store.num_relations))
            rels.append((ids, [draw(dists) for _ in ids]))
    rel_names = [f"rel {j}" if rels[j] is not None else f"UNKNOWN relation {j}" for j in range(len(edges))]
    pattern = Pattern.from_triples([[names[a], rel_names[j], names[b]] for j, (a, b) in enumerate(edges)])
    assert len(pattern.nodes) == n_nodes
    return pattern, CandidateTable.from_relation_pairs(nodes, rels, store.num_relations)


@st.composite
def case(draw: st.DrawFn) -> tuple[KGStore, Pattern, CandidateTable]:
    store = draw(kg_strategy())
    pattern, table = draw_pattern(draw, store, draw(pattern_edges()), DISTS, unknown_relations=2)
    return store, pattern, table


#: the three matching semantics: injective, homomorphic, walks (pairs of typed_pairs kept apart)
MODES = st.sampled_from([True, False, "typed"])


def _distinct(mode: bool | str, pattern: Pattern) -> Distinct:
    return typed_pairs(pattern) if mode == "typed" else bool(mode)


def _keys(matches: object) -> list[tuple[float, tuple[int, ...], tuple[int, ...]]]:
    return [m.key() for m in matches]  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case(), st.sampled_from([1, 2, 3, 5, 20]), MODES)
def test_optimized_equals_naive_equals_brute_force(data: tuple[KGStore, Pattern, CandidateTable], k: int,
                                                   mode: bool | str) -> None:
    store, pattern, table = data
    injective = _distinct(mode, pattern)
    expected = brute_force_top_k(store, pattern, table, k, injective=injective)
    naive = search_subgraphs(store, pattern, table, k=k, injective=injective, algorithm="naive")
    optimized = search_subgraphs(store, pattern, table, k=k, injective=injective, algorithm="optimized")
    assert naive.complete and optimized.complete
    assert _keys(naive.matches) == _keys(expected)
    assert _keys(optimized.matches) == _keys(expected)
    for got, want in zip(optimized.matches, expected, strict=True):
        assert got.node_dists == want.node_dists
        assert got.edge_dists == want.edge_dists
        assert got.gsd == pytest.approx(sum(got.node_dists) + sum(got.edge_dists))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case(), st.sampled_from([1, 2, 3, 5, 20]), MODES)
def test_search_on_the_restricted_graph_equals_brute_force(data: tuple[KGStore, Pattern, CandidateTable], k: int,
                                                            mode: bool | str) -> None:
    """Arc consistency + the candidate-restricted graph (match/restrict.py), forced on small KGs, in every
    matching mode and on KGs with self-loops (kept for the edges whose ends may share an entity)."""
    store, pattern, table = data
    injective = _distinct(mode, pattern)
    expected = brute_force_top_k(store, pattern, table, k, injective=injective)
    with mock.patch.object(restrict_module, "MIN_CANDIDATES", 0):
        eligible = (not any(c.any_entity for c in table.nodes)
                    and all(e.source != e.target for e in pattern.edges) and len(pattern.components()) == 1)
        applied = restrict_module.restrict(store, pattern, table, injective=injective)
        assert (applied is not None) == eligible
        got = search_subgraphs(store, pattern, table, k=k, injective=injective)
    assert got.complete
    assert _keys(got.matches) == _keys(expected)
    for mine, want in zip(got.matches, expected, strict=True):
        assert mine.node_dists == want.node_dists and mine.edge_dists == want.edge_dists


def test_hub_centred_star_is_searched_on_a_small_graph() -> None:
    """A typed centre with many candidates, two named leaves with many candidates each, and a hub:
    arc consistency keeps only centres adjacent to candidates of both leaves, and the search on the
    restricted graph returns exactly the full search's (naive, unrestricted) top-k."""
    rng = np.random.default_rng(3)
    n = 20_000
    triples = [(f"e{h}", f"r{r}", f"e{t}") for h, r, t in
               zip(rng.integers(0, n, 60_000), rng.integers(0, 4, 60_000), rng.integers(0, n, 60_000), strict=True)
               if h != t]
    triples += [("e0", "r0", f"e{i}") for i in range(1, n, 3)]  # e0: a hub with ~6,700 neighbours
    store = KGStore.from_triples(triples)
    ids = np.arange(store.num_entities)
    centre = NodeCandidates.from_pairs(ids[ids % 2 == 0], np.zeros(int((ids % 2 == 0).sum())))
    leaves = [NodeCandidates.from_pairs(rng.choice(ids, 5000, replace=False), rng.random(5000)) for _ in range(2)]
    pattern = Pattern.from_triples([["UNKNOWN thing 1", "rel a", "leaf a"], ["UNKNOWN thing 1", "rel b", "leaf b"]])
    table = CandidateTable.from_relation_pairs([centre, *leaves], [([0, 1], [0.0, 0.2]), ([0, 2, 3], [0.1, 0.0, 0.3])],
                                               store.num_relations)
    small = restrict_module.restrict(store, pattern, table)
    assert small is not None
    assert len(small.table.nodes[0]) < len(centre) // 2  # centres without both leaves are gone
    assert len(small.adj_nbr) < len(store.adj_nbr) // 2
    got = search_subgraphs(store, pattern, table, k=5)
    want = search_subgraphs(store, pattern, table, k=5, algorithm="naive")
    assert _keys(got.matches) == _keys(want.matches) and len(got.matches) == 5
    # restricting takes at most RESTRICT_SHARE of the time left to the search's deadline; past it, the whole KG
    assert restrict_module.restrict(store, pattern, table, deadline=time.perf_counter()) is None
    assert restrict_module.restrict(store, pattern, table, deadline=time.perf_counter() + 60) is not None


def test_a_path_between_two_typed_nodes_is_restricted_through_its_cheap_edges_first() -> None:
    """named – typed – typed – named: the middle edge joins two large candidate sets and costs more
    than a pass may scan, so the first pass scans the two named ends' edges only; they shrink the
    typed nodes, the middle edge becomes affordable, and the search runs on the small graph."""
    rng = np.random.default_rng(5)
    n = 20_000
    triples = [(f"e{h}", f"r{r}", f"e{t}") for h, r, t in
               zip(rng.integers(0, n, 80_000), rng.integers(0, 3, 80_000), rng.integers(0, n, 80_000), strict=True)
               if h != t]
    store = KGStore.from_triples(triples)
    ids = np.arange(store.num_entities)
    typed = [NodeCandidates.from_pairs(ids[ids % 2 == p], np.zeros(int((ids % 2 == p).sum()))) for p in (0, 1)]
    named = [NodeCandidates.from_pairs(rng.choice(ids, 40, replace=False), rng.random(40)) for _ in range(2)]
    pattern = Pattern.from_triples([["a", "rel a", "UNKNOWN x 1"], ["UNKNOWN x 1", "rel m", "UNKNOWN y 1"],
                                    ["UNKNOWN y 1", "rel b", "b"]])
    table = CandidateTable.from_relation_pairs([named[0], typed[0], typed[1], named[1]],
                                               [([0], [0.0]), ([1, 2], [0.0, 0.1]), ([2], [0.0])], store.num_relations)
    middle = int(sum(store.degree(int(v)) for v in typed[0].ids))
    with mock.patch.object(restrict_module, "MAX_SCAN_ENTRIES", middle // 4):
        small = restrict_module.restrict(store, pattern, table)
        assert small is not None and len(small.table.nodes[1]) < len(typed[0]) // 20
        got = search_subgraphs(store, pattern, table, k=5)
    want = search_subgraphs(store, pattern, table, k=5, algorithm="naive")  # unrestricted (brute force: too slow)
    assert got.complete and want.complete and _keys(got.matches) == _keys(want.matches) and len(want.matches) > 0
    with mock.patch.object(restrict_module, "MAX_SCAN_ENTRIES", 10):  # not even the cheap edges: the whole KG
        assert restrict_module.restrict(store, pattern, table) is None


def _chain_kg() -> KGStore:
    # movie -directed_by-> director, movie -starred_actors-> actor, plus a second film per person
    triples = [("Inception", "directed_by", "Nolan"), ("Inception", "starred_actors", "DiCaprio"),
               ("Memento", "directed_by", "Nolan"), ("Titanic", "starred_actors", "DiCaprio"),
               ("Titanic", "directed_by", "Cameron"), ("Inception", "written_by", "Nolan")]
    return KGStore.from_triples(triples)


def test_parallel_pattern_edges_need_two_triples() -> None:
    store = _chain_kg()
    pattern = Pattern.from_triples([["UNKNOWN person 1", "directed", "Inception"],
                                    ["UNKNOWN person 1", "wrote", "Inception"]])
    inc = store.entities.id_of("Inception")
    table = CandidateTable.from_relation_pairs([NodeCandidates.anything(), NodeCandidates.from_pairs([inc], [0.0])],
                                               [None, None], store.num_relations)
    result = search_subgraphs(store, pattern, table, k=5)
    people = {store.entities[m.nodes[0]] for m in result.matches}
    assert people == {"Nolan"}  # only Nolan has two triples with Inception
    assert all(m.triples[0] != m.triples[1] for m in result.matches)
    loose = search_subgraphs(store, pattern, table, k=20, injective=False)
    assert {store.entities[m.nodes[0]] for m in loose.matches} == {"Nolan", "DiCaprio"}


def test_deadline_returns_best_so_far_with_lower_bound() -> None:
    rng = np.random.default_rng(0)
    n = 400
    heads = rng.integers(0, n, 6000)
    tails = rng.integers(0, n, 6000)
    store = KGStore.from_triples([(f"e{h}", "r", f"e{t}") for h, t in zip(heads, tails, strict=True) if h != t])
    pattern = Pattern.from_triples([["A", "r", "B"], ["B", "r", "C"], ["C", "r", "D"], ["D", "r", "A"]])
    cands = [NodeCandidates.from_pairs(np.arange(n), rng.random(n)) for _ in range(4)]
    table = CandidateTable.from_relation_pairs(cands, [([0], [0.0])] * 4, store.num_relations)
    partial = search_subgraphs(store, pattern, table, k=3, algorithm="naive", max_steps=2_000)
    assert not partial.complete
    full = search_subgraphs(store, pattern, table, k=3)
    assert full.complete
    assert partial.lower_bound <= full.matches[-1].gsd + 1e-12
    if partial.matches:
        assert partial.matches[0].gsd >= full.matches[0].gsd


def test_expanding_a_hub_counts_its_scan_so_chunks_stay_short() -> None:
    """The deadline is checked between chunks of steps; a hub's adjacency scan must count in the
    steps, or one chunk of 20,000 steps over hubs could run for seconds past the deadline."""
    from simgrag.match._kernel import SCAN_PER_STEP

    degree = 50_000
    store = KGStore.from_triples([("hub", "r", f"leaf{i}") for i in range(degree)])
    hub = store.entities.id_of("hub")
    pattern = Pattern.from_triples([["Hub", "r", "UNKNOWN leaf 1"]])
    table = CandidateTable.from_relation_pairs(
        [NodeCandidates.from_pairs([hub], [0.0]), NodeCandidates.anything()], [([0], [0.0])],
        store.num_relations)
    one = search_subgraphs(store, pattern, table, k=3, max_steps=2)  # step 1 grows the stack
    assert not one.complete and one.steps >= degree // SCAN_PER_STEP
    full = search_subgraphs(store, pattern, table, k=3)
    assert full.complete and len(full.matches) == 3


def test_disconnected_pattern_combines_components() -> None:
    store = _chain_kg()
    pattern = Pattern.from_triples([["UNKNOWN director 1", "directed", "Memento"],
                                    ["UNKNOWN actor 1", "acted in", "Titanic"]])
    ids = {name: store.entities.id_of(name) for name in ("Memento", "Titanic")}
    table = CandidateTable.from_relation_pairs(
        [NodeCandidates.anything(), NodeCandidates.from_pairs([ids["Memento"]], [0.0]),
         NodeCandidates.anything(), NodeCandidates.from_pairs([ids["Titanic"]], [0.0])],
        [([0], [0.1]), ([1], [0.2])], store.num_relations)
    result = search_subgraphs(store, pattern, table, k=2)
    assert result.combination == "sum-of-components"
    assert len(result.components) == 2
    best = result.matches[0]
    assert store.entities[best.nodes[0]] == "Nolan"
    assert store.entities[best.nodes[2]] == "DiCaprio"
    assert best.gsd == pytest.approx(0.3)


@pytest.mark.parametrize("num_entities", [50, 5000])  # dense path (groups cover much of the KG) and sparse
def test_candidates_from_groups_equals_from_pairs(num_entities: int) -> None:
    rng = np.random.default_rng(num_entities)
    for _ in range(30):
        groups = []
        for _ in range(int(rng.integers(0, 6))):
            ids = np.sort(rng.choice(num_entities, size=int(rng.integers(0, 40)), replace=False))
            groups.append((ids.astype(np.int32), float(rng.choice([0.25, 0.5, rng.random()]))))
        got = NodeCandidates.from_groups(groups, num_entities)
        want = NodeCandidates.from_pairs(
            np.concatenate([g for g, _ in groups]) if groups else np.zeros(0, np.int64),
            np.concatenate([np.full(len(g), d) for g, d in groups]) if groups else np.zeros(0))
        assert not got.any_entity
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.dists, want.dists)
        assert got.ids.dtype == np.int64 and got.dists.dtype == np.float64


# -- within mode: every match within ε of the best (answer sets) -------------------------------------

WITHIN = st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 10.0])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case(), st.sampled_from([1, 3, 20]), MODES, WITHIN, st.sampled_from(["optimized", "naive"]))
def test_within_set_equals_brute_force(data: tuple[KGStore, Pattern, CandidateTable], k: int, mode: bool | str,
                                       within: float, algorithm: str) -> None:
    store, pattern, table = data
    injective = _distinct(mode, pattern)
    result = search_subgraphs(store, pattern, table, k=k, injective=injective, algorithm=algorithm,  # type: ignore[arg-type]
                              within=within)
    expected = brute_force_within(store, pattern, table, within, injective=injective)
    assert result.within is not None and result.within.complete and not result.within.capped
    got = result.within.matches()
    assert _keys(got) == _keys(expected)
    for have, want in zip(got, expected, strict=True):
        assert have.node_dists == want.node_dists and have.edge_dists == want.edge_dists
    # the top-k are those of a plain search: within mode changes nothing else
    assert _keys(result.matches) == _keys(brute_force_top_k(store, pattern, table, k, injective=injective))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case(), st.sampled_from([1, 3]), WITHIN, st.integers(1, 40), MODES)
def test_within_set_on_the_restricted_graph_equals_brute_force(data: tuple[KGStore, Pattern, CandidateTable],
                                                               k: int, within: float, cap: int,
                                                               mode: bool | str) -> None:
    """Answer sets searched on the candidate-restricted graph (forced on small KGs; every matching mode,
    KGs with and without self-loops) carry global entity ids and are the brute-force set, capped or not."""
    store, pattern, table = data
    injective = _distinct(mode, pattern)
    expected = brute_force_within(store, pattern, table, within, injective=injective)
    with mock.patch.object(restrict_module, "MIN_CANDIDATES", 0):
        result = search_subgraphs(store, pattern, table, k=k, within=within, within_cap=cap, injective=injective)
    assert result.within is not None and result.within.capped == (len(expected) > cap)
    got = result.within.matches()
    assert set(_keys(got)) <= set(_keys(expected))
    if len(expected) <= cap:
        assert _keys(got) == _keys(expected)
        for have, want in zip(got, expected, strict=True):
            assert have.node_dists == want.node_dists and have.edge_dists == want.edge_dists
    assert _keys(result.matches) == _keys(brute_force_top_k(store, pattern, table, k, injective=injective))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case(), WITHIN, st.integers(1, 4))
def test_within_set_capped_keeps_true_members(data: tuple[KGStore, Pattern, CandidateTable], within: float,
                                              cap: int) -> None:
    store, pattern, table = data
    expected = brute_force_within(store, pattern, table, within)
    result = search_subgraphs(store, pattern, table, k=3, within=within, within_cap=cap)
    assert result.within is not None
    got = _keys(result.within.matches())
    assert len(got) <= cap
    assert set(got) <= set(_keys(expected))
    assert result.within.capped == (len(expected) > cap)
    assert result.within.complete == (len(expected) <= cap)
    if len(expected) <= cap:
        assert got == _keys(expected)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.55, 0.6, 0.62, 0.7, 1.0]), min_size=1, max_size=14),
       WITHIN, st.integers(1, 5))
@example([0.6, 0.7, 0.7, 0.62, 0.55], 0.1, 3)
def test_within_buffer_at_its_cap_is_exact_in_any_arrival_order(arrivals: list[float], within: float,
                                                               cap: int) -> None:
    """The kernel's within buffer fed mappings in any order (the best improving on the way), at its cap
    from the start: ``capped`` (a dropped GSD within the final cut) holds exactly when more than the cap
    are within the final cut, and otherwise the buffer holds every one of them. (Dropping the newcomer
    instead of the buffer's worst lost a member once the best improved: GSDs .6 .7 .7, then .62 dropped,
    then .55 left .7 .7 behind, cap 3 — a set of 3 reported capped.)"""
    state = np.zeros(_kernel.N_STATE, dtype=np.int64)
    state[_kernel.S_SET_CAP] = 1
    res_gsd = np.full(1, np.inf)
    set_gsd, set_f = np.zeros(cap), np.array([np.inf, np.inf, -1.0])
    set_nodes, set_tids, set_rels = (np.zeros((cap, 1), dtype=np.int64) for _ in range(3))
    for row, gsd in enumerate(arrivals):
        mapping = np.array([row], dtype=np.int64)
        assert _kernel._keep_within(gsd, mapping, mapping, mapping, res_gsd, state, within,
                                    set_gsd, set_nodes, set_tids, set_rels, set_f)
        res_gsd[0], state[_kernel.S_COUNT] = min(res_gsd[0], gsd), 1  # the top-1 the search would record
    cut = min(arrivals) + within
    members = {row for row, gsd in enumerate(arrivals) if gsd <= cut}
    n = int(state[_kernel.S_SET])
    kept = {int(set_nodes[i, 0]) for i in range(n) if set_gsd[i] <= cut}
    assert (set_f[0] <= cut) == (len(members) > cap)
    assert kept <= members and all(arrivals[int(set_nodes[i, 0])] == set_gsd[i] for i in range(n))
    if len(members) <= cap:
        assert kept == members


def test_within_set_grows_its_buffer_and_stops_at_the_deadline() -> None:
    """A star with 600 equally good leaves: the buffer grows past its first 256 rows; a step budget
    leaves the set incomplete (deadline machinery), a cap leaves it capped."""
    store = KGStore.from_triples([("hub", "r", f"leaf{i}") for i in range(600)])
    hub = store.entities.id_of("hub")
    pattern = Pattern.from_triples([["Hub", "r", "UNKNOWN leaf 1"]])
    table = CandidateTable.from_relation_pairs(
        [NodeCandidates.from_pairs([hub], [0.0]), NodeCandidates.anything()], [([0], [0.0])], store.num_relations)
    full = search_subgraphs(store, pattern, table, k=3, within=0.0)
    assert full.within is not None and len(full.within) == 600 and full.within.complete
    assert {int(v) for v in full.within.nodes[:, 1]} == set(range(store.num_entities)) - {hub}
    partial = search_subgraphs(store, pattern, table, k=3, within=0.0, max_steps=50)
    assert partial.within is not None and not partial.within.complete and len(partial.within) < 600
    capped = search_subgraphs(store, pattern, table, k=3, within=0.0, within_cap=100)
    assert capped.within is not None and capped.within.capped and len(capped.within) == 100
    assert _keys(capped.matches) == _keys(full.matches)


def test_within_set_of_a_disconnected_pattern() -> None:
    store = _chain_kg()
    pattern = Pattern.from_triples([["UNKNOWN movie 1", "directed", "Nolan"],
                                    ["UNKNOWN movie 2", "acted in", "DiCaprio"]])
    ids = {name: store.entities.id_of(name) for name in ("Nolan", "DiCaprio")}
    rel = {name: store.relations.id_of(name) for name in ("directed_by", "starred_actors")}
    table = CandidateTable.from_relation_pairs(
        [NodeCandidates.anything(), NodeCandidates.from_pairs([ids["Nolan"]], [0.0]),
         NodeCandidates.anything(), NodeCandidates.from_pairs([ids["DiCaprio"]], [0.0])],
        [([rel["directed_by"]], [0.0]), ([rel["starred_actors"]], [0.0])], store.num_relations)
    result = search_subgraphs(store, pattern, table, k=1, within=0.0)
    assert result.within is not None and result.within.complete
    pairs = {(store.entities[int(a)], store.entities[int(b)]) for a, b in result.within.nodes[:, [0, 2]]}
    assert pairs == {(m, n) for m in ("Inception", "Memento") for n in ("Inception", "Titanic")}
