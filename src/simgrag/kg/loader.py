"""Load a KG file into a :class:`~simgrag.kg.store.KGStore`, with a :class:`LoadReport`.

Names are interned into ``name → id`` dicts while streaming, ids go into ``array('i')`` buffers
(4 bytes per id instead of a Python tuple per triple), and the store deduplicates and builds the
CSR adjacency at the end. For N-Triples, entities are kept apart by term (IRI, blank node,
literal value) and named at the end: an ``rdfs:label`` (untagged or English preferred) names its
subject, otherwise the readable IRI name; when two terms would share a name, the later one gets
its full IRI (or a ``(n)`` suffix). Entities that appear only in ``rdf:type``/``rdfs:label``
statements are left out (they have no triple); this is logged.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import EmptyKGError, KGError
from simgrag.kg._ids import drop_unlinked, id_array, unique_names
from simgrag.kg.iris import TermIRIs
from simgrag.kg.ntriples import term_fallback, term_name
from simgrag.kg.readers import (
    LABEL,
    TRIPLE,
    TYPE,
    CsvColumns,
    Fact,
    Problems,
    Tally,
    detect_format,
    iter_facts,
    read_error,
)
from simgrag.kg.store import KGStore
from simgrag.progress import progress_on

__all__ = ["LoadReport", "load_kg"]

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_kg` read, kept, skipped and how long it took."""

    path: str
    format: str
    lines_read: int
    triples_read: int
    duplicates_removed: int
    skipped_lines: int
    skipped_reasons: dict[str, int]
    examples: list[str]
    comment_or_blank_lines: int
    entities: int
    relations: int
    types: int
    seconds: float = field(compare=False)
    comment_lines: int = 0
    skipped_by_reason: list[str] = field(default_factory=list)  # "N× reason (lines a–b)", most frequent first

    @property
    def blank_lines(self) -> int:
        return self.comment_or_blank_lines - self.comment_lines

    def summary(self) -> str:
        text = (
            f"{self.path} ({self.format}): {self.lines_read:,} lines ({self.comment_lines:,} comment, "
            f"{self.blank_lines:,} blank), {self.triples_read:,} triples read, "
            f"{self.duplicates_removed:,} duplicates removed → {self.entities:,} entities, "
            f"{self.relations:,} relations, {self.types:,} types in {self.seconds:.2f}s"
        )
        if not self.skipped_lines:
            return text
        return text + f"; {self.skipped_lines:,} bad lines skipped: " + "; ".join(self.skipped_by_reason[:5]) + (
            "; …" if len(self.skipped_by_reason) > 5 else "")


class _Builder:
    """Interns names and collects ids while facts stream in."""

    def __init__(self) -> None:
        self.entities: dict[str, int] = {}
        self.relations: dict[str, int] = {}
        self.types: dict[str, int] = {}
        self.heads, self.rels, self.tails = array("i"), array("i"), array("i")
        self.type_pairs = array("i")
        self.labels: dict[int, tuple[int, str]] = {}

    def consume(self, facts: Iterable[Fact]) -> None:
        ent, rel, types = self.entities, self.relations, self.types
        add_h, add_r, add_t = self.heads.append, self.rels.append, self.tails.append
        for kind, a, b, c in facts:
            if kind == TRIPLE:
                add_h(ent.setdefault(a, len(ent)))
                add_r(rel.setdefault(b, len(rel)))
                add_t(ent.setdefault(c, len(ent)))
            elif kind == TYPE:
                self.type_pairs.extend((ent.setdefault(a, len(ent)), types.setdefault(b, len(types))))
            elif kind == LABEL:
                self._add_label(ent.setdefault(a, len(ent)), b, c)

    def _add_label(self, entity: int, label: str, lang: str) -> None:
        rank = 0 if lang == "" or lang.lower().startswith("en") else 1
        old = self.labels.get(entity)
        if old is None or rank < old[0]:
            self.labels[entity] = (rank, label)

    def build(self, ntriples: bool) -> KGStore:
        keys = list(self.entities)
        heads, tails, pairs, used = drop_unlinked(
            id_array(self.heads), id_array(self.tails), id_array(self.type_pairs).reshape(-1, 2), len(keys),
            "entities have types or labels",
        )
        if ntriples:
            entities = _entity_names(keys, self.labels, used)
            relations = unique_names([term_name(k) for k in self.relations], [term_fallback(k) for k in self.relations])
        else:
            entities = [k for k, u in zip(keys, used.tolist(), strict=True) if u]
            relations = list(self.relations)
        store = KGStore.from_ids(
            entities, relations, heads, id_array(self.rels), tails,
            entity_types=list(self.types) if len(pairs) else None,
            type_pairs=pairs if len(pairs) else None,
        )
        if ntriples:  # evidence links each node and edge to its IRI
            kept = [k for k, u in zip(keys, used.tolist(), strict=True) if u]
            store.iris = TermIRIs.from_lists([k[1:] if k.startswith("<") else "" for k in kept],
                                             [k[1:] for k in self.relations])
        return store


