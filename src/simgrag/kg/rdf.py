"""RDF files → a KG store: Turtle, N-Quads, TriG, RDF/XML, JSON-LD, N3 (and gzip of each, N-Triples too).

Files are streamed through pyoxigraph's parser (Rust; ``pip install 'simgrag[rdf]'``); every
statement goes to an :class:`RDFCollector`, which the SPARQL source (:mod:`simgrag.kg.sparql`) feeds
too. What becomes of a statement ``(s, p, o)`` (the graph of a quad is ignored):

- ``p`` is a *label predicate* (``rdfs:label``, ``skos:prefLabel``, ``schema:name`` by default) and
  ``o`` a literal: ``o`` may name ``s`` (the entity, the relation or the class ``s``). The best label
  wins: first by language (``RDFOptions.languages``, ``("en", "")``: English, then untagged, then
  any), then by the order of the label predicates. Without a label, the IRI's local name names it
  (``…/Douglas_Adams`` → ``Douglas Adams``).
- ``p`` is ``rdf:type``: ``o`` is a type of ``s`` (typed ``UNKNOWN person 1`` nodes use them).
- otherwise a triple ``(s, p, o)``; a literal object becomes an entity named by its value, or the
  statement is skipped (``literals="skip"``). Blank nodes are entities named ``_:b1``, ``_:b2`` … in
  order of appearance (or by their label). RDF 1.2 triple terms (RDF-star) are skipped and counted.

Entities and relations keep their IRIs (:class:`~simgrag.kg.iris.TermIRIs`); two terms with the same
readable name keep apart (the later one is named by its full IRI). A syntax error raises
:class:`~simgrag.errors.KGFormatError` with ``file:line`` (for RDF/XML, whose parser gives no
position, the line is found by parsing again line by line).
"""

from __future__ import annotations

import gzip
import io
import logging
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, cast

from tqdm.auto import tqdm

from simgrag.errors import ConfigError, EmptyKGError, KGError, KGFormatError
from simgrag.kg._ids import drop_unlinked, id_array, unique_names
from simgrag.kg.iris import TermIRIs
from simgrag.kg.ntriples import RDF_TYPE, RDFS_LABEL, iri_label, term_fallback
from simgrag.kg.store import KGStore

if TYPE_CHECKING:
    from simgrag.kg.loader import LoadReport

__all__ = [
    "RDF_FORMATS",
    "SCHEMA_NAME",
    "SKOS_PREF_LABEL",
    "RDFCollector",
    "RDFOptions",
    "load_rdf",
    "rdf_format",
]

logger = logging.getLogger(__name__)

SKOS_PREF_LABEL = "http://www.w3.org/2004/02/skos/core#prefLabel"
SCHEMA_NAME = "http://schema.org/name"
_SCHEMA_NAME_HTTPS = "https://schema.org/name"
# format name → media type understood by pyoxigraph
RDF_FORMATS = {
    "turtle": "text/turtle", "nquads": "application/n-quads", "trig": "application/trig",
    "rdfxml": "application/rdf+xml", "jsonld": "application/ld+json", "n3": "text/n3",
    "ntriples": "application/n-triples",
}
_ALIASES = {"ttl": "turtle", "nq": "nquads", "n-quads": "nquads", "rdf": "rdfxml", "owl": "rdfxml",
            "rdf/xml": "rdfxml", "rdf-xml": "rdfxml", "json-ld": "jsonld", "nt": "ntriples",
            "n-triples": "ntriples"}
_EXTENSIONS = {".ttl": "turtle", ".nq": "nquads", ".trig": "trig", ".rdf": "rdfxml", ".owl": "rdfxml",
               ".xml": "rdfxml", ".jsonld": "jsonld", ".json-ld": "jsonld", ".n3": "n3", ".nt": "ntriples"}
