"""Compaction of a live-updated index directory: retired entities dropped for good.

Live updates (:mod:`simgrag.index.update`) keep an entity that lost its last triple as a *retired*
row (searches skip it). :func:`compact_index_dir` writes a version without them: entity ids are
renumbered in order, their vectors copied without the retired rows, and the entity vector index
rebuilt from those vectors (no entity is embedded again; an HNSW graph or IVF-PQ training costs what
it costs in a build). Relation and type indexes are kept as they are. Like an update, the new version
is assembled beside the index and swapped in atomically; the manifest's update log records it.

    simgrag update kb.idx --compact
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from simgrag.embed.base import Embedder
from simgrag.errors import IndexDirError, SimGRAGError
from simgrag.fileio import write_bytes_atomic
from simgrag.index.base import LocalServerIndex, VectorsAttachable
from simgrag.index.registry import make_index
from simgrag.index.swap import MANIFEST, recover_swap, replace_dir, work_dir
from simgrag.index.update import UpdateResult, _Base, _link, _manifest, _open_base, _update_lock
from simgrag.kg.delta import drop_retired
from simgrag.kg.store import KGStore
from simgrag.progress import progress_on

__all__ = ["compact_index_dir"]

logger = logging.getLogger(__name__)

_BLOCK = 65536
_REWRITTEN = {MANIFEST, "store", "entity_vectors.npy", "entity_index"}


def compact_index_dir(path: str | Path, *, embedder: str | Embedder | None = None,
                      show_progress: bool | None = None) -> UpdateResult:
    """Drop the retired entities of the index at ``path`` (module docstring); nothing to do: no new version."""
    root = Path(path)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with _update_lock(root):
        recover_swap(root)
        base = _open_base(root, embedder, verify=False)
        delta = drop_retired(base.store)
        count = int(base.manifest.get("updates", {}).get("count", 0))
        if not delta.report.entities_dropped:
            return UpdateResult(root, delta.report, count, timings)
        work = work_dir(root)
        if work.exists():
            shutil.rmtree(work)
        try:
            _write_compacted(base, delta.store, work, timings, show_progress)
            linked: set[str] = set()
            for child in sorted(base.root.iterdir()):  # relation and type indexes, calibration files, …
                if child.name not in _REWRITTEN:
                    _link(base.root, work, child.name, linked)
            manifest = _manifest(base, delta, work, linked, {}, timings, {"compact": "retired entities dropped"})
            write_bytes_atomic(work / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
            replace_dir(work, root)
        except SimGRAGError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexDirError(f"Compacting {root} failed: {exc}; the index is unchanged.") from exc
    timings["total_s"] = time.perf_counter() - t0
    logger.info("%s: dropped %d retired entities in %.2f s", root, delta.report.entities_dropped, timings["total_s"])
    return UpdateResult(root, delta.report, count + 1, timings)


def _write_compacted(base: _Base, store: KGStore, work: Path, timings: dict[str, float],
                     show_progress: bool | None) -> None:
    t = time.perf_counter()
    (work / "store").mkdir(parents=True)
    store.save(work / "store")
    live = np.diff(np.asarray(base.store.indptr)) > 0
    old = np.load(base.root / "entity_vectors.npy", mmap_mode="r")
    vectors = np.lib.format.open_memmap(work / "entity_vectors.npy", mode="w+", dtype=np.float32,
                                        shape=(int(live.sum()), old.shape[1]))
    row = 0
    for start in range(0, len(old), _BLOCK):
        block = np.asarray(old[start:start + _BLOCK])[live[start:start + _BLOCK]]
        vectors[row:row + len(block)] = block
        row += len(block)
    vectors.flush()
    timings["save_store_s"] = time.perf_counter() - t
    t = time.perf_counter()
    spec = base.manifest["entity_index"]
    (work / "entity_index").mkdir()
    index = make_index(spec["kind"], old.shape[1], **dict(spec.get("params", {})))
    if isinstance(index, VectorsAttachable):
        index.attach_vectors(vectors, work / "entity_vectors.npy")
    show = progress_on(show_progress)
    for start in tqdm(range(0, len(vectors), _BLOCK), desc="re-indexing entity vectors", unit="block",
                      disable=not show):
        index.add(np.ascontiguousarray(vectors[start:start + _BLOCK]))
    index.save(work / "entity_index")
    if isinstance(index, LocalServerIndex):
        index.release_local_server()
    timings["entity_index_s"] = time.perf_counter() - t
