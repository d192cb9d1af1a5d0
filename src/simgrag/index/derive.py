"""An index directory for another KG over the same entities, without re-embedding them.

A perturbed KG (:mod:`simgrag.perturb`) or a KG with some triples removed (the abstention study)
keeps the entity set, so the entity vectors and the entity vector index of the original index
directory are still right. :func:`derive_index_dir` writes a new index directory whose store is the
new KG and which reuses those files (hard links when the file system allows, else copies):

- the new store's entity table must equal the base's *in order* (ids are rows of the vectors);
  :meth:`simgrag.perturb.Perturbation.to_store` builds it over the original tables, so it does;
- relation texts (readable names plus the base's aliases) are copied when the relation table is the
  same, else re-embedded for the new table, keeping each surviving relation's aliases;
- type texts likewise (dropped when the new store has no types);
- the manifest is the base's with the new KG's counts and content hash, plus ``derived_from``:
  the base's path and KG hash and whatever ``derivation`` says (perturbation method, level, seed…).

Like :func:`~simgrag.index.directory.build_index_dir`, the directory is assembled in
``.NAME.building`` and renamed into place after its manifest is written. Hard-linked files are shared
with the base: simgrag never writes an index file in place, so neither directory can change the other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simgrag import __version__
from simgrag.config import cache_dir
from simgrag.errors import IndexDirError
from simgrag.fileio import atomic_path
from simgrag.index.directory import (
    IndexDir,
    _exact_index,
    _label_texts,
    aliases_by_name,
    open_index_dir,
)
from simgrag.index.swap import MANIFEST, replace_dir
from simgrag.index.verify import file_digests
from simgrag.kg.store import KGStore

__all__ = ["derive_index_dir", "derived_cache_path", "is_derived_from", "same_tables_store"]

logger = logging.getLogger(__name__)


def same_tables_store(base: KGStore, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> KGStore:
    """A store of the given triple ids over ``base``'s entity, relation and type tables (ids unchanged).

    Unlike :meth:`simgrag.perturb.Perturbation.to_store` it keeps the entity types, so a derived index
    keeps its type index too.
    """
    type_pairs = None
    if base.types is not None and base.node_type_indptr is not None and base.node_types is not None:
        counts = np.diff(np.asarray(base.node_type_indptr))
        type_pairs = np.stack([np.repeat(np.arange(base.num_entities, dtype=np.int32), counts),
                               np.asarray(base.node_types, dtype=np.int32)], axis=1)
    return KGStore.from_ids(base.entities, base.relations, heads, rels, tails,
                            entity_types=base.types if type_pairs is not None else None, type_pairs=type_pairs)


def _same_names(a: Iterable[str], b: Iterable[str], n_a: int, n_b: int) -> bool:
    return n_a == n_b and all(x == y for x, y in zip(a, b, strict=True))


def _first_difference(a: KGStore, b: KGStore) -> str:
    if a.num_entities != b.num_entities:
        return f"{b.num_entities:,} entities instead of {a.num_entities:,}"
    for i, (x, y) in enumerate(zip(a.entities, b.entities, strict=True)):
        if x != y:
            return f"entity #{i} is {y!r} instead of {x!r}"
    return "no difference"


def _place(src: Path, dst: Path, *, link: bool) -> str:
    """Hard-link ``src`` to ``dst`` (a file or a folder of files), else copy; returns how."""
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        hows = {_place(child, dst / child.name, link=link) for child in sorted(src.iterdir())}
        return "hard-linked" if hows == {"hard-linked"} else "copied"
    if link:
        try:
            os.link(src, dst)
            return "hard-linked"
        except OSError:
            pass
    shutil.copy2(src, dst)
    return "copied"


def _base_aliases(base: IndexDir) -> dict[str, list[str]]:
    """Relation name → its alias texts in the base index (every text but the readable name)."""
    return aliases_by_name(list(base.store.relations), base.relation_texts, base.relation_owner)


def _relations(base: IndexDir, store: KGStore, work: Path, *, link: bool) -> dict[str, Any]:
    if _same_names(base.store.relations, store.relations, base.store.num_relations, store.num_relations):
        for name in ("relation_index", "relation_owner.npy", "relation_texts.json"):
            _place(base.path / name, work / name, link=False)  # small files: copies
        return {"relation_index": "copied", **base.manifest["relation_index"]}
    by_name = _base_aliases(base)
    aliases = {rid: by_name[name] for rid, name in enumerate(store.relations) if name in by_name}
    texts, owner = _label_texts(list(store.relations), aliases)
    _exact_index(base.embedder, texts, work / "relation_index")
    np.save(work / "relation_owner.npy", owner)
    (work / "relation_texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    return {"relation_index": "re-embedded", "kind": "exact", "texts": len(texts),
            "aliases": sum(map(len, aliases.values()))}


def _types(base: IndexDir, store: KGStore, work: Path) -> str:
    if store.types is None:
        return "none"
    if base.store.types is not None and base.type_index is not None and _same_names(
            base.store.types, store.types, base.store.num_types, store.num_types):
        _place(base.path / "type_index", work / "type_index", link=False)
        _place(base.path / "type_owner.npy", work / "type_owner.npy", link=False)
        return "copied"
    texts, owner = _label_texts(list(store.types), {})
    _exact_index(base.embedder, texts, work / "type_index")
    np.save(work / "type_owner.npy", owner)
    return "re-embedded"


def derived_cache_path(base: IndexDir, name: str, cache: str | Path | None = None) -> Path:
    """Where the derived index ``name`` of ``base`` is cached: keyed by the base KG's content and by the
    base index's build (embedder and vector-index settings), so two indexes of one KG built two ways do
    not evict each other's derived copies."""
    kg_hash = str(base.manifest["kg"]["content_hash"])
    build = str(base.manifest.get("build_key") or base.manifest["embedder"]["name"])
    return cache_dir(cache) / "derived" / f"{kg_hash[:16]}-{hashlib.sha256(build.encode()).hexdigest()[:8]}-{name}.idx"


