"""Changing a KG store by batches of triples, keeping entity ids (live updates, issue 19).

:func:`apply_delta` returns a new :class:`~simgrag.kg.store.KGStore`; the base is not modified.

- **Entities keep their ids.** New entities are appended in the order the add batch names them, so
  the rows of an index directory's entity vectors stay valid and only new entities need embeddings.
- **An entity that loses its last triple is retired, not deleted.** It keeps its id, name and vector
  but has no triple and no type, and nothing finds it: vector searches skip it
  (:class:`~simgrag.index.live.LiveEntityIndex`), exact-name lookups ignore it
  (:meth:`~simgrag.kg.store.KGStore.entity_id`). A from-scratch build of the same triples would not
  have it at all, so retrieval is the same. A later triple that names it again revives it (same id,
  same vector). Compaction (``simgrag update --compact``) drops retired entities for good.
- **Relations and types are recomputed.** A relation left without triples and a type left without a
  live entity are dropped (the others keep their order, ids renumbered); new ones are appended.
- Within one call the removals come first, then the additions: a triple in both ends up present.
- Entities and relations are matched by IRI when the store and the batch both have IRIs (RDF), else
  by name. An existing entity keeps its name; a new entity whose name an existing one already has (a
  different IRI) is named by its IRI.
- Type facts (CSV type columns, ``rdf:type``) add types in an add batch and remove them in a remove batch.

The triples stay sorted by (head, relation, tail) and the adjacency by (entity, neighbour, relation,
triple): the batch is merged into the existing order in linear time instead of re-sorting
everything, and the result equals what :meth:`KGStore.from_ids` builds from the same ids (a test
checks it array for array).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simgrag.errors import KGError
from simgrag.kg._csr_merge import fits as _fits
from simgrag.kg._csr_merge import merge_adjacency
from simgrag.kg.iris import TermIRIs
from simgrag.kg.names import NameTable
from simgrag.kg.store import KGStore, _invert_types

__all__ = ["DeltaReport", "StoreDelta", "append_names", "apply_delta", "drop_retired"]

@dataclass(frozen=True)
class DeltaReport:
    """What one :func:`apply_delta` changed."""

    triples_added: int = 0
    already_present: int = 0  # added triples the KG already had
    triples_removed: int = 0
    not_found: int = 0  # removed triples the KG did not have
    entities_added: int = 0
    entities_revived: int = 0
    entities_retired: int = 0
    relations_added: int = 0
    relations_dropped: int = 0
    types_changed: bool = False
    entities_dropped: int = 0  # retired entities removed for good by a compaction (ids renumbered)

    @property
    def changed(self) -> bool:
        return bool(self.triples_added or self.triples_removed or self.types_changed or self.entities_dropped)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoreDelta:
    """The updated store; entity ids from ``first_new_entity`` on are new (they need vectors)."""

    store: KGStore
    report: DeltaReport
    first_new_entity: int
    relations_changed: bool


def append_names(table: NameTable, names: list[str]) -> NameTable:
    """``table`` followed by ``names`` (one copy of the blob, no per-name Python work on the old part)."""
    if not names:
        return table
    encoded = [n.encode("utf-8") for n in names]
    blob = np.concatenate([np.asarray(table._blob), np.frombuffer(b"".join(encoded), dtype=np.uint8)])
    ends = int(table._offsets[-1]) + np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return NameTable(blob, np.concatenate([np.asarray(table._offsets, dtype=np.int64), ends]))


# ---------------------------------------------------------------------------------------------- lookups
def _match(names: NameTable, iris: NameTable | None, batch_names: NameTable,
           batch_iris: NameTable | None) -> np.ndarray:
    """For each batch term its id in the store (by IRI when both sides have one, else by name), or -1."""
    by_iri: dict[str, int] | None = None
    if iris is not None and batch_iris is not None:
        by_iri = {iri: i for i, iri in enumerate(iris) if iri}
    out = np.full(len(batch_names), -1, dtype=np.int64)
    for i, name in enumerate(batch_names):
        iri = batch_iris[i] if batch_iris is not None else ""
        found = by_iri.get(iri) if by_iri is not None and iri else names.id_of(name)
        out[i] = -1 if found is None else found
    return out


def _triple_keys(h: np.ndarray, r: np.ndarray, t: np.ndarray, n: int, n_rel: int) -> np.ndarray:
    """One int64 per triple, ordered as (head, relation, tail) (the caller checks the range)."""
    return (h.astype(np.int64) * n_rel + r) * n + t


def _find(store: KGStore, h: np.ndarray, r: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Row of each (h, r, t) in ``store``'s sorted triples, or -1."""
    n, n_rel = store.num_entities, store.num_relations
    if len(h) == 0:
        return np.zeros(0, dtype=np.int64)
    if not _fits(n, n_rel, n):
        raise KGError(f"the KG is too large for live updates ({n:,} entities × {n_rel:,} relations); "
                      "rebuild the index instead")
    keys = _triple_keys(np.asarray(store.heads), np.asarray(store.rels), np.asarray(store.tails), n, n_rel)
    want = _triple_keys(h, r, t, n, n_rel)
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    return np.where(keys[pos] == want, pos, -1)


