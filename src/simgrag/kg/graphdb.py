"""A property-graph database as a KG source: Kùzu (embedded; ``pip install 'simgrag[graphdb]'``).

Read through Kùzu's own client and Cypher, read-only::

    CALL show_tables() RETURN *                        node and relationship tables
    MATCH (n:Person) RETURN offset(id(n)), n.name, …    nodes, per label
    MATCH (a)-[r:DIRECTED]->(b) RETURN …                relationships, per type

- a node is an entity named by its first non-empty *name property* (``name``, ``title``, ``label``
  by default), else its string primary key, else ``Label key``; two nodes with one name keep apart
  (the later one becomes ``name (Label key)``);
- a node's label (its table) is its entity type, so typed ``UNKNOWN person 1`` nodes use them;
- a relationship type is a relation (``DIRECTED_BY`` reads as ``directed by`` to the embedder);
- with ``properties=True`` every other scalar property is a triple ``(node, property, value)``
  whose value is a node named by its text (like RDF literals).

FalkorDB Lite needs Python ≥ 3.12 (not installable here); Kùzu 0.11 installs from PyPI and runs in
process, so it is the database simgrag reads and tests against.
"""

from __future__ import annotations

import logging
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simgrag.errors import ConfigError, EmptyKGError, KGError
from simgrag.kg._ids import id_array, unique_names
from simgrag.kg.store import KGStore

if TYPE_CHECKING:
    from simgrag.kg.loader import LoadReport

__all__ = ["KuzuSource"]

logger = logging.getLogger(__name__)

_SCALAR = ("STRING", "INT", "UINT", "DOUBLE", "FLOAT", "BOOL", "DATE", "TIMESTAMP", "DECIMAL", "INTERVAL", "UUID")


def _kuzu() -> Any:
    try:
        import kuzu
    except ImportError as exc:
        raise ConfigError("Reading a Kùzu database needs kuzu: pip install 'simgrag[graphdb]'") from exc
    return kuzu


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class _Table:
    name: str
    properties: list[tuple[str, str, bool]]  # (name, type, primary key)

    @property
    def key(self) -> str | None:
        return next((n for n, _, pk in self.properties if pk), None)


