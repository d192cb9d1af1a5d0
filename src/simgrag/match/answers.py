"""What the KG says about the asked-for node: the answer set, and the substitutions of named nodes.

**Answer set** (:func:`answer_set`): the search's within set (:class:`~simgrag.match.search.MatchSet`:
every match whose GSD is within a tolerance of the best, ties included, capped) read for the asked-for
pattern node. Every distinct entity bound to that node is an answer (best GSD first), each with one
*witness* subgraph (its best match). For a reader the set is grouped compactly: one
:class:`AnswerGroup` per distinct *path shape* — the KG relation and orientation of every pattern
edge — listing, per pattern node, the entities bound to it in that shape::

    (Heat, starred_actors, {Al Pacino; Robert De Niro}), ({Scarface; The Godfather; …}, starred_actors, {…})

**Orientation** (:func:`oriented_first`, :func:`followed`): the search ignores edge direction (§4.2: KGs
differ in which way they store a relation), so "Calla's mother" written ``(Calla, mother, ?)`` matches
Calla's mother *and* the children whose mother Calla is, at the same GSD. Among matches as good as the
best, those whose triples run the way the pattern's edges do come first (``"prefer"``); with ``"follow"``
(the default of :class:`~simgrag.match.retrieve.RetrievalSettings`) the equal matches that turn more
edges round than the least-turned of them leave the answer set — they answer another question, the
children for "Calla's mother". A pattern the KG holds only the other way round keeps all its matches (they
all turn the same edges), and a match no better than the best is never lifted above one that is.

**Substitutions** (:func:`substitutions`): a named pattern node bound to an entity whose name is not
the one asked for ("Doom" → *Doomsday*): its distance is above a threshold and the two names differ
after normalization (case, punctuation, articles). Exact-name matches have distance 0
(:class:`~simgrag.match.retrieve.SubgraphRetriever` gives the entity named exactly so distance 0).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from simgrag.kg.store import KGStore, Triple
from simgrag.match.search import MatchSet
from simgrag.pattern.graph import Pattern

__all__ = [
    "ANSWER_TOLERANCE",
    "SAME_NAME",
    "AnswerEntry",
    "AnswerGroup",
    "AnswerSet",
    "Substitution",
    "answer_set",
    "followed",
    "names_match",
    "oriented_first",
    "reversed_edges",
    "substitutions",
]

#: default GSD tolerance of an answer set: the matches as good as the best one, up to embedding noise
ANSWER_TOLERANCE = 1e-3

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans(dict.fromkeys(string.punctuation, " "))


def _normal(text: str) -> str:
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def names_match(asked: str, entity: str) -> bool:
    """The same name up to case, punctuation, articles and spacing."""
    return _normal(asked) == _normal(entity)


#: a named node whose nearest KG entity is this close is taken to be in the KG under that name (identical text
#: embeds identically; float noise aside)
SAME_NAME = 1e-4


@dataclass(frozen=True)
class Substitution:
    """A named pattern node bound to an entity of another name: the nearest the KG has, or — ``kg_has_name`` —
    the nearest in a match of the pattern, the KG having an entity of (nearly) that name that no match goes
    through (the pattern's other triples do not hold around it)."""

    pattern_node: str
    entity: str
    distance: float
    kg_has_name: bool = False

    def text(self) -> str:
        return f"nearest match for '{self.pattern_node}': {self.entity}"

    def why(self) -> str:
        """Why the name was not kept, as the answer prompt's note and ``simgrag ask`` say it."""
        if self.kg_has_name:
            return f"the KG has '{self.pattern_node}', but no match of the question's pattern goes through it"
        return f"the KG has no entity named '{self.pattern_node}'"

    def to_dict(self) -> dict[str, Any]:
        return {"pattern_node": self.pattern_node, "entity": self.entity, "distance": self.distance,
                "kg_has_name": self.kg_has_name, "text": self.text(), "why": self.why()}


def substitutions(pattern: Pattern, nodes: Any, threshold: float,
                  floors: Sequence[float] = ()) -> tuple[Substitution, ...]:
    """The substituted named nodes of one match (``nodes``: its :class:`~simgrag.match.retrieve.NodeBinding`
    s): distance above ``threshold`` and a different name. ``floors``: per pattern node, its nearest KG entity's
    distance (:attr:`~simgrag.match.retrieve.Retrieval.node_floor`); a node whose nearest is at distance 0 (up to
    :data:`SAME_NAME`: the name itself, as the embedder sees it) is one the KG has (``kg_has_name``). Without them,
    none is."""
    known = {n.text for n in pattern.nodes if not n.unknown}
    nearest = {n.text: floors[i] for i, n in enumerate(pattern.nodes) if not n.unknown and i < len(floors)}
    return tuple(Substitution(b.pattern_node, b.entity, float(b.distance),
                              kg_has_name=nearest.get(b.pattern_node, math.inf) <= SAME_NAME) for b in nodes
                 if b.pattern_node in known and b.distance > threshold and not names_match(b.pattern_node, b.entity))


@dataclass(frozen=True)
class AnswerEntry:
    """One answer: the entity, the GSD of its best match, how many matches bind it, the group of its
    best match and that match's triples (its witness)."""

    entity: str
    entity_id: int
    gsd: float
    matches: int
    group: int
    triples: tuple[Triple, ...]
    iri: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "entity_id": self.entity_id, "gsd": self.gsd, "matches": self.matches,
                "group": self.group, "iri": self.iri, "triples": [list(t.as_tuple()) for t in self.triples]}


