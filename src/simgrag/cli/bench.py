"""Benchmark commands: simgrag bench metaqa | qa | claims | factscore | abstain | summarize."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    AnswerMode,
    ApiKey,
    BaseUrl,
    Examples,
    LLMCache,
    LLMOpt,
    Verbose,
    _fail,
    _setup_logging,
    app,
    out,
)
from simgrag.errors import SimGRAGError

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: MetaQA, any QA file, generated claims.")
app.add_typer(bench_app, name="bench")


def _bench_engine(index: Path | None, metaqa_dir: Path | None, llm: str, base_url: str | None,
                  api_key: str | None, examples: str | None, llm_cache: str, k: int, answer_mode: str = "llm") -> Any:
    from simgrag.match.retrieve import RetrievalSettings
    from simgrag.pipeline import SimGRAG, metaqa_index

    options: dict[str, Any] = {k: v for k, v in (("base_url", base_url), ("api_key", api_key)) if v}
    options["cache"] = False if llm_cache == "none" else (True if llm_cache == "default" else llm_cache)
    if index is None:
        if metaqa_dir is None:
            raise SimGRAGError("give --index INDEX_DIR (or --metaqa-dir to build the MetaQA index)")
        index_dir: Any = metaqa_index(metaqa_dir)
    else:
        index_dir = index
    return SimGRAG(index_dir, llm=llm, llm_options=options, examples=examples or "metaqa",
                   retrieval=RetrievalSettings(k=k), answer_mode=answer_mode)




@bench_app.command("metaqa")
def bench_metaqa(
    metaqa_dir: Annotated[Path, typer.Option(help="MetaQA folder (1-hop/ 2-hop/ 3-hop/ kb.txt)")],
    out: Annotated[Path, typer.Option(help="JSONL, one line per question; the summary goes beside it")],
    hops: Annotated[str, typer.Option(help="comma-separated hops")] = "1,2,3",
    sample: Annotated[int, typer.Option(help="questions per hop (0 = all)")] = 300,
    seed: Annotated[int, typer.Option()] = 0,
    split: Annotated[str, typer.Option(help="test (measurement) or dev (tuning)")] = "test",
    index: Annotated[Path | None, typer.Option(help="reuse this index (default: build the MetaQA index once)")] = None,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    llm_cache: LLMCache = "default", k: Annotated[int, typer.Option("-k")] = 3, answer_mode: AnswerMode = "llm",
    retriever: Annotated[str | None, typer.Option(
        help="compare retrievers instead: comma-separated simgrag,subgraphrag,gsr,kaping,pcst,triplets,paths,none; "
             "--out is then a directory (one JSONL per retriever, comparison.md, a PNG per metric)")] = None,
    retriever_model: Annotated[list[str] | None, typer.Option(
        help="a trained retriever's model directory, as NAME=DIR (subgraphrag=..., gsr=...); repeatable")] = None,
    reader_max_triples: Annotated[int, typer.Option(
        help="with --retriever: at most this many triples (or paths) in the reader's prompt")] = 100,
    reader_max_prompt_tokens: Annotated[int, typer.Option(
        help="with --retriever: the reader's prompt budget (estimated tokens)")] = 1500,
    perturb: Annotated[list[str] | None, typer.Option(
        help="robustness: also run the --retriever comparison on perturbed KGs, METHOD:LEVEL[,LEVEL…] "
             "(rs|rr|er|ed), seeded by --seed; repeatable. --out is a directory: OUT/original/, "
             "OUT/<method>-<level>/, robustness.md, hits1_vs_level.png, score_h_vs_level.png")] = None,
    perturb_ats: Annotated[bool, typer.Option(
        help="with --perturb: also report ATS (trains the DistMult triple scorer once per KG, cached)")] = False,
    verbose: Verbose = 0,
) -> None:
    """MetaQA test questions: Hits@1 (lenient and strict, all and answerable), error stages, latency.

    An interrupted run resumes: questions already answered in --out are kept (with --retriever, per retriever)."""
    _setup_logging(verbose)
    from simgrag.eval.runner import format_summary, metaqa_items, run_qa_bench

    try:
        engine = _bench_engine(index, metaqa_dir, llm, base_url, api_key, examples, llm_cache, k, answer_mode)
        items = metaqa_items(engine, metaqa_dir, [int(h) for h in hops.split(",")], sample or None, seed, split)
        reader = {"max_triples": reader_max_triples, "max_prompt_tokens": reader_max_prompt_tokens}
        if perturb:
            _bench_robustness(engine, items, retriever or "simgrag", retriever_model or [], out, reader, perturb,
                              seed, perturb_ats)
            return
        if retriever:
            _compare_retrievers(engine, items, retriever, retriever_model or [], out, reader)
            return
        summary = run_qa_bench(engine, items, out)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(out, summary, format_summary(summary))


def _retrievers(engine: Any, names: str, models: list[str]) -> dict[str, Any]:
    """Retrievers by name from a comma-separated ``--retriever`` and ``--retriever-model NAME=DIR`` specs."""
    from simgrag.eval.subrun import build_retrievers, parse_model_dirs

    return build_retrievers(engine, [n.strip().lower() for n in names.split(",") if n.strip()],
                            parse_model_dirs(models))


def _compare_retrievers(engine: Any, items: Any, names: str, models: list[str], out_dir: Path,
                        reader_options: dict[str, Any] | None = None) -> None:
    from simgrag.eval.compare import format_comparison, run_retriever_comparison

    retrievers = _retrievers(engine, names, models)
    summary = run_retriever_comparison(retrievers, engine.llm, items, out_dir, reader_options=reader_options)
    out.print(format_comparison(summary), highlight=False, markup=False)
    out.print(f"rows, summary.json, comparison.md and plots → {out_dir}")


def _bench_robustness(engine: Any, items: Any, names: str, models: list[str], out_dir: Path,
                      reader: dict[str, Any], specs: list[str], seed: int, with_ats: bool) -> None:
    from simgrag.eval.subrun import parse_model_dirs
    from simgrag.perturb.robustness import format_robustness, parse_perturb_specs, run_robustness

    result = run_robustness(engine, items, names.split(","), parse_perturb_specs(specs), out_dir, seed=seed,
                            model_dirs=parse_model_dirs(models), reader_options=reader, with_ats=with_ats)
    out.print(format_robustness(result), highlight=False, markup=False)
    out.print(f"sub-runs, robustness.md/.json and the level plots → {out_dir}")


@bench_app.command("abstain")
def bench_abstain(
    metaqa_dir: Annotated[Path, typer.Option(help="MetaQA folder (1-hop/ 2-hop/ 3-hop/ kb.txt)")],
    out: Annotated[Path, typer.Option(help="output directory (abstention.md/.json/.jsonl, runs/)")],
    retriever: Annotated[str, typer.Option(help="comma-separated retrievers, e.g. simgrag,kaping,subgraphrag")]
    = "simgrag,kaping",
    retriever_model: Annotated[list[str] | None, typer.Option(
        help="a trained retriever's model directory, as NAME=DIR; repeatable")] = None,
    hops: Annotated[str, typer.Option(help="comma-separated hops")] = "1,2",
    sample: Annotated[int, typer.Option(help="questions per hop, among those the KG answers (0 = all)")] = 50,
    seed: Annotated[int, typer.Option()] = 0,
    split: Annotated[str, typer.Option(help="test (measurement) or dev (tuning)")] = "test",
    index: Annotated[Path | None, typer.Option(help="reuse this index (default: build the MetaQA index once)")] = None,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    llm_cache: LLMCache = "default", k: Annotated[int, typer.Option("-k")] = 3,
    reader_max_triples: Annotated[int, typer.Option(help="at most this many triples in the reader's prompt")] = 100,
    reader_max_prompt_tokens: Annotated[int, typer.Option(help="the reader's prompt budget")] = 1500,
    verbose: Verbose = 0,
) -> None:
    """Abstention: remove the triples that support sampled questions' gold answers, then count how often
    each retriever + reader abstains, answers gold anyway, or invents an answer (see simgrag.eval.abstention)."""
    _setup_logging(verbose)
    from simgrag.eval.abstention import format_abstention, run_abstention, sample_answerable
    from simgrag.eval.subrun import parse_model_dirs

    try:
        engine = _bench_engine(index, metaqa_dir, llm, base_url, api_key, examples, llm_cache, k)
        items = sample_answerable(engine.index.store, metaqa_dir, [int(h) for h in hops.split(",")],
                                  sample or None, seed, split)
        summary = run_abstention(engine, items, retriever.split(","), out,
                                 model_dirs=parse_model_dirs(retriever_model or []),
                                 reader_options={"max_triples": reader_max_triples,
                                                 "max_prompt_tokens": reader_max_prompt_tokens})
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _print_table(format_abstention(summary), f"abstention.md/.json/.jsonl, removed_triples.tsv, runs/ → {out}")


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
    out_path: Annotated[Path, typer.Option("--out", help="combined JSONL; the summary goes beside it")],
) -> None:
    """Summarize one or more QA result files (e.g. a run split by hop, or an interrupted run) as one."""
    from simgrag.eval.runner import format_summary, summarize

    rows: list[dict[str, Any]] = []
    for path in results:
        try:
            rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as exc:
            raise _fail(SimGRAGError(f"cannot read {path}: {exc}")) from exc
    out_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = summarize(rows)
    _write_summary(out_path, summary, format_summary(summary))


@bench_app.command("qa")
def bench_qa(
    index: Annotated[Path, typer.Option(help="index directory")],
    questions: Annotated[Path, typer.Option(help='JSONL: {"question": …, "answers": […]} per line')],
    out: Annotated[Path, typer.Option(help="JSONL results")],
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    llm_cache: LLMCache = "default", k: Annotated[int, typer.Option("-k")] = 3, verbose: Verbose = 0,
) -> None:
    """Any KG: questions with gold answers → Hits@1 and error stages (write an examples file, not code).

    An interrupted run resumes: questions already answered in --out are kept."""
    _setup_logging(verbose)
    from simgrag.eval.runner import format_summary, load_qa_file, run_qa_bench

    try:
        engine = _bench_engine(index, None, llm, base_url, api_key, examples, llm_cache, k)
        summary = run_qa_bench(engine, load_qa_file(questions), out)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(out, summary, format_summary(summary))


@bench_app.command("claims")
def bench_claims(
    metaqa_dir: Annotated[Path, typer.Option(help="MetaQA folder: claims come from kb.txt, topics from DEV questions")],
    out: Annotated[Path, typer.Option(help="JSONL, one line per claim; the summary goes beside it")],
    n: Annotated[int, typer.Option(help="claims to generate (balanced over shapes and labels)")] = 300,
    seed: Annotated[int, typer.Option()] = 0,
    index: Annotated[Path | None, typer.Option(help="reuse this index (default: the MetaQA index)")] = None,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    llm_cache: LLMCache = "default", k: Annotated[int, typer.Option("-k")] = 3, verbose: Verbose = 0,
) -> None:
    """Fact verification on claims generated from the MetaQA KB (App. F shapes), accuracy by shape."""
    _setup_logging(verbose)
    from simgrag.eval.claims import generate_claims, save_claims
    from simgrag.eval.claims_bench import format_claims_summary, run_claims_bench
    from simgrag.eval.metaqa import load_metaqa

    try:
        engine = _bench_engine(index, metaqa_dir, llm, base_url, api_key, examples, llm_cache, k)
        topics = sorted({q.topic for hop in (1, 2, 3) for q in load_metaqa(metaqa_dir, hop, "dev")})
        claims = generate_claims(engine.index.store, topics, n=n, seed=seed)
        save_claims(out.with_suffix(".claims.jsonl"), claims)
        summary = run_claims_bench(engine, claims, out_path=out, errors_as="wrong")
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    _write_summary(out, summary, format_claims_summary(summary))


@bench_app.command("factscore")
def bench_factscore(
    metaqa_dir: Annotated[Path, typer.Option(help="MetaQA folder (1-hop/ 2-hop/ 3-hop/ kb.txt)")],
    out_dir: Annotated[Path, typer.Option("--out", help="directory: <retriever>.jsonl, factscore.md, summary.json")],
    hops: Annotated[str, typer.Option(help="comma-separated hops")] = "1,2",
    sample: Annotated[int, typer.Option(help="questions per hop (0 = all)")] = 10,
    seed: Annotated[int, typer.Option()] = 0,
    split: Annotated[str, typer.Option(help="test (measurement) or dev (tuning)")] = "test",
    retriever: Annotated[str, typer.Option(help="comma-separated retrievers that supply the open answers' facts "
                                                "(none: the LLM's own knowledge)")] = "simgrag,none",
    retriever_model: Annotated[list[str] | None, typer.Option(
        help="a trained retriever's model directory, as NAME=DIR (subgraphrag=..., gsr=...); repeatable")] = None,
    max_claims: Annotated[int, typer.Option(help="atomic claims checked per answer, at most")] = 8,
    index: Annotated[Path | None, typer.Option(help="reuse this index (default: build the MetaQA index once)")] = None,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    llm_cache: LLMCache = "default", k: Annotated[int, typer.Option("-k")] = 3, verbose: Verbose = 0,
) -> None:
    """KG-grounded FActScore: open answers split into atomic claims, each checked with SimGRAG's verify.

    An interrupted run resumes: questions already in --out are kept."""
    _setup_logging(verbose)
    from simgrag.eval.factscore_bench import format_factscore, run_factscore_bench
    from simgrag.eval.runner import metaqa_items

    try:
        engine = _bench_engine(index, metaqa_dir, llm, base_url, api_key, examples, llm_cache, k)
        items = metaqa_items(engine, metaqa_dir, [int(h) for h in hops.split(",")], sample or None, seed, split)
        retrievers = _retrievers(engine, retriever, retriever_model or [])
        summary = run_factscore_bench(retrievers, engine.llm, engine.verify, items, out_dir, max_claims=max_claims)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(format_factscore(summary), highlight=False, markup=False)
    out.print(f"rows, summary.json and factscore.md → {out_dir}")
