"""Embedders: texts to float32 vectors behind one :class:`Embedder` protocol.

Concrete adapters (sentence-transformers, Ollama, OpenAI-compatible) are imported lazily by
:func:`resolve_embedder`, so importing :mod:`simgrag.embed` does not import torch.
"""

from __future__ import annotations

from simgrag.embed.base import BulkEncoder, Embedder, encode_bulk
from simgrag.embed.batched import BatchedEmbedder, QueryCache
from simgrag.embed.registry import BASE_URL_ENV, EMBEDDERS, list_embedders, resolve_embedder

__all__ = [
    "BASE_URL_ENV",
    "EMBEDDERS",
    "BatchedEmbedder",
    "BulkEncoder",
    "Embedder",
    "QueryCache",
    "encode_bulk",
    "list_embedders",
    "resolve_embedder",
]
