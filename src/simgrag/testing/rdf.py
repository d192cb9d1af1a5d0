"""Name triples → an RDF file whose loaded KG has exactly those names (tests and benchmarks).

Every entity and relation gets an IRI under ``base`` (the name, percent-encoded) and an
``rdfs:label`` with its name, so :func:`simgrag.kg.rdf.load_rdf` reads the file back into a store
with the same names and triples as the pipe file it came from — the same KG through another path::

    write_rdf(iter_triples("kb.txt"), "kb.ttl", "turtle")
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import quote

from simgrag.kg.ntriples import RDFS_LABEL
from simgrag.kg.rdf import RDF_FORMATS, _pyoxigraph
from simgrag.kg.store import Triple

__all__ = ["entity_iri", "relation_iri", "write_rdf"]

BASE = "http://example.org/kg/"


def entity_iri(name: str, base: str = BASE) -> str:
    return f"{base}entity/{quote(name, safe='')}"


def relation_iri(name: str, base: str = BASE) -> str:
    return f"{base}relation/{quote(name, safe='')}"


def _statements(triples: Iterable[Triple | tuple[str, str, str]], base: str) -> Iterator[object]:
    ox = _pyoxigraph()
    label = ox.NamedNode(RDFS_LABEL)
    named: dict[str, object] = {}

    def node(name: str, iri: str) -> Iterator[object]:
        found = named.get(iri)
        if found is None:
            found = named[iri] = ox.NamedNode(iri)
            yield ox.Triple(found, label, ox.Literal(name))

    for triple in triples:
        h, r, t = triple.as_tuple() if isinstance(triple, Triple) else triple
        h_iri, r_iri, t_iri = entity_iri(h, base), relation_iri(r, base), entity_iri(t, base)
        yield from node(h, h_iri)
        yield from node(r, r_iri)
        yield from node(t, t_iri)
        yield ox.Triple(named[h_iri], named[r_iri], named[t_iri])


def write_rdf(triples: Iterable[Triple | tuple[str, str, str]], path: str | Path, format: str = "ntriples",
              *, base: str = BASE) -> Path:
    """Write ``triples`` (names) with IRIs and labels as ``format`` (``ntriples``, ``turtle``, …)."""
    ox = _pyoxigraph()
    path = Path(path)
    fmt = ox.RdfFormat.from_media_type(RDF_FORMATS[format])
    prefixes = {"e": f"{base}entity/", "r": f"{base}relation/", "rdfs": RDFS_LABEL.rsplit("#", 1)[0] + "#"}
    with path.open("wb") as fh:
        ox.serialize(_statements(triples, base), fh, fmt,
                     prefixes=prefixes if format in ("turtle", "trig", "n3") else None)
    return path