class _Graph:
    """Entities, types and triples while the tables stream in."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int], int] = {}  # (label, offset) → entity id
        self.names: list[str] = []
        self.fallbacks: list[str] = []
        self.labels: list[str] = []
        self.values: dict[str, int] = {}  # property value text → entity id
        self.relations: dict[str, int] = {}
        self.heads, self.rels, self.tails = array("i"), array("i"), array("i")

    def node(self, label: str, offset: int, name: str, fallback: str) -> int:
        ident = self.ids[(label, offset)] = len(self.names)
        self.names.append(name)
        self.fallbacks.append(fallback)
        self.labels.append(label)
        return ident

    def value(self, text: str) -> int:
        found = self.values.get(text)
        if found is None:
            found = self.values[text] = self.node("", -1 - len(self.values), text, f'"{text}"')
        return found

    def triple(self, head: int, relation: str, tail: int) -> None:
        self.heads.append(head)
        self.rels.append(self.relations.setdefault(relation, len(self.relations)))
        self.tails.append(tail)


@dataclass(frozen=True)
class KuzuSource:
    """The nodes and relationships of the Kùzu database at ``database`` (see the module docstring)."""

    database: Path
    name_properties: tuple[str, ...] = ("name", "title", "label")
    properties: bool = False

    @property
    def description(self) -> str:
        return f"kuzu:{self.database}"

    def finished(self) -> None:
        return None

    def _connect(self) -> Any:
        kuzu = _kuzu()
        if not Path(self.database).exists():
            raise KGError(f"{self.description}: no Kùzu database there (check the path)")
        try:
            return kuzu.Connection(kuzu.Database(str(self.database), read_only=True))
        except RuntimeError as exc:
            raise KGError(f"{self.description}: cannot open the database read-only: {exc}") from exc

    def _rows(self, conn: Any, query: str) -> Any:
        try:
            result = conn.execute(query)
        except RuntimeError as exc:
            raise KGError(f"{self.description}: the query failed: {exc} (query: {query})") from exc
        while result.has_next():
            yield result.get_next()

    def _tables(self, conn: Any) -> tuple[list[_Table], list[str]]:
        nodes, rels = [], []
        for row in self._rows(conn, "CALL show_tables() RETURN name, type"):
            if row[1] == "NODE":
                info = self._rows(conn, f"CALL table_info('{row[0]}') RETURN *")
                nodes.append(_Table(row[0], [(r[1], str(r[2]), bool(r[4])) for r in info]))
            elif row[1] == "REL":
                rels.append(row[0])
        return nodes, rels

    def _read_nodes(self, conn: Any, table: _Table, graph: _Graph) -> None:
        names = [n for n in self.name_properties if any(p == n for p, _, _ in table.properties)]
        extra = [p for p, kind, _ in table.properties
                 if self.properties and kind != "SERIAL" and kind.startswith(_SCALAR)]
        key = table.key
        columns = list(dict.fromkeys([key, *names, *extra] if key else [*names, *extra]))
        select = ", ".join(f"n.{_quote(c)} AS c{i}" for i, c in enumerate(columns))
        query = f"MATCH (n:{_quote(table.name)}) RETURN offset(id(n)) AS o{', ' + select if select else ''}"
        for row in self._rows(conn, query):
            values = dict(zip(columns, row[1:], strict=True))
            chosen = next((c for c in names if values.get(c) not in (None, "")), None)
            key_text = str(values.get(key)) if key else str(row[0])
            if chosen is not None:
                name = " ".join(str(values[chosen]).split())
            elif key and isinstance(values.get(key), str) and values[key].strip():
                name, chosen = " ".join(values[key].split()), key
            else:
                name = f"{table.name} {key_text}"
            node = graph.node(table.name, int(row[0]), name, f"{name} ({table.name} {key_text})")
            for prop in extra:
                value = values.get(prop)
                if prop != chosen and value is not None and str(value).strip():
                    graph.triple(node, prop, graph.value(" ".join(str(value).split())))

    def _read_relationships(self, conn: Any, rel: str, graph: _Graph) -> None:
        query = (f"MATCH (a)-[r:{_quote(rel)}]->(b) "
                 "RETURN label(a) AS la, offset(id(a)) AS oa, label(b) AS lb, offset(id(b)) AS ob")
        ids = graph.ids
        for a_label, a, b_label, b in self._rows(conn, query):
            graph.triple(ids[(a_label, a)], rel, ids[(b_label, b)])

    def load(self, *, show_progress: bool | None = None) -> tuple[KGStore, LoadReport]:
        """Read every node table, then every relationship table, into a store."""
        from simgrag.kg.loader import LoadReport

        start = time.perf_counter()
        conn = self._connect()
        graph = _Graph()
        node_tables, rel_tables = self._tables(conn)
        for table in node_tables:
            self._read_nodes(conn, table, graph)
        for rel in rel_tables:
            self._read_relationships(conn, rel, graph)
        store = self._build(graph)
        report = LoadReport(
            path=self.description, format="kuzu", lines_read=len(graph.names), triples_read=len(graph.heads),
            duplicates_removed=store.duplicates_removed, skipped_lines=0, skipped_reasons={}, examples=[],
            comment_or_blank_lines=0, entities=store.num_entities, relations=store.num_relations,
            types=store.num_types, seconds=time.perf_counter() - start,
        )
        logger.info("Loaded %s (%d node tables, %d relationship tables)", report.summary(), len(node_tables),
                    len(rel_tables))
        return store, report

    def _build(self, graph: _Graph) -> KGStore:
        if not graph.heads:
            raise EmptyKGError(f"{self.description}: no relationship found (nodes alone make no triple)")
        heads, tails = id_array(graph.heads), id_array(graph.tails)
        used = np.zeros(len(graph.names), dtype=bool)
        used[heads] = True
        used[tails] = True
        new_id = (np.cumsum(used) - 1).astype(np.int32)
        kept = np.flatnonzero(used).tolist()
        if len(kept) < len(graph.names):
            logger.info("%d nodes without relationships left out", len(graph.names) - len(kept))
        labels = sorted({graph.labels[i] for i in kept} - {""})
        type_of = {name: i for i, name in enumerate(labels)}
        pairs = np.array([(new_id[i], type_of[graph.labels[i]]) for i in kept if graph.labels[i]],
                         dtype=np.int32).reshape(-1, 2)
        return KGStore.from_ids(
            unique_names([graph.names[i] for i in kept], [graph.fallbacks[i] for i in kept]),
            list(graph.relations), new_id[heads], id_array(graph.rels),
            new_id[tails], entity_types=labels or None, type_pairs=pairs if len(pairs) else None,
        )