_PROGRESS_MIN_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class RDFOptions:
    """How RDF statements become a KG (see the module docstring).

    ``languages``: label languages, best first (``"en"`` also takes ``en-GB``; ``""`` is an
    untagged label); a label in no listed language still beats the IRI's local name.
    ``label_predicates``: predicates whose literal objects name their subject, best first.
    ``literals``: ``"entities"`` (a literal object is a node named by its value) or ``"skip"``.
    ``base_iri``: resolves relative IRIs (default: the file's ``file://`` URI). ``lenient``: skip
    pyoxigraph's IRI and language-tag validation (faster, for dumps with slightly invalid IRIs).
    """

    languages: tuple[str, ...] = ("en", "")
    label_predicates: tuple[str, ...] = (RDFS_LABEL, SKOS_PREF_LABEL, SCHEMA_NAME, _SCHEMA_NAME_HTTPS)
    literals: Literal["entities", "skip"] = "entities"
    base_iri: str | None = None
    lenient: bool = False

    def __post_init__(self) -> None:
        if self.literals not in ("entities", "skip"):
            raise ConfigError(f"literals must be 'entities' or 'skip', got {self.literals!r}")

    def language_rank(self, language: str | None) -> int:
        lang = (language or "").lower()
        for rank, wanted in enumerate(self.languages):
            wanted = wanted.lower()
            if lang == wanted or (wanted and lang.startswith(wanted + "-")):
                return rank
        return len(self.languages)


def _pyoxigraph() -> Any:
    try:
        import pyoxigraph
    except ImportError as exc:
        raise ConfigError("Reading RDF needs pyoxigraph: pip install 'simgrag[rdf]'") from exc
    return pyoxigraph


def rdf_format(path: str | Path, format: str | None = None) -> str | None:
    """The RDF format to read ``path`` with, or ``None`` when another reader handles it.

    Plain ``.nt`` files keep the line-based N-Triples reader (it can skip bad lines); gzipped
    N-Triples (``.nt.gz``) and every other RDF syntax go through pyoxigraph.
    """
    path = Path(path)
    gz = path.suffix.lower() == ".gz"
    if format is not None:
        name = _ALIASES.get(format.lower(), format.lower())
        if name not in RDF_FORMATS or (name == "ntriples" and not gz):
            return None
        return name
    inner = Path(path.stem) if gz else path
    found = _EXTENSIONS.get(inner.suffix.lower())
    return None if found == "ntriples" and not gz else found


