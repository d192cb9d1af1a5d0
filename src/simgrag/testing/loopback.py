"""Servers on loopback for tests and benchmarks: a free port, an app served in a thread, and a child process
stopped for sure."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["free_port", "stop_process", "uvicorn_in_thread"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 30) -> None:
    """Terminate ``proc``; kill it when it has not exited after ``grace_s`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def uvicorn_in_thread(app: Any, *, wait_s: float = 30, **config: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a daemon thread; yields its base URL once the
    server has started (or ``wait_s`` passed) and stops it on exit. ``config``: more ``uvicorn.Config``."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + wait_s
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
