"""The console script's fast exit: the whole output and the exit status arrive, as with a normal exit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = "from simgrag.cli import main; main()"


def _run(*args: str, fast: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SIMGRAG_FAST_EXIT": "1" if fast else "0"}
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("args", [("ls",), ("ask",), ("retrieve", "/nonexistent/index.idx", "--pattern", "[]")])
def test_fast_exit_keeps_output_and_status(args: tuple[str, ...]) -> None:
    fast, slow = _run(*args, fast=True), _run(*args, fast=False)
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout)
    assert fast.stderr.strip() == slow.stderr.strip()
    assert fast.returncode == (0 if args == ("ls",) else 2)
    if args == ("ls",):
        assert "Embedders" in fast.stdout and fast.stdout.rstrip().count("\n") > 10  # every registry, whole
