"""Embeddings from an Ollama server (``POST /api/embed``), e.g. ``nomic-embed-text``."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import numpy as np

from simgrag.embed._http import make_client, post_json
from simgrag.embed.batched import BatchedEmbedder
from simgrag.errors import EmbedderError

__all__ = ["DEFAULT_OLLAMA_URL", "OllamaEmbedder"]

logger = logging.getLogger(__name__)

DEFAULT_OLLAMA_URL = "http://localhost:11434"
# Widths of common Ollama embedding models, so ``dim`` needs no request.
_KNOWN_DIMS = {"nomic-embed-text": 768, "mxbai-embed-large": 1024, "all-minilm": 384, "bge-m3": 1024}


class OllamaEmbedder(BatchedEmbedder):
    """An embedding model served by Ollama. ``name`` is ``ollama:<model>``.

    ``dim`` is known for common models (or pass it); otherwise the first access sends one probe text.
    ``transport`` is for tests (e.g. ``httpx.MockTransport``).
    """

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
        self._client = make_client(timeout, transport=transport)

    def __repr__(self) -> str:
        return f"OllamaEmbedder({self.model!r}, base_url={self.base_url!r})"

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        answer = post_json(
            self._client,
            f"{self.base_url}/api/embed",
            {"model": self.model, "input": texts},
            service="Ollama",
            unreachable_hint="Is `ollama serve` running, and is base_url (or SIMGRAG_EMBED_BASE_URL) right?",
            status_hints={404: f"Pull the model first: `ollama pull {self.model}`."},
        )
        return _embeddings_from(answer, len(texts))

    def _detect_dim(self) -> int:
        return int(self._encode_batch(["dimension probe"]).shape[1])

    def close(self) -> None:
        self._client.close()


def _embeddings_from(answer: Any, expected: int) -> np.ndarray:
    rows = answer.get("embeddings") if isinstance(answer, dict) else None
    if not isinstance(rows, list) or len(rows) != expected:
        raise EmbedderError(
            f"Ollama's answer has no 'embeddings' list of {expected} vectors; got {str(answer)[:200]!r}. "
            "Is the server recent enough for /api/embed (Ollama ≥ 0.3)?"
        )
    try:
        return np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(
            f"Ollama sent embeddings that are not numeric vectors of one width: {exc}"
        ) from exc
