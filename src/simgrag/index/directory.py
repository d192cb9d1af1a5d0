"""Index directories: everything retrieval needs, built once, described by a manifest.

Layout of ``INDEX_DIR``::

    manifest.json        format version, KG content hash, embedder name/dim, parameters, counts
    store/               the KGStore arrays (memory-mapped on load)
    entity_vectors.npy   one embedding per entity (float32), also the build checkpoint
    entity_index/        vector index over entity names (exact / faiss-hnsw / milvus)
    relation_index/      exact index over relation texts (each relation: readable name + aliases)
    relation_owner.npy   row of relation_index → relation id
    type_index/, type_owner.npy   the same for entity types, when the KG has them
    examples.yaml, relation_aliases.yaml   the few-shot examples and aliases it was built with, if any
                         (recorded in the manifest's ``attached``: :mod:`simgrag.index.attach`)

The build works in ``.NAME.building`` beside the target and renames it into place only when the
manifest is written, so a crash never leaves a directory that loads as valid. Entity embeddings are
written in chunks with a progress file: re-running the same build after a crash resumes them.
Replacing an existing index takes two renames (old away, new in); a crash between them is
finished by the next build or open of that path (the complete ``.NAME.building`` is moved in, or
the previous index is put back), never by starting the build over.

Every open checks the directory (:mod:`simgrag.index.verify`, :mod:`simgrag.kg.checks`); the
manifest's ``files`` table (sha256 per file) lets ``simgrag check`` and the server verify contents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm.auto import tqdm

from simgrag import __version__
from simgrag.embed.base import Embedder, Respecifiable, encode_bulk
from simgrag.embed.registry import resolve_embedder
from simgrag.errors import ConfigError, IndexDirError, SimGRAGError
from simgrag.fileio import load_yaml, write_bytes_atomic
from simgrag.index.attach import stage_attachments
from simgrag.index.base import LocalServerIndex, VectorIndex, VectorsAttachable
from simgrag.index.exact import ExactIndex
from simgrag.index.live import LiveEntityIndex
from simgrag.index.registry import choose_default_kind, default_index_params, load_index, make_index
from simgrag.index.swap import MANIFEST, finished_build, recover_swap, replace_dir, work_dir
from simgrag.index.verify import check_loaded, check_manifest, file_digests
from simgrag.kg.loader import LoadReport, load_kg
from simgrag.kg.sources import KGSource
from simgrag.kg.store import KGStore
from simgrag.progress import progress_on

__all__ = [
    "FORMAT_VERSION",
    "IndexDir",
    "aliases_by_name",
    "build_index_dir",
    "load_aliases",
    "open_index_dir",
    "relation_text",
    "with_relation_aliases",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
_CHUNK = 4096
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def relation_text(name: str) -> str:
    """Readable text for a relation name: ``directed_by`` → ``directed by``, ``birthPlace`` → ``birth place``."""
    text = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ")
    return re.sub(r"\s+", " ", text).strip().lower() or name


@dataclass
class IndexDir:
    """An opened index directory (see module docstring)."""

    path: Path
    manifest: dict[str, Any]
    store: KGStore
    embedder: Embedder
    entity_index: VectorIndex
    entity_vectors: np.ndarray
    relation_index: ExactIndex
    relation_owner: np.ndarray
    relation_texts: list[str]
    type_index: ExactIndex | None = None
    type_owner: np.ndarray | None = None


def load_aliases(path: Path | None, store: KGStore) -> dict[int, list[str]]:
    """Relation aliases from YAML/JSON ``{relation name: [phrase, …]}``; unknown names are an error."""
    if path is None:
        return {}
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read relation aliases {path}: {exc}") from exc
    if isinstance(raw, dict) and "relations" in raw and isinstance(raw["relations"], dict):
        raw = raw["relations"]
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping 'relation name: [alias, …]'")
    out: dict[int, list[str]] = {}
    for name, phrases in raw.items():
        rid = store.relations.id_of(str(name))
        if rid is None:
            raise ConfigError(f"{path}: relation {name!r} is not in the KG "
                              f"(known: {', '.join(list(store.relations)[:20])})")
        if isinstance(phrases, str):
            phrases = [phrases]
        if not isinstance(phrases, list) or not all(isinstance(p, str) and p.strip() for p in phrases):
            raise ConfigError(f"{path}: aliases of {name!r} must be a list of non-empty strings")
        out[rid] = [p.strip() for p in phrases]
    return out


def aliases_by_name(relations: Sequence[str], texts: Sequence[str], owner: np.ndarray) -> dict[str, list[str]]:
    """Relation name → its alias texts in a relation index (every text but the readable name)."""
    out: dict[str, list[str]] = {}
    for text, rid in zip(texts, np.asarray(owner).tolist(), strict=True):
        name = relations[int(rid)]
        if text != relation_text(name):
            out.setdefault(name, []).append(text)
    return out


def _label_texts(names: Sequence[str], aliases: Mapping[int, list[str]]) -> tuple[list[str], np.ndarray]:
    texts: list[str] = []
    owner: list[int] = []
    for i, name in enumerate(names):
        variants = dict.fromkeys([relation_text(name), *aliases.get(i, [])])
        texts.extend(variants)
        owner.extend([i] * len(variants))
    return texts, np.asarray(owner, dtype=np.int64)


def _resume_vectors(path: Path, progress_path: Path, shape: tuple[int, int]) -> tuple[int, np.memmap]:
    """The rows already embedded by an interrupted build (0 if none or unusable) and the memmap to fill."""
    done = 0
    if progress_path.exists() and path.exists():
        try:
            done = int(progress_path.read_text())
            vectors = np.lib.format.open_memmap(path, mode="r+")
            if vectors.shape == shape and vectors.dtype == np.float32 and 0 < done <= shape[0]:
                logger.info("resuming entity embeddings at %d / %d", done, shape[0])
                return done, vectors
            del vectors
        except (OSError, ValueError) as exc:
            logger.warning("cannot resume entity embeddings (%s); starting over", exc)
    return 0, np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)


def _embed_entities(store: KGStore, embedder: Embedder, work: Path, show_progress: bool | None,
                    batch_size: int) -> np.ndarray:
    """Entity embeddings into ``work/entity_vectors.npy`` in chunks, resuming a previous attempt.

    The chunks follow :func:`_length_order`, so each chunk's names are of about one length and its batches pad
    little (MetaQA: the embedding step 8 % faster than chunks taken in KG order); rows land at their entity ids."""
    path, progress_path = work / "entity_vectors.npy", work / "entity_vectors.progress"
    n = store.num_entities
    done, vectors = _resume_vectors(path, progress_path, (n, embedder.dim))
    order = _length_order(store)
    show = progress_on(show_progress)
    with tqdm(total=n, initial=done, desc="embedding entities", unit="ent", disable=not show) as bar:
        for start in range(done, n, _CHUNK):
            rows = order[start:start + _CHUNK]
            names = store.entities.take(rows)
            vectors[rows] = encode_bulk(embedder, names, batch_size=batch_size, show_progress=False)
            vectors.flush()
            write_bytes_atomic(progress_path, str(start + len(names)).encode())
            bar.update(len(names))
    del vectors
    return np.load(path, mmap_mode="r")


def _length_order(store: KGStore) -> np.ndarray:
    """Entity ids by name length (UTF-8 bytes), then a checksum of the case-folded name (names equal but for
    case embed alike under an uncased model and then share one chunk, where the embedder encodes them once),
    then id: the same order on every attempt (no per-process hash seed), so a resumed build's count of rows
    done still means the same rows. Arrays, not Python tuples: 2M names in 1.4 s instead of 7.5 s."""
    names = store.entities
    lengths = np.diff(names.offsets)
    folded = np.fromiter((zlib.crc32(name.casefold().encode()) for name in names), dtype=np.int64, count=len(names))
    return np.lexsort((folded, lengths))


def _exact_index(embedder: Embedder, texts: list[str], directory: Path) -> ExactIndex:
    index = ExactIndex(dim=embedder.dim)
    index.add(embedder.encode(texts, show_progress=False))
    directory.mkdir(parents=True, exist_ok=True)
    index.save(directory)
    return index


def _prepare_work_dir(work: Path, fingerprint: dict[str, Any]) -> None:
    state = work / "build-state.json"
    if work.exists():
        same = state.exists() and json.loads(state.read_text()) == fingerprint
        if not same:
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "store").mkdir(exist_ok=True)
    state.write_text(json.dumps(fingerprint, sort_keys=True))


def build_index_dir(
    kg_path: str | Path | KGStore | KGSource,
    out_dir: str | Path,
    *,
    format: str | None = None,
    embedder: str | Embedder = "minilm",
    index_kind: str | None = None,
    index_params: Mapping[str, Any] | None = None,
    relation_aliases: str | Path | None = None,
    examples: str | Path | None = None,
    skip_bad_lines: bool = False,
    overwrite: bool = False,
    batch_size: int = 256,
    show_progress: bool | None = None,
) -> IndexDir:
    """Load ``kg_path``, embed entities/relations/types, build vector indexes, write ``out_dir``.

    ``kg_path`` may also be a ready :class:`KGStore` (e.g. ``SyntheticKG.to_store()``): no file is read;
    or a :class:`~simgrag.kg.sources.KGSource` (a SPARQL endpoint, a graph database), loaded here.
    ``examples`` (a few-shot examples file) and ``relation_aliases`` are copied into the index and
    recorded in its manifest (:mod:`simgrag.index.attach`): the index's default examples.
    """
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise IndexDirError(f"{out} already exists; pass overwrite=True to replace it.",
                            options={"overwrite=True": "--overwrite"})
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if isinstance(kg_path, KGStore):
        store, report = kg_path, _store_report(kg_path)
    elif isinstance(kg_path, KGSource):  # a SPARQL endpoint, a graph database, an RDF file with options
        store, report = kg_path.load(show_progress=show_progress)
    else:
        store, report = load_kg(kg_path, format=format, skip_bad_lines=skip_bad_lines, show_progress=show_progress)
    timings["load_kg_s"] = time.perf_counter() - t0
    emb = resolve_embedder(embedder)
    spec = embedder if isinstance(embedder, str) else emb.spec if isinstance(emb, Respecifiable) else emb.name
    kind = index_kind or choose_default_kind(store.num_entities)
    params = {**default_index_params(kind, store.num_entities), **dict(index_params or {})}
    kg_hash = store.content_hash()  # sha256 over every array: computed once, used twice
    fingerprint = {"kg": kg_hash, "embedder": emb.name, "dim": emb.dim, "entity_order": "length"}
    work = work_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    aliases = load_aliases(Path(relation_aliases) if relation_aliases else None, store)
    attachments = {k: Path(v) for k, v in (("examples", examples), ("relation_aliases", relation_aliases)) if v}
    build_key = _build_key(fingerprint, kind, params, aliases, attachments)
    if not out.exists() and finished_build(work) == build_key:  # a crash came between the swap's renames
        recover_swap(out)
        logger.info("%s: the same build had finished before an interruption; not building it again", out)
        if isinstance(kg_path, KGSource):
            kg_path.finished()
        return open_index_dir(out, embedder=emb)
    recover_swap(out)
    if out.exists() and not overwrite:
        raise IndexDirError(f"{out} already exists; pass overwrite=True to replace it.",
                            options={"overwrite=True": "--overwrite"})
    try:
        if finished_build(work) != build_key:  # a finished build with the same inputs is kept, not redone
            _prepare_work_dir(work, fingerprint)
            _build_into(work, store, kg_hash, report, emb, spec, kind, dict(params), aliases, timings,
                        show_progress, batch_size, build_key, attachments)
        replace_dir(work, out)
        if isinstance(kg_path, KGSource):
            kg_path.finished()
    except SimGRAGError:
        raise
    except (OSError, ValueError, RuntimeError) as exc:
        raise IndexDirError(f"Building {out} failed: {exc}. Partial work is kept in {work}; "
                            "re-run the same command to resume.") from exc
    logger.info("index written to %s in %.1f s", out, time.perf_counter() - t0)
    return open_index_dir(out, embedder=emb)


def _store_report(store: KGStore) -> LoadReport:
    return LoadReport(path="<in-memory store>", format="store", lines_read=0, triples_read=store.num_triples,
                      duplicates_removed=store.duplicates_removed, skipped_lines=0, skipped_reasons={},
                      examples=[], comment_or_blank_lines=0, entities=store.num_entities,
                      relations=store.num_relations, types=store.num_types, seconds=0.0)


def _build_key(fingerprint: dict[str, Any], kind: str, params: Mapping[str, Any],
               aliases: Mapping[int, list[str]], attachments: Mapping[str, Path]) -> str:
    """What makes two builds of one KG the same: embedder, index kind and parameters, aliases, attached files."""
    files = {k: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else str(p) for k, p in attachments.items()}
    text = json.dumps({**fingerprint, "kind": kind, "params": dict(params), "attached": files,
                       "aliases": {str(k): v for k, v in sorted(aliases.items())}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _build_into(work: Path, store: KGStore, kg_hash: str, report: LoadReport, emb: Embedder, spec: str, kind: str,
                params: dict[str, Any], aliases: dict[int, list[str]], timings: dict[str, float],
                show_progress: bool | None, batch_size: int, build_key: str,
                attachments: Mapping[str, Path]) -> None:
    t = time.perf_counter()
    store.save(work / "store")
    timings["save_store_s"] = time.perf_counter() - t
    t = time.perf_counter()
    vectors = _embed_entities(store, emb, work, show_progress, batch_size)
    timings["embed_entities_s"] = time.perf_counter() - t
    t = time.perf_counter()
    if kind == "milvus":
        params.setdefault("uri", str(work / "entity_index" / "milvus.db"))
        params.setdefault("collection", "entities")
    (work / "entity_index").mkdir(exist_ok=True)
    index = make_index(kind, emb.dim, **params)
    if isinstance(index, VectorsAttachable):  # compressed kinds re-rank from entity_vectors.npy, no copy
        index.attach_vectors(vectors, work / "entity_vectors.npy")
    for start in range(0, len(vectors), 65536):
        index.add(np.ascontiguousarray(vectors[start:start + 65536]))
    index.save(work / "entity_index")
    if isinstance(index, LocalServerIndex):  # Milvus Lite locks its file; the directory is renamed, reopened next
        index.release_local_server()
    timings["entity_index_s"] = time.perf_counter() - t
    rel_texts, rel_owner = _label_texts(list(store.relations), aliases)
    _exact_index(emb, rel_texts, work / "relation_index")
    np.save(work / "relation_owner.npy", rel_owner)
    (work / "relation_texts.json").write_text(json.dumps(rel_texts, ensure_ascii=False))
    if store.types is not None:
        type_texts, type_owner = _label_texts(list(store.types), {})
        _exact_index(emb, type_texts, work / "type_index")
        np.save(work / "type_owner.npy", type_owner)
    manifest = {
        "format_version": FORMAT_VERSION,
        "simgrag_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kg": {"source": str(report.path), "format": report.format, "content_hash": kg_hash,
               **store.stats(), "lines": report.lines_read, "comment_lines": report.comment_lines,
               "blank_lines": report.blank_lines, "skipped_lines": report.skipped_lines,
               "skipped_reasons": report.skipped_reasons},
        "embedder": {"spec": spec, "name": emb.name, "dim": emb.dim},
        "entity_index": {"kind": index.kind, "params": {k: v for k, v in index.params.items()
                                                        if k not in ("uri", "vectors_file")}},
        "relation_index": {"kind": "exact", "texts": len(rel_texts), "aliases": sum(map(len, aliases.values()))},
        "timings": timings,
        "build_key": build_key,
    }
    if attachments:  # the examples and aliases the index was built with: its defaults (index/attach.py)
        manifest["attached"] = stage_attachments(work, attachments)
    for leftover in ("entity_vectors.progress", "build-state.json"):
        (work / leftover).unlink(missing_ok=True)
    manifest["files"] = file_digests(work)  # sha256 per file: `simgrag check` and the server verify them
    write_bytes_atomic(work / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def _read_manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST
    if not file.is_file() and not path.exists():
        recover_swap(path)
    if not file.is_file() and not path.exists() and not (path.parent / f".{path.name}.building").exists():
        raise IndexDirError(f"The index directory {path} does not exist (check the path). "
                            f"Build one with: simgrag index KG_FILE -o {path}")
    if not file.is_file():
        interrupted = (path.parent / f".{path.name}.building").exists()
        hint = " (a build was interrupted; re-run it to resume)" if interrupted else ""
        raise IndexDirError(f"{path} is not a simgrag index directory: {MANIFEST} is missing{hint}. "
                            f"Build one with: simgrag index KG_FILE -o {path}")
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # ValueError covers a UnicodeDecodeError too
        raise IndexDirError(f"{file} is corrupt ({exc}); rebuild the index.") from exc
    except OSError as exc:
        raise IndexDirError(f"Cannot read {file} ({exc}).") from exc
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if isinstance(raw, dict) and version != FORMAT_VERSION:
        raise IndexDirError(f"{path} has index format {version}, this simgrag reads {FORMAT_VERSION}; rebuild it.")
    return check_manifest(raw, path)


def with_relation_aliases(index: IndexDir, aliases: str | Path | Mapping[int, list[str]]) -> IndexDir:
    """A copy of ``index`` whose relation texts are the readable names plus ``aliases``.

    Relations are few, so this re-embeds only their texts (milliseconds): aliases can be tuned
    without rebuilding the entity index.
    """
    table = aliases if isinstance(aliases, Mapping) else load_aliases(Path(aliases), index.store)
    texts, owner = _label_texts(list(index.store.relations), table)
    rel_index = ExactIndex(dim=index.embedder.dim)
    rel_index.add(index.embedder.encode(texts, show_progress=False))
    return replace(index, relation_index=rel_index, relation_owner=owner, relation_texts=texts)


def open_index_dir(path: str | Path, *, embedder: str | Embedder | None = None, mmap: bool = True,
                   check: bool | None = None) -> IndexDir:
    """Open an index directory, checking its manifest, store and vectors (:mod:`simgrag.index.verify`).

    ``check=None`` runs every open-time check whose cost stays small for the index's size, ``True``
    all of them whatever the size, ``False`` only the cheap ones. File hashes are not read here:
    :func:`~simgrag.index.verify.verify_index` (``simgrag check``) does that."""
    root = Path(path)
    manifest = _read_manifest(root)
    store = KGStore.load(root / "store", mmap=mmap, duplicates_removed=manifest["kg"].get("duplicates_removed", 0),
                         check=check)
    kg = manifest["kg"]
    if (store.num_entities, store.num_relations, store.num_triples) != (kg["entities"], kg["relations"], kg["triples"]):
        raise IndexDirError(f"{root}: the store does not match its manifest (counts differ); rebuild the index.")
    emb = resolve_embedder(embedder if embedder is not None else manifest["embedder"]["spec"])
    want = manifest["embedder"]
    if emb.name != want["name"] or emb.dim != want["dim"]:
        raise IndexDirError(f"{root} was built with embedder {want['name']} ({want['dim']}-d) but "
                            f"{emb.name} ({emb.dim}-d) was given; use the same embedder or rebuild.")
    overrides = {}
    if manifest["entity_index"]["kind"] == "milvus" and (root / "entity_index" / "milvus.db").exists():
        overrides["uri"] = str(root / "entity_index" / "milvus.db")  # Milvus Lite inside; a server uri stays
    try:
        entity_index = load_index(root / "entity_index", **overrides)
        relation_index = ExactIndex.load(root / "relation_index")
        type_index = ExactIndex.load(root / "type_index") if (root / "type_index").exists() else None
        vectors = np.load(root / "entity_vectors.npy", mmap_mode="r" if mmap else None)
        rel_owner = np.load(root / "relation_owner.npy")
        rel_texts = json.loads((root / "relation_texts.json").read_text(encoding="utf-8"))
        type_owner = np.load(root / "type_owner.npy") if type_index is not None else None
    except (OSError, ValueError, EOFError, RecursionError) as exc:
        raise IndexDirError(f"{root} is incomplete or corrupt ({exc}); rebuild the index.") from exc
    if entity_index.ntotal != store.num_entities or len(vectors) != store.num_entities:
        raise IndexDirError(f"{root}: entity index holds {entity_index.ntotal} vectors for "
                            f"{store.num_entities} entities; rebuild the index.")
    retired = store.retired_entities()  # left by live updates (simgrag.kg.delta): searches skip them
    if len(retired):
        entity_index = LiveEntityIndex(entity_index, retired)
    index = IndexDir(root, manifest, store, emb, entity_index, vectors, relation_index, rel_owner, rel_texts,
                     type_index, type_owner)
    check_loaded(index, content_hash=check)
    return index
