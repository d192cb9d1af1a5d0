"""The KG store: interned names, deduplicated triples and CSR adjacency over both directions.

Layout (all numpy, persisted as ``.npy`` and memory-mapped on load):

- ``heads``, ``rels``, ``tails`` (int32, one row per unique triple, in KG orientation);
- ``indptr`` (int64, N+1) with ``adj_nbr``, ``adj_rel``, ``adj_tid`` (int32): for node ``v`` the
  entries ``indptr[v]:indptr[v+1]`` list every triple touching ``v`` *in either direction* (matching
  ignores direction, SimGRAG §4.2), sorted by (neighbour, relation, triple id). ``adj_tid`` points
  back into the triple arrays, so evidence is always shown as the KG states it. A self-loop appears
  once.
- optional entity types: ``type_names`` with node → types and type → nodes CSR arrays.
- optional IRIs of entities and relations (KGs read from RDF; :mod:`simgrag.kg.iris`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from simgrag.errors import EmptyKGError, KGError
from simgrag.kg.iris import TermIRIs
from simgrag.kg.names import NameTable

__all__ = ["FULL_CHECK_MAX_ENTRIES", "KGStore", "Triple", "build_csr"]

#: adjacency entries up to which :meth:`KGStore.load` cross-checks the adjacency against the triples
FULL_CHECK_MAX_ENTRIES = 20_000_000

_ARRAYS = ("heads", "rels", "tails", "indptr", "adj_nbr", "adj_rel", "adj_tid")
_TYPE_ARRAYS = ("node_type_indptr", "node_types", "type_node_indptr", "type_nodes")


@dataclass(frozen=True)
class Triple:
    """One KG fact as names, in the KG's own orientation."""

    head: str
    relation: str
    tail: str

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.head, self.relation, self.tail)


