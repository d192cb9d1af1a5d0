"""The channel's anchored readings (issue 41): a pattern that names no entity while the question names one. The 1.5B
model wrote "Who does the leader of Project Orion report to?" as ``[UNKNOWN person 1, reports to, UNKNOWN person 2]``,
which any two people match; the reading ties the named entity to the pattern through a relation the KG gives it
(``[UNKNOWN person 1, leads project, Project Orion]``), and the LLM's likelihood of the question says which, if any."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import small_kg
from simgrag.grounding.channel import (
    CHANNEL,
    DEFAULT_READINGS,
    KNOWN_READINGS,
    READINGS,
    ShotSpelling,
    anchored_readings,
)
from simgrag.index.directory import open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pattern.examples import parse_examples
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.retrievers.simgrag import SimGRAGRetriever
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

LOOSE = (("UNKNOWN person 1", "reports to", "UNKNOWN person 2"),)


def test_anchored_readings_add_one_triple_tying_the_named_entity() -> None:
    ties = [("UNKNOWN person 1", "leads_project", "Project Orion"), ("Project Orion", "funded_by", "UNKNOWN person 2"),
            ("UNKNOWN team 9", "leads_project", "Project Orion"),  # no such node in the pattern: skipped
            ("UNKNOWN person 1", "leads_project", "UNKNOWN project 1")]  # ties nothing named: skipped
    first, second = anchored_readings(LOOSE, ties)
    assert first.triples == (*LOOSE, ties[0]) and second.triples == (*LOOSE, ties[1])
    assert first.kind == "anchored" and first.anchor == "Project Orion" and first.added == ties[0]
    assert "'Project Orion'" in first.why() and "named nothing" in first.why()
    assert [r.triples for r in anchored_readings(LOOSE, ties, limit=1)] == [first.triples]
    # a pattern that names an entity is anchored already; nothing to tie, nothing offered
    assert anchored_readings([("Ada", "reports to", "UNKNOWN person 2")], ties) == []
    assert anchored_readings([], ties) == [] and anchored_readings(LOOSE, []) == []
    # the relation as the examples write it
    spelled = anchored_readings(LOOSE, ties[:1], spell=ShotSpelling({"leads project": ("leads project", "project")}))
    assert spelled[0].added == ("UNKNOWN person 1", "leads project", "Project Orion")
    assert "anchored" in DEFAULT_READINGS and "anchored" in READINGS and "anchored" in KNOWN_READINGS


_UNKNOWN = st.sampled_from(["UNKNOWN person 1", "UNKNOWN person 2", "UNKNOWN city 1", "UNKNOWN thing 3"])
_NAMED = st.sampled_from(["Ada", "Project Orion", "Lindon"])
_TRIPLE = st.tuples(_UNKNOWN, st.sampled_from(["r", "s", "reports to"]), _UNKNOWN)
_TIE = st.one_of(st.tuples(_UNKNOWN, st.sampled_from(["r", "t"]), _NAMED),
                 st.tuples(_NAMED, st.sampled_from(["r", "t"]), _UNKNOWN),
                 st.tuples(_UNKNOWN, st.just("r"), _UNKNOWN), st.tuples(_NAMED, st.just("r"), _NAMED))


@settings(max_examples=150, deadline=None)
@given(triples=st.lists(_TRIPLE, min_size=1, max_size=4), ties=st.lists(_TIE, max_size=6),
       limit=st.integers(0, 5))
def test_every_anchored_reading_is_the_pattern_and_one_tie_to_its_own_nodes(
        triples: list[tuple[str, str, str]], ties: list[tuple[str, str, str]], limit: int) -> None:
    nodes = {n for h, _, t in triples for n in (h, t)}
    readings = anchored_readings(triples, ties, limit)
    assert len(readings) <= limit
    for reading in readings:
        assert reading.triples[:-1] == tuple(triples) and reading.added == reading.triples[-1] in ties
        head, _, tail = reading.added
        named, unknown = (tail, head) if is_unknown(head) else (head, tail)
        assert unknown in nodes and not is_unknown(named) and reading.anchor == named
        if Pattern.from_triples([list(t) for t in triples]).is_connected():
            assert Pattern.from_triples([list(t) for t in reading.triples]).is_connected()


FAMILY = [("Ada", "children", "Nora"), ("Nora", "nationality", "Velmaran"), ("Ada", "nationality", "Brennish"),
          ("Ivo", "children", "Tamsin"), ("Tamsin", "nationality", "Norvish"), ("Ivo", "nationality", "Ostrian"),
          ("Nora", "studies_at", "Kelwick School"), ("Tamsin", "studies_at", "Ashby School")]
FAMILY_EXAMPLES = """\
name: family
examples:
  - question: What is the nationality of Ivo?
    triples:
      - [Ivo, nationality, UNKNOWN nationality 1]
  - question: Who are the children of Ivo?
    triples:
      - [Ivo, children, UNKNOWN person 1]
