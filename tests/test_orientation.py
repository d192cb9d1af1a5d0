"""Orientation among equally good matches (simgrag.match.answers.oriented_first, followed): the search ignores edge
direction (§4.2), so matches that run the pattern's way lead the answer set and the evidence ("prefer"), or are the
only ones kept there where some equal match runs the pattern's way ("follow", the default)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.kg.store import KGStore
from simgrag.match.answers import ANSWER_TOLERANCE, answer_set, followed, oriented_first, reversed_edges
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.match.search import MatchSet, search_subgraphs
from simgrag.pattern.graph import Pattern
from simgrag.testing.embedders import HashEmbedder

# "X mother Y": Y is X's mother. Calla is Juniper's and Ivo's child and Zeb's mother; the ids put the turned
# matches (Zeb's triple, Ivo's) first
FAMILY = [("Ivo", "children", "Calla"), ("Zeb", "mother", "Calla"), ("Calla", "mother", "Juniper"),
          ("Zeb", "profession", "Miner"), ("Juniper", "profession", "Baker"), ("Ivo", "profession", "Sailor"),
          ("Calla", "children", "Zeb")]


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> SubgraphRetriever:
    root = tmp_path_factory.mktemp("family")
    (root / "family.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in FAMILY), encoding="utf-8")
    build_index_dir(root / "family.tsv", root / "family.idx", embedder=HashEmbedder(dim=64), show_progress=False)
    return SubgraphRetriever(open_index_dir(root / "family.idx", embedder=HashEmbedder(dim=64)))


PREFER = RetrievalSettings(orientation="prefer")


def _first(retriever: SubgraphRetriever, triples: list[list[str]],
           settings: RetrievalSettings | None = None) -> tuple[str, tuple[str, ...], list[list[str]]]:
    found = retriever.retrieve(triples, settings)
    assert found.answer_set is not None
    evidence = [[" ".join(e.triple.as_tuple()) for e in ev.edges] for ev in found.evidence
                if ev.gsd <= found.answer_set.best_gsd + ANSWER_TOLERANCE]  # the subgraphs as good as the best
    return found.answer_set.names()[0], found.answer_set.names(), evidence


def test_the_pattern_direction_decides_among_equally_good_matches(family: SubgraphRetriever) -> None:
    first, names, evidence = _first(family, [["Calla", "mother", "UNKNOWN person 1"]], PREFER)
    assert first == "Juniper" and evidence[0] == ["Calla mother Juniper"]
    assert "Zeb" in names  # turned matches stay in the answer set, after
    first, _, evidence = _first(family, [["UNKNOWN person 1", "mother", "Calla"]], PREFER)
    assert first == "Zeb" and evidence[0] == ["Zeb mother Calla"]


def test_by_default_an_equal_match_turned_round_leaves_the_answer_set_and_the_evidence(
        family: SubgraphRetriever) -> None:
    _, names, evidence = _first(family, [["Calla", "mother", "UNKNOWN person 1"]])
    assert names == ("Juniper",) and evidence == [["Calla mother Juniper"]]  # not Zeb, whose mother Calla is
    _, names, evidence = _first(family, [["UNKNOWN person 1", "mother", "Calla"]])
    assert names == ("Zeb",) and evidence == [["Zeb mother Calla"]]
    from simgrag.cli.kg import format_answer_set

    followed_set = family.retrieve([["Calla", "mother", "UNKNOWN person 1"]]).answer_set
    kept_set = family.retrieve([["Calla", "mother", "UNKNOWN person 1"]], PREFER).answer_set
    assert followed_set is not None and kept_set is not None
    assert (followed_set.turned_out, kept_set.turned_out) == (1, 0)  # said, with the set, in the JSON and the CLI
    assert followed_set.to_dict()["turned_out"] == 1 and "1 as good turning" in format_answer_set(followed_set)[0]


def test_a_pattern_the_kg_holds_only_the_other_way_round_keeps_its_answers(family: SubgraphRetriever) -> None:
    # no triple runs Juniper → … → Calla with `mother`: every match turns the edge, so none is dropped
    _, names, _ = _first(family, [["Juniper", "mother", "UNKNOWN person 1"]])
    assert names == ("Calla",)


def test_two_hops_follow_the_direction_of_each_hop(family: SubgraphRetriever) -> None:
    two_hops = [["Calla", "children", "UNKNOWN person 1"], ["UNKNOWN person 1", "profession", "UNKNOWN profession 1"]]
    first, names, evidence = _first(family, two_hops, PREFER)
    assert first == "Miner" and evidence[0] == ["Calla children Zeb", "Zeb profession Miner"]
    assert "Sailor" in names  # Calla's parent Ivo, through the turned `children` triple
    first, names, evidence = _first(family, two_hops)
    assert names == ("Miner",) and ["Ivo children Calla", "Ivo profession Sailor"] not in evidence


def test_an_unknown_orientation_is_refused() -> None:
    from simgrag.errors import ConfigError

    with pytest.raises(ConfigError, match="orientation"):
        replace(RetrievalSettings(), orientation="sideways")  # type: ignore[arg-type]


def _table(store: KGStore, pattern: Pattern, far: str) -> CandidateTable:
    """Any entity for every node; every relation at distance 0 but ``far`` at 0.5."""
    nodes = [NodeCandidates.anything() for _ in pattern.nodes]
    rels = [(list(range(store.num_relations)),
             [0.5 if store.relations[r] == far else 0.0 for r in range(store.num_relations)]) for _ in pattern.edges]
    return CandidateTable.from_relation_pairs(nodes, rels, store.num_relations)


_TRIPLES = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["r", "s"]), st.integers(0, 5)),
                    min_size=1, max_size=14)
_CHAINS = st.lists(st.booleans(), min_size=1, max_size=3)  # per hop: written head → tail, or turned


def _rows(found: MatchSet) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each match of ``found`` as (entity ids, triple ids), in its order."""
    return [(tuple(n), tuple(t)) for n, t in zip(found.nodes.tolist(), found.triples.tolist(), strict=True)]


