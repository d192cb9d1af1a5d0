"""What every command module shares: the Typer apps, the consoles, error exit, logging, and the one set
of option types — one spelling, one meaning and one default per concept, whatever the command
(``tests/test_cli_options.py`` checks it on the whole app).

Engines are built by :func:`make_engine` from the shared options; the retriever, the answerer and
the SimGRAG settings go through the facade, which refuses options a retriever cannot use (``-k`` for
``pcst``, ``--examples`` for ``kaping``, ``--abstain-gsd`` for any retriever without subgraphs).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from simgrag.errors import ConfigError, SimGRAGError

if TYPE_CHECKING:
    from simgrag.index.directory import IndexDir
    from simgrag.llm.base import LLM
    from simgrag.pipeline import SimGRAG

app = typer.Typer(add_completion=False, no_args_is_help=True, help="SimGRAG: KG-grounded QA and fact checking.")
models_app = typer.Typer(no_args_is_help=True, help="Manage the embedded local LLM.")
app.add_typer(models_app, name="models")
console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def _setup_logging(verbose: int, quiet: bool = False) -> None:
    """Warnings only by default, with progress bars (:mod:`simgrag.progress`: the loggers stay enabled for
    INFO, the handler shows WARNING); INFO messages with ``-v``, DEBUG with ``-vv``; warnings only and no
    bars with ``-q``. On stderr, so stdout stays the command's result."""
    shown = logging.WARNING if quiet or verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler()
    handler.setLevel(shown)
    logging.basicConfig(level=logging.WARNING if quiet else min(shown, logging.INFO),
                        format="%(levelname)s %(name)s: %(message)s", handlers=[handler])


def _fail(exc: SimGRAGError) -> typer.Exit:
    message = exc.for_cli()  # options in their command-line spelling: --skip-bad-lines, not skip_bad_lines=True
    console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)  # "[llamacpp]" is text
    return typer.Exit(code=2)


# -- logging -------------------------------------------------------------------------------------------
Verbose = Annotated[int, typer.Option("--verbose", "-v", count=True, help="-v: also INFO messages; -vv: also DEBUG "
                                                                         "(prompts, replies)")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="warnings and errors only, no progress bars")]

# -- input and output ------------------------------------------------------------------------------------
IndexArg = Annotated[Path, typer.Argument(help="index directory from `simgrag index`")]
IndexOpt = Annotated[Path | None, typer.Option("--index", help="index directory from `simgrag index`")]
Output = Annotated[Path, typer.Option("-o", "--output", help="file or directory to write")]
OptionalOutput = Annotated[Path | None, typer.Option("-o", "--output", help="file to write (default: stdout)")]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object")]
KGFormat = Annotated[str | None, typer.Option(
    "--format", help="pipe|tsv|csv|ntriples|turtle|nquads|trig|rdfxml|jsonld (default: from the file)")]
SkipBadLines = Annotated[bool, typer.Option("--skip-bad-lines", help="load the rest and report malformed lines")]

# -- the LLM ---------------------------------------------------------------------------------------------
LLMOpt = Annotated[str, typer.Option("--llm", help="llamacpp[:model.gguf] (needs simgrag[llamacpp]) | "
                                                    "openai:<model> | ollama:<model>")]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="server URL for openai:/ollama: backends")]
ApiKey = Annotated[str | None, typer.Option("--api-key", help="API key (default: $OPENAI_API_KEY)")]
LLMTimeout = Annotated[float | None, typer.Option("--llm-timeout", min=0.1, help="seconds to wait for one reply of "
                                                                          "an openai:/ollama: server (default: "
                                                                          "60 / 120); a CPU server may need more")]
LLMCache = Annotated[str, typer.Option("--llm-cache", help="LLM call cache: none (every call reaches the model), "
                                                           "default (the shared cache file) or a file path")]
DEFAULT_LLM = "llamacpp"
DEFAULT_LLM_CACHE = "none"

# -- the retriever -----------------------------------------------------------------------------------------
RetrieverOpt = Annotated[str, typer.Option("--retriever", help="simgrag (the pattern graph) or another "
                                                               "retriever: see `simgrag ls`")]
RetrieverModel = Annotated[list[str] | None, typer.Option(
    "--retriever-model", help="a trained retriever's model directory, as NAME=DIR (subgraphrag=DIR, gsr=DIR); "
                              "repeatable")]
