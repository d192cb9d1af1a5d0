"""The MCP server driven by the official MCP SDK's own client, as an MCP host calls it: over stdio (a
subprocess the client starts, with the scripted FakeLLM; and the real `simgrag mcp` command with the
embedded model) and over streamable HTTP on loopback (with the bearer key)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("pyoxigraph")

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from simgrag.llm.llamacpp import llama_cpp_available
from simgrag.pipeline import SimGRAG
from simgrag.serve.mcp_server import create_mcp_server, mcp_http_app
from simgrag.testing.llm import FakeLLM
from simgrag.testing.loopback import uvicorn_in_thread
from simgrag.testing.rdf import entity_iri
from test_serve_api import scripted

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"
KEY = "mcp-test-key"
TOOLS = {"ask", "verify", "retrieve", "kg_stats"}


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(SRC), str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path, "HF_HUB_OFFLINE": "1", **{k: v for k, v in os.environ.items()
                                                          if k.startswith("SIMGRAG_") or k == "HOME"}}


async def _session(client: Client) -> dict[str, Any]:
    """What a host does: list the tools, then call each; the results as plain data."""
    tools = await client.list_tools()
    out: dict[str, Any] = {"tools": {t.name: t for t in tools.tools}}
    out["ask"] = await client.call_tool("ask", {"question": "who directed Titanic?"})
    out["verify"] = await client.call_tool("verify", {"claim": "Titanic was directed by James Cameron.", "k": 2})
    out["retrieve"] = await client.call_tool("retrieve", {"pattern": [["UNKNOWN movie 1", "starred actors",
                                                                        "Kate Winslet"]], "k": 1})
    out["kg_stats"] = await client.call_tool("kg_stats", {})
    out["bad"] = await client.call_tool("retrieve", {"pattern": [["only two", "items"]]})
    out["unparsable"] = await client.call_tool("ask", {"question": "make me a sandwich"})
    return out


def _check(results: dict[str, Any]) -> None:
    assert set(results["tools"]) == TOOLS
    assert "question" in results["tools"]["ask"].input_schema["properties"]
    ask = results["ask"]
    assert not ask.is_error
    text = ask.content[0].text
    assert text.startswith("James Cameron\n\nEvidence from the knowledge graph:\n"
                           "1. (Titanic, directed_by, James Cameron)")
    assert f"<{entity_iri('Titanic')}>" in text
    assert ask.structured_content["pattern"] == [["Titanic", "directed by", "UNKNOWN director 1"]]
    edge = ask.structured_content["evidence"]["matches"][0]["edges"][0]
    assert edge["triple"] == ["Titanic", "directed_by", "James Cameron"] and edge["iris"][0] == entity_iri("Titanic")
    verify = results["verify"]
    assert verify.content[0].text.startswith("Supported") and verify.structured_content["label"] == "Supported"
    assert len(verify.structured_content["evidence"]["matches"]) <= 2
    retrieved = results["retrieve"].structured_content
    assert retrieved["matches"][0]["edges"][0]["triple"] == ["Titanic", "starred_actors", "Kate Winslet"]
    assert results["retrieve"].content[0].text.startswith("Evidence from the knowledge graph:\n1. (Titanic, ")
    stats = results["kg_stats"].structured_content
    assert (stats["entities"], stats["triples"], stats["format"], stats["has_iris"]) == (17, 17, "turtle", True)
    assert results["bad"].is_error  # the SDK validates the arguments against the tool's schema
    unparsable = results["unparsable"]
    assert unparsable.is_error and "PatternParseError" in unparsable.content[0].text


def test_stdio_with_the_sdk_client(toy_rdf_index: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(TESTS / "mcp_fake_server.py"), str(toy_rdf_index)],
                                   env=_env())

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            return await _session(client)

    _check(anyio.run(main))


@pytest.fixture
def http_server(toy_rdf_index: Path) -> Iterator[str]:
    engine = SimGRAG(toy_rdf_index, llm=FakeLLM(scripted), claim_examples=None)
    with uvicorn_in_thread(mcp_http_app(create_mcp_server(engine), api_key=KEY)) as url:
        yield f"{url}/mcp"


def test_streamable_http_with_the_sdk_client(http_server: str) -> None:
    async def main() -> dict[str, Any]:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http, \
                Client(streamable_http_client(http_server, http_client=http)) as client:
            return await _session(client)

    _check(anyio.run(main))
    denied = httpx.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"Authorization": "Bearer wrong", "Accept": "application/json, text/event-stream"})
    assert denied.status_code == 401


def test_the_cli_over_stdio_without_an_llm(toy_rdf_index: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "simgrag.cli", "mcp", str(toy_rdf_index),
                                                                 "--llm", "none"], env=_env())

    async def main() -> tuple[Any, Any, Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            pattern = [["Inception", "directed by", "UNKNOWN director 1"]]
            return (await client.call_tool("retrieve", {"pattern": pattern}), await client.call_tool("kg_stats", {}),
                    await client.call_tool("ask", {"question": "who directed Inception?"}))

    retrieved, stats, ask = anyio.run(main)
    assert retrieved.structured_content["matches"][0]["edges"][0]["triple"][2] == "Christopher Nolan"
    assert stats.structured_content["relations"] == 5
    assert ask.is_error and "retrieval only" in ask.content[0].text


@pytest.mark.slow
@pytest.mark.llm
def test_the_cli_over_stdio_with_the_embedded_model() -> None:
    """`simgrag mcp` on the bundled sample KG with MiniLM and the embedded Qwen model, as configured in
    an assistant's mcpServers entry (no index argument: the sample index, built once into the cache)."""
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python or the embedded model is not installed")
    params = StdioServerParameters(command=sys.executable, args=["-m", "simgrag.cli", "mcp"], env=_env())

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=600) as client:
            return await client.call_tool("ask", {"question": "Who directed Inception?"})

    result = anyio.run(main)
    assert not result.is_error, result.content[0].text
    assert "Christopher Nolan" in result.content[0].text
    assert result.structured_content["evidence"]["matches"]
