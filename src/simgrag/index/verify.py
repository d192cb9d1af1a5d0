"""Verification of an index directory: cheap checks at every open, content hashes on demand.

Opening (:func:`~simgrag.index.directory.open_index_dir`) runs, besides the store's own checks
(:mod:`simgrag.kg.checks`):

- :func:`check_manifest` — the manifest is an object with every key the loader reads, of the
  right type (a manifest without ``kg`` or ``embedder`` is an :class:`IndexDirError`, not a
  ``KeyError``);
- :func:`check_loaded` — entity vectors of shape (entities, dim), float32 and finite; relation and
  type owners in range and as many as the texts; and, for stores up to
  :data:`OPEN_HASH_MAX_BYTES`, the KG content hash (names and triples) against the manifest, which
  catches a name changed into another valid name.

:func:`verify_index` (``simgrag check INDEX_DIR``, and the server at start-up) adds the sha256 of
every file, compared with the ``files`` table the build writes into the manifest, and the full
content hash whatever the size. Milvus collections live outside the files and are not hashed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simgrag.errors import IndexDirError, SimGRAGError
from simgrag.fetch import sha256_file
from simgrag.index.attach import check_attachments

if TYPE_CHECKING:
    from simgrag.index.directory import IndexDir
    from simgrag.kg.store import KGStore

__all__ = [
    "OPEN_HASH_MAX_BYTES",
    "VerifyReport",
    "check_loaded",
    "check_manifest",
    "file_digests",
    "raise_on_problems",
    "verify_index",
]

logger = logging.getLogger(__name__)

#: stores whose names and triples take at most this many bytes get their content hash checked at open
OPEN_HASH_MAX_BYTES = 64 * 1024 * 1024
#: entity vector files up to this size are checked for NaN/inf at open (larger ones by ``simgrag check``)
OPEN_FINITE_MAX_BYTES = 1024 * 1024 * 1024
_UNHASHED = ("manifest.json",)

_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "kg": {"content_hash": str, "entities": int, "relations": int, "triples": int},
    "embedder": {"spec": str, "name": str, "dim": int},
    "entity_index": {"kind": str, "params": dict},
}


def _bad(root: Path, problem: str) -> IndexDirError:
    return IndexDirError(f"{root}/manifest.json is corrupt: {problem}; rebuild the index.")


def check_manifest(manifest: Any, root: Path) -> dict[str, Any]:
    """The manifest as a dict, once every key the loader reads is there with the right type."""
    if not isinstance(manifest, dict):
        raise _bad(root, f"the top level is a {type(manifest).__name__}, not an object")
    for section, keys in _SCHEMA.items():
        value = manifest.get(section)
        if not isinstance(value, dict):
            raise _bad(root, f"{section!r} is missing or not an object")
        for key, kind in keys.items():
            item = value.get(key)
            if not isinstance(item, kind) or isinstance(item, bool):
                raise _bad(root, f"{section}.{key} is missing or not a {getattr(kind, '__name__', kind)}")
            if isinstance(item, int) and item < 0:
                raise _bad(root, f"{section}.{key} is negative")
    files = manifest.get("files")
    if files is not None and not (isinstance(files, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
        raise _bad(root, "'files' is not a table of file names to sha256 digests")
    if "duplicates_removed" in manifest["kg"] and not isinstance(manifest["kg"]["duplicates_removed"], int):
        raise _bad(root, "kg.duplicates_removed is not an integer")
    attached = check_attachments(manifest)
    if attached is not None:
        raise _bad(root, attached)
    return manifest


def _store_bytes(store: KGStore) -> int:
    tables = [store.entities, store.relations] + ([store.types] if store.types is not None else [])
    return sum(t.nbytes() for t in tables) + sum(int(a.nbytes) for a in (store.heads, store.rels, store.tails))


def _check_owner(root: Path, what: str, owner: np.ndarray, rows: int, upper: int) -> None:
    if not isinstance(owner, np.ndarray) or owner.ndim != 1 or not np.issubdtype(owner.dtype, np.integer):
        raise IndexDirError(f"{root}/{what} is not a one-dimensional integer array; rebuild the index.")
    if len(owner) != rows or (rows and (int(owner.min()) < 0 or int(owner.max()) >= upper)):
        raise IndexDirError(f"{root}/{what} holds {len(owner):,} ids (expected {rows:,}, each below {upper:,}); "
                            "rebuild the index.")


def check_vectors(root: Path, vectors: np.ndarray, rows: int, dim: int, *, finite: bool) -> None:
    """Entity vectors: (rows, dim) float32, and (when ``finite``) no NaN or inf."""
    if not isinstance(vectors, np.ndarray) or vectors.shape != (rows, dim) or vectors.dtype != np.float32:
        raise IndexDirError(f"{root}/entity_vectors.npy holds {getattr(vectors, 'dtype', '?')} "
                            f"{getattr(vectors, 'shape', '?')}, expected float32 ({rows:,}, {dim}); rebuild the index.")
    if finite and rows and not _all_finite(vectors):
        bad = next(i for i in range(0, rows, 65536) if not np.isfinite(vectors[i:i + 65536]).all())
        raise IndexDirError(f"{root}/entity_vectors.npy holds NaN or infinite values (rows {bad:,}…); "
                            "rebuild the index.")


def _all_finite(vectors: np.ndarray) -> bool:
    # a sum is NaN/inf when any term is (embedding values are small: no overflow); ~5 ms on MetaQA
    return all(bool(np.isfinite(np.sum(vectors[i:i + 65536])))
               for i in range(0, len(vectors), 65536))


def check_loaded(index: IndexDir, *, content_hash: bool | None = None) -> None:
    """The open-time checks on an opened index (see the module docstring)."""
    root, store, manifest = index.path, index.store, index.manifest
    vec_bytes = int(getattr(index.entity_vectors, "nbytes", 0))
    check_vectors(root, index.entity_vectors, store.num_entities, int(manifest["embedder"]["dim"]),
                  finite=vec_bytes <= OPEN_FINITE_MAX_BYTES)
    texts = index.relation_texts
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or (
            len(texts) != index.relation_index.ntotal):
        raise IndexDirError(f"{root}/relation_texts.json does not list one text per relation vector; "
                            "rebuild the index.")
    _check_owner(root, "relation_owner.npy", index.relation_owner, index.relation_index.ntotal, store.num_relations)
    if index.type_index is not None:
        if index.type_owner is None:
            raise IndexDirError(f"{root}/type_owner.npy is missing; rebuild the index.")
        _check_owner(root, "type_owner.npy", index.type_owner, index.type_index.ntotal, store.num_types)
    if content_hash if content_hash is not None else _store_bytes(store) <= OPEN_HASH_MAX_BYTES:
        check_content_hash(root, store, manifest)


def check_content_hash(root: Path, store: KGStore, manifest: Mapping[str, Any]) -> None:
    want = manifest["kg"]["content_hash"]
    if store.content_hash() != want:
        raise IndexDirError(f"{root}: the KG store's content hash differs from the manifest's ({want[:12]}…): the "
                            "names or triples changed after the build; rebuild the index.")


def _data_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.as_posix() not in _UNHASHED and "milvus" not in rel.as_posix():
            yield path  # a Milvus Lite file changes when opened: its collection is checked by its count


def file_digests(root: Path) -> dict[str, str]:
    """sha256 of every data file under ``root`` (relative POSIX path → hex digest)."""
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in _data_files(root)}


@dataclass
class VerifyReport:
    """What :func:`verify_index` checked (``checks``: name → seconds) and what it found."""

    path: str
    checks: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "checks": self.checks, "problems": self.problems,
                "notes": self.notes}


def verify_index(index: IndexDir | str | Path, *, embedder: Any = None) -> VerifyReport:
    """Every check: open (with the full store checks), the content hash and each file's sha256."""
    from simgrag.index.directory import open_index_dir

    report = VerifyReport(str(index.path if not isinstance(index, (str, Path)) else index))
    t = time.perf_counter()
    if isinstance(index, (str, Path)):
        try:
            index = open_index_dir(index, embedder=embedder, check=True)
        except SimGRAGError as exc:
            report.problems.append(f"open: {exc}")
            return report
    report.checks["open_s"] = time.perf_counter() - t
    root = index.path
    for name, run in (("content_hash_s", lambda: check_content_hash(root, index.store, index.manifest)),
                      ("vectors_finite_s", lambda: check_vectors(root, index.entity_vectors, index.store.num_entities,
                                                                 index.embedder.dim, finite=True))):
        t = time.perf_counter()
        try:
            run()
        except SimGRAGError as exc:
            report.problems.append(str(exc))
        report.checks[name] = time.perf_counter() - t
    t = time.perf_counter()
    _compare_files(root, index.manifest.get("files"), report)
    report.checks["file_hashes_s"] = time.perf_counter() - t
    return report


def _compare_files(root: Path, want: Mapping[str, str] | None, report: VerifyReport) -> None:
    if want is None:
        report.notes.append("the manifest has no file hashes (built by an older simgrag): only the KG content "
                            "hash and the structure were checked")
        return
    got = file_digests(root)
    for name in sorted(set(want) | set(got)):
        if name not in got:
            report.problems.append(f"{name}: missing")
        elif name not in want:
            report.problems.append(f"{name}: not part of the build")
        elif got[name] != want[name]:
            report.problems.append(f"{name}: sha256 {got[name][:12]}… differs from the build's {want[name][:12]}…")
    report.notes.append(f"{len(got)} files hashed")


def raise_on_problems(report: VerifyReport) -> None:
    """An :class:`IndexDirError` listing the problems of a failed :func:`verify_index`."""
    if report.problems:
        raise IndexDirError(f"{report.path} fails its checks; rebuild the index:\n  " + "\n  ".join(report.problems))
