"""A missing middle hop, found by the KG or the examples: the small model's shortcut through a relation.

Asked "What language is spoken in Maracaibo?", the model may write ``[Maracaibo, official language,
UNKNOWN language 1]`` — but a city has no official language in the KG, its country has. Asked "What
currency do they use in Porto?", it may write ``[Porto, located in, UNKNOWN currency 1]``: ``located in``
ends at a country, never at a currency. Both skip the hop the question leaves implicit:

- :func:`bridge_named` — a named entity on a relation it never has in the KG: the entity's own
  neighbours show the hop (Maracaibo's ``located in`` neighbour Venezuela has ``official language``),
  so ``[Maracaibo, located in, UNKNOWN country 1]`` + ``[UNKNOWN country 1, official language, …]``;
- :func:`bridge_typed` (:meth:`~simgrag.grounding.lexicon.Lexicon.type_clashes`) — an unknown
  whose type the examples file never puts at that end of the relation, where it puts another type
  that a second relation links to the first (``located in`` ends at a ``country``; ``currency`` goes
  from a ``country`` to a ``currency``), so
  ``[Porto, located in, UNKNOWN country 1]`` + ``[UNKNOWN country 1, currency, UNKNOWN currency 1]``.
  The judge reports such a clash as a problem only when a bridge exists; :func:`retype` offers the
  other reading (the type word was wrong, not the structure).

And a missing *last* hop: "Which countries share a currency with the country Marseille is in?" written as
``[Marseille, located in, UNKNOWN country 1]`` + ``[UNKNOWN country 1, currency, UNKNOWN currency 1]`` stops
at the currency. :func:`extend_to_focus` adds the hop that the examples use between the answer node's type
and the type the question asks for: ``[UNKNOWN country 2, currency, UNKNOWN currency 1]``.

And a missing hop *between two things of one type*: "What are the capitals of the countries bordering the
country where Lithuanian is official?" written as ``[UNKNOWN country 1, capital, UNKNOWN city 1]`` +
``[UNKNOWN country 1, official language, Lithuanian]``: the question says "bordering", no triple has it.
:func:`insert_hop` splits the country node in two, joined by that relation (the examples put a country at
both of its ends): ``[UNKNOWN country 2, official language, Lithuanian]``, ``[UNKNOWN country 2, borders,
UNKNOWN country 1]``, ``[UNKNOWN country 1, capital, UNKNOWN city 1]``.
"""

from __future__ import annotations

import numpy as np

from simgrag.grounding.judge import Candidate, PatternJudge, unknown_name
from simgrag.grounding.lexicon import Use, kg_roles, other_side
from simgrag.grounding.question import QuestionReading
from simgrag.pattern.graph import Pattern, is_unknown, singular

__all__ = ["bridge_named", "bridge_typed", "extend_to_focus", "insert_hop", "retype"]

#: neighbours looked at per (relation, side) when checking that a hop leads to the wanted relation
MAX_BRIDGE_NEIGHBOURS = 32
#: hops tried per named entity (the most consistent first)
MAX_BRIDGES = 2
#: a node with more triples than this is not split by :func:`insert_hop` (2^(n-1) - 1 ways)
MAX_SPLIT_DEGREE = 4

Side = str  # "head" | "tail"


def _relation_text(judge: PatternJudge, rel: int) -> str:
    return judge.store.relations[rel].replace("_", " ")


def _middle_type(schema: set[Use], *ends: tuple[int, Side]) -> str:
    """The one type the examples put at the first of ``ends`` (relation, side) that has one, else ``entity``."""
    for rel, side in ends:
        types = sorted({t for t, r, s in schema if r == rel and s == side})
        if len(types) == 1:
            return types[0]
    return "entity"


