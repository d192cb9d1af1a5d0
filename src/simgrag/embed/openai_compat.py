"""Embeddings from any OpenAI-compatible server (``POST {base_url}/embeddings``).

Works with OpenAI itself, vLLM, llama.cpp's server, LM Studio, LocalAI, …. ``base_url`` is the API
root including ``/v1`` (a bare ``http://host:port`` gets ``/v1`` appended).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from simgrag.embed._http import HTTPEmbedder

__all__ = ["DEFAULT_OPENAI_URL", "OpenAICompatEmbedder"]

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
_KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def _api_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root + "/v1" if urlsplit(root).path in ("", "/") else root


class OpenAICompatEmbedder(HTTPEmbedder):
    """An OpenAI-compatible embeddings endpoint. ``name`` is ``openai:<model>``.

    ``api_key`` defaults to ``$OPENAI_API_KEY``; without one no ``Authorization`` header is sent
    (local servers need none). Texts go in batches of ``encode(batch_size=…)``.
    """

    service = "OpenAI-compatible embeddings server"
    unreachable_hint = "Is the server running, and is base_url (or SIMGRAG_EMBED_BASE_URL) right?"
    rows_key = "data"
    no_rows = "The embeddings answer has no 'data' list of {expected} items; got {got}."
    bad_rows = "Malformed item in the embeddings answer ({exc!r})."

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str = DEFAULT_OPENAI_URL,
        api_key: str | None = None,
        timeout: float = 60.0,
        dim: int | None = None,
        normalize: bool = True,
        cache_size: int = 4096,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(dim=dim or _KNOWN_DIMS.get(model), normalize=normalize, cache_size=cache_size)
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = _api_root(base_url)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self._open(timeout, {"Authorization": f"Bearer {key}"} if key else None, transport)

    def _url(self) -> str:
        return f"{self.base_url}/embeddings"

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts, "encoding_format": "float"}

    def _status_hints(self) -> Mapping[int, str]:
        return {
            401: "Set OPENAI_API_KEY or pass api_key=.",
            404: f"Check the model name {self.model!r} and that base_url ends in /v1.",
            429: "Rate limited: retry later or use a smaller batch_size.",
        }

    def _vectors(self, rows: list[Any]) -> np.ndarray:
        ordered = sorted(rows, key=lambda item: int(item.get("index", 0)))
        return np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