# ---------------------------------------------------------------------------------------------- delta
def apply_delta(base: KGStore, *, add: KGStore | None = None, remove: KGStore | None = None) -> StoreDelta:
    """``base`` with ``remove``'s triples (and type facts) taken out, then ``add``'s put in (module docstring)."""
    removed = np.zeros(base.num_triples, dtype=bool)
    not_found = 0
    if remove is not None:
        ents = _match(base.entities, _iris(base, "e"), remove.entities, _iris(remove, "e"))
        rels = _match(base.relations, _iris(base, "r"), remove.relations, _iris(remove, "r"))
        h, r, t = ents[remove.heads], rels[remove.rels], ents[remove.tails]
        known = (h >= 0) & (r >= 0) & (t >= 0)
        rows = _find(base, h[known], r[known], t[known])
        removed[rows[rows >= 0]] = True
        not_found = remove.num_triples - int((rows >= 0).sum())
    new_names: list[str] = []
    new_iris: list[str] = []
    add_ents = add_rels = np.zeros(0, dtype=np.int64)
    new_rel_names: list[str] = []
    new_rel_iris: list[str] = []
    if add is not None:
        add_ents, new_names, new_iris = _place_entities(base, add)
        add_rels = _match(base.relations, _iris(base, "r"), add.relations, _iris(add, "r"))
        fresh = np.flatnonzero(add_rels < 0)
        add_rels[fresh] = base.num_relations + np.arange(len(fresh))
        new_rel_names = [add.relations[int(i)] for i in fresh]
        batch_rel_iris = _iris(add, "r")
        new_rel_iris = [batch_rel_iris[int(i)] if batch_rel_iris is not None else "" for i in fresh]
    return _assemble(base, removed, not_found, add, add_ents, add_rels, new_names, new_iris, new_rel_names,
                     new_rel_iris, remove)


def _iris(store: KGStore, what: str) -> NameTable | None:
    if store.iris is None:
        return None
    return store.iris.entities if what == "e" else store.iris.relations


def _place_entities(base: KGStore, add: KGStore) -> tuple[np.ndarray, list[str], list[str]]:
    """Ids of the batch's entities in the updated store (new ones appended), new names and IRIs."""
    ids = _match(base.entities, _iris(base, "e"), add.entities, _iris(add, "e"))
    batch_iris = _iris(add, "e")
    names: list[str] = []
    iris: list[str] = []
    taken: set[str] = set()
    for i in np.flatnonzero(ids < 0).tolist():
        name, iri = add.entities[i], batch_iris[i] if batch_iris is not None else ""
        if base.entities.id_of(name) is not None or name in taken:  # same name, another IRI
            name = _free_name(iri or name, base.entities, taken)
        taken.add(name)
        ids[i] = base.num_entities + len(names)
        names.append(name)
        iris.append(iri)
    return ids, names, iris


