"""The HTTP service: a FastAPI app over one :class:`~simgrag.pipeline.SimGRAG` engine.

``create_app(engine_or_factory, settings)`` returns the app. The engine (index, embedder, LLM) is
built and warmed up once, in a background thread at start-up; until it is ready ``/v1/health``
answers 503 with ``"status": "loading"`` and the API answers 503. LLM-bound endpoints go through a
bounded :class:`~simgrag.serve.queue.LLMQueue`; retrieval runs on the thread pool with the
request's deadline handed to the search (which then returns its best matches so far).

/v1/ask and /v1/verify use the server's default retriever (``ServeSettings.retriever``, the engine's
own unless set) or the one a request names in ``retriever``; each is an engine sharing the loaded
LLM, built on first use and kept (:mod:`simgrag.serve.engines`); all answer through the same facade,
in the same response shape.

Errors share one body, :class:`~simgrag.serve.schemas.ErrorResponse`: 400 bad pattern, a retriever
the server does not offer or a setting it does not have (``k``), 401 API key,
413 body too large, 422 no usable pattern from the LLM (or an invalid request), 429 LLM queue full,
502 LLM backend failed, 503 not ready / deadline passed while queued, 504 deadline passed while
the LLM worked.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from simgrag.errors import (
    AuthError,
    ConfigError,
    DeadlineExceededError,
    LLMError,
    MatchError,
    NotReadyError,
    PatternError,
    QueueFullError,
    QueueTimeoutError,
    RetrieverChoiceError,
    SimGRAGError,
)
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.registry import per_call_settings
from simgrag.serve.chat import chat_router
from simgrag.serve.engines import EnginePool
from simgrag.serve.queue import LLMQueue
from simgrag.serve.schemas import (
    AskRequest,
    AskResponse,
    ErrorResponse,
    HealthResponse,
    KGStatsResponse,
    RetrieveRequest,
    RetrieveResponse,
    VerifyRequest,
    VerifyResponse,
)

__all__ = ["ServeSettings", "create_app"]

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("simgrag.access")

STATIC_DIR = Path(__file__).parent / "static"
EngineSource = SimGRAG | Callable[[], SimGRAG]


@dataclass(frozen=True)
class ServeSettings:
    """``timeout_s``: per-request deadline; ``max_waiting``: requests allowed to wait for the LLM;
    ``max_body_bytes``: request size limit; ``api_key``: required in ``X-API-Key`` (or
    ``Authorization: Bearer``) on /v1 endpoints other than health, when set. ``retriever``: the
    default retriever of /v1/ask and /v1/verify (``None``: the engine's own); ``retrievers``: the names
    a request may choose (``None``: every registered one); ``retriever_options``: options per name, e.g.
    ``{"gsr": {"model": "gsr.model"}}``."""

    timeout_s: float = 120.0
    max_waiting: int = 8
    max_body_bytes: int = 64 * 1024
    api_key: str | None = None
    warmup: bool = True
    retriever: str | None = None
    retrievers: tuple[str, ...] | None = None
    retriever_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class _Engine:
    """The engine and its readiness, filled in by the start-up thread."""

    def __init__(self, source: EngineSource, warmup: bool, prepare: Callable[[SimGRAG], None] | None = None) -> None:
        self.source = source
        self.warmup = warmup
        self.prepare = prepare
        self.engine: SimGRAG | None = source if isinstance(source, SimGRAG) else None
        self.status = "loading"
        self.error: str | None = None
        self.started = time.monotonic()
        self.label = "?"
        self.llm_label: str | None = None

    def load(self) -> None:
        try:
            engine = self.engine if self.engine is not None else self.source()  # type: ignore[operator]
            self.label, self.llm_label = str(engine.index.path), engine.llm_name
            if self.warmup:
                timings = engine.warmup()
                logger.info("engine ready: %s", {k: round(v, 2) for k, v in timings.items()})
            if self.prepare is not None:
                self.prepare(engine)
            self.engine = engine
            self.status = "ready"
        except Exception as exc:  # reported by /v1/health, not swallowed
            logger.exception("the engine failed to load")
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"

    def require(self) -> SimGRAG:
        if self.status != "ready" or self.engine is None:
            detail = self.error or "the index and models are still loading; see /v1/health"
            raise NotReadyError(detail)
        return self.engine


_STATUS: list[tuple[type[Exception], int, str]] = [
    (NotReadyError, 503, "not_ready"),
    (AuthError, 401, "unauthorized"),
    (RetrieverChoiceError, 400, "retriever"),
    (QueueFullError, 429, "queue_full"),
    (QueueTimeoutError, 503, "queue_timeout"),
    (DeadlineExceededError, 504, "deadline_exceeded"),
    (PatternError, 422, "pattern"),
    (MatchError, 400, "bad_pattern"),
    (LLMError, 502, "llm"),
    (ConfigError, 400, "bad_request"),
    (SimGRAGError, 500, "internal"),
]


def _error_response(exc: Exception) -> JSONResponse:
    for kind, status, code in _STATUS:
        if isinstance(exc, kind):
            headers = {"Retry-After": "5"} if status in (429, 503) else None
            body = ErrorResponse(error=code, detail=str(exc))
            return JSONResponse(body.model_dump(), status_code=status, headers=headers)
    raise exc


class BodyLimitMiddleware:
    """Answer 413 when a request body exceeds ``max_bytes`` (declared or streamed)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        # read the (small) body here, counting, then hand it on: a body without Content-Length
        # is stopped as soon as it passes the limit
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await self._reject(send)
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

    async def _reject(self, send: Send) -> None:
        body = ErrorResponse(error="too_large", detail=f"request body over {self.max_bytes} bytes")
        await JSONResponse(body.model_dump(), status_code=413)({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def create_app(engine: EngineSource, settings: ServeSettings | None = None) -> FastAPI:
    """The FastAPI app; ``engine`` is a ready :class:`SimGRAG` or a function that builds one."""
    settings = settings or ServeSettings()
    pool = EnginePool(settings.retriever, settings.retrievers, settings.retriever_options)
    state = _Engine(engine, settings.warmup, pool.attach)
    llm_queue = LLMQueue(settings.max_waiting)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        loader = threading.Thread(target=state.load, name="simgrag-load", daemon=True)
        loader.start()
        yield
        llm_queue.close()

    app = FastAPI(title="simgrag", summary="Question answering and fact verification grounded in a "
                  "knowledge graph (SimGRAG)", version=_version(), lifespan=lifespan)
    app.state.engine = state
    app.state.llm_queue = llm_queue
    app.state.engines = pool
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)

    @app.middleware("http")
    async def access_log(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex[:16]
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            response.headers["X-Request-ID"] = request_id
            return response
        finally:
            access_logger.info(json.dumps({
                "event": "access", "request_id": request_id, "method": request.method,
                "path": request.url.path, "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000, 2),
                "client": request.client.host if request.client else None,
            }))

    for kind, _, _ in _STATUS:
        app.add_exception_handler(kind, _handler)

    def check_key(request: Request) -> None:
        if settings.api_key is None:
            return
        given = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if given is None and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if given is None or not hmac.compare_digest(given.encode(), settings.api_key.encode()):
            raise AuthError("missing or wrong API key (send it as X-API-Key or Authorization: Bearer)")

    guarded = [Depends(check_key)]
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 401, 413, 422, 429, 502, 503, 504)}

    @app.get("/v1/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    async def health() -> JSONResponse:
        """Readiness: 200 once the index and models are loaded, 503 while loading or after a failure."""
        body = HealthResponse(status=state.status, ready=state.status == "ready",  # type: ignore[arg-type]
                              index=state.label, llm=state.llm_label, error=state.error,
                              uptime_s=round(time.monotonic() - state.started, 3), llm_queue=llm_queue.stats(),
                              retriever=pool.default or "", retrievers=list(pool.allowed),
                              per_request={n: [s for s in per_call_settings(n) if s == "k"] for n in pool.allowed})
        return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)

    @app.get("/v1/kg/stats", response_model=KGStatsResponse, dependencies=guarded, responses=errors)
    async def kg_stats() -> KGStatsResponse:
        """Size of the loaded KG and the index behind it."""
        return _kg_stats(state.require())

    @app.post("/v1/retrieve", response_model=RetrieveResponse, dependencies=guarded, responses=errors)
    async def retrieve(body: RetrieveRequest) -> RetrieveResponse:
        """Pattern in, top-k matched subgraphs out (no LLM involved)."""
        engine = state.require()
        options: dict[str, Any] = {"k": body.k, "deadline_s": settings.timeout_s}
        options.update({name: value for name, value in (("k_n", body.k_n), ("k_r", body.k_r)) if value})
        retrieval_settings = replace(engine.retrieval, **options)
        result = await run_in_threadpool(engine.retrieve, body.pattern, retrieval_settings)
        return RetrieveResponse.model_validate(result.to_dict())

    @app.post("/v1/ask", response_model=AskResponse, dependencies=guarded, responses=errors)
    async def ask(body: AskRequest) -> AskResponse:
        """Question → the chosen retriever's context (SimGRAG: pattern (LLM) → top-k subgraphs) → the
        answer with its evidence."""
        state.require()
        name = pool.name_for(body.retriever)
        result = await llm_queue.run(lambda: pool.get(name).ask(body.question, k=body.k, deadline_s=settings.timeout_s),
                                     settings.timeout_s)
        return AskResponse.model_validate(result.to_dict())

    @app.post("/v1/verify", response_model=VerifyResponse, dependencies=guarded, responses=errors)
    async def verify(body: VerifyRequest) -> VerifyResponse:
        """Claim → the chosen retriever's context → Supported / Refuted with its evidence."""
        state.require()
        name = pool.name_for(body.retriever)
        result = await llm_queue.run(lambda: pool.get(name).verify(body.claim, k=body.k, deadline_s=settings.timeout_s),
                                     settings.timeout_s)
        return VerifyResponse.model_validate(result.to_dict())

    # OpenAI-compatible chat (/v1/chat/completions, /v1/models): same key, LLM queue and deadline
    app.include_router(chat_router(state.require, lambda fn: llm_queue.run(fn, settings.timeout_s), _error_response,
                                   dependencies=guarded, timeout_s=settings.timeout_s))

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


async def _handler(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, (NotReadyError, AuthError, QueueFullError, QueueTimeoutError)):
        logger.warning("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return _error_response(exc)


def _kg_stats(engine: SimGRAG) -> KGStatsResponse:
    store = engine.index.store
    counts = np.bincount(store.rels, minlength=store.num_relations).tolist()
    manifest = engine.index.manifest
    return KGStatsResponse(
        entities=store.num_entities, relations=store.num_relations, triples=store.num_triples,
        relation_counts={store.relations[i]: n for i, n in enumerate(counts)},
        index_kind=str(manifest.get("entity_index", {}).get("kind", "?")),
        embedder=str(manifest.get("embedder", {}).get("name", "?")), dim=int(engine.index.embedder.dim),
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("simgrag")
    except PackageNotFoundError:
        return "0+unknown"
