"""KG sources other than a plain file: an RDF file with options, a SPARQL endpoint, a graph database.

A :class:`KGSource` loads itself into a :class:`~simgrag.kg.store.KGStore` with a
:class:`~simgrag.kg.loader.LoadReport`; :func:`~simgrag.index.directory.build_index_dir` takes one
wherever it takes a KG file, and calls :meth:`KGSource.finished` once the index is in place (a SPARQL
source then drops the pages it kept for resuming). :func:`open_source` resolves the strings the
command line takes::

    kb.ttl                                   a file (RDF options apply to RDF files)
    sparql+http://host:7878/query            a SPARQL endpoint (also sparql+https://)
    kuzu:/path/to/db                         a Kùzu database
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from simgrag.errors import ConfigError
from simgrag.kg.rdf import RDFOptions, load_rdf, rdf_format
from simgrag.kg.store import KGStore

if TYPE_CHECKING:
    from simgrag.kg.loader import LoadReport

__all__ = ["KGSource", "RDFFile", "open_source"]

SPARQL_PREFIX = "sparql+"
KUZU_PREFIX = "kuzu:"


@runtime_checkable
class KGSource(Protocol):
    """Where a KG is read from; ``description`` goes into the index manifest."""

    @property
    def description(self) -> str: ...

    def load(self, *, show_progress: bool | None = None) -> tuple[KGStore, LoadReport]:
        """Read the whole KG; raise inside :class:`~simgrag.errors.SimGRAGError` on failure."""
        ...

    def finished(self) -> None:
        """The index built from this source is in place: drop anything kept for resuming."""
        ...


@dataclass(frozen=True)
class RDFFile:
    """An RDF file read with non-default :class:`~simgrag.kg.rdf.RDFOptions`."""

    path: Path
    format: str | None = None
    options: RDFOptions = field(default_factory=RDFOptions)

    @property
    def description(self) -> str:
        return str(self.path)

    def load(self, *, show_progress: bool | None = None) -> tuple[KGStore, LoadReport]:
        return load_rdf(self.path, self.format, options=self.options, show_progress=show_progress)

    def finished(self) -> None:
        return None


def open_source(
    spec: str | Path,
    *,
    format: str | None = None,
    rdf: RDFOptions | None = None,
    sparql: Mapping[str, Any] | None = None,
    graphdb: Mapping[str, Any] | None = None,
) -> KGSource | Path:
    """The source ``spec`` names (see the module docstring); a plain KG file stays a :class:`Path`.

    ``sparql``/``graphdb`` are keyword options of :class:`~simgrag.kg.sparql.SparqlSource` /
    :class:`~simgrag.kg.graphdb.KuzuSource`; ``rdf`` applies to RDF files and SPARQL endpoints.
    """
    text = str(spec)
    if text.startswith(SPARQL_PREFIX):
        from simgrag.kg.sparql import SparqlSource

        endpoint = text.removeprefix(SPARQL_PREFIX)
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"{text!r}: a SPARQL source is sparql+http://… or sparql+https://…")
        return SparqlSource(endpoint, rdf=rdf or RDFOptions(), **dict(sparql or {}))
    if text.startswith(KUZU_PREFIX):
        from simgrag.kg.graphdb import KuzuSource

        return KuzuSource(Path(text.removeprefix(KUZU_PREFIX)).expanduser(), **dict(graphdb or {}))
    if sparql:
        raise ConfigError(f"SPARQL options were given but {text!r} is not a sparql+http(s):// endpoint")
    if graphdb:
        raise ConfigError(f"graph database options were given but {text!r} is not a kuzu: database")
    path = Path(text)
    if rdf is not None and rdf_format(path, format) is not None:
        return RDFFile(path, format, rdf)
    return path