def build_csr(
    num_nodes: int, heads: np.ndarray, tails: np.ndarray, rels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Undirected CSR over triples: (indptr, nbr, rel, triple_id), sorted per node."""
    tid = np.arange(len(heads), dtype=np.int32)
    loop = heads == tails
    src = np.concatenate([heads, tails[~loop]])
    dst = np.concatenate([tails, heads[~loop]])
    rel = np.concatenate([rels, rels[~loop]])
    eid = np.concatenate([tid, tid[~loop]])
    order = np.lexsort((eid, rel, dst, src))
    src, dst, rel, eid = src[order], dst[order], rel[order], eid[order]
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=num_nodes), out=indptr[1:])
    return indptr, dst.astype(np.int32), rel.astype(np.int32), eid.astype(np.int32)


def _invert_types(
    num_nodes: int, num_types: int, node_type_indptr: np.ndarray, node_types: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    owners = np.repeat(np.arange(num_nodes, dtype=np.int32), np.diff(node_type_indptr))
    order = np.lexsort((owners, node_types))
    type_nodes = owners[order]
    indptr = np.zeros(num_types + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_types, minlength=num_types), out=indptr[1:])
    return indptr, type_nodes.astype(np.int32)


class KGStore:
    """An immutable KG: names ↔ ids, unique triples and undirected CSR adjacency."""

    def __init__(
        self,
        entities: NameTable,
        relations: NameTable,
        arrays: dict[str, np.ndarray],
        types: NameTable | None = None,
        type_arrays: dict[str, np.ndarray] | None = None,
        duplicates_removed: int = 0,
    ) -> None:
        self.entities = entities
        self.relations = relations
        self.types = types
        self.duplicates_removed = duplicates_removed
        self.heads: np.ndarray = arrays["heads"]
        self.rels: np.ndarray = arrays["rels"]
        self.tails: np.ndarray = arrays["tails"]
        self.indptr: np.ndarray = arrays["indptr"]
        self.adj_nbr: np.ndarray = arrays["adj_nbr"]
        self.adj_rel: np.ndarray = arrays["adj_rel"]
        self.adj_tid: np.ndarray = arrays["adj_tid"]
        ta = type_arrays or {}
        self.node_type_indptr: np.ndarray | None = ta.get("node_type_indptr")
        self.node_types: np.ndarray | None = ta.get("node_types")
        self.type_node_indptr: np.ndarray | None = ta.get("type_node_indptr")
        self.type_nodes: np.ndarray | None = ta.get("type_nodes")
        self.iris: TermIRIs | None = None  # set by RDF readers; saved and loaded with the store

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_ids(
        cls,
        entities: Sequence[str] | NameTable,
        relations: Sequence[str] | NameTable,
        heads: np.ndarray,
        rels: np.ndarray,
        tails: np.ndarray,
        *,
        entity_types: Sequence[str] | NameTable | None = None,
        type_pairs: np.ndarray | None = None,
    ) -> KGStore:
        """Build from interned ids; duplicate triples are removed and counted.

        ``type_pairs`` is an (M, 2) array of (entity id, type id) rows.
        """
        ent = entities if isinstance(entities, NameTable) else NameTable.from_names(entities)
        rel = relations if isinstance(relations, NameTable) else NameTable.from_names(relations)
        h = np.asarray(heads, dtype=np.int32)
        r = np.asarray(rels, dtype=np.int32)
        t = np.asarray(tails, dtype=np.int32)
        if len(h) == 0:
            raise EmptyKGError("The KG has no triples: nothing to build a store from.")
        if not (len(h) == len(r) == len(t)):
            raise KGError("heads, rels and tails must have the same length")
        n, nr = len(ent), len(rel)
        if h.max() >= n or t.max() >= n or min(h.min(), t.min(), r.min()) < 0 or r.max() >= nr:
            raise KGError("triple ids out of range of the name tables")
        order = np.lexsort((t, r, h))
        h, r, t = h[order], r[order], t[order]
        keep = np.ones(len(h), dtype=bool)
        keep[1:] = (h[1:] != h[:-1]) | (r[1:] != r[:-1]) | (t[1:] != t[:-1])
        dups = int(len(h) - keep.sum())
        h, r, t = h[keep], r[keep], t[keep]
        indptr, nbr, arel, tid = build_csr(n, h, t, r)
        arrays = {"heads": h, "rels": r, "tails": t, "indptr": indptr,
                  "adj_nbr": nbr, "adj_rel": arel, "adj_tid": tid}
        types_table, type_arrays = cls._build_types(n, entity_types, type_pairs)
        return cls(ent, rel, arrays, types_table, type_arrays, duplicates_removed=dups)

    @staticmethod
    def _build_types(
        n: int,
        entity_types: Sequence[str] | NameTable | None,
        type_pairs: np.ndarray | None,
    ) -> tuple[NameTable | None, dict[str, np.ndarray] | None]:
        if entity_types is None or type_pairs is None or len(type_pairs) == 0:
            return None, None
        table = entity_types if isinstance(entity_types, NameTable) else NameTable.from_names(entity_types)
        pairs = np.unique(np.asarray(type_pairs, dtype=np.int32).reshape(-1, 2), axis=0)
        node_type_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(pairs[:, 0], minlength=n), out=node_type_indptr[1:])
        node_types = pairs[:, 1].copy()
        tn_indptr, tn_nodes = _invert_types(n, len(table), node_type_indptr, node_types)
        return table, {"node_type_indptr": node_type_indptr, "node_types": node_types,
                       "type_node_indptr": tn_indptr, "type_nodes": tn_nodes}

    @classmethod
    def from_triples(
        cls,
        triples: Iterable[tuple[str, str, str] | Triple],
        *,
        entity_types: Iterable[tuple[str, str]] = (),
    ) -> KGStore:
        """Build from name triples (convenient for small KGs and tests)."""
        ent: dict[str, int] = {}
        rel: dict[str, int] = {}
        hs: list[int] = []
        rs: list[int] = []
        ts: list[int] = []
        for tr in triples:
            h, r, t = tr.as_tuple() if isinstance(tr, Triple) else tr
            hs.append(ent.setdefault(h, len(ent)))
            rs.append(rel.setdefault(r, len(rel)))
            ts.append(ent.setdefault(t, len(ent)))
        tnames: dict[str, int] = {}
        pairs = [(ent[e], tnames.setdefault(ty, len(tnames))) for e, ty in entity_types if e in ent]
        return cls.from_ids(
            list(ent), list(rel), np.array(hs), np.array(rs), np.array(ts),
            entity_types=list(tnames) if pairs else None,
            type_pairs=np.array(pairs, dtype=np.int32) if pairs else None,
        )

    # ------------------------------------------------------------------ access
    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    @property
    def num_triples(self) -> int:
        return len(self.heads)

    @property
    def num_types(self) -> int:
        return 0 if self.types is None else len(self.types)

    def triple(self, tid: int) -> Triple:
        """Triple ``tid`` as names, in KG orientation."""
        return Triple(
            self.entities[int(self.heads[tid])],
            self.relations[int(self.rels[tid])],
            self.entities[int(self.tails[tid])],
        )

    @functools.cached_property
    def has_self_loops(self) -> bool:
        """Whether some triple joins an entity to itself (computed once)."""
        return bool(np.any(self.heads == self.tails))

    def degree(self, node: int) -> int:
        return int(self.indptr[node + 1] - self.indptr[node])

    def entity_id(self, name: str) -> int | None:
        """The id of the entity called ``name`` if it has a triple, else ``None``: an entity retired by a
        live update (:mod:`simgrag.kg.delta`) keeps its name in the table but is not found."""
        found = self.entities.id_of(name)
        return found if found is not None and self.degree(found) > 0 else None

    def retired_entities(self) -> np.ndarray:
        """Ids of the entities without any triple (retired by live updates; none in a fresh build)."""
        return np.flatnonzero(np.diff(np.asarray(self.indptr)) == 0)

    def neighbors(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(neighbour ids, relation ids, triple ids) of every triple touching ``node``."""
        s, e = int(self.indptr[node]), int(self.indptr[node + 1])
        return self.adj_nbr[s:e], self.adj_rel[s:e], self.adj_tid[s:e]

    def nodes_of_type(self, type_id: int) -> np.ndarray:
        if self.type_node_indptr is None or self.type_nodes is None:
            return np.zeros(0, dtype=np.int32)
        s, e = int(self.type_node_indptr[type_id]), int(self.type_node_indptr[type_id + 1])
        return self.type_nodes[s:e]

    def types_of(self, node: int) -> np.ndarray:
        if self.node_type_indptr is None or self.node_types is None:
            return np.zeros(0, dtype=np.int32)
        s, e = int(self.node_type_indptr[node]), int(self.node_type_indptr[node + 1])
        return self.node_types[s:e]

    def content_hash(self) -> str:
        """sha256 over names and triples: equal for equal KGs, whatever the input format."""
        digest = hashlib.sha256()
        for table in (self.entities, self.relations):
            digest.update(np.ascontiguousarray(table._offsets).tobytes())
            digest.update(np.ascontiguousarray(table._blob).tobytes())
        for arr in (self.heads, self.rels, self.tails):
            digest.update(np.ascontiguousarray(arr).tobytes())
        if self.types is not None and self.node_types is not None:
            digest.update(np.ascontiguousarray(self.types._blob).tobytes())
            digest.update(np.ascontiguousarray(self.node_types).tobytes())
        return digest.hexdigest()  # IRIs are left out: the same names and triples from RDF or a pipe file hash alike

    def stats(self) -> dict[str, int]:
        return {
            "entities": self.num_entities,
            "relations": self.num_relations,
            "triples": self.num_triples,
            "types": self.num_types,
            "duplicates_removed": self.duplicates_removed,
            "max_degree": int(np.diff(self.indptr).max()) if self.num_entities else 0,
        }

    # ------------------------------------------------------------------ persistence
    def save(self, directory: Path) -> None:
        """Write every array into ``directory`` (which must exist)."""
        directory = Path(directory)
        self.entities.save(directory, "entities")
        self.relations.save(directory, "relations")
        for name in _ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self, name))
        if self.types is not None:
            self.types.save(directory, "types")
            for name in _TYPE_ARRAYS:
                np.save(directory / f"{name}.npy", getattr(self, name))
        if self.iris is not None:
            self.iris.save(directory)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = True, duplicates_removed: int = 0,
             check: bool | None = None) -> KGStore:
        """Open a saved store and check its arrays (:mod:`simgrag.kg.checks`): ``check=True`` runs every
        check, ``False`` only the cheap ones (shapes, dtypes, ranges, CSR bounds), ``None`` all of them
        when the adjacency has at most :data:`FULL_CHECK_MAX_ENTRIES` entries."""
        from simgrag.kg.checks import check_store

        directory = Path(directory)
        mode: Literal["r"] | None = "r" if mmap else None
        try:
            ent = NameTable.load(directory, "entities", mmap=mmap)
            rel = NameTable.load(directory, "relations", mmap=mmap)
            arrays = {n: np.load(directory / f"{n}.npy", mmap_mode=mode) for n in _ARRAYS}
            types = None
            type_arrays = None
            if (directory / "types_blob.npy").exists():
                types = NameTable.load(directory, "types", mmap=mmap)
                type_arrays = {n: np.load(directory / f"{n}.npy", mmap_mode=mode) for n in _TYPE_ARRAYS}
            iris = TermIRIs.load(directory, mmap=mmap)
        except (OSError, ValueError, EOFError) as exc:
            raise KGError(f"Cannot load the KG store from {directory}: {exc}") from exc
        store = cls(ent, rel, arrays, types, type_arrays, duplicates_removed=duplicates_removed)
        store.iris = iris
        full = check if check is not None else len(store.adj_nbr) <= FULL_CHECK_MAX_ENTRIES
        check_store(store, full=full)
        return store
