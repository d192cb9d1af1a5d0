"""The pattern stage fitted per KG (issue 41): the edit registry, the fit on a toy KG with a scripted LLM,
the switches a fit stores, the no-harm rule and the manifest round trip."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.errors import ConfigError, DatasetError, IndexDirError
from simgrag.eval.fit_grounding import Outcome, choose_stage, family_gains, fit_grounding
from simgrag.eval.runner import QAItem
from simgrag.grounding import GroundedPatterns
from simgrag.grounding.channel import DEFAULT_READINGS
from simgrag.grounding.fit import GroundingFit, check_fit, read_fit, store_fit
from simgrag.grounding.registry import EDITS, Edit, edit_names, family_names, propose_edits, register_edit
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pattern.examples import parse_examples
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.simgrag import LLMPatternStage, SimGRAGRetriever
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import write_toy_kg
from test_grounding import ALIASES, EXAMPLES  # the toy KG's aliases and examples (rootdir-relative import)

#: what the scripted LLM writes for each question: the first two are right, the third names a film the
#: question does not (the examples' "who directed Memento" copied): the KG's analogy repairs it
PATTERNS = {
    "Who directed Titanic?": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "Which movies did Kate Winslet star in?": [["UNKNOWN movie 1", "starred actors", "Kate Winslet"]],
    "Who directed Juno?": [["Memento", "directed by", "UNKNOWN director 1"]],
}
ITEMS = [QAItem("Who directed Titanic?", ("James Cameron",)),
         QAItem("Which movies did Kate Winslet star in?", ("Titanic",)),
         QAItem("Who directed Juno?", ("Jason Reitman",))]


def _respond(messages: Sequence[ChatMessage]) -> str:
    asked = messages[-1].content
    for question, triples in PATTERNS.items():
        if question in asked:
            return json.dumps({"triples": triples})
    return json.dumps({"triples": [["Inception", "directed by", "UNKNOWN director 1"]]})


@pytest.fixture()
def toy(tmp_path: Path) -> IndexDir:
    (tmp_path / "aliases.yaml").write_text(ALIASES, encoding="utf-8")
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=256),
                    relation_aliases=tmp_path / "aliases.yaml")
    return open_index_dir(tmp_path / "toy.idx", embedder=HashEmbedder(dim=256))


# ---------------------------------------------------------------- the registry
def test_every_edit_is_registered_once_with_a_known_problem() -> None:
    names = edit_names()
    assert len(names) == len(set(names)) and names[-1] == "drop_part"
    assert {"analogy", "revision"} <= set(family_names())
    for must in ("drop_leaf", "rebind_relation", "rebind_asked", "prune_unsupported", "insert_hop"):
        assert must in names


def test_a_plugin_edit_registers_in_place_and_its_candidates_carry_its_name() -> None:
    def nothing(ctx: object) -> list:  # type: ignore[type-arg]
        return []

    plugin = Edit("test_plugin", "shape", nothing)
    register_edit(plugin, before="merge_parts")
    try:
        assert edit_names().index("test_plugin") == edit_names().index("merge_parts") - 1
        with pytest.raises(ConfigError, match="registered already"):
            register_edit(plugin)
        with pytest.raises(ConfigError, match="unknown problem"):
            register_edit(Edit("test_other", "vibes", nothing))
        with pytest.raises(ConfigError, match="no edit named"):
            register_edit(Edit("test_other", "shape", nothing), before="nope")
        with pytest.raises(ConfigError, match="not an edit"):
            register_edit(object())  # type: ignore[arg-type]
    finally:
        EDITS.remove(plugin)
    assert "test_plugin" not in edit_names()


def test_proposed_edits_are_tagged_and_a_disabled_family_proposes_nothing(toy: IndexDir) -> None:
    from simgrag.grounding import Candidate, PatternJudge
    from simgrag.match.retrieve import SubgraphRetriever

    judge = PatternJudge(SubgraphRetriever(toy), examples=[e.triples for e in parse_examples(EXAMPLES).examples])
    reading = judge.read("Who directed Juno?")  # written with a loose part: a copied release-year triple
    base = judge.judge(reading, Candidate((("Juno", "directed by", "UNKNOWN director 1"),
                                           ("UNKNOWN movie 1", "release year", "UNKNOWN year 1"))))
    proposed = propose_edits(judge, reading, base)
    assert proposed and all(c.families and c.families[-1] in family_names() for c in proposed)
    used = {c.families[-1] for c in proposed}
    fewer = propose_edits(judge, reading, base, disabled=used)
    assert fewer == []


def test_simgrag_ls_lists_the_edit_families() -> None:
    from simgrag.cli import app

    result = CliRunner().invoke(app, ["ls"])
    assert result.exit_code == 0, result.output
    for name in (*edit_names(), "analogy", "revision", "channel"):
        assert name in result.output


# ---------------------------------------------------------------- the fit
def test_a_family_that_breaks_more_than_it_fixes_is_switched_off() -> None:
    full = {0: Outcome(True, ("drop_leaf",)), 1: Outcome(False, ("drop_leaf",)), 2: Outcome(False, ("drop_leaf",)),
            3: Outcome(True, ("analogy",))}
    ablations = {"drop_leaf": {0: Outcome(True), 1: Outcome(True), 2: Outcome(True)},  # off, it answers 2 more
                 "analogy": {3: Outcome(False)}}
    gains = family_gains(full, ablations)
    assert gains["drop_leaf"] == {"used": 3, "fixed": 0, "broke": 2}
    assert gains["analogy"] == {"used": 1, "fixed": 1, "broke": 0}


def test_no_harm_the_stage_is_never_chosen_below_the_llms_own_patterns() -> None:
    assert choose_stage({"no_grounding": 5, "fitted": 4, "pruned": 4, "every_family": 4}) == "no_grounding"
    assert choose_stage({"no_grounding": 5, "fitted": 5, "pruned": 5, "every_family": 5}) == "no_grounding"  # tie
    assert choose_stage({"no_grounding": 5, "fitted": 6, "pruned": 6, "every_family": 6}) == "fitted"
    assert choose_stage({"no_grounding": 5, "fitted": 6, "pruned": 7, "every_family": 7}) == "pruned"
    assert choose_stage({"no_grounding": 5, "fitted": 6, "pruned": 6, "every_family": 7}) == "every_family"


def test_fit_on_a_toy_kg_keeps_what_helps_and_switches_the_rest_off(toy: IndexDir) -> None:
    llm = FakeLLM(_respond)
    juno = ITEMS[2]  # asked four times: a gain of one question is no evidence (the fit's sign test)
    fit = fit_grounding(toy, llm, [*ITEMS, juno, juno, juno], examples=parse_examples(EXAMPLES), progress=False)
    hits = fit.info["hits"]
    assert hits["no_grounding"] == 2 and hits["fitted"] == 6  # "Who directed Juno?" needs the KG's repair
    assert fit.enabled and fit.info["chosen"] == "fitted"
    helped = {f for f, row in fit.info["families"].items() if row["fixed"] > row["broke"]}
    assert helped and not helped & set(fit.disabled)
    assert set(fit.disabled) == set(family_names()) - helped  # every family that did not help is off
    assert fit.info["questions"] == 6 and fit.info["llm_calls"] <= 6  # one call per question, shared by the runs
    once = fit_grounding(toy, FakeLLM(_respond), ITEMS, examples=parse_examples(EXAMPLES), progress=False)
    assert once.info["hits"]["fitted"] == 3 and not once.enabled  # 3 vs 2 on three questions: chance, stays off


def test_a_fit_out_of_time_runs_the_floor_and_every_family_and_lists_what_it_skipped(
        toy: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learning budget bounds the fit: past its deadline no optional trial starts; a family never ablated
    stays off, the default readings stay on unchecked (as on an unfitted KG), the channel is not tried."""
    juno = ITEMS[2]
    items = [*ITEMS, juno, juno, juno]

    def llm() -> FakeLLM:  # one that scores text, so the channel's trials are there to skip
        return FakeLLM(_respond, scores=lambda prefix, condition, scored: -float(len(condition)))

    from simgrag.eval.fit_grounding import _Runner

    monkeypatch.setattr(_Runner, "estimate", lambda self, questions, kind: 1e6)  # every optional run: too long
    fit = fit_grounding(toy, llm(), items, examples=parse_examples(EXAMPLES), progress=False, deadline_s=600.0)
    assert set(fit.info["hits"]) == {"no_grounding", "fitted", "pruned", "every_family"}  # fitted = floor, pruned = all
    assert fit.info["hits"]["no_grounding"] == 2 and fit.info["hits"]["every_family"] == 6
    assert fit.enabled and fit.info["chosen"] in ("pruned", "every_family") and fit.disabled == ()  # the same
    assert fit.info["families"] == {} and fit.info["questions"] == 6 and "offered" not in fit.info
    skipped = fit.info["skipped"]
    assert any(s.startswith("without ") for s in skipped)
    assert any("harm check" in s for s in skipped) and any("channel choice" in s for s in skipped)
    assert not fit.channel and fit.named_margin is not None
    assert fit.info["channel"]["named"]["why"].startswith("not checked")
    # the kind prior's check is no optional run: the LLM's own patterns again (cached), searched without it
    assert [step["run"] for step in fit.info["steps"]] == ["no grounding", "no kind prior", "every family"]
    monkeypatch.undo()
    unbounded = fit_grounding(toy, llm(), items, examples=parse_examples(EXAMPLES), progress=False, deadline_s=3600.0)
    assert "skipped" not in unbounded.info and unbounded.info["families"]  # time enough: every trial ran
    assert unbounded.info["channel"]["tried"] and unbounded.info["chosen"] == "fitted"


