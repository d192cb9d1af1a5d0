"""Examples and aliases of an index: ``simgrag examples bootstrap|install``, ``simgrag aliases bootstrap|install``
(and the ``--bootstrap-*`` steps of ``simgrag index``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from simgrag.cli import _common
from simgrag.cli._common import (
    DEFAULT_LLM_CHOICE,
    AsJson,
    IndexArg,
    LLMChoice,
    Output,
    Quiet,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
    llm_options,
    out,
)
from simgrag.errors import ConfigError, SimGRAGError

if TYPE_CHECKING:
    from simgrag.bootstrap import AliasesReport, ExamplesReport
    from simgrag.llm.base import LLM

examples_app = typer.Typer(no_args_is_help=True, help="Few-shot examples of an index: bootstrap them from its KG "
                                                      "with the LLM, or attach a file.")
aliases_app = typer.Typer(no_args_is_help=True, help="Relation aliases of an index: bootstrap them with the LLM, or "
                                                     "attach a file.")
app.add_typer(examples_app, name="examples")
app.add_typer(aliases_app, name="aliases")

FileArg = Annotated[Path, typer.Argument(help="the YAML file to attach")]
Install = Annotated[bool, typer.Option("--install", help="attach the file to the index when done: its default from "
                                                        "then on (ask, serve, bench, mcp)")]
Resume = Annotated[bool, typer.Option("--resume/--no-resume", help="go on from the progress log beside the output "
                                                                   "(FILE.progress.jsonl), or start over")]
Seed = Annotated[int, typer.Option("--seed", help="random seed of the sample")]
PerShape = Annotated[int, typer.Option("--per-shape", help="subgraphs sampled per shape")]
QuestionsPerSample = Annotated[int, typer.Option("--questions-per-sample", help="questions the LLM writes for each "
                                                                               "sampled subgraph")]
Shapes = Annotated[str, typer.Option("--shapes", help="comma-separated: 1hop, 2hop, 3hop, star, conjunction")]
CheckTop = Annotated[int, typer.Option("--check-top", help="keep a question when a gold answer is among its first N "
                                                           "answer candidates")]
ExcludeEntities = Annotated[Path | None, typer.Option(
    "--exclude-entities", help="a file of entity names, one per line, that no sample may touch (e.g. the topics of "
                               "an evaluation, to keep it held out)")]
MaxLLMCalls = Annotated[int | None, typer.Option("--max-llm-calls", help="stop (resumably) before the next sample "
                                                                         "once this many LLM calls were made")]
PerRelation = Annotated[int, typer.Option("--per-relation", help="phrases the LLM writes per relation")]
Margin = Annotated[float, typer.Option("--margin", help="keep a phrase when every other relation is at least this "
                                                        "much farther from it (embedding distance)")]
MaxDistance = Annotated[float | None, typer.Option("--max-distance", help="and when its own relation is at most this "
                                                                          "far (default: no limit)")]
ALL_SHAPES = "1hop,2hop,3hop,star,conjunction"


def read_names(path: Path | None) -> frozenset[str]:
    """The entity names of an ``--exclude-entities`` file (blank lines and ``#`` comments skipped)."""
    if path is None:
        return frozenset()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"Cannot read the entity names file {path}: {exc}") from exc
    return frozenset(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


def resolve_choice(choice: LLMChoice) -> LLM:
    """The LLM a bootstrap command runs with (refused: ``--llm none``)."""
    from simgrag.llm.registry import resolve_llm

    spec = _common.llm_for(choice)  # looked up here, so tests can script the LLM
    if spec is None:
        raise ConfigError("The bootstrap needs an LLM to write questions and phrases: --llm llamacpp (the default), "
                          "openai:<model> or ollama:<model>")
    return resolve_llm(spec, **choice.options())


def examples_summary(report: ExamplesReport) -> str:
    rejected = ", ".join(f"{why} {n}" for why, n in sorted(report.rejected.items(), key=lambda kv: -kv[1]))
    state = "" if report.complete else (f" — stopped after {report.samples_done} of {report.samples} samples; run "
                                        "the same command again to go on")
    return (f"Kept {report.kept} of {report.questions} questions from {report.samples_done} samples"
            f"{f' (dropped: {rejected})' if rejected else ''}; {report.llm_calls} LLM calls in {report.seconds:.0f} s"
            f" → {report.output}{state}")


def aliases_summary(report: AliasesReport) -> str:
    return (f"Kept {report.kept} of {report.proposed} phrases for {report.relations} relations; {report.llm_calls} "
            f"LLM calls in {report.seconds:.0f} s → {report.output}")


def run_examples_bootstrap(index_dir: Path, output: Path, llm: LLM, *, install: bool, resume: bool = True,
                           max_llm_calls: int | None = None, say: Console = out, **settings: Any) -> ExamplesReport:
    """Bootstrap ``output`` for ``index_dir`` (and attach it with ``install`` when it holds examples)."""
    from simgrag.bootstrap import ExamplesSettings, bootstrap_examples, install_examples
    from simgrag.index.directory import open_index_dir

    chosen = ExamplesSettings(**settings)
    report = bootstrap_examples(open_index_dir(index_dir), llm, output, chosen, resume=resume,
                                max_llm_calls=max_llm_calls)
    say.print(examples_summary(report), highlight=False, markup=False)
    if install and report.kept:
        install_examples(index_dir, output, info={"bootstrapped": True, "complete": report.complete,
                                                  "llm": llm.name, "settings": chosen.logged()})
        say.print(f"Attached to {index_dir}: its default examples from now on.", highlight=False, markup=False)
    elif not report.kept:
        say.print("No example kept yet: nothing written or attached.", highlight=False, markup=False)
    else:
        say.print(f"Edit it if you like, then attach it: simgrag examples install {index_dir} {output}  (or pass "
                  f"--examples {output} to ask/serve/bench)", highlight=False, markup=False)
    return report


def run_aliases_bootstrap(index_dir: Path, output: Path, llm: LLM, *, install: bool, resume: bool = True,
                          say: Console = out, **settings: Any) -> AliasesReport:
    """Bootstrap ``output`` for ``index_dir`` (and embed it into the index with ``install``)."""
    from simgrag.bootstrap import AliasesSettings, bootstrap_aliases, install_aliases
    from simgrag.index.directory import open_index_dir

    report = bootstrap_aliases(open_index_dir(index_dir), llm, output, AliasesSettings(**settings), resume=resume)
    say.print(aliases_summary(report), highlight=False, markup=False)
    if install:
        install_aliases(index_dir, output, info={"bootstrapped": True, "llm": llm.name})
        say.print(f"Embedded into {index_dir}'s relation index.", highlight=False, markup=False)
    else:
        say.print(f"Edit it if you like, then install it: simgrag aliases install {index_dir} {output}",
                  highlight=False, markup=False)
    return report


def bootstrap_after_build(index_dir: Path, choice: LLMChoice, *, aliases: bool, examples: bool) -> None:
    """``simgrag index … --bootstrap-aliases --bootstrap-examples``: aliases first (the examples' patterns
    are checked with them), each written beside the index (``INDEX_DIR.aliases.yaml``,
    ``INDEX_DIR.examples.yaml``) and attached."""
    if not (aliases or examples):
        return
    llm = resolve_choice(choice)
    if aliases:
        run_aliases_bootstrap(index_dir, index_dir.with_name(index_dir.name + ".aliases.yaml"), llm, install=True)
    if examples:
        run_examples_bootstrap(index_dir, index_dir.with_name(index_dir.name + ".examples.yaml"), llm, install=True)


@examples_app.command("bootstrap")
@llm_options
def examples_bootstrap(
    index_dir: IndexArg, output: Output, install: Install = False, per_shape: PerShape = 8,
    questions_per_sample: QuestionsPerSample = 3, shapes: Shapes = ALL_SHAPES, seed: Seed = 0, check_top: CheckTop = 1,
    max_llm_calls: MaxLLMCalls = None, exclude_entities: ExcludeEntities = None, resume: Resume = True,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Write an editable few-shot examples file for an index: subgraphs sampled from its KG (1-3 hop chains,
    stars, conjunctions), natural questions by the LLM, kept when the engine's pattern for them finds the
    subgraph's answer. LLM calls: at most 2 per relation + per sample 1 + 2 x questions."""
    _setup_logging(verbose, quiet)
    try:
        report = run_examples_bootstrap(
            index_dir, output, resolve_choice(llm), install=install,
            resume=resume, max_llm_calls=max_llm_calls, shapes=tuple(shapes.split(",")), per_shape=per_shape,
            questions_per_sample=questions_per_sample, seed=seed, check_top=check_top,
            exclude=read_names(exclude_entities), say=console if as_json else out)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=report.to_dict())


@examples_app.command("install")
def examples_install(index_dir: IndexArg, file: FileArg,
                     claims: Annotated[bool, typer.Option("--claims", help="as the index's claim examples (verify)")]
                     = False, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """Attach an examples file to an index (checked first): ask/serve/bench on the index use it by default."""
    _setup_logging(verbose, quiet)
    from simgrag.bootstrap import install_examples
    from simgrag.grounding.fit import MANIFEST_KEY
    from simgrag.index.attach import read_manifest_json

    try:
        record = install_examples(index_dir, file, claims=claims)
        fitted = not claims and MANIFEST_KEY in read_manifest_json(index_dir)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"Attached {file} ({record['examples']} examples) to {index_dir} as {record['file']}", highlight=False,
              markup=False)
    if fitted:
        out.print(f"The pattern stage was fitted with the examples the index had before: `simgrag learn {index_dir}` "
                  "fits it with these (it learns validation questions alone).", highlight=False, markup=False)


@aliases_app.command("bootstrap")
@llm_options
def aliases_bootstrap(
    index_dir: IndexArg, output: Output, install: Install = False, per_relation: PerRelation = 8,
    margin: Margin = 0.1, max_distance: MaxDistance = None, seed: Seed = 0, resume: Resume = True,
    llm: LLMChoice = DEFAULT_LLM_CHOICE,
    as_json: AsJson = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Write an editable relation-aliases file for an index: the LLM's everyday phrases for each relation, kept
    when they embed near it and farther from every other relation. Two LLM calls per relation (paraphrases,
    then the noun for its tail: "Portugal is Spain's ___")."""
    _setup_logging(verbose, quiet)
    try:
        report = run_aliases_bootstrap(index_dir, output, resolve_choice(llm),
                                       install=install, resume=resume, per_relation=per_relation, margin=margin,
                                       max_distance=max_distance, seed=seed, say=console if as_json else out)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=report.to_dict())


@aliases_app.command("install")
def aliases_install(index_dir: IndexArg, file: FileArg, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """Embed a relation-aliases file into an index's relation index and attach it (no rebuild)."""
    _setup_logging(verbose, quiet)
    from simgrag.bootstrap import install_aliases

    try:
        install_aliases(index_dir, file)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    out.print(f"Embedded the aliases of {file} into {index_dir}", highlight=False, markup=False)
