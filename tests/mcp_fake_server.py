"""An MCP server over stdio on an index with the scripted FakeLLM: what test_mcp.py's stdio client talks to.

    python tests/mcp_fake_server.py INDEX_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from simgrag.pipeline import SimGRAG
from simgrag.serve.mcp_server import create_mcp_server
from simgrag.testing.llm import FakeLLM
from test_serve_api import scripted

if __name__ == "__main__":
    engine = SimGRAG(Path(sys.argv[1]), llm=FakeLLM(scripted), claim_examples=None)
    create_mcp_server(engine).run("stdio")