K = Annotated[int | None, typer.Option("-k", help="subgraphs (simgrag) or triples (kaping, triplets, paths) to "
                                                  "retrieve; default: the retriever's own (simgrag: 3)")]
Examples = Annotated[Path | None, typer.Option("--examples", help="few-shot examples file (YAML/JSON) of your KG's "
                                                                  "pattern prompt (simgrag); default: the index's")]
Grounding = Annotated[bool | None, typer.Option(
    "--grounding/--no-grounding", help="judge the LLM's pattern with the question and the KG, edit it and revise it "
                                       "once (simgrag). Default: as the index's fit says (`simgrag grounding fit`; "
                                       "every edit without one); --grounding: every edit, whatever the fit; "
                                       "--no-grounding: the LLM's pattern as written", show_default=False)]
Channel = Annotated[bool | None, typer.Option(
    "--channel/--no-channel", help="let the LLM choose between its pattern and its readings (one hop shorter, a "
                                   "name the question gives put in, an example's pattern, a copied hop taken "
                                   "out, one hop more) by how likely each makes "
                                   "the question "
                                   "(simgrag, embedded LLM). Default: as the index's fit says (off without one); "
                                   "where it is off, its default readings (a name put in, a copied hop taken "
                                   "out, a hop added or skipped, a named entity tied to a pattern that names "
                                   "none, a hop moved to the leaf it hangs from, a pattern in parts joined, "
                                   "a hop to the kind asked for, a hop put back mid-chain) "
                                   "still run unless the fit found harm. "
                                   "--no-channel: none",
    show_default=False)]
Analogy = Annotated[bool, typer.Option("--analogy/--no-analogy", help="try the best-fitting examples' patterns with "
                                                                     "the question's entity first; skip the LLM when "
                                                                     "the KG confirms one (simgrag; on by default)")]
PatternOptions = Annotated[list[str] | None, typer.Option(
    "--pattern-option", help="a pattern-stage setting as KEY=VALUE (simgrag; repeatable), e.g. n_dynamic_shots=1 "
                             "(one best-fitting example per prompt instead of 2: faster on a CPU, weaker on long "
                             "chains), shot_selection=words, max_tokens=300")]
DEFAULT_RETRIEVER = "simgrag"

# -- the answerer ------------------------------------------------------------------------------------------
AnswerMode = Annotated[str | None, typer.Option(
    "--answer-mode", help="auto: answer from the subgraph bindings when the KG matches the pattern exactly, else the "
                          "LLM; llm: always the LLM (the paper); check: both, the LLM choosing where they "
                          "disagree; default: the mode fitted for the index's KG "
                          "(`simgrag grounding fit`, index-time learning), else auto")]
AbstainGsd = Annotated[float | None, typer.Option("--abstain-gsd", help="answer 'not found' when the best subgraph's "
                                                                        "GSD is above this (simgrag)")]
ReaderMaxTriples = Annotated[int, typer.Option("--reader-max-triples", help="at most this many triples (or paths) "
                                                                            "in a reader prompt (retrievers other "
                                                                            "than simgrag)")]
ReaderMaxPromptTokens = Annotated[int, typer.Option("--reader-max-prompt-tokens", help="a reader prompt's budget "
                                                                                       "(estimated tokens)")]
CalibrationOpt = Annotated[str, typer.Option("--calibration", help="abstention and substitution thresholds "
                                                                   "(simgrag): auto (the index's calibration.json, "
                                                                   "else the one bundled for its embedder), off (no "
                                                                   "abstention on the evidence) or a file from "
                                                                   "`simgrag bench calibrate`")]
AnswerTolerance = Annotated[float, typer.Option("--answer-tolerance", help="answer sets (simgrag): every answer "
                                                                        "bound in a match within this GSD of the "
                                                                        "best one; negative: none (the top-k "
                                                                        "subgraphs' bindings only)")]
OrientationOpt = Annotated[str, typer.Option("--orientation", help="answer sets (simgrag): among the matches as good "
                                                                      "as the best, follow (default: only those "
                                                                      "running the pattern's way where any does) or "
                                                                      "prefer (those first, the turned ones after)")]
