"""Where `simgrag index` reads the KG from: a file, a SPARQL endpoint or a Kùzu database.

    simgrag index kb.ttl -o kb.idx --label-lang de,en, --literals skip
    simgrag index sparql+http://127.0.0.1:7878/query -o kb.idx --source-param graph=http://ex.org/g
    simgrag index --sparql http://127.0.0.1:7878/query -o kb.idx --source-param page_size=50000
    simgrag index kuzu:movies.kz -o kb.idx --source-param name_properties=name,title --source-param properties=true
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag._options import key_values, scalar_value
from simgrag.errors import ConfigError
from simgrag.kg.rdf import RDFOptions
from simgrag.kg.sources import KUZU_PREFIX, SPARQL_PREFIX, KGSource, open_source

__all__ = ["KGFileArg", "LabelLang", "Literals", "SourceParam", "SparqlOpt", "kg_source"]

KGFileArg = Annotated[str | None, typer.Argument(
    help="KG file (head|relation|tail, TSV, CSV, N-Triples, Turtle, N-Quads, TriG, RDF/XML, JSON-LD, .gz), "
         "sparql+http(s)://ENDPOINT or kuzu:DATABASE", show_default=False)]
SparqlOpt = Annotated[str | None, typer.Option("--sparql", help="SPARQL endpoint URL to page the triples from "
                                                                "(instead of KG_FILE)")]
SourceParam = Annotated[list[str] | None, typer.Option(
    "--source-param", help="KEY=VALUE for a SPARQL endpoint (graph, construct (@file reads it), page_size, order, "
                           "retries, backoff_s, timeout_s, checkpoint_dir) or a Kùzu database (name_properties=a,b, "
                           "properties=true); repeatable")]
LabelLang = Annotated[str | None, typer.Option(
    help="RDF label languages, best first, comma-separated; an empty item is an untagged label (default: 'en,')")]
Literals = Annotated[str | None, typer.Option(help="RDF literal objects: entities (default) | skip")]

_SPARQL_KEYS = {"graph", "construct", "page_size", "order", "retries", "backoff_s", "timeout_s", "checkpoint_dir"}
_KUZU_KEYS = {"name_properties", "properties"}


def _value(key: str, text: str) -> Any:
    if key == "construct" and text.startswith("@"):
        try:
            return Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--source-param construct=@FILE: cannot read {text[1:]}: {exc}") from exc
    if key == "name_properties":
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if key == "checkpoint_dir":
        return Path(text)
    return scalar_value(text)


def _params(pairs: list[str], allowed: set[str], kind: str) -> dict[str, Any]:
    return {key: _value(key, text) for key, text in key_values(pairs, flag="--source-param", allowed=allowed,
                                                                where=f"a {kind}")}


def _rdf_options(label_lang: str | None, literals: str | None) -> RDFOptions | None:
    if label_lang is None and literals is None:
        return None
    options = RDFOptions()
    if label_lang is not None:
        options = dataclasses.replace(options, languages=tuple(p.strip() for p in label_lang.split(",")))
    if literals is not None:
        options = dataclasses.replace(options, literals=literals)  # type: ignore[arg-type]
    return options


def kg_source(kg_file: str | None, *, sparql: str | None = None, source_params: list[str] | None = None,
              label_lang: str | None = None, literals: str | None = None,
              format: str | None = None) -> KGSource | Path:
    """The source the command line names (see the module docstring)."""
    if (kg_file is None) == (sparql is None):
        raise ConfigError("give exactly one of KG_FILE (a file, sparql+http://…, kuzu:…) and --sparql URL")
    spec = SPARQL_PREFIX + sparql if sparql is not None else str(kg_file)
    pairs = source_params or []
    rdf = _rdf_options(label_lang, literals)
    if spec.startswith(SPARQL_PREFIX):
        return open_source(spec, rdf=rdf, sparql=_params(pairs, _SPARQL_KEYS, "SPARQL endpoint"))
    if spec.startswith(KUZU_PREFIX):
        return open_source(spec, graphdb=_params(pairs, _KUZU_KEYS, "Kùzu database"))
    if pairs:
        raise ConfigError("--source-param applies to sparql+http(s)://… and kuzu:… sources, not to files")
    return open_source(spec, format=format, rdf=rdf)