def _entity_names(keys: list[str], labels: dict[int, tuple[int, str]], used: np.ndarray) -> list[str]:
    kept = [i for i, u in enumerate(used.tolist()) if u]
    preferred = [labels[i][1] if i in labels else term_name(keys[i]) for i in kept]
    return unique_names(preferred, [term_fallback(keys[i]) for i in kept])


@contextmanager
def _progress(path: Path, show: bool | None) -> Iterator[tqdm | None]:
    size = path.stat().st_size if path.is_file() else 0
    if not progress_on(show):
        yield None
        return
    with tqdm(total=size, unit="B", unit_scale=True, desc=f"Reading {path.name}") as bar:
        yield bar


def load_kg(
    path: str | Path,
    *,
    format: str | None = None,
    skip_bad_lines: bool = False,
    csv_columns: CsvColumns | Mapping[str, str] | None = None,
    show_progress: bool | None = None,
) -> tuple[KGStore, LoadReport]:
    """Read a KG file (``pipe``, ``tsv``, ``csv``, ``ntriples``, or RDF: see :mod:`simgrag.kg.rdf`) into a store.

    ``format`` overrides detection from the extension (``.nt``, ``.csv``, ``.tsv``; ``.txt`` and
    others are sniffed). Strict by default: any malformed line raises :class:`KGFormatError` listing
    ``file:line: reason`` for the first 20; with ``skip_bad_lines=True`` they are skipped, counted in
    the report and logged as a warning. No triple at all raises :class:`EmptyKGError`. A progress
    bar (bytes read) is shown at INFO level (:func:`simgrag.progress.show_progress`) unless ``show_progress=False``.
    """
    path = Path(path)
    try:
        from simgrag.kg.rdf import load_rdf, rdf_format  # Turtle, N-Quads, TriG, RDF/XML, JSON-LD, *.gz

        if rdf_format(path, format) is not None:
            return load_rdf(path, format, show_progress=show_progress)
        return _load(path, format, skip_bad_lines, csv_columns, show_progress)
    except OSError as exc:
        raise read_error(path, exc) from exc
    except MemoryError as exc:
        raise KGError(f"Not enough memory to load {path}; load it on a larger machine or split it") from exc


def _load(
    path: Path,
    format: str | None,
    skip_bad_lines: bool,
    csv_columns: CsvColumns | Mapping[str, str] | None,
    show_progress: bool | None,
) -> tuple[KGStore, LoadReport]:
    start = time.perf_counter()
    fmt = detect_format(path, format)
    problems, tally, builder = Problems(str(path)), Tally(), _Builder()
    with _progress(path, show_progress) as bar:
        on_progress = bar.update if bar is not None else None
        facts = iter_facts(path, fmt, problems, tally, csv_columns=csv_columns, on_progress=on_progress)
        builder.consume(facts)
    if problems.count and not skip_bad_lines:
        raise problems.error()
    if not builder.heads:
        raise EmptyKGError(
            f"{path}: no triples found in {tally.lines:,} lines ({tally.comment_or_blank:,} blank or "
            f"comment, {problems.count:,} malformed). Is this the right file, and is {fmt!r} its format?"
        )
    store = builder.build(ntriples=fmt == "ntriples")
    if problems.count:
        logger.warning("%s: skipped %d malformed line(s): %s", path, problems.count, "; ".join(problems.by_reason()))
    report = LoadReport(
        path=str(path), format=fmt, lines_read=tally.lines, triples_read=len(builder.heads),
        duplicates_removed=store.duplicates_removed, skipped_lines=problems.count,
        skipped_reasons=dict(problems.reasons), examples=problems.examples(),
        comment_or_blank_lines=tally.comment_or_blank, entities=store.num_entities,
        relations=store.num_relations, types=store.num_types, seconds=time.perf_counter() - start,
        comment_lines=tally.comments, skipped_by_reason=problems.by_reason(),
    )
    logger.info("Loaded %s", report.summary())
    return store, report