def test_an_optional_run_is_estimated_from_the_runs_before_it() -> None:
    from simgrag.eval.fit_grounding import CHANNEL_OVER_FLOOR, _Runner

    runner = _Runner(None, None, [], {}, False, deadline=None)  # type: ignore[arg-type]
    runner.steps += [{"run": "no grounding", "kind": "stage", "questions": 10, "seconds": 20.0},
                     {"run": "every family", "kind": "stage", "questions": 10, "seconds": 5.0}]
    assert runner.estimate(4, "stage") == pytest.approx(2.0)  # the last stage run's rate
    assert runner.estimate(4, "channel") == pytest.approx(4 * CHANNEL_OVER_FLOOR * 2.0)  # none yet: the floor's
    runner.steps.append({"run": "the harm check", "kind": "channel", "questions": 4, "seconds": 12.0})
    assert runner.estimate(4, "channel") == pytest.approx(12.0)
    assert runner.affords(1000, "channel", "a trial") and not runner.skipped  # no deadline: every trial runs
    runner.deadline = 0.0
    assert not runner.affords(1, "channel", "a trial") and runner.skipped == ["a trial"]


def test_a_fit_out_of_time_asks_the_floor_of_the_questions_it_reaches(toy: IndexDir) -> None:
    """The LLM's own patterns are asked until a share of the deadline (FLOOR_SHARE): the fit runs on the questions
    reached, and says how many it was given."""
    juno = ITEMS[2]
    fit = fit_grounding(toy, FakeLLM(_respond), [*ITEMS, juno, juno, juno], examples=parse_examples(EXAMPLES),
                        progress=False, deadline_s=0.0)
    assert fit.info["questions"] == 1 and fit.info["offered"] == 6  # the first question is always asked
    assert fit.info["steps"][0] == {"run": "no grounding", "kind": "stage", "questions": 1,
                                    "seconds": fit.info["steps"][0]["seconds"]}
    assert not fit.enabled  # one question is no evidence for any edit


