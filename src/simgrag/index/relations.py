"""New relation aliases for a finished index directory, without rebuilding it.

Relations are few, so only their texts are embedded again (the readable name plus the new aliases,
as a build does: :func:`~simgrag.index.directory.with_relation_aliases` does the same in memory). The
entity vectors and index stay as they are. :func:`refresh_relation_aliases` rewrites
``relation_index/``, ``relation_owner.npy`` and ``relation_texts.json``, attaches the aliases file
(``relation_aliases.yaml``, :mod:`simgrag.index.attach`) and writes the manifest last, its ``files``
table updated, so ``simgrag check`` passes afterwards. Each file is replaced in one step; an
interruption between them leaves an index whose open-time checks fail (relation texts and vectors
disagree) until the same command is run again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simgrag.errors import IndexDirError
from simgrag.fileio import write_bytes_atomic, write_npy_atomic
from simgrag.index.attach import put_attachment, read_manifest_json, write_manifest
from simgrag.index.directory import IndexDir, _label_texts, load_aliases, open_index_dir
from simgrag.index.exact import ExactIndex
from simgrag.index.verify import file_digests

__all__ = ["refresh_relation_aliases"]

logger = logging.getLogger(__name__)

_RELATION_FILES = ("relation_index", "relation_owner.npy", "relation_texts.json")


def refresh_relation_aliases(index: IndexDir | str | Path, aliases: str | Path, *,
                             info: Mapping[str, Any] | None = None) -> IndexDir:
    """Embed the relation texts of ``index`` again with the aliases file ``aliases`` (YAML
    ``relation: [phrase, …]``; unknown relation names are a :class:`~simgrag.errors.ConfigError`),
    attach that file and return the index reopened. ``info`` goes into the attachment's record."""
    t0 = time.perf_counter()
    opened = index if isinstance(index, IndexDir) else open_index_dir(index)
    root, store = opened.path, opened.store
    table = load_aliases(Path(aliases), store)
    texts, owner = _label_texts(list(store.relations), table)
    relation_index = ExactIndex(dim=opened.embedder.dim)
    relation_index.add(opened.embedder.encode(texts, show_progress=False))
    manifest = read_manifest_json(root)
    try:
        _replace_dir_contents(root / "relation_index", relation_index)
        write_npy_atomic(root / "relation_owner.npy", owner)
        write_bytes_atomic(root / "relation_texts.json", json.dumps(texts, ensure_ascii=False).encode("utf-8"))
        put_attachment(root, manifest, "relation_aliases", Path(aliases), info=info)
    except OSError as exc:
        raise IndexDirError(f"Writing the new relation texts of {root} failed ({exc}); run the same command "
                            "again to finish it.") from exc
    manifest["relation_index"] = {"kind": "exact", "texts": len(texts), "aliases": sum(map(len, table.values())),
                                  "refreshed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if isinstance(manifest.get("files"), dict):
        manifest["files"] = {name: digest for name, digest in manifest["files"].items()
                             if not name.startswith(_RELATION_FILES)}
        manifest["files"].update(_relation_digests(root))
    write_manifest(root, manifest)
    logger.info("%s: %d relation texts embedded (%d aliases) in %.2f s", root, len(texts),
                manifest["relation_index"]["aliases"], time.perf_counter() - t0)
    return open_index_dir(root, embedder=opened.embedder)


def _relation_digests(root: Path) -> dict[str, str]:
    """sha256 of the relation files only (the entity files are large and unchanged)."""
    digests = {f"relation_index/{name}": digest for name, digest in file_digests(root / "relation_index").items()}
    for name in _RELATION_FILES[1:]:
        digests[name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
    return digests


def _replace_dir_contents(target: Path, index: ExactIndex) -> None:
    """Save ``index`` into ``target`` by saving it beside it and swapping the folders."""
    fresh = target.parent / f".{target.name}.new"
    old = target.parent / f".{target.name}.old"
    for leftover in (fresh, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    fresh.mkdir()
    index.save(fresh)
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)
