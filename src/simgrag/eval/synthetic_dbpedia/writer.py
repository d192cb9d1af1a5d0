"""Edge chunks → lines of N-Triples, TSV or CSV, as bytes, one chunk at a time.

- ``nt``: DBpedia-style IRIs (``http://dbpedia.org/resource/John_Smith``, ontology relations and
  classes), literals typed with XSD datatypes, and an ``rdf:type`` statement per entity for its
  class and every ancestor class (as DBpedia does). :func:`~simgrag.kg.load_kg` reads the types.
- ``tsv``: ``head<TAB>relation<TAB>tail`` with readable names; no types (TSV has no place for them).
- ``csv``: ``head,relation,tail,head_type,tail_type`` with the most specific class of each entity
  (empty for literals); :func:`~simgrag.kg.load_kg` reads the type columns.

Names never contain commas, quotes, tabs or underscores (``words.txt`` is checked), so no quoting
is needed and an IRI is the name with ``_`` for spaces.
"""

from __future__ import annotations

import numpy as np

from simgrag.errors import ConfigError
from simgrag.eval.synthetic_dbpedia.edges import EdgeChunk
from simgrag.eval.synthetic_dbpedia.layout import Layout
from simgrag.eval.synthetic_dbpedia.names import NameBlob
from simgrag.eval.synthetic_dbpedia.schema import Schema

__all__ = ["OUTPUT_FORMATS", "ChunkWriter"]

OUTPUT_FORMATS = ("nt", "tsv", "csv")
_ALIASES = {"ntriples": "nt", "n-triples": "nt", "tab": "tsv"}
RESOURCE = b"http://dbpedia.org/resource/"
ONTOLOGY = b"http://dbpedia.org/ontology/"
_RDF_TYPE = b"<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
_XSD = {"date": b"date", "year": b"gYear", "count": b"nonNegativeInteger", "number": b"integer",
        "decimal": b"double"}


def output_format(name: str) -> str:
    fmt = _ALIASES.get(name.lower(), name.lower())
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(f"Unknown output format {name!r}; use one of {', '.join(OUTPUT_FORMATS)}.")
    return fmt


class ChunkWriter:
    """Formats entity type statements and edge chunks for one output format."""

    def __init__(self, fmt: str, schema: Schema, layout: Layout, names: NameBlob) -> None:
        self.format = output_format(fmt)
        self.schema, self.layout, self.names = schema, layout, names
        rel_names = [r.name.encode() for r in schema.relations]
        class_names = [c.name.encode() for c in schema.classes]
        if self.format == "nt":
            self._blob = names.blob.replace(b" ", b"_")
            self._head = b"<" + RESOURCE
            self._ent_mid = [b"> <" + ONTOLOGY + r + b"> <" + RESOURCE for r in rel_names]
            self._lit_mid = [b"> <" + ONTOLOGY + r + b'> "' for r in rel_names]
            self._lit_end = [b'"^^<http://www.w3.org/2001/XMLSchema#' + _XSD[r.literal] + b"> .\n"
                             if r.literal else b"" for r in schema.relations]
            self._type_mid = [[b"> " + _RDF_TYPE + b" <" + ONTOLOGY + class_names[a] + b"> .\n"
                               for a in schema.ancestors(c)] for c in range(schema.num_classes)]
        else:
            sep = b"\t" if self.format == "tsv" else b","
            self._blob = names.blob
            self._sep = sep
            self._rel = [sep + r + sep for r in rel_names]
            self._class = [sep + c for c in class_names]

    def header(self) -> bytes:
        return b"head,relation,tail,head_type,tail_type\n" if self.format == "csv" else b""

    def types(self, start: int, end: int) -> tuple[bytes, int]:
        """``rdf:type`` statements of entities ``start:end`` (N-Triples only) and their number."""
        if self.format != "nt":
            return b"", 0
        ids = np.arange(start, end)
        cls = self.layout.class_of(ids).tolist()
        head = self._head
        mids = self._type_mid
        lines = [head + name + mid for name, c in zip(self.names.many(ids, self._blob), cls, strict=True)
                 for mid in mids[c]]
        return b"".join(lines), len(lines)

    def edges(self, chunk: EdgeChunk) -> bytes:
        """The lines of every edge of ``chunk``."""
        n_ent = int((chunk.tails >= 0).sum())
        heads = self.names.many(chunk.heads, self._blob)
        tails = self.names.many(chunk.tails[:n_ent], self._blob)
        rels = chunk.rels.tolist()
        literals = [v.encode() for v in chunk.literals]
        if self.format == "nt":
            return self._nt(heads, rels, tails, literals, n_ent)
        if self.format == "tsv":
            rel = self._rel
            lines = [h + rel[r] + t + b"\n" for h, r, t in zip(heads, rels, tails, strict=False)]
            lines += [h + rel[r] + v + b"\n" for h, r, v in zip(heads[n_ent:], rels[n_ent:], literals, strict=True)]
            return b"".join(lines)
        return self._csv(chunk, heads, rels, tails, literals, n_ent)

    def _nt(self, heads: list[bytes], rels: list[int], tails: list[bytes], literals: list[bytes],
            n_ent: int) -> bytes:
        head, mid, lmid, lend = self._head, self._ent_mid, self._lit_mid, self._lit_end
        lines = [head + h + mid[r] + t + b"> .\n" for h, r, t in zip(heads, rels, tails, strict=False)]
        lines += [head + h + lmid[r] + v + lend[r]
                  for h, r, v in zip(heads[n_ent:], rels[n_ent:], literals, strict=True)]
        return b"".join(lines)

    def _csv(self, chunk: EdgeChunk, heads: list[bytes], rels: list[int], tails: list[bytes],
             literals: list[bytes], n_ent: int) -> bytes:
        rel, cls, sep = self._rel, self._class, self._sep
        hc = self.layout.class_of(chunk.heads).tolist()
        tc = self.layout.class_of(chunk.tails[:n_ent]).tolist()
        lines = [h + rel[r] + t + cls[a] + cls[b] + b"\n"
                 for h, r, t, a, b in zip(heads, rels, tails, hc, tc, strict=False)]
        lines += [h + rel[r] + v + cls[a] + sep + b"\n"
                  for h, r, v, a in zip(heads[n_ent:], rels[n_ent:], literals, hc[n_ent:], strict=True)]
        return b"".join(lines)
