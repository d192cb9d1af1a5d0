"""Benchmark commands: simgrag bench metaqa | qa | wc2014 | wc2014-examples | claims | factscore | abstain |
summarize.

Every question goes through the facade (:meth:`simgrag.pipeline.SimGRAG.ask`), exactly as ``simgrag
ask`` runs it; a comparison asks one engine per retriever, all sharing the LLM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    DEFAULT_ANSWER_MODE,
    DEFAULT_ANSWER_TOLERANCE,
    DEFAULT_CALIBRATION,
    DEFAULT_LLM_CHOICE,
    DEFAULT_ORIENTATION,
    DEFAULT_RETRIEVER,
    AbstainGsd,
    Analogy,
    AnswerMode,
    AnswerTolerance,
    CalibrationOpt,
    Channel,
    Examples,
    Grounding,
    IndexOpt,
    K,
    LLMChoice,
    OrientationOpt,
    PatternOptions,
    Quiet,
    ReaderMaxPromptTokens,
    ReaderMaxTriples,
    RetrieverModel,
    Verbose,
    _fail,
    _setup_logging,
    app,
    llm_options,
    make_engine,
    out,
    parse_model_dirs,
    split_names,
)
from simgrag.errors import SimGRAGError

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: MetaQA, any QA file, generated claims "
                                                   "(plots need simgrag[bench]).")
app.add_typer(bench_app, name="bench")

MetaQADir = Annotated[Path, typer.Option("--metaqa-dir", help="MetaQA folder (1-hop/ 2-hop/ 3-hop/ kb.txt)")]
Hops = Annotated[str, typer.Option("--hops", help="comma-separated hops")]
Sample = Annotated[int, typer.Option("--sample", help="questions per hop (0 = all)")]
Seed = Annotated[int, typer.Option("--seed", help="random seed of the sample")]
Split = Annotated[str, typer.Option("--split", help="test (measurement) or dev (tuning)")]
Retrievers = Annotated[str, typer.Option("--retriever", help="comma-separated retrievers, e.g. simgrag,kaping,"
                                                             "subgraphrag (see `simgrag ls`)")]


def _bench_engine(index: Path | None, metaqa_dir: Path | None, llm: LLMChoice, *, examples: Path | None = None,
                  k: int | None = None, answer_mode: str | None = DEFAULT_ANSWER_MODE, abstain_gsd: float | None = None,
                  reader_options: dict[str, Any] | None = None, calibration: str = DEFAULT_CALIBRATION,
                  answer_tolerance: float = DEFAULT_ANSWER_TOLERANCE, grounding: bool | None = None,
                  analogy: bool = True, pattern_option: Sequence[str] | None = None,
                  channel: bool | None = None, orientation: str = DEFAULT_ORIENTATION) -> Any:
    """The SimGRAG engine of a benchmark; the others of a comparison are its variants."""
    from simgrag.eval.metaqa import metaqa_index

    if index is None and metaqa_dir is None:
        raise SimGRAGError("give --index INDEX_DIR (or --metaqa-dir to build the MetaQA index)")
    index_dir: Any = index if index is not None else metaqa_index(metaqa_dir)  # type: ignore[arg-type]
    return make_engine(index_dir, llm, k=k, examples=examples, answer_mode=answer_mode, abstain_gsd=abstain_gsd,
                       reader_options=reader_options, calibration=calibration, answer_tolerance=answer_tolerance,
                       grounding=grounding, analogy=analogy, pattern_option=pattern_option, channel=channel,
                       orientation=orientation)


def _hops(hops: str) -> list[int]:
    return [int(h) for h in hops.split(",") if h.strip()]


@bench_app.command("metaqa")
@llm_options
def bench_metaqa(
    metaqa_dir: MetaQADir,
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL, one line per question (the summary goes "
                                                                "beside it); a directory with --retriever/--perturb")],
    hops: Hops = "1,2,3", sample: Sample = 300, seed: Seed = 0, split: Split = "test", index: IndexOpt = None,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE,
    abstain_gsd: AbstainGsd = None, calibration: CalibrationOpt = DEFAULT_CALIBRATION,
    answer_tolerance: AnswerTolerance = DEFAULT_ANSWER_TOLERANCE, orientation: OrientationOpt = DEFAULT_ORIENTATION,
    grounding: Grounding = None, analogy: Analogy = True, pattern_option: PatternOptions = None,
    retriever: Annotated[str | None, typer.Option(
        "--retriever", help="compare retrievers instead: comma-separated simgrag,subgraphrag,gsr,kaping,pcst,triplets,"
                            "paths,none; --output is then a directory (one JSONL per retriever, comparison.md, a "
                            "PNG per metric)")] = None,
    retriever_model: RetrieverModel = None,
    reader_max_triples: ReaderMaxTriples = 100, reader_max_prompt_tokens: ReaderMaxPromptTokens = 1500,
    reader: Annotated[bool, typer.Option(
        "--reader/--no-reader", help="with --retriever: --no-reader compares what each retriever retrieves (answer "
                                     "recall of the context, its size, retrieval time) without a reader call; the "
                                     "answer metrics are left out")] = True,
    perturb: Annotated[list[str] | None, typer.Option(
        "--perturb", help="robustness: also run the --retriever comparison on perturbed KGs, METHOD:LEVEL[,LEVEL…] "
                          "(rs|rr|er|ed), seeded by --seed; repeatable. --output is a directory: OUT/original/, "
                          "OUT/<method>-<level>/, robustness.md, hits1_vs_level.png, score_h_vs_level.png")] = None,
    perturb_ats: Annotated[bool, typer.Option(
        "--perturb-ats", help="with --perturb: also report ATS (trains the DistMult triple scorer once per KG, "
                              "cached)")] = False,
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="keep the rows --output already holds "
                                                                      "for these questions (an interrupted run goes "
                                                                      "on); --no-resume starts the file over")] = True,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """MetaQA test questions: Hits@1 of the first answer and "any answer", all and answerable; error stages, latency.

    An interrupted run resumes: questions already answered in --output are kept (with --retriever, per
    retriever); after a code change use --no-resume, or the kept rows are the old code's."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.runner import format_summary, metaqa_items, run_qa_bench

    try:
        if not reader and (not retriever or perturb):
            raise SimGRAGError("--no-reader compares retrievers: give --retriever (and no --perturb)")
        reader_options = {"max_triples": reader_max_triples, "max_prompt_tokens": reader_max_prompt_tokens}
        engine = _bench_engine(index, metaqa_dir, llm, examples=examples,
                               k=k, answer_mode=answer_mode, abstain_gsd=abstain_gsd, reader_options=reader_options,
                               calibration=calibration, answer_tolerance=answer_tolerance, grounding=grounding,
                               analogy=analogy, pattern_option=pattern_option, orientation=orientation)
        items = metaqa_items(engine, metaqa_dir, _hops(hops), sample or None, seed, split)
        models = parse_model_dirs(retriever_model or [])
        if perturb:
            _bench_robustness(engine, items, split_names(retriever or DEFAULT_RETRIEVER), models, output, perturb, seed,
                              perturb_ats)
            return
        if retriever:
            _compare_retrievers(engine, items, split_names(retriever), models, output, read=reader)
            return
        summary = run_qa_bench(engine, items, output, resume=resume)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(output, summary, format_summary(summary))


