"""32 ways to damage an index directory, and a probe that says how simgrag took each one.

:data:`CORRUPTIONS` damages the store arrays (bit flips, truncation, garbled adjacency, a wrong
dtype), the name tables (invalid UTF-8, an empty or duplicated name, broken offsets), the vectors
(NaN, inf, truncation, owners out of range) and the manifest (missing keys, a wrong content hash,
wrong counts, broken JSON). :func:`copy_index` makes a cheap copy to damage (hard links, except for
the file about to change). :func:`probe` opens a damaged copy and retrieves a fixed set of patterns;
:func:`classify` compares with the intact index's answers:

- ``refused`` — opening raised a :class:`~simgrag.errors.SimGRAGError` (the wanted outcome);
- ``served`` — it opened, every answer equals the intact index's and so does everything it loaded
  (names, triples, adjacency, vectors: :func:`fingerprint`) — also fine;
- ``typed_at_query`` — it opened, and a retrieval raised a typed error;
- ``silent`` — it opened and answered differently, or holds different data (silent damage: a bug);
- ``crash`` — an untyped exception (or, run in a subprocess, a signal): a bug.

``benchmarks/corrupt_index.py`` runs each one in its own process (a segfault is a result there).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import SimGRAGError

__all__ = ["CORRUPTIONS", "Corruption", "classify", "copy_index", "fingerprint", "probe", "probe_patterns"]


@dataclass(frozen=True)
class Corruption:
    name: str
    group: str  # store | names | vectors | manifest
    file: str  # the damaged file, relative to the index directory
    apply: Callable[[Path, random.Random], None]


def copy_index(src: Path, dst: Path, damaged: str) -> None:
    """``src`` copied to ``dst`` with hard links, except ``damaged`` (a real copy, safe to change)."""
    for root, _, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            target = dst / rel / name
            if (rel / name).as_posix() == damaged:
                shutil.copy2(Path(root) / name, target)
            else:
                os.link(Path(root) / name, target)


def _data_offset(path: Path) -> tuple[int, int]:
    """(byte offset of the array data in an .npy file, data length in bytes)."""
    arr = np.load(path, mmap_mode="r")
    return int(arr.offset), int(arr.nbytes)


def _flip(file: str, *, high: bool = False, byte: int | None = None) -> Callable[[Path, random.Random], None]:
    def apply(root: Path, rng: random.Random) -> None:
        path = root / file
        offset, size = _data_offset(path)
        data = bytearray(path.read_bytes())
        itemsize = int(np.load(path, mmap_mode="r").dtype.itemsize)
        entry = rng.randrange(size // itemsize)
        if byte is not None:
            data[offset + rng.randrange(size)] = byte
        elif high:  # the top byte of a little-endian entry: a huge or negative id
            data[offset + entry * itemsize + itemsize - 1] ^= 0x40
        else:  # the lowest bit: a neighbouring, still in-range value
            data[offset + entry * itemsize] ^= 0x01
        path.write_bytes(bytes(data))
    return apply


def _truncate(file: str, keep: float = 0.5) -> Callable[[Path, random.Random], None]:
    def apply(root: Path, rng: random.Random) -> None:
        path = root / file
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * keep)] if keep < 1 else data[:-8])
    return apply


Change = Callable[[np.ndarray, random.Random], np.ndarray]


def _edit_array(file: str, change: Change) -> Callable[[Path, random.Random], None]:
    def apply(root: Path, rng: random.Random) -> None:
        path = root / file
        arr = np.array(np.load(path))
        np.save(path, change(arr, rng))
    return apply


def _shuffle(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    start = rng.randrange(max(1, len(arr) - 64))
    order = list(range(min(64, len(arr) - start)))
    random.Random(rng.random()).shuffle(order)
    arr[start:start + len(order)] = arr[start:start + len(order)][order]
    return arr


def _empty_name(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    i = rng.randrange(1, len(arr) - 1)
    arr[i] = arr[i - 1]
    return arr


def _decrease(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    i = rng.randrange(1, len(arr) - 1)
    arr[i] = arr[i + 1] + 1
    return arr


def _nan_row(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    arr[rng.randrange(len(arr))] = np.nan
    return arr


def _inf_value(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    arr[rng.randrange(len(arr)), rng.randrange(arr.shape[1])] = np.inf
    return arr


def _duplicate_name(root: Path, rng: random.Random) -> None:
    """Overwrite one entity name with another of the same byte length (offsets stay valid)."""
    blob = np.array(np.load(root / "store" / "entities_blob.npy"))
    offsets = np.load(root / "store" / "entities_offsets.npy")
    lengths = np.diff(offsets)
    by_length: dict[int, list[int]] = {}
    for i, n in enumerate(lengths.tolist()):
        by_length.setdefault(n, []).append(i)
    pairs = sorted((ids for ids in by_length.values() if len(ids) > 1), key=len)
    a, b = pairs[-1][:2]
    blob[offsets[b]:offsets[b + 1]] = blob[offsets[a]:offsets[a + 1]]
    np.save(root / "store" / "entities_blob.npy", blob)


def _manifest(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path, random.Random], None]:
    def apply(root: Path, rng: random.Random) -> None:
        path = root / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(change(manifest)), encoding="utf-8")
    return apply


def _without(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda m: {k: v for k, v in m.items() if k != key}


def _wrong_hash(m: dict[str, Any]) -> dict[str, Any]:
    m["kg"]["content_hash"] = "0" * 64
    return m


def _wrong_count(m: dict[str, Any]) -> dict[str, Any]:
    m["kg"]["entities"] += 1
    return m


def _wrong_dim(m: dict[str, Any]) -> dict[str, Any]:
    m["embedder"]["dim"] = 7
    return m


def _float_dtype(arr: np.ndarray, rng: random.Random) -> np.ndarray:
    return arr.astype(np.float64)


S = "store/"
CORRUPTIONS: tuple[Corruption, ...] = (
    Corruption("heads: high-bit flip (id out of range)", "store", S + "heads.npy", _flip(S + "heads.npy", high=True)),
    Corruption("heads: low-bit flip (another valid id)", "store", S + "heads.npy", _flip(S + "heads.npy")),
    Corruption("rels: high-bit flip", "store", S + "rels.npy", _flip(S + "rels.npy", high=True)),
    Corruption("tails: truncated to half", "store", S + "tails.npy", _truncate(S + "tails.npy")),
    Corruption("indptr: high-bit flip", "store", S + "indptr.npy", _flip(S + "indptr.npy", high=True)),
    Corruption("indptr: low-bit flip", "store", S + "indptr.npy", _flip(S + "indptr.npy")),
    Corruption("indptr: last 8 bytes cut", "store", S + "indptr.npy", _truncate(S + "indptr.npy", keep=1.0)),
    Corruption("indptr: rewritten as float64", "store", S + "indptr.npy", _edit_array(S + "indptr.npy", _float_dtype)),
    Corruption("adj_nbr: high-bit flip", "store", S + "adj_nbr.npy", _flip(S + "adj_nbr.npy", high=True)),
    Corruption("adj_nbr: low-bit flip (garbled adjacency)", "store", S + "adj_nbr.npy", _flip(S + "adj_nbr.npy")),
    Corruption("adj_nbr: 64 entries shuffled (garbled adjacency)", "store", S + "adj_nbr.npy",
               _edit_array(S + "adj_nbr.npy", _shuffle)),
    Corruption("adj_rel: high-bit flip", "store", S + "adj_rel.npy", _flip(S + "adj_rel.npy", high=True)),
    Corruption("adj_tid: low-bit flip", "store", S + "adj_tid.npy", _flip(S + "adj_tid.npy")),
    Corruption("adj_tid: garbage byte", "store", S + "adj_tid.npy", _flip(S + "adj_tid.npy", byte=0xFF)),
    Corruption("entity names: one letter changed (valid UTF-8)", "names", S + "entities_blob.npy",
               _flip(S + "entities_blob.npy")),
    Corruption("entity names: invalid UTF-8 byte", "names", S + "entities_blob.npy",
               _flip(S + "entities_blob.npy", byte=0xFF)),
    Corruption("entity names: an empty name", "names", S + "entities_offsets.npy",
               _edit_array(S + "entities_offsets.npy", _empty_name)),
    Corruption("entity names: offsets high-bit flip", "names", S + "entities_offsets.npy",
               _flip(S + "entities_offsets.npy", high=True)),
    Corruption("entity names: offsets decrease", "names", S + "entities_offsets.npy",
               _edit_array(S + "entities_offsets.npy", _decrease)),
    Corruption("entity names: two names made equal", "names", S + "entities_blob.npy", _duplicate_name),
    Corruption("relation names: invalid UTF-8 byte", "names", S + "relations_blob.npy",
               _flip(S + "relations_blob.npy", byte=0xC3)),
    Corruption("relation names: offsets truncated", "names", S + "relations_offsets.npy",
               _truncate(S + "relations_offsets.npy", keep=0.6)),
    Corruption("entity vectors: a NaN row", "vectors", "entity_vectors.npy",
               _edit_array("entity_vectors.npy", _nan_row)),
    Corruption("entity vectors: an inf value", "vectors", "entity_vectors.npy",
               _edit_array("entity_vectors.npy", _inf_value)),
    Corruption("entity vectors: truncated", "vectors", "entity_vectors.npy", _truncate("entity_vectors.npy", keep=0.7)),
    Corruption("relation vectors: a NaN row", "vectors", "relation_index/vectors.npy",
               _edit_array("relation_index/vectors.npy", _nan_row)),
    Corruption("relation owners: high-bit flip", "vectors", "relation_owner.npy",
               _flip("relation_owner.npy", high=True)),
    Corruption("manifest: no 'kg'", "manifest", "manifest.json", _manifest(_without("kg"))),
    Corruption("manifest: no 'embedder'", "manifest", "manifest.json", _manifest(_without("embedder"))),
    Corruption("manifest: wrong content hash", "manifest", "manifest.json", _manifest(_wrong_hash)),
    Corruption("manifest: entity count off by one", "manifest", "manifest.json", _manifest(_wrong_count)),
    Corruption("manifest: wrong embedder dim", "manifest", "manifest.json", _manifest(_wrong_dim)),
)


def probe_patterns(index: Any, n: int = 12, seed: int = 0) -> list[list[list[str]]]:
    """``n`` 1- and 2-hop patterns through entities of ``index`` (chosen from its store, seeded)."""
    from simgrag.index.directory import relation_text

    store = index.store
    rng = random.Random(seed)
    patterns: list[list[list[str]]] = []
    while len(patterns) < n:
        a = rng.randrange(store.num_entities)
        nbr, rel, _ = store.neighbors(a)
        if len(nbr) == 0:
            continue
        j = rng.randrange(len(nbr))
        first = [store.entities[a], relation_text(store.relations[int(rel[j])]), "UNKNOWN thing 1"]
        if len(patterns) % 2 == 0:
            patterns.append([first])
            continue
        _, rel2, _ = store.neighbors(int(nbr[j]))
        r2 = relation_text(store.relations[int(rel2[rng.randrange(len(rel2))])])
        patterns.append([first, ["UNKNOWN thing 1", r2, "UNKNOWN other 2"]])
    return patterns


def fingerprint(index: Any) -> str:
    """sha256 over what an opened index serves from: every name (decoded), triple, adjacency entry,
    entity vector and relation text. Equal fingerprints: the damaged copy serves the intact data."""
    digest = hashlib.sha256()
    store = index.store
    for table in (store.entities, store.relations):
        digest.update("\x00".join(table).encode("utf-8"))
    for name in ("heads", "rels", "tails", "indptr", "adj_nbr", "adj_rel", "adj_tid"):
        digest.update(np.ascontiguousarray(getattr(store, name), dtype=np.int64).tobytes())
    for arr in (index.entity_vectors, index.relation_owner):
        digest.update(np.ascontiguousarray(arr).tobytes())
    digest.update(json.dumps(index.relation_texts).encode("utf-8"))
    return digest.hexdigest()


def probe(path: Path, patterns: list[list[list[str]]], embedder: Any = None) -> dict[str, Any]:
    """Open ``path`` and retrieve ``patterns``: ``{"stage", "error", "answers", "fingerprint"}`` (never
    raises)."""
    from simgrag.pipeline import SimGRAG

    answers: list[Any] = []
    stage = "open"
    try:
        engine = SimGRAG(path, llm=None, embedder=embedder)
        stage = "query"
        for pattern in patterns:
            try:
                result = engine.retrieve(pattern)
            except SimGRAGError as exc:
                answers.append({"error": type(exc).__name__})
                continue
            answers.append([[ev.gsd, [e.triple.as_tuple() for e in ev.edges]] for ev in result.evidence])
        stage = "read"
        seen = fingerprint(engine.index)
    except SimGRAGError as exc:
        return {"stage": stage, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                "typed": True, "answers": answers}
    except Exception as exc:
        return {"stage": stage, "error": f"{type(exc).__name__}: {exc!s:.200}", "typed": False,
                "trace": traceback.format_exc(limit=5), "answers": answers}
    return {"stage": "done", "error": None, "typed": True, "answers": json.loads(json.dumps(answers)),
            "fingerprint": seen}


def classify(result: dict[str, Any], reference: dict[str, Any]) -> str:
    """``refused`` / ``served`` / ``typed_at_query`` / ``silent`` / ``crash`` (see the module docstring);
    ``reference`` is :func:`probe`'s result on the intact index."""
    if result.get("signal") is not None or not result.get("typed", False):
        return "crash"
    if result["stage"] == "open":
        return "refused"
    if any(isinstance(a, dict) and "error" in a for a in result["answers"]):
        return "typed_at_query"
    if result["stage"] != "done":
        return "typed_at_query"
    same = result["answers"] == reference["answers"] and result["fingerprint"] == reference["fingerprint"]
    return "served" if same else "silent"
