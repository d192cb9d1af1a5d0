"""Ollama's native chat API (``POST {base_url}/api/chat``), JSON schema via ``format``."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from simgrag.errors import ConfigError, HTTPStatusLLMError
from simgrag.llm._http import post_json, require
from simgrag.llm.base import ChatMessage, LLMResponse
from simgrag.llm.retry import RetryPolicy

__all__ = ["DEFAULT_OLLAMA_BASE_URL", "OllamaLLM"]

logger = logging.getLogger(__name__)

DEFAULT_OLLAMA_BASE_URL = "http://localhost:11434"


def _default_base_url() -> str:
    host = os.environ.get("OLLAMA_HOST")
    if not host:
        return DEFAULT_OLLAMA_BASE_URL
    return host if "://" in host else f"http://{host}"


class OllamaLLM:
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
        self.model = model
        self.base_url = (base_url or _default_base_url()).rstrip("/")
        self.name = f"ollama:{model}"
        self.keep_alive = keep_alive
        self.retry = RetryPolicy(max_retries=max_retries)
        self._client = httpx.Client(timeout=httpx.Timeout(timeout))

    def __repr__(self) -> str:
        return f"OllamaLLM(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OllamaLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> LLMResponse:
        """One chat completion; see :class:`simgrag.llm.base.LLM`."""
        payload = self._payload(messages, json_schema, max_tokens, temperature, stop)
        logger.debug("%s prompt: %s", self.name, payload["messages"])
        url = f"{self.base_url}/api/chat"
        start = time.perf_counter()
        try:
            body = post_json(self._client, url, payload, retry=self.retry, what=self.name)
        except HTTPStatusLLMError as exc:
            if exc.status_code == 404 and "not found" in exc.detail:
                raise HTTPStatusLLMError(
                    f"{exc} — pull it first: ollama pull {self.model}", exc.status_code, exc.detail
                ) from exc
            raise
        text = require(body, "message.content", url)
        response = LLMResponse(
            text=str(text),
            prompt_tokens=int(body.get("prompt_eval_count") or 0),
            completion_tokens=int(body.get("eval_count") or 0),
            latency_s=time.perf_counter() - start,
        )
        logger.info(
            "%s: %d prompt + %d completion tokens in %.2f s",
            self.name, response.prompt_tokens, response.completion_tokens, response.latency_s,
        )
        logger.debug("%s output: %s", self.name, response.text)
        return response

    def _payload(
        self,
        messages: Sequence[ChatMessage],
        json_schema: Mapping[str, Any] | None,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": temperature, "num_predict": max_tokens}
        if stop:
            options["stop"] = list(stop)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": False,
            "options": options,
        }
        if json_schema is not None:
            payload["format"] = dict(json_schema)
        if self.keep_alive is not None:
            payload["keep_alive"] = self.keep_alive
        return payload
