"""The ``simgrag`` command line. Thin: parse options, call the library, print.

    simgrag index KG_FILE -o INDEX_DIR          build an index directory (then learn its examples: --no-learn)
    simgrag learn INDEX_DIR                     learn the KG's own examples + validation questions (resumable)
    simgrag examples bootstrap INDEX_DIR -o F   an editable examples file for the index's KG (--install)
    simgrag examples install INDEX_DIR FILE     attach an examples file: the index's default
    simgrag aliases bootstrap|install …         the same for relation aliases
    simgrag check INDEX_DIR                     verify an index (structure, content hashes)
    simgrag grounding fit INDEX_DIR --questions F  fit the pattern stage's edits to this KG (stored in it)
    simgrag update INDEX_DIR --add F --remove F add/remove triples without a rebuild (atomic)
    simgrag retrieve INDEX_DIR --pattern JSON   top-k subgraphs for a pattern
    simgrag ask INDEX_DIR "question"            answer from the KG (see `simgrag ask --help`)
    simgrag verify INDEX_DIR "claim"            Supported / Refuted with evidence
    simgrag bench factscore --metaqa-dir DIR …  open answers scored claim by claim against the KG
    simgrag serve [INDEX_DIR]                   HTTP API + evidence web page (+ OpenAI-compatible chat)
    simgrag mcp [INDEX_DIR]                     MCP server (stdio or streamable HTTP) for AI assistants
    simgrag perturb KG_FILE --method rs -o OUT  a perturbed copy of a KG (robustness lab)
    simgrag ls                                  registered embedders, indexes, LLMs
    simgrag models pull                         fetch the embedded models offline (embedder, LLM)
    simgrag --version                           the installed simgrag's version

The console script leaves without tearing the interpreter down once a command has finished (its
output flushed, its files closed by the command itself): freeing the loaded llama.cpp model, torch and
numba took 0.6–0.9 s of every `simgrag ask` on 2 cores (mypy exits the same way). Not when a Milvus
Lite server may need its exit hook; ``SIMGRAG_FAST_EXIT=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from importlib import metadata
from typing import Annotated

import typer

from simgrag.cli import (  # noqa: F401  (each registers its commands on ``app``)
    bench,
    bootstrap,
    check,
    grounding_cmd,
    kg,
    learn_cmd,
    mcp_cmd,
    qa,
    update_cmd,
)
from simgrag.cli._common import app
from simgrag.cli.kg import _index_params, format_retrieval
from simgrag.cli.qa import format_answer, format_context

__all__ = ["_index_params", "app", "format_answer", "format_context", "format_retrieval", "main"]


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml's, through the package metadata)."""
    try:
        return metadata.version("simgrag")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"simgrag {installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print simgrag's version and exit."),
    ] = False,
) -> None:
    """SimGRAG: KG-grounded QA and fact checking."""


def main() -> None:
    """The ``simgrag`` console script: the typer app, then a fast exit (module docstring)."""
    try:
        app()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code: object) -> None:
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what SystemExit("message") would print
    if os.environ.get("SIMGRAG_FAST_EXIT", "1") == "0" or "milvus_lite" in sys.modules:
        raise SystemExit(status)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can reach it
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
