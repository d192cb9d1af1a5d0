"""Candidate patterns derived from an LLM pattern by small edits, each guided by the question or the KG.

Each function takes a :class:`~simgrag.match.judge.Candidate` (and what it needs to know) and returns
edited candidates; the judge decides which one is best, the LLM's own pattern included. The edits
answer the small model's frequent mistakes:

- :func:`prune_unsupported` — a leaf triple the question has no words for ("… share actors with Heat"
  + ``has genre``), dropped;
- :func:`connect_parts` — a chain with a missing middle link (``[X, directed by, director 1]``,
  ``[movie 1, written by, writer 1]``), joined by repeating a relation at the broken joint;
- :mod:`~simgrag.grounding.anchors` — the question's entity dropped (``[movie 1, release
  year, year 1]`` for "What years did Andrea Marcovicci's movies come out?"), attached again;
- :func:`expand_roles` — a named entity on the wrong side of its relation (``[movie 1, written by,
  Alice Adams]`` for "films written by the person who wrote Alice Adams"; the KG says Alice Adams is
  never written *by* anyone's film, it is the film), expanded into the hop the question walks;
- :func:`detach_named` — one entity named in two triples although the KG has it in one of the two
  relations only ("Who stars in the films that Ronan Bennett wrote?" → ``[movie 1, starred actors,
  Ronan Bennett]``): that end becomes the unknown asked for;
- :func:`swap_named` / :func:`name_in_place` — the named entity and an unknown leaf beside it in each
  other's places ("Who directed the movies Marc Connelly wrote?"), or the entity given a hop of its own
  beside the leaf it is ("Of what nation is Tbilisi the capital?");
- :func:`rechain_leaf` — the answer hung from a node beside an unknown leaf that the question walks
  through ("Brazil's neighbours' currencies"), moved onto the leaf;
- :func:`drop_part` — a part of a disconnected pattern that no named entity anchors, dropped;
- :func:`collapse_echo` — the echoed role that :mod:`simgrag.grounding.repair` fixes;
- :func:`extend_to_who` — "who" answered by a thing ("Who has X directed movies with?" as the films
  only): one more hop from the answer to a node of a type the examples answer "who" with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from simgrag.grounding.judge import Candidate, Judgement, PatternJudge, Triple3, dangling_leaves, unknown_name
from simgrag.grounding.lexicon import kg_roles
from simgrag.grounding.question import QuestionReading
from simgrag.grounding.repair import repair_echoed_roles
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pattern.graph import Pattern, is_unknown, singular, type_hint

__all__ = [
    "collapse_echo",
    "connect_parts",
    "costar",
    "detach_named",
    "drop_any",
    "drop_leaf",
    "drop_part",
    "expand_roles",
    "extend_asked",
    "extend_to_who",
    "flip_role",
    "merge_parts",
    "name_in_place",
    "prune_unsupported",
    "rebind_asked",
    "rebind_relation",
    "rechain_leaf",
    "shortcut_answer",
    "skip_named_hop",
    "swap_named",
]

MAX_REBIND_RELATIONS = 6  # KG relations tried per rebinding edit


def _degrees(triples: Sequence[Triple3]) -> dict[str, int]:
    degree: dict[str, int] = {}
    for head, _, tail in triples:
        degree[head] = degree.get(head, 0) + 1
        degree[tail] = degree.get(tail, 0) + 1
    return degree


def prune_unsupported(candidate: Candidate, judgement: Judgement) -> list[Candidate]:
    """Drop unsupported triples that end in an unknown leaf, repeatedly; at least one triple stays."""
    unsupported = set(judgement.unsupported)
    return _prune_leaves(candidate, unsupported.__contains__, "the question has no words for them")


def _put_in_place(triples: Sequence[Triple3], dropped: Triple3, old: str, new: str) -> list[Triple3]:
    """``triples`` without ``dropped`` (one copy: an edited candidate may repeat a triple, and dropping every
    copy could leave none), node ``old`` renamed ``new`` in the rest (the two merged)."""
    rest = list(triples)
    rest.remove(dropped)
    return _renamed(rest, old, new)


def _renamed(triples: Sequence[Triple3], old: str, new: str) -> list[Triple3]:
    """``triples`` with node ``old`` renamed ``new``."""
    return [(new if h == old else h, r, new if t == old else t) for h, r, t in triples]


def _kind(node: str) -> str | None:
    """The singular, lower-case type of a typed unknown node (``UNKNOWN countries 2`` → ``country``); ``None``
    for a named node or a bare placeholder."""
    hint = type_hint(node)
    return singular(hint.lower()) if hint else None


def _dropped_with_hanging(candidate: Candidate, i: int, node: str, why: str) -> Candidate:
    """``candidate`` without its triple ``i``, and without the triples that leaves ending in an unknown leaf
    other than ``node`` (repeatedly); ``why`` ends the note."""
    triple = candidate.triples[i]
    rest = [t for k, t in enumerate(candidate.triples) if k != i]
    rest, hanging = _without_leaves(rest, lambda t: node not in (t[0], t[2]))
    gone = ", ".join(str(list(t)) for t in [triple, *hanging])
    return candidate.edited(rest, f"dropped {gone}: {why}")


def skip_named_hop(candidate: Candidate, judgement: Judgement, judge: PatternJudge,
                   reading: QuestionReading) -> list[Candidate]:
    """An unsupported triple between a named entity and an unknown node the rest of the pattern goes on
    from, taken out with the entity put in the unknown node's place, when the question's words read the
    relations the entity then gets: "if i go to cambodia, what currency will i need ?" written ``[cambodia,
    capital, country 1], [country 1, currency, currency 1]`` (no word for ``capital``; "currency" reads
    ``currency``) becomes ``[cambodia, currency, currency 1]``. ("The big cities of Spain" written ``[Spain,
    located in, country 1], [country 1, capital, city 1]`` does not become ``[Spain, capital, city 1]``:
    nothing reads ``capital``.)"""
    if not judgement.unsupported or judgement.pattern is None:
        return []
    words = [*judge.view(reading, judgement.pattern).phrases, *([judgement.focus_word] if judgement.focus_word else [])]
    read = set(judge.lexicon.relation_phrases(words))
    degree = _degrees(candidate.triples)
    out: list[Candidate] = []
    for triple in judgement.unsupported:
        head, _, tail = triple
        for named, node in ((head, tail), (tail, head)):
            if is_unknown(named) or not is_unknown(node) or degree.get(node, 0) < 2:
                continue
            moved = [r for h, r, t in candidate.triples if (h, r, t) != triple and node in (h, t)]
            if not all(judge.retriever.nearest_relation(r) in read for r in moved):
                continue
            out.append(candidate.edited(_put_in_place(candidate.triples, triple, node, named),
                                        f"dropped {list(triple)}, {named!r} put in place of {node!r}: "
                                        "the question has no words for it"))
    return out


def undo_displaced(candidate: Candidate, judgement: Judgement, judge: PatternJudge) -> list[Candidate]:
    """A named entity the best subgraph matches with another entity while the entity itself stands for an
    UNKNOWN node next to it (:meth:`PatternJudge.displaced_names`): the triple between the two taken out
    and the entity put in the unknown node's place. "which cities are capitals of the countries next to
    kenya ?" written ``[country 1, is in country, kenya], [country 2, borders with, country 1], …`` becomes
    ``[country 2, borders with, kenya], …``. Where the entity lands on a side of a relation the KG never has
    it on, that triple is also offered turned round (:func:`flip_role`): "List cities located in New Zealand."
    written ``[entity 1, located in, New Zealand], [entity 1, located in, city 1]``."""
    out: list[Candidate] = []
    for named, unknown in judge.displaced_names(judgement.retrieval):
        for triple in candidate.triples:
            if {triple[0], triple[2]} == {named.pattern_node, unknown}:
                merged = candidate.edited(_put_in_place(candidate.triples, triple, unknown, named.pattern_node),
                                          f"dropped {list(triple)}: the KG's {named.pattern_node!r} stood "
                                          f"for {unknown!r} in it")
                out += [merged, *flip_role(merged, judge)]
    return out


def prune_stray(candidate: Candidate, judgement: Judgement, judge: PatternJudge) -> list[Candidate]:
    """Drop the triples of relations the question's words did not choose (``judgement.stray_relations``)
    that end in an unknown leaf, repeatedly: what an example's pattern brings along that the question never
    asked ("which country 's capital is montevideo ?" by the example of "the countries that speak the same
    official language as the country with madrid as its capital")."""
    stray = set(judgement.stray_relations)
    if not stray:
        return []
    return _prune_leaves(candidate, lambda t: judge.retriever.nearest_relation(t[1]) in stray,
                         "the question's words chose other relations")


def _prune_leaves(candidate: Candidate, drop: Callable[[Triple3], bool], why: str) -> list[Candidate]:
    triples, dropped = _without_leaves(candidate.triples, drop)
    if not dropped:
        return []
    return [candidate.edited(triples, "dropped " + ", ".join(str(list(t)) for t in dropped) + ": " + why)]


def _without_leaves(triples: Sequence[Triple3], drop: Callable[[Triple3], bool]) -> tuple[list[Triple3], list[Triple3]]:
    """``triples`` less those ending in an unknown leaf that ``drop`` accepts, repeatedly (one triple kept at
    least); the rest and the dropped."""
    rest = list(triples)
    dropped: list[Triple3] = []
    changed = True
    while changed and len(rest) > 1:
        changed = False
        degree = _degrees(rest)
        for triple in rest:
            head, _, tail = triple
            leaf = (is_unknown(tail) and degree[tail] == 1) or (is_unknown(head) and degree[head] == 1)
            if leaf and drop(triple):
                rest.remove(triple)
                dropped.append(triple)
                changed = True
                break
    return rest, dropped


def connect_parts(candidate: Candidate, named_relations: Sequence[str] = ()) -> list[Candidate]:
    """Join a disconnected pattern: link an unknown node of a part without a named node to a node of
    another part by a relation already on that node, or by one of ``named_relations`` (relations the
    question names and no triple has) either way round: "Which currencies do the neighbours of the country
    using the Hungarian Forint use?" written ``[country 1, currency, Hungarian Forint], [country 2, currency,
    currency 1]`` is joined by ``[country 2, borders, country 1]``."""
    pattern = Pattern.from_triples(candidate.triples)
    parts = pattern.components()
    if len(parts) < 2:
        return []
    out: list[Candidate] = []
    triples = list(candidate.triples)
    for a_nodes, _ in parts:
        for b_nodes, _ in parts:
            if a_nodes is b_nodes or any(not pattern.nodes[v].unknown for v in b_nodes):
                continue
            for a in a_nodes:
                a_text = pattern.nodes[a].text
                relations = dict.fromkeys(r for h, r, t in triples if a_text in (h, t) and not is_unknown(r))
                for b in b_nodes:
                    b_text = pattern.nodes[b].text
                    if not pattern.nodes[b].unknown:
                        continue
                    links = [(b_text, r, a_text) for r in relations]
                    links += [link for r in named_relations if r not in relations
                              for link in ((b_text, r, a_text), (a_text, r, b_text))]
                    out += [candidate.edited([*triples, link], f"added {list(link)} to connect the parts")
                            for link in links]
    return out




def expand_roles(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """``(U, r, K)`` where the KG has K only on the other side of r → ``(K, r, W)``, ``(U, r, W)``."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        if is_unknown(relation):
            continue
        for named, side, other in ((tail, "tail", head), (head, "head", tail)):
            if is_unknown(named) or not is_unknown(other):
                continue
            entity = judge.entity_of(named)
            rel = judge.retriever.nearest_relation(relation)
            if entity is None or rel is None:
                continue
            sides = kg_roles(judge.retriever, entity).get(rel, set())
            if not sides or side in sides:
                continue
            hop = unknown_name(triples, "entity")
            first = (named, relation, hop) if side == "tail" else (hop, relation, named)
            second = (other, relation, hop) if side == "tail" else (hop, relation, other)
            out.append(candidate.split(i, first, second,
                                       f"{named!r} is only the {sorted(sides)[0]} of {relation!r} in the KG"))
    return out


def detach_named(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """A named node on several triples: where the KG has no edge of that relation at the entity,
    the end becomes a new unknown node."""
    triples = list(candidate.triples)
    degree = _degrees(triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        for named, is_tail in ((tail, True), (head, False)):
            if is_unknown(named) or degree.get(named, 0) < 2 or is_unknown(relation):
                continue
            entity = judge.entity_of(named)
            rel = judge.retriever.nearest_relation(relation)
            if entity is None or rel is None or rel in kg_roles(judge.retriever, entity):
                continue
            fresh = unknown_name(triples, "entity")
            new_triple = (head, relation, fresh) if is_tail else (fresh, relation, tail)
            new = [*triples[:i], new_triple, *triples[i + 1:]]
            out.append(candidate.edited(new, f"{list(triples[i])} -> {list(new_triple)}: {named!r} has no "
                                             f"{relation!r} edge in the KG"))
    return out


def collapse_echo(candidate: Candidate, retriever: SubgraphRetriever) -> list[Candidate]:
    """The echoed-role repair of :mod:`simgrag.grounding.repair`, as a candidate."""
    pattern = Pattern.from_triples(candidate.triples)
    fixed, notes = repair_echoed_roles(pattern, retriever)
    if not notes:
        return []
    return [replace(candidate, triples=tuple(fixed.triples()), edits=(*candidate.edits, *notes))]


def drop_leaf(candidate: Candidate) -> list[Candidate]:
    """Each triple that ends in an unknown leaf, dropped (one per candidate): the question may ask one
    hop less than the LLM wrote ("the cast of X" answered with a co-star hop)."""
    triples = list(candidate.triples)
    if len(triples) < 2:
        return []
    degree = _degrees(triples)
    out: list[Candidate] = []
    for triple in triples:
        head, _, tail = triple
        if (is_unknown(tail) and degree[tail] == 1) or (is_unknown(head) and degree[head] == 1):
            rest = [t for t in triples if t != triple]
            out.append(candidate.edited(rest, f"dropped {list(triple)}"))
    return out


def free_focus(candidate: Candidate, focus_word: str) -> list[Candidate]:
    """A node of the type the focus word asks for that two triples join, made the answer: each of its
    triples dropped in turn, then the unknown leaves left hanging (repeatedly). "On which continents are the
    countries that border the nation whose capital is Moscow?" written ``…, [country 2, continent, continent
    1], [country 2, borders, country 3], [country 3, continent, continent 1]`` (the continent shared: the
    answer became country 3) gives ``…, [country 2, continent, continent 1]``."""
    kind = singular(focus_word.lower())
    degree = _degrees(candidate.triples)
    triples = candidate.triples
    return [_dropped_with_hanging(candidate, triples.index(triple), node, f"{node!r} is what the question asks for")
            for node in dict.fromkeys(n for h, _, t in triples for n in (h, t))
            if _kind(node) == kind and degree[node] >= 2
            for triple in triples if node in (triple[0], triple[2])]


def split_shared(candidate: Candidate) -> list[Candidate]:
    """An unknown node on the same side of two triples of one relation, one of those triples dropped (with
    the unknown leaves it leaves hanging): "Hanoi is a capital. What are the capitals of its country's
    neighbours?" written ``[country 1, capital, Hanoi], [country 1, capital, city 1], [country 2, borders,
    country 1], [country 2, capital, city 1]`` (one city the capital of two countries) gives ``…, [country 2,
    capital, city 1]``. A shared node can be right ("the movies that share a director with X"): offered for
    unsound patterns only, like every edit, and judged."""
    out: list[Candidate] = []
    triples = candidate.triples
    for i, (head, relation, tail) in enumerate(triples):
        for node, side in ((head, 0), (tail, 2)):
            if not is_unknown(node) or not any(k != i and t[1] == relation and t[side] == node
                                               for k, t in enumerate(triples)):
                continue
            out.append(_dropped_with_hanging(candidate, i, node, f"{node!r} was on two {relation!r} triples"))
    return out


def shortcut_answer(candidate: Candidate) -> list[Candidate]:
    """The answer's last hop taken out, the answer node put where the node before it was: "the big cities
    of Tunisia" written ``[country 1, located in, Tunisia], [country 1, capital, city 1]`` (a copied
    hop, and a country where the KG has cities) becomes ``[city 1, located in, Tunisia]``."""
    pattern = Pattern.from_triples(candidate.triples)
    asked = pattern.asked_node()
    if asked is None or len(candidate.triples) < 2:
        return []
    answer = pattern.nodes[asked].text
    degree = _degrees(candidate.triples)
    out: list[Candidate] = []
    for triple in candidate.triples:
        head, _, tail = triple
        if answer not in (head, tail) or degree.get(answer) != 1:
            continue
        before = tail if head == answer else head
        if not is_unknown(before) or degree.get(before) != 2:
            continue
        out.append(candidate.edited(_put_in_place(candidate.triples, triple, before, answer),
                                    f"dropped {list(triple)}, {answer!r} put in place of {before!r}"))
    return out


def _named_beside_leaf(triples: Sequence[Triple3]) -> list[tuple[int, int, str, str]]:
    """(i, j, K, U) for two triples on one unknown node M, triple i naming entity K, triple j ending in
    an unknown leaf U."""
    degree = _degrees(triples)
    found: list[tuple[int, int, str, str]] = []
    for i, first in enumerate(triples):
        for j, second in enumerate(triples):
            shared = {first[0], first[2]} & {second[0], second[2]}
            if i == j or len(shared) != 1:
                continue
            middle = shared.pop()
            named = first[2] if first[0] == middle else first[0]
            leaf = second[2] if second[0] == middle else second[0]
            if is_unknown(middle) and not is_unknown(named) and is_unknown(leaf) and degree[leaf] == 1:
                found.append((i, j, named, leaf))
    return found


def swap_named(candidate: Candidate) -> list[Candidate]:
    """Two triples on one unknown node M, one naming entity K, the other ending in an unknown leaf U:
    K and U trade places ("Who directed the movies Marc Connelly wrote?" written as ``[M, directed by,
    Marc Connelly]``, ``[M, written by, U]``)."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, j, named, leaf in _named_beside_leaf(triples):
        new_first = tuple(leaf if x == named else x for x in triples[i])
        new_second = tuple(named if x == leaf else x for x in triples[j])
        new = [new_first if k == i else new_second if k == j else t for k, t in enumerate(triples)]
        out.append(candidate.edited(new, f"swapped {named!r} and {leaf!r}"))  # type: ignore[arg-type]
    return out