@dataclass(frozen=True)
class AnswerGroup:
    """The matches of one path shape: per pattern edge the KG relation and which end is the KG head
    (``heads[e]``: the pattern node index); per pattern node the entities bound (best first)."""

    relations: tuple[str, ...]
    heads: tuple[int, ...]
    tails: tuple[int, ...]
    nodes: tuple[tuple[str, ...], ...]
    gsd: float
    matches: int

    def line(self, *, max_names: int = 8) -> str:
        """The group as one line of triples, a node bound to several entities written ``{a; b; …}``."""

        def slot(i: int) -> str:
            names = self.nodes[i]
            if len(names) == 1:
                return names[0]
            shown = "; ".join(names[:max_names])
            more = f"; +{len(names) - max_names} more" if len(names) > max_names else ""
            return "{" + shown + more + "}"

        return ", ".join(f"({slot(h)}, {r}, {slot(t)})" for r, h, t in zip(self.relations, self.heads, self.tails,
                                                                             strict=True))

    def to_dict(self, pattern: Pattern) -> dict[str, Any]:
        return {"relations": list(self.relations), "gsd": self.gsd, "matches": self.matches,
                "triples": [[pattern.nodes[h].text, r, pattern.nodes[t].text]
                            for r, h, t in zip(self.relations, self.heads, self.tails, strict=True)],
                "nodes": {pattern.nodes[i].text: list(names) for i, names in enumerate(self.nodes)},
                "line": self.line()}


@dataclass(frozen=True, eq=False)
class AnswerSet:
    """Every entity bound to the asked-for node in a match within ``tolerance`` of the best GSD.

    Answers are listed best GSD first (``entity_ids``, ``names()``, ``answers`` with a witness match
    each, built on first use); ``groups`` are the path shapes. ``complete``: every such match was found
    (the search finished within its deadline and the cap); ``capped``: more than the cap exist (the
    answers of the matches kept are listed); ``turned_out``: the matches as good as the best left out for turning
    more pattern edges round than others (:func:`followed`)."""

    pattern: Pattern
    asked_node: str
    tolerance: float
    best_gsd: float
    entity_ids: np.ndarray  # (n_answers,) int64, best first
    answer_names: tuple[str, ...]
    groups: tuple[AnswerGroup, ...]
    matches: int
    complete: bool
    capped: bool
    _store: KGStore = field(repr=False)
    _found: MatchSet = field(repr=False)
    _rows: np.ndarray = field(repr=False)  # per answer, the row of its best match in _found
    _counts: np.ndarray = field(repr=False)
    _group_of: np.ndarray = field(repr=False)  # per row of _found, its group
    turned_out: int = 0

    def names(self) -> tuple[str, ...]:
        return self.answer_names

    def __len__(self) -> int:
        return len(self.answer_names)

    @cached_property
    def answers(self) -> tuple[AnswerEntry, ...]:
        """Every answer with its best match's triples (its witness)."""
        return self.entries()

    def entries(self, limit: int | None = None) -> tuple[AnswerEntry, ...]:
        """The first ``limit`` answers (all: ``None``) with their witnesses."""
        store, iris = self._store, self._store.iris
        out = []
        ids, rows = self.entity_ids[:limit].tolist(), self._rows[:limit].tolist()
        for i, (v, row) in enumerate(zip(ids, rows, strict=True)):
            witness = tuple(store.triple(int(t)) for t in self._found.triples[row])
            out.append(AnswerEntry(self.answer_names[i], v, float(self._found.gsd[row]), int(self._counts[i]),
                                   int(self._group_of[row]), witness, iris.entity(v) if iris is not None else None))
        return tuple(out)

    def to_dict(self, *, max_answers: int | None = None) -> dict[str, Any]:
        """JSON-ready; ``max_answers`` lists only the first answers with their witnesses (all names stay)."""
        shown = self.entries(max_answers)
        return {"asked_node": self.asked_node, "tolerance": self.tolerance, "best_gsd": self.best_gsd,
                "size": len(self), "matches": self.matches, "complete": self.complete, "capped": self.capped,
                "turned_out": self.turned_out,
                "names": list(self.answer_names), "answers": [a.to_dict() for a in shown],
                "groups": [g.to_dict(self.pattern) for g in self.groups]}


