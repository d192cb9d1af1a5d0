"""``simgrag learn INDEX_DIR``: the KG's own few-shot examples and validation questions, learnt with the LLM
and attached to its index (:mod:`simgrag.eval.learn`).

``simgrag index`` learns by itself after building a KG that comes with no examples
(:func:`learn_after_build`; ``--no-learn`` skips it) — validation questions alone for a KG that comes with
examples of its own (``--examples``), to fit the pattern stage with them — and ``simgrag ask`` on an index
without examples learns before its first answer (:func:`ready_index`) instead of refusing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from simgrag.cli import _common
from simgrag.cli._common import (
    DEFAULT_LEARN_BUDGET,
    DEFAULT_LLM_CHOICE,
    AsJson,
    IndexArg,
    LearnBudget,
    LLMChoice,
    Quiet,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    llm_options,
    out,
)
from simgrag.cli.bootstrap import MaxLLMCalls, Seed
from simgrag.errors import ConfigError, IndexDirError, SimGRAGError

if TYPE_CHECKING:
    from simgrag.bootstrap.learn import LearnSettings
    from simgrag.eval.learn import LearnKGReport
    from simgrag.index.directory import IndexDir
    from simgrag.llm.base import LLM

Fit = Annotated[bool, typer.Option("--fit/--no-fit", help="fit the pattern stage on the validation questions "
                                                          "after learning (as far as the budget allows; see "
                                                          "`simgrag grounding fit`)")]
LearnResume = Annotated[bool, typer.Option("--resume/--no-resume", help="go on from the learning's progress log "
                                                                        "(INDEX_DIR.learn/), or start over")]
Composed3Hop = Annotated[bool, typer.Option(
    "--composed-3hop-shots", help="also add 3-hop chains walked either way as shots, their questions composed by "
                                  "rule with no LLM call (\"the mother of the person whose place of birth is …\"), "
                                  "chosen per question; off by default. Forward chains (\"What is the profession of "
                                  "the father of the father of X?\") are shots by default wherever the KG has them "
                                  "(BENCHMARKS.md)")]
ValidationQuestions = Annotated[int | None, typer.Option(
    "--validation-questions", min=1,
    help="validation questions to learn and fit on (default 24: 12 samples, two wordings each, counted once; a "
         "setting is kept only at 4 net fixes); more let the fit tell smaller gains from chance, on questions worded "
         "the way learning words them (BENCHMARKS.md: one KG gained, one lost). Beyond 24 they are added to what a run "
         "made (the shots stay), and the default --learn-budget grows with them (~10 s each on 2 cores); fewer than "
         "24 start a new run")]
LLMSamples = Annotated[bool, typer.Option(
    "--llm-samples/--no-llm-samples",
    help="the fit also tries the channel choice with the patterns the LLM samples (as `simgrag grounding fit "
         "--llm-samples`; ~6x a channel trial's time)")]
LLMVariant = Annotated[bool, typer.Option(
    "--llm-variant/--no-llm-variant",
    help="the fit also tries the variant among the default readings: the pattern the LLM writes with 2 more examples "
         "shown (as `simgrag grounding fit --llm-variant`; 1 more LLM call a question)")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="replace examples the index has that were not learnt "
                                                             "(an attached file of your own; without it such an "
                                                             "index learns validation questions alone)")]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def learning_llm(choice: LLMChoice) -> LLM:
    """The LLM learning runs with (refused: ``--llm none``)."""
    from simgrag.llm.registry import resolve_llm

    spec = _common.llm_for(choice)  # looked up here, so tests can script the LLM
    if spec is None:
        raise ConfigError("Learning the KG's examples needs an LLM: --llm llamacpp (the default), openai:<model> or "
                          "ollama:<model>")
    return resolve_llm(spec, **choice.options())


def run_learning(index_dir: Path, model: LLM, settings: LearnSettings, *, fit: bool = True, resume: bool = True,
                 say: Console = out, progress: bool | None = None, sampled: bool = False,
                 variant: bool = False) -> LearnKGReport:
    """Say what learning ``index_dir`` is expected to take, learn, and say what it made."""
    from simgrag.eval.learn import expected_seconds, learn_kg
    from simgrag.index.directory import open_index_dir

    calls, seconds = expected_seconds(open_index_dir(index_dir), settings, model.name)
    what = ("validation questions (its examples are your own: the pattern stage is fitted with them)"
            if settings.validation_only else "examples and validation questions")
    say.print(f"Learning the {what} of {index_dir} with {model.name}: about {calls} LLM "
              f"calls, ~{_duration(seconds)} expected, at most {_duration(settings.budget_s)} (--learn-budget).",
              highlight=False, markup=False)
    report = learn_kg(index_dir, model, settings, progress=progress, fit=fit, resume=resume, sampled=sampled,
                      variant=variant)
    for line in report.lines(settings.budget_s):
        say.print(line, highlight=False, markup=False)
    return report


def own_examples(index_dir: Path) -> bool:
    """Whether the index's examples are a file of the user's own (attached, not learnt)."""
    from simgrag.index.attach import attachment_record, read_manifest_json

    own = attachment_record(read_manifest_json(index_dir), "examples")
    return own is not None and not own.get("learned")


def learn_after_build(index_dir: Path, choice: LLMChoice, budget: float | None) -> None:
    """``simgrag index``'s learning step, for a KG that came with no examples (examples and validation
    questions) or with examples of the user's own (validation questions alone, to fit the pattern stage with
    them); a failure is a warning (the index is built: ``simgrag learn`` tries again)."""
    from simgrag.bootstrap.learn import LearnSettings
    from simgrag.index.directory import open_index_dir
    from simgrag.retrievers.simgrag import needs_examples

    validation_only = own_examples(index_dir)
    if not validation_only and not needs_examples(open_index_dir(index_dir)):
        return
    what = "validation questions" if validation_only else "examples"
    if _common.llm_for(choice) is None:
        out.print(f"Not learning {what} (--llm none): `simgrag learn {index_dir}` learns them later.",
                  highlight=False, markup=False)
        return
    try:
        settings = LearnSettings(budget_s=_common.learn_budget_for(index_dir, budget), validation_only=validation_only)
        run_learning(index_dir, learning_llm(choice), settings)
    except SimGRAGError as exc:
        console.print(f"[yellow]warning:[/] learning the {what} failed: {escape(str(exc))}\nThe index is built; "
                      f"`simgrag learn {escape(str(index_dir))}` tries again (it goes on where it stopped), or pass "
                      "--no-learn.", markup=True, highlight=False)


def ready_index(index_dir: Path, choice: LLMChoice, budget: float | None) -> tuple[Path | IndexDir, LLM | None]:
    """The index ``ask`` answers from, and the LLM it resolved (``None``: none yet): an index without examples
    of its own (:func:`~simgrag.retrievers.simgrag.needs_examples`) learns them first, with a progress bar."""
    from simgrag.bootstrap.learn import LearnSettings
    from simgrag.index.attach import attachment_record, read_manifest_json
    from simgrag.index.directory import open_index_dir
    from simgrag.retrievers.simgrag import needs_examples

    try:
        if attachment_record(read_manifest_json(index_dir), "examples") is not None:
            return index_dir, None  # the common case: no store opened here
    except IndexDirError:
        return index_dir, None  # opening it says what is wrong (or recovers an interrupted replacement)
    index = open_index_dir(index_dir)
    if not needs_examples(index) or _common.llm_for(choice) is None:
        return index, None
    model = learning_llm(choice)
    console.print(f"{index_dir} has no few-shot examples yet: learning them from its KG first (once; --no-learn "
                  "refuses instead).", highlight=False, markup=False)
    run_learning(index_dir, model, LearnSettings(budget_s=_common.learn_budget_for(index_dir, budget)), say=console)
    return open_index_dir(index_dir), model


def validation_split(wanted: int | None) -> tuple[int, int]:
    """``--validation-questions`` as (``target_validation``, ``more_validation``): up to the default, fewer
    questions (a run with other samples); beyond it, the default ones and more on top (the same shots)."""
    from simgrag.bootstrap.learn import LearnSettings

    default = LearnSettings().target_validation
    if wanted is None:
        return default, 0
    return min(wanted, default), max(0, wanted - default)


@app.command()
@llm_options
def learn(
    index_dir: IndexArg,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    learn_budget: LearnBudget = DEFAULT_LEARN_BUDGET,
    max_llm_calls: MaxLLMCalls = None,
    seed: Seed = 0,
    fit: Fit = True,
    resume: LearnResume = True,
    overwrite: Overwrite = False,
    composed_3hop_shots: Composed3Hop = False,
    validation_questions: ValidationQuestions = None,
    sampled: LLMSamples = False,
    variant: LLMVariant = False,
    as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Learn the KG's own few-shot examples and validation questions with the LLM (a few batched calls, within
    a time budget), attach them to the index, and fit the pattern stage on the validation questions. An index
    whose examples are your own learns validation questions alone, and the stage is fitted with your examples
    (--overwrite: learnt examples replace yours). Resumable: run it again to go on after an interruption or a
    budget stop."""
    _setup_logging(verbose, quiet)
    from simgrag.bootstrap.learn import DEFAULT_SHOT_SHAPES, LearnSettings

    try:
        validation_only = own_examples(index_dir) and not overwrite  # --overwrite: learnt examples replace them
        target, more = validation_split(validation_questions)
        budget = _common.learn_budget_for(index_dir, learn_budget, more)
        settings = LearnSettings(budget_s=budget, max_llm_calls=max_llm_calls, seed=seed,
                                 shot_shapes=(*DEFAULT_SHOT_SHAPES, *(("3hop",) if composed_3hop_shots else ())),
                                 target_validation=target,
                                 more_validation=more, validation_only=validation_only)
        report = run_learning(index_dir, learning_llm(llm), settings, fit=fit, resume=resume,
                              say=console if as_json else out, progress=False if quiet else None, sampled=sampled,
                              variant=variant)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=report.to_dict())