def name_in_place(candidate: Candidate) -> list[Candidate]:
    """The same two triples, K named in no other: K takes U's place and its own triple goes — the question
    names the leaf, and the LLM gave K a hop of its own ("Of what nation is Tbilisi the capital?" written
    as ``[Tbilisi, in country, M]``, ``[M, capital, U]``: Tbilisi *is* the capital, ``[M, capital, Tbilisi]``)."""
    triples = list(candidate.triples)
    degree = _degrees(triples)
    out: list[Candidate] = []
    for i, _, named, leaf in _named_beside_leaf(triples):
        if degree[named] == 1:
            out.append(candidate.edited(_put_in_place(triples, triples[i], leaf, named),
                                        f"took {leaf!r} to be {named!r}, dropped {list(triples[i])}: the question "
                                        "names it there"))
    return out


def rebind_relation(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """A triple naming entity K with a relation K has no edge of: the relation replaced by each of the
    KG relations K has on that side ("Kevin Howarth's movies" written as ``written by`` for an actor) and,
    turned round, by each K has only on the other side ("the country that Antwerp is in" written as
    ``[country 1, capital, Antwerp]``, copied from a shot: Antwerp is only ever the head of ``located in``)."""
    retriever = judge.retriever
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        if is_unknown(relation):
            continue
        rel = retriever.nearest_relation(relation)
        for named, side in ((tail, "tail"), (head, "head")):
            entity = None if is_unknown(named) else judge.entity_of(named)
            if entity is None or rel is None:
                continue
            roles = kg_roles(retriever, entity)
            if rel in roles:
                continue
            for other, sides in sorted(roles.items())[:MAX_REBIND_RELATIONS]:
                text = retriever.store.relations[other].replace("_", " ")
                if side in sides:
                    new = [(head, text, tail) if k == i else t for k, t in enumerate(triples)]
                    out.append(candidate.edited(new, f"{relation!r} -> {text!r}: {named!r} has no {relation!r} edge"))
                else:
                    new = [(tail, text, head) if k == i else t for k, t in enumerate(triples)]
                    # worded apart from "has no R edge" (a missing fact, calibration.missing_edges): an entity
                    # of the wrong kind for R entirely is the LLM's slip, not a gap in the KG
                    out.append(candidate.edited(new, f"{relation!r} -> {text!r}, turned round: {named!r} is in no "
                                                     f"{relation!r} edge, and the {next(iter(sides))} of {text!r}"))
    return out


def rebind_asked(candidate: Candidate, relation_text: str, judge: PatternJudge) -> list[Candidate]:
    """The triple that reaches the answer node given the question's focus relation, in either direction
    (the KG's sides decide): "the **capitals** of the countries that use X" written as ``[city 1, located
    in, country 1]`` becomes ``[country 1, capital, city 1]`` (and ``[city 1, capital, country 1]``). A
    rebound triple whose unknown kept the type of the old relation's end is also offered with it retyped
    (``[country 2, capital, UNKNOWN currency 1]`` → ``UNKNOWN city 1``: a copied example's last hop)."""
    pattern = Pattern.from_triples(candidate.triples)
    asked = pattern.asked_node()
    if asked is None:
        return []
    out: list[Candidate] = []
    for i, edge in enumerate(pattern.edges):
        if asked in (edge.source, edge.target) and edge.relation != relation_text:
            head, _, tail = candidate.triples[i]
            for turned, note in (((head, relation_text, tail), ""), ((tail, relation_text, head), ", turned round")):
                new = [turned if k == i else t for k, t in enumerate(candidate.triples)]
                why = f"{edge.relation!r} -> {relation_text!r} on the answer's triple{note}"
                out += [candidate.edited(new, why), *_retyped_at(candidate, judge, new, i, why)]
    return out


def drop_any(candidate: Candidate) -> list[Candidate]:
    """Each triple dropped (one per candidate) when the rest stays connected: for patterns nothing in
    the KG matches because of one triple too many."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for triple in triples:
        rest = [t for t in triples if t != triple]
        if rest and Pattern.from_triples(rest).is_connected():
            out.append(candidate.edited(rest, f"dropped {list(triple)}"))
    return out


def flip_role(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """``(K, r, U)`` where the KG has K only as the tail of r (or the reverse): the triple turned round.
    When U's type word came with the side it leaves (``[South America, in continent, UNKNOWN continent 1]``
    for "which countries are in South America?"), the turned triple is also offered with U retyped to what
    the examples put at its new end (``[UNKNOWN country 1, in continent, South America]``): one edit, since
    the turned triple alone is as unsound as the LLM's and would not be edited again."""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        rel = None if is_unknown(relation) else judge.retriever.nearest_relation(relation)
        for named, side in ((head, "head"), (tail, "tail")):
            entity = None if is_unknown(named) else judge.entity_of(named)
            if entity is None or rel is None:
                continue
            sides = kg_roles(judge.retriever, entity).get(rel, set())
            if sides and side not in sides:
                new = [(tail, relation, head) if k == i else t for k, t in enumerate(triples)]
                note = f"turned {list(triples[i])} round: {named!r} is never its {side}"
                out.append(candidate.edited(new, note))
                out += _retyped_at(candidate, judge, new, i, note)
    return out


