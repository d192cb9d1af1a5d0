"""Question answering commands: ask, verify, demo, serve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    AbstainGsd,
    AnswerMode,
    ApiKey,
    AsJson,
    BaseUrl,
    Deadline,
    Examples,
    LLMOpt,
    RetrieverModel,
    RetrieverOpt,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    out,
)
from simgrag.cli.kg import _fmt_ms, format_retrieval
from simgrag.errors import SimGRAGError


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




def _run_llm_task(index_dir: Path | None, text: str, llm: str, base_url: str | None,
                  api_key: str | None, examples: str | None, abstain_gsd: float | None, k: int,
                  as_json: bool, verdict: bool, answer_mode: str = "llm", deadline: float | None = None) -> None:
    from simgrag.match.limits import DEFAULT_DEADLINE_S
    from simgrag.match.retrieve import RetrievalSettings

    try:
        settings = RetrievalSettings(k=k, deadline_s=DEFAULT_DEADLINE_S if deadline is None else deadline)
        engine = _engine(index_dir, llm, base_url, api_key, examples, abstain_gsd, answer_mode)
        engine.warmup()  # load the embedder and the compiled search now, so stage timings are per query
        result = engine.verify(text, settings=settings) if verdict else engine.ask(text, settings=settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=result.to_dict())
    else:
        out.print(format_answer(result, verdict=verdict), highlight=False, markup=False)




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
    deadline: Deadline = None,
    verbose: Verbose = 0,
) -> None:
    """Answer a question from the KG, showing the pattern, the evidence and per-stage timings."""
    _setup_logging(verbose)
    if open_answer or retriever.strip().lower() != "simgrag":
        _ask_with_retriever(index_dir, question, retriever, retriever_model, llm, base_url, api_key, as_json,
                            style="open" if open_answer else None)
        return
    _run_llm_task(index_dir, question, llm, base_url, api_key, examples, abstain_gsd, k, as_json, verdict=False,
                  answer_mode=answer_mode, deadline=deadline)


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
    retriever: RetrieverOpt = "simgrag", retriever_model: RetrieverModel = None, deadline: Deadline = None,
    verbose: Verbose = 0,
) -> None:
    """Check a claim against the KG: Supported / Refuted / Not enough evidence, with the evidence."""
    _setup_logging(verbose)
    if retriever.strip().lower() != "simgrag":
        _verify_with_retriever(index_dir, claim, retriever, retriever_model, llm, base_url, api_key, as_json)
        return
    _run_llm_task(index_dir, claim, llm, base_url, api_key, examples, abstain_gsd, k, as_json, verdict=True,
                  deadline=deadline)


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
    body_timeout: Annotated[float, typer.Option(help="a request body must arrive within this, seconds (408)")] = 10.0,
    max_connections: Annotated[int, typer.Option(help="open connections at most; more get 503")] = 256,
    verify_index: Annotated[bool, typer.Option("--verify/--no-verify", help="check the index's content hashes "
                                                                            "at start-up")] = True,
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
                                 api_key=auth_key, retriever=name, body_timeout_s=body_timeout, verify=verify_index,
                                 retriever_options={name: {"model": retriever_model}} if retriever_model else {})
        web_app = create_app(build, settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    uvicorn.run(web_app, host=host, port=port, access_log=False, limit_concurrency=max_connections,
                timeout_keep_alive=5, log_level="info" if verbose <= 1 else "debug")