DEFAULT_ORIENTATION = "follow"
DEFAULT_ANSWER_MODE: str | None = None  # the index's fitted mode, else auto
DEFAULT_CALIBRATION = "auto"
DEFAULT_ANSWER_TOLERANCE = 1e-3


@dataclass(frozen=True)
class LLMChoice:
    """The LLM options of a command: ``spec`` (``none`` for no LLM), server URL, key, call cache, timeout."""

    spec: str = DEFAULT_LLM
    base_url: str | None = None
    api_key: str | None = None
    cache: str = DEFAULT_LLM_CACHE
    timeout: float | None = None

    def options(self) -> dict[str, Any]:
        """:func:`~simgrag.llm.registry.resolve_llm` keywords."""
        options: dict[str, Any] = {k: v for k, v in (("base_url", self.base_url), ("api_key", self.api_key),
                                                     ("timeout", self.timeout)) if v}
        options["cache"] = False if self.cache == "none" else (True if self.cache == "default" else self.cache)
        return options


DEFAULT_LLM_CHOICE = LLMChoice()  # the ``llm`` default of a command decorated with :func:`llm_options`
#: the command-line options of :class:`LLMChoice` (name, option type, default), in help order
_LLM_OPTIONS = (("llm", LLMOpt, DEFAULT_LLM), ("base_url", BaseUrl, None), ("api_key", ApiKey, None),
                ("llm_timeout", LLMTimeout, None), ("llm_cache", LLMCache, DEFAULT_LLM_CACHE))
R = TypeVar("R")


def llm_options(command: Callable[..., R]) -> Callable[..., R]:
    """Gives a command the LLM options (``--llm``, ``--base-url``, ``--api-key``, ``--llm-timeout``,
    ``--llm-cache``) in place of its ``llm: LLMChoice`` parameter, which receives them as one
    :class:`LLMChoice`: one declaration of the group for every command that calls an LLM."""
    signature = inspect.signature(command, eval_str=True)
    if "llm" not in signature.parameters:
        raise TypeError(f"{command.__name__} has no llm: LLMChoice parameter for @llm_options to fill")
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name != "llm":
            params.append(param)
            continue
        params += [inspect.Parameter(name, param.kind, default=default, annotation=annotation)
                   for name, annotation, default in _LLM_OPTIONS]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> R:
        given = {name: kwargs.pop(name) for name, _, _ in _LLM_OPTIONS}
        choice = LLMChoice(given["llm"], given["base_url"], given["api_key"], given["llm_cache"], given["llm_timeout"])
        return command(*args, llm=choice, **kwargs)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
    return run


def llm_for(choice: LLMChoice) -> str | LLM | None:
    """The ``llm=`` of the facade for ``choice`` (tests replace this to script the LLM)."""
    return None if choice.spec == "none" else choice.spec


def parse_model_dirs(specs: Sequence[str]) -> dict[str, str]:
    """``["subgraphrag=DIR", …]`` (``--retriever-model``) → ``{name: DIR}``."""
    dirs: dict[str, str] = {}
    for spec in specs:
        name, sep, directory = spec.partition("=")
        if not sep or not name.strip() or not directory:
            raise ConfigError(f"--retriever-model expects NAME=DIR, got {spec!r}")
        dirs[name.strip().lower()] = directory
    return dirs


def split_names(names: str) -> list[str]:
    """A comma-separated ``--retriever`` list → names."""
    return [n.strip().lower() for n in names.split(",") if n.strip()]


