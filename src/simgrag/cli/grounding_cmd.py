"""``simgrag grounding fit|show|clear INDEX_DIR``: the pattern stage fitted to one KG, kept in its index."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    DEFAULT_LLM_CHOICE,
    AsJson,
    Examples,
    IndexArg,
    LLMChoice,
    PatternOptions,
    Quiet,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    llm_for,
    llm_options,
    out,
    pattern_options,
)
from simgrag.errors import ConfigError, DatasetError, SimGRAGError

grounding_app = typer.Typer(no_args_is_help=True, help="The pattern stage fitted to this KG: which edit families "
                                                       "run (fit on the KG's own validation questions, show, clear).")
app.add_typer(grounding_app, name="grounding")


def _format(fit: Any) -> str:
    from simgrag.grounding.fit import FIRST_READINGS

    lines = [f"grounding: {fit.describe()}"]
    families = fit.info.get("families") or {}
    if families:
        lines.append("family             used  fixed  broke  kept")
        for name, row in families.items():
            kept = "on" if fit.enabled and name not in fit.disabled else "off"
            lines.append(f"{name:<18} {row['used']:>4}  {row['fixed']:>5}  {row['broke']:>5}  {kept}")
    channel = fit.info.get("channel") or {}
    if "used" in channel:
        readings = ", ".join(channel.get("readings") or FIRST_READINGS)
        kept = (f"margin {channel.get('margin', 0.0)}: {channel.get('kept', 0)} of {channel['used']} changes kept"
                if channel.get("kept") else f"none of {channel['used']} changes kept")
        lines.append(f"{'channel choice':<18} {channel['used']:>4}  {channel['fixed']:>5}  {channel['broke']:>5}  "
                     f"{'on' if fit.channel else 'off'}  (readings {readings}; {kept}; {channel.get('why', '')})")
        for kinds, row in (channel.get("tried") or {}).items():
            if isinstance(row, dict):
                state = "on" if row.get("on") else "off"
                # with nothing fixed, the fitted margin is merely one above every change: no margin to speak of
                where = f"at margin {row.get('margin')}" if row.get("fixed") else "(none worth keeping)"
                lines.append(f"  tried {kinds}: {row.get('used')} changes, {row.get('fixed')} fixed, "
                             f"{row.get('broke')} broke {where}: {state}")
        named = channel.get("named")
        if isinstance(named, dict):
            state = (f"on at margin {named.get('margin')}, {named.get('kept', 0)} of {named.get('used')} changes kept"
                     if named.get("on") else "off")
            lines.append(f"  default readings alone (where the channel is off): {named.get('used')} changes, "
                         f"{named.get('fixed')} fixed, {named.get('broke')} broke: {state} ({named.get('why', '')})")
            variant = named.get("variant")
            if isinstance(variant, dict):
                counts = (f"{variant.get('used')} changes, {variant.get('fixed')} fixed, {variant.get('broke')} "
                          "broke: " if variant.get("used") is not None else "")
                lines.append(f"  the variant among them (the pattern written with more examples shown): {counts}"
                             f"{'on' if variant.get('on') else 'off'} ({variant.get('why', '')})")
    elif channel.get("why"):
        lines.append(f"channel choice: off ({channel['why']})")
    kinds = fit.info.get("kind_prior")
    if isinstance(kinds, dict):
        counts = (f"{kinds.get('fixed')} fixed, {kinds.get('broke')} broke: " if kinds.get("fixed") is not None
                  else "")
        lines.append(f"kind prior (typed unknown nodes take the examples' kinds in the search): {counts}"
                     f"{'on' if kinds.get('on') else 'off'} ({kinds.get('why', '')})")
    if fit.info.get("skipped"):
        lines.append(f"skipped (the fit's time ran out): {'; '.join(map(str, fit.info['skipped']))}")
    for key in ("llm_calls", "seconds", "embedder", "fitted_at"):
        if key in fit.info:
            lines.append(f"{key}: {fit.info[key]}")
    return "\n".join(lines)


@grounding_app.command("fit")
@llm_options
def grounding_fit(
    index_dir: IndexArg,
    questions: Annotated[Path, typer.Option("--questions", help='validation questions, JSONL {"question": …, '
                                                                '"answers": […]} per line; never few-shot examples')],
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, pattern_option: PatternOptions = None,
    abstention: Annotated[bool, typer.Option(
        "--abstention/--no-abstention", help="also fit the 'not found in the KG' thresholds on the questions that "
                                             "carry their gold pattern (\"triples\"): each asked on the KG and on "
                                             "the KG without its answer's triples")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="measure and print, store nothing")] = False,
    budget: Annotated[float | None, typer.Option(
        "--budget", min=0.0, help="seconds for the stage fit: once they would be passed, the optional trials (the "
                                  "per-family ablations, the channel's reading sets, …) are skipped and listed; "
                                  "the LLM's own patterns and every family always run")] = None,
    sampled: Annotated[bool, typer.Option(
        "--llm-samples/--no-llm-samples",
        help="also try the channel choice with the patterns the LLM samples for each question (4 more LLM calls a "
             "question, ~6x a channel trial's time; kept only where it answers more validation questions)")] = False,
    variant: Annotated[bool, typer.Option(
        "--llm-variant/--no-llm-variant",
        help="also try the variant among the default readings: the pattern the LLM writes with 2 more examples shown "
             "(1 more LLM call a question; kept only where the validation questions it changed gained beyond "
             "chance)")] = False,
    as_json: AsJson = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Measure, on this KG's own validation questions, which edit families of the pattern stage raise
    first-answer Hits@1 here, and store the fit in the index's manifest (used by ask, serve, bench)."""
    _setup_logging(verbose, quiet)
    from simgrag.answer.mode_fit import store_answer_mode
    from simgrag.eval.fit_abstention import store_calibration
    from simgrag.eval.fit_grounding import fit_answer_mode, fit_grounding
    from simgrag.eval.runner import load_qa_file
    from simgrag.grounding.fit import store_fit
    from simgrag.index.directory import open_index_dir
    from simgrag.llm.cache import CachedLLM
    from simgrag.llm.registry import resolve_llm

    try:
        spec = llm_for(llm)
        if spec is None:
            raise ConfigError("fitting the pattern stage needs an LLM (--llm)")
        index = open_index_dir(index_dir)
        model = resolve_llm(spec, **llm.options())
        options = pattern_options(pattern_option)
        with tempfile.TemporaryDirectory(prefix="simgrag-fit-") as tmp:
            calls = Path(tmp) / "calls.sqlite"  # the grounding and the abstention fits share the LLM's calls
            items = load_qa_file(questions)
            fit = fit_grounding(index, model, items, examples=examples, pattern_options=options,
                                progress=False if quiet else None, source=str(questions), calls_cache=calls,
                                deadline_s=budget, sampled=sampled, variant=variant)
            mode = fit_answer_mode(index, model, items, fit, examples=examples, pattern_options=options,
                                   progress=False if quiet else None, source=str(questions), calls_cache=calls)
            if not dry_run:
                store_fit(index_dir, fit)
                store_answer_mode(index_dir, mode)
            calibration = None
            if abstention:
                calibration = _fit_abstention(index_dir, CachedLLM(model, calls), questions, examples, options,
                                              fit, quiet)
                if calibration is not None and not dry_run:
                    store_calibration(index_dir, calibration)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data={"grounding": fit.to_dict(), "answering": mode.to_dict(),
                             "calibration": None if calibration is None else calibration.to_dict()})
        return
    text = _format(fit) + f"\nanswer mode: {mode.describe()}"
    if calibration is not None:
        shown = {k: v for k, v in calibration.to_dict().items() if k not in ("info", "format_version") and v}
        text += f"\nabstention thresholds (fitted on {calibration.info.get('questions')} questions): {shown}"
        rates = {kg: calibration.info.get(kg) for kg in ("full", "removed")}
        text += f"\n  on its own questions: {json.dumps(rates)}"
    out.print(text + ("" if dry_run else f"\nstored in {index_dir}/manifest.json"), highlight=False, markup=False)