# ---------------------------------------------------------------------------------------- collector
class RDFCollector:
    """Turns RDF statements (pyoxigraph terms) into interned ids, labels and types, then a store."""

    def __init__(self, options: RDFOptions | None = None) -> None:
        self.options = options or RDFOptions()
        self.entities: dict[str, int] = {}  # term key ("<iri", "_:id", '"value') → id
        self.relations: dict[str, int] = {}  # predicate IRI → id
        self.types: dict[str, int] = {}  # class term key → id
        self.heads, self.rels, self.tails = array("i"), array("i"), array("i")
        self.type_pairs = array("i")
        self.labels: dict[str, tuple[int, int, str]] = {}  # term key → (language rank, predicate rank, text)
        self.statements = 0
        self.skipped: dict[str, int] = {}
        ox = _pyoxigraph()
        self._named, self._blank, self._literal = ox.NamedNode, ox.BlankNode, ox.Literal
        self._label_rank = {p: i for i, p in enumerate(self.options.label_predicates)}

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def add_all(self, statements: Iterable[Any], on_each: int = 0, callback: Callable[[], None] | None = None) -> None:
        """Add ``statements`` (anything with ``subject``/``predicate``/``object``: quads, triples);
        ``callback()`` every ``on_each`` statements (progress)."""
        named, blank, literal = self._named, self._blank, self._literal
        ent, rel, label_rank = self.entities, self.relations, self._label_rank
        add_h, add_r, add_t = self.heads.append, self.rels.append, self.tails.append
        keep_literals = self.options.literals == "entities"
        count = self.statements
        for st in statements:
            count += 1
            if callback is not None and count % on_each == 0:
                callback()
            s, o = st.subject, st.object
            p = st.predicate.value
            ts, to = type(s), type(o)
            if ts is named:
                sk = "<" + s.value
            elif ts is blank:
                sk = "_:" + s.value
            else:
                self._skip("triple term (RDF-star) as subject")
                continue
            if to is literal and p in label_rank:
                self._add_label(sk, o, label_rank[p])
                continue
            if p == RDF_TYPE and (to is named or to is blank):
                key = "<" + o.value if to is named else "_:" + o.value
                self.type_pairs.extend((ent.setdefault(sk, len(ent)), self.types.setdefault(key, len(self.types))))
                continue
            if to is named:
                ok = "<" + o.value
            elif to is literal:
                value = o.value.strip()
                if not keep_literals or not value:
                    self._skip("literal object (literals='skip')" if value else "empty literal")
                    continue
                ok = '"' + value
            elif to is blank:
                ok = "_:" + o.value
            else:
                self._skip("triple term (RDF-star) as object")
                continue
            add_h(ent.setdefault(sk, len(ent)))
            add_r(rel.setdefault(p, len(rel)))
            add_t(ent.setdefault(ok, len(ent)))
        self.statements = count

    def _add_label(self, key: str, lit: Any, predicate_rank: int) -> None:
        text = " ".join(lit.value.split())
        if not text:
            return
        rank = (self.options.language_rank(lit.language), predicate_rank)
        old = self.labels.get(key)
        if old is None or rank < old[:2]:
            self.labels[key] = (rank[0], rank[1], text)

    @property
    def triples(self) -> int:
        return len(self.heads)

    def _name(self, key: str) -> str:
        found = self.labels.get(key)
        if found is not None:
            return found[2]
        return iri_label(key[1:]) if key.startswith("<") else key[1:]

    def build(self) -> KGStore:
        """The store (names from labels, IRIs kept); raises EmptyKGError without a triple."""
        if not self.heads:
            raise EmptyKGError("no RDF triple found (only labels, types or skipped statements)")
        keys = list(self.entities)
        heads, tails, pairs, used = drop_unlinked(
            id_array(self.heads), id_array(self.tails), id_array(self.type_pairs).reshape(-1, 2), len(keys),
            "RDF terms have types",
        )
        if not used.all():
            keys = [k for k, u in zip(keys, used.tolist(), strict=True) if u]
        blanks = 0
        preferred: list[str] = []
        for key in keys:
            if key.startswith("_:") and key not in self.labels:
                blanks += 1
                preferred.append(f"_:b{blanks}")
            else:
                preferred.append(self._name(key))
        rel_keys = ["<" + p for p in self.relations]
        rel_names = [self._name(k) for k in rel_keys]
        type_keys = list(self.types)
        type_names = [self._name(k) for k in type_keys]
        store = KGStore.from_ids(
            unique_names(preferred, _fallbacks(keys, preferred)),
            unique_names(rel_names, _fallbacks(rel_keys, rel_names)), heads, id_array(self.rels), tails,
            entity_types=unique_names(type_names, _fallbacks(type_keys, type_names)) if len(pairs) else None,
            type_pairs=pairs if len(pairs) else None,
        )
        store.iris = TermIRIs.from_lists([k[1:] if k.startswith("<") else "" for k in keys], list(self.relations))
        return store


def _fallbacks(keys: list[str], preferred: list[str]) -> list[str]:
    """Clash names: the full IRI (or literal in quotes), ``name (_:id)`` for a blank node."""
    pairs = zip(keys, preferred, strict=True)
    return [f"{name} ({key})" if key.startswith("_:") else term_fallback(key) for key, name in pairs]


# ---------------------------------------------------------------------------------------- files
@contextmanager
def _open(path: Path) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """(stream to parse, raw file for progress) of ``path``, gunzipped when it ends in ``.gz``."""
    with path.open("rb") as raw:
        if path.suffix.lower() == ".gz":
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield cast(IO[bytes], unzipped), raw
        else:
            yield raw, raw


