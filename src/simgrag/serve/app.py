"""The HTTP service: a FastAPI app over one :class:`~simgrag.pipeline.SimGRAG` engine.

``create_app(engine_or_factory, settings)`` returns the app. The engine (index, embedder, compiled
search, retriever) is built and warmed up once, in a background thread at start-up; until it is ready
``/v1/health`` answers 503 with ``"status": "loading"`` and the API answers 503. An in-process LLM loads
right after that (``llm_status`` in the health body): a request that needs it meanwhile waits for the load.
LLM-bound endpoints go through a bounded :class:`~simgrag.serve.queue.LLMQueue`; retrieval runs on the
thread pool with the request's deadline handed to the search (which then returns its best matches so far).

/v1/ask and /v1/verify use the server's default retriever (``ServeSettings.retriever``, the engine's
own unless set) or the one a request names in ``retriever``; each is an engine sharing the loaded
LLM, built on first use and kept (:mod:`simgrag.serve.engines`); all answer through the same facade,
in the same response shape.

Errors share one body, :class:`~simgrag.serve.schemas.ErrorResponse`: 400 bad pattern, a retriever
the server does not offer or a setting it does not have (``k``), 401 API key (checked before the body
is read), 408 body too slow, 413 body too large, 422 no usable pattern from the LLM (or an invalid
request), 429 LLM queue or retrieval workers full, 500 unexpected, 502 LLM backend failed, 503 not
ready / deadline passed while queued, 504 deadline passed while the LLM worked. Deadlines count from
the request's arrival (:mod:`simgrag.serve.limits`).

``"stream": true`` on /v1/ask or /v1/verify answers 200 with NDJSON: the stages as they happen, then the
result (or the error) as the last line (:mod:`simgrag.serve.progress`); errors known before the work
starts (key, queue full, not ready, unknown retriever) keep their status codes. With an in-process LLM,
every prompt family's fixed prefix is evaluated once after the model loads (:mod:`simgrag.serve.warm`,
``ServeSettings.warm_prompts``), in the loading thread: start-up is not blocked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

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
from simgrag.serve import limits
from simgrag.serve.chat import chat_router
from simgrag.serve.engines import EnginePool
from simgrag.serve.progress import observed, stage_event
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
from simgrag.serve.warm import warm_prompts

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
    ``{"gsr": {"model": "gsr.model"}}``. ``body_timeout_s``: a body must arrive within it (408);
    ``max_retrievals`` / ``max_retrieval_waiting``: retrievals running at once / queued (then 429);
    ``verify``: check the index's content hashes at start-up (:func:`~simgrag.index.verify.verify_index`);
    ``warm_prompts``: after an in-process LLM loads, evaluate every prompt family's fixed prefix once
    (:func:`~simgrag.serve.warm.warm_prompts`)."""

    timeout_s: float = 120.0
    max_waiting: int = 8
    max_body_bytes: int = 64 * 1024
    api_key: str | None = None
    warmup: bool = True
    retriever: str | None = None
    retrievers: tuple[str, ...] | None = None
    retriever_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    body_timeout_s: float = 10.0
    max_retrievals: int = 64
    max_retrieval_waiting: int = 64
    verify: bool = True
    warm_prompts: bool = True

    def __post_init__(self) -> None:
        limits.check_api_key(self.api_key)


class _Engine:
    """The engine and its readiness, filled in by the start-up thread."""

    def __init__(self, source: EngineSource, warmup: bool, prepare: Callable[[SimGRAG], None] | None = None,
                 verify: bool = False, warm_prompts: bool = False) -> None:
        self.source = source
        self.warm_prompts = warm_prompts
        self.warmup = warmup
        self.prepare = prepare
        self.verify = verify
        self.engine: SimGRAG | None = source if isinstance(source, SimGRAG) else None
        self.status = "loading"
        self.error: str | None = None
        self.started = time.monotonic()
        self.label = "?"
        self.llm_label: str | None = None
        self.llm_status = "ready" if not warmup else "pending"  # without a warm-up: loaded on its first call

    def load(self) -> None:
        try:
            engine = self.engine if self.engine is not None else self.source()  # type: ignore[operator]
            self.label, self.llm_label = str(engine.index.path), engine.llm_name
            if self.verify:  # every file's sha256 against the manifest: a damaged index never serves
                from simgrag.index.verify import raise_on_problems, verify_index

                raise_on_problems(verify_index(engine.index))
            if self.warmup:
                timings = engine.warmup(load_llm=False)
                logger.info("engine ready: %s", {k: round(v, 2) for k, v in timings.items()})
            if self.prepare is not None:
                self.prepare(engine)
            self.engine = engine
            self.status = "ready"
        except Exception as exc:  # reported by /v1/health, not swallowed
            logger.exception("the engine failed to load")
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"
            return
        if self.warmup:  # after "ready": answers that need no LLM call go out meanwhile, the rest wait
            self.load_llm(engine)

    def load_llm(self, engine: SimGRAG) -> None:
        self.llm_status = "loading"
        try:
            seconds = engine.load_llm()
        except Exception as exc:  # the first call that needs the model reports it again
            logger.exception("the LLM failed to load")
            self.llm_status, self.error = "failed", f"{type(exc).__name__}: {exc}"
            return
        self.llm_status = "ready"
        logger.info("LLM ready (%.2f s)", seconds)
        if self.warm_prompts:  # a request meanwhile waits at most for the family being warmed (the LLM's lock)
            warm_prompts(engine)

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
            return JSONResponse(limits.error_body(code, str(exc)), status_code=status, headers=headers)
    raise exc