def test_a_fit_out_of_floor_time_still_asks_the_questions_it_needs(toy: IndexDir,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the floor's share of the deadline the LLM's own patterns are still asked until ``min_questions``
    (the learning's fit needs that many), while the whole deadline has not passed; without it, one question."""
    import simgrag.eval.fit_grounding as fit_module

    monkeypatch.setattr(fit_module, "FLOOR_SHARE", 0.0)  # the floor's time is over after the first question
    juno = ITEMS[2]
    items = [*ITEMS, juno, juno, juno]
    short = fit_grounding(toy, FakeLLM(_respond), items, examples=parse_examples(EXAMPLES), progress=False,
                          deadline_s=600.0)
    assert short.info["questions"] == 1
    needed = fit_grounding(toy, FakeLLM(_respond), items, examples=parse_examples(EXAMPLES), progress=False,
                           deadline_s=600.0, min_questions=4)
    assert needed.info["questions"] == 4 and needed.info["offered"] == 6
    assert needed.info["steps"][0]["questions"] == 4


def test_fit_turns_the_stage_off_where_the_llm_needs_no_help(toy: IndexDir) -> None:
    right = [item for item in ITEMS if item.question != "Who directed Juno?"]
    fit = fit_grounding(toy, FakeLLM(_respond), right, examples=parse_examples(EXAMPLES), progress=False)
    assert fit.info["hits"]["no_grounding"] == 2 and not fit.enabled  # nothing to gain: no unproven edit runs


def test_a_stage_left_off_says_why() -> None:
    """A stage that answered more validation questions but was not kept says so, and why (it read "the LLM's own
    patterns did at least as well" beside "every_family 12, no_grounding 8")."""
    hits = {"no_grounding": 8, "every_family": 12}
    chance = GroundingFit(False, (), {"hits": hits, "versus_no_grounding": {"every_family": [4, 1]},
                                      "group_hits": {"no_grounding": {"1hop": 5}, "every_family": {"1hop": 6}}})
    assert "every_family answered 12" in chance.describe() and "4 gained against 1 lost is not beyond chance" in (
        chance.describe())
    group = GroundingFit(False, (), {"hits": hits, "group_hits": {"no_grounding": {"1hop": 5, "2hop": 3},
                                                                  "every_family": {"1hop": 4, "2hop": 8}}})
    assert group.why_off().endswith("but fewer of 1hop")
    assert "did at least as well" in GroundingFit(False, (), {"hits": {"no_grounding": 8, "pruned": 8}}).describe()
    assert "did at least as well" in GroundingFit(False, (), {}).describe()
    for junk in ({"hits": {"no_grounding": "8", "x": 9}}, {"hits": [1]}, {"hits": hits, "versus_no_grounding": {
            "every_family": 5}}, {"hits": hits, "group_hits": {"no_grounding": [1]}}):
        assert GroundingFit(False, (), junk).describe().startswith("off (")  # a hand-edited manifest: no crash


def test_fitted_values_round_trip_through_the_manifest_and_drive_the_stage(toy: IndexDir) -> None:
    fit = GroundingFit(True, ("drop_leaf", "analogy"), {"questions": 3, "hits": {"fitted": 3}})
    store_fit(toy.path, fit)
    reopened = open_index_dir(toy.path, embedder=HashEmbedder(dim=256))
    assert read_fit(reopened.manifest) == fit and read_fit(reopened.manifest).info == fit.info  # type: ignore[union-attr]
    examples = parse_examples(EXAMPLES)
    stage = SimGRAGRetriever(reopened, FakeLLM(_respond), examples=examples).patterns
    assert isinstance(stage, GroundedPatterns) and stage.disabled == {"drop_leaf", "analogy"}
    every = SimGRAGRetriever(reopened, FakeLLM(_respond), examples=examples, ground_patterns=True).patterns
    assert isinstance(every, GroundedPatterns) and not every.disabled  # --grounding: every family
    chosen = SimGRAGRetriever(reopened, FakeLLM(_respond), examples=examples, grounding_off=["revision"]).patterns
    assert isinstance(chosen, GroundedPatterns) and chosen.disabled == {"revision"}
    store_fit(toy.path, GroundingFit(False, (), {}))
    off = open_index_dir(toy.path, embedder=HashEmbedder(dim=256))
    assert isinstance(SimGRAGRetriever(off, FakeLLM(_respond), examples=examples).patterns, LLMPatternStage)
    engine = SimGRAG(off, llm=FakeLLM(_respond), examples=examples, calibration="off")
    assert engine.ask("Who directed Titanic?").answer.short_answer == "James Cameron"
    store_fit(toy.path, None)
    assert read_fit(open_index_dir(toy.path, embedder=HashEmbedder(dim=256)).manifest) is None


@pytest.mark.parametrize("section", [
    [], {"enabled": "yes"}, {"enabled": True, "disabled": ["no_such_edit"]}, {"enabled": True, "disabled": "x"},
    {"enabled": True, "bogus": 1}, {"format_version": 9, "enabled": True}, {"enabled": True, "info": []},
])
def test_a_malformed_fit_is_refused_with_what_is_wrong(toy: IndexDir, section: object) -> None:
    manifest = json.loads((toy.path / "manifest.json").read_text())
    manifest["grounding"] = section
    (toy.path / "manifest.json").write_text(json.dumps(manifest))
    assert check_fit(manifest) is not None
    reopened = open_index_dir(toy.path, embedder=HashEmbedder(dim=256))
    with pytest.raises(IndexDirError, match="grounding fit"):
        SimGRAGRetriever(reopened, FakeLLM(_respond), examples=parse_examples(EXAMPLES))
    with pytest.raises(ConfigError):
        GroundingFit.from_dict(section)


def test_grounding_cli_shows_and_clears_a_fit(toy: IndexDir) -> None:
    from simgrag.cli import app

    runner = CliRunner()
    assert "not fitted" in runner.invoke(app, ["grounding", "show", str(toy.path)]).output
    store_fit(toy.path, GroundingFit(True, ("drop_leaf",), {"questions": 4, "hits": {"fitted": 3},
                                                           "families": {"analogy": {"used": 2, "fixed": 1,
                                                                                    "broke": 0}}}))
    shown = runner.invoke(app, ["grounding", "show", str(toy.path)]).output
    assert "without drop_leaf" in shown and "analogy" in shown
    assert runner.invoke(app, ["grounding", "clear", str(toy.path)]).exit_code == 0
    assert read_fit(json.loads((toy.path / "manifest.json").read_text())) is None


def test_grounding_show_names_a_margin_only_where_the_channel_kept_a_change(toy: IndexDir) -> None:
    from simgrag.cli import app

    tried = {"shorter,named": {"on": False, "margin": 41.67, "fixed": 0, "broke": 0, "used": 2},
             "shorter,named,analogy": {"on": True, "margin": 1.15, "fixed": 5, "broke": 0, "used": 31}}
    off = {"used": 2, "fixed": 0, "broke": 0, "kept": 0, "margin": 41.67, "readings": ["shorter", "named"],
           "why": "no gain beyond chance", "tried": tried,
           "named": {"on": True, "margin": 0.0, "fixed": 0, "broke": 0, "used": 0, "kept": 0,
                     "why": "no harm on the validation questions"}}
    store_fit(toy.path, GroundingFit(False, (), {"questions": 36, "channel": off}))
    shown = CliRunner().invoke(app, ["grounding", "show", str(toy.path)]).output
    assert "none of 2 changes kept" in shown and "41.67" not in shown
    assert "0 fixed, 0 broke (none worth keeping): off" in shown
    assert "5 fixed, 0 broke at margin 1.15: on" in shown
    assert ("default readings alone (where the channel is off): 0 changes, 0 fixed, 0 broke: on at margin 0.0, "
            "0 of 0 changes kept") in shown
    assert f"default readings on ({', '.join(DEFAULT_READINGS)}; margin 0.00)" in shown  # the fit's own line


# ---------------------------------------------------------------- abstention fitted on the KG's own questions
def test_supporting_triples_are_the_gold_patterns_matches_that_reach_a_gold_answer(toy: IndexDir) -> None:
    from simgrag.eval.fit_abstention import supporting_triples

    store = toy.store
    found = supporting_triples(store, [["Titanic", "directed_by", "UNKNOWN director 1"]], ["James Cameron"])
    assert [store.triple(int(t)).as_tuple() for t in found] == [("Titanic", "directed_by", "James Cameron")]
    chain = [["UNKNOWN movie 1", "starred_actors", "Kate Winslet"], ["UNKNOWN movie 1", "directed_by",
                                                                     "UNKNOWN director 1"]]
    assert {store.triple(int(t)).as_tuple() for t in supporting_triples(store, chain, ["James Cameron"])} == {
        ("Titanic", "starred_actors", "Kate Winslet"), ("Titanic", "directed_by", "James Cameron")}
    assert len(supporting_triples(store, chain, ["Christopher Nolan"])) == 0  # no match reaches it
    for hopeless in ([["Nobody", "directed_by", "UNKNOWN director 1"]], [["Titanic", "no_such", "UNKNOWN x 1"]],
                     [["UNKNOWN a 1", "directed_by", "UNKNOWN b 1"]], [], [["Titanic", "directed_by", "Titanic"]]):
        assert len(supporting_triples(store, hopeless, ["James Cameron"])) == 0


def test_abstention_fitted_on_the_kgs_questions_is_stored_and_used(toy: IndexDir) -> None:
    from simgrag.answer.calibration import MANIFEST_KEY
    from simgrag.eval.fit_abstention import ValidationItem, fit_abstention, store_calibration

    items = [ValidationItem("Who directed Titanic?", ("James Cameron",),
                            (("Titanic", "directed_by", "UNKNOWN director 1"),)),
             ValidationItem("Which movies did Kate Winslet star in?", ("Titanic",),
                            (("UNKNOWN movie 1", "starred_actors", "Kate Winslet"),)),
             ValidationItem("no pattern, skipped", ("x",))]
    engine = SimGRAG(toy, llm=FakeLLM(_respond), examples=parse_examples(EXAMPLES), calibration="off")
    with pytest.raises(DatasetError, match="need 60"):
        fit_abstention(engine, items)  # two questions bound nothing
    calibration = fit_abstention(engine, items, min_questions=2)
    assert calibration.answers is None and calibration.unworded is None and calibration.missing is None  # counts
    assert calibration.info["questions"] == 2 and calibration.info["relations"] == sorted(toy.store.relations)
    assert calibration.info["full"]["abstain"] == 0.0  # alpha 0: no answerable question answered right is refused
    store_calibration(toy.path, calibration)
    reopened = open_index_dir(toy.path, embedder=HashEmbedder(dim=256))
    assert MANIFEST_KEY in reopened.manifest
    used = SimGRAG(reopened, llm=FakeLLM(_respond), examples=parse_examples(EXAMPLES)).answerer.calibration
    assert used is not None and used.info.get("fitted_on") == "this KG's validation questions"
    store_calibration(toy.path, None)
    assert MANIFEST_KEY not in json.loads((toy.path / "manifest.json").read_text())
    with pytest.raises(DatasetError, match="nothing to fit"):
        fit_abstention(engine, items[2:], min_questions=1)


def test_the_bundled_metaqa_calibration_is_not_used_on_another_kg() -> None:
    from simgrag.answer.calibration import NO_ABSTENTION, resolve_calibration

    name = "sentence-transformers/all-MiniLM-L6-v2"
    assert resolve_calibration("auto", None, name, relations=["directed_by", "starred_actors"]).info.get(
        "fitted_on") == "MetaQA dev"  # a cut of MetaQA's KB (the bundled sample KG)
    assert resolve_calibration("auto", None, name, relations=["plays_in_club", "is_in_country"]) is NO_ABSTENTION
    with pytest.raises(ConfigError, match="not a calibration"):
        resolve_calibration("auto", None, name, manifest={"calibration": []})


# ---------------------------------------------------------------- the LLM chooses among readings the KG holds equally
def test_the_llm_chooses_between_readings_the_kg_holds_equally(toy: IndexDir) -> None:
    from simgrag.grounding import Candidate, PatternJudge, choice
    from simgrag.match.retrieve import SubgraphRetriever

    judge = PatternJudge(SubgraphRetriever(toy), examples=[e.triples for e in parse_examples(EXAMPLES).examples])
    question = "Which movies did Kate Winslet star in?"
    reading = judge.read(question)
    copied = judge.judge(reading, Candidate((("UNKNOWN movie 1", "starred actors", "Kate Winslet"),
                                             ("UNKNOWN movie 1", "directed by", "UNKNOWN director 1"))))
    assert choice.rivals(judge, reading, copied) == [] or not copied.problems  # a reading with a problem: no choice
    copied = replace(copied, problems=())  # as the judge left WorldCup2014's copied hop: no problem it can name
    others = choice.rivals(judge, reading, copied)
    assert [o.candidate.triples for o in others] == [(("UNKNOWN movie 1", "starred actors", "Kate Winslet"),)]

    def pick_the_film(messages: Sequence[ChatMessage]) -> str:
        lines = messages[-1].content.splitlines()
        return next(line[0] for line in lines if line[1:3] == ") " and "director" not in line)

    llm = FakeLLM(pick_the_film)
    picked, called = choice.choose(llm, question, copied, others)
    assert called and picked.candidate.triples == others[0].candidate.triples
    assert "ANSWER" in llm.calls[0].messages[-1].content
    assert choice.choose(FakeLLM(["no idea"]), question, copied, others) == (copied, True)  # names no option
    assert choice.choose(FakeLLM([]), question, copied, []) == (copied, False)  # no rival: no call
    single = judge.judge(reading, Candidate((("UNKNOWN movie 1", "starred actors", "Kate Winslet"),)))
    assert choice.rivals(judge, reading, single) == []


@pytest.mark.parametrize(("reply", "n", "want"), [
    ("B", 2, 1), (" a)", 2, 0), ("The answer is C.", 3, 2), ("C", 2, None), ("", 2, None), ("BANANA", 2, None),
    ("\u0000\ud7ff F", 6, 5), ("A" * 10_000, 2, None), ("letter: b", 2, 1),
])
def test_a_choice_reply_is_read_or_refused_never_raises(reply: str, n: int, want: int | None) -> None:
    from simgrag.grounding.choice import read_choice

    assert read_choice(reply, n) == want


def test_llm_choice_is_off_on_an_unfitted_index_and_on_with_every_family(toy: IndexDir) -> None:
    examples = parse_examples(EXAMPLES)
    default = SimGRAGRetriever(toy, FakeLLM(_respond), examples=examples).patterns
    assert isinstance(default, GroundedPatterns) and "llm_choice" in default.disabled
    every = SimGRAGRetriever(toy, FakeLLM(_respond), examples=examples, ground_patterns=True).patterns
    assert isinstance(every, GroundedPatterns) and "llm_choice" not in every.disabled


def test_simgrag_check_shows_the_fit_and_refuses_a_malformed_one(toy: IndexDir) -> None:
    from simgrag.cli import app

    runner = CliRunner()
    assert "pattern stage: not fitted" in runner.invoke(app, ["check", str(toy.path)]).output
    store_fit(toy.path, GroundingFit(True, ("drop_leaf",), {"questions": 5, "hits": {"fitted": 4}}))
    shown = runner.invoke(app, ["check", str(toy.path)])
    assert shown.exit_code == 0 and "pattern stage: on, without drop_leaf" in shown.output
    manifest = json.loads((toy.path / "manifest.json").read_text())
    manifest["grounding"] = {"enabled": "maybe"}
    (toy.path / "manifest.json").write_text(json.dumps(manifest))
    bad = runner.invoke(app, ["check", str(toy.path)])
    assert bad.exit_code == 2 and "grounding" in bad.output


# ---------------------------------------------------------------- the answer mode fitted on the KG's own questions
#: the pattern writer copies a second hop the question does not ask (the small model on WorldCup2014): the
#: exact bindings of the last unknown answer a year, the LLM reading the same subgraph answers the film
EXTRA_HOP = {
    "Who directed Titanic?": ([["Titanic", "directed by", "UNKNOWN director 1"]], "James Cameron"),
    "Which movies did Kate Winslet star in?": (
        [["UNKNOWN movie 1", "starred actors", "Kate Winslet"], ["UNKNOWN movie 1", "release year", "UNKNOWN year 1"]],
        "Titanic"),
}


def _extra_hop(messages: Sequence[ChatMessage]) -> str:
    from simgrag.answer.qa import QA_SYSTEM

    asked = messages[-1].content
    for question, (triples, answer) in EXTRA_HOP.items():
        if question in asked:
            return f"answer: {answer}" if messages[0].content == QA_SYSTEM else json.dumps({"triples": triples})
    return json.dumps({"triples": [["Inception", "directed by", "UNKNOWN director 1"]]})


def test_the_answer_mode_is_fitted_per_kg_and_a_tie_keeps_the_shortcut(toy: IndexDir) -> None:
    from simgrag.eval.fit_grounding import fit_answer_mode

    items = [QAItem(q, (a,)) for q, (_, a) in EXTRA_HOP.items()]
    kate = items[1]
    off = GroundingFit(False, ())
    found = fit_answer_mode(toy, FakeLLM(_extra_hop), [*items, kate, kate, kate], off,
                            examples=parse_examples(EXAMPLES), progress=False)
    assert (found.info["hits"]["auto"], found.info["hits"]["llm"]) == (1, 5) and found.mode == "llm"
    once = fit_answer_mode(toy, FakeLLM(_extra_hop), items, off, examples=parse_examples(EXAMPLES), progress=False)
    assert (once.info["hits"]["auto"], once.info["hits"]["llm"]) == (1, 2) and once.mode == "auto"  # +1: chance
    tie = fit_answer_mode(toy, FakeLLM(_extra_hop), items[:1], off, examples=parse_examples(EXAMPLES), progress=False)
    assert tie.info["hits"] == {"auto": 1, "llm": 1, "check": 1} and tie.mode == "auto"  # a tie: the cheapest


def test_the_fitted_answer_mode_round_trips_and_is_what_the_engine_uses(toy: IndexDir) -> None:
    from simgrag.answer.mode_fit import AnswerModeFit, check_answer_mode, read_answer_mode, store_answer_mode

    store_fit(toy.path, GroundingFit(False, ()))
    examples = parse_examples(EXAMPLES)
    question = "Which movies did Kate Winslet star in?"
    before = SimGRAG(toy.path, llm=FakeLLM(_extra_hop), examples=examples, calibration="off",
                     embedder=HashEmbedder(dim=256))
    assert before.answerer.mode == "auto" and before.ask(question).answer.short_answer == "1997"
    store_answer_mode(toy.path, AnswerModeFit("llm", {"questions": 2, "hits": {"auto": 1, "llm": 2}}))
    manifest = json.loads((toy.path / "manifest.json").read_text())
    assert check_answer_mode(manifest) is None and read_answer_mode(manifest) == AnswerModeFit("llm")
    engine = SimGRAG(toy.path, llm=FakeLLM(_extra_hop), examples=examples, calibration="off",
                     embedder=HashEmbedder(dim=256))
    assert engine.answerer.mode == "llm" and engine.ask(question).answer.short_answer == "Titanic"
    forced = SimGRAG(toy.path, llm=FakeLLM(_extra_hop), examples=examples, calibration="off",
                     embedder=HashEmbedder(dim=256), answer_mode="auto")
    assert forced.answerer.mode == "auto"  # an explicit mode overrides the fit
    from simgrag.cli import app

    shown = CliRunner().invoke(app, ["check", str(toy.path)])
    assert shown.exit_code == 0 and "answer mode: llm" in shown.output
    manifest["answering"] = {"mode": "sometimes"}
    (toy.path / "manifest.json").write_text(json.dumps(manifest))
    assert "answering" in (check_answer_mode(manifest) or "")
    with pytest.raises(ConfigError, match="answering"):
        SimGRAG(toy.path, llm=FakeLLM(_extra_hop), examples=examples, embedder=HashEmbedder(dim=256))
    bad = CliRunner().invoke(app, ["check", str(toy.path)])
    assert bad.exit_code == 2 and "answering" in bad.output
    assert CliRunner().invoke(app, ["grounding", "clear", str(toy.path)]).exit_code == 0
    assert read_answer_mode(json.loads((toy.path / "manifest.json").read_text())) is None


def test_a_gain_must_be_more_than_chance() -> None:
    from simgrag.eval.fit_grounding import significant_gain

    assert not significant_gain(1, 0) and not significant_gain(3, 0) and significant_gain(4, 0)  # 1/16 <= 0.1
    assert not significant_gain(5, 3) and significant_gain(9, 2) and not significant_gain(2, 2)
    hits = {"no_grounding": 28, "fitted": 29, "pruned": 28, "every_family": 24}
    gains = {"no_grounding": (0, 0), "fitted": (3, 2), "pruned": (2, 2), "every_family": (1, 5)}
    assert choose_stage(hits) == "fitted" and choose_stage(hits, gains=gains) == "no_grounding"


def test_paraphrases_of_one_sample_count_once_in_the_sign_test(tmp_path: Path) -> None:
    from simgrag.eval.fit_grounding import Outcome, versus
    from simgrag.eval.runner import QAItem, load_qa_file

    rows = [{"question": f"q{i}", "answers": ["a"], "group": "1hop", "sample": i // 2} for i in range(8)]
    rows.append({"question": "mine", "answers": ["b"]})  # a question of the user's own: its own cluster
    path = tmp_path / "validation.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_qa_file(path)
    assert [i.cluster for i in items] == ["0", "0", "1", "1", "2", "2", "3", "3", None]
    floor = {i: Outcome(False) for i in range(9)} | {6: Outcome(True), 7: Outcome(True)}
    # samples 0 and 1: both wordings fixed; sample 2: one fixed, one broke (net 0); sample 3: both broke; "mine" fixed
    floor |= {5: Outcome(True)}
    candidate = {i: Outcome(i in (0, 1, 2, 3, 4, 8)) for i in range(9)}
    assert versus(candidate, floor) == (6, 3)  # question by question
    assert versus(candidate, floor, items) == (3, 1)  # sample by sample
    assert versus(candidate, floor, [QAItem(f"q{i}", ("a",)) for i in range(9)]) == (6, 3)  # no clusters


def test_no_harm_holds_per_group_a_stage_that_loses_a_hop_is_not_chosen() -> None:
    hits = {"no_grounding": 5, "fitted": 6, "pruned": 6, "every_family": 7}
    groups = {"no_grounding": {"1-hop": 2, "2-hop": 3}, "fitted": {"1-hop": 3, "2-hop": 3},
              "pruned": {"1-hop": 3, "2-hop": 3}, "every_family": {"1-hop": 5, "2-hop": 2}}
    assert choose_stage(hits) == "every_family"  # more in total …
    assert choose_stage(hits, groups) == "fitted"  # … but it loses a 2-hop question: the best that loses none


def test_the_llm_answer_mode_is_not_chosen_when_it_loses_a_group(toy: IndexDir) -> None:
    from simgrag.eval.fit_grounding import fit_answer_mode

    # the shortcut answers the star-in question wrong (the extra hop's year) and the LLM reads it right, but in
    # another group the LLM, told to read, answers wrong: more hits in total, one group lower -> the shortcut
    kate = QAItem("Which movies did Kate Winslet star in?", ("Titanic",), group="1-hop")
    items = [kate, kate, QAItem("Who directed Titanic?", ("James Cameron",), group="2-hop")]

    def replies(messages: Sequence[ChatMessage]) -> str:
        from simgrag.answer.qa import QA_SYSTEM

        if messages[0].content == QA_SYSTEM:
            return "answer: Titanic"  # right for the first question, wrong for the second
        return _extra_hop(messages)

    found = fit_answer_mode(toy, FakeLLM(replies), items, GroundingFit(False, ()), examples=parse_examples(EXAMPLES),
                            progress=False)
    assert (found.info["hits"]["auto"], found.info["hits"]["llm"]) == (1, 2) and found.mode == "auto"  # not chosen
    assert found.info["group_hits"]["auto"] == {"1-hop": 0, "2-hop": 1}
    assert found.info["group_hits"]["llm"] == {"1-hop": 2, "2-hop": 0}


def _reads_titanic_and_picks(pick: str):  # type: ignore[no-untyped-def]
    """Pattern calls as EXTRA_HOP; the reading always answers Titanic; the check picks the candidate named
    ``pick`` whichever letter it has (a consistent chooser)."""
    from simgrag.answer.arbitrate import CHOICE_SYSTEM
    from simgrag.answer.qa import QA_SYSTEM

    def respond(messages: Sequence[ChatMessage]) -> str:
        if messages[0].content == CHOICE_SYSTEM:
            return "A" if f"A. {pick} (" in messages[-1].content else "B"
        if messages[0].content == QA_SYSTEM:
            return "answer: Titanic"
        return _extra_hop(messages)

    return respond


def test_check_mode_lets_the_llm_choose_between_the_shortcut_and_its_reading(toy: IndexDir) -> None:
    store_fit(toy.path, GroundingFit(False, ()))
    examples = parse_examples(EXAMPLES)

    def engine(pick: str) -> SimGRAG:
        return SimGRAG(toy.path, llm=FakeLLM(_reads_titanic_and_picks(pick)), examples=examples, calibration="off",
                       embedder=HashEmbedder(dim=256), answer_mode="check")

    kate = "Which movies did Kate Winslet star in?"  # the shortcut: 1997 (the extra hop); the reading: Titanic
    picked = engine("Titanic").ask(kate).answer
    assert picked.short_answer == "Titanic" and picked.llm_used and "checked by the LLM" in picked.reason
    assert engine("1997").ask(kate).answer.short_answer == "1997"  # the LLM may keep the shortcut's answer

    def by_position(messages: Sequence[ChatMessage]) -> str:
        from simgrag.answer.arbitrate import CHOICE_SYSTEM

        return "B" if messages[0].content == CHOICE_SYSTEM else _reads_titanic_and_picks("Titanic")(messages)

    biased = SimGRAG(toy.path, llm=FakeLLM(by_position), examples=examples, calibration="off",
                     embedder=HashEmbedder(dim=256), answer_mode="check")
    assert biased.ask(kate).answer.short_answer == "1997"  # "B" whatever the order: no consistent pick, no switch
    # a reading that names no other node's entity is no rival: the shortcut stands, no choice asked
    llm = FakeLLM(_reads_titanic_and_picks("Titanic"))
    kept = SimGRAG(toy.path, llm=llm, examples=examples, calibration="off", embedder=HashEmbedder(dim=256),
                   answer_mode="check").ask("Who directed Titanic?").answer
    assert kept.short_answer == "James Cameron" and len(llm.calls) == 2  # the pattern and the reading only


def test_the_fit_chooses_check_where_it_beats_both(toy: IndexDir) -> None:
    from simgrag.eval.fit_grounding import fit_answer_mode

    items = [QAItem("Which movies did Kate Winslet star in?", ("Titanic",)), QAItem("Who directed Titanic?",
                                                                                   ("James Cameron",))] * 4
    found = fit_answer_mode(toy, FakeLLM(_reads_titanic_and_picks("Titanic")), items, GroundingFit(False, ()),
                            examples=parse_examples(EXAMPLES), progress=False)
    assert found.info["hits"] == {"auto": 4, "llm": 4, "check": 8} and found.mode == "check"


def test_a_fit_where_every_question_fails_is_refused_not_stored_as_zeros(toy: IndexDir) -> None:
    from simgrag.errors import LLMConnectionError

    dead = FakeLLM([LLMConnectionError("cannot reach http://127.0.0.1:9/v1")] * 10)
    with pytest.raises(DatasetError, match=r"every validation question failed.*cannot reach"):
        fit_grounding(toy, dead, ITEMS, examples=parse_examples(EXAMPLES), progress=False)


def test_the_grounding_fit_command_fits_stores_and_reports_the_abstention_branch(
        toy: IndexDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`simgrag grounding fit` end to end with the scripted LLM put where the CLI resolves its --llm: the fit is
    stored (not with --dry-run) and the abstention branch says why it fitted no thresholds (too few questions
    with a gold pattern, or none)."""
    import simgrag.llm.registry as registry
    from simgrag.cli import app

    monkeypatch.setattr(registry, "resolve_llm", lambda spec, **_: FakeLLM(_respond))
    plain = tmp_path / "val.jsonl"
    plain.write_text("".join(json.dumps({"question": i.question, "answers": list(i.answers)}) + "\n"
                             for i in ITEMS), encoding="utf-8")
    runner = CliRunner()
    dry = runner.invoke(app, ["grounding", "fit", str(toy.path), "--questions", str(plain), "--llm", "openai:x",
                              "--dry-run", "-q"])
    assert dry.exit_code == 0, dry.output
    assert "validation 3 questions" in dry.output and "stored in" not in dry.output
    assert "no validation question carries its gold pattern" in dry.output
    assert read_fit(json.loads((toy.path / "manifest.json").read_text())) is None

    gold = tmp_path / "gold.jsonl"
    triples = {"Who directed Titanic?": [["Titanic", "directed_by", "UNKNOWN director 1"]],  # the KG's relation names
               "Which movies did Kate Winslet star in?": [["UNKNOWN movie 1", "starred_actors", "Kate Winslet"]]}
    rows = [{"question": i.question, "answers": list(i.answers), "triples": triples[i.question]}
            for i in ITEMS if i.question in triples]
    gold.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    stored = runner.invoke(app, ["grounding", "fit", str(toy.path), "--questions", str(gold), "--llm", "openai:x",
                                 "-q"])
    assert stored.exit_code == 0, stored.output
    assert "abstention thresholds not fitted: 2 validation questions have a gold pattern" in stored.output
    assert f"stored in {toy.path}/manifest.json" in stored.output
    fit = read_fit(json.loads((toy.path / "manifest.json").read_text()))
    assert fit is not None and fit.info["questions"] == 2
    bad = runner.invoke(app, ["grounding", "fit", str(toy.path), "--questions", str(tmp_path / "nope.jsonl"),
                              "--llm", "openai:x", "-q"])
    assert bad.exit_code != 0 and "nope.jsonl" in bad.output
