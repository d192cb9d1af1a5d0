"""JSON over HTTP for the server backends, with the error policy they share.

* connection refused / unreachable → :class:`LLMConnectionError` naming the URL ("is the server running?")
* timeouts → :class:`LLMTimeoutError` (not retried: a slow server would only be slower again)
* 429, 5xx and dropped connections → retried with bounded exponential backoff
* other 4xx → :class:`LLMResponseError` carrying the server's own message
"""

from __future__ import annotations

import json
import logging
import time
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from simgrag.errors import (
    HTTPStatusLLMError,
    LLMConnectionError,
    LLMResponseError,
    LLMTimeoutError,
    TransientLLMError,
)
from simgrag.llm.base import BaseLLM, CompletionRequest, LLMResponse, log_response
from simgrag.llm.retry import RetryPolicy, call_with_retries

__all__ = ["RETRY_STATUS", "HTTPChatLLM", "post_json", "require", "server_message"]

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def post_json(
    client: httpx.Client,
    url: str,
    payload: Mapping[str, Any],
    *,
    retry: RetryPolicy,
    headers: Mapping[str, str] | None = None,
    what: str = "LLM call",
) -> dict[str, Any]:
    """POST ``payload`` as JSON and return the decoded JSON object, under the error policy above."""
    return call_with_retries(lambda: _post_once(client, url, payload, headers), retry, what=what)


def _post_once(
    client: httpx.Client, url: str, payload: Mapping[str, Any], headers: Mapping[str, str] | None
) -> dict[str, Any]:
    try:
        response = client.post(url, json=payload, headers=dict(headers or {}))
    except httpx.ConnectTimeout as exc:
        raise LLMTimeoutError(
            f"connecting to {url} timed out after {_timeout_of(client)}; is the server running "
            f"and reachable (check --base-url)?"
        ) from exc
    except httpx.TimeoutException as exc:
        raise LLMTimeoutError(
            f"{url} did not answer within the timeout ({_timeout_of(client)}); raise it (--llm-timeout), "
            f"lower max_tokens, or use a faster model/server"
        ) from exc
    except httpx.ConnectError as exc:
        raise LLMConnectionError(
            f"cannot connect to {url} ({exc}); is the server running? (check --base-url)"
        ) from exc
    except httpx.TransportError as exc:  # dropped connection, protocol error: worth another try
        raise TransientLLMError(LLMConnectionError(f"connection to {url} failed: {exc!r}")) from exc
    return _decode(response, url)


def _decode(response: httpx.Response, url: str) -> dict[str, Any]:
    if response.status_code >= 400:
        error = _status_error(response, url)
        if response.status_code in RETRY_STATUS or response.status_code >= 500:
            raise TransientLLMError(error, _retry_after(response))
        raise error
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LLMResponseError(f"{url} answered with non-JSON content: {response.text[:300]!r}") from exc
    if not isinstance(body, dict):
        raise LLMResponseError(f"{url} answered with unexpected JSON: {str(body)[:300]}")
    return body


def _status_error(response: httpx.Response, url: str) -> HTTPStatusLLMError:
    detail = server_message(response)
    message = f"{url} answered HTTP {response.status_code}: {detail}"
    if response.status_code in (401, 403):
        message += " (check the API key: --api-key or the backend's *_API_KEY variable)"
    elif response.status_code == 404:
        message += " (check --base-url and the model name)"
    return HTTPStatusLLMError(message, response.status_code, detail)


def server_message(response: httpx.Response) -> str:
    """The error text a server put in its body (OpenAI ``error.message``, Ollama ``error``, FastAPI
    ``detail``), else the raw body, shortened."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body))
        if isinstance(error, dict) and "message" in error:
            error = error["message"]
        text = error if isinstance(error, str) else json.dumps(error)
        return text[:500]
    return str(body)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:  # an HTTP date: ignore it and use our own backoff
        return None


def _timeout_of(client: httpx.Client) -> str:
    t = client.timeout
    return f"{t.read} s" if t.read is not None else "no limit"


def require(body: Mapping[str, Any], path: str, url: str) -> Any:
    """``body["a"]["b"][0]…`` for ``path`` ``"a.b.0"``, or :class:`LLMResponseError` when absent."""
    node: Any = body
    for part in path.split("."):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMResponseError(
                f"{url} answered without {path!r}: {json.dumps(body)[:300]}"
            ) from exc
    return node



_Self = TypeVar("_Self", bound="HTTPChatLLM")


class HTTPChatLLM(BaseLLM):
    """A chat model behind an HTTP server: one pooled client (``timeout`` s per request), 429/5xx
    retried up to ``max_retries`` times; a call is payload → POST → parse, logged the same way for
    every server. Subclasses set ``model`` and ``base_url`` and write the three steps."""

    model: str
    base_url: str

    def __init__(self, *, name: str, timeout: float, max_retries: int) -> None:
        self.name = name
        self.retry = RetryPolicy(max_retries=max_retries)
        self._client = httpx.Client(timeout=httpx.Timeout(timeout))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        log = logging.getLogger(type(self).__module__)  # the backend's own logger
        payload = self._payload(request)
        log.debug("%s prompt: %s", self.name, payload["messages"])
        start = time.perf_counter()
        body = self._send(payload, request)
        response = self._parse(body, time.perf_counter() - start, request)
        log_response(log, self.name, response)
        return response

    @abstractmethod
    def _payload(self, request: CompletionRequest) -> dict[str, Any]:
        """The request body (with a ``messages`` list)."""

    @abstractmethod
    def _send(self, payload: dict[str, Any], request: CompletionRequest) -> dict[str, Any]:
        """POST the payload; the server's JSON answer."""

    @abstractmethod
    def _parse(self, body: Mapping[str, Any], latency: float, request: CompletionRequest) -> LLMResponse:
        """The completion in the server's answer."""
