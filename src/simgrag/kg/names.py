"""Compact, persistable string tables: every name once, addressed by integer id.

Names live in one UTF-8 blob with an offsets array, so a 10M-entity table is two numpy arrays (and
can be memory-mapped) instead of 10M Python strings. The reverse lookup (name → id) is built lazily,
only when someone asks for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Literal

import numpy as np

from simgrag.errors import KGError

__all__ = ["NameTable"]


class NameTable(Sequence[str]):
    """An immutable list of unique names stored as ``blob`` + ``offsets``."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = offsets
        self._index: dict[str, int] | None = None

    @classmethod
    def from_names(cls, names: Iterable[str]) -> NameTable:
        encoded = [name.encode("utf-8") for name in names]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        if encoded:
            np.cumsum([len(b) for b in encoded], out=offsets[1:])
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return cls(blob, offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @property
    def blob(self) -> np.ndarray:
        """Every name's UTF-8 bytes, back to back (uint8; read-only by convention)."""
        return np.asarray(self._blob)

    @property
    def offsets(self) -> np.ndarray:
        """Name ``i`` is ``blob[offsets[i]:offsets[i + 1]]`` (int64, ``len(self) + 1`` values)."""
        return np.asarray(self._offsets)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        if i < 0:
            i += len(self)
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        return bytes(self._blob[start:end]).decode("utf-8")

    def take(self, ids: Sequence[int] | np.ndarray) -> list[str]:
        """The names of ``ids`` (many at once: one pass without per-item array indexing)."""
        blob = np.asarray(self._blob).view(np.ndarray)
        index = np.asarray(ids, dtype=np.int64)
        offsets = np.asarray(self._offsets)
        starts, ends = offsets[index].tolist(), offsets[index + 1].tolist()
        return [blob[s:e].tobytes().decode("utf-8") for s, e in zip(starts, ends, strict=True)]

    def __iter__(self) -> Iterator[str]:
        data = bytes(self._blob)
        offsets = self._offsets.tolist()
        for start, end in pairwise(offsets):
            yield data[start:end].decode("utf-8")

    def to_list(self) -> list[str]:
        """Every name, in id order (one decode of the whole blob when no name holds a NUL byte: ~4x
        faster than iterating, for the reverse index of a million names)."""
        blob = np.asarray(self._blob).view(np.ndarray)
        if len(self) == 0 or bool((blob == 0).any()):
            return list(self)
        joined = np.insert(blob, np.asarray(self._offsets[1:-1], dtype=np.int64), 0)  # NUL between names
        return joined.tobytes().decode("utf-8").split("\x00")

    def id_of(self, name: str) -> int | None:
        """The id of ``name``, or ``None``; the first call builds the reverse index."""
        if self._index is None:
            index = dict(zip(self.to_list(), range(len(self)), strict=True))
            if len(index) != len(self):  # a corrupt table: a lookup would silently pick one of the twins
                raise KGError(f"The name table holds {len(self) - len(index):,} duplicate name(s); the index is "
                              "corrupt, rebuild it")
            self._index = index
        return self._index.get(name)

    def save(self, directory: Path, stem: str) -> None:
        np.save(directory / f"{stem}_blob.npy", self._blob)
        np.save(directory / f"{stem}_offsets.npy", self._offsets)

    @classmethod
    def load(cls, directory: Path, stem: str, *, mmap: bool = True) -> NameTable:
        mode: Literal["r"] | None = "r" if mmap else None
        blob = np.load(directory / f"{stem}_blob.npy", mmap_mode=mode)
        offsets = np.load(directory / f"{stem}_offsets.npy", mmap_mode=mode)
        return cls(blob, offsets)

    def nbytes(self) -> int:
        return int(self._blob.nbytes + self._offsets.nbytes)