def derive_index_dir(
    base: IndexDir | str | Path,
    store: KGStore,
    out_dir: str | Path,
    *,
    derivation: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    link: bool = True,
) -> IndexDir:
    """Write ``out_dir``: an index directory for ``store`` reusing ``base``'s entity vectors and index.

    ``store`` must have ``base``'s entity table, same names in the same order (raises
    :class:`~simgrag.errors.IndexDirError` otherwise). ``derivation`` (JSON-able) is recorded in the
    manifest's ``derived_from``. ``link``: hard-link the large entity files instead of copying them.
    """
    t0 = time.perf_counter()
    src = base if isinstance(base, IndexDir) else open_index_dir(base)
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise IndexDirError(f"{out} already exists; pass overwrite=True to replace it.",
                            options={"overwrite=True": "--overwrite"})
    if not _same_names(src.store.entities, store.entities, src.store.num_entities, store.num_entities):
        raise IndexDirError(
            f"cannot derive an index from {src.path}: the new KG's entity table differs "
            f"({_first_difference(src.store, store)}). The entity vectors are reused by row, so the new store "
            "must keep the base's entities in order (build it with Perturbation.to_store() or "
            "KGStore.from_ids(base.store.entities, …)); otherwise build a new index.")
    work = out.parent / f".{out.name}.building"
    out.parent.mkdir(parents=True, exist_ok=True)
    if work.exists():
        shutil.rmtree(work)
    (work / "store").mkdir(parents=True)
    try:
        store.save(work / "store")
        vectors = _place(src.path / "entity_vectors.npy", work / "entity_vectors.npy", link=link)
        kind = src.manifest["entity_index"]["kind"]  # a Milvus Lite file may be written on open: copy it
        entity_index = _place(src.path / "entity_index", work / "entity_index", link=link and kind != "milvus")
        relation_info = _relations(src, store, work, link=link)
        types = _types(src, store, work)
        kg_hash = store.content_hash()
        manifest = _manifest(src, store, kg_hash, relation_info, derivation, {
            "entity_vectors": vectors, "entity_index": entity_index, "types": types})
        manifest["timings"] = {"derive_s": round(time.perf_counter() - t0, 3)}
        manifest["files"] = file_digests(work)
        with atomic_path(work / MANIFEST) as tmp:
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        replace_dir(work, out)
    except OSError as exc:
        raise IndexDirError(f"deriving {out} from {src.path} failed: {exc}") from exc
    logger.info("derived index %s from %s in %.2f s (entity files %s)", out, src.path,
                time.perf_counter() - t0, vectors)
    return open_index_dir(out, embedder=src.embedder)


def _manifest(src: IndexDir, store: KGStore, kg_hash: str, relation_info: dict[str, Any],
              derivation: Mapping[str, Any] | None, reuse: dict[str, str]) -> dict[str, Any]:
    base_kg = src.manifest["kg"]
    manifest = {k: v for k, v in src.manifest.items() if k not in ("timings", "derived_from", "files", "build_key")}
    manifest.update({
        "simgrag_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kg": {"source": f"derived from {base_kg.get('source')}", "format": base_kg.get("format"),
               "content_hash": kg_hash, **store.stats(), "skipped_lines": 0},
        "relation_index": {k: v for k, v in relation_info.items() if k != "relation_index"},
        "derived_from": {
            "path": str(src.path), "kg_content_hash": base_kg["content_hash"],
            "base_derived_from": src.manifest.get("derived_from"),
            "reused": {**reuse, "relation_index": relation_info["relation_index"]},
            **dict(derivation or {}),
        },
    })
    return manifest


def is_derived_from(index: IndexDir, kg_content_hash: str) -> bool:
    """Whether ``index`` was derived (directly or through other derived indexes) from the KG with
    ``kg_content_hash``: same entity ids, so a model trained on that KG can read this index."""
    info = index.manifest.get("derived_from")
    while isinstance(info, dict):
        if info.get("kg_content_hash") == kg_content_hash:
            return True
        info = info.get("base_derived_from")
    return False
