"""One way to say each thing on the command line: the whole typer app is walked, and a second spelling
of a concept, one spelling for two concepts, or a shared option with two defaults fails the test."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import pytest
import typer.main

from simgrag.cli import app

#: options every command that has them must spell and default the same way
SHARED = ("llm", "base_url", "api_key", "llm_cache", "answer_mode", "abstain_gsd", "calibration", "examples", "k",
          "retriever_model", "verbose", "quiet", "as_json", "index", "output", "metaqa_dir", "seed", "split",
          "reader_max_triples", "reader_max_prompt_tokens")
#: spellings that name one concept: at most one of each group may appear anywhere in the app
SYNONYMS = (
    {"--out", "--output", "--out-dir", "--output-dir", "--out-file"},
    {"--index", "--index-dir", "--index-path", "--idx"},
    {"--verbose", "--verbosity", "--debug"},
    {"--llm", "--model", "--llm-model"},
    {"--llm-cache", "--cache", "--no-cache"},
    {"--retriever-model", "--model-dir", "--retriever-models"},
    {"--examples", "--examples-file", "--shots"},
    {"--answer-mode", "--mode"},
)
#: suffixes that make a second spelling of the same thing (``--index`` / ``--index-dir``)
SAME_THING = ("-dir", "-path", "-file", "-name", "s")
#: pairs of long names allowed although one looks like the other (different things)
DISTINCT = {("--n", "--naive"), ("--pattern", "--patterns")}


def _second_spelling(a: str, b: str) -> bool:
    """``b`` reads as another spelling of ``a``: ``--out``/``--output``, ``--index``/``--index-dir``;
    ``--llm``/``--llm-cache`` (a qualified, other thing) does not."""
    if not b.startswith(a) or (a, b) in DISTINCT:
        return False
    rest = b[len(a):]
    return not rest.startswith("-") or rest in SAME_THING


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(name, command) of every leaf command (typer ships its own click: duck-typed)."""
    subcommands = getattr(group, "commands", None)
    if subcommands:
        return [c for name, sub in subcommands.items() for c in _commands(sub, f"{prefix} {name}".strip())]
    return [(prefix, group)]


COMMANDS = _commands(typer.main.get_command(app))
OPTIONS = [(name, p) for name, cmd in COMMANDS for p in cmd.params if p.param_type_name == "option"]


def test_the_app_has_the_commands_it_documents() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"index", "retrieve", "ask", "verify", "demo", "serve", "ls", "models pull", "bench metaqa",
            "bench qa", "bench claims", "bench factscore", "bench abstain", "bench summarize"} <= names


def test_one_spelling_per_concept_and_one_concept_per_spelling() -> None:
    spellings: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    dests: dict[str, set[str]] = defaultdict(set)
    for _, param in OPTIONS:
        assert param.name is not None
        spellings[param.name].add(tuple(sorted(param.opts)))
        for opt in param.opts:
            dests[opt].add(param.name)
    assert {d: s for d, s in spellings.items() if len(s) > 1} == {}
    assert {o: d for o, d in dests.items() if len(d) > 1} == {}


def test_no_second_spelling_of_a_concept() -> None:
    used = {opt for _, p in OPTIONS for opt in p.opts}
    assert [sorted(group & used) for group in SYNONYMS if len(group & used) > 1] == []
    longs = sorted(o for o in used if o.startswith("--"))
    assert [(a, b) for a, b in itertools.combinations(longs, 2) if _second_spelling(a, b)] == []


@pytest.mark.parametrize("dest", SHARED)
def test_shared_options_have_one_default(dest: str) -> None:
    defaults = {repr(p.default) for _, p in OPTIONS if p.name == dest and not p.required}
    assert len(defaults) <= 1, f"--{dest.replace('_', '-')} defaults differ: {defaults}"


def test_the_agreed_defaults() -> None:
    default = {p.name: p.default for _, p in OPTIONS}
    assert default["answer_mode"] is None and default["llm_cache"] == "none" and default["llm"] == "llamacpp"
    assert default["k"] is None and default["verbose"] == 0 and default["quiet"] is False
    kinds = {name: {p.name for p in cmd.params} for name, cmd in COMMANDS}
    assert "index_kind" in kinds["index"] and "index" not in kinds["index"]  # a kind is not a directory
    index_types = {p.type_descriptor.annotation for _, p in OPTIONS if p.name == "index"}
    assert {str(t) for t in index_types} <= {"<class 'pathlib.Path'>", "pathlib.Path | None"}  # a directory


def test_every_command_logs_the_same_way() -> None:
    for name, cmd in COMMANDS:
        if name in ("ls", "bench summarize", "bench diff"):  # they read files and print: nothing to log
            continue
        params = {p.name for p in cmd.params}
        assert {"verbose", "quiet"} <= params, name


def test_ls_is_generated_from_the_four_registries() -> None:
    from typer.testing import CliRunner

    from simgrag.embed.registry import EMBEDDERS
    from simgrag.index.registry import INDEXES
    from simgrag.llm.registry import LLMS
    from simgrag.retrievers.registry import RETRIEVERS

    result = CliRunner().invoke(app, ["ls"])
    assert result.exit_code == 0, result.output
    for registry in (EMBEDDERS, INDEXES, LLMS, RETRIEVERS):
        assert f"{registry.title} ({registry.option})" in result.output
        for entry in registry.entries():
            assert entry.usage in result.output and entry.description[:30] in result.output


def test_every_command_with_a_pattern_stage_takes_pattern_options() -> None:
    """`--pattern-option` (e.g. n_dynamic_shots=1) reaches the LLM pattern stage of every command that runs one."""
    with_pattern_stage = {"ask", "verify", "demo", "serve", "bench metaqa", "bench qa", "bench claims",
                          "bench factscore", "bench abstain", "bench calibrate"}
    takes = {name for name, cmd in COMMANDS if any("--pattern-option" in p.opts for p in cmd.params)}
    assert with_pattern_stage - takes == set()


def test_no_reader_is_refused_without_a_retriever_comparison(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["bench", "metaqa", "--metaqa-dir", str(tmp_path), "-o", str(tmp_path / "o"),
                                      "--no-reader"])
    assert result.exit_code != 0 and "--no-reader compares retrievers" in result.output


def test_calibrate_refuses_pattern_options_with_gold_patterns(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["bench", "calibrate", "--metaqa-dir", str(tmp_path), "-o", str(tmp_path / "o"),
                                      "--pattern-option", "n_dynamic_shots=1"])
    assert result.exit_code != 0 and "--pattern-option applies to --patterns llm" in result.output
