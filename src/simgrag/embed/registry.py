"""The embedder registry: names for the CLI and config (``--embedder minilm``, ``ollama:nomic-embed-text``).

=====================================  ======================================================
spec                                   embedder
=====================================  ======================================================
``minilm``                             bundled sentence-transformers/all-MiniLM-L6-v2 (offline)
``sentence-transformers:<name|path>``  a local sentence-transformers model (alias ``st:``)
``ollama:<model>``                     an Ollama server (``/api/embed``)
``openai:<model>``                     an OpenAI-compatible server (``/v1/embeddings``)
``hash`` / ``hash:<dim>``              :class:`~simgrag.embed.hashing.HashEmbedder`, no model
``static`` / ``static:<src>[:<dim>]``  static token embeddings (WordLlama in its wheel, or a dir)
=====================================  ======================================================

For ``ollama:`` and ``openai:`` the server comes from ``base_url=``, else ``$SIMGRAG_EMBED_BASE_URL``,
else the provider default.
"""

from __future__ import annotations

import os
from typing import Any

from simgrag.embed.base import Embedder
from simgrag.errors import ConfigError
from simgrag.registry import Entry, Registry

__all__ = ["BASE_URL_ENV", "EMBEDDERS", "list_embedders", "resolve_embedder"]

BASE_URL_ENV = "SIMGRAG_EMBED_BASE_URL"


def _sentence_transformers(arg: str, **kwargs: Any) -> Embedder:
    from simgrag.embed.sentence_transformers import DEFAULT_MODEL, SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(arg or DEFAULT_MODEL, **kwargs)


def _minilm(arg: str, **kwargs: Any) -> Embedder:
    return _sentence_transformers("", **kwargs)


def _ollama(arg: str, *, base_url: str | None = None, **kwargs: Any) -> Embedder:
    from simgrag.embed.ollama import DEFAULT_OLLAMA_URL, OllamaEmbedder

    url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_OLLAMA_URL
    return OllamaEmbedder(arg or "nomic-embed-text", base_url=url, **kwargs)


def _openai(arg: str, *, base_url: str | None = None, **kwargs: Any) -> Embedder:
    from simgrag.embed.openai_compat import DEFAULT_OPENAI_URL, OpenAICompatEmbedder

    url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_OPENAI_URL
    return OpenAICompatEmbedder(arg or "text-embedding-3-small", base_url=url, **kwargs)


def _hash(arg: str, **kwargs: Any) -> Embedder:
    from simgrag.embed.hashing import HashEmbedder

    try:
        dim = int(arg) if arg else 32
    except ValueError as exc:
        raise ConfigError(f"hash:<dim> needs an integer width; got {arg!r}.") from exc
    return HashEmbedder(dim=dim)


def _static(arg: str, **kwargs: Any) -> Embedder:
    from simgrag.embed.static import StaticEmbedder

    source, _, width = arg.rpartition(":") if arg.rsplit(":", 1)[-1].isdigit() else (arg, "", "")
    return StaticEmbedder(source or "wordllama", dim=int(width) if width else None, **kwargs)


EMBEDDERS = Registry("embedder", "--embedder", "Embedders", [
    Entry("minilm", _minilm, "minilm", "bundled sentence-transformers/all-MiniLM-L6-v2, 384-d, offline"),
    Entry("sentence-transformers", _sentence_transformers, "sentence-transformers:<name-or-path>",
          "local model (st:)", aliases=("st", "sbert")),
    Entry("ollama", _ollama, "ollama:<model>", "Ollama server /api/embed"),
    Entry("openai", _openai, "openai:<model>", "OpenAI-compatible /v1/embeddings"),
    Entry("hash", _hash, "hash[:<dim>]", "deterministic hashed n-grams; tests, no model"),
    Entry("static", _static, "static[:wordllama|<dir>][:<dim>]", "mean of static token vectors, offline, fast",
          extra="scale"),
])


def list_embedders() -> list[Entry]:
    """The registered embedder kinds, for ``simgrag ls``."""
    return EMBEDDERS.entries()


def resolve_embedder(spec: str | Embedder, **kwargs: Any) -> Embedder:
    """An embedder from a spec string (see the module table), or ``spec`` itself if it is one.

    ``kwargs`` go to the constructor (``base_url=``, ``api_key=``, ``device=``, ``timeout=``, …).
    """
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ConfigError(f"Not an embedder: {spec!r} (it needs name, dim and encode()).")
    entry, arg = EMBEDDERS.parse(spec)
    try:
        embedder: Embedder = entry.load()(arg, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"Bad options for embedder {spec!r}: {exc}") from exc
    return embedder