def _hops(judge: PatternJudge, entity: int, rel: int, side: Side) -> list[tuple[int, Side]]:
    """(KG relation, the entity's side of it) whose far ends take ``side`` of ``rel``: the hop from
    ``entity`` to something that has ``rel``, best supported first. A hop the examples take (their middle
    node's type on that side of it) rules out every hop no better supported that they do not take: a KG that
    stores each fact twice, ``is_in_country`` and ``is_in_country_inverse``, offers both, the examples use
    one, and the other's untyped middle node would escape the examples' schema check."""
    schema = judge.lexicon.schema
    store = judge.store
    others, rels, tids = store.neighbors(entity)
    is_head = np.asarray(store.heads[tids]) == entity
    scored: list[tuple[float, bool, int, Side]] = []  # (-support, not taken by the examples, relation, side)
    for r0 in np.unique(rels).tolist():
        for own in (True, False):
            far = np.asarray(others)[(rels == r0) & (is_head == own)][:MAX_BRIDGE_NEIGHBOURS]
            if not len(far):
                continue
            hits = sum(side in kg_roles(judge.retriever, int(o)).get(rel, set()) for o in far.tolist())
            if hits:
                own_side, far_side = ("head", "tail") if own else ("tail", "head")
                in_examples = (_middle_type(schema, (rel, side), (r0, far_side)), r0, far_side) in schema
                scored.append((-hits / len(far), not in_examples, int(r0), own_side))
    scored.sort()
    taken = min((support for support, untaken, _, _ in scored if not untaken), default=None)
    if taken is not None:  # (support is negated: lower is better supported)
        scored = [hop for hop in scored if not hop[1] or hop[0] < taken]
    return [(r0, own) for _, _, r0, own in scored[:MAX_BRIDGES]]


def bridge_named(candidate: Candidate, judge: PatternJudge,
                 reading: QuestionReading | None = None) -> list[Candidate]:
    """``(K, r, X)`` where the KG has no ``r`` edge at K → ``(K, r0, M)`` + ``(M, r, X)`` through a
    relation ``r0`` whose neighbours of K do have ``r`` (module docstring). The note says when the
    question's words name ``r0`` (``reading``) or the examples — else the KG's own entities
    (:meth:`~simgrag.grounding.lexicon.Lexicon.kg_side_is`) — put the middle node's type on that side of
    ``r0``: "What language is spoken in Maracaibo?" asks the language of Maracaibo's *country* (the examples
    link a country to a city by ``located in``), while "which person directed A Sunday in the Country",
    bridged through the film's release year to "other movies" on a KG without its director, is a question
    bent to what the KG holds (no example puts a movie at the tail of ``release year``;
    :func:`simgrag.answer.calibration.missing_edges`)."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    worded = set(judge.lexicon.relation_phrases(reading.phrases)) if reading is not None else set()
    for i, rel, named, side in judge.lexicon.relation_ends(triples):
        entity = None if is_unknown(named) else judge.entity_of(named)
        if entity is None or rel in kg_roles(judge.retriever, entity):
            continue
        head, relation, tail = triples[i]
        for r0, own in _hops(judge, entity, rel, side):
            far = other_side(own)
            kind = _middle_type(judge.lexicon.schema, (rel, side), (r0, far))
            middle = unknown_name(triples, kind)
            r0_text = _relation_text(judge, r0)
            hop = (named, r0_text, middle) if own == "head" else (middle, r0_text, named)
            moved = (middle, relation, tail) if side == "head" else (head, relation, middle)
            if r0 in worded:
                said = f" (the question words {r0_text!r})"
            elif (kind, r0, far) in judge.lexicon.schema:  # the examples take this very hop
                said = f" (the examples' {kind} nodes take {r0_text!r})"
            elif kind != "entity" and judge.lexicon.kg_side_is(r0, far, kind):  # so do the KG's own
                said = f" (the KG's {kind} nodes take {r0_text!r})"
            else:
                said = ""
            out.append(candidate.split(i, hop, moved, f"{named!r} has no {relation!r} edge in the KG, its "
                                                      f"{r0_text!r} neighbours do{said}"))
    return out


def bridge_typed(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """``(X, r, U)`` with U's type never at that end of ``r`` in the examples → ``(X, r, M)`` + the
    relation linking M's type to U's (module docstring)."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, node, side, fit, r2, s2 in judge.lexicon.type_clashes(triples):
        head, relation, tail = triples[i]
        middle = unknown_name(triples, fit)
        moved = (head, relation, middle) if side == "tail" else (middle, relation, tail)
        r2_text = _relation_text(judge, r2)
        link = (middle, r2_text, node) if s2 == "head" else (node, r2_text, middle)
        out.append(candidate.split(i, moved, link, f"a {fit} is at the {side} of {relation!r}, and {r2_text!r} "
                                                   f"links it to {node!r}"))
    return out


