"""The facade: :func:`generate_dbpedia_like` writes a DBpedia-shaped KG file, streaming.

Memory is the names blob (~20 bytes per entity) plus one chunk of edges (65,536 entities, about
280,000 edges) at a time: a 10M-entity KG needs a few hundred MB, whatever the output size.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import ConfigError, KGError
from simgrag.eval.synthetic_dbpedia.edges import EdgeChunk, EdgeModel
from simgrag.eval.synthetic_dbpedia.layout import Layout, plan_layout
from simgrag.eval.synthetic_dbpedia.names import CHUNK, NameBlob, build_names
from simgrag.eval.synthetic_dbpedia.planted import PlantedQuery, plant_patterns
from simgrag.eval.synthetic_dbpedia.schema import Schema, load_schema
from simgrag.eval.synthetic_dbpedia.writer import ChunkWriter, output_format
from simgrag.fileio import atomic_path
from simgrag.kg.names import NameTable
from simgrag.kg.store import KGStore
from simgrag.progress import progress_on

__all__ = ["FACTKG_SHAPE", "SynthReport", "SyntheticKG", "generate_dbpedia_like", "report_dict"]

logger = logging.getLogger(__name__)

#: DBpedia as used by FactKG (SimGRAG paper, Table 8)
FACTKG_SHAPE = {"entities": 9_912_183, "edges": 42_879_918, "types": 467, "relations": 522}


@dataclass(frozen=True)
class SynthReport:
    """What :func:`generate_dbpedia_like` wrote."""

    path: str
    format: str
    seed: int
    entities: int
    types: int
    relations: int
    edges: int
    literal_edges: int
    type_statements: int
    planted_edges: int
    queries: int
    max_out_degree: int
    seconds: float = field(compare=False)
    queries_path: str | None = None

    @property
    def mean_out_degree(self) -> float:
        return self.edges / self.entities

    def summary(self) -> str:
        return (f"{self.path} ({self.format}): {self.entities:,} entities, {self.types} types, "
                f"{self.relations} relations, {self.edges:,} edges ({self.literal_edges:,} to literals, "
                f"{self.planted_edges:,} planted; mean out-degree {self.mean_out_degree:.2f}, max "
                f"{self.max_out_degree:,}), {self.type_statements:,} type statements, {self.queries:,} "
                f"queries in {self.seconds:.1f}s")


class SyntheticKG:
    """A planned synthetic KG: ontology, class layout, names and the edge model, before any output.

    The same seed gives the same KG, chunk by chunk (:meth:`edge_chunks`), whatever is written.
    """

    def __init__(self, entities: int, *, seed: int = 0, types: int = 467, relations: int = 522,
                 mean_degree: float = 4.33, show_progress: bool | None = None) -> None:
        if entities < 1:
            raise ConfigError(f"entities must be positive; got {entities}")
        self.seed = seed
        self.show_progress = progress_on(show_progress)
        self.schema: Schema = load_schema(types, relations)
        self.layout: Layout = plan_layout(self.schema, entities, seed)
        self.names: NameBlob = build_names(self.schema, self.layout, seed, show_progress=self.show_progress)
        self.model = EdgeModel(self.schema, self.layout, seed, mean_degree=mean_degree)

    @property
    def num_entities(self) -> int:
        return self.layout.num_entities

    def edge_chunks(self) -> Iterator[tuple[int, int, EdgeChunk]]:
        """``(first id, last id + 1, edges)`` of every chunk of entities."""
        n = self.num_entities
        for k, chunk in enumerate(self.model.chunks()):
            yield k * CHUNK, min(n, (k + 1) * CHUNK), chunk

    def coverage_edges(self, used: np.ndarray) -> EdgeChunk:
        """One edge for each relation no chunk used (small KGs), so every relation is in the KG."""
        missing = np.flatnonzero(used == 0).astype(np.int32)
        rng = np.random.default_rng([self.seed, 6])
        heads = np.array([rng.integers(*self.layout.subtree(self.schema.relations[r].domain)) for r in missing],
                         dtype=np.int64)
        return self.model.edges(heads, missing, rng)

    def plant(self, count: int) -> tuple[EdgeChunk, list[PlantedQuery]]:
        return plant_patterns(self.model, self.names, count, self.seed)

    def to_store(self, planted: EdgeChunk | None = None) -> KGStore:
        """The KG (and ``planted`` edges) as a :class:`KGStore`, straight from the arrays: no file, no parsing.

        The same KG as ``load_kg`` of a written file gives: literal values become entities named by
        their value, entities get their class and its ancestors as types.
        """
        chunks = [chunk for _, _, chunk in self.edge_chunks()]
        used = np.bincount(np.concatenate([c.rels for c in chunks]), minlength=len(self.schema.relations))
        chunks.append(self.coverage_edges(used))
        if planted is not None:
            chunks.append(planted)
        heads = np.concatenate([c.heads for c in chunks])
        rels = np.concatenate([c.rels for c in chunks])
        tails = np.concatenate([c.tails for c in chunks])
        literal_parts = [np.array(c.literals, dtype=bytes) for c in chunks if c.literals]
        values = np.concatenate(literal_parts) if literal_parts else np.zeros(0, dtype="S1")
        unique, inverse = np.unique(values, return_inverse=True)
        tails[tails < 0] = self.num_entities + inverse
        blob = self.names.blob + b"".join(unique.tolist())
        lengths = np.fromiter(map(len, unique.tolist()), dtype=np.int64, count=len(unique))
        offsets = np.concatenate([self.names.offsets, self.names.offsets[-1] + np.cumsum(lengths)])
        entities = NameTable(np.frombuffer(blob, dtype=np.uint8), offsets)
        return KGStore.from_ids(entities, [r.name for r in self.schema.relations], heads, rels, tails,
                                entity_types=[c.name for c in self.schema.classes], type_pairs=self._type_pairs())

    def _type_pairs(self) -> np.ndarray:
        lay, parts = self.layout, []
        for c in range(self.schema.num_classes):
            own = np.arange(lay.own_start[c], lay.own_start[c] + lay.own_count[c], dtype=np.int32)
            for a in self.schema.ancestors(c):
                parts.append(np.stack([own, np.full(len(own), a, dtype=np.int32)], axis=1))
        return np.concatenate(parts)


class _Tally:
    def __init__(self, n_relations: int) -> None:
        self.used = np.zeros(n_relations, dtype=np.int64)
        self.edges = self.literals = self.types = self.max_out = 0

    def add(self, chunk: EdgeChunk, start: int, end: int) -> None:
        self.used += np.bincount(chunk.rels, minlength=len(self.used))
        self.edges += len(chunk)
        self.literals += int((chunk.tails < 0).sum())
        if len(chunk) and end > start:
            self.max_out = max(self.max_out, int(np.bincount(chunk.heads - start, minlength=end - start).max()))


def _write_kg(kg: SyntheticKG, writer: ChunkWriter, fh: BinaryIO, planted: EdgeChunk | None) -> _Tally:
    tally = _Tally(len(kg.schema.relations))
    fh.write(writer.header())
    with tqdm(total=kg.num_entities, desc="writing KG", unit="ent", disable=not kg.show_progress) as bar:
        for start, end, chunk in kg.edge_chunks():
            text, n_types = writer.types(start, end)
            fh.write(text)
            fh.write(writer.edges(chunk))
            tally.types += n_types
            tally.add(chunk, start, end)
            bar.update(end - start)
    extra = kg.coverage_edges(tally.used)
    if len(extra):
        logger.info("%d relations unused by chance got one edge each", len(extra))
        fh.write(writer.edges(extra))
        tally.add(extra, 0, 0)
    if planted is not None and len(planted):
        fh.write(writer.edges(planted))
        tally.add(planted, 0, 0)
    return tally


def _write_queries(path: Path, queries: list[PlantedQuery]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q.to_json(), ensure_ascii=False) + "\n")


def generate_dbpedia_like(
    path: str | Path,
    *,
    entities: int,
    seed: int = 0,
    format: str = "nt",
    types: int = 467,
    relations: int = 522,
    mean_degree: float = 4.33,
    planted: int = 0,
    queries_out: str | Path | None = None,
    show_progress: bool | None = None,
) -> SynthReport:
    """Write a DBpedia-shaped KG of ``entities`` entities to ``path`` (``nt``, ``tsv`` or ``csv``).

    Defaults give FactKG's DBpedia shape (467 types, 522 relations, 4.33 edges per entity). With
    ``planted > 0``, that many known subgraphs are inserted and their queries written as JSONL to
    ``queries_out`` (default: ``<path>.queries.jsonl``). The file appears only when complete.
    """
    start = time.perf_counter()
    fmt = output_format(format)
    out = Path(path)
    kg = SyntheticKG(entities, seed=seed, types=types, relations=relations, mean_degree=mean_degree,
                     show_progress=show_progress)
    planted_edges, queries = kg.plant(planted) if planted > 0 else (None, [])
    writer = ChunkWriter(fmt, kg.schema, kg.layout, kg.names)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp, tmp.open("wb", buffering=1 << 20) as fh:
            tally = _write_kg(kg, writer, fh, planted_edges)
        qpath = None
        if queries:
            qpath = Path(queries_out) if queries_out is not None else out.with_name(out.name + ".queries.jsonl")
            _write_queries(qpath, queries)
    except OSError as exc:
        raise KGError(f"Cannot write the synthetic KG to {out}: {exc}") from exc
    report = SynthReport(
        path=str(out), format=fmt, seed=seed, entities=kg.num_entities, types=kg.schema.num_classes,
        relations=len(kg.schema.relations), edges=tally.edges, literal_edges=tally.literals,
        type_statements=tally.types, planted_edges=len(planted_edges) if planted_edges is not None else 0,
        queries=len(queries), max_out_degree=tally.max_out, seconds=time.perf_counter() - start,
        queries_path=str(qpath) if qpath else None,
    )
    logger.info("wrote %s", report.summary())
    return report


def report_dict(report: SynthReport) -> dict[str, Any]:
    """The report as JSON-ready data (for the CLI)."""
    data = {k: getattr(report, k) for k in report.__dataclass_fields__}
    data["mean_out_degree"] = round(report.mean_out_degree, 4)
    return data
