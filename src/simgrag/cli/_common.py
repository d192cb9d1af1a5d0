"""What every command module shares: the Typer apps, the consoles, error exit, logging, option types."""

from __future__ import annotations

import logging
from typing import Annotated

import typer
from rich.console import Console

from simgrag.errors import SimGRAGError

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

LLMOpt = Annotated[str, typer.Option("--llm", help="llamacpp[:model.gguf] | openai:<model> | ollama:<model>")]
BaseUrl = Annotated[str | None, typer.Option(help="server URL for openai:/ollama: backends")]
ApiKey = Annotated[str | None, typer.Option(help="API key (default: $OPENAI_API_KEY)")]
Examples = Annotated[str | None, typer.Option(help="few-shot examples file (YAML/JSON) for your KG; default: metaqa")]
AbstainGsd = Annotated[float | None, typer.Option(help="answer 'not found' when the best GSD is above this")]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object")]
AnswerMode = Annotated[str, typer.Option(help="llm: the LLM answers from the subgraphs (the paper); auto: answer "
                                              "from the subgraph bindings when the KG matches the pattern exactly")]


RetrieverOpt = Annotated[str, typer.Option(help="simgrag (the pattern graph) or another retriever: subgraphrag, "
                                                "gsr, kaping, pcst, triplets, paths, none")]
RetrieverModel = Annotated[str | None, typer.Option(help="trained model directory for subgraphrag / gsr")]


Deadline = Annotated[float | None, typer.Option(help="seconds of graph search before the best matches so far are "
                                                  "returned (default 10; inf: none)")]

LLMCache = Annotated[str, typer.Option(help="LLM call cache: 'default', 'none' or a file path")]