def retype(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """The other reading of a type clash: the structure is right and the type word wrong
    (``[country 2, capital, UNKNOWN country 3]`` for "the capitals of …"): the node renamed to the type
    the examples put there. The judge's focus check decides between this and :func:`bridge_typed`."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for node, fit in dict.fromkeys((node, fit) for _, node, _, fit, _, _ in judge.lexicon.type_clashes(triples)):
        name = unknown_name(triples, fit)
        new = [tuple(name if x == node else x for x in t) for t in triples]
        out.append(candidate.edited(new, f"took {node!r} to be a {fit} ({name!r})"))  # type: ignore[arg-type]
    return out


def extend_to_focus(candidate: Candidate, judge: PatternJudge, focus_type: str) -> list[Candidate]:
    """The answer node typed other than the question's focus (``focus_type``, e.g. ``country``): one hop
    more from it to a new node of that type, through each relation the examples use between the two
    types (module docstring)."""
    triples = list(candidate.triples)
    pattern = Pattern.from_triples(triples)
    asked = pattern.asked_node()
    if asked is None or not pattern.nodes[asked].type_hint:
        return []
    node = pattern.nodes[asked].text
    have, want = singular(str(pattern.nodes[asked].type_hint).lower()), singular(focus_type.lower())
    if have == want:
        return []
    out: list[Candidate] = []
    for rel, side in judge.lexicon.links(want, have):
        fresh, text = unknown_name(triples, want), _relation_text(judge, rel)
        link = (fresh, text, node) if side == "head" else (node, text, fresh)
        out.append(candidate.edited([*triples, link], f"added {list(link)}: the question asks for a {want}, and "
                                                      f"{text!r} links a {have} to one"))
    return out


def insert_hop(candidate: Candidate, reading: QuestionReading, judge: PatternJudge) -> list[Candidate]:
    """A relation the question names and no triple has, between two nodes of one type (module
    docstring): each typed unknown node of that type split in two, joined by the relation (both
    directions), its triples divided between the two halves every way. Where the question names a type
    more often than the pattern has nodes of it and names no relation for the hop ("the capitals of the
    countries **next to** the country whose official language is Persian"), the one relation the
    examples put between two nodes of that type (``borders``) is the hop. A type may be at an end the
    examples never put it, where the KG's entities are of it (:meth:`~simgrag.grounding.lexicon.
    Lexicon.can_be_at`: examples without a ``borders`` question still know the countries).
    """
    triples = list(candidate.triples)
    pattern = Pattern.from_triples(triples)
    view = judge.view(reading, pattern)
    missing = judge.uncovered_relations(pattern, view)
    for short in judge.missing_kinds(reading, pattern, view):
        # a thing of this kind too few, unworded ("the countries **next to** the country whose …"): the
        # one relation the examples put between two things of this kind
        own = {rel for rel, _ in judge.lexicon.links(short, short)}
        if len(own) == 1 and not own & set(missing):
            missing[own.pop()] = f"one {short} more"
    out: list[Candidate] = []
    for rel in missing:
        text = _relation_text(judge, rel)
        for node in pattern.nodes:
            kind = singular(str(node.type_hint).lower()) if node.unknown and node.type_hint else None
            if kind is None or not (judge.lexicon.can_be_at(kind, rel, "head")
                                    and judge.lexicon.can_be_at(kind, rel, "tail")):
                continue
            around = [i for i, (h, _, t) in enumerate(triples) if node.text in (h, t)]
            if not 2 <= len(around) <= MAX_SPLIT_DEGREE:
                continue
            twin = unknown_name(triples, kind)
            for mask in range(1, 2 ** (len(around) - 1)):  # the last triple stays on the node: no mirror splits
                moved = {around[b] for b in range(len(around)) if mask >> b & 1}
                split = [tuple(twin if (k in moved and x == node.text) else x for x in t)
                         for k, t in enumerate(triples)]
                for link in ((twin, text, node.text), (node.text, text, twin)):
                    out.append(candidate.edited([*split, link], f"added {list(link)} between the triples of "  # type: ignore[list-item]
                                                                f"{node.text!r}: the question says "
                                                                f"{missing[rel]!r}"))
    return out
