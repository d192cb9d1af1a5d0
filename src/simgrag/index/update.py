"""Live updates of an index directory: add and remove triples without a rebuild (issue 19).

    update_index_dir("kb.idx", add="new.txt", remove="gone.txt")   # files in any KG format, or lists
    simgrag update kb.idx --add new.txt --remove gone.txt

What an update changes (the store's rules, retired entities included, are in :mod:`simgrag.kg.delta`):

- the KG store: the batch is merged into the sorted triples and the CSR adjacency in linear time;
- new entities are embedded and their vectors appended to ``entity_vectors.npy`` and to the entity
  index: ``exact``, ``faiss-hnsw`` and ``faiss-ivfpq`` (with its trained quantizers) take appended
  vectors; ``milvus`` is refused (its collection lives outside the directory, so it cannot be
  swapped together with it: rebuild instead);
- relation and type texts are re-embedded when the set of relations or types changes (aliases are
  kept by relation name);
- the manifest: counts, content hash, each new file's sha256 and an ``updates`` log.

Atomicity: the new version is assembled in ``.NAME.building`` beside the index (unchanged files are
hard links: simgrag never writes an index file in place; changed files are new files) and moved in
by :func:`~simgrag.index.swap.replace_dir` after its manifest is written. A kill at any moment
leaves the previous version or the new one; an open of the path finishes an interrupted swap
(:func:`~simgrag.index.swap.recover_swap`). Updates of one index take turns (``.NAME.lock``).

A process that opened the index before an update keeps reading the old version (its files stay
valid while it holds them); reopen it (restart ``simgrag serve``) to see the update.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.embed.base import Embedder, encode_bulk
from simgrag.embed.registry import resolve_embedder
from simgrag.errors import IndexDirError, KGError, SimGRAGError
from simgrag.fetch import sha256_file
from simgrag.fileio import write_bytes_atomic
from simgrag.index._append import Appending
from simgrag.index.derive import _place
from simgrag.index.directory import _CHUNK, _exact_index, _label_texts, _read_manifest, aliases_by_name
from simgrag.index.swap import MANIFEST, recover_swap, replace_dir, work_dir
from simgrag.index.verify import _data_files, check_content_hash, raise_on_problems, verify_index
from simgrag.kg.delta import DeltaReport, StoreDelta, apply_delta
from simgrag.kg.loader import load_kg
from simgrag.kg.store import KGStore, Triple
from simgrag.progress import progress_on

__all__ = ["SUPPORTED_KINDS", "Batch", "UpdateResult", "load_batch", "load_batches", "update_index_dir"]

logger = logging.getLogger(__name__)

#: entity index kinds that take appended vectors
SUPPORTED_KINDS = ("exact", "faiss-hnsw", "faiss-ivfpq")
LOG_ENTRIES = 100  # the manifest keeps the last this many update records
_OWN = {MANIFEST, "store", "entity_vectors.npy", "entity_index", "relation_index", "relation_owner.npy",
        "relation_texts.json", "type_index", "type_owner.npy"}

Batch = str | Path | KGStore | Sequence[tuple[str, str, str] | Sequence[str] | Triple] | None


@dataclass(frozen=True)
class UpdateResult:
    """One update: what changed (``report``), the index's update count afterwards and the time per stage."""

    path: Path
    report: DeltaReport
    updates: int
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), **self.report.to_dict(), "updates": self.updates, "timings": self.timings}


