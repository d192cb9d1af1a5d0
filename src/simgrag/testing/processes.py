"""Servers on loopback for tests and benchmarks: a free port, and a child process stopped for sure."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

__all__ = ["free_port", "stop_process"]


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
