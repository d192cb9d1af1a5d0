"""Typed matching (RetrievalSettings.matching="typed", the default): which pattern nodes stay apart."""

from __future__ import annotations

from collections.abc import Sequence

from simgrag.kg.store import KGStore
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.search import search_subgraphs, typed_pairs
from simgrag.pattern.graph import Pattern

KG = [("Van Gogh", "written_by", "Pialat"), ("Van Gogh", "directed_by", "Pialat"),
      ("Police", "written_by", "Pialat"), ("Police", "directed_by", "Pialat"),
      ("Police", "written_by", "Grimblat"), ("Loulou", "directed_by", "Pialat"),
      ("Heat", "starred_actors", "De Niro"), ("Ronin", "starred_actors", "De Niro")]


def _table(store: KGStore, pattern: Pattern) -> CandidateTable:
    """Named nodes: their entity at distance 0; unknowns: any entity; each relation text: its KG relation."""
    nodes = [NodeCandidates.anything() if n.unknown
             else NodeCandidates.from_pairs([store.entities.id_of(n.text)], [0.0]) for n in pattern.nodes]
    rels = [([store.relations.id_of(e.relation.replace(" ", "_"))], [0.0]) for e in pattern.edges]
    return CandidateTable.from_relation_pairs(nodes, rels, store.num_relations)


def _answers(store: KGStore, triples: Sequence[Sequence[str]], injective: object) -> set[str]:
    pattern = Pattern.from_triples(triples)
    distinct = typed_pairs(pattern) if injective == "typed" else injective
    result = search_subgraphs(store, pattern, _table(store, pattern), k=50, injective=distinct)  # type: ignore[arg-type]
    asked = pattern.asked_node()
    assert asked is not None
    return {store.entities[m.nodes[asked]] for m in result.matches}


def test_one_person_may_be_writer_and_director() -> None:
    store = KGStore.from_triples(KG)
    directors_of_films_by_the_writer = [["Van Gogh", "written by", "UNKNOWN writer 1"],
                                        ["UNKNOWN movie 2", "written by", "UNKNOWN writer 1"],
                                        ["UNKNOWN movie 2", "directed by", "UNKNOWN director 3"]]
    # injective: Pialat wrote Police, but as its director he is the writer node already: nothing
    assert _answers(store, directors_of_films_by_the_writer, True) == set()
    # typed: writer and director are different kinds; the film is not Van Gogh again (same kind)
    assert _answers(store, directors_of_films_by_the_writer, "typed") == {"Pialat"}
    # homomorphic: the chain may also come back through Van Gogh itself (same answer here, more matches)
    assert _answers(store, directors_of_films_by_the_writer, False) == {"Pialat"}


def test_the_chain_does_not_come_back_to_the_named_film() -> None:
    store = KGStore.from_triples(KG)
    films_sharing_an_actor = [["Heat", "starred actors", "UNKNOWN actor 1"],
                              ["UNKNOWN movie 2", "starred actors", "UNKNOWN actor 1"]]
    assert _answers(store, films_sharing_an_actor, "typed") == {"Ronin"}
    assert _answers(store, films_sharing_an_actor, False) == {"Ronin", "Heat"}


def test_typed_pairs_groups_kinds_by_type_word_and_by_relation_side() -> None:
    pattern = Pattern.from_triples([["Van Gogh", "written by", "UNKNOWN writer 1"],
                                    ["UNKNOWN movie 2", "written by", "UNKNOWN writer 1"],
                                    ["UNKNOWN movie 2", "directed by", "UNKNOWN director 3"],
                                    ["UNKNOWN films 4", "directed by", "UNKNOWN director 3"]])
    ids = {n.text: i for i, n in enumerate(pattern.nodes)}
    pairs = typed_pairs(pattern)

    def apart(a: str, b: str) -> bool:
        x, y = sorted((ids[a], ids[b]))
        return (x, y) in pairs
    assert apart("Van Gogh", "UNKNOWN movie 2")  # both heads of "written by"
    assert apart("UNKNOWN movie 2", "UNKNOWN films 4")  # both heads of "directed by"
    assert pattern.asked_node() == ids["UNKNOWN films 4"]
    assert apart("Van Gogh", "UNKNOWN films 4")  # the asked node is never a named entity
    assert not apart("UNKNOWN writer 1", "UNKNOWN director 3")
    assert not apart("Van Gogh", "UNKNOWN director 3")
    # with relation keys (e.g. the nearest KG relation), paraphrases are one relation
    para = Pattern.from_triples([["Heat", "starring", "UNKNOWN actor 1"],
                                 ["UNKNOWN m 2", "acted in by", "UNKNOWN actor 1"],
                                 ["UNKNOWN m 2", "year", "UNKNOWN year 3"]])
    assert (0, 2) not in typed_pairs(para)
    assert (0, 2) in typed_pairs(para, relation_keys=[7, 7, 8])
