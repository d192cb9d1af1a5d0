"""Variant readings (issue 41, build 3: the LLM's own alternatives): the pattern the LLM writes greedily for the
question under the same prompt with more of the examples shown, offered to the channel choice beside its own
pattern and scored by both directions (the question's likelihood given each, the model's likelihood of writing
each)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.errors import ConfigError, LLMError
from simgrag.eval.fit_grounding import fit_grounding
from simgrag.eval.runner import QAItem
from simgrag.grounding.channel import (
    DEFAULT_READINGS,
    KNOWN_READINGS,
    READINGS,
    VARIANT,
    VARIANT_EXTRA_SHOTS,
    sampled_readings,
    variant_readings,
)
from simgrag.grounding.fit import GroundingFit, store_fit
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pattern.examples import parse_examples
from simgrag.pattern.generate import PatternGenerator
from simgrag.pattern.graph import Pattern
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from test_channel import toy as _toy_index  # the channel tests' toy index (rootdir-relative import)
from test_channel_sampled import GREEDY, QUESTION, RIGHT, _scorer  # the sampled readings' question, patterns, scorer
from test_grounding import EXAMPLES  # its four examples

toy = _toy_index

#: one static shot and one dynamic: three examples left for the variant's prompt to add
SHOTS = {"n_static_shots": 1, "n_dynamic_shots": 1}
BASE_MESSAGES = 1 + 2 * 1 + 2 * 1 + 1  # system, the static shot, the dynamic shot, the question


def _writes_right_with_more_shots(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"triples": RIGHT if len(messages) > BASE_MESSAGES else GREEDY})


def _engine(toy: IndexDir, llm: FakeLLM, readings: Sequence[str] = ("variant",)) -> SimGRAG:
    options = {"ground_patterns": False, "channel": True, "channel_readings": list(readings)}
    return SimGRAG(toy, llm=llm, calibration="off", retriever_options=options, pattern_options=dict(SHOTS))


def test_a_variant_reading_is_the_variants_pattern_unless_it_is_the_llms_own() -> None:
    own = [("X", "mother", "UNKNOWN person 1")]
    (reading,) = variant_readings(own, [("X", "spouse", "UNKNOWN person 1")])
    assert reading.variant and reading.written and not reading.sampled
    assert reading.triples == (("X", "spouse", "UNKNOWN person 1"),) and "more examples" in reading.why()
    assert variant_readings(own, [("X", "mother", "UNKNOWN woman 3")]) == []  # the same up to a label
    assert variant_readings(own, None) == [] and variant_readings(own, []) == []


def test_the_variant_prompt_shows_more_dynamic_shots_and_is_not_sent_when_there_are_none_more() -> None:
    examples = parse_examples(EXAMPLES)
    llm = FakeLLM(_writes_right_with_more_shots)
    generator = PatternGenerator(llm, examples, **SHOTS)
    variant = generator.variant(QUESTION, 1 + VARIANT_EXTRA_SHOTS)
    assert variant is not None and [list(t) for t in variant.triples()] == RIGHT
    (call,) = llm.calls
    assert len(call.messages) == BASE_MESSAGES + 2 * VARIANT_EXTRA_SHOTS and call.temperature == 0.0
    assert call.messages[: 1 + 2] == tuple(generator.prompt.fixed_messages())  # the same static part
    assert call.messages[-1] == generator.prompt.messages(QUESTION)[-1]
    # the generator's own number of shots, or no example left to add: no call (the same prompt, the same reply)
    assert generator.variant(QUESTION, 1) is None
    assert PatternGenerator(llm, examples, n_static_shots=4, n_dynamic_shots=2).variant(QUESTION, 4) is None
    assert len(llm.calls) == 1
    # a reply that is no pattern is no variant
    assert PatternGenerator(FakeLLM(["I think it is James Cameron"]), examples, **SHOTS).variant(QUESTION, 3) is None


@pytest.mark.parametrize("cost", [1.0, 9.0])
def test_the_channel_takes_the_variant_only_when_both_directions_favour_it(toy: IndexDir, cost: float) -> None:
    """The channel finds the question 5 nats likelier under the variant's `directed by` pattern; writing it costs
    the LLM 1 nat (taken) or 9 (kept its own)."""
    llm = FakeLLM(_writes_right_with_more_shots, scores=_scorer(cost))
    result = _engine(toy, llm).ask(QUESTION)
    assert (result.answer.short_answer == "James Cameron") == (cost < 5)
    assert result.pattern is not None
    assert any("more examples" in note for note in result.pattern.kg_repairs) == (cost < 5)
    assert sorted(len(c.messages) for c in llm.calls) == [BASE_MESSAGES, BASE_MESSAGES + 2 * VARIANT_EXTRA_SHOTS]


def test_no_variant_where_the_kind_is_not_offered_and_a_failing_variant_keeps_the_pattern(toy: IndexDir) -> None:
    llm = FakeLLM(_writes_right_with_more_shots, scores=_scorer(1.0))
    result = _engine(toy, llm, readings=("longer",)).ask(QUESTION)
    assert all(len(c.messages) == BASE_MESSAGES for c in llm.calls)  # one prompt size: no variant sent
    assert result.pattern is not None and [list(t) for t in result.pattern.pattern.triples()] == GREEDY

    def fails_with_more_shots(messages: Sequence[ChatMessage]) -> str:
        if len(messages) > BASE_MESSAGES:
            raise LLMError("the server went away")
        return json.dumps({"triples": GREEDY})
    kept = _engine(toy, FakeLLM(fails_with_more_shots, scores=_scorer(1.0))).ask(QUESTION)
    assert kept.pattern is not None and [list(t) for t in kept.pattern.pattern.triples()] == GREEDY


def test_variant_readings_are_opt_in() -> None:
    assert VARIANT in KNOWN_READINGS and VARIANT not in READINGS and VARIANT not in DEFAULT_READINGS


# ---------------------------------------------------------------- fitted per KG: its own switch
DIRECTED = {"Who directed Titanic?": ["James Cameron"], "Who directed Inception?": ["Christopher Nolan"],
            "Who directed Juno?": ["Jason Reitman"], "Who directed Avatar?": ["James Cameron"]}


def _movie(messages: Sequence[ChatMessage]) -> str:
    return next(m for m in ("Titanic", "Inception", "Juno", "Avatar") if m in messages[-1].content)


def _writer(variant_right: bool):  # type: ignore[no-untyped-def]
    """The LLM's own pattern has the wrong relation and the variant the right one, or the other way round."""
    def write(messages: Sequence[ChatMessage]) -> str:
        right = (len(messages) > BASE_MESSAGES) == variant_right
        relation = "directed by" if right else "starred actors"
        return json.dumps({"triples": [[_movie(messages), relation, "UNKNOWN person 1"]]})
    return write


