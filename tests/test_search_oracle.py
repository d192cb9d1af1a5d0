"""The optimized search against independent oracles where the property test of test_match_property
does not reach: tiny chunk and stack sizes (every pause/resume and every stack growth is taken),
hub-heavy KGs, and disconnected patterns (checked against all combinations of per-component brute
force). Also: candidate tables with duplicate ids, and the exact-name candidate."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simgrag.kg.store import KGStore
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.search import Match, search_subgraphs
from simgrag.pattern.graph import Pattern
from simgrag.testing.brute_force import brute_force_top_k
from test_match_property import draw_pattern

DISTS = st.sampled_from([0.0, 0.25, 0.5, 0.1, 0.3])


@st.composite
def hub_kg(draw: st.DrawFn) -> KGStore:
    """Up to 9 entities; entity 0 (and maybe 1) is a hub linked to most others, often twice."""
    n = draw(st.integers(4, 9))
    r = draw(st.integers(1, 3))
    hubs = draw(st.integers(1, 2))
    triples = [(h, draw(st.integers(0, r - 1)), t) for h in range(hubs) for t in range(n)
               if t != h and draw(st.integers(0, 4)) > 0]
    triples += draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, r - 1), st.integers(0, n - 1))
                             .filter(lambda x: x[0] != x[2]), max_size=10))
    triples = triples or [(0, 0, 1)]
    return KGStore.from_triples([(f"e{h}", f"r{rel}", f"e{t}") for h, rel, t in triples])


COMPONENT_SHAPES = [[(0, 1)], [(0, 1), (1, 2)], [(0, 1), (0, 2)], [(0, 1), (1, 2), (2, 0)], [(0, 1), (1, 0)]]


@st.composite
def case(draw: st.DrawFn) -> tuple[KGStore, Pattern, CandidateTable]:
    """A pattern of one or two components on a hub KG, each node known (some candidates) or unknown."""
    store = draw(hub_kg())
    edges: list[tuple[int, int]] = []
    offset = 0
    for _ in range(draw(st.integers(1, 2))):
        shape = draw(st.sampled_from(COMPONENT_SHAPES))
        edges += [(a + offset, b + offset) for a, b in shape]
        offset += 1 + max(max(e) for e in shape)
    pattern, table = draw_pattern(draw, store, edges, DISTS, unknown_relations=3)
    return store, pattern, table


def oracle_gsds(store: KGStore, pattern: Pattern, table: CandidateTable, k: int, injective: bool) -> list[float]:
    """The k smallest GSDs: brute force per component (all matches), then every combination summed."""
    per_component = []
    for node_ids, edge_ids in pattern.components():
        sub = pattern.subpattern(node_ids, edge_ids)
        sub_table = CandidateTable(tuple(table.nodes[i] for i in node_ids), table.rel_dists[edge_ids])
        per_component.append([m.gsd for m in brute_force_top_k(store, sub, sub_table, 10**9, injective=injective)])
    sums = sorted(sum(combo) for combo in itertools.product(*per_component))
    return sums[:k]


def consistent(store: KGStore, pattern: Pattern, table: CandidateTable, match: Match, injective: bool) -> bool:
    """Does ``match`` map every pattern edge onto a KG triple joining its nodes, with the stated GSD?"""
    for e, edge in enumerate(pattern.edges):
        tid = match.triples[e]
        ends = {int(store.heads[tid]), int(store.tails[tid])}
        if ends != {match.nodes[edge.source], match.nodes[edge.target]} or not np.isfinite(
                table.rel_dists[e, int(store.rels[tid])]):
            return False
    for node_ids, edge_ids in pattern.components():
        if injective and len({match.nodes[v] for v in node_ids}) < len(node_ids):
            return False
        if injective and len({match.triples[e] for e in edge_ids}) < len(edge_ids):
            return False
    return match.gsd == pytest.approx(sum(match.node_dists) + sum(match.edge_dists))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case(), st.sampled_from([1, 2, 4, 7]), st.sampled_from([1, 2, 3, 50]), st.sampled_from([1, 2, 5]),
       st.booleans(), st.sampled_from(["optimized", "naive"]))
def test_search_equals_oracles_with_tiny_chunks_and_stacks(data: tuple[KGStore, Pattern, CandidateTable], k: int,
                                                           chunk: int, stack: int, injective: bool,
                                                           algorithm: str) -> None:
    store, pattern, table = data
    result = search_subgraphs(store, pattern, table, k=k, injective=injective, algorithm=algorithm,  # type: ignore[arg-type]
                              chunk_steps=chunk, stack_size=stack)
    assert result.complete
    got = [m.gsd for m in result.matches]
    assert got == pytest.approx(oracle_gsds(store, pattern, table, k, injective))
    assert all(consistent(store, pattern, table, m, injective) for m in result.matches)
    if len(pattern.components()) == 1:  # one component: the exact keys, ties included
        want = brute_force_top_k(store, pattern, table, k, injective=injective)
        assert [m.key() for m in result.matches] == [m.key() for m in want]


def test_stack_growth_and_resume_on_a_hub() -> None:
    """A hub of 3,000 leaves from a 1-entry stack and 5-step chunks: hundreds of pauses, many growths."""
    store = KGStore.from_triples([("hub", "r", f"leaf{i}") for i in range(3000)]
                                 + [(f"leaf{i}", "s", f"x{i % 7}") for i in range(3000)])
    hub = store.entities.id_of("hub")
    pattern = Pattern.from_triples([["Hub", "r", "UNKNOWN leaf 1"], ["UNKNOWN leaf 1", "s", "UNKNOWN x 2"]])
    rng = np.random.default_rng(0)
    leaves = np.array([store.entities.id_of(f"leaf{i}") for i in range(3000)])
    table = CandidateTable.from_relation_pairs(
        [NodeCandidates.from_pairs([hub], [0.0]), NodeCandidates.from_pairs(leaves, rng.random(3000)),
         NodeCandidates.anything()], [([0], [0.0]), ([1], [0.0])], store.num_relations)
    large = search_subgraphs(store, pattern, table, k=5)
    for algorithm, min_steps in (("optimized", 50), ("naive", 6000)):
        small = search_subgraphs(store, pattern, table, k=5, chunk_steps=5, stack_size=1,
                                 algorithm=algorithm)  # type: ignore[arg-type]
        assert small.complete and large.complete and small.steps > min_steps  # paused over and over
        assert [m.key() for m in small.matches] == [m.key() for m in large.matches]
    want = sorted(rng_leaf for rng_leaf in table.nodes[1].dists)[:5]
    assert [m.gsd for m in small.matches] == pytest.approx(want)


def test_invalid_chunk_and_stack_sizes_are_refused() -> None:
    from simgrag.errors import MatchError

    store = KGStore.from_triples([("a", "r", "b")])
    pattern = Pattern.from_triples([["a", "r", "UNKNOWN x 1"]])
    table = CandidateTable.from_relation_pairs([NodeCandidates.from_pairs([0], [0.0]), NodeCandidates.anything()],
                                               [None], 1)
    for bad in ({"chunk_steps": 0}, {"stack_size": 0}, {"chunk_steps": 2.5}, {"k": 10**11}, {"k": True}):
        with pytest.raises(MatchError):
            search_subgraphs(store, pattern, table, **bad)  # type: ignore[arg-type]


# -- candidates ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 30), st.sampled_from([0.0, 0.1, 0.5, 0.25, 1.0, 0.75])), max_size=60))
def test_from_pairs_keeps_the_smallest_distance_of_a_duplicate(pairs: list[tuple[int, float]]) -> None:
    best: dict[int, float] = {}
    for entity, dist in pairs:
        if entity >= 0:
            best[entity] = min(best.get(entity, float("inf")), dist)
    got = NodeCandidates.from_pairs([p[0] for p in pairs], [p[1] for p in pairs])
    assert got.ids.tolist() == sorted(best)
    assert got.dists.tolist() == [best[e] for e in sorted(best)]


def test_from_groups_with_overlapping_groups_keeps_the_nearest() -> None:
    groups = [(np.array([1, 2, 3]), 0.5), (np.array([2, 3, 4]), 0.25), (np.array([3]), 0.75)]
    for num_entities in (5, 50_000):  # dense and sparse paths
        got = NodeCandidates.from_groups(groups, num_entities)
        assert got.ids.tolist() == [1, 2, 3, 4] and got.dists.tolist() == [0.5, 0.25, 0.25, 0.25]


def test_exact_name_is_a_candidate_even_outside_the_vector_top_k(tmp_path: Path) -> None:
    """"heat", "HEAT" and "Heat" embed identically (the hash embedder lowercases): with k_n=1 the vector
    search returns the lowest id only, and the exact name adds "Heat" itself."""
    from simgrag.index.directory import build_index_dir
    from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
    from simgrag.testing.embedders import HashEmbedder

    kb = tmp_path / "kb.txt"
    kb.write_text("heat|is_a|temperature\nHEAT|is_a|acronym\nHeat|starred_actors|Al Pacino\n", encoding="utf-8")
    index = build_index_dir(kb, tmp_path / "kb.idx", embedder=HashEmbedder(dim=32))
    retriever = SubgraphRetriever(index)
    pattern = [["Heat", "starred actors", "UNKNOWN actor 1"]]
    result = retriever.retrieve(pattern, RetrievalSettings(k=1, k_n=1, k_r=1))
    assert result.candidate_counts["Heat"] == 2  # the vector top-1 and the exact name
    assert result.evidence[0].triples()[0].as_tuple() == ("Heat", "starred_actors", "Al Pacino")
    plain = retriever.retrieve(pattern, RetrievalSettings(k=1, k_n=1, k_r=1, exact_names=False))
    assert plain.candidate_counts["Heat"] == 1 and not plain.evidence


def test_search_slots_go_to_the_longest_waiter() -> None:
    """A search that releases its core cannot take it straight back while another search waits."""
    import threading
    import time

    from simgrag.match.search import _TurnSlots

    slots = _TurnSlots(1)
    assert slots.acquire(timeout=None)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(timeout=5)))
    waiter.start()
    time.sleep(0.1)
    slots.release()
    assert not slots.acquire(timeout=0)  # handed to the waiter, not back to the releaser
    waiter.join(5)
    assert got == [True]
    slots.release()
    assert slots.acquire(timeout=0) and not slots.acquire(timeout=0.01)  # one slot; a timed-out wait gives up
    slots.release()
