"""Question answering commands: ask, verify, demo, serve — all through the facade, whatever the retriever."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    DEFAULT_ANSWER_MODE,
    DEFAULT_CALIBRATION,
    DEFAULT_LEARN_BUDGET,
    DEFAULT_LLM_CHOICE,
    DEFAULT_RETRIEVER,
    AbstainGsd,
    Analogy,
    AnswerMode,
    AsJson,
    CalibrationOpt,
    Channel,
    Deadline,
    Examples,
    Grounding,
    IndexArg,
    K,
    Learn,
    LearnBudget,
    LLMChoice,
    PatternOptions,
    Quiet,
    RetrieverModel,
    RetrieverOpt,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    llm_options,
    make_engine,
    out,
    parse_model_dirs,
    pattern_options,
)
from simgrag.cli.kg import _fmt_ms, format_retrieval
from simgrag.errors import SimGRAGError


def format_context(context: Any, shown: int = 15) -> list[str]:
    """A context without subgraphs: the retriever, its topic entities and the first ``shown`` triples."""
    topic = f", topic {', '.join(context.topic.names)} [{context.topic.source}]" if context.topic else ""
    lines = [f"Retriever: {context.retriever} ({len(context.triples)} triples{topic})"]
    lines += [f"  {t.head} --{t.relation}--> {t.tail}" for t in context.triples[:shown]]
    if len(context.triples) > shown:
        lines.append(f"  … {len(context.triples) - shown} more")
    return lines


def _said_without_llm(why: str) -> list[str]:
    """"(no LLM call: …)" with the reason's plain sentence, its numbers on a "details:" line."""
    from simgrag.answer.calibration import split_details

    plain, details = split_details(why)
    return [f"  (no LLM call: {plain})"] + ([f"    details: {details}"] if details else [])


def format_answer(result: Any, *, verdict: bool = False) -> str:
    """Answer (or verdict), the LLM's reply — or, when no LLM ran, from what the answer came — the
    evidence (subgraphs, or the retriever's triples) and per-stage timings — the same for every retriever."""
    lines = [("Claim: " if verdict else "Question: ") + (result.claim if verdict else result.question)]
    if verdict:
        found = result.verdict
        lines.append(f"Verdict: {found.label}")
        lines += [f"  contradicted by: {c.held.head} --{c.held.relation}--> {c.held.tail}"
                  for c in found.contradictions]
        reply, why, llm_used, abstained = found.text, found.reason, found.llm_used, found.abstained
    else:
        ans = result.answer
        shown = " | ".join(ans.entities) if ans.entities else (ans.short_answer or ans.text)
        lines.append(f"Answer: {shown}" if ans.style != "open" else f"Answer: {ans.text}")
        reply, why, llm_used, abstained = ans.text, ans.reason, ans.llm_used, ans.abstained
        lines += [f"  {sub.text()} (distance {sub.distance:.3f}; {sub.why()})" for sub in ans.substitutions]
    if llm_used:
        lines.append(f"  LLM reply: {reply!r}")
        if why and (abstained or why.startswith("the reply")):
            lines.append(f"  ({why})")
    else:
        lines += _said_without_llm(why)
    found = getattr(result, "pattern", None)
    changes = list(getattr(found, "kg_repairs", ()) or ())
    if changes:  # what the pattern stage or the channel choice changed in the LLM's pattern: evidence to inspect
        lines.append("Pattern changes (the LLM's own pattern, then):")
        lines += [f"  - {change}" for change in changes]
    lines += [format_retrieval(result.evidence)] if result.evidence is not None else format_context(result.context)
    stages = ", ".join(f"{k.removesuffix('_s')} {_fmt_ms(v)}" for k, v in result.timings.items())
    lines.append("stage timings: " + stages)
    return "\n".join(lines)