def _compare_retrievers(engine: Any, items: Any, names: list[str], models: dict[str, str], out_dir: Path, *,
                        read: bool = True) -> None:
    from simgrag.eval.compare import format_comparison, run_retriever_comparison
    from simgrag.eval.subrun import engines_for

    summary = run_retriever_comparison(engines_for(engine, names, models), items, out_dir, read=read)
    out.print(format_comparison(summary), highlight=False, markup=False)
    out.print(f"rows, summary.json, comparison.md and plots → {out_dir}")


def _bench_robustness(engine: Any, items: Any, names: list[str], models: dict[str, str], out_dir: Path,
                      specs: list[str], seed: int, with_ats: bool) -> None:
    from simgrag.perturb.robustness import format_robustness, parse_perturb_specs, run_robustness

    result = run_robustness(engine, items, names, parse_perturb_specs(specs), out_dir, seed=seed, model_dirs=models,
                            with_ats=with_ats)
    out.print(format_robustness(result), highlight=False, markup=False)
    out.print(f"sub-runs, robustness.md/.json and the level plots → {out_dir}")


@bench_app.command("calibrate")
@llm_options
def bench_calibrate(
    metaqa_dir: MetaQADir,
    output: Annotated[Path, typer.Option("-o", "--output", help="output directory (calibration.json/.md, rows.jsonl)")],
    hops: Hops = "1,2,3", sample: Annotated[int, typer.Option("--sample", help="DEV questions per hop, among those "
                                                                               "the KG answers")] = 100,
    seed: Seed = 0, index: IndexOpt = None,
    patterns: Annotated[str, typer.Option("--patterns", help="gold: patterns from the gold chains (no LLM); llm: the "
                                                             "retriever's own pattern stage")] = "gold",
    alpha: Annotated[float, typer.Option("--alpha", help="share of right answers the rule may turn into "
                                                         "abstentions on the full KG")] = 0.01,
    install: Annotated[bool, typer.Option("--install", help="also write calibration.json into the index "
                                                            "directory (used by default from then on)")] = False,
    add_rows: Annotated[list[Path] | None, typer.Option("--add-rows", help="rows.jsonl of an earlier calibration "
                                                                          "run to fit together with this one "
                                                                          "(repeatable)")] = None,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, pattern_option: PatternOptions = None,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Fit the abstention and substitution thresholds on MetaQA DEV: answerable questions against the same
    questions with their gold-chain triples removed (see simgrag.eval.calibrate). Resumable."""
    _setup_logging(verbose, quiet)
    import shutil

    from simgrag.eval.calibrate import format_calibration, run_calibration

    try:
        choice = replace(llm, spec="none") if patterns == "gold" else llm
        if patterns == "gold" and pattern_option:
            raise SimGRAGError("--pattern-option applies to --patterns llm (gold patterns use no pattern stage)")
        engine = _bench_engine(index, metaqa_dir, choice, examples=examples, calibration="off",
                               pattern_option=pattern_option)
        calibration = run_calibration(engine, metaqa_dir, output, hops=_hops(hops), sample=sample, seed=seed,
                                      patterns=patterns, alpha=alpha, add_rows=add_rows or [])
        if install:
            shutil.copyfile(output / "calibration.json", engine.index.path / "calibration.json")
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _print_table(format_calibration(calibration), f"calibration.json/.md, rows.jsonl → {output}")


@bench_app.command("abstain")
@llm_options
def bench_abstain(
    metaqa_dir: MetaQADir,
    output: Annotated[Path, typer.Option("-o", "--output", help="output directory (abstention.md/.json/.jsonl, "
                                                                "runs/)")],
    retriever: Retrievers = "simgrag,kaping", retriever_model: RetrieverModel = None,
    hops: Hops = "1,2", sample: Annotated[int, typer.Option("--sample", help="questions per hop, among those the KG "
                                                                             "answers (0 = all)")] = 50,
    seed: Seed = 0, split: Split = "test", index: IndexOpt = None,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE,
    calibration: CalibrationOpt = DEFAULT_CALIBRATION, answer_tolerance: AnswerTolerance = DEFAULT_ANSWER_TOLERANCE,
    pattern_option: PatternOptions = None,
    answerable: Annotated[bool, typer.Option("--answerable/--removed-only", help="also ask the same questions on "
                                                                                 "the full KG (the price of "
                                                                                 "abstaining)")] = True,
    reader_max_triples: ReaderMaxTriples = 100, reader_max_prompt_tokens: ReaderMaxPromptTokens = 1500,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Abstention: remove the triples that support sampled questions' gold answers, then count how often
    each retriever + reader abstains, answers gold anyway, or invents an answer (see simgrag.eval.abstention)."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.abstention import format_abstention, run_abstention, sample_answerable

    try:
        reader = {"max_triples": reader_max_triples, "max_prompt_tokens": reader_max_prompt_tokens}
        engine = _bench_engine(index, metaqa_dir, llm, examples=examples,
                               k=k, answer_mode=answer_mode, reader_options=reader, calibration=calibration,
                               answer_tolerance=answer_tolerance, pattern_option=pattern_option)
        items = sample_answerable(engine.index.store, metaqa_dir, _hops(hops), sample or None, seed, split)
        summary = run_abstention(engine, items, split_names(retriever), output,
                                 model_dirs=parse_model_dirs(retriever_model or []), answerable=answerable)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _print_table(format_abstention(summary), f"abstention.md/.json/.jsonl, removed_triples.tsv, runs/ → {output}")


def _print_table(table: str, where: str) -> None:
    out.print(table, highlight=False, markup=False)
    out.print(where)


def _write_summary(out_path: Path, summary: dict[str, Any], table: str) -> None:
    summary_path = out_path.with_suffix(".summary.json")
    summary_path.write_text(json.dumps(summary, indent=2))
    out.print(table, highlight=False, markup=False)
    out.print(f"rows → {out_path}; summary → {summary_path}")


@bench_app.command("summarize")
def bench_summarize(
    results: Annotated[list[Path], typer.Argument(help="JSONL files written by `bench metaqa` / `bench qa`")],
    output: Annotated[Path, typer.Option("-o", "--output", help="combined JSONL; the summary goes beside it")],
) -> None:
    """Summarize one or more QA result files (e.g. a run split by hop, or an interrupted run) as one."""
    from simgrag.eval.runner import format_summary, summarize

    rows: list[dict[str, Any]] = []
    for path in results:
        try:
            rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as exc:
            raise _fail(SimGRAGError(f"cannot read {path}: {exc}")) from exc
    output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = summarize(rows)
    _write_summary(output, summary, format_summary(summary))


@bench_app.command("diff")
def bench_diff(
    before: Annotated[Path, typer.Argument(help="JSONL results of the baseline run (e.g. --no-grounding)")],
    after: Annotated[Path, typer.Argument(help="JSONL results of the run to judge, the same questions")],
    show: Annotated[int, typer.Option("--show", min=0, help="fixed / broken questions listed, each")] = 20,
) -> None:
    """Two result files question by question: per-group Hits@1 of each, and the questions fixed and broken, with the
    patterns both runs answered from (no harm: a change is judged by what it broke, not its total alone)."""
    from simgrag.eval.row_diff import diff_files, format_diff

    try:
        diff = diff_files(before, after)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(format_diff(diff, show=show), highlight=False, markup=False)


@bench_app.command("qa")
@llm_options
def bench_qa(
    index: Annotated[Path, typer.Option("--index", help="index directory from `simgrag index`")],
    questions: Annotated[Path, typer.Option("--questions", help='JSONL: {"question": …, "answers": […]} per line')],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL results; the summary goes beside it")],
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE,
    abstain_gsd: AbstainGsd = None, calibration: CalibrationOpt = DEFAULT_CALIBRATION,
    grounding: Grounding = None, analogy: Analogy = True, pattern_option: PatternOptions = None,
    channel: Channel = None, orientation: OrientationOpt = DEFAULT_ORIENTATION, verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Any KG: questions with gold answers → Hits@1 and error stages (write an examples file, not code).

    An interrupted run resumes: questions already answered in --output are kept."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.runner import format_summary, load_qa_file, run_qa_bench

    try:
        engine = _bench_engine(index, None, llm, examples=examples, k=k,
                               answer_mode=answer_mode, abstain_gsd=abstain_gsd, calibration=calibration,
                               grounding=grounding, analogy=analogy, pattern_option=pattern_option,
                               channel=channel, orientation=orientation)
        summary = run_qa_bench(engine, load_qa_file(questions), output)
        stage, table = _pattern_stage_report(engine, grounding, channel)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    text = format_summary(summary) + "\n\n" + table
    _write_summary(output, {**summary, "pattern_stage": stage}, text)


def _pattern_stage_report(engine: Any, grounding: bool | None,
                          channel: bool | None = None) -> tuple[dict[str, Any], str]:
    """What the pattern stage was on this run — forced by ``--grounding``/``--no-grounding``, the index's fit, or
    unfitted — and the fit's per-edit ablation on the KG's validation questions (``grounding fit``)."""
    from simgrag.grounding.channel import DEFAULT_READINGS
    from simgrag.grounding.fit import UNFITTED

    fit = getattr(engine.retriever, "grounding_fit", None)
    if grounding is not None:
        said = "every family (--grounding)" if grounding else "off (--no-grounding)"
    elif fit is None:
        said = f"{UNFITTED}; fit it with `simgrag learn INDEX` (learns validation questions) or `simgrag grounding fit`"
    else:
        said = "fitted: " + fit.describe()
    running = bool(getattr(engine.retriever, "channel", False))
    if channel is not None:
        said += f"; the channel choice {'on (--channel)' if channel else 'off (--no-channel)'}"
    elif grounding is not None:
        said += f"; the channel choice {'on' if running else 'off'} (as fitted)"
    default_alone = not running and tuple(getattr(engine.retriever, "channel_readings", ())) == DEFAULT_READINGS
    if default_alone and (fit is None or grounding is not None):  # a fit's own line says so already
        said += f"; default readings on ({', '.join(DEFAULT_READINGS)}: the channel choice's, alone)"
    families = dict((fit.info.get("families") or {}) if fit is not None else {})
    lines = [f"pattern stage: {said}"]
    if families:
        lines.append("per-edit ablation on the validation questions (used / fixed / broke; fixed: answered "
                     "right only with the family on):")
        lines += [f"  {name}: {g.get('used', 0)} / {g.get('fixed', 0)} / {g.get('broke', 0)}"
                  for name, g in sorted(families.items(), key=lambda kv: -int(kv[1].get("used", 0)))]
    return {"said": said, "families": families, "channel": running, "default_readings": default_alone}, "\n".join(lines)


WCDir = Annotated[Path, typer.Option("--wc-dir", help="WorldCup2014 folder (WC-P1.txt, WC-P2.txt, WC-C.txt, "
                                                       "WC2014.txt)")]
WCSample = Annotated[int, typer.Option("--sample", help="distinct questions per group (0 = all)")]


@bench_app.command("wc2014")
@llm_options
def bench_wc2014(
    wc_dir: WCDir,
    index: Annotated[Path, typer.Option("--index", help="index directory of WC2014.txt from `simgrag index`")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL results; the summary goes beside it")],
    groups: Annotated[str, typer.Option("--groups", help="comma-separated: 1-hop, 2-hop, conj")] = "1-hop,2-hop,conj",
    sample: WCSample = 100, seed: Seed = 0,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE,
    abstain_gsd: AbstainGsd = None, calibration: CalibrationOpt = DEFAULT_CALIBRATION,
    grounding: Grounding = None, analogy: Analogy = True, pattern_option: PatternOptions = None,
    orientation: OrientationOpt = DEFAULT_ORIENTATION, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """WorldCup2014 questions (1-hop, 2-hop, conjunctive) → Hits@1 per group and error stages.

    Give it an index of WC2014.txt and, for a fair run, examples written by `bench wc2014-examples` with
    the same --sample/--seed. An interrupted run resumes: questions already answered in --output are kept."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.runner import format_summary, run_qa_bench
    from simgrag.eval.wc2014 import load_wc2014, qa_items

    try:
        items = [item for group in split_names(groups)
                 for item in qa_items(load_wc2014(wc_dir, group, sample=sample or None, seed=seed))]
        if not items:
            raise SimGRAGError("--groups names no group: give some of 1-hop,2-hop,conj")
        engine = _bench_engine(index, None, llm, examples=examples, k=k,
                               answer_mode=answer_mode, abstain_gsd=abstain_gsd, calibration=calibration,
                               grounding=grounding, analogy=analogy, pattern_option=pattern_option,
                               orientation=orientation)
        summary = run_qa_bench(engine, items, output)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(output, summary, format_summary(summary))


@bench_app.command("wc2014-examples")
def bench_wc2014_examples(
    wc_dir: WCDir,
    output: Annotated[Path, typer.Option("-o", "--output", help="examples file to write (YAML)")],
    sample: Annotated[int, typer.Option("--sample", help="the --sample of the `bench wc2014` run whose questions "
                                                         "are kept out")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="the --seed of that run (also draws the examples)")] = 0,
    per_group: Annotated[int, typer.Option("--per-group", help="examples per group")] = 4,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Write a WorldCup2014 few-shot examples file (--per-group of each group, gold patterns) from questions
    that `bench wc2014` with the same --sample/--seed does not ask (of any group)."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.wc2014 import WC_FILES, load_wc2014, write_examples
    from simgrag.pattern.examples import load_examples

    try:
        if not sample:
            raise SimGRAGError("--sample 0 asks every question: none is left for examples")
        held_out = {q.question for group in WC_FILES for q in load_wc2014(wc_dir, group, sample=sample, seed=seed)}
        path = write_examples(wc_dir, output, n_per_group=per_group, seed=seed, exclude=held_out)
        written = len(load_examples(path))
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"{written} examples (none of the {len(held_out)} evaluated questions) → {path}")


