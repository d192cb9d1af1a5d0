"""Sampled readings (issue 41, build 3: "more LLM samples"): patterns the LLM samples for the question at a
temperature, one per fixed seed, offered to the channel choice beside its greedy pattern and scored by both
directions (the question's likelihood given each, and the model's own likelihood of writing each)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.errors import ConfigError, LLMError
from simgrag.eval.fit_grounding import SAMPLED_SET
from simgrag.grounding.channel import KNOWN_READINGS, READINGS, SAMPLES, sampled_readings
from simgrag.grounding.fit import GroundingFit, read_fit, store_fit
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.llm.base import ChatMessage, samples_text
from simgrag.llm.cache import CachedLLM
from simgrag.llm.counting import CountingLLM
from simgrag.pattern.generate import PatternGenerator
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from test_channel import toy as _toy_index  # the channel tests' toy index (rootdir-relative import)

toy = _toy_index

QUESTION = "Who directed Titanic?"
GREEDY = [["Titanic", "starred actors", "UNKNOWN person 1"]]  # the wrong relation, the LLM's likeliest
RIGHT = [["Titanic", "directed by", "UNKNOWN director 1"]]


def _greedy(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"triples": GREEDY})


def _sampler(messages: list[ChatMessage], seed: int) -> str:
    """Seed 2 samples the right relation, seed 3 text that is no pattern, the others the greedy pattern again."""
    if seed == 2:
        return json.dumps({"triples": RIGHT})
    return "I think the answer is" if seed == 3 else json.dumps({"triples": GREEDY})


def _scorer(direct_cost: float):  # type: ignore[no-untyped-def]
    """The channel finds "who directed …" likelier given a `directed by` hop by 5 nats; the direct score (condition
    ``""``: a reply to the pattern prompt) charges ``direct_cost`` nats for writing it."""
    def score(prefix: str, condition: str, scored: str) -> float:
        if condition == "":
            return -1.0 - (direct_cost if "directed by" in scored else 0.0)
        return -2.0 if "directed by" in condition else -7.0
    return score


def _engine(toy: IndexDir, llm: FakeLLM, readings: Sequence[str] = ("sampled",)) -> SimGRAG:
    options = {"ground_patterns": False, "channel": True, "channel_readings": list(readings)}
    return SimGRAG(toy, llm=llm, calibration="off", retriever_options=options)


def test_sampled_readings_are_the_samples_once_each_and_never_the_llms_own_pattern() -> None:
    own = [("X", "mother", "UNKNOWN person 1")]
    renamed = [("X", "mother", "UNKNOWN woman 3")]  # the own pattern but for an unknown node's label
    other = [("X", "spouse", "UNKNOWN person 1")]
    readings = sampled_readings(own, [own, renamed, other, other, []])
    assert [r.triples for r in readings] == [tuple(other)] and readings[0].sampled
    assert "sampled" in readings[0].why()
    assert len(sampled_readings(own, [[("X", f"r{i}", "UNKNOWN a 1")] for i in range(9)], limit=3)) == 3


@pytest.mark.parametrize("cost", [1.0, 9.0])
def test_the_channel_takes_a_sampled_pattern_only_when_both_directions_favour_it(toy: IndexDir, cost: float) -> None:
    """The channel finds the question 5 nats likelier under the sampled `directed by` pattern; writing it costs the
    LLM 1 nat (taken) or 9 (kept its own)."""
    llm = FakeLLM(_greedy, scores=_scorer(cost), samples=_sampler)
    result = _engine(toy, llm).ask(QUESTION)
    assert (result.answer.short_answer == "James Cameron") == (cost < 5)
    assert [r.seed for r in llm.sampled] == list(range(1, SAMPLES + 1))  # fixed seeds
    assert all(r.temperature > 0 for r in llm.sampled)
    assert result.pattern is not None
    took = any("sampled" in note for note in result.pattern.kg_repairs)
    assert took == (cost < 5)


def test_no_sampling_where_the_kind_is_not_offered_or_the_llm_cannot_sample(toy: IndexDir,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    llm = FakeLLM(_greedy, scores=_scorer(1.0), samples=_sampler)
    _engine(toy, llm, readings=("longer",)).ask(QUESTION)
    assert llm.sampled == []
    plain = FakeLLM(_greedy, scores=_scorer(1.0))  # scores, cannot sample: warned once, its own pattern kept
    with caplog.at_level("WARNING"):
        result = _engine(toy, plain).ask(QUESTION)
    assert "cannot sample by seed" in caplog.text
    assert result.pattern is not None and [list(t) for t in result.pattern.pattern.triples()] == GREEDY


def test_a_sampling_failure_keeps_the_llms_pattern(toy: IndexDir) -> None:
    def fails(messages: list[ChatMessage], seed: int) -> str:
        raise LLMError("the sampler broke")
    result = _engine(toy, FakeLLM(_greedy, scores=_scorer(1.0), samples=fails)).ask(QUESTION)
    assert result.pattern is not None and [list(t) for t in result.pattern.pattern.triples()] == GREEDY


def test_the_generator_samples_with_the_pattern_prompt_and_leaves_out_what_does_not_read() -> None:
    llm = FakeLLM([], samples=_sampler)
    generator = PatternGenerator(llm, "metaqa")
    patterns = generator.sample(QUESTION, [1, 2, 3], 0.8)
    assert [[list(t) for t in p.triples()] for p in patterns] == [GREEDY, RIGHT]  # seed 3's text left out
    assert llm.sampled[0].messages == tuple(generator.prompt.messages(QUESTION))
    with pytest.raises(AssertionError, match="cannot sample"):
        PatternGenerator(FakeLLM([]), "metaqa").sample(QUESTION, [1], 0.8)


def test_seeded_samples_are_cached_per_seed_and_wrappers_say_whether_they_sample(tmp_path: Path) -> None:
    inner = FakeLLM([], samples=lambda messages, seed: f"reply {seed}")
    cached = CachedLLM(inner, tmp_path / "calls.sqlite")
    messages = [ChatMessage("user", "q")]
    assert [r.text for r in cached.sample(messages, [1, 2], temperature=0.8)] == ["reply 1", "reply 2"]
    again = cached.sample(messages, [2, 1, 5], temperature=0.8)
    assert [r.text for r in again] == ["reply 2", "reply 1", "reply 5"] and [r.cached for r in again] == [
        True, True, False]
    assert [r.seed for r in inner.sampled] == [1, 2, 5]  # 2 and 1 came from the file
    cached.sample(messages, [1], temperature=0.5)  # another temperature is another sample
    assert len(inner.sampled) == 4
    counting = CountingLLM(cached)
    counting.sample(messages, [7, 8], temperature=0.8)
    assert counting.calls == 2
    assert samples_text(cached) and samples_text(counting)
    plain = CachedLLM(FakeLLM([]), tmp_path / "calls.sqlite")
    assert not samples_text(plain) and not samples_text(CountingLLM(plain))
    with pytest.raises(LLMError, match="cannot sample"):
        plain.sample(messages, [1], temperature=0.8)


def test_sampled_readings_are_opt_in_and_a_fit_with_them_round_trips(toy: IndexDir) -> None:
    assert "sampled" not in READINGS and "sampled" in KNOWN_READINGS  # more LLM calls: only where fitted on
    fit = GroundingFit(False, channel=True, channel_margin=0.5, channel_readings=("named", "sampled"))
    store_fit(toy.path, fit)
    reopened = open_index_dir(toy.path, embedder=HashEmbedder(dim=256))
    assert read_fit(reopened.manifest) == fit
    with pytest.raises(ConfigError, match="unknown kinds of reading"):
        _engine(toy, FakeLLM(_greedy, scores=_scorer(1.0)), readings=("sampled", "guessed")).ask(QUESTION)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["X", "UNKNOWN a 1", "UNKNOWN b 2", "Y"]),
                                    st.sampled_from(["r", "s"]),
                                    st.sampled_from(["X", "UNKNOWN a 1", "UNKNOWN b 2"])), max_size=3), max_size=6))
def test_sampled_readings_never_repeat_a_shape_or_the_own_pattern(samples: list[list[tuple[str, str, str]]]) -> None:
    own = [("X", "r", "UNKNOWN a 1")]
    readings = sampled_readings(own, samples, limit=10)
    shapes = [tuple((h if not h.startswith("UNKNOWN") else "?", r, t if not t.startswith("UNKNOWN") else "?")
                    for h, r, t in reading.triples) for reading in readings]
    assert all(reading.triples for reading in readings)
    assert len({reading.triples for reading in readings}) == len(readings)
    assert (("X", "r", "?"),) not in shapes


DIRECTED = {"Who directed Titanic?": ("James Cameron",), "Who directed Avatar?": ("James Cameron",),
            "Who directed Juno?": ("Jason Reitman",), "Who directed Memento?": ("Christopher Nolan",)}


def _movie(messages: Sequence[ChatMessage]) -> str:
    return next(m for m in ("Titanic", "Avatar", "Juno", "Memento") if m in messages[-1].content)


def test_the_fit_offers_sampled_readings_only_where_they_answer_more(toy: IndexDir,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The LLM writes `starred actors` for "who directed M?" and samples `directed by` with seed 2: only the set with
    sampled readings fixes the four (of the sets without analogies), so it is the one stored; it is tried only when
    asked (``sampled=True``, ``grounding fit --llm-samples``) and with an LLM that samples."""
    from simgrag.eval.fit_grounding import fit_grounding
    from simgrag.eval.runner import QAItem
    monkeypatch.setattr("simgrag.eval.fit_grounding.choose_stage", lambda *a, **k: "no_grounding")

    def greedy(messages: Sequence[ChatMessage]) -> str:
        return json.dumps({"triples": [[_movie(messages), "starred actors", "UNKNOWN person 1"]]})

    def sampler(messages: list[ChatMessage], seed: int) -> str:
        relation = "directed by" if seed == 2 else "starred actors"
        return json.dumps({"triples": [[_movie(messages), relation, "UNKNOWN person 1"]]})

    items = [QAItem(q, answers) for q, answers in DIRECTED.items()]
    first = ("shorter", "named", "contracted", "longer")  # the toy's examples' analogies fix these questions too
    monkeypatch.setattr("simgrag.eval.fit_grounding.READING_SETS", (first,))
    fit = fit_grounding(toy, FakeLLM(greedy, scores=_scorer(1.0), samples=sampler), items, progress=False,
                        sampled=True)
    tried = fit.info["channel"]["tried"]
    with_samples = ",".join(SAMPLED_SET)
    assert tried[with_samples]["fixed"] == 4 and tried[with_samples]["on"]
    assert not tried["shorter,named,contracted,longer"]["on"]
    assert fit.channel and "sampled" in fit.channel_readings
    plain = fit_grounding(toy, FakeLLM(greedy, scores=_scorer(1.0)), items, progress=False, sampled=True)
    assert with_samples not in plain.info["channel"]["tried"] and not plain.channel
    unasked = fit_grounding(toy, FakeLLM(greedy, scores=_scorer(1.0), samples=sampler), items, progress=False)
    assert with_samples not in unasked.info["channel"]["tried"] and not unasked.channel  # off unless asked


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=80), st.sampled_from([
    '{"triples": []}', '{"triples": [["a", "r"]]}', '{"triples": [["X", "r", "X"]]}', "null", "[1, 2", '{"triples": 5}',
    json.dumps({"triples": [[f"UNKNOWN n {i}", "r", f"UNKNOWN n {i + 1}"] for i in range(40)]})])),
    min_size=1, max_size=4))