def _chain_search(triples: list[tuple[int, str, int]], chain: list[bool]) -> tuple[KGStore, Pattern, MatchSet]:
    """The KG of ``triples``, a chain of ``r`` hops each written forward or turned (``chain``), and its within set
    (every relation at 0 but ``s`` at 0.5)."""
    store = KGStore.from_triples([(f"e{h}", r, f"e{t}") for h, r, t in triples])
    hops = [[f"UNKNOWN thing {i}", "r", f"UNKNOWN thing {i + 1}"] for i in range(len(chain))]
    pattern = Pattern.from_triples([hop if forward else hop[::-1] for hop, forward in zip(hops, chain, strict=True)])
    found = search_subgraphs(store, pattern, _table(store, pattern, "s"), k=3, within=1.0).within
    assert found is not None
    return store, pattern, found


@settings(max_examples=80, deadline=None)
@given(triples=_TRIPLES, chain=_CHAINS)
def test_oriented_first_reorders_only_the_best_band_and_loses_nothing(triples: list[tuple[int, str, int]],
                                                                      chain: list[bool]) -> None:
    store, pattern, found = _chain_search(triples, chain)
    ordered = oriented_first(store, pattern, found)
    assert set(_rows(ordered)) == set(_rows(found))
    band = ordered.gsd <= found.best + ANSWER_TOLERANCE
    if len(ordered):
        assert not (band[1:] & ~band[:-1]).any()  # the best band first, then the rest
    turned = reversed_edges(store, pattern, ordered)
    assert (np.diff(turned[band]) >= 0).all()
    rest = ~(found.gsd <= found.best + ANSWER_TOLERANCE)
    assert ordered.triples[~band].tolist() == found.triples[rest].tolist()  # the rest keep their order
    before, after = answer_set(store, pattern, found), answer_set(store, pattern, ordered)
    assert before is not None and after is not None and set(before.names()) == set(after.names())


@settings(max_examples=80, deadline=None)
@given(triples=_TRIPLES, chain=_CHAINS)
def test_followed_drops_only_equal_matches_turned_more_than_the_least(triples: list[tuple[int, str, int]],
                                                                      chain: list[bool]) -> None:
    store, pattern, found = _chain_search(triples, chain)
    kept, ordered = followed(store, pattern, found), oriented_first(store, pattern, found)

    assert set(_rows(kept)) <= set(_rows(ordered))
    band = ordered.gsd <= found.best + ANSWER_TOLERANCE
    turned = reversed_edges(store, pattern, ordered)
    least = turned[band].min() if band.any() else 0
    expected = [r for r, b, t in zip(_rows(ordered), band, turned, strict=True) if not b or t == least]
    assert _rows(kept) == expected  # oriented_first's order, less the band's more-turned rows
    if len(found):
        assert len(kept) and kept.gsd[0] <= found.best + ANSWER_TOLERANCE  # something as good as the best remains