def _fit_abstention(index_dir: Path, llm: Any, questions: Path, examples: Path | None, options: dict[str, Any],
                    fit: Any, quiet: bool) -> Any:
    """The abstention thresholds fitted with the stage just fitted (``None`` when no question carries its
    gold pattern)."""
    from simgrag.eval.fit_abstention import fit_abstention, load_validation
    from simgrag.pipeline import SimGRAG

    items = load_validation(questions)
    if not any(item.triples for item in items):
        console.print("no validation question carries its gold pattern (\"triples\"): the abstention thresholds "
                      "are not fitted", highlight=False)
        return None
    from simgrag.eval.fit_grounding import engine_options, fitted_config

    retriever_options: dict[str, Any] = {"pattern_options": options, **engine_options(fitted_config(fit, llm))}
    if examples is not None:
        retriever_options["examples"] = examples
    engine = SimGRAG(index_dir, llm=llm, calibration="off", retriever_options=retriever_options)
    try:
        return fit_abstention(engine, items, progress=False if quiet else None)
    except DatasetError as exc:  # too few questions with a gold pattern: no thresholds rather than fragile ones
        console.print(f"abstention thresholds not fitted: {exc}", highlight=False)
        return None


@grounding_app.command("show")
def grounding_show(index_dir: IndexArg, as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """The pattern stage's fit recorded with the index (none: every edit family runs)."""
    _setup_logging(verbose, quiet)
    from simgrag.answer.mode_fit import read_answer_mode
    from simgrag.grounding.fit import UNFITTED, read_fit
    from simgrag.index.attach import read_manifest_json

    try:
        manifest = read_manifest_json(index_dir)
        fit, mode = read_fit(manifest), read_answer_mode(manifest)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print(json.dumps(None if fit is None else fit.to_dict(), indent=2), highlight=False, markup=False)
        return
    if fit is None:
        out.print(f"grounding: {UNFITTED}; fit it with `simgrag learn {index_dir}` (learns validation questions "
                  "from the KG) or `simgrag grounding fit`", highlight=False, markup=False)
    else:
        out.print(_format(fit), highlight=False, markup=False)
    out.print(f"answer mode: {mode.describe() if mode is not None else 'not fitted (auto)'}", highlight=False,
              markup=False)


@grounding_app.command("clear")
def grounding_clear(index_dir: IndexArg, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """Remove the fit from the index (every edit family runs again; answers from exact bindings again)."""
    _setup_logging(verbose, quiet)
    from simgrag.answer.mode_fit import store_answer_mode
    from simgrag.grounding.fit import store_fit

    try:
        store_fit(index_dir, None)
        store_answer_mode(index_dir, None)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"grounding fit removed from {index_dir}", highlight=False, markup=False)