def load_batch(batch: Batch, *, what: str = "batch", format: str | None = None, skip_bad_lines: bool = False,
               show_progress: bool | None = None) -> tuple[KGStore | None, str]:
    """A batch as a small store and a description: a KG file in any format :func:`load_kg` reads
    (malformed lines are ``file:line`` errors), a store, or (head, relation, tail) strings."""
    if batch is None:
        return None, ""
    if isinstance(batch, KGStore):
        return batch, "<store>"
    if isinstance(batch, (str, Path)):
        store, report = load_kg(batch, format=format, skip_bad_lines=skip_bad_lines, show_progress=show_progress)
        return store, f"{report.path} ({report.format}, {report.triples_read:,} triples)"
    triples: list[tuple[str, str, str]] = []
    for i, item in enumerate(batch):
        parts = item.as_tuple() if isinstance(item, Triple) else item
        if (isinstance(parts, str) or not isinstance(parts, Sequence) or len(parts) != 3
                or not all(isinstance(p, str) and p.strip() for p in parts)):
            raise KGError(f"{what}[{i}]: expected (head, relation, tail) as three non-empty strings, got {item!r}")
        triples.append((parts[0], parts[1], parts[2]))
    if not triples:
        return None, ""
    return KGStore.from_triples(triples), f"<{len(triples):,} triples>"


def load_batches(paths: Sequence[str | Path], *, what: str = "batch", format: str | None = None,
                 skip_bad_lines: bool = False, show_progress: bool | None = None) -> tuple[KGStore | None, str]:
    """Several KG files as one batch (``simgrag update --add A --add B``)."""
    merged: KGStore | None = None
    descs: list[str] = []
    for path in paths:
        store, desc = load_batch(Path(path), what=what, format=format, skip_bad_lines=skip_bad_lines,
                                 show_progress=show_progress)
        merged = store if merged is None or store is None else apply_delta(merged, add=store).store
        descs.append(desc)
    return merged, "; ".join(descs)


@contextlib.contextmanager
def _update_lock(root: Path) -> Iterator[None]:
    """One update of ``root`` at a time (an flock, released by the kernel if the process dies)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    lock = root.parent / f".{root.name}.lock"
    with lock.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@dataclass
class _Base:
    root: Path
    manifest: dict[str, Any]
    store: KGStore
    spec: str | Embedder | None
    _embedder: Embedder | None = None

    def embedder(self) -> Embedder:
        """The index's embedder, resolved on first use (an update without new names needs none)."""
        if self._embedder is None:
            emb = resolve_embedder(self.spec if self.spec is not None else self.manifest["embedder"]["spec"])
            want = self.manifest["embedder"]
            if emb.name != want["name"] or emb.dim != want["dim"]:
                raise IndexDirError(f"{self.root} was built with embedder {want['name']} ({want['dim']}-d), not "
                                    f"{emb.name} ({emb.dim}-d); update it with the same embedder.")
            self._embedder = emb
        return self._embedder


def _open_base(root: Path, embedder: str | Embedder | None, verify: bool) -> _Base:
    if verify:
        raise_on_problems(verify_index(root, embedder=embedder))
    manifest = _read_manifest(root)
    kind = manifest["entity_index"]["kind"]
    if kind not in SUPPORTED_KINDS:
        raise IndexDirError(f"{root}: live updates support the entity index kinds {', '.join(SUPPORTED_KINDS)}, "
                            f"not {kind!r} (a Milvus collection cannot be swapped with the directory); "
                            "rebuild the index with `simgrag index` instead.")
    store = KGStore.load(root / "store", duplicates_removed=manifest["kg"].get("duplicates_removed", 0))
    check_content_hash(root, store, manifest)  # never carry a corrupt store into a new version
    return _Base(root, manifest, store, embedder)


