"""Issue 42 part 1: "exact match" only when the KG holds the pattern exactly *and* the pattern reads the
whole question; otherwise the answer says what is uncertain, and no LLM reply is printed when none ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.answer.calibration import Calibration, EvidenceFeatures, split_details
from simgrag.answer.reading import read_pattern
from simgrag.cli import app
from simgrag.pattern.graph import Pattern
from simgrag.pipeline import SimGRAG
from simgrag.testing import FakeLLM

NO_ANALOGY = {"analogy": False}


def _engine(toy_dir: Path, *patterns: list[list[str]]) -> tuple[SimGRAG, FakeLLM]:
    llm = FakeLLM([json.dumps({"triples": p}) for p in patterns])
    return SimGRAG(toy_dir, llm=llm, answer_mode="auto", ground_patterns=False, pattern_options=NO_ANALOGY), llm


def test_one_hop_pattern_of_a_two_hop_question_is_not_labelled_exact(toy_dir: Path) -> None:
    engine, llm = _engine(toy_dir, [["UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio"]])
    result = engine.ask("Who directed the movies Leonardo DiCaprio starred in?")
    answer = result.answer
    assert set(answer.entities) == {"Inception", "Titanic"} and len(llm.calls) == 1  # from the bindings, no LLM
    assert not answer.exact and not answer.llm_used
    assert "exact match" not in answer.reason
    assert "'directed'" in answer.reason and "may not ask what the question asks" in answer.reason
    payload = result.to_dict()
    assert payload["exact_match"] is False and payload["llm_used"] is False
    assert payload["pattern_reading"]["unread_words"] == ["directed"]


def test_a_pattern_that_reads_the_whole_question_is_exact(toy_dir: Path) -> None:
    engine, _ = _engine(toy_dir, [["UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio"],
                                  ["UNKNOWN movie 1", "directed by", "UNKNOWN director 1"]])
    answer = engine.ask("Who directed the movies Leonardo DiCaprio starred in?").answer
    assert set(answer.entities) == {"Christopher Nolan", "James Cameron"}
    assert answer.exact and answer.reason.startswith("exact match")


def test_reading_counts_hops_and_join_words() -> None:
    shared = Pattern.from_triples([["Heat", "starred actors", "UNKNOWN actor 1"],
                                   ["UNKNOWN movie 1", "starred actors", "UNKNOWN actor 1"]])
    assert read_pattern("Which movies share actors with Heat?", shared, None).whole
    one_hop = Pattern.from_triples([["Heat", "starred actors", "UNKNOWN actor 1"]])
    reading = read_pattern("Which movies share actors with Heat?", one_hop, None)
    assert set(reading.unread) == {"movies", "share"} and not reading.whole
    assert "'movies'" in reading.uncertainty()


def test_cli_text_says_no_llm_ran_and_what_is_uncertain(toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = FakeLLM([json.dumps({"triples": [["UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio"]]})])
    monkeypatch.setattr("simgrag.cli._common.llm_for", lambda choice: llm)
    out = CliRunner().invoke(app, ["ask", str(toy_dir), "Who directed the movies Leonardo DiCaprio starred in?",
                                   "--no-grounding", "--no-analogy", "--no-learn"])
    assert out.exit_code == 0, out.output
    assert "LLM reply" not in out.output and "LLM:" not in out.output
    assert "(no LLM call: answered from the subgraph bindings" in out.output and "'directed'" in out.output


def test_calibrated_reason_is_a_plain_sentence_with_details() -> None:
    reason = Calibration(named=0.132).decide(EvidenceFeatures(1.02, 0.0, 0.0, 0.1, 1))
    assert reason is not None
    plain, details = split_details(reason)
    assert "above" not in plain and "1.02" not in plain and "name in the question" in plain
    assert details == "named 1.02 is above the calibrated threshold 0.132"


def test_words_of_one_stem_read_each_other() -> None:
    """A question's "leader" is read by a pattern's `leads project` (the same first letters, a short ending on
    each); words that only start alike are not."""
    from simgrag.answer.reading import _same_stem

    for a, b in (("leader", "leads"), ("player", "plays"), ("director", "direct"), ("countries", "country"),
                 ("directed", "director")):
        assert _same_stem(a, b) and _same_stem(b, a), (a, b)
    for a, b in (("actor", "acted"), ("capital", "capitol"), ("language", "languid"), ("play", "plateau")):
        assert not _same_stem(a, b), (a, b)
