"""The vector-index registry: names for the CLI and config (``--index exact|faiss-hnsw|faiss-ivfpq|milvus``).

>>> index = make_index("exact", dim=384)
>>> index.kind
'exact'

Every implementation writes ``index.json`` in ``save()``; :func:`load_index` reads it back and
dispatches on ``kind``. Implementations are imported lazily (pymilvus is an optional extra).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError, IndexDirError
from simgrag.index.base import VectorIndex
from simgrag.index.manifest import read_manifest

__all__ = [
    "EXACT_MAX_VECTORS",
    "IndexKind",
    "choose_default_kind",
    "list_index_kinds",
    "load_index",
    "make_index",
]

# Below this many vectors brute force is fast enough (and exact); above it, HNSW.
EXACT_MAX_VECTORS = 20_000


@dataclass(frozen=True)
class IndexKind:
    """One registry entry: ``target`` is ``module:Class``; ``aliases`` also resolve to ``name``."""

    name: str
    target: str
    description: str
    aliases: tuple[str, ...] = ()

    def load_class(self) -> Any:
        module_name, class_name = self.target.split(":")
        return getattr(importlib.import_module(module_name), class_name)


_KINDS: dict[str, IndexKind] = {
    kind.name: kind
    for kind in (
        IndexKind("exact", "simgrag.index.exact:ExactIndex", "numpy brute force; exact, for small indexes"),
        IndexKind(
            "faiss-hnsw",
            "simgrag.index.faiss_hnsw:FaissHNSWIndex",
            "FAISS HNSW graph (M, ef_construction, ef_search); approximate, fast on large indexes",
            aliases=("faiss", "hnsw"),
        ),
        IndexKind(
            "faiss-ivfpq",
            "simgrag.index.faiss_ivfpq:FaissIVFPQIndex",
            "FAISS IVF-PQ codes (nlist, m, nbits, nprobe) re-ranked exactly from memory-mapped float vectors; "
            "compressed, for 10M+ vectors",
            aliases=("ivfpq", "ivf-pq"),
        ),
        IndexKind(
            "milvus",
            "simgrag.index.milvus:MilvusIndex",
            "Milvus Lite (uri=path.db) or a Milvus server (uri=http://host:19530); needs simgrag[milvus]",
        ),
    )
}


def list_index_kinds() -> list[IndexKind]:
    """The registered kinds, for ``simgrag ls``."""
    return list(_KINDS.values())


def _resolve(kind: str) -> IndexKind:
    key = kind.strip().lower()
    for entry in _KINDS.values():
        if key == entry.name or key in entry.aliases:
            return entry
    valid = ", ".join(entry.name for entry in _KINDS.values())
    raise ConfigError(f"Unknown index kind {kind!r}. Valid kinds: {valid}.")


def make_index(kind: str, dim: int, **params: Any) -> VectorIndex:
    """A new, empty index of ``kind`` for ``dim``-d vectors; ``params`` go to its constructor."""
    entry = _resolve(kind)
    cls = entry.load_class()
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
        entry = _resolve(manifest.kind)
    except ConfigError as exc:
        raise IndexDirError(f"{directory}/index.json names an unknown index kind: {exc}") from exc
    index: VectorIndex = entry.load_class().load(directory, **overrides)
    return index


def choose_default_kind(n: int) -> str:
    """``"exact"`` below :data:`EXACT_MAX_VECTORS` vectors, else ``"faiss-hnsw"``."""
    return "exact" if n < EXACT_MAX_VECTORS else "faiss-hnsw"