def _prefers(relation: str):  # type: ignore[no-untyped-def]
    """Both directions favour one-triple patterns with ``relation``: the channel by 5 nats, the direct score by 1 (a
    longer or inserted reading with it, one hop more than the question asks, is not favoured)."""
    def score(prefix: str, condition: str, scored: str) -> float:
        if condition == "":
            one = len(re.findall(r"\]\s*,\s*\[", scored)) == 0
            return -1.0 if relation in scored and one else -2.0
        return -2.0 if relation in condition and "; [" not in condition else -7.0
    return score


@pytest.mark.parametrize("variant_right", [True, False])
def test_a_fit_asked_to_try_the_variant_keeps_it_only_on_a_gain_and_the_other_readings_stay(
        toy: IndexDir, variant_right: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simgrag.eval.fit_grounding.choose_stage", lambda *a, **k: "no_grounding")
    items = [QAItem(q, a) for q, a in DIRECTED.items()]
    # the channel prefers the variant's relation either way: it fixes all four, or breaks all four
    preferred = "directed by" if variant_right else "starred actors"
    fit = fit_grounding(toy, FakeLLM(_writer(variant_right), scores=_prefers(preferred)), items, progress=False,
                        pattern_options=dict(SHOTS), variant=True)
    check = fit.info["channel"]["named"]["variant"]
    assert (check["used"], check["fixed"], check["broke"]) == ((4, 4, 0) if variant_right else (4, 0, 4))
    assert fit.variant is variant_right and check["on"] is variant_right
    assert fit.named_margin is not None  # the other default readings stay on either way
    assert (VARIANT in fit.default_readings) is variant_right
    assert GroundingFit.from_dict(fit.to_dict()) == fit
    # not asked: not tried, off (one more LLM call a question)
    llm = FakeLLM(_writer(True), scores=_prefers("directed by"))
    unasked = fit_grounding(toy, llm, items, progress=False, pattern_options=dict(SHOTS))
    assert unasked.variant is False and unasked.info["channel"]["named"]["variant"]["why"] == "not asked"
    assert not any(len(c.messages) == BASE_MESSAGES + 2 * VARIANT_EXTRA_SHOTS for c in llm.calls)  # no variant sent


def test_a_fit_turns_the_variant_on_at_ask_time_and_an_old_fit_lacks_it(toy: IndexDir) -> None:
    store_fit(toy.path, GroundingFit(False))  # the variant off (the default)
    llm = FakeLLM(_writes_right_with_more_shots, scores=_scorer(1.0))
    options = {"calibration": "off", "pattern_options": dict(SHOTS)}
    result = SimGRAG(open_index_dir(toy.path, embedder=HashEmbedder(dim=256)), llm=llm, **options).ask(QUESTION)
    assert all(len(c.messages) == BASE_MESSAGES for c in llm.calls)  # the default readings ran, without a variant
    assert result.pattern is not None and [list(t) for t in result.pattern.pattern.triples()] == GREEDY
    store_fit(toy.path, GroundingFit(False, variant=True))  # on: the variant's prompt is sent
    llm = FakeLLM(_writes_right_with_more_shots, scores=_scorer(1.0))
    taken = SimGRAG(open_index_dir(toy.path, embedder=HashEmbedder(dim=256)), llm=llm, **options).ask(QUESTION)
    assert taken.answer.short_answer == "James Cameron"
    old = {k: v for k, v in GroundingFit(False, variant=True).to_dict().items() if k != "variant"}
    assert GroundingFit.from_dict(old).variant is False  # made before variant readings: never checked them
    assert "variant" not in GroundingFit.from_dict(old).default_readings
    with pytest.raises(ConfigError, match="'variant' is not true/false"):
        GroundingFit.from_dict({**old, "variant": "yes"})


def test_a_written_reading_in_pieces_never_replaces_a_connected_pattern() -> None:
    own = [("UNKNOWN person 1", "leads project", "P"), ("UNKNOWN person 1", "works in", "UNKNOWN department 1")]
    pieces = [("UNKNOWN person 1", "leads project", "P"), ("UNKNOWN project 1", "works in", "UNKNOWN department 1")]
    assert variant_readings(own, pieces) == [] and sampled_readings(own, [pieces]) == []
    # a pattern already in pieces may be read another way in pieces
    split = [("X", "r", "UNKNOWN a 1"), ("UNKNOWN b 1", "s", "Y")]
    assert len(variant_readings(split, pieces)) == 1 and len(sampled_readings(split, [pieces])) == 1


_NODES = st.sampled_from(["X", "Y", "UNKNOWN person 1", "UNKNOWN person 2", "UNKNOWN place 1"])
_TRIPLES = st.lists(st.tuples(_NODES, st.sampled_from(["r", "s", "spouse"]), _NODES).filter(lambda t: t[0] != t[2]),
                    min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_TRIPLES, st.one_of(st.none(), _TRIPLES))
def test_variant_readings_of_any_pair_of_patterns(own: list[tuple[str, str, str]],
                                                  other: list[tuple[str, str, str]] | None) -> None:
    """Never an error; at most one reading, never the LLM's own pattern up to labels, never in pieces where the LLM's
    own pattern is connected; sampled readings keep the same rule."""
    readings = variant_readings(own, other)
    assert len(readings) <= 1
    connected = Pattern.from_triples([list(t) for t in own]).is_connected()
    for reading in [*readings, *sampled_readings(own, [other] if other else [])]:
        assert reading.written and reading.kind in ("variant", "sampled")
        assert not connected or Pattern.from_triples([list(t) for t in reading.triples]).is_connected()
        assert reading.triples != tuple(own)
