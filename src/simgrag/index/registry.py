"""The vector-index registry: names for the CLI and config (``--index-kind exact|faiss-hnsw|faiss-ivfpq|milvus``).

>>> index = make_index("exact", dim=384)
>>> index.kind
'exact'

Every implementation writes ``index.json`` in ``save()``; :func:`load_index` reads it back and
dispatches on ``kind``. Implementations are imported lazily (pymilvus is an optional extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError, IndexDirError
from simgrag.index.base import VectorIndex
from simgrag.index.manifest import read_manifest
from simgrag.registry import Entry, Registry

__all__ = [
    "EXACT_MAX_VECTORS",
    "INDEXES",
    "choose_default_kind",
    "default_index_params",
    "list_index_kinds",
    "load_index",
    "make_index",
]

# Below this many vectors brute force is fast enough (and exact); above it, HNSW.
EXACT_MAX_VECTORS = 20_000
# Up to this many vectors HNSW gets the faster settings below (BENCHMARKS.md §10): on MetaQA's 42,718 names
# recall@16 0.990 (vs 0.998 with the class defaults, 200 / 256) at half the build and query time, the same
# MetaQA answers; on 1.1M static name vectors they lose too much (recall@16 0.81 vs 0.91). Their rows are float16
# (BENCHMARKS.md §17: on MetaQA the graph builds in two thirds of the time, recall@16 within 0.002).
HNSW_FAST_MAX_VECTORS = 100_000
HNSW_FAST_PARAMS: dict[str, Any] = {"ef_construction": 100, "ef_search": 128, "storage": "float16"}
# From this many vectors an IVF-PQ index gets 4-bit fast-scan codes (BENCHMARKS.md §13): on 2M and 10M static
# name vectors the same recall at a sixth of the scan time (10M: vector p50 70-78 vs 131-162 ms, planted Hits@1
# unchanged); smaller indexes were not measured with them and keep the 8-bit codes.
IVFPQ_FAST_SCAN_MIN_VECTORS = 2_000_000


INDEXES = Registry("index kind", "--index-kind", "Vector indexes", [
    Entry("exact", "simgrag.index.exact:ExactIndex", "exact", "numpy brute force; exact, for small indexes"),
    Entry("faiss-hnsw", "simgrag.index.faiss_hnsw:FaissHNSWIndex", "faiss-hnsw",
          "FAISS HNSW graph (M, ef_construction, ef_search); approximate, fast on large indexes",
          aliases=("faiss", "hnsw")),
    Entry("faiss-ivfpq", "simgrag.index.faiss_ivfpq:FaissIVFPQIndex", "faiss-ivfpq",
          "FAISS IVF-PQ codes (nlist, m, nbits, nprobe) re-ranked exactly from memory-mapped float vectors; "
          "compressed, for 10M+ vectors", aliases=("ivfpq", "ivf-pq")),
    Entry("milvus", "simgrag.index.milvus:MilvusIndex", "milvus",
          "Milvus Lite (uri=path.db) or a Milvus server (uri=http://host:19530)", extra="milvus",
          requires=("pymilvus",)),
])


def list_index_kinds() -> list[Entry]:
    """The registered kinds, for ``simgrag ls``."""
    return INDEXES.entries()


def make_index(kind: str, dim: int, **params: Any) -> VectorIndex:
    """A new, empty index of ``kind`` for ``dim``-d vectors; ``params`` go to its constructor."""
    entry = INDEXES.get(kind)
    cls = entry.load()
    try:
        index: VectorIndex = cls(dim=dim, **params)
    except TypeError as exc:
        raise ConfigError(f"Bad parameters for the {entry.name!r} index: {exc}") from exc
    return index


def load_index(directory: str | Path, **overrides: Any) -> VectorIndex:
    """Open the index saved in ``directory`` (the kind comes from its ``index.json``)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    try:
        entry = INDEXES.get(manifest.kind)
    except ConfigError as exc:
        raise IndexDirError(f"{directory}/index.json names an unknown index kind: {exc}") from exc
    index: VectorIndex = entry.load().load(directory, **overrides)
    return index


def default_index_params(kind: str, n: int) -> dict[str, Any]:
    """Constructor parameters an index of ``kind`` for ``n`` vectors gets unless given: HNSW's faster
    settings up to :data:`HNSW_FAST_MAX_VECTORS`, IVF-PQ's fast-scan codes from
    :data:`IVFPQ_FAST_SCAN_MIN_VECTORS`, else the class defaults."""
    name = INDEXES.get(kind).name
    if name == "faiss-hnsw" and n <= HNSW_FAST_MAX_VECTORS:
        return dict(HNSW_FAST_PARAMS)
    if name == "faiss-ivfpq" and n >= IVFPQ_FAST_SCAN_MIN_VECTORS:
        return {"fast_scan": True}
    return {}


def choose_default_kind(n: int) -> str:
    """``"exact"`` below :data:`EXACT_MAX_VECTORS` vectors, else ``"faiss-hnsw"``."""
    return "exact" if n < EXACT_MAX_VECTORS else "faiss-hnsw"