def update_index_dir(
    path: str | Path,
    *,
    add: Batch = None,
    remove: Batch = None,
    format: str | None = None,
    skip_bad_lines: bool = False,
    embedder: str | Embedder | None = None,
    verify: bool = False,
    batch_size: int = 256,
    show_progress: bool | None = None,
    sources: Mapping[str, str] | None = None,
) -> UpdateResult:
    """Remove ``remove``'s triples from the index at ``path``, then add ``add``'s, as one atomic step.

    A batch is a KG file (``format`` as for :func:`~simgrag.kg.loader.load_kg`), a
    :class:`~simgrag.kg.store.KGStore` or a sequence of (head, relation, tail) strings. ``verify``
    checks every file's sha256 first (``simgrag check``); the store's content hash is always checked.
    ``sources`` (``{"add": …, "remove": …}``) describe the batches in the manifest's update log (default:
    the files read). Returns what changed; open the path again to search the new version."""
    root = Path(path)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with _update_lock(root):
        recover_swap(root)
        base = _open_base(root, embedder, verify)
        add_store, add_desc = load_batch(add, what="add", format=format, skip_bad_lines=skip_bad_lines,
                                         show_progress=show_progress)
        remove_store, remove_desc = load_batch(remove, what="remove", format=format,
                                               skip_bad_lines=skip_bad_lines, show_progress=show_progress)
        timings["read_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        delta = apply_delta(base.store, add=add_store, remove=remove_store)
        timings["merge_s"] = time.perf_counter() - t
        count = int(base.manifest.get("updates", {}).get("count", 0))
        if not delta.report.changed:
            logger.info("%s: the batch changes nothing (%s)", root, delta.report.to_dict())
            return UpdateResult(root, delta.report, count, timings)
        work = work_dir(root)
        if work.exists():  # an update or build that did not finish: never part of any version
            shutil.rmtree(work)
        try:
            _write_version(base, delta, work, timings, batch_size, show_progress,
                           {"add": add_desc, "remove": remove_desc, **(sources or {})})
            t = time.perf_counter()
            replace_dir(work, root)
            timings["swap_s"] = time.perf_counter() - t
        except SimGRAGError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexDirError(f"Updating {root} failed: {exc}; the index is unchanged.") from exc
    timings["total_s"] = time.perf_counter() - t0
    logger.info("%s: update %d in %.2f s: %s", root, count + 1, timings["total_s"], delta.report.to_dict())
    return UpdateResult(root, delta.report, count + 1, timings)


def _write_version(base: _Base, delta: StoreDelta, work: Path, timings: dict[str, float], batch_size: int,
                   show_progress: bool | None, sources: Mapping[str, str]) -> None:
    t = time.perf_counter()
    (work / "store").mkdir(parents=True)
    delta.store.save(work / "store")
    timings["save_store_s"] = time.perf_counter() - t
    linked: set[str] = set()
    digests: dict[str, str] = {}
    _entities(base, delta, work, linked, digests, timings, batch_size, show_progress)
    t = time.perf_counter()
    _relations(base, delta, work, linked)
    _types(base, delta, work, linked)
    for child in sorted(base.root.iterdir()):  # calibration files and anything else the index carries
        if child.name not in _OWN:
            _link(base.root, work, child.name, linked)
    timings["labels_s"] = time.perf_counter() - t
    t = time.perf_counter()
    manifest = _manifest(base, delta, work, linked, digests, timings, sources)
    write_bytes_atomic(work / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    timings["manifest_s"] = time.perf_counter() - t


def _link(root: Path, work: Path, name: str, linked: set[str]) -> None:
    src = root / name
    if not src.exists():
        return
    _place(src, work / name, link=True)
    files = [p for p in src.rglob("*") if p.is_file()] if src.is_dir() else [src]
    linked.update(p.relative_to(root).as_posix() for p in files)


def _embed_new(base: _Base, delta: StoreDelta, batch_size: int, show_progress: bool | None) -> np.ndarray:
    n, first = delta.store.num_entities, delta.first_new_entity
    emb = base.embedder()
    out = np.empty((n - first, emb.dim), dtype=np.float32)
    show = progress_on(show_progress)
    with tqdm(total=n - first, desc="embedding new entities", unit="ent", disable=not show) as bar:
        for start in range(first, n, _CHUNK):
            names = delta.store.entities.take(np.arange(start, min(n, start + _CHUNK)))
            out[start - first: start - first + len(names)] = encode_bulk(emb, names, batch_size=batch_size,
                                                                         show_progress=False)
            bar.update(len(names))
    if not np.isfinite(out).all():
        raise IndexDirError(f"the embedder {emb.name} returned NaN or infinite values for new entity names; "
                            "the index is unchanged")
    return out


def _entities(base: _Base, delta: StoreDelta, work: Path, linked: set[str], digests: dict[str, str],
              timings: dict[str, float], batch_size: int, show_progress: bool | None) -> None:
    """``entity_vectors.npy`` and ``entity_index/`` with the new entities' vectors appended (hard links when
    there are none); the existing rows are copied while the new names are embedded."""
    extra = delta.store.num_entities - delta.first_new_entity
    if not extra:
        _link(base.root, work, "entity_vectors.npy", linked)
        _link(base.root, work, "entity_index", linked)
        timings["embed_s"] = timings["entity_index_s"] = 0.0
        return
    t = time.perf_counter()
    appending = Appending(base.root, work, extra, base.manifest["entity_index"]["kind"])
    try:
        try:
            rows = _embed_new(base, delta, batch_size, show_progress)
        except BaseException:
            appending.abandon()
            raise
        timings["embed_s"] = time.perf_counter() - t
        t = time.perf_counter()
        digests["entity_vectors.npy"] = appending.finish(rows)
    finally:
        appending.shutdown()
    timings["entity_index_s"] = time.perf_counter() - t


def _relations(base: _Base, delta: StoreDelta, work: Path, linked: set[str]) -> None:
    if not delta.relations_changed:
        for name in ("relation_index", "relation_owner.npy", "relation_texts.json"):
            _link(base.root, work, name, linked)
        return
    texts_before = json.loads((base.root / "relation_texts.json").read_text(encoding="utf-8"))
    by_name = aliases_by_name(list(base.store.relations), texts_before, np.load(base.root / "relation_owner.npy"))
    names = list(delta.store.relations)
    texts, owner = _label_texts(names, {i: by_name[name] for i, name in enumerate(names) if name in by_name})
    _exact_index(base.embedder(), texts, work / "relation_index")
    np.save(work / "relation_owner.npy", owner)
    (work / "relation_texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")


def _types(base: _Base, delta: StoreDelta, work: Path, linked: set[str]) -> None:
    new, old = delta.store.types, base.store.types
    if new is None:
        return
    if old is not None and list(old) == list(new) and (base.root / "type_index").exists():
        _link(base.root, work, "type_index", linked)
        _link(base.root, work, "type_owner.npy", linked)
        return
    texts, owner = _label_texts(list(new), {})
    _exact_index(base.embedder(), texts, work / "type_index")
    np.save(work / "type_owner.npy", owner)


def _manifest(base: _Base, delta: StoreDelta, work: Path, linked: set[str], digests: dict[str, str],
              timings: dict[str, float], sources: Mapping[str, str]) -> dict[str, Any]:
    store, old = delta.store, base.manifest
    content_hash = store.content_hash()
    manifest = {k: v for k, v in old.items() if k not in ("files", "build_key")}
    manifest["kg"] = {**old["kg"], "content_hash": content_hash, **store.stats(),
                      "retired_entities": len(store.retired_entities())}
    if delta.relations_changed:
        texts = json.loads((work / "relation_texts.json").read_text(encoding="utf-8"))
        manifest["relation_index"] = {**old.get("relation_index", {}), "texts": len(texts)}
    history = old.get("updates", {})
    count = int(history.get("count", 0)) + 1
    entry = {"update": count, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             **{k: v for k, v in sources.items() if v}, **delta.report.to_dict(),
             "seconds": {k: round(v, 3) for k, v in timings.items()}}
    manifest["updates"] = {"count": count, "log": [*history.get("log", []), entry][-LOG_ENTRIES:]}
    manifest["build_key"] = "update:" + hashlib.sha256(f"{old.get('build_key')}:{content_hash}:{count}".encode()
                                                       ).hexdigest()
    before = old.get("files") or {}
    files: dict[str, str] = {}
    for path in _data_files(work):
        rel = path.relative_to(work).as_posix()
        if rel in digests:
            files[rel] = digests[rel]
        elif rel in linked and rel in before:  # the same inode as the previous version's file
            files[rel] = before[rel]
        else:
            files[rel] = sha256_file(path)
    manifest["files"] = files
    return manifest
