"""Ollama's native chat API (``POST {base_url}/api/chat``), JSON schema via ``format``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from simgrag.errors import ConfigError, HTTPStatusLLMError
from simgrag.llm._http import HTTPChatLLM, post_json, require
from simgrag.llm.base import CompletionRequest, LLMResponse

__all__ = ["DEFAULT_OLLAMA_BASE_URL", "OllamaLLM"]

logger = logging.getLogger(__name__)

DEFAULT_OLLAMA_BASE_URL = "http://localhost:11434"


def _default_base_url() -> str:
    host = os.environ.get("OLLAMA_HOST")
    if not host:
        return DEFAULT_OLLAMA_BASE_URL
    return host if "://" in host else f"http://{host}"


class OllamaLLM(HTTPChatLLM):
    """A model served by Ollama (``ollama serve``; ``ollama pull <model>`` first).

    ``base_url`` defaults to ``$OLLAMA_HOST`` or ``http://localhost:11434``; the error policy is the
    one of :class:`simgrag.llm.openai_compat.OpenAICompatLLM`.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        timeout: float = 120,
        max_retries: int = 2,
        keep_alive: str | None = None,
    ) -> None:
        if not model:
            raise ConfigError("OllamaLLM needs a model name, e.g. 'ollama:llama3.1:8b'")
        super().__init__(name=f"ollama:{model}", timeout=timeout, max_retries=max_retries)
        self.model = model
        self.base_url = (base_url or _default_base_url()).rstrip("/")
        self.keep_alive = keep_alive

    def _payload(self, request: CompletionRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": request.temperature, "num_predict": request.max_tokens}
        if request.stop:
            options["stop"] = list(request.stop)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": False,
            "options": options,
        }
        if request.json_schema is not None:
            payload["format"] = dict(request.json_schema)
        if self.keep_alive is not None:
            payload["keep_alive"] = self.keep_alive
        return payload

    def _send(self, payload: dict[str, Any], request: CompletionRequest) -> dict[str, Any]:
        try:
            return post_json(self._client, f"{self.base_url}/api/chat", payload, retry=self.retry, what=self.name)
        except HTTPStatusLLMError as exc:
            if exc.status_code == 404 and "not found" in exc.detail:
                raise HTTPStatusLLMError(
                    f"{exc} — pull it first: ollama pull {self.model}", exc.status_code, exc.detail
                ) from exc
            raise

    def _parse(self, body: Mapping[str, Any], latency: float, request: CompletionRequest) -> LLMResponse:
        text = require(body, "message.content", f"{self.base_url}/api/chat")
        return LLMResponse(
            text=str(text),
            prompt_tokens=int(body.get("prompt_eval_count") or 0),
            completion_tokens=int(body.get("eval_count") or 0),
            latency_s=latency,
        )
