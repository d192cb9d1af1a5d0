"""`simgrag mcp INDEX`: the KG as an MCP server (stdio for assistants that start it, or streamable HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simgrag.cli._common import (
    AbstainGsd,
    AnswerMode,
    ApiKey,
    BaseUrl,
    Examples,
    LLMChoice,
    LLMOpt,
    LLMTimeout,
    Quiet,
    Verbose,
    _fail,
    _setup_logging,
    app,
    console,
)
from simgrag.errors import ConfigError, SimGRAGError


@app.command()
def mcp(
    index_dir: Annotated[Path | None, typer.Argument(help="index directory (default: the bundled sample KG)")] = None,
    transport: Annotated[str, typer.Option(help="stdio (the assistant starts this command) | http "
                                                "(streamable HTTP at --host:--port --path)")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address; loopback by default")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8001,
    path: Annotated[str, typer.Option(help="HTTP endpoint path")] = "/mcp",
    auth_key: Annotated[str | None, typer.Option(envvar="SIMGRAG_MCP_KEY", help="HTTP: require Authorization: "
                                                 "Bearer KEY")] = None,
    llm: LLMOpt = "llamacpp", base_url: BaseUrl = None, api_key: ApiKey = None, llm_timeout: LLMTimeout = None,
    examples: Examples = None,
    abstain_gsd: AbstainGsd = None, answer_mode: AnswerMode = None,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Serve the KG to AI assistants over MCP: tools ask, verify, retrieve and kg_stats, with the evidence.

    Logs go to stderr (stdout carries the protocol on stdio). The index and models load on the first
    tool call."""
    _setup_logging(verbose, quiet)
    try:
        from simgrag.serve.mcp_server import create_mcp_server, mcp_http_app
    except ImportError as exc:
        raise _fail(ConfigError(f"the MCP server needs the mcp extra: pip install 'simgrag[mcp]' ({exc})")) from exc
    if transport not in ("stdio", "http"):
        raise _fail(ConfigError(f"--transport must be stdio or http, got {transport!r}"))
    options = LLMChoice(llm, base_url, api_key, timeout=llm_timeout).options()  # no call cache

    def build() -> Any:
        from simgrag.pipeline import SimGRAG, sample_index

        index = sample_index() if index_dir is None else index_dir
        return SimGRAG(index, llm=None if llm == "none" else llm, llm_options=options,
                       examples=examples, abstain_gsd=abstain_gsd, answer_mode=answer_mode)

    try:
        if index_dir is not None and not (index_dir / "manifest.json").is_file():
            raise ConfigError(f"{index_dir} is not a simgrag index directory (build one with `simgrag index`)")
        server = create_mcp_server(build)
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1") and auth_key is None:
        console.print(f"[yellow]warning:[/] serving MCP on {host} without --auth-key", markup=True)
    uvicorn.run(mcp_http_app(server, host=host, path=path, api_key=auth_key), host=host, port=port,
                access_log=False, log_level="warning" if verbose <= 0 else "info")