def test_any_sampled_text_is_a_pattern_or_left_out_never_a_crash(texts: list[str]) -> None:
    llm = FakeLLM([], samples=lambda messages, seed: texts[(seed - 1) % len(texts)])
    patterns = PatternGenerator(llm, "metaqa").sample(QUESTION, range(1, len(texts) + 1), 0.8)
    assert len(patterns) <= len(texts) and all(p.triples() for p in patterns)


def test_the_grounding_fit_command_tries_sampled_readings_only_with_llm_samples(
        toy: IndexDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import simgrag.eval.fit_grounding as fitting
    import simgrag.llm.registry as registry
    from simgrag.cli import app

    asked: list[tuple[bool, bool]] = []
    real = fitting.fit_grounding

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append((kwargs.get("sampled", False), kwargs.get("variant", False)))
        return real(*args, **kwargs)

    monkeypatch.setattr(fitting, "fit_grounding", spy)
    monkeypatch.setattr(registry, "resolve_llm", lambda spec, **_: FakeLLM(_greedy, samples=_sampler))
    questions = tmp_path / "val.jsonl"
    questions.write_text("".join(json.dumps({"question": q, "answers": list(a)}) + "\n" for q, a in DIRECTED.items()),
                         encoding="utf-8")
    base = ["grounding", "fit", str(toy.path), "--questions", str(questions), "--llm", "openai:x", "--dry-run", "-q"]
    cases = (([], (False, False)), (["--llm-samples"], (True, False)), (["--llm-variant"], (False, True)))
    for flags, expected in cases:
        result = CliRunner().invoke(app, [*base, *flags])
        assert result.exit_code == 0, result.output
        assert asked[-1] == expected
