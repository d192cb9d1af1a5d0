"""The channel's skipped readings (issue 41): a hop the small model adds from a named node — "What country is X
from?" written through X's place of birth — taken out, where the KG says so: the next hop is not held from where the
pattern's match puts it, and the named entity has that relation itself."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.grounding.channel import CHANNEL, DEFAULT_READINGS, READINGS, skipped_readings
from simgrag.index.directory import open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pattern.examples import parse_examples
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.retrievers.simgrag import SimGRAGRetriever, _QuestionReader
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

THROUGH_BIRTHPLACE = (("Ada", "place_of_birth", "UNKNOWN place 1"),
                      ("UNKNOWN place 1", "nationality", "UNKNOWN nationality 1"))


def _reader(root: Path) -> _QuestionReader:
    index = open_index_dir(root / "kg.idx", embedder=HashEmbedder(dim=64))
    return _QuestionReader(SubgraphRetriever(index), None, None)  # type: ignore[arg-type]  # judge() unused here


def test_skipped_readings_take_out_the_hop_from_a_named_node_where_allowed() -> None:
    (only,) = skipped_readings(THROUGH_BIRTHPLACE, {("Ada", "UNKNOWN place 1")})
    assert only.triples == (("Ada", "nationality", "UNKNOWN nationality 1"),)
    assert only.kind == "skipped" and only.dropped == THROUGH_BIRTHPLACE[0] and "'Ada'" in only.why()
    assert skipped_readings(THROUGH_BIRTHPLACE, set()) == []  # the KG did not allow it
    # the asked-for node is never skipped, nor a node on two more triples, nor one the rest cannot ask without
    assert skipped_readings([["Ada", "place_of_birth", "UNKNOWN place 1"]], {("Ada", "UNKNOWN place 1")}) == []
    star = [*THROUGH_BIRTHPLACE, ("UNKNOWN place 1", "in_nation", "UNKNOWN place 2")]
    assert skipped_readings(star, {("Ada", "UNKNOWN place 1")}) == []
    claim = [("Ada", "place_of_birth", "UNKNOWN place 1"), ("UNKNOWN place 1", "in_nation", "Brennland")]
    assert skipped_readings(claim, {("Ada", "UNKNOWN place 1")}) == []  # "Ada in_nation Brennland": nothing asked
    turned = [("UNKNOWN place 1", "born_here", "Ada"), THROUGH_BIRTHPLACE[1]]  # the named node at the tail
    assert skipped_readings(turned, {("Ada", "UNKNOWN place 1")})[0].triples == (
        ("Ada", "nationality", "UNKNOWN nationality 1"),)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "UNKNOWN x 1", "UNKNOWN y 2", "UNKNOWN z 3"]),
                          st.sampled_from(["r", "s"]),
                          st.sampled_from(["A", "B", "UNKNOWN x 1", "UNKNOWN y 2", "UNKNOWN z 3"])),
                min_size=1, max_size=4))
def test_every_skipped_reading_is_one_triple_shorter_connected_and_asks(triples: list[tuple[str, str, str]]) -> None:
    nodes = {n for h, _, t in triples for n in (h, t)}
    allowed = {(a, b) for a in nodes for b in nodes if not is_unknown(a) and is_unknown(b)}
    try:
        Pattern.from_triples([list(t) for t in triples])
    except Exception:  # not a pattern at all: nothing to read
        return
    for reading in skipped_readings(triples, allowed, limit=10):
        assert len(reading.triples) == len(triples) - 1 and reading.dropped in triples
        assert Pattern.from_triples([list(t) for t in reading.triples]).is_connected()
        assert any(is_unknown(n) for h, _, t in reading.triples for n in (h, t))


def test_the_kg_allows_a_skip_only_where_it_does_not_go_on_and_the_named_entity_does(people: Path) -> None:
    reader = _reader(people)
    # Lindon has no nationality edge (the search took in_nation there), Ada has one: the hop may be skipped
    assert reader.skips("What country is Ada from?", THROUGH_BIRTHPLACE) == {("Ada", "UNKNOWN place 1")}
    # the KG holds "Cy's children's nationality" as written: nothing to skip
    held = (("Cy", "children", "UNKNOWN person 1"), ("UNKNOWN person 1", "nationality", "UNKNOWN nationality 1"))
    assert reader.skips("What is the nationality of Cy's children?", held) == set()
    # the KG holds Lindon's in_nation as written, and Ada has no in_nation edge anyway: no skip
    odd = (("Ada", "place_of_birth", "UNKNOWN place 1"), ("UNKNOWN place 1", "in_nation", "UNKNOWN place 2"))
    assert reader.skips("?", odd) == set()
    # Marrow has no children, nor has Bo: the KG does not go on there, but the named entity would not either
    childless = (("Bo", "place_of_birth", "UNKNOWN place 1"), ("UNKNOWN place 1", "children", "UNKNOWN person 1"))
    assert reader.skips("Who are the children of Bo's birthplace?", childless) == set()
    assert reader.skips("?", (("Nobody", "x", "UNKNOWN y 1"), ("UNKNOWN y 1", "x", "UNKNOWN z 1"))) <= {
        ("Nobody", "UNKNOWN y 1")}  # a name the KG lacks binds to its nearest entity; no crash, no other pair


def test_skipped_readings_are_default_readings_and_the_channel_takes_one(people: Path) -> None:
    assert "skipped" in DEFAULT_READINGS and "skipped" in READINGS

    def respond(messages: Sequence[ChatMessage]) -> str:
        return json.dumps({"triples": [list(t) for t in THROUGH_BIRTHPLACE]})

    def shorter_is_likelier(prefix: str, condition: str, scored: str) -> float:
        return -2.0 if "place_of_birth" not in condition else -6.0

    index = open_index_dir(people / "kg.idx", embedder=HashEmbedder(dim=64))
    examples = parse_examples((people / "examples.yaml").read_text(encoding="utf-8"))
    retriever = SimGRAGRetriever(index, FakeLLM(respond, scores=shorter_is_likelier), examples=examples,
                                 ground_patterns=False, channel=True, channel_readings=["skipped"])
    context = retriever.retrieve("What country is Ada from?")
    assert context.pattern is not None and context.pattern.families == (CHANNEL,)
    assert context.pattern.pattern.triples() == [("Ada", "nationality", "UNKNOWN nationality 1")]
    assert context.pattern.channel_reading == "skipped" and "went on from 'Ada'" in context.pattern.kg_repairs[-1]
    assert "Brennish" in context.answer_candidates
    # without the kind offered, the LLM's pattern stays
    other = SimGRAGRetriever(index, FakeLLM(respond, scores=shorter_is_likelier), examples=examples,
                             ground_patterns=False, channel=True, channel_readings=["shorter"])
    kept = other.retrieve("What country is Ada from?")
    assert kept.pattern is not None and kept.pattern.channel_reading != "skipped"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Ada", "Bo", "Nobody", "UNKNOWN place 1", "UNKNOWN person 2", "UNKNOWN 3"]),
                          st.sampled_from(["place_of_birth", "nationality", "children", "in nation", "x"]),
                          st.sampled_from(["Ada", "Lindon", "UNKNOWN place 1", "UNKNOWN person 2", "UNKNOWN 3"])),
                min_size=1, max_size=4))
def test_the_kg_gate_takes_any_pattern(people: Path, triples: list[tuple[str, str, str]]) -> None:
    """Whatever pattern the LLM wrote, the gate answers pairs of its own named and unknown nodes, or none."""
    reader = _reader(people)
    pairs = reader.skips("?", tuple(triples))
    nodes = {n for h, _, t in triples for n in (h, t)}
    assert all(a in nodes and b in nodes and not is_unknown(a) and is_unknown(b) for a, b in pairs)
