"""Embeddings from an Ollama server (``POST /api/embed``), e.g. ``nomic-embed-text``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx
import numpy as np

from simgrag.embed._http import HTTPEmbedder

__all__ = ["DEFAULT_OLLAMA_URL", "OllamaEmbedder"]

logger = logging.getLogger(__name__)

DEFAULT_OLLAMA_URL = "http://localhost:11434"
# Widths of common Ollama embedding models, so ``dim`` needs no request.
_KNOWN_DIMS = {"nomic-embed-text": 768, "mxbai-embed-large": 1024, "all-minilm": 384, "bge-m3": 1024}


class OllamaEmbedder(HTTPEmbedder):
    """An embedding model served by Ollama. ``name`` is ``ollama:<model>``.

    ``dim`` is known for common models (or pass it); otherwise the first access sends one probe text.
    ``transport`` is for tests (e.g. ``httpx.MockTransport``).
    """

    service = "Ollama"
    unreachable_hint = "Is `ollama serve` running, and is base_url (or SIMGRAG_EMBED_BASE_URL) right?"
    rows_key = "embeddings"
    no_rows = ("Ollama's answer has no 'embeddings' list of {expected} vectors; got {got}. "
               "Is the server recent enough for /api/embed (Ollama ≥ 0.3)?")
    bad_rows = "Ollama sent embeddings that are not numeric vectors of one width: {exc}"

    def __init__(
        self,
        model: str = "nomic-embed-text",
        *,
        base_url: str = DEFAULT_OLLAMA_URL,
        timeout: float = 60.0,
        dim: int | None = None,
        normalize: bool = True,
        cache_size: int = 4096,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            dim=dim or _KNOWN_DIMS.get(model.split(":")[0]), normalize=normalize, cache_size=cache_size
        )
        self.model = model
        self.name = f"ollama:{model}"
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._open(timeout, None, transport)

    def _url(self) -> str:
        return f"{self.base_url}/api/embed"

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def _status_hints(self) -> Mapping[int, str]:
        return {404: f"Pull the model first: `ollama pull {self.model}`."}

    def _vectors(self, rows: list[Any]) -> np.ndarray:
        return np.asarray(rows, dtype=np.float32)
