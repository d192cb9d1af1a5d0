"""Structural checks of a loaded :class:`~simgrag.kg.store.KGStore`, vectorised with numpy.

A store read from disk is checked before anything indexes with its arrays, so a corrupt file ends in
a :class:`~simgrag.errors.CorruptStoreError` naming the array and the problem instead of an ``IndexError``, a
``UnicodeDecodeError``, a numba ``TypingError`` or a segfault:

- **names** (entities, relations, types): ``uint8`` blob, integer offsets starting at 0, strictly
  increasing (no empty name) and ending at the blob's length, every name valid UTF-8 (the blob
  decodes and no offset falls inside a multi-byte character);
- **triples**: ``heads``/``rels``/``tails`` one-dimensional integer arrays of one length, ids in range;
- **CSR**: ``indptr`` of length entities + 1 from 0 to the adjacency length, never decreasing;
  ``adj_nbr``/``adj_rel``/``adj_tid`` of that length with ids in range;
- **adjacency = triples** (``full=True``): each entry's triple joins its row's entity and its
  neighbour with its relation, each triple appears once per end (once for a self-loop) and each
  row is sorted by neighbour (the search's binary search relies on it). This catches a garbled
  adjacency whose ids are all in range;
- **types**: the same CSR checks on the node → types and type → nodes arrays.

On MetaQA (43K entities, 128K triples) all of it takes a few milliseconds; ``full=False`` leaves
out the cross-check, which reads every adjacency entry twice more, for stores too large to check at
every open (the compiled search range-checks what it reads anyway).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simgrag.errors import CorruptStoreError

if TYPE_CHECKING:
    from simgrag.kg.names import NameTable
    from simgrag.kg.store import KGStore

__all__ = ["check_names", "check_store"]


def _fail(where: str, problem: str) -> CorruptStoreError:
    return CorruptStoreError(f"The KG store is corrupt: {where} {problem}. Rebuild the index (simgrag index …).")


def _int_vector(where: str, arr: np.ndarray, length: int | None = None) -> None:
    if not isinstance(arr, np.ndarray) or arr.ndim != 1:
        raise _fail(where, f"is not a one-dimensional array (shape {getattr(arr, 'shape', None)})")
    if not np.issubdtype(arr.dtype, np.integer):
        raise _fail(where, f"has dtype {arr.dtype}, expected integers")
    if length is not None and len(arr) != length:
        raise _fail(where, f"has {len(arr):,} entries, expected {length:,}")


def _in_range(where: str, arr: np.ndarray, upper: int) -> None:
    if len(arr) and (int(arr.min()) < 0 or int(arr.max()) >= upper):
        bad = int(np.flatnonzero((arr < 0) | (arr >= upper))[0])
        raise _fail(where, f"entry {bad:,} is {int(arr[bad])}, outside 0..{upper - 1:,}")


def _csr(where: str, indptr: np.ndarray, rows: int, entries: int) -> None:
    _int_vector(where, indptr, rows + 1)
    if int(indptr[0]) != 0 or int(indptr[-1]) != entries:
        raise _fail(where, f"runs from {int(indptr[0])} to {int(indptr[-1])}, expected 0 to {entries:,}")
    if rows and bool((np.diff(indptr) < 0).any()):
        raise _fail(where, f"decreases at row {int(np.flatnonzero(np.diff(indptr) < 0)[0]):,}")


def check_names(table: NameTable, what: str) -> None:
    """Blob and offsets of a name table (see the module docstring)."""
    blob, offsets = table._blob, table._offsets
    if not isinstance(blob, np.ndarray) or blob.ndim != 1 or blob.dtype != np.uint8:
        raise _fail(f"{what}_blob.npy", f"is not a one-dimensional uint8 array ({getattr(blob, 'dtype', None)})")
    _int_vector(f"{what}_offsets.npy", offsets)
    if len(offsets) == 0 or int(offsets[0]) != 0 or int(offsets[-1]) != len(blob):
        raise _fail(f"{what}_offsets.npy", f"does not run from 0 to the blob's {len(blob):,} bytes")
    steps = np.diff(offsets)
    if bool((steps <= 0).any()):
        bad = int(np.flatnonzero(steps <= 0)[0])
        raise _fail(f"{what}_offsets.npy", f"gives name {bad:,} {'no' if steps[bad] == 0 else 'a negative'} length")
    try:
        bytes(blob).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(f"{what}_blob.npy", f"is not valid UTF-8 at byte {exc.start:,}") from None
    starts = blob[offsets[:-1]]
    inside = (starts & 0xC0) == 0x80  # a continuation byte: the name starts inside a character
    if bool(inside.any()):
        raise _fail(f"{what}_offsets.npy", f"cuts name {int(np.flatnonzero(inside)[0]):,} inside a character")


def check_store(store: KGStore, *, full: bool = True) -> None:
    """Raise :class:`CorruptStoreError` when ``store``'s arrays are inconsistent (see the module docstring)."""
    check_names(store.entities, "entities")
    check_names(store.relations, "relations")
    n, r = store.num_entities, store.num_relations
    t = len(store.heads) if isinstance(store.heads, np.ndarray) else -1
    for name, upper in (("heads", n), ("rels", r), ("tails", n)):
        _int_vector(f"{name}.npy", getattr(store, name), t)
        _in_range(f"{name}.npy", getattr(store, name), upper)
    _int_vector("adj_nbr.npy", store.adj_nbr)
    a = len(store.adj_nbr)
    _csr("indptr.npy", store.indptr, n, a)
    for name, upper in (("adj_nbr", n), ("adj_rel", r), ("adj_tid", t)):
        _int_vector(f"{name}.npy", getattr(store, name), a)
        _in_range(f"{name}.npy", getattr(store, name), upper)
    if full:
        _check_adjacency(store)
    if store.types is not None:
        _check_types(store)


