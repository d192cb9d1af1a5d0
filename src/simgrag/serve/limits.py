"""What the HTTP service checks before, and bounds around, every request.

:class:`RequestGate` (outermost ASGI layer, before any body is read or parsed):

- stamps the request's arrival time, from which every deadline is measured (:func:`remaining`):
  time spent reading a slow body or waiting for a worker counts against the request's timeout;
- checks the API key of every ``/v1`` endpoint but health *first*, so a request without the key
  gets 401 whatever its body (never a 422 that tells an outsider about the schema);
- refuses bodies over ``max_body_bytes`` (413) and bodies that do not arrive within
  ``body_timeout_s`` (408), so slow clients cannot hold workers.

:class:`RetrievalWorkers` runs retrievals on their own threads: at most ``max_running`` at once, at
most ``max_waiting`` more queued (then 429); a queued retrieval whose deadline passes gets 503, and
each search gets what is left of its request's deadline. The compiled search releases the GIL, so
a normal retrieval still runs while hostile ones spend their deadlines.

The error handlers give every failure the documented JSON body (:class:`ErrorResponse`), including
request validation errors (422) and unexpected ones (500), with text that always encodes.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simgrag.errors import ConfigError, QueueTimeoutError
from simgrag.serve.queue import BoundedPool

__all__ = [
    "RequestGate",
    "RetrievalWorkers",
    "check_api_key",
    "error_body",
    "http_error_handler",
    "internal_error_handler",
    "key_matches",
    "redacted_health",
    "remaining",
    "safe_text",
    "validation_error_handler",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

ARRIVAL = "simgrag_arrival"
PUBLIC_PATHS = frozenset({"/v1/health"})


def check_api_key(api_key: str | None) -> str | None:
    """An API key the server can require: ``None`` (no key) or a non-blank string."""
    if api_key is not None and not api_key.strip():
        raise ConfigError("The API key is empty: give a real key (--auth-key / $SIMGRAG_SERVE_KEY) or none at all")
    return api_key


def safe_text(text: str, limit: int = 2000) -> str:
    """``text`` cut to ``limit`` characters with lone surrogates escaped, so it always encodes as UTF-8."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(error: str, detail: str) -> dict[str, str]:
    return {"error": error, "detail": safe_text(detail)}


def key_matches(headers: Mapping[str, str], api_key: str | None) -> bool:
    """Does the request carry ``api_key`` (``X-API-Key`` or ``Authorization: Bearer``)? Always True
    when the server has no key."""
    if api_key is None:
        return True
    given = headers.get("x-api-key")
    auth = headers.get("authorization", "")
    if given is None and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                                     api_key.encode("utf-8", "surrogateescape"))


def arrival(request: Request) -> float:
    """When the request arrived (``time.monotonic()``), as stamped by :class:`RequestGate`."""
    return float(request.scope.get("state", {}).get(ARRIVAL, time.monotonic()))


def remaining(request: Request, timeout_s: float) -> float:
    """Seconds left of the request's ``timeout_s``, counted from its arrival (at least 1 ms)."""
    return max(0.001, timeout_s - (time.monotonic() - arrival(request)))


class RequestGate:
    """Arrival stamp, API key, body size and body read timeout (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, api_key: str | None, max_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.api_key = api_key
        self.max_bytes = max_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        scope.setdefault("state", {})[ARRIVAL] = start
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        path = str(scope.get("path", ""))
        if path.startswith("/v1/") and path not in PUBLIC_PATHS and not key_matches(headers, self.api_key):
            await _reply(send, 401, "unauthorized",
                         "missing or wrong API key (send it as X-API-Key or Authorization: Bearer)")
            return
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _reply(send, 413, "too_large", f"request body over {self.max_bytes} bytes")
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            left = self.body_timeout_s - (time.monotonic() - start)
            try:
                message = await asyncio.wait_for(receive(), max(left, 0.001))
            except TimeoutError:
                await _reply(send, 408, "body_timeout", f"the request body did not arrive within "
                                                        f"{self.body_timeout_s:g} s")
                return
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await _reply(send, 413, "too_large", f"request body over {self.max_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _reply(send: Send, status: int, error: str, detail: str) -> None:
    body = json.dumps(error_body(error, detail)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _describe(errors: list[Any]) -> str:
    parts = []
    for err in errors[:10]:
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return "invalid request: " + "; ".join(parts) + more


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 with the documented error body (pydantic's own rendering fails on NaN or lone surrogates)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse(error_body("invalid_request", _describe(list(errors))), status_code=422)


_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own HTTP errors (a body that fails to parse, 404, 405) in the documented body."""
    status = int(getattr(exc, "status_code", 500))
    detail = getattr(exc, "detail", None)
    headers = getattr(exc, "headers", None)
    return JSONResponse(error_body(_HTTP_CODES.get(status, "http_error"), str(detail or status)),
                        status_code=status, headers=headers)


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """500 with the documented error body; the traceback goes to the log, not to the client."""
    logger.error("%s %s failed unexpectedly", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal", f"internal error ({type(exc).__name__}); see the server log"),
                        status_code=500)


class RetrievalWorkers(BoundedPool):
    """Retrievals on their own threads, bounded (see the module docstring)."""

    def __init__(self, max_running: int = 64, max_waiting: int = 64) -> None:
        if max_running < 1 or max_waiting < 0:
            raise ConfigError("the retrieval pool needs max_running >= 1 and max_waiting >= 0")
        super().__init__(max_running, max_running + max_waiting, "simgrag-retrieve")
        self.max_running, self.max_waiting = max_running, max_waiting

    def stats(self) -> dict[str, int]:
        pending = self._pending_now()
        return {"running": min(pending, self.max_running), "waiting": max(0, pending - self.max_running),
                "max_running": self.max_running, "max_waiting": self.max_waiting, "rejected": self.rejected,
                "timed_out": self.timed_out}

    async def run(self, fn: Callable[[float], T], deadline: float) -> T:
        """``fn(seconds left)`` on a pool thread; ``deadline`` is a ``time.monotonic()`` instant."""
        self._admit(lambda pending: f"{pending} retrievals are running or waiting (limit "
                                    f"{self.max_running} + {self.max_waiting}); retry later")

        def job() -> T:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out += 1
                raise QueueTimeoutError("the request's deadline passed while it waited for a retrieval worker")
            return fn(left)

        return await asyncio.wrap_future(self._submit(job))


def redacted_health(error: str | None, index_label: str, authorized: bool) -> tuple[str, str | None]:
    """(index, error) as /v1/health may show them: an unauthenticated client of a server with an API
    key sees the index's directory name and the error's kind, never a path or the error text."""
    if authorized:
        return index_label, error
    name = index_label.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or "?"
    if error is None:
        return name, None
    kind = error.split(":", 1)[0]
    return name, f"{kind} (details in the server log, and in /v1/health with the API key)"