def _run(index_dir: Path | None, text: str, llm: LLMChoice, *, verdict: bool, as_json: bool,
         retriever_model: list[str] | None = None, deadline: float | None = None, learn: bool = False,
         learn_budget: float | None = DEFAULT_LEARN_BUDGET, **engine_options: Any) -> None:
    from simgrag.cli.learn_cmd import ready_index
    from simgrag.pattern.validate import validate_question

    try:
        validate_question(text, "claim" if verdict else "question")  # refused before any model or index loads
        index: Any = index_dir
        model = None
        simgrag_retriever = str(engine_options.get("retriever", DEFAULT_RETRIEVER)).strip().lower() == "simgrag"
        if learn and index_dir is not None and engine_options.get("examples") is None and simgrag_retriever:
            index, model = ready_index(index_dir, llm, learn_budget)  # an index without examples learns first
        engine = make_engine(index, llm, models=parse_model_dirs(retriever_model or []), llm_instance=model,
                             **engine_options)
        # the embedder and the compiled search warm up beside the question's own work; the LLM loads on
        # its first call (loading it in the background bought nothing on 2 cores: SimGRAG.warmup)
        try:
            engine.warmup(wait=False)
            result = (engine.verify(text, deadline_s=deadline) if verdict  # None: the default deadline (10 s)
                      else engine.ask(text, deadline_s=deadline))
        finally:
            engine.finish_warmup()  # before any output, the error message included
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=result.to_dict())
    else:
        out.print(format_answer(result, verdict=verdict), highlight=False, markup=False)


