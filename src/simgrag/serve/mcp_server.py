"""The KG as an MCP server: ``ask``, ``verify``, ``retrieve`` and ``kg_stats`` tools for AI assistants.

Built on the official MCP Python SDK (``pip install 'simgrag[mcp]'``, mcp 2.x ``MCPServer``), served
over stdio (an assistant starts ``simgrag mcp INDEX`` itself) or streamable HTTP (``--transport
http``, loopback by default, ``--auth-key`` required as ``Authorization: Bearer`` when set). Each tool
result carries a readable text (the answer and the evidence triples with their IRIs) and the full
JSON result as structured content: pattern, every subgraph with its distances, timings.

The engine (index, embedder, LLM) is loaded on the first tool call, so the host's handshake is
immediate; LLM-bound tools run one at a time in a worker thread (the embedded model is not
thread-safe), retrieval and stats alongside. Errors come back as tool errors with simgrag's message.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import numpy as np
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from simgrag.errors import SimGRAGError
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import AdjustableRetriever
from simgrag.serve.evidence_text import evidence_block, reply_text
from simgrag.serve.schemas import MAX_TEXT_CHARS

__all__ = ["BearerKeyMiddleware", "create_mcp_server", "mcp_http_app"]

logger = logging.getLogger(__name__)

EngineSource = SimGRAG | Callable[[], SimGRAG]
Question = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS, description="a question about the KG")]
Claim = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS, description="a factual claim to check")]
K = Annotated[int, Field(ge=1, le=50, description="subgraphs to retrieve (top-k by Graph Semantic Distance)")]
PatternArg = Annotated[list[Annotated[list[str], Field(min_length=3, max_length=3)]], Field(
    min_length=1, max_length=12, description='pattern triples [head, relation, tail]; unknown nodes are written '
    '"UNKNOWN <type> <n>", e.g. [["Inception", "directed by", "UNKNOWN director 1"]]')]

INSTRUCTIONS = ("Question answering and fact checking grounded in a knowledge graph (SimGRAG). `ask` answers a "
                "question, `verify` checks a claim (Supported / Refuted / Not enough evidence), `retrieve` returns "
                "the KG subgraphs most similar to a pattern graph without an LLM, `kg_stats` describes the KG. "
                "Every answer comes with the KG triples it was drawn from.")


class _Engine:
    """The engine, built on first use; LLM work one call at a time."""

    def __init__(self, source: EngineSource) -> None:
        self._source = source
        self._engine: SimGRAG | None = source if isinstance(source, SimGRAG) else None
        self._lock = threading.Lock()
        self.llm_limiter = anyio.CapacityLimiter(1)

    def get(self) -> SimGRAG:
        with self._lock:
            if self._engine is None:
                self._engine = self._source()  # type: ignore[operator]
            return self._engine


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _kg_stats(engine: SimGRAG) -> dict[str, Any]:
    store, manifest = engine.index.store, engine.index.manifest
    counts = np.bincount(store.rels, minlength=store.num_relations).tolist()
    return {"entities": store.num_entities, "relations": store.num_relations, "triples": store.num_triples,
            "types": store.num_types, "relation_counts": {store.relations[i]: n for i, n in enumerate(counts)},
            "source": manifest.get("kg", {}).get("source"), "format": manifest.get("kg", {}).get("format"),
            "index_kind": manifest.get("entity_index", {}).get("kind"),
            "embedder": manifest.get("embedder", {}).get("name"), "has_iris": store.iris is not None}


def create_mcp_server(engine: EngineSource, *, name: str = "simgrag") -> MCPServer:
    """An ``MCPServer`` with the four tools over ``engine`` (a :class:`SimGRAG` or a function making one)."""
    state = _Engine(engine)
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")

    async def run(fn: Callable[[SimGRAG], Any], *, llm: bool) -> Any:
        def job() -> Any:
            return fn(state.get())

        try:
            return await anyio.to_thread.run_sync(job, limiter=state.llm_limiter if llm else None)
        except SimGRAGError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    @server.tool(description="Answer a question from the knowledge graph, with the KG triples it rests on.")
    async def ask(question: Question, k: K = 3) -> CallToolResult:
        def answer(engine: SimGRAG) -> dict[str, Any]:
            return dict(engine.ask(question, k=_per_call_k(engine, k)).to_dict())

        result = await run(answer, llm=True)
        return _result(reply_text(result), result)

    @server.tool(description="Check a claim against the knowledge graph: Supported, Refuted or Not enough "
                             "evidence, with the KG triples it rests on.")
    async def verify(claim: Claim, k: K = 3) -> CallToolResult:
        def check(engine: SimGRAG) -> dict[str, Any]:
            return dict(engine.verify(claim, k=_per_call_k(engine, k)).to_dict())

        result = await run(check, llm=True)
        return _result(reply_text(result, verify=True), result)

    @server.tool(description="The KG subgraphs most similar to a pattern graph (no LLM): each with its nodes, "
                             "triples and Graph Semantic Distance.")
    async def retrieve(pattern: PatternArg, k: K = 3) -> CallToolResult:
        def search(engine: SimGRAG) -> dict[str, Any]:
            return dict(engine.retrieve(pattern, _with_k(engine, k)).to_dict())

        result = await run(search, llm=False)
        return _result(evidence_block(result), result)

    @server.tool(description="Size of the knowledge graph: entities, relations, triples, per-relation counts, "
                             "where it was read from and how it is indexed.")
    async def kg_stats() -> CallToolResult:
        stats = await run(_kg_stats, llm=False)
        return _result(json.dumps(stats, ensure_ascii=False, indent=1), stats)

    return server


def _per_call_k(engine: SimGRAG, k: int) -> int | None:
    """``k`` for retrievers that can change it per call (SimGRAG's), else their own."""
    return k if isinstance(engine.retriever, AdjustableRetriever) else None


def _with_k(engine: SimGRAG, k: int) -> Any:
    from dataclasses import replace

    return replace(engine.retrieval, k=k)


class BearerKeyMiddleware:
    """Require ``Authorization: Bearer KEY`` (or ``X-API-Key``) on every HTTP request (401 otherwise)."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"x-api-key")
            auth = headers.get(b"authorization", b"")
            if given is None and auth.lower().startswith(b"bearer "):
                given = auth[7:].strip()
            if given is None or not hmac.compare_digest(given, self.key):
                body = {"error": "unauthorized", "detail": "missing or wrong key (Authorization: Bearer KEY)"}
                await JSONResponse(body, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def mcp_http_app(server: MCPServer, *, host: str = "127.0.0.1", path: str = "/mcp",
                 api_key: str | None = None) -> ASGIApp:
    """The streamable-HTTP ASGI app of ``server`` at ``path`` (DNS-rebinding protection on loopback)."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerKeyMiddleware(app, api_key) if api_key else app
