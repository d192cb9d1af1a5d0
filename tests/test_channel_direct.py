"""The direct score beside the channel's (issue 41, build 3): the LLM's own log P(pattern | pattern prompt) added to
log P(question | pattern), so a reading must explain the question *and* be a pattern the model might have written;
longer readings spelled the way the examples spell relations; fitted and stored per KG like the channel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.errors import ConfigError, LLMError
from simgrag.eval.fit_grounding import READING_SETS, fit_grounding
from simgrag.eval.runner import QAItem
from simgrag.grounding.channel import DEFAULT_READINGS, longer_readings, shot_spelling
from simgrag.grounding.fit import GroundingFit, read_fit, store_fit
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.llm.cache import CachedLLM
from simgrag.pattern.examples import parse_examples
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from test_channel import _copies_the_hop, _drops_the_year  # scripted patterns (rootdir-relative import)
from test_channel import toy as _toy_index

toy = _toy_index  # the channel tests' toy index and examples, a fixture here too

SPACED = parse_examples("""
relations: [place_of_death, spouse, date_of_birth]
examples:
  - question: where did the wife of Bob die ?
    triples: [[Bob, spouse, UNKNOWN person 1], [UNKNOWN person 1, place of death, UNKNOWN place 2]]
  - question: who is Ann's husband ?
    triples: [[Ann, spouse, UNKNOWN person 1]]
""").examples
UNDERSCORED = parse_examples("""
relations: [place_of_death, spouse]
examples:
  - question: who is Ann's husband ?
    triples: [[Ann, spouse_of, UNKNOWN person 1]]
""").examples


def test_shot_spelling_writes_a_kg_relation_and_its_node_the_way_the_examples_do() -> None:
    spell = shot_spelling(SPACED)
    assert spell("place_of_death") == ("place of death", "place")  # an example has it: its words, its node
    assert spell("Place of  Death") == ("place of death", "place")
    assert spell("date_of_birth") == ("date of birth", "date of birth")  # none has it: spaces, as they write
    assert shot_spelling(UNDERSCORED)("date_of_birth") == ("date_of_birth", "date of birth")  # they keep "_"
    assert shot_spelling([])("place_of_death") == ("place_of_death", "place of death")
    assert shot_spelling(SPACED)("_") == ("", "")  # blank once spelled: longer_readings skips it


def test_longer_readings_are_spelled_as_the_examples_spell_and_skip_what_the_node_already_heads() -> None:
    asked = [("Ann", "spouse", "UNKNOWN person 1")]
    spell = shot_spelling(SPACED)
    readings = longer_readings(asked, ["place_of_death", "_", "date_of_birth"], spell=spell)
    assert [r.added for r in readings] == [("UNKNOWN person 1", "place of death", "UNKNOWN place 2"),
                                           ("UNKNOWN person 1", "date of birth", "UNKNOWN date of birth 2")]
    already = [("Ann", "spouse", "UNKNOWN person 1"), ("UNKNOWN person 1", "place of death", "Oslo")]
    assert longer_readings(already, ["place_of_death"], spell=spell) == []
    # without a spelling, the KG's name (as before)
    assert longer_readings(asked, ["place_of_death"])[0].added == (
        "UNKNOWN person 1", "place_of_death", "UNKNOWN place of death 2")


PER_KIND = parse_examples("""
relations: [father, religion]
examples:
  - question: what is the religion of the father of Bram ?
    triples: [[Bram, father, UNKNOWN person 1], [UNKNOWN person 1, religion, UNKNOWN religion 1]]