def turn_typed(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """A triple whose typed ends sit where the examples put the other end's type: the triple turned round.
    "which cities are in the country whose capital is quito ?" written ``[country 1, has capital, quito],
    [country 1, is in country, city 1]`` (cities are the heads of ``is in country``, countries its tails)
    becomes ``…, [city 1, is in country, country 1]`` (:meth:`~simgrag.grounding.lexicon.Lexicon.
    can_be_at`). An end whose type the examples never use, or a named one (:func:`flip_role` turns those by
    the KG), decides nothing."""
    known = {hint for hint, _, _ in judge.lexicon.schema}

    def fits(node: str, rel: int, side: str) -> bool | None:
        kind = _kind(node)
        if kind is None or kind not in known:
            return None
        return judge.lexicon.can_be_at(kind, rel, side)

    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        rel = None if is_unknown(relation) else judge.retriever.nearest_relation(relation)
        if rel is None:
            continue
        now = (fits(head, rel, "head"), fits(tail, rel, "tail"))
        turned = (fits(tail, rel, "head"), fits(head, rel, "tail"))
        if False in now and False not in turned and True in turned:
            new = [(tail, relation, head) if k == i else t for k, t in enumerate(triples)]
            out.append(candidate.edited(new, f"turned {list(triples[i])} round: the examples put its ends' "
                                             "types the other way"))
    return out


def _retyped_at(candidate: Candidate, judge: PatternJudge, triples: list[Triple3], i: int,
                note: str) -> list[Candidate]:
    """``triples`` with the typed unknown of triple ``i`` renamed to each type the examples put at its end
    there, when they never put its own type there (one candidate per type); when they put none there, to
    each type of theirs that the KG's entities at that end are (:meth:`~simgrag.grounding.lexicon.
    Lexicon.kg_side_is`: a 12-example file asks "On which continent is Chad?" with a named country only)."""
    schema = judge.lexicon.schema
    known = {hint for hint, _, _ in schema}
    out: list[Candidate] = []
    for _, rel, node, side in judge.lexicon.relation_ends(triples[i:i + 1]):
        have = _kind(node)
        if have is None or have not in known or (have, rel, side) in schema:
            continue
        fits = ({t for t, r, s in schema if r == rel and s == side}
                or {t for t in known if t != have and judge.lexicon.kg_side_is(rel, side, t)})
        for fit in sorted(fits):
            name = unknown_name(triples, fit)
            out.append(candidate.edited(_renamed(triples, node, name),
                                        f"{note}; took {node!r} to be a {fit} ({name!r})"))
    return out


def merge_parts(candidate: Candidate) -> list[Candidate]:
    """Join a disconnected pattern by taking an unknown node of one part to be an unknown node of
    another (``[K, directed by, director 1]`` + ``[movie 1, has genre, genre 1]`` with director 1 = movie 1)."""
    pattern = Pattern.from_triples(candidate.triples)
    parts = pattern.components()
    if len(parts) < 2:
        return []
    out: list[Candidate] = []
    for a_nodes, _ in parts:
        for b_nodes, _ in parts:
            if a_nodes is b_nodes:
                continue
            for a in (v for v in a_nodes if pattern.nodes[v].unknown):
                for b in (v for v in b_nodes if pattern.nodes[v].unknown):
                    keep, drop = pattern.nodes[a].text, pattern.nodes[b].text
                    new = [tuple(keep if x == drop else x for x in t) for t in candidate.triples]
                    out.append(candidate.edited(new, f"took {drop!r} to be {keep!r}"))  # type: ignore[arg-type]
    return out


def drop_part(candidate: Candidate) -> list[Candidate]:
    """A disconnected pattern without the part that names no entity (one candidate per such part): a
    leftover of an edit or of the LLM that nothing in the question anchors (``[country 2, capital, city
    1]`` beside ``[Tampere, located in, country 3], [country 3, borders, country 4], [country 4, capital,
    city 2]``)."""
    pattern = Pattern.from_triples(candidate.triples)
    parts = pattern.components()
    if len(parts) < 2:
        return []
    out: list[Candidate] = []
    for nodes, edge_ids in parts:
        if not edge_ids or any(not pattern.nodes[v].unknown for v in nodes):
            continue
        dropped = set(edge_ids)
        rest = [t for k, t in enumerate(candidate.triples) if k not in dropped]
        if rest:
            gone = ", ".join(str(list(candidate.triples[k])) for k in sorted(dropped))
            out.append(candidate.edited(rest, f"dropped {gone}: no entity of the question is on it"))
    return out


def rechain_leaf(candidate: Candidate) -> list[Candidate]:
    """The answer's triple moved from its node to the unknown leaf beside it (:func:`dangling_leaves`):
    ``[Brazil, borders, country 1], [Brazil, currency, currency 1]`` → ``[Brazil, borders, country 1],
    [country 1, currency, currency 1]`` — the question walks through the leaf to the answer."""
    pattern = Pattern.from_triples(candidate.triples)
    leaves, asked = dangling_leaves(pattern), pattern.asked_node()
    if not leaves or asked is None:
        return []
    out: list[Candidate] = []
    for leaf, node in leaves:
        leaf_text, node_text = pattern.nodes[leaf].text, pattern.nodes[node].text
        ends = {node_text, pattern.nodes[asked].text}
        new = [(leaf_text if h == node_text else h, r, leaf_text if t == node_text else t) if {h, t} == ends
               else (h, r, t) for h, r, t in candidate.triples]
        out.append(candidate.edited(new, f"the answer's triple moved from {node_text!r} to {leaf_text!r}: "
                                         "the question walks through it"))
    return out


def extend_asked(candidate: Candidate, relation_text: str, hint: str) -> list[Candidate]:
    """One more hop from the answer node through the relation the question's focus word names
    ("Name the **directors** of Nick Newman's screenplays" written as ``[movie 1, written by, Nick
    Newman]`` only)."""
    pattern = Pattern.from_triples(candidate.triples)
    asked = pattern.asked_node()
    if asked is None:
        return []
    fresh = unknown_name(candidate.triples, hint)
    link = (pattern.nodes[asked].text, relation_text, fresh)
    return [candidate.edited([*candidate.triples, link], f"added {list(link)}: the question asks for it")]




def costar(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """The echoed role of a co-star question ("Who acted alongside Dalton Trumbo?" written as
    ``[Dalton Trumbo, starred actors, actor 1]`` + ``[movie 1, starred actors, actor 1]``, where the KG
    has Dalton Trumbo only as the tail of ``starred actors``): ``[movie 1, starred actors, Dalton
    Trumbo]`` + ``[movie 1, starred actors, actor 1]``, keeping the LLM's answer node. (The
    :func:`collapse_echo` reading drops the answer node instead.)"""
    triples = list(candidate.triples)
    out: list[Candidate] = []
    for i, (head, relation, tail) in enumerate(triples):
        if is_unknown(head) or not is_unknown(tail) or is_unknown(relation):
            continue
        partners = [j for j, (h, r, t) in enumerate(triples)
                    if j != i and r == relation and t == tail and is_unknown(h) and h != tail]
        entity = judge.entity_of(head)
        rel = judge.retriever.nearest_relation(relation)
        if len(partners) != 1 or entity is None or rel is None:
            continue
        if kg_roles(judge.retriever, entity).get(rel, set()) != {"tail"}:
            continue
        middle = triples[partners[0]][0]
        new = [(middle, relation, head) if k == i else t for k, t in enumerate(triples)]
        if Pattern.from_triples(new).asked_node() != Pattern.from_triples(new).node_index(tail):
            continue
        out.append(candidate.edited(new, f"{list(triples[i])} -> {list(new[i])}: {head!r} is only ever the tail "
                                         f"of {relation!r} in the KG, and {tail!r} is asked for"))
    return out


def extend_to_who(candidate: Candidate, judge: PatternJudge) -> list[Candidate]:
    """For a "who" question answered by a node of a type the examples never answer "who" with
    (:attr:`~simgrag.grounding.judge.PatternJudge.who_types`): one more hop from that node to a new
    node of a who-type, through each relation the examples put between the two types, on the examples'
    sides. "Who has Stephen Merchant directed movies with?" written as ``[movie 1, directed by, Stephen
    Merchant]`` gets ``+ [movie 1, directed by, director 1]`` (and the ``starred actors`` / ``written by``
    hops, which no word of the question reads)."""
    pattern = Pattern.from_triples(candidate.triples)
    asked = pattern.asked_node()
    if asked is None or not judge.who_types:
        return []
    kind = pattern.nodes[asked].type_hint
    if kind is None or kind in judge.who_types:
        return []
    node = pattern.nodes[asked].text
    out: list[Candidate] = []
    for who in sorted(judge.who_types):
        fresh = unknown_name(candidate.triples, who)
        for rel, side in judge.lexicon.links(kind, who):
            text = judge.store.relations[rel].replace("_", " ")
            link = (node, text, fresh) if side == "head" else (fresh, text, node)
            out.append(candidate.edited([*candidate.triples, link], f"added {list(link)}: the question asks 'who'"))
    return out
