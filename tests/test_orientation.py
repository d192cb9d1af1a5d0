"""Orientation among equally good matches (simgrag.match.answers.oriented_first): the search ignores edge
direction (§4.2), so matches that run the pattern's way lead the answer set and the evidence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.kg.store import KGStore
from simgrag.match.answers import ANSWER_TOLERANCE, answer_set, oriented_first, reversed_edges
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.match.search import search_subgraphs
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


def _first(retriever: SubgraphRetriever, triples: list[list[str]]) -> tuple[str, tuple[str, ...], list[str]]:
    found = retriever.retrieve(triples)
    assert found.answer_set is not None
    evidence = [" ".join(e.triple.as_tuple()) for e in found.evidence[0].edges]
    return found.answer_set.names()[0], found.answer_set.names(), evidence


def test_the_pattern_direction_decides_among_equally_good_matches(family: SubgraphRetriever) -> None:
    first, names, evidence = _first(family, [["Calla", "mother", "UNKNOWN person 1"]])
    assert first == "Juniper" and evidence == ["Calla mother Juniper"]
    assert "Zeb" in names  # turned matches stay in the answer set, after
    first, _, evidence = _first(family, [["UNKNOWN person 1", "mother", "Calla"]])
    assert first == "Zeb" and evidence == ["Zeb mother Calla"]


def test_two_hops_follow_the_direction_of_each_hop(family: SubgraphRetriever) -> None:
    first, names, evidence = _first(family, [["Calla", "children", "UNKNOWN person 1"],
                                             ["UNKNOWN person 1", "profession", "UNKNOWN profession 1"]])
    assert first == "Miner" and evidence == ["Calla children Zeb", "Zeb profession Miner"]
    assert "Sailor" in names  # Calla's parent Ivo, through the turned `children` triple


def _table(store: KGStore, pattern: Pattern, far: str) -> CandidateTable:
    """Any entity for every node; every relation at distance 0 but ``far`` at 0.5."""
    nodes = [NodeCandidates.anything() for _ in pattern.nodes]
    rels = [(list(range(store.num_relations)),
             [0.5 if store.relations[r] == far else 0.0 for r in range(store.num_relations)]) for _ in pattern.edges]
    return CandidateTable.from_relation_pairs(nodes, rels, store.num_relations)


_TRIPLES = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["r", "s"]), st.integers(0, 5)),
                    min_size=1, max_size=14)
_CHAINS = st.lists(st.booleans(), min_size=1, max_size=3)  # per hop: written head → tail, or turned


@settings(max_examples=80, deadline=None)
@given(triples=_TRIPLES, chain=_CHAINS)
def test_oriented_first_reorders_only_the_best_band_and_loses_nothing(triples: list[tuple[int, str, int]],
                                                                      chain: list[bool]) -> None:
    store = KGStore.from_triples([(f"e{h}", r, f"e{t}") for h, r, t in triples])
    hops = [[f"UNKNOWN thing {i}", "r", f"UNKNOWN thing {i + 1}"] for i in range(len(chain))]
    pattern = Pattern.from_triples([hop if forward else hop[::-1] for hop, forward in zip(hops, chain, strict=True)])
    result = search_subgraphs(store, pattern, _table(store, pattern, "s"), k=3, within=1.0)
    found = result.within
    assert found is not None
    ordered = oriented_first(store, pattern, found)
    rows = {(tuple(n), tuple(t)) for n, t in zip(found.nodes.tolist(), found.triples.tolist(), strict=True)}
    assert {(tuple(n), tuple(t)) for n, t in zip(ordered.nodes.tolist(), ordered.triples.tolist(),
                                                  strict=True)} == rows
    band = ordered.gsd <= found.best + ANSWER_TOLERANCE
    if len(ordered):
        assert not (band[1:] & ~band[:-1]).any()  # the best band first, then the rest
    turned = reversed_edges(store, pattern, ordered)
    assert (np.diff(turned[band]) >= 0).all()
    rest = ~(found.gsd <= found.best + ANSWER_TOLERANCE)
    assert ordered.triples[~band].tolist() == found.triples[rest].tolist()  # the rest keep their order
    before, after = answer_set(store, pattern, found), answer_set(store, pattern, ordered)
    assert before is not None and after is not None and set(before.names()) == set(after.names())