@bench_app.command("claims")
@llm_options
def bench_claims(
    metaqa_dir: Annotated[Path, typer.Option("--metaqa-dir", help="MetaQA folder: claims come from kb.txt, topics "
                                                                  "from DEV questions")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL, one line per claim; the summary goes "
                                                                "beside it")],
    n: Annotated[int, typer.Option("--n", help="claims to generate (balanced over shapes and labels)")] = 300,
    seed: Seed = 0, index: IndexOpt = None,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, abstain_gsd: AbstainGsd = None, pattern_option: PatternOptions = None,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Fact verification on claims generated from the MetaQA KB (App. F shapes), accuracy by shape."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.claims import generate_claims, save_claims
    from simgrag.eval.claims_bench import format_claims_summary, run_claims_bench
    from simgrag.eval.metaqa import load_metaqa

    try:
        engine = _bench_engine(index, metaqa_dir, llm, examples=examples,
                               k=k, abstain_gsd=abstain_gsd, pattern_option=pattern_option)
        topics = sorted({q.topic for hop in (1, 2, 3) for q in load_metaqa(metaqa_dir, hop, "dev")})
        claims = generate_claims(engine.index.store, topics, n=n, seed=seed)
        save_claims(output.with_suffix(".claims.jsonl"), claims)
        summary = run_claims_bench(engine, claims, out_path=output, errors_as="wrong")
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(output, summary, format_claims_summary(summary))


