"""Any OpenAI-compatible chat-completions server: OpenAI, llama.cpp's servers, vLLM, LM Studio, …

Talks HTTP with httpx directly (``POST {base_url}/chat/completions``). A JSON schema is sent as
``response_format={"type": "json_schema", ...}``; servers that reject that form (llama-cpp-python's
server accepts only ``"text"``/``"json_object"`` and says so with an HTTP 500) get
``{"type": "json_object", "schema": ...}`` instead, and the client remembers it for later calls.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from simgrag.errors import ConfigError, HTTPStatusLLMError, LLMResponseError
from simgrag.llm._http import RETRY_STATUS as _RETRY_STATUS
from simgrag.llm._http import HTTPChatLLM, post_json, require
from simgrag.llm.base import CompletionRequest, LLMResponse
from simgrag.llm.retry import RetryPolicy

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAICompatLLM"]

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_RETRY = RetryPolicy(max_retries=0)


class OpenAICompatLLM(HTTPChatLLM):
    """Chat completions from an OpenAI-compatible server.

    ``base_url`` defaults to ``$OPENAI_BASE_URL`` or the OpenAI API, ``api_key`` to
    ``$OPENAI_API_KEY`` (needed by OpenAI itself, usually not by local servers). ``timeout`` is in
    seconds per request; 429/5xx answers are retried up to ``max_retries`` times with backoff.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise ConfigError("OpenAICompatLLM needs a model name, e.g. 'openai:gpt-4o-mini'")
        super().__init__(name=f"openai:{model}", timeout=timeout, max_retries=max_retries)
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL).rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not self._api_key and self.base_url == DEFAULT_OPENAI_BASE_URL:
            raise ConfigError(
                "the OpenAI API needs an API key: set OPENAI_API_KEY or pass --api-key "
                "(or point --base-url / OPENAI_BASE_URL at a local OpenAI-compatible server)"
            )
        self._json_schema_ok = True  # flips to False once the server rejected "json_schema"

    # -- request ----------------------------------------------------------------------------------

    def _payload(self, request: CompletionRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": False,
        }
        if request.stop:
            payload["stop"] = list(request.stop)
        return payload

    def _send(self, payload: dict[str, Any], request: CompletionRequest) -> dict[str, Any]:
        schema = request.json_schema
        if schema is None:
            return self._post(payload)
        object_payload = {**payload, "response_format": _json_object_format(schema)}
        if not self._json_schema_ok:
            return self._post(object_payload)
        schema_payload = {**payload, "response_format": _json_schema_format(schema)}
        try:  # one bare try first: some servers reject the format with a 500, not worth retrying
            return self._post(schema_payload, retry=_NO_RETRY)
        except HTTPStatusLLMError as exc:
            if not _rejects_response_format(exc):
                if exc.status_code in _RETRY_STATUS or exc.status_code >= 500:
                    return self._post(schema_payload)
                raise
            why = exc.detail[:200]
            logger.info("%s rejected response_format json_schema (%s); using json_object", self.base_url, why)
        body = self._post(object_payload)
        self._json_schema_ok = False
        return body

    def _post(self, payload: Mapping[str, Any], retry: RetryPolicy | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        policy = retry or self.retry
        return post_json(self._client, url, payload, retry=policy, headers=headers, what=self.name)

    # -- response ---------------------------------------------------------------------------------

    def _parse(self, body: Mapping[str, Any], latency: float, request: CompletionRequest) -> LLMResponse:
        url = f"{self.base_url}/chat/completions"
        choice = require(body, "choices.0", url)
        text = require(choice, "message", url).get("content")
        if not isinstance(text, str):
            refusal = choice["message"].get("refusal")
            why = f": {refusal}" if refusal else ""
            raise LLMResponseError(f"{self.name} returned no text content{why}")
        if choice.get("finish_reason") == "length":
            level = logging.WARNING if request.json_schema is not None else logging.DEBUG
            logger.log(level, "%s stopped at max_tokens; the output may be cut short", self.name)
        usage = body.get("usage") or {}
        return LLMResponse(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
        )


def _json_schema_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "pattern", "schema": dict(schema)}}


def _json_object_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    # "schema" is a llama-cpp-python extension (it compiles it to a grammar); others ignore it.
    return {"type": "json_object", "schema": dict(schema)}


def _rejects_response_format(exc: HTTPStatusLLMError) -> bool:
    """A validation error about response_format. llama-cpp-python's server answers it with a 500
    ("Input should be 'text' or 'json_object'"), FastAPI with a 422, OpenAI with a 400."""
    detail = exc.detail.lower()
    return exc.status_code in (400, 422, 500) and "response_format" in detail
