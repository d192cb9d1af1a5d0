"""A disk store of llama.cpp KV states for prompt prefixes, shared across processes.

On 2 CPU cores the embedded model evaluates a prompt at ~35 tokens/s, so the pattern prompt's
~500-token fixed part costs ~15 s and each pair of dynamic few-shot examples another ~2–3 s. The
:class:`~simgrag.llm.llamacpp.LlamaCppLLM` backend saves the KV state after evaluating a prompt's
prefix (everything before the final user message) and, on a later call with the same prefix, in
this process or the next, loads it instead of evaluating it again.

One file per prefix: a header (magic, token count, the prefix's token ids) followed by llama.cpp's
sequence state. Files are written atomically (temporary file + rename) and the store is trimmed to
``max_bytes`` by least recent use (a read touches the file). A file whose header does not match the
requested tokens (corruption, a hash collision) is ignored and replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simgrag.fileio import write_bytes_atomic

__all__ = ["KVStateStore"]

logger = logging.getLogger(__name__)

_MAGIC = b"SGKV1\n"
_SUFFIX = ".kv"
DEFAULT_MAX_BYTES = 4 << 30


class KVStateStore:
    """Directory of saved prefix states, keyed by ``namespace`` (model identity) and token ids."""

    def __init__(self, directory: str | os.PathLike[str], *, namespace: str = "",
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory).expanduser()
        self.namespace = namespace
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"KVStateStore({str(self.directory)!r}, max_bytes={self.max_bytes})"

    def with_namespace(self, namespace: str) -> KVStateStore:
        """The same directory and limit for another model (keys never collide across namespaces)."""
        return KVStateStore(self.directory, namespace=namespace, max_bytes=self.max_bytes)

    def path_for(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(self.namespace.encode("utf-8"))
        digest.update(np.asarray(tokens, dtype=np.int32).tobytes())
        return self.directory / (digest.hexdigest()[:32] + _SUFFIX)

    def get(self, tokens: Sequence[int]) -> bytes | None:
        """The saved state for exactly ``tokens``, or ``None``."""
        path = self.path_for(tokens)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        state = _unpack(blob, tokens)
        if state is None:
            logger.warning("ignoring KV state file %s: its header does not match the prompt", path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least-recently-used bookkeeping
        return state

    def contains(self, tokens: Sequence[int]) -> bool:
        """Whether a state for ``tokens`` is saved (its file exists; :meth:`get` still checks it)."""
        return self.path_for(tokens).is_file()

    def put(self, tokens: Sequence[int], state: bytes) -> None:
        """Save ``state`` for ``tokens`` atomically, then trim the store to ``max_bytes``."""
        blob = _pack(tokens, state)
        if len(blob) > self.max_bytes:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(self.path_for(tokens), blob)
            self._trim()
        except OSError as exc:  # a full or read-only disk must not fail the LLM call
            logger.warning("cannot save a KV state under %s: %s", self.directory, exc)

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[Path, int, float]]:
        entries = []
        for path in self.directory.glob("*" + _SUFFIX):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((path, stat.st_size, stat.st_mtime))
        return entries

    def _trim(self) -> None:
        entries = sorted(self._entries(), key=lambda e: e[2])
        total = sum(size for _, size, _ in entries)
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size


def _pack(tokens: Sequence[int], state: bytes) -> bytes:
    ids = np.asarray(tokens, dtype="<i4").tobytes()
    return _MAGIC + struct.pack("<I", len(tokens)) + ids + state


def _unpack(blob: bytes, tokens: Sequence[int]) -> bytes | None:
    head = len(_MAGIC) + 4
    if len(blob) < head or not blob.startswith(_MAGIC):
        return None
    (n,) = struct.unpack_from("<I", blob, len(_MAGIC))
    end = head + 4 * n
    if n != len(tokens) or len(blob) <= end:
        return None
    if blob[head:end] != np.asarray(tokens, dtype="<i4").tobytes():
        return None
    return blob[end:]

