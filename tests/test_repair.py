"""The KG-aware echoed-role repair: fixes a person put in a movie's place, leaves real
"same director as <movie>" patterns alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from simgrag.grounding.repair import repair_echoed_roles
from simgrag.index.directory import open_index_dir
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pattern.graph import Pattern
from simgrag.testing.embedders import HashEmbedder


@pytest.fixture(scope="module")
def retriever(toy_dir: Path) -> SubgraphRetriever:
    return SubgraphRetriever(open_index_dir(toy_dir, embedder=HashEmbedder(dim=64)))


def test_person_in_a_movie_role_is_repaired(retriever: SubgraphRetriever) -> None:
    echoed = Pattern.from_triples([
        ["Ellen Page", "starred_actors", "UNKNOWN actor 1"],
        ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
        ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"],
    ])
    fixed, notes = repair_echoed_roles(echoed, retriever)
    assert fixed.triples() == [("UNKNOWN movie 1", "starred_actors", "Ellen Page"),
                               ("UNKNOWN movie 1", "directed_by", "UNKNOWN director 1")]
    assert len(notes) == 1 and "Ellen Page" in notes[0]
    best = retriever.retrieve(fixed).evidence[0]
    movie, director = best.binding("UNKNOWN movie 1"), best.binding("UNKNOWN director 1")
    assert movie is not None and director is not None
    assert (movie.entity, director.entity) in {("Inception", "Christopher Nolan"), ("Juno", "Jason Reitman")}


@pytest.mark.parametrize("triples", [
    # "movies by the same director as Titanic": Titanic really is the head of directed_by
    [["Titanic", "directed_by", "UNKNOWN director 1"], ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]],
    # the shared unknown is used again elsewhere: not the echo shape
    [["Ellen Page", "starred_actors", "UNKNOWN actor 1"], ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
     ["UNKNOWN actor 1", "release_year", "UNKNOWN year 1"]],
    # a name the KG does not have: nothing to go on
    [["Nobody Atall", "starred_actors", "UNKNOWN actor 1"], ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"]],
    # a plain one-triple pattern
    [["UNKNOWN movie 1", "starred_actors", "Ellen Page"]],
])
def test_other_patterns_are_left_alone(retriever: SubgraphRetriever, triples: list[list[str]]) -> None:
    pattern = Pattern.from_triples(triples)
    fixed, notes = repair_echoed_roles(pattern, retriever)
    assert notes == [] and fixed is pattern
