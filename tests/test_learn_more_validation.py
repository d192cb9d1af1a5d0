"""More validation questions than the default (``LearnSettings.more_validation``, ``simgrag learn
--validation-questions N``): the same shots, the default questions first, more on top from samples no shot shares,
a run without them resumed, and the fit's ``--llm-samples`` passed through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.bootstrap.learn import (
    EXAMPLES_FILE,
    FIT_QUESTION_SHARE,
    MORE_FIT_RESERVE_SHARE,
    VALIDATION_FILE,
    LearnSettings,
    _more_samples,
    default_budget,
    learn_examples,
)
from simgrag.bootstrap.sample import sample_subgraphs
from simgrag.cli import _common, app
from simgrag.cli.learn_cmd import validation_split
from simgrag.errors import ConfigError
from simgrag.eval.learn import learn_kg
from simgrag.eval.runner import load_qa_file
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.testing import HashEmbedder

# the company KG, its scripted model and the log reader (rootdir-relative import)
from test_learn import ScriptedLearning, brute_answers, company, log_rows, write_company_kg

__all__ = ["company"]  # the fixture, imported for its name

PLAIN = LearnSettings(target_validation=6, shots=6, shot_shapes=())
MORE = LearnSettings(target_validation=6, shots=6, more_validation=8, shot_shapes=())


def _triple_sets(rows: list[dict], role: str) -> list[frozenset[int]]:
    return [frozenset(e[3] for e in row["sample"]["edges"]) for row in rows if row["role"] == role]


def test_more_validation_keeps_the_shots_and_adds_questions_no_shot_shares(company: IndexDir, tmp_path: Path) -> None:
    plain = learn_examples(company, ScriptedLearning().llm, tmp_path / "plain", PLAIN)
    more = learn_examples(company, ScriptedLearning().llm, tmp_path / "more", MORE)
    assert plain.complete and more.complete, (plain, more)
    assert (tmp_path / "more" / EXAMPLES_FILE).read_text() == (tmp_path / "plain" / EXAMPLES_FILE).read_text()
    first = (tmp_path / "plain" / VALIDATION_FILE).read_text().splitlines()
    lines = (tmp_path / "more" / VALIDATION_FILE).read_text().splitlines()
    assert lines[:len(first)] == first and len(lines) == more.validation >= 6 + 8 > plain.validation
    rows = log_rows(tmp_path / "more")
    shots, valid = _triple_sets(rows, "shot"), _triple_sets(rows, "validation")
    assert len(shots) == 6 and not set(shots) & set(valid)  # no validation question is a paraphrase of a shot
    by_question = {q["question"]: row for row in rows for q in row["questions"] if q["kept"]}
    for item in load_qa_file(tmp_path / "more" / VALIDATION_FILE):  # each one's answers: its pattern's in the KG
        assert set(item.answers) == brute_answers(company.store, by_question[item.question]["triples"])
        assert item.cluster == str(by_question[item.question]["index"])  # its sample: paraphrases count once
    assert more.llm_calls > plain.llm_calls


def test_asking_for_more_goes_on_from_a_run_that_did_not(company: IndexDir, tmp_path: Path) -> None:
    fresh = ScriptedLearning()
    learn_examples(company, fresh.llm, tmp_path / "fresh", MORE)
    first = ScriptedLearning()
    learn_examples(company, first.llm, tmp_path / "grown", PLAIN)
    then = ScriptedLearning()
    report = learn_examples(company, then.llm, tmp_path / "grown", MORE)
    assert report.complete
    assert not [c for c in then.llm.calls if c.messages[0].content.startswith("You name the kinds")]
    assert len(first.llm.calls) + len(then.llm.calls) == len(fresh.llm.calls)  # nothing asked twice
    for name in (EXAMPLES_FILE, VALIDATION_FILE):
        assert (tmp_path / "grown" / name).read_text() == (tmp_path / "fresh" / name).read_text()
    assert LearnSettings(more_validation=40).logged() == LearnSettings().logged()  # a bound, not a setting
    again = ScriptedLearning()
    assert learn_examples(company, again.llm, tmp_path / "grown", MORE).complete and again.llm.calls == []


def test_the_samples_for_more_extend_those_for_fewer_and_skip_the_regular_ones(company: IndexDir) -> None:
    store = company.store
    regular = sample_subgraphs(store, PLAIN.shapes, 6, seed=0)
    few = _more_samples(store, LearnSettings(more_validation=4), regular, ())
    many = _more_samples(store, LearnSettings(more_validation=12), regular, ())
    assert few and many[:len(few)] == few and len(many) > len(few)
    keys = [frozenset(e.triple_id for e in s.edges) for s in many]
    assert len(set(keys)) == len(keys) and not set(keys) & {frozenset(e.triple_id for e in s.edges) for s in regular}
    assert all(len({e.relation for e in s.edges}) == len(s.edges) for s in many)
    assert _more_samples(store, LearnSettings(), regular, ()) == []
    with pytest.raises(ConfigError, match="more_validation"):
        LearnSettings(more_validation=-1)


def test_a_small_kg_gives_what_it_has(tmp_path: Path) -> None:
    """A KG with too few distinct subgraphs for the questions asked stops with what it made ("samples")."""
    kg = tmp_path / "tiny.tsv"
    kg.write_text("Alice Chen\tworks_in\tEngineering\nBob Diaz\tworks_in\tSales\n"
                  "Engineering\tlocated_in\tNorth Building\n", encoding="utf-8")
    index = build_index_dir(kg, tmp_path / "tiny.idx", embedder=HashEmbedder(dim=32), show_progress=False)
    report = learn_examples(index, ScriptedLearning().llm, tmp_path / "learnt",
                            LearnSettings(target_validation=2, shots=2, more_validation=50))
    assert report.stopped == "samples" and report.validation < 52


def test_the_budget_and_the_fit_reserve_grow_with_more_questions(tmp_path: Path) -> None:
    assert validation_split(None) == (24, 0) and validation_split(10) == (10, 0) and validation_split(72) == (24, 48)
    assert default_budget(5, 36) == pytest.approx(2 * default_budget(5)) and default_budget(5, 0) == 300.0
    (tmp_path / "manifest.json").write_text(json.dumps({"kg": {"relations": 13}}), encoding="utf-8")
    assert _common.learn_budget_for(tmp_path, None, 36) == pytest.approx(600.0)
    assert _common.learn_budget_for(tmp_path, 42.0, 36) == 42.0  # the user's budget is the user's
    wide = LearnSettings(budget_s=600.0, fit_questions=72, more_validation=48)
    assert wide.fit_reserve_s(1000.0, 72) == pytest.approx(MORE_FIT_RESERVE_SHARE * 600.0)
    assert wide.fit_reserve_s(5.0, 72) == pytest.approx(72 * FIT_QUESTION_SHARE * 5.0)  # all of them, not 16


def test_learn_cli_asks_for_more_and_passes_llm_samples_to_the_fit(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import simgrag.eval.learn as eval_learn

    script = ScriptedLearning()
    monkeypatch.setattr(_common, "llm_for", lambda choice: script.llm)
    idx = tmp_path / "company.idx"
    built = CliRunner().invoke(app, ["index", str(write_company_kg(tmp_path / "company.tsv")), "-o", str(idx),
                                     "--embedder", "hash:64", "--no-learn"])
    assert built.exit_code == 0, built.output
    seen: list[tuple[LearnSettings, bool, bool]] = []
    real = eval_learn.learn_kg

    def spy(index_dir, llm, settings, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((settings, kwargs.get("sampled", False), kwargs.get("variant", False)))
        return real(index_dir, llm, settings, **{**kwargs, "fit": False})

    monkeypatch.setattr(eval_learn, "learn_kg", spy)
    result = CliRunner().invoke(app, ["learn", str(idx), "--validation-questions", "30", "--llm-samples",
                                      "--llm-variant", "-q"])
    assert result.exit_code == 0, result.output
    settings, sampled, variant = seen[-1]
    assert (settings.target_validation, settings.more_validation, sampled, variant) == (24, 6, True, True)
    assert settings.budget_s == pytest.approx(default_budget(7, 6))  # the company KG's 7 relations
    assert open_index_dir(idx).manifest["learned"]["validation"] >= 24
    refused = CliRunner().invoke(app, ["learn", str(idx), "--validation-questions", "0"])
    assert refused.exit_code == 2


def test_the_report_says_how_many_calls_a_call_cache_answered(company: IndexDir, tmp_path: Path) -> None:
    from simgrag.llm.cache import CachedLLM

    settings = LearnSettings(target_validation=8, shots=6)
    script = ScriptedLearning()
    first = learn_kg(company.path, CachedLLM(script.llm, tmp_path / "calls.sqlite"), settings)
    assert first.cache_misses == len(script.llm.calls) > 0 and first.cache_hits is not None
    again = learn_kg(company.path, CachedLLM(ScriptedLearning().llm, tmp_path / "calls.sqlite"), settings)
    assert again.llm_calls > 0 and again.cache_hits and again.cache_misses == 0  # the fit asked again: the cache
    assert f"the call cache answered {again.cache_hits} lookups, passed 0 to the model" in "\n".join(again.lines())
    learned = open_index_dir(company.path).manifest["learned"]
    assert (learned["cache_hits"], learned["cache_misses"]) == (again.cache_hits, 0)
    plain = learn_kg(company.path, ScriptedLearning().llm, settings, fit=False)  # (a new script knows no pattern)
    assert plain.cache_hits is None and "call cache" not in "\n".join(plain.lines())


def test_the_fit_says_how_many_learnt_samples_its_questions_are(company: IndexDir) -> None:
    from simgrag.grounding.fit import read_fit

    report = learn_kg(company.path, ScriptedLearning().llm, LearnSettings(target_validation=8, shots=6))
    fit = read_fit(open_index_dir(company.path).manifest)
    assert fit is not None and report.fit_questions >= 8
    items = load_qa_file(company.path / "validation.jsonl")[:report.fit_questions]
    assert fit.info["samples"] == len({item.cluster for item in items}) <= fit.info["questions"]
    assert f"({fit.info['samples']} learnt samples, each counted once)" in fit.describe()
