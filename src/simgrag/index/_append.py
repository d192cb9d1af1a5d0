"""New entity vectors appended to an index directory's files, for live updates (:mod:`simgrag.index.update`).

The copy of the existing rows is the long part on a large KG (a 1M x 256 float file is 1 GB), and it
does not depend on the new rows: :class:`Appending` runs it (and opens the entity index) in a
thread while the new names are embedded; :meth:`Appending.finish` then writes the new rows, adds them
to the index and saves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import numpy as np

from simgrag.errors import IndexDirError
from simgrag.index.base import VectorIndex
from simgrag.index.derive import _place
from simgrag.index.registry import load_index

__all__ = ["Appending"]

_COPY_CHUNK = 1 << 24


class _VectorFile:
    """``src``'s float32 rows, then ``extra`` more, written to ``dst`` with its sha256 on the way."""

    def __init__(self, src: Path, dst: Path, extra: int) -> None:
        self.src = src
        self._in: BinaryIO = src.open("rb")
        self._out: BinaryIO = dst.open("wb")
        version = np.lib.format.read_magic(self._in)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(self._in)
        if fortran or dtype != np.float32 or len(shape) != 2:
            raise IndexDirError(f"{src} holds {dtype} {shape}, expected float32 rows; rebuild the index.")
        self.rows, self.dim = int(shape[0]), int(shape[1])
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
                                                      "fortran_order": False, "shape": (self.rows + extra, self.dim)})
        self._digest = hashlib.sha256(header.getvalue())
        self._out.write(header.getvalue())

    def copy_existing(self) -> None:
        remaining = self.rows * self.dim * 4
        while remaining:
            chunk = self._in.read(min(_COPY_CHUNK, remaining))
            if not chunk:
                raise IndexDirError(f"{self.src} is shorter than its header says; rebuild the index.")
            self._digest.update(chunk)
            self._out.write(chunk)
            remaining -= len(chunk)

    def finish(self, rows: np.ndarray) -> str:
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise IndexDirError(f"new vectors of shape {rows.shape} for {self.dim}-d entity vectors")
        tail = np.ascontiguousarray(rows, dtype="<f4").tobytes()
        self._digest.update(tail)
        self._out.write(tail)
        self.close()
        return self._digest.hexdigest()

    def close(self) -> None:
        self._in.close()
        self._out.close()


class Appending:
    """An append in progress (see the module docstring)."""

    def __init__(self, root: Path, work: Path, extra: int, kind: str) -> None:
        self.work, self.kind = work, kind
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simgrag-append")
        self._file = _VectorFile(root / "entity_vectors.npy", work / "entity_vectors.npy", extra)
        self._ready: Future[VectorIndex | None] = self._pool.submit(self._prepare, root)

    def _prepare(self, root: Path) -> VectorIndex | None:
        self._file.copy_existing()
        _place(root / "entity_index", self.work / "entity_index", link=True)  # files the add rewrites are replaced
        if self.kind == "faiss-ivfpq":  # it maps the vectors file, which is complete only after finish()
            return None
        return load_index(self.work / "entity_index")

    def finish(self, rows: np.ndarray) -> str:
        """Write ``rows``, add them to the entity index, save it; returns the vectors file's sha256."""
        index = self._ready.result()
        digest = self._file.finish(rows)
        if index is None:
            index = load_index(self.work / "entity_index")
        index.add(rows)
        index.save(self.work / "entity_index")
        return digest

    def abandon(self) -> None:
        """Stop after an error elsewhere (the work directory is discarded)."""
        self._ready.cancel()
        with contextlib.suppress(Exception):  # the error that matters is the caller's
            self._ready.result()
        self._file.close()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