@app.command()
@llm_options
def ask(
    index_dir: IndexArg,
    question: Annotated[str, typer.Argument(help="the question")],
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    retriever: RetrieverOpt = DEFAULT_RETRIEVER, retriever_model: RetrieverModel = None, k: K = None,
    examples: Examples = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE, abstain_gsd: AbstainGsd = None,
    calibration: CalibrationOpt = DEFAULT_CALIBRATION,
    open_answer: Annotated[bool, typer.Option("--open", help="answer with a short paragraph written from the "
                                                             "retrieved facts (--retriever none: from the LLM's "
                                                             "own knowledge)")] = False,
    deadline: Deadline = None, grounding: Grounding = None, analogy: Analogy = True,
    pattern_option: PatternOptions = None, learn: Learn = True, learn_budget: LearnBudget = DEFAULT_LEARN_BUDGET,
    channel: Channel = None, as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Answer a question from the KG, showing the pattern, the evidence and per-stage timings. An index without
    few-shot examples (a KG of your own) learns them first, once (`simgrag learn`)."""
    _setup_logging(verbose, quiet)
    _run(index_dir, question, llm, verdict=False, as_json=as_json,
         retriever=retriever, retriever_model=retriever_model, k=k, examples=examples, answer_mode=answer_mode,
         abstain_gsd=abstain_gsd, reader_style="open" if open_answer else None, calibration=calibration,
         deadline=deadline, grounding=grounding, analogy=analogy, pattern_option=pattern_option, learn=learn,
         learn_budget=learn_budget, channel=channel)


@app.command()
@llm_options
def verify(
    index_dir: IndexArg,
    claim: Annotated[str, typer.Argument(help="the claim to check")],
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    retriever: RetrieverOpt = DEFAULT_RETRIEVER, retriever_model: RetrieverModel = None, k: K = None,
    examples: Examples = None, abstain_gsd: AbstainGsd = None, deadline: Deadline = None, grounding: Grounding = None,
    analogy: Analogy = True, pattern_option: PatternOptions = None, learn: Learn = True,
    learn_budget: LearnBudget = DEFAULT_LEARN_BUDGET, as_json: AsJson = False, verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Check a claim against the KG: Supported / Refuted / Not enough evidence, with the evidence. An index
    without few-shot examples (a KG of your own) learns them first, once (`simgrag learn`)."""
    _setup_logging(verbose, quiet)
    _run(index_dir, claim, llm, verdict=True, as_json=as_json,
         retriever=retriever, retriever_model=retriever_model, k=k, examples=examples, abstain_gsd=abstain_gsd,
         deadline=deadline, grounding=grounding, analogy=analogy, pattern_option=pattern_option, learn=learn,
         learn_budget=learn_budget)


@app.command()
@llm_options
def demo(
    question: Annotated[str, typer.Argument(help="a question about movies")] = "Who directed Inception?",
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    answer_mode: AnswerMode = DEFAULT_ANSWER_MODE, grounding: Grounding = None, analogy: Analogy = True,
    pattern_option: PatternOptions = None, as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Answer a question on the bundled sample movie KG (index built on first use) with embedded models."""
    _setup_logging(verbose, quiet)
    _run(None, question, llm, verdict=False, as_json=as_json,
         answer_mode=answer_mode, grounding=grounding, analogy=analogy, pattern_option=pattern_option)


@app.command()
@llm_options
def serve(
    index_dir: Annotated[Path | None, typer.Argument(help="index directory (default: the bundled sample KG)")] = None,
    host: Annotated[str, typer.Option(help="bind address; loopback by default")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    retriever: RetrieverOpt = DEFAULT_RETRIEVER, retriever_model: RetrieverModel = None,
    examples: Examples = None, answer_mode: AnswerMode = DEFAULT_ANSWER_MODE, abstain_gsd: AbstainGsd = None,
    calibration: CalibrationOpt = DEFAULT_CALIBRATION,
    grounding: Grounding = None, analogy: Analogy = True, pattern_option: PatternOptions = None,
    auth_key: Annotated[str | None, typer.Option(envvar="SIMGRAG_SERVE_KEY", help="require this key in X-API-Key "
                                                 "(or Authorization: Bearer) on /v1 endpoints")] = None,
    timeout: Annotated[float, typer.Option(help="per-request deadline, seconds")] = 120.0,
    max_waiting: Annotated[int, typer.Option(help="requests allowed to wait for the LLM; more get 429")] = 8,
    max_body: Annotated[int, typer.Option(help="request body limit, bytes")] = 64 * 1024,
    body_timeout: Annotated[float, typer.Option(help="a request body must arrive within this, seconds (408)")] = 10.0,
    max_connections: Annotated[int, typer.Option(help="open connections at most; more get 503")] = 256,
    verify_index: Annotated[bool, typer.Option("--verify/--no-verify", help="check the index's content hashes "
                                                                            "at start-up")] = True,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Serve the HTTP API (/v1/ask, /v1/verify, /v1/retrieve, /v1/health, /v1/kg/stats, /docs) and the
    evidence web page at / . The index and models load once, at start-up; --retriever is the default of
    /v1/ask and /v1/verify, a request may name another (trained ones with --retriever-model NAME=DIR)."""
    _setup_logging(verbose, quiet)
    import uvicorn

    from simgrag.retrievers.registry import check_retriever_options
    from simgrag.serve import ServeSettings, create_app

    if host not in ("127.0.0.1", "localhost", "::1") and auth_key is None:
        console.print(f"[yellow]warning:[/] serving on {host} without --auth-key: anyone who can reach it can "
                      "use it", markup=True)
    name = retriever.strip().lower()
    try:
        models = parse_model_dirs(retriever_model or [])
        own = {name: models[name]} if name in models else {}
        given = {"examples": examples, "model": own.get(name)}
        check_retriever_options(name, {k: v for k, v in given.items() if v is not None})  # refuse now, not at load
        pattern_options(pattern_option)  # a bad --pattern-option is refused now, not at load
        settings = ServeSettings(timeout_s=timeout, max_waiting=max_waiting, max_body_bytes=max_body,
                                 api_key=auth_key, retriever=name, body_timeout_s=body_timeout, verify=verify_index,
                                 retriever_options={n: {"model": d} for n, d in models.items()})

        def build() -> Any:
            return make_engine(index_dir, llm, retriever=name, models=own, examples=examples,
                               abstain_gsd=abstain_gsd, answer_mode=answer_mode, calibration=calibration,
                               grounding=grounding, analogy=analogy, pattern_option=pattern_option)

        web_app = create_app(build, settings)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    uvicorn.run(web_app, host=host, port=port, access_log=False, limit_concurrency=max_connections,
                timeout_keep_alive=5, log_level="debug" if verbose else "info")