""").examples


def test_the_added_node_is_numbered_the_way_the_examples_number_theirs() -> None:
    asked = [("Ann", "father", "UNKNOWN person 1")]
    assert not shot_spelling(SPACED).per_kind and shot_spelling(PER_KIND).per_kind
    assert longer_readings(asked, ["religion", "father_in_law"], spell=shot_spelling(PER_KIND))[0].added == (
        "UNKNOWN person 1", "religion", "UNKNOWN religion 1")  # per kind, as "… person 1, … religion 1"
    two = longer_readings(asked, ["religion"], spell=shot_spelling(SPACED))[0].added
    assert two == ("UNKNOWN person 1", "religion", "UNKNOWN religion 2")  # across the pattern, as "person 1, place 2"


def _scorer(direct_cost: float):  # type: ignore[no-untyped-def]
    """The channel finds a question about release likelier with a year hop by 5 nats; the direct score (condition
    ``""``: a reply to the pattern prompt) charges ``direct_cost`` nats for writing a year hop."""
    def score(prefix: str, condition: str, scored: str) -> float:
        if condition == "":
            assert "user:" in prefix and scored.startswith('{"triples":')  # the pattern prompt, a JSON reply
            return -1.0 - (direct_cost if "release" in scored else 0.0)
        return -2.0 if ("release" in condition.split("ANSWER")[0]) == ("released" in scored) else -7.0
    return score


@pytest.mark.parametrize(("cost", "answer"), [(1.0, "1997"), (9.0, "Titanic")])
def test_the_direct_score_lets_a_hop_in_only_when_the_llm_might_have_written_it(toy: IndexDir, cost: float,
                                                                               answer: str) -> None:
    """The channel alone would take the year hop (5 nats); with the direct score it takes it when writing the hop costs
    the LLM 1 nat, not 9. Longer readings always carry the direct score: on the channel's word alone they added hops
    the question did not ask (WorldCup2014's conjunctive questions)."""
    llm = FakeLLM(_drops_the_year, scores=_scorer(cost))
    options = {"ground_patterns": False, "channel": True, "channel_readings": ["longer"]}
    question = "When was the movie Kate Winslet starred in released?"
    result = SimGRAG(toy, llm=llm, calibration="off", retriever_options=options).ask(question)
    assert result.answer.short_answer == answer
    replies = [s for _, c, s in llm.scored if c == ""]
    # its own first, then each longer reading, the hop spelled as the toy examples spell it ("release year")
    assert "release" not in replies[0] and any('"release year","UNKNOWN year 1"' in r for r in replies[1:])
    if answer == "1997":
        assert result.pattern is not None
        assert any("the question and the pattern are likelier" in r for r in result.pattern.kg_repairs)


def test_a_direct_scoring_failure_keeps_the_llms_pattern(toy: IndexDir) -> None:
    def fails(prefix: str, condition: str, scored: str) -> float:
        if condition == "":
            raise LLMError("the model could not score")
        return -2.0 if "release" in condition.split("ANSWER")[0] else -7.0
    engine = SimGRAG(toy, llm=FakeLLM(_drops_the_year, scores=fails), calibration="off",
                     retriever_options={"ground_patterns": False, "channel": True, "channel_readings": ["longer"]})
    assert engine.ask("When was the movie Kate Winslet starred in released?").answer.short_answer == "Titanic"


def test_reply_scores_are_cached_like_calls(tmp_path: Path) -> None:
    inner = FakeLLM([], scores=lambda prefix, condition, scored: -float(len(scored)))
    cached = CachedLLM(inner, tmp_path / "calls.sqlite")
    messages = [ChatMessage("system", "write JSON"), ChatMessage("user", "who directed Inception?")]
    first = cached.score_replies(messages, ["{}", '{"a":1}'])
    assert first == [-2.0, -7.0] and len(inner.scored) == 2
    again = CachedLLM(inner, tmp_path / "calls.sqlite")
    assert again.score_replies(messages, ['{"a":1}', "{}"]) == [-7.0, -2.0] and len(inner.scored) == 2
    assert again.score_replies([ChatMessage("user", "another")], ["{}"]) == [-2.0] and len(inner.scored) == 3
    with pytest.raises(LLMError, match="cannot score text"):
        CachedLLM(FakeLLM([]), tmp_path / "calls.sqlite").score_replies(messages, ["{}"])


def test_a_stored_direct_switch_still_reads_and_the_retriever_option_is_deprecated(toy: IndexDir) -> None:
    """Fits stored while the direct score was a switch keep opening (the key is read and ignored: longer readings
    always carry it); a malformed one is still refused; the retriever option warns that it does nothing."""
    store_fit(toy.path, GroundingFit(False, (), {"questions": 3}, channel=True, channel_margin=0.5))
    manifest_path = toy.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["grounding"]["channel_direct"] = True  # as a fit of 2026-12-05 stored it
    manifest_path.write_text(json.dumps(manifest))
    fit = read_fit(open_index_dir(toy.path, embedder=HashEmbedder(dim=256)).manifest)
    assert fit is not None and fit.channel_setting() == (0.5, fit.channel_readings)
    assert "channel_direct" not in fit.to_dict()
    # where the channel is off the default readings run (their longer readings with the direct score)
    assert GroundingFit(True).channel_setting() == (0.0, DEFAULT_READINGS)
    with pytest.raises(ConfigError, match="'channel_direct' is not true/false"):
        GroundingFit.from_dict({"enabled": True, "channel_direct": "yes"})
    with pytest.warns(FutureWarning, match="'channel_direct' has no effect"):
        engine = SimGRAG(toy, llm=FakeLLM(_drops_the_year, scores=_scorer(1.0)), calibration="off",
                         retriever_options={"ground_patterns": False, "channel": True, "channel_direct": True})
        assert engine.retriever is not None  # built here: the option is read


#: the LLM leaves the year hop out of every question; two ask for it, one does not
LEFT_OUT = {
    "When were the movies Kate Winslet starred in released?": ("1997",),
    "When were the movies Guy Pearce starred in released?": ("2000",),
    "When was the movie Kate Winslet starred in released?": ("1997",),
    "When was the movie Guy Pearce starred in released?": ("2000",),
    "Which movies did Kate Winslet star in?": ("Titanic",),
    "Which movies did Guy Pearce star in?": ("Memento",),
}


def _leaves_out(messages: Sequence[ChatMessage]) -> str:
    asked = messages[-1].content
    actor = "Kate Winslet" if "Kate" in asked else "Guy Pearce"
    return json.dumps({"triples": [["UNKNOWN movie 1", "starred actors", actor]]})


def _channel_likes_years(prefix: str, condition: str, scored: str) -> float:
    """The channel likes a year hop for every question (it breaks the one-hop ones); the direct score charges 1 nat
    for the hop, and 9 when the question does not ask about release."""
    if condition == "":
        asked = prefix.rstrip("\n").rsplit("user: ", 1)[-1]
        return -1.0 - ((1.0 if "released" in asked else 9.0) if "release" in scored else 0.0)
    return -2.0 if "release" in condition.split("ANSWER")[0] else -6.0


def test_the_fit_stores_the_direct_score_where_it_answers_more(toy: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simgrag.eval.fit_grounding.choose_stage", lambda *a, **k: "no_grounding")
    monkeypatch.setattr("simgrag.eval.fit_grounding.significant_gain", lambda fixed, broke: fixed > broke)
    items = [QAItem(q, answers) for q, answers in LEFT_OUT.items()]
    fit = fit_grounding(toy, FakeLLM(_leaves_out, scores=_channel_likes_years), items, progress=False)
    tried = fit.info["channel"]["tried"]
    first = tried[",".join(READING_SETS[0])]
    # the channel alone would break the one-hop questions; its longer readings carry the direct score, so none broke
    assert (first["fixed"], first["broke"]) == (4, 0) and "direct" not in first
    assert not any(k.endswith("+direct") for k in tried) and fit.channel


def _prefers_the_copy_it_wrote(prefix: str, condition: str, scored: str) -> float:
    """The channel finds the question likelier with one hop (by 7 nats); the model finds its copied pattern likelier
    to write than the contracted one by 9 (it wrote the copy)."""
    if condition == "":
        return -1.0 if scored.count("starred actors") == 2 else -10.0
    return -2.0 if condition.count("starred actors") == 1 else -9.0


def test_the_direct_score_speaks_only_for_readings_that_add_a_hop(toy: IndexDir) -> None:
    """A copied hop is the model's own likeliest output: its likelihood does not keep the copy in."""
    llm = FakeLLM(_copies_the_hop, scores=_prefers_the_copy_it_wrote)
    engine = SimGRAG(toy, llm=llm, calibration="off", retriever_options={
        "ground_patterns": False, "channel": True, "channel_readings": ["contracted", "longer"]})
    result = engine.ask("Who starred in Titanic?")
    assert result.pattern is not None
    assert result.pattern.pattern.triples() == [("Titanic", "starred actors", "UNKNOWN actor 2")]
    assert "the question is likelier" in result.pattern.kg_repairs[-1]
    replies = [s for _, c, s in llm.scored if c == ""]
    assert all(s.count("starred actors") >= 2 for s in replies)  # its own and longer readings, never the contracted


def test_only_the_longer_readings_the_model_would_likeliest_write_are_scored_by_the_channel(
        toy: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simgrag.grounding.channel.DIRECT_KEEP", 1)

    def score(prefix: str, condition: str, scored: str) -> float:
        if condition == "":  # the model would write the release year before any other hop
            return -1.0 - (0.5 if "release year" in scored else 4.0 if scored.count("[") > 2 else 0.0)
        return -2.0 if "release" in condition.split("ANSWER")[0] else -7.0
    llm = FakeLLM(_drops_the_year, scores=score)
    engine = SimGRAG(toy, llm=llm, calibration="off", retriever_options={
        "ground_patterns": False, "channel": True, "channel_readings": ["longer"]})
    assert engine.ask("When was the movie Kate Winslet starred in released?").answer.short_answer == "1997"
    direct = [s for _, c, s in llm.scored if c == ""]
    channel = [c for _, c, _ in llm.scored if c != ""]
    assert len(direct) >= 3  # its own pattern and at least two longer readings were offered
    assert len(channel) == 2 and "release year" in channel[1]  # its own and the one kept


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_text, _text, _text), min_size=1, max_size=4), st.lists(_text, max_size=6))
def test_any_example_spelling_and_relation_names_make_parseable_hops_or_none(shot: list[tuple[str, str, str]],
                                                                            relations: list[str]) -> None:
    """Whatever the examples and the KG call things (blank, underscores only, unicode, digits), a longer reading
    is a pattern the parser takes, its hop from the asked-for node to a new unknown node."""
    from simgrag.pattern.examples import Example
    from simgrag.pattern.validate import validate_triples

    spell = shot_spelling([Example("q", tuple(shot))])
    asked = [("Ann", "spouse", "UNKNOWN person 1")]
    for reading in longer_readings(asked, relations, spell=spell):
        head, relation, tail = reading.added  # type: ignore[misc]
        assert head == "UNKNOWN person 1" and relation.strip() and tail.startswith("UNKNOWN ")
        validate_triples([list(t) for t in reading.triples], require_connected=True)  # the generator's own check