class _LineFeeder(io.RawIOBase):
    """Hands a stream to the parser one line per read, so the line of an error is known."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lineno = 0  # the line of the last bytes handed out
        self._line_start = True

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        line = self.stream.readline(len(buffer))
        if line:
            self.lineno += self._line_start
            self._line_start = line.endswith(b"\n")
        buffer[: len(line)] = line
        return len(line)


def _error_line(path: Path, media_type: str, options: RDFOptions, base_iri: str) -> int:
    """The line at which parsing ``path`` fails, found by feeding the parser line by line (0: unknown)."""
    ox = _pyoxigraph()
    with _open(path) as (stream, _raw):
        feeder = _LineFeeder(stream)
        try:
            for _ in ox.parse(feeder, ox.RdfFormat.from_media_type(media_type), base_iri=base_iri,
                              lenient=options.lenient):
                pass
        except SyntaxError:
            return feeder.lineno
    return 0


def _syntax_error(path: Path, exc: SyntaxError, media_type: str, options: RDFOptions, base_iri: str) -> KGFormatError:
    line = exc.lineno
    if line is None:
        try:
            line = _error_line(path, media_type, options, base_iri)
        except (OSError, SyntaxError, ValueError):
            line = 0
    reason = exc.msg or str(exc)
    where = f"{path}:{line}" if line else f"{path} (line unknown)"
    return KGFormatError(f"{where}: {reason}. RDF syntax errors cannot be skipped: fix the file.",
                         [(str(path), line or 0, reason)], bad_lines=1)


def read_rdf(path: Path, fmt: str, collector: RDFCollector, show_progress: bool | None = None) -> None:
    """Stream the statements of one RDF file into ``collector``."""
    ox = _pyoxigraph()
    options = collector.options
    media_type = RDF_FORMATS[fmt]
    base_iri = options.base_iri or path.resolve().as_uri()
    size = path.stat().st_size
    show = size > _PROGRESS_MIN_BYTES if show_progress is None else show_progress
    with _open(path) as (stream, raw), tqdm(total=size, unit="B", unit_scale=True, disable=not show,
                                            desc=f"Reading {path.name}") as bar:
        def progress() -> None:
            bar.update(raw.tell() - bar.n)

        try:
            quads = ox.parse(stream, ox.RdfFormat.from_media_type(media_type), base_iri=base_iri,
                             lenient=options.lenient)
            collector.add_all(quads, 65536, progress if show else None)
        except SyntaxError as exc:
            raise _syntax_error(path, exc, media_type, options, base_iri) from None
        except gzip.BadGzipFile as exc:
            raise KGError(f"{path}: not a valid gzip file ({exc})") from exc
        except ValueError as exc:  # pyoxigraph: unsupported format or option
            raise ConfigError(f"{path}: pyoxigraph cannot read it as {fmt}: {exc}") from exc
        progress()


def load_rdf(
    path: str | Path,
    format: str | None = None,
    *,
    options: RDFOptions | None = None,
    show_progress: bool | None = None,
) -> tuple[KGStore, LoadReport]:
    """Read an RDF file into a store (see the module docstring); ``format`` defaults to the extension."""
    from simgrag.kg.loader import LoadReport

    path = Path(path)
    fmt = rdf_format(path, format) or (_ALIASES.get(format.lower(), format.lower()) if format else None)
    if fmt not in RDF_FORMATS:
        raise ConfigError(f"{path}: cannot tell the RDF format from {format or path.suffix!r}; "
                          f"use one of {', '.join(RDF_FORMATS)}.")
    start = time.perf_counter()
    collector = RDFCollector(options)
    if not path.is_file():
        raise KGError(f"KG file not found: {path} (check the path)")
    read_rdf(path, fmt, collector, show_progress)
    try:
        store = collector.build()
    except EmptyKGError as exc:
        raise EmptyKGError(f"{path}: {exc}. Is {fmt!r} its format?") from exc
    if collector.skipped:
        logger.info("%s: statements not kept as triples: %s", path, collector.skipped)
    report = LoadReport(
        path=str(path), format=fmt, lines_read=collector.statements, triples_read=collector.triples,
        duplicates_removed=store.duplicates_removed, skipped_lines=0, skipped_reasons=dict(collector.skipped),
        examples=[], comment_or_blank_lines=0, entities=store.num_entities, relations=store.num_relations,
        types=store.num_types, seconds=time.perf_counter() - start,
    )
    logger.info("Loaded %s", report.summary())
    return store, report
