"""Questions composed from a pattern by rule (simgrag.bootstrap.compose): learning's shots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.bootstrap.compose import composed_question, verb_like


@pytest.mark.parametrize(("triples", "question"), [
    ([["X", "father", "UNKNOWN person 1"], ["UNKNOWN person 1", "profession", "UNKNOWN profession 1"]],
     "What is the profession of the father of X?"),
    ([["UNKNOWN person 1", "father", "Oren"]], "What is the person whose father is Oren?"),  # not "Oren's father"
    ([["UNKNOWN person 1", "place of birth", "Lindenfels"], ["UNKNOWN person 1", "ethnicity", "UNKNOWN ethnicity 1"]],
     "What is the ethnicity of the person whose place of birth is Lindenfels?"),
    ([["Panagiotis", "plays in club", "UNKNOWN club 1"], ["UNKNOWN club 1", "is in country", "UNKNOWN country 1"]],
     "What is the country of the club of Panagiotis?"),
    ([["UNKNOWN person 1", "plays position", "Goalkeeper"], ["UNKNOWN person 1", "plays for country", "Spain"],
      ["UNKNOWN person 1", "plays in club", "UNKNOWN club 1"]],
     "What is the club of the person that plays position Goalkeeper and that plays for country Spain?"),
    ([["Heat", "directed by", "UNKNOWN person 1"]], "What is the person that Heat directed by?"),
    # a noun relation ending with the node's kind keeps its own words (not "the place of the founder of …")
    ([["Acme", "founder", "UNKNOWN agent 1"], ["UNKNOWN agent 1", "resting place", "UNKNOWN place 1"]],
     "What is the resting place of the founder of Acme?"),
])
def test_composed_questions_say_every_triple_the_way_the_kg_runs_it(triples: list[list[str]], question: str) -> None:
    assert composed_question(triples) == question


@pytest.mark.parametrize("triples", [
    [],
    [["X", "father", "Y"]],  # nothing asked: a claim
    [["UNKNOWN person 1", "father", "UNKNOWN person 2"]],  # nothing named
    [["X", "father", "UNKNOWN person 1"], ["UNKNOWN person 2", "mother", "Y"]],  # disconnected
    [["X", "r", "UNKNOWN a 1"], ["UNKNOWN a 1", "s", "UNKNOWN b 1"], ["UNKNOWN b 1", "t", "X"]],  # a cycle
])
def test_patterns_that_are_not_a_question_tree_compose_nothing(triples: list[list[str]]) -> None:
    assert composed_question(triples) is None


def test_verb_like_relation_names() -> None:
    assert [verb_like(r) for r in ("plays in club", "is aged", "directed by", "has genre", "located in")] == [True] * 5
    assert [verb_like(r) for r in ("father", "place of birth", "release year", "borders", "class")] == [False] * 5


_RELATIONS = st.sampled_from(["father", "place of birth", "plays in club", "directed by", "has genre", "spouse",
                              "home thing"])


@st.composite
def _trees(draw: st.DrawFn) -> list[list[str]]:
    """A tree pattern: node 0 named, the others unknown (one of them asked), each new node joined to an earlier one
    by a triple running either way."""
    n = draw(st.integers(2, 5))
    labels = ["Alice Brown"] + [f"UNKNOWN thing {i}" for i in range(1, n)]
    triples = []
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        relation = draw(_RELATIONS)
        triples.append([labels[j], relation, labels[i]] if draw(st.booleans()) else [labels[i], relation, labels[j]])
    return triples


@settings(max_examples=200, deadline=None)
@given(_trees())
def test_a_composed_question_says_every_relation_and_the_name(triples: list[list[str]]) -> None:
    question = composed_question(triples)
    if question is None:  # a tree that asks for no single node (two or more unknown leaves)
        return
    assert question.startswith("What is the ") and question.endswith("?") and "Alice Brown" in question
    for relation in {r for _, r, _ in triples}:  # every triple said by its relation's name ("home thing" too)
        assert question.count(relation) >= sum(r == relation for _, r, _ in triples)
    assert "UNKNOWN" not in question
