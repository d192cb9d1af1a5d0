"""Vector indexes: nearest neighbours by plain L2 distance behind one :class:`VectorIndex` protocol.

``exact`` (numpy), ``faiss-hnsw`` and ``faiss-ivfpq`` (compressed, for 10M+ vectors) are always
available; ``milvus`` (Milvus Lite or a server) needs the ``simgrag[milvus]`` extra and is imported only when used.
"""

from __future__ import annotations

from simgrag.index.base import VectorIndex
from simgrag.index.exact import ExactIndex
from simgrag.index.faiss_hnsw import FaissHNSWIndex
from simgrag.index.faiss_ivfpq import FaissIVFPQIndex
from simgrag.index.manifest import IndexManifest, read_manifest
from simgrag.index.registry import (
    EXACT_MAX_VECTORS,
    INDEXES,
    choose_default_kind,
    list_index_kinds,
    load_index,
    make_index,
)

__all__ = [
    "EXACT_MAX_VECTORS",
    "INDEXES",
    "ExactIndex",
    "FaissHNSWIndex",
    "FaissIVFPQIndex",
    "IndexManifest",
    "VectorIndex",
    "choose_default_kind",
    "list_index_kinds",
    "load_index",
    "make_index",
    "read_manifest",
]