def _check_adjacency(store: KGStore) -> None:
    heads, tails = np.asarray(store.heads), np.asarray(store.tails)
    loops = heads == tails
    if len(store.adj_nbr) != 2 * len(heads) - int(loops.sum()):
        raise _fail("adj_nbr.npy", f"has {len(store.adj_nbr):,} entries for {len(heads):,} triples")
    owner = np.repeat(np.arange(store.num_entities, dtype=np.int64), np.diff(store.indptr))
    nbr, tid = np.asarray(store.adj_nbr), np.asarray(store.adj_tid)
    h, tl = heads[tid], tails[tid]
    joins = ((h == owner) & (tl == nbr)) | ((tl == owner) & (h == nbr))
    if not bool(joins.all()):
        bad = int(np.flatnonzero(~joins)[0])
        raise _fail("the adjacency", f"entry {bad:,} (triple {int(tid[bad]):,}) does not join its entity and neighbour")
    if not bool((np.asarray(store.rels)[tid] == store.adj_rel).all()):
        raise _fail("adj_rel.npy", "disagrees with the triples' relations")
    counts = np.bincount(tid, minlength=len(heads))
    if not bool((counts == np.where(loops, 1, 2)).all()):
        raise _fail("adj_tid.npy", "does not list each triple once per end")
    same_row = owner[1:] == owner[:-1]
    if bool((same_row & (nbr[1:] < nbr[:-1])).any()):
        raise _fail("adj_nbr.npy", "is not sorted by neighbour within an entity's row")


def _check_types(store: KGStore) -> None:
    types = store.types
    if types is None:
        return
    check_names(types, "types")
    n, k = store.num_entities, len(types)
    arrays = (store.node_type_indptr, store.node_types, store.type_node_indptr, store.type_nodes)
    if any(a is None for a in arrays):
        raise _fail("the type arrays", "are incomplete")
    node_types, type_nodes = np.asarray(store.node_types), np.asarray(store.type_nodes)
    _int_vector("node_types.npy", node_types)
    _int_vector("type_nodes.npy", type_nodes, len(node_types))
    _csr("node_type_indptr.npy", np.asarray(store.node_type_indptr), n, len(node_types))
    _csr("type_node_indptr.npy", np.asarray(store.type_node_indptr), k, len(type_nodes))
    _in_range("node_types.npy", node_types, k)
    _in_range("type_nodes.npy", type_nodes, n)