def pattern_options(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--pattern-option`` pairs → keywords of the pattern generator and of the grounding stage around it
    (:func:`~simgrag.pattern.generate.parse_pattern_options` with :data:`~simgrag.grounding.stage.STAGE_OPTIONS`);
    a malformed pair or an unknown key is a :class:`~simgrag.errors.ConfigError`."""
    from simgrag.grounding.stage import STAGE_OPTIONS
    from simgrag.pattern.generate import parse_pattern_options

    return parse_pattern_options(pairs or (), STAGE_OPTIONS)


def make_engine(index: Path | IndexDir | None, llm: LLMChoice, *, retriever: str = DEFAULT_RETRIEVER,
                models: Mapping[str, str] | None = None, k: int | None = None, examples: Path | None = None,
                abstain_gsd: float | None = None, answer_mode: str | None = DEFAULT_ANSWER_MODE,
                reader_style: str | None = None, reader_options: Mapping[str, Any] | None = None,
                calibration: str = DEFAULT_CALIBRATION, answer_tolerance: float = DEFAULT_ANSWER_TOLERANCE,
                grounding: bool | None = None, analogy: bool = True,
                pattern_option: Sequence[str] | None = None, llm_instance: LLM | None = None,
                channel: bool | None = None, orientation: str = DEFAULT_ORIENTATION) -> SimGRAG:
    """The engine a command asks (``index=None``: the bundled sample KG). ``models``: trained model
    directories by retriever name; a model for a retriever other than ``retriever`` is refused.
    ``pattern_option``: ``--pattern-option`` pairs (:func:`pattern_options`);
    ``llm_instance``: the LLM already resolved from ``llm`` (loaded once: ``ask`` learning first); ``channel``:
    ``--channel/--no-channel`` (the simgrag retriever only)."""
    from simgrag.match.retrieve import RetrievalSettings
    from simgrag.pipeline import SimGRAG, sample_index

    name = retriever.strip().lower()
    dirs = dict(models or {})
    stray = sorted(set(dirs) - {name})
    if stray:
        raise ConfigError(f"--retriever-model names {', '.join(stray)}, which this command does not use "
                          f"(--retriever {name}).")
    stage_options = pattern_options(pattern_option)
    if not analogy:
        stage_options["analogy"] = False
    options: dict[str, Any] = {"model": dirs[name]} if name in dirs else {}
    if k is not None:
        options["k"] = k
    if channel is not None:
        if name != "simgrag":
            raise ConfigError(f"--channel/--no-channel applies to the simgrag retriever, not {name}")
        options["channel"] = channel
    if answer_tolerance != DEFAULT_ANSWER_TOLERANCE or orientation != DEFAULT_ORIENTATION:  # the retriever's search
        options["retrieval"] = RetrievalSettings(answer_tolerance=None if answer_tolerance < 0 else answer_tolerance,
                                                 orientation=orientation)  # type: ignore[arg-type]
    return SimGRAG(sample_index() if index is None else index, retriever=name, retriever_options=options,
                   llm=llm_for(llm) if llm_instance is None else llm_instance,
                   llm_options=llm.options() if llm_instance is None else {}, examples=examples,
                   abstain_gsd=abstain_gsd, answer_mode=answer_mode, reader_style=reader_style,
                   reader_options=reader_options, calibration=calibration, ground_patterns=grounding,
                   pattern_options=stage_options or None)


# -- learning at index time (simgrag learn; index and ask learn by themselves) ------------------------------
Learn = Annotated[bool, typer.Option("--learn/--no-learn", help="when the index has no few-shot examples (a KG of "
                                                               "your own), learn them from the KG with the LLM, "
                                                               "with validation questions, and attach them; when "
                                                               "its examples are yours (index --examples), learn "
                                                               "validation questions alone; then fit the pattern "
                                                               "stage on them (see `simgrag learn`)")]
LearnBudget = Annotated[float | None, typer.Option(
    "--learn-budget", min=1.0, help="seconds the learning may take (examples, validation questions, the pattern "
                                    "stage's fit; default: 300 for a KG of up to 20 relations, growing to 1800 at "
                                    "500); what a stopped run made is kept: `simgrag learn` goes on")]
DEFAULT_LEARN_BUDGET: float | None = None  # from the KG's relations (simgrag.bootstrap.learn.default_budget)


def learn_budget_for(index_dir: Path, budget: float | None, more_validation: int = 0) -> float:
    """``budget``, or the default for the index's KG (:func:`~simgrag.bootstrap.learn.default_budget` of its
    relations, read from the manifest, and of the validation questions asked for beyond the default)."""
    if budget is not None:
        return budget
    from simgrag.bootstrap.learn import default_budget
    from simgrag.index.attach import read_manifest_json

    relations = (read_manifest_json(index_dir).get("kg") or {}).get("relations")
    return default_budget(int(relations) if isinstance(relations, int) else 0, more_validation)

Deadline = Annotated[float | None, typer.Option("--deadline", help="seconds of graph search before the best matches "
                                                                  "so far are returned (default 10; inf: none)")]
