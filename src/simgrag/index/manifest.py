"""The small ``index.json`` every vector index writes next to its data.

A saved index directory describes itself::

    {"format_version": 1, "kind": "faiss-hnsw", "dim": 384, "ntotal": 43234,
     "params": {"M": 32, "ef_construction": 200, "ef_search": 128}}

:func:`simgrag.index.registry.load_index` reads it to pick the implementation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import IndexDirError
from simgrag.fileio import atomic_path

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "IndexManifest",
    "int_params",
    "open_index_file",
    "read_manifest",
    "save_index_manifest",
    "write_manifest",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST_NAME = "index.json"


@dataclass(frozen=True)
class IndexManifest:
    """What ``index.json`` holds: enough to rebuild the object that wrote it."""

    kind: str
    dim: int
    ntotal: int
    params: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version,
            "kind": self.kind,
            "dim": self.dim,
            "ntotal": self.ntotal,
            "params": dict(self.params),
        }


def _write_text_atomic(target: Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_manifest(directory: Path, manifest: IndexManifest) -> Path:
    """Write ``directory/index.json`` atomically and return its path."""
    path = Path(directory) / MANIFEST_NAME
    _write_text_atomic(path, json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n")
    return path


def save_index_manifest(directory: Path, index: Any, what: str, params: Mapping[str, Any] | None = None) -> Path:
    """The last step of an index's ``save``: ``index.json`` describing ``index`` (its kind, dim, ntotal and
    ``params``, default its own), then one log line naming it ``what``."""
    path = write_manifest(directory, IndexManifest(index.kind, index.dim, index.ntotal,
                                                   index.params if params is None else params))
    logger.info("saved %s (%d x %d) to %s", what, index.ntotal, index.dim, directory)
    return path


def open_index_file(directory: Path, kind: str, data_file: str) -> tuple[IndexManifest, Path]:
    """The first step of an index's ``load``: its checked ``index.json`` and the path of its ``data_file``."""
    directory = Path(directory)
    return read_manifest(directory, expect_kind=kind), directory / data_file


def int_params(directory: Path, params: Mapping[str, Any]) -> dict[str, int]:
    """``params`` of ``directory/index.json`` as integers; a value that is none (a word, ``Infinity``, a list)
    is an :class:`IndexDirError` naming it."""
    out: dict[str, int] = {}
    for key, value in params.items():
        try:
            out[key] = int(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise IndexDirError(f"{directory}/index.json: parameter {key!r} = {value!r} is not an integer; "
                                "rebuild the index.") from exc
    return out


def read_manifest(directory: Path, *, expect_kind: str | None = None) -> IndexManifest:
    """Read and check ``directory/index.json``; raise :class:`IndexDirError` if unusable."""
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        raise IndexDirError(
            f"No vector index in {directory}: {MANIFEST_NAME} is missing. Build the index first."
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        manifest = _manifest_from_json(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexDirError(
            f"{path} is corrupt ({exc}); delete the directory and rebuild the index."
        ) from exc
    if manifest.format_version > FORMAT_VERSION:
        raise IndexDirError(
            f"{path} has format version {manifest.format_version}, newer than this simgrag understands "
            f"({FORMAT_VERSION}); upgrade simgrag or rebuild the index."
        )
    if expect_kind is not None and manifest.kind != expect_kind:
        raise IndexDirError(f"{path} describes a {manifest.kind!r} index, not {expect_kind!r}.")
    return manifest


def _manifest_from_json(raw: Any) -> IndexManifest:
    _check(isinstance(raw, dict), "top level is not an object")
    params = raw.get("params", {})
    _check(isinstance(params, dict), "'params' is not an object")
    return IndexManifest(
        kind=str(raw["kind"]),
        dim=int(raw["dim"]),
        ntotal=int(raw["ntotal"]),
        params=params,
        format_version=int(raw.get("format_version", FORMAT_VERSION)),
    )


def _check(condition: bool, reason: str) -> None:
    if not condition:
        raise ValueError(reason)
