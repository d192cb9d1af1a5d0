"""The IRIs behind a KG's entities and relations, for KGs read from RDF.

Names are what people and models read (``Douglas Adams``); the IRI is what identifies the node in
its source (``http://dbpedia.org/resource/Douglas_Adams``). A store read from RDF keeps both:
:class:`TermIRIs` holds one IRI per entity and per relation, aligned with their ids, ``""`` where a
term has none (literals, blank nodes). Evidence carries them, so JSON results and the web page can
link every node and edge back to its source.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simgrag.kg.names import NameTable

__all__ = ["TermIRIs"]

_ENTITIES, _RELATIONS = "entity_iris", "relation_iris"


class TermIRIs:
    """IRIs of entities and relations, by id (``""``: the term has no IRI)."""

    def __init__(self, entities: NameTable, relations: NameTable) -> None:
        self.entities = entities
        self.relations = relations

    @classmethod
    def from_lists(cls, entities: Sequence[str], relations: Sequence[str]) -> TermIRIs:
        return cls(NameTable.from_names(entities), NameTable.from_names(relations))

    def entity(self, entity_id: int) -> str | None:
        """The IRI of entity ``entity_id``, or ``None`` (a literal or a blank node)."""
        return self.entities[entity_id] or None

    def relation(self, relation_id: int) -> str | None:
        """The IRI of relation ``relation_id``, or ``None``."""
        return self.relations[relation_id] or None

    def save(self, directory: Path) -> None:
        self.entities.save(directory, _ENTITIES)
        self.relations.save(directory, _RELATIONS)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = True) -> TermIRIs | None:
        """The IRIs saved in ``directory``, or ``None`` when the store has none."""
        if not (directory / f"{_ENTITIES}_blob.npy").exists():
            return None
        return cls(NameTable.load(directory, _ENTITIES, mmap=mmap), NameTable.load(directory, _RELATIONS, mmap=mmap))