def create_app(engine: EngineSource, settings: ServeSettings | None = None) -> FastAPI:
    """The FastAPI app; ``engine`` is a ready :class:`SimGRAG` or a function that builds one."""
    settings = settings or ServeSettings()
    pool = EnginePool(settings.retriever, settings.retrievers, settings.retriever_options)
    state = _Engine(engine, settings.warmup, pool.attach, settings.verify, settings.warm_prompts)
    llm_queue = LLMQueue(settings.max_waiting)
    retrievals = limits.RetrievalWorkers(settings.max_retrievals, settings.max_retrieval_waiting)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        loader = threading.Thread(target=state.load, name="simgrag-load", daemon=True)
        loader.start()
        yield
        llm_queue.close()
        retrievals.close()

    app = FastAPI(title="simgrag", summary="Question answering and fact verification grounded in a "
                  "knowledge graph (SimGRAG)", version=_version(), lifespan=lifespan)
    app.state.engine = state
    app.state.llm_queue = llm_queue
    app.state.engines = pool
    app.add_middleware(limits.RequestGate, api_key=settings.api_key, max_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)

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
    app.add_exception_handler(RequestValidationError, limits.validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, limits.http_error_handler)
    app.add_exception_handler(Exception, limits.internal_error_handler)

    def check_key(request: Request) -> None:  # RequestGate checked it already; this keeps the OpenAPI docs honest
        if not limits.key_matches(request.headers, settings.api_key):
            raise AuthError("missing or wrong API key (send it as X-API-Key or Authorization: Bearer)")

    guarded = [Depends(check_key)]
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 401, 408, 413, 422, 429, 500, 502, 503, 504)}

    @app.get("/v1/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    async def health(request: Request) -> JSONResponse:
        """Readiness: 200 once the index and the embedder are loaded, 503 while loading or after a failure.
        An in-process LLM loads after that (``llm_status``); a request that needs it meanwhile waits."""
        index, error = limits.redacted_health(state.error, state.label,
                                              limits.key_matches(request.headers, settings.api_key))
        body = HealthResponse(status=state.status, ready=state.status == "ready",  # type: ignore[arg-type]
                              index=index, llm=state.llm_label, llm_status=state.llm_status,  # type: ignore[arg-type]
                              error=error,
                              uptime_s=round(time.monotonic() - state.started, 3), llm_queue=llm_queue.stats(),
                              retrievals=retrievals.stats(), retriever=pool.default or "",
                              retrievers=list(pool.allowed),
                              per_request={n: [s for s in per_call_settings(n) if s == "k"] for n in pool.allowed})
        return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)

    @app.get("/v1/kg/stats", response_model=KGStatsResponse, dependencies=guarded, responses=errors)
    async def kg_stats() -> KGStatsResponse:
        """Size of the loaded KG and the index behind it."""
        return _kg_stats(state.require())

    @app.post("/v1/retrieve", response_model=RetrieveResponse, dependencies=guarded, responses=errors)
    async def retrieve(body: RetrieveRequest, request: Request) -> RetrieveResponse:
        """Pattern in, top-k matched subgraphs out (no LLM involved)."""
        engine = state.require()
        options: dict[str, Any] = {"k": body.k}
        options.update({name: value for name, value in (("k_n", body.k_n), ("k_r", body.k_r)) if value})

        def run(left: float) -> Any:  # the search gets what is left of the request's deadline
            return engine.retrieve(body.pattern, replace(engine.retrieval, **options,
                                                         deadline_s=_search_deadline(engine, left)))

        result = await retrievals.run(run, limits.arrival(request) + settings.timeout_s)
        return RetrieveResponse.model_validate(result.to_dict())

    async def on_llm_queue(request: Request, retriever: str | None, call: Callable[[SimGRAG, float], Any]) -> Any:
        """``call(the chosen retriever's engine, search deadline)`` on the LLM queue, within the request's
        deadline."""
        engine = state.require()
        name = pool.name_for(retriever)
        left = limits.remaining(request, settings.timeout_s)
        deadline = _search_deadline(engine, left)
        return await llm_queue.run(lambda: call(pool.get(name), deadline), left)

    async def streamed(request: Request, retriever: str | None, call: Callable[[SimGRAG, float], Any],
                       shape: type[AskResponse] | type[VerifyResponse], first: str) -> StreamingResponse:
        """``call`` on the LLM queue as :func:`on_llm_queue`, its stages streamed as NDJSON (module
        :mod:`simgrag.serve.progress`); what fails before the work starts raises as usual."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        arrived = limits.arrival(request)

        def emit(stage: str, detail: str | None = None) -> None:
            loop.call_soon_threadsafe(events.put_nowait, stage_event(stage, arrived, detail))

        ahead = sum(llm_queue.stats()[k] for k in ("running", "waiting"))
        if ahead:
            emit("queued", f"{ahead} ahead")

        def job(engine: SimGRAG, deadline: float) -> Any:
            emit(first)
            return call(observed(engine, emit, claim=first == "claim"), deadline)

        work = asyncio.ensure_future(on_llm_queue(request, retriever, job))
        await asyncio.sleep(0)  # not ready, unknown retriever, queue full: raised before the stream starts
        if work.done() and work.exception() is not None:
            raise work.exception()  # type: ignore[misc]
        return StreamingResponse(_ndjson(events, work, shape, arrived), media_type="application/x-ndjson",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    streaming: dict[int | str, dict[str, Any]] = {200: {
        "description": 'the response; with `"stream": true`, NDJSON stage events, then '
                       '`{"event": "result", "result": …}` (see simgrag.serve.progress)',
        "content": {"application/x-ndjson": {}}}}

    @app.post("/v1/ask", response_model=AskResponse, dependencies=guarded, responses={**errors, **streaming})
    async def ask(body: AskRequest, request: Request) -> Any:
        """Question → the chosen retriever's context (SimGRAG: pattern (LLM) → top-k subgraphs) → the
        answer with its evidence; ``stream``: its stages as they happen (NDJSON), then the answer."""
        def call(engine: SimGRAG, deadline: float) -> Any:
            return engine.ask(body.question, k=body.k, deadline_s=deadline)

        if body.stream:
            return await streamed(request, body.retriever, call, AskResponse, "question")
        result = await on_llm_queue(request, body.retriever, call)
        return AskResponse.model_validate(result.to_dict())

    @app.post("/v1/verify", response_model=VerifyResponse, dependencies=guarded, responses={**errors, **streaming})
    async def verify(body: VerifyRequest, request: Request) -> Any:
        """Claim → the chosen retriever's context → Supported / Refuted with its evidence; ``stream``: its
        stages as they happen (NDJSON), then the verdict."""
        def call(engine: SimGRAG, deadline: float) -> Any:
            return engine.verify(body.claim, k=body.k, deadline_s=deadline)

        if body.stream:
            return await streamed(request, body.retriever, call, VerifyResponse, "claim")
        result = await on_llm_queue(request, body.retriever, call)
        return VerifyResponse.model_validate(result.to_dict())

    # OpenAI-compatible chat (/v1/chat/completions, /v1/models): same key, LLM queue and deadline
    app.include_router(chat_router(state.require, lambda fn: llm_queue.run(fn, settings.timeout_s), _error_response,
                                   dependencies=guarded, timeout_s=settings.timeout_s))

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


async def _ndjson(events: asyncio.Queue[dict[str, Any]], work: asyncio.Future[Any],
                 shape: type[AskResponse] | type[VerifyResponse], arrived: float) -> AsyncIterator[bytes]:
    """The stage events as they come, then the result or the error (one JSON object a line)."""
    while True:
        getter = asyncio.ensure_future(events.get())
        done, _ = await asyncio.wait({getter, work}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            break
        yield _line(getter.result())
    while not events.empty():  # emitted before the work ended: a stage always precedes the result
        yield _line(events.get_nowait())
    elapsed = round(time.monotonic() - arrived, 3)
    try:
        body = shape.model_validate(work.result().to_dict()).model_dump(mode="json")
    except Exception as exc:  # the error body and status the non-streaming call would have answered
        status, error = _error_event(exc)
        yield _line({"event": "error", "status": status, "elapsed_s": elapsed, "error": error})
        return
    yield _line({"event": "result", "elapsed_s": elapsed, "result": body})


def _line(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")


def _error_event(exc: Exception) -> tuple[int, dict[str, str]]:
    for kind, status, code in _STATUS:
        if isinstance(exc, kind):
            if not isinstance(exc, (NotReadyError, AuthError, QueueFullError, QueueTimeoutError)):
                logger.warning("a streamed request failed: %s: %s", type(exc).__name__, exc)
            return status, limits.error_body(code, str(exc))
    logger.error("a streamed request failed", exc_info=exc)
    return 500, limits.error_body("internal", f"internal error ({type(exc).__name__}); see the server log")


def _search_deadline(engine: SimGRAG, left: float) -> float:
    """The engine's search deadline (10 s by default), cut to what is left of the request's."""
    own = engine.retrieval.deadline_s
    return left if own is None else min(own, left)


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