def _free_name(wanted: str, table: NameTable, taken: set[str]) -> str:
    name, n = wanted, 2
    while table.id_of(name) is not None or name in taken:
        name, n = f"{wanted} ({n})", n + 1
    return name


def _assemble(base: KGStore, removed: np.ndarray, not_found: int, add: KGStore | None, add_ents: np.ndarray,
              add_rels: np.ndarray, new_names: list[str], new_iris: list[str], new_rel_names: list[str],
              new_rel_iris: list[str], remove: KGStore | None) -> StoreDelta:
    n0, n = base.num_entities, base.num_entities + len(new_names)
    kept = np.flatnonzero(~removed)
    kh, kr, kt = (np.asarray(a)[kept] for a in (base.heads, base.rels, base.tails))
    if add is not None:
        ah, ar, at = add_ents[add.heads], add_rels[add.rels], add_ents[add.tails]
    else:
        ah = ar = at = np.zeros(0, dtype=np.int64)
    # relations: drop those left without triples, keep order, append new ones
    r_prov = base.num_relations + len(new_rel_names)
    counts = np.bincount(kr, minlength=r_prov) + np.bincount(ar, minlength=r_prov)
    live_rel = counts > 0
    if not live_rel.any():
        raise KGError("the update would remove every triple of the KG; build a new index instead")
    rel_map = (np.cumsum(live_rel) - 1).astype(np.int64)
    n_rel = int(live_rel.sum())
    if not _fits(n, n_rel, n) or not _fits(n, n, n_rel, 2):
        raise KGError(f"the KG is too large for live updates ({n:,} entities × {n_rel:,} relations); "
                      "rebuild the index instead")
    kr, ar = rel_map[kr], rel_map[ar]
    keep_key = _triple_keys(kh, kr, kt, n, n_rel)
    add_key, first = np.unique(_triple_keys(ah, ar, at, n, n_rel), return_index=True)
    ah, ar, at = ah[first], ar[first], at[first]
    pos = np.minimum(np.searchsorted(keep_key, add_key), max(len(keep_key) - 1, 0))
    present = (keep_key[pos] == add_key) if len(keep_key) else np.zeros(len(add_key), dtype=bool)
    fresh = ~present
    ah, ar, at, add_key = ah[fresh], ar[fresh], at[fresh], add_key[fresh]
    insert_at = np.searchsorted(keep_key, add_key)
    heads = np.insert(kh.astype(np.int32), insert_at, ah.astype(np.int32))
    rels = np.insert(kr.astype(np.int32), insert_at, ar.astype(np.int32))
    tails = np.insert(kt.astype(np.int32), insert_at, at.astype(np.int32))
    if len(heads) == 0:
        raise KGError("the update would remove every triple of the KG; build a new index instead")
    new_tid = (insert_at + np.arange(len(insert_at))).astype(np.int64)
    kept_tid = np.arange(len(kept), dtype=np.int64) + np.searchsorted(insert_at, np.arange(len(kept)), side="right")
    old_to_new = np.full(base.num_triples, -1, dtype=np.int64)
    old_to_new[kept] = kept_tid
    same_rels = n_rel == base.num_relations and bool(live_rel[: base.num_relations].all())
    arrays = merge_adjacency(base, n, n_rel, None if same_rels else rel_map, old_to_new, heads, rels, tails,
                             new_tid)
    entities = append_names(base.entities, new_names)
    relations = NameTable.from_names([base.relations[int(i)] for i in np.flatnonzero(live_rel[: base.num_relations])]
                                     + [name for i, name in enumerate(new_rel_names)
                                        if live_rel[base.num_relations + i]])
    degree = np.diff(arrays["indptr"])
    old_degree = np.diff(np.asarray(base.indptr))
    types, type_arrays, types_changed = _types(base, add, add_ents, remove, n, degree > 0)
    store = KGStore(entities, relations, arrays, types, type_arrays, duplicates_removed=base.duplicates_removed)
    store.iris = _merged_iris(base, add, new_iris, live_rel, new_rel_iris)
    report = DeltaReport(
        triples_added=len(ah), already_present=int(present.sum()), triples_removed=int(removed.sum()),
        not_found=not_found, entities_added=len(new_names),
        entities_revived=int(((old_degree == 0) & (degree[:n0] > 0)).sum()),
        entities_retired=int(((old_degree > 0) & (degree[:n0] == 0)).sum()),
        relations_added=len(new_rel_names), relations_dropped=int((~live_rel[: base.num_relations]).sum()),
        types_changed=types_changed)
    changed_rel = n_rel != base.num_relations or bool(new_rel_names) or not bool(live_rel[: base.num_relations].all())
    return StoreDelta(store, report, n0, changed_rel)