def reversed_edges(store: KGStore, pattern: Pattern, found: MatchSet) -> np.ndarray:
    """Per match of ``found``, how many pattern edges it maps to a KG triple running the other way (the
    triple's head bound to the edge's target); a KG self-loop runs both ways."""
    if not len(found) or not pattern.edges:
        return np.zeros(len(found), dtype=np.int64)
    src = np.array([e.source for e in pattern.edges], dtype=np.int64)
    tgt = np.array([e.target for e in pattern.edges], dtype=np.int64)
    heads = np.asarray(store.heads)[found.triples]
    tails = np.asarray(store.tails)[found.triples]
    turned = (heads != found.nodes[:, src]) | (tails != found.nodes[:, tgt])
    return np.asarray(turned.sum(axis=1), dtype=np.int64)


def oriented_first(store: KGStore, pattern: Pattern, found: MatchSet) -> MatchSet:
    """``found`` (a within set) with its matches as good as the best (GSD within :data:`ANSWER_TOLERANCE`)
    reordered: those that turn fewer pattern edges first, the search's order kept among equals; the rest
    stay after them in their order (see the module docstring)."""
    return _turned_last(found, reversed_edges(store, pattern, found))


def _turned_last(found: MatchSet, turned: np.ndarray) -> MatchSet:
    """:func:`oriented_first` given ``turned``, each match's count of pattern edges turned round."""
    if not turned.any():
        return found
    tier = (~found.as_good_as_best(ANSWER_TOLERANCE)).astype(np.int64)
    order = np.lexsort((np.arange(len(found)), np.where(tier == 0, turned, 0), tier))
    return found.reordered(order)


def followed(store: KGStore, pattern: Pattern, found: MatchSet) -> MatchSet:
    """:func:`oriented_first` without the matches as good as the best that turn more pattern edges round than the
    least-turned of them (see the module docstring); the matches beyond the best stay, in their order."""
    if not len(found):
        return found
    turned = reversed_edges(store, pattern, found)
    best = found.as_good_as_best(ANSWER_TOLERANCE)
    keep = ~best | (turned <= turned[best].min())
    if not keep.all():
        rows = np.flatnonzero(keep)
        found, turned = found.kept(rows), turned[rows]
    return _turned_last(found, turned)


def _first_seen(values: np.ndarray) -> np.ndarray:
    """Distinct values of ``values`` in order of first occurrence."""
    _, first = np.unique(values, return_index=True)
    return np.asarray(values[np.sort(first)])


def _groups(store: KGStore, pattern: Pattern, found: MatchSet) -> tuple[list[AnswerGroup], np.ndarray]:
    """The path shapes of ``found`` (best first) and the group of every row."""
    n = len(found)
    src = np.array([e.source for e in pattern.edges], dtype=np.int64)
    tgt = np.array([e.target for e in pattern.edges], dtype=np.int64)
    if not n:
        return [], np.zeros(0, dtype=np.int64)
    rels = np.asarray(store.rels)[found.triples].astype(np.int64)
    head_is_src = np.asarray(store.heads)[found.triples] == found.nodes[:, src]
    shape_key = np.concatenate([rels, head_is_src.astype(np.int64)], axis=1)
    _, first, inverse = np.unique(shape_key, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # groups in order of their best match
    group_of = rank[np.asarray(inverse).ravel()]
    per_group = [np.flatnonzero(group_of == g) for g in range(len(first))]
    distinct = [[_first_seen(found.nodes[rows, p]) for p in range(len(pattern.nodes))] for rows in per_group]
    needed = np.unique(np.concatenate([ids for row in distinct for ids in row]))
    name = dict(zip(needed.tolist(), store.entities.take(needed), strict=True))
    groups = []
    for rows, nodes in zip(per_group, distinct, strict=True):
        r0 = rows[0]
        hs = tuple(int(src[e]) if head_is_src[r0, e] else int(tgt[e]) for e in range(len(src)))
        ts = tuple(int(tgt[e]) if head_is_src[r0, e] else int(src[e]) for e in range(len(src)))
        groups.append(AnswerGroup(tuple(store.relations[r] for r in rels[r0].tolist()), hs, ts,
                                  tuple(tuple(name[v] for v in ids.tolist()) for ids in nodes),
                                  float(found.gsd[r0]), len(rows)))
    return groups, group_of


def answer_set(store: KGStore, pattern: Pattern, found: MatchSet, *, turned_out: int = 0) -> AnswerSet | None:
    """The answer set of ``found`` for the pattern's asked-for node; ``None`` without an asked node. ``turned_out``:
    how many equal matches :func:`followed` left out of ``found`` (said with the set)."""
    asked = pattern.asked_node()
    if asked is None:
        return None
    groups, group_of = _groups(store, pattern, found)
    if len(found):
        ids, first_row, counts = np.unique(found.nodes[:, asked], return_index=True, return_counts=True)
        order = np.argsort(first_row, kind="stable")
        ids, rows, counts = ids[order], first_row[order], counts[order]
    else:
        ids = rows = counts = np.zeros(0, dtype=np.int64)
    return AnswerSet(pattern, pattern.nodes[asked].text, found.within, found.best, ids,
                     tuple(store.entities.take(ids)), tuple(groups), len(found), found.complete, found.capped,
                     store, found, rows, counts, group_of, turned_out)
