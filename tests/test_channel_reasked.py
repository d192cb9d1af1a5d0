"""The channel's reasked readings (issue 41): the same triples asking for another unknown leaf. "Where is the club X
plays for?" written ``[X, plays for country, UNKNOWN country 1], [X, plays in club, UNKNOWN club 1]`` asks for the
club (the last unknown leaf); the reading with the other leaf's triple put last asks for the country, and the
channel lets the LLM's likelihood of the question say which the question asks."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.grounding.channel import CHANNEL, DEFAULT_READINGS, KNOWN_READINGS, READINGS, _asked, reasked_readings
from simgrag.index.directory import open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pattern.examples import parse_examples
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.retrievers.simgrag import SimGRAGRetriever
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

CLUB = (("X", "plays for country", "UNKNOWN country 1"), ("X", "plays in club", "UNKNOWN club 1"))


def test_reasked_readings_put_another_leafs_triple_last() -> None:
    (only,) = reasked_readings(CLUB)
    assert only.triples == (CLUB[1], CLUB[0]) and _asked(only.triples) == "UNKNOWN country 1"
    assert only.kind == "reasked" and only.asked == "UNKNOWN country 1" and "'UNKNOWN country 1'" in only.why()
    # one unknown leaf: nothing else to ask; a chain's middle node is no leaf
    assert reasked_readings([("X", "children", "UNKNOWN person 1"), ("UNKNOWN person 1", "job", "UNKNOWN job 1")]) == []
    # a part hanging loose is not what the question asks about
    loose = [("UNKNOWN person 1", "religion", "UNKNOWN religion 1"), ("X", "spouse", "UNKNOWN person 2"),
             ("UNKNOWN person 2", "religion", "UNKNOWN religion 2")]
    assert reasked_readings(loose) == []
    star = [("UNKNOWN p 1", "a", "M"), ("UNKNOWN p 1", "b", "UNKNOWN q 1"), ("UNKNOWN p 1", "c", "UNKNOWN r 1")]
    assert [r.asked for r in reasked_readings(star)] == ["UNKNOWN q 1"]
    assert reasked_readings(star, limit=0) == [] and reasked_readings([]) == []
    assert "reasked" in KNOWN_READINGS and "reasked" not in READINGS and "reasked" not in DEFAULT_READINGS


NODES = ["A", "B", "UNKNOWN x 1", "UNKNOWN y 2", "UNKNOWN z 3", "UNKNOWN w 4"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(["r", "s"]), st.sampled_from(NODES)),
                min_size=1, max_size=4))
def test_every_reasked_reading_is_the_same_triples_asking_for_another_leaf(triples: list[tuple[str, str, str]]) -> None:
    try:
        pattern = Pattern.from_triples([list(t) for t in triples])
    except Exception:  # not a pattern at all: nothing to read
        return
    own = _asked(triples)
    degree = Counter(n for h, _, t in triples for n in (h, t))
    for reading in reasked_readings(triples, limit=10):
        assert pattern.is_connected() and Counter(reading.triples) == Counter(triples)
        asked = _asked(reading.triples)
        assert asked == reading.asked != own and is_unknown(asked) and degree[asked] == 1


def test_the_channel_takes_a_reasked_reading_and_one_with_a_name_put_in(people: Path) -> None:
    def likelier_asking_nationality(prefix: str, condition: str, scored: str) -> float:
        named = 0.0 if "Ada" in condition else -1.0  # the question's name in the pattern makes it likelier too
        return named + (-2.0 if "ANSWER: UNKNOWN nationality 1" in condition else -6.0)

    index = open_index_dir(people / "kg.idx", embedder=HashEmbedder(dim=64))
    examples = parse_examples((people / "examples.yaml").read_text(encoding="utf-8"))
    for subject in ("Ada", "UNKNOWN person 1"):  # as written; the question's name left out (a named reading)
        written = [[subject, "nationality", "UNKNOWN nationality 1"], [subject, "place_of_birth", "UNKNOWN place 1"]]

        def respond(messages: Sequence[ChatMessage], written: list[list[str]] = written) -> str:
            return json.dumps({"triples": written})

        retriever = SimGRAGRetriever(index, FakeLLM(respond, scores=likelier_asking_nationality), examples=examples,
                                     ground_patterns=False, channel=True, channel_readings=["named", "reasked"])
        context = retriever.retrieve("What nationality is Ada?")
        assert context.pattern is not None and context.pattern.families == (CHANNEL,)
        assert context.pattern.channel_reading == "reasked"
        assert context.pattern.pattern.triples()[-1] == ("Ada", "nationality", "UNKNOWN nationality 1")
        assert list(context.answer_candidates[:1]) == ["Brennish"]
        assert ("took 'UNKNOWN person 1' to be 'Ada'" in context.pattern.kg_repairs[-1]) is (subject != "Ada")
    # without the kind offered, the LLM's pattern keeps asking for the place
    kept = SimGRAGRetriever(index, FakeLLM(lambda m: json.dumps({"triples": [
        ["Ada", "nationality", "UNKNOWN nationality 1"], ["Ada", "place_of_birth", "UNKNOWN place 1"]]}),
        scores=likelier_asking_nationality), examples=examples, ground_patterns=False, channel=True,
        channel_readings=["named"]).retrieve("What nationality is Ada?")
    assert kept.pattern is not None and kept.pattern.pattern.triples()[-1][2] == "UNKNOWN place 1"
