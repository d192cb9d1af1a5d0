"""A real SPARQL endpoint on loopback for tests and benchmarks: Oxigraph's server.

The ``oxigraph`` wheel (PyPI, in simgrag's ``dev`` extra) ships the ``oxigraph`` binary; this starts
``oxigraph serve`` on a store directory loaded from RDF files, and can kill it (SIGKILL, as a
crash) and start it again on the same data — what the SPARQL source's resume tests need::

    with OxigraphServer.loaded(tmp / "db", [kb_nt]) as server:
        SparqlSource(server.query_url).load()
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

__all__ = ["OxigraphServer", "oxigraph_binary"]

logger = logging.getLogger(__name__)


def oxigraph_binary() -> str | None:
    """The ``oxigraph`` executable: beside this Python first (a venv), else on ``PATH``."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("oxigraph")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OxigraphServer:
    """``oxigraph serve`` over ``location`` on 127.0.0.1 (a free port unless given)."""

    def __init__(self, location: Path, *, port: int | None = None, binary: str | None = None) -> None:
        found = binary or oxigraph_binary()
        if found is None:
            raise FileNotFoundError("the oxigraph binary is missing: pip install oxigraph")
        self.binary = found
        self.location = Path(location)
        self.port = port or _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def loaded(cls, location: Path, files: Sequence[Path], **options: object) -> OxigraphServer:
        """A server over a new store at ``location`` holding ``files`` (any RDF syntax)."""
        binary = str(options.pop("binary", None) or oxigraph_binary() or "oxigraph")
        args = [binary, "load", "--location", str(location)]
        for file in files:
            args += ["--file", str(file)]
        subprocess.run(args, check=True, capture_output=True, timeout=600)
        return cls(location, binary=binary, **options)  # type: ignore[arg-type]

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/query"

    def start(self, timeout_s: float = 30.0) -> OxigraphServer:
        self.process = subprocess.Popen(
            [self.binary, "serve", "--location", str(self.location), "--bind", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"oxigraph serve exited with {self.process.returncode}")
            try:
                httpx.post(self.query_url, data={"query": "ASK {}"}, timeout=1.0).raise_for_status()
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"oxigraph serve did not answer on {self.query_url} within {timeout_s} s")

    def kill(self) -> None:
        """Stop the server at once (SIGKILL: the endpoint goes down as in a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def __enter__(self) -> OxigraphServer:
        return self.start() if self.process is None else self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.kill()