class _TookAnExample:
    """A pattern stage before the channel that took an example's pattern on the question's and the KG's word alone,
    with no LLM call (as the sample KG's stage does for "Which movies share actors with Heat?")."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def pattern(self, text: str):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        return replace(self.inner.pattern(text), attempts=0)  # type: ignore[attr-defined]


def test_a_longer_reading_mends_only_a_pattern_an_llm_call_wrote(toy: IndexDir) -> None:
    """The year hop wins on the channel's and the model's word (1997) when the LLM wrote the pattern; a pattern no
    LLM wrote (an example's, taken on the KG's word) gets no longer reading: the model's likelihood of a hop is no
    evidence of a slip it did not make."""
    llm = FakeLLM(_drops_the_year, scores=_scorer(1.0))
    options = {"ground_patterns": False, "channel": True, "channel_readings": ["longer"]}
    question = "When was the movie Kate Winslet starred in released?"
    engine = SimGRAG(toy, llm=llm, calibration="off", retriever_options=options)
    assert engine.ask(question).answer.short_answer == "1997"
    taken = SimGRAG(toy, llm=llm, calibration="off", retriever_options=options)
    channel = taken.retriever.patterns  # type: ignore[attr-defined]
    channel.inner = _TookAnExample(channel.inner)
    result = taken.ask(question)
    assert result.answer.short_answer == "Titanic" and result.pattern is not None
    assert not any("release" in r for _, r, _ in result.pattern.pattern.triples())