"""


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_kg(tmp_path_factory.mktemp("family"), FAMILY, FAMILY_EXAMPLES)


def _one_nationality(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"triples": [["UNKNOWN person 1", "nationality", "UNKNOWN nationality 1"]]})


def test_the_channel_ties_the_named_entity_to_a_pattern_that_named_none(family: Path) -> None:
    """"What is the nationality of the pupil of Kelwick School?" written ``[UNKNOWN person 1, nationality, UNKNOWN
    nationality 1]``: anybody's nationality. Anchored: ``[UNKNOWN person 1, studies_at, Kelwick School]`` — Nora's,
    Velmaran — where the LLM finds the question likelier under it; with the default readings (the channel itself
    off) as with the channel on."""
    def likelier_with_the_school(prefix: str, condition: str, scored: str) -> float:
        return -2.0 if "studies_at, Kelwick School]" in condition else -9.0

    question = "What is the nationality of the pupil of Kelwick School?"
    index = open_index_dir(family / "kg.idx", embedder=HashEmbedder(dim=64))
    examples = parse_examples(FAMILY_EXAMPLES)
    for options in ({"channel": True, "channel_readings": ["anchored"]}, {}):  # asked for; the defaults
        retriever = SimGRAGRetriever(index, FakeLLM(_one_nationality, scores=likelier_with_the_school),
                                     examples=examples, ground_patterns=False, **options)  # type: ignore[arg-type]
        context = retriever.retrieve(question)
        assert context.pattern is not None and context.pattern.families == (CHANNEL,)
        assert context.pattern.channel_reading == "anchored"
        assert ("UNKNOWN person 1", "studies_at", "Kelwick School") in context.pattern.pattern.triples()
        assert list(context.answer_candidates[:1]) == ["Velmaran"]
        assert "the question names 'Kelwick School'" in context.pattern.kg_repairs[-1]
    # the KG's ties reach the school from the unknown person only: none binds the nationality node to a pupil
    ties = retriever.patterns.anchors(question, (("UNKNOWN person 1", "nationality", "UNKNOWN nationality 1"),))  # type: ignore[attr-defined]
    assert ties and {t[0] for t in ties} == {"UNKNOWN person 1"} and {t[2] for t in ties} == {"Kelwick School"}
    # not offered: the pattern stays as written
    kept = SimGRAGRetriever(index, FakeLLM(_one_nationality, scores=likelier_with_the_school), examples=examples,
                            ground_patterns=False, channel=True, channel_readings=["named"])
    found = kept.retrieve(question)
    assert found.pattern is not None and list(found.pattern.pattern.triples()) == [
        ("UNKNOWN person 1", "nationality", "UNKNOWN nationality 1")]


def test_no_anchor_for_a_name_the_pattern_takes_as_it_stands(family: Path) -> None:
    """Ada in the unknown person's place gives a pattern the KG holds as well as the LLM's (Ada's own nationality):
    the named reading is then the whole repair, and no hop is added ("Petra's kids" written without Petra had been
    answered with her grandchildren)."""
    def likelier_with_ada_s_child(prefix: str, condition: str, scored: str) -> float:
        return -2.0 if "[Ada, children, UNKNOWN person 1]" in condition else -9.0

    index = open_index_dir(family / "kg.idx", embedder=HashEmbedder(dim=64))
    retriever = SimGRAGRetriever(index, FakeLLM(_one_nationality, scores=likelier_with_ada_s_child),
                                 examples=parse_examples(FAMILY_EXAMPLES), ground_patterns=False, channel=True,
                                 channel_readings=["anchored"])
    found = retriever.retrieve("What is the nationality of Ada's child?")
    assert found.pattern is not None and found.pattern.channel_reading is None
    assert list(found.pattern.pattern.triples()) == [("UNKNOWN person 1", "nationality", "UNKNOWN nationality 1")]
