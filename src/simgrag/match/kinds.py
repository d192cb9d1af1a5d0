"""What kind of thing each KG entity is, read off the examples' patterns: a prior on typed unknown nodes.

SimGRAG's unknown node matches every entity at distance 0 (§4.3), so the LLM's own word for it —
``UNKNOWN person 1`` — counts for nothing, and a pattern whose relation the LLM picked wrong is matched
by the wrong kind of thing without cost: "who is from England?" written ``[UNKNOWN person 1, is in
country, England]`` is matched *exactly* by the clubs in England, although the LLM said it wants people.

The examples (a user's file, or the ones learnt from the KG) say what each kind is in the KG's own
terms: a pattern that puts ``UNKNOWN club 1`` at the head of ``is in country`` says the heads of that
relation are clubs (:func:`example_uses`). Over the whole KG this gives each kind its members: every
entity at an end of a relation where the examples put that kind (:func:`node_kinds`). No word list and
no embedding threshold: the kinds are the examples' words, their members the KG's edges.

In the search (:meth:`NodeKinds.candidates`) a typed unknown node still matches every entity, at
distance 0, except the entities the examples' uses put among *other* kinds and never among its own:
those cost :data:`KIND_PENALTY`. An entity no use says anything about (a KG larger than its examples,
a relation no example shows) is not penalised — only contrary evidence is. The penalty is a distance
like the others of the Graph Semantic Distance (L2 between unit vectors, 0–2): :data:`KIND_PENALTY`
(1.0, cosine 0.5, the distance at which a phrase stops supporting a relation elsewhere in the code) makes
"the LLM's kind" worth as much as a relation only half similar, so a match of the right kind through a
nearby relation beats an exact match of the wrong kind, and a KG edge the pattern names exactly still
wins over a kind the examples only half know. Whether the prior runs on a KG is fitted on that KG's
validation questions (:mod:`simgrag.eval.fit_grounding`) and stored with its fit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from simgrag.errors import PatternError
from simgrag.kg.store import KGStore
from simgrag.match.candidates import NodeCandidates
from simgrag.pattern.graph import Pattern, singular

__all__ = ["KIND_PENALTY", "KIND_PRIOR_MAX_ENTITIES", "UNTYPED", "NodeKinds", "Use", "example_uses", "kind_of",
           "kinds_of_examples", "node_kinds"]

logger = logging.getLogger(__name__)

#: the distance a typed unknown node pays for an entity the examples' uses put only among other kinds
KIND_PENALTY = 1.0
#: the kind word of a node whose kind nobody knows — learning's fallback (:data:`simgrag.bootstrap.kinds.FALLBACK`) and
#: the edits' and readings' word for a hop they add: it names no kind, so it neither has members nor makes any
#: entity contrary (DBpedia-shaped learning typed ``birth date``'s tails ``UNKNOWN entity 1``, which made every
#: ``UNKNOWN entity`` node of the LLM's patterns pay the penalty for anything but a date)
UNTYPED = "entity"
#: above this many entities no prior is applied: a typed node's candidates are then a list of every entity
#: (16 bytes an entity, kept per kind, and copied into each search), where an untyped one costs nothing
KIND_PRIOR_MAX_ENTITIES = 1_000_000

#: (kind, KG relation id, the kind's side of it: "head" | "tail"): how an example uses a kind
Use = tuple[str, int, str]


def kind_of(hint: str) -> str:
    """The kind a node type hint names, as uses are keyed: lower case, singular (``"Countries"`` → ``"country"``)."""
    return singular(hint.strip().lower())


def example_uses(patterns: Iterable[Sequence[Sequence[str]]], relation_of: Callable[[str], int | None]) -> set[Use]:
    """Every (kind, KG relation, side) at which an example pattern puts a typed unknown node (not one typed
    :data:`UNTYPED`); ``relation_of`` reads a pattern relation as a KG relation id (``None``: none). A pattern that
    does not parse is skipped."""
    uses: set[Use] = set()
    for triples in patterns:
        try:
            pattern = Pattern.from_triples([list(t) for t in triples])
        except PatternError:
            continue
        for edge in pattern.edges:
            rel = None if edge.unknown else relation_of(edge.relation)
            if rel is None:
                continue
            for node, side in ((pattern.nodes[edge.source], "head"), (pattern.nodes[edge.target], "tail")):
                if node.unknown and node.type_hint and kind_of(node.type_hint) != UNTYPED:
                    uses.add((kind_of(node.type_hint), int(rel), side))
    return uses


@dataclass(frozen=True)
class NodeKinds:
    """Per kind, its members (sorted entity ids) in a KG of ``num_entities`` entities (module docstring)."""

    members: Mapping[str, np.ndarray]
    num_entities: int
    _cache: dict[tuple[str, float], NodeCandidates | None] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(self.members))

    @cached_property
    def typed(self) -> np.ndarray:
        """The entities of any kind (sorted)."""
        arrays = [np.asarray(v, dtype=np.int64) for v in self.members.values()]
        return np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)

    def contrary(self, hint: str) -> np.ndarray:
        """The entities the uses put among other kinds than ``hint``'s and never among it (none for a kind no
        example uses)."""
        kind = kind_of(hint)
        if kind not in self.members:
            return np.zeros(0, dtype=np.int64)
        return np.setdiff1d(self.typed, self.members[kind], assume_unique=True)

    def candidates(self, hint: str, penalty: float) -> NodeCandidates | None:
        """A typed unknown node's candidates: every entity at 0, the :meth:`contrary` ones at ``penalty`` (left out
        where it is infinite); ``None`` where nothing is contrary (the node matches as any entity)."""
        key = (kind_of(hint), float(penalty))
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        contrary = self.contrary(hint)
        found: NodeCandidates | None = None
        if len(contrary):
            if np.isinf(penalty):
                ids = np.setdiff1d(np.arange(self.num_entities, dtype=np.int64), contrary, assume_unique=True)
                found = NodeCandidates(False, ids, np.zeros(len(ids)), prior=True)
            else:
                dists = np.zeros(self.num_entities, dtype=np.float64)
                dists[contrary] = penalty
                found = NodeCandidates(False, np.arange(self.num_entities, dtype=np.int64), dists, prior=True)
        with self._lock:
            self._cache[key] = found
        return found


def node_kinds(store: KGStore, uses: Iterable[Use]) -> NodeKinds:
    """The members of each kind of ``uses`` in ``store``: the entities at that side of each relation it is used at."""
    heads, tails, rels = np.asarray(store.heads), np.asarray(store.tails), np.asarray(store.rels)
    by_relation: dict[int, np.ndarray] = {}
    parts: dict[str, list[np.ndarray]] = {}
    for kind, rel, side in sorted(set(uses)):
        if rel not in by_relation:
            by_relation[rel] = np.flatnonzero(rels == rel)
        ends = (heads if side == "head" else tails)[by_relation[rel]]
        parts.setdefault(kind, []).append(np.asarray(ends, dtype=np.int64))
    members = {kind: np.unique(np.concatenate(found)) for kind, found in parts.items()}
    logger.debug("kinds by the examples' uses: %s", {k: len(v) for k, v in members.items()})
    return NodeKinds(members, int(store.num_entities))


def kinds_of_examples(store: KGStore, patterns: Iterable[Sequence[Sequence[str]]],
                      relation_of: Callable[[str], int | None]) -> NodeKinds | None:
    """The kinds the example ``patterns`` give ``store``'s entities (:func:`example_uses`, then :func:`node_kinds`);
    ``None`` where they type no unknown node at a relation the KG has."""
    uses = example_uses(patterns, relation_of)
    return node_kinds(store, uses) if uses else None