# ---------------------------------------------------------------------------------------------- types, IRIs
def _pairs_of(store: KGStore) -> tuple[np.ndarray, np.ndarray]:
    if store.types is None or store.node_type_indptr is None or store.node_types is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    owners = np.repeat(np.arange(store.num_entities, dtype=np.int64), np.diff(np.asarray(store.node_type_indptr)))
    return owners, np.asarray(store.node_types, dtype=np.int64)


def _types(base: KGStore, add: KGStore | None, add_ents: np.ndarray, remove: KGStore | None, n: int,
           live: np.ndarray) -> tuple[NameTable | None, dict[str, np.ndarray] | None, bool]:
    """Entity types after the update: the base's, plus the add batch's, minus the remove batch's, of
    live entities only; the type table lists the types still in use (base order, then new ones).

    The base's (entity, type) pairs are sorted and unique already, so the batch is merged in with
    binary searches; an update that touches no type only extends the node → types offsets."""
    names = list(base.types) if base.types is not None else []
    index = {name: i for i, name in enumerate(names)}
    extra = np.zeros(0, dtype=np.int64)
    if add is not None and add.types is not None:
        b_ent, b_typ = _pairs_of(add)
        for name in add.types:
            if name not in index:
                index[name] = len(names)
                names.append(name)
        b_map = np.array([index[name] for name in add.types], dtype=np.int64)
        extra_e, extra_t = add_ents[b_ent], b_map[b_typ]
    if not names:
        return None, None, False
    t_all = len(names)
    ent, typ = _pairs_of(base)
    keys = ent * t_all + typ  # ascending: the pairs are sorted by (entity, type)
    if add is not None and add.types is not None:
        extra = np.setdiff1d(np.unique(extra_e * t_all + extra_t), keys, assume_unique=True)
        keys = np.insert(keys, np.searchsorted(keys, extra), extra)
    gone = np.zeros(0, dtype=np.int64)
    if remove is not None and remove.types is not None and len(keys):
        wanted = _removed_type_keys(base, remove, list(remove.types), index, t_all)
        pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        gone = pos[keys[pos] == wanted]
        keys = np.delete(keys, gone)
    alive = live[keys // t_all]
    if not len(extra) and not len(gone) and bool(alive.all()) and base.types is not None:
        return base.types, _extended_types(base, n), False
    keys = keys[alive]
    if not len(keys):
        return None, None, True
    used = np.zeros(t_all, dtype=bool)
    used[keys % t_all] = True
    type_map = np.cumsum(used) - 1
    final_names = [name for name, u in zip(names, used.tolist(), strict=True) if u]
    node_type_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // t_all, minlength=n), out=node_type_indptr[1:])
    node_types = type_map[keys % t_all].astype(np.int32)
    tn_indptr, tn_nodes = _invert_types(n, len(final_names), node_type_indptr, node_types)
    return NameTable.from_names(final_names), {"node_type_indptr": node_type_indptr, "node_types": node_types,
                                               "type_node_indptr": tn_indptr, "type_nodes": tn_nodes}, True


def _extended_types(base: KGStore, n: int) -> dict[str, np.ndarray]:
    """The base's type arrays for ``n`` entities (new ones have no type)."""
    indptr = np.asarray(base.node_type_indptr)
    grown = np.concatenate([indptr, np.full(n - base.num_entities, indptr[-1], dtype=indptr.dtype)])
    return {"node_type_indptr": grown, "node_types": np.asarray(base.node_types),
            "type_node_indptr": np.asarray(base.type_node_indptr), "type_nodes": np.asarray(base.type_nodes)}


def _removed_type_keys(base: KGStore, remove: KGStore, type_names: list[str], index: dict[str, int],
                       t_all: int) -> np.ndarray:
    r_ent, r_typ = _pairs_of(remove)
    ents = _match(base.entities, _iris(base, "e"), remove.entities, _iris(remove, "e"))
    typ_map = np.array([index.get(name, -1) for name in type_names], dtype=np.int64)
    e, t = ents[r_ent], typ_map[r_typ]
    ok = (e >= 0) & (t >= 0)
    return np.unique(e[ok] * t_all + t[ok])


def _merged_iris(base: KGStore, add: KGStore | None, new_iris: list[str], live_rel: np.ndarray,
                 new_rel_iris: list[str]) -> TermIRIs | None:
    if base.iris is None and (add is None or add.iris is None):
        return None
    if base.iris is not None:
        ent_iris = append_names(base.iris.entities, new_iris)
        old_rel = [base.iris.relations[i] for i in range(base.num_relations)]
    else:
        ent_iris = NameTable.from_names([""] * base.num_entities + new_iris)
        old_rel = [""] * base.num_relations
    rel_iris = [iri for iri, live in zip(old_rel + new_rel_iris, live_rel.tolist(), strict=True) if live]
    return TermIRIs(ent_iris, NameTable.from_names(rel_iris))


# ---------------------------------------------------------------------------------------------- compaction
def _take_names(table: NameTable, keep: np.ndarray) -> NameTable:
    lengths = np.diff(np.asarray(table._offsets))
    blob = np.asarray(table._blob)[np.repeat(keep, lengths)]
    offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(lengths[keep], out=offsets[1:])
    return NameTable(blob, offsets)


def drop_retired(base: KGStore) -> StoreDelta:
    """``base`` without its retired entities, the others renumbered in order (compaction).

    A retired entity has no triple and no type, so the triples and the adjacency keep their order and
    only entity ids are mapped; ``first_new_entity`` is the new entity count (nothing to embed)."""
    retired = base.retired_entities()
    live = np.ones(base.num_entities, dtype=bool)
    live[retired] = False
    new_id = (np.cumsum(live) - 1).astype(np.int32)
    n = int(live.sum())
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.diff(np.asarray(base.indptr))[live], out=indptr[1:])
    arrays = {"heads": new_id[np.asarray(base.heads)], "rels": np.asarray(base.rels),
              "tails": new_id[np.asarray(base.tails)], "indptr": indptr,
              "adj_nbr": new_id[np.asarray(base.adj_nbr)], "adj_rel": np.asarray(base.adj_rel),
              "adj_tid": np.asarray(base.adj_tid)}
    type_arrays = None
    if base.types is not None and base.node_type_indptr is not None:
        node_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.diff(np.asarray(base.node_type_indptr))[live], out=node_indptr[1:])
        type_arrays = {"node_type_indptr": node_indptr, "node_types": np.asarray(base.node_types),
                       "type_node_indptr": np.asarray(base.type_node_indptr),
                       "type_nodes": new_id[np.asarray(base.type_nodes)]}
    store = KGStore(_take_names(base.entities, live), base.relations, arrays, base.types, type_arrays,
                    duplicates_removed=base.duplicates_removed)
    if base.iris is not None:
        store.iris = TermIRIs(_take_names(base.iris.entities, live), base.iris.relations)
    return StoreDelta(store, DeltaReport(entities_dropped=len(retired)), n, relations_changed=False)