@bench_app.command("factscore")
@llm_options
def bench_factscore(
    metaqa_dir: MetaQADir,
    output: Annotated[Path, typer.Option("-o", "--output", help="directory: <retriever>.jsonl, factscore.md, "
                                                                "summary.json")],
    hops: Hops = "1,2", sample: Sample = 10, seed: Seed = 0, split: Split = "test",
    retriever: Annotated[str, typer.Option("--retriever", help="comma-separated retrievers that supply the open "
                                                               "answers' facts (none: the LLM's own knowledge)")]
    = "simgrag,none",
    retriever_model: RetrieverModel = None,
    max_claims: Annotated[int, typer.Option("--max-claims", help="atomic claims checked per answer, at most")] = 8,
    index: IndexOpt = None,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    examples: Examples = None, k: K = None, pattern_option: PatternOptions = None, verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """KG-grounded FActScore: open answers split into atomic claims, each checked with SimGRAG's verify.

    An interrupted run resumes: questions already in --output are kept."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.factscore_bench import format_factscore, run_factscore_bench
    from simgrag.eval.runner import metaqa_items
    from simgrag.eval.subrun import engines_for

    try:
        engine = _bench_engine(index, metaqa_dir, llm, examples=examples, k=k, pattern_option=pattern_option)
        items = metaqa_items(engine, metaqa_dir, _hops(hops), sample or None, seed, split)
        engines = engines_for(engine, split_names(retriever), parse_model_dirs(retriever_model or []))
        summary = run_factscore_bench(engines, engine.llm, engine.verify, items, output, max_claims=max_claims)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(format_factscore(summary), highlight=False, markup=False)
    out.print(f"rows, summary.json and factscore.md → {output}")
