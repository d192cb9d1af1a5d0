"""Edits for a pattern that names no entity although the question names one: the LLM dropped the
entity the question is about ("What years did Andrea Marcovicci's movies come out?" written as
``[movie 1, release year, year 1]``). Each attaches the question's entity (longest confident mentions
first) — directly through one of its KG relations, through a shared neighbour, or in place of an
unknown node — and the judge picks among them (:mod:`~simgrag.grounding.stage`).
"""

from __future__ import annotations

from simgrag.grounding.judge import Candidate, PatternJudge, unknown_name
from simgrag.grounding.lexicon import kg_roles
from simgrag.grounding.question import QuestionReading, normalize_name
from simgrag.kg.twins import without_twins
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pattern.graph import is_unknown

__all__ = ["MAX_ANCHOR_RELATIONS", "anchor_entity", "anchor_via", "name_unknown", "snap_names"]

#: KG relations of the entity tried per anchoring edit
MAX_ANCHOR_RELATIONS = 6


def _anchor_roles(retriever: SubgraphRetriever, entity: int) -> list[tuple[int, set[str]]]:
    """The first :data:`MAX_ANCHOR_RELATIONS` (KG relation, the entity's sides) of ``entity``, a twin
    relation left out when its pair is there (:func:`~simgrag.kg.twins.without_twins`: on a KG that stores
    each fact twice a country's six relations and their six twins would crowd out half of them)."""
    roles = kg_roles(retriever, entity)
    kept = without_twins(retriever.store, sorted(roles))
    return [(rel, roles[rel]) for rel in kept[:MAX_ANCHOR_RELATIONS]]


def anchor_entity(candidate: Candidate, reading: QuestionReading, retriever: SubgraphRetriever) -> list[Candidate]:
    """Attach the question's entity (longest mentions first) to an unknown node through each KG
    relation it has, when no triple names any entity."""
    triples = list(candidate.triples)
    mentions = [m for m in reading.mentions if m.confident]
    if any(not is_unknown(x) for h, _, t in triples for x in (h, t)) or not mentions:
        return []
    unknowns = list(dict.fromkeys(x for h, _, t in triples for x in (h, t) if is_unknown(x)))
    out: list[Candidate] = []
    relations = retriever.store.relations
    for mention in sorted(mentions, key=lambda m: -m.words)[:2]:
        name = retriever.store.entities[mention.entity]
        for rel, sides in _anchor_roles(retriever, mention.entity):
            text = relations[rel].replace("_", " ")
            for node in unknowns:
                for side in sorted(sides):
                    link = (node, text, name) if side == "tail" else (name, text, node)
                    out.append(candidate.edited([*triples, link], f"added {list(link)}: the question names {name!r}"))
    return out


def anchor_via(candidate: Candidate, reading: QuestionReading, judge: PatternJudge) -> list[Candidate]:
    """No triple names the question's entity: attach it through a shared neighbour — ``(K, r, W)`` +
    ``(U, r, W)`` for an unknown node U, each KG relation r of K ("Trust the Man's director made other
    films": ``[Trust the Man, directed by, W]`` + ``[movie 1, directed by, W]``)."""
    triples = list(candidate.triples)
    mentions = [m for m in reading.mentions if m.confident]
    if any(not is_unknown(x) for h, _, t in triples for x in (h, t)) or not mentions:
        return []
    unknowns = list(dict.fromkeys(x for h, _, t in triples for x in (h, t) if is_unknown(x)))
    relations = judge.store.relations
    out: list[Candidate] = []
    for mention in sorted(mentions, key=lambda m: -m.words)[:2]:
        name = judge.store.entities[mention.entity]
        for rel, sides in _anchor_roles(judge.retriever, mention.entity):
            text = relations[rel].replace("_", " ")
            for side in sorted(sides):
                hop = unknown_name(triples, "entity")
                for node in unknowns:
                    links = ([(name, text, hop), (node, text, hop)] if side == "head"
                             else [(hop, text, name), (hop, text, node)])
                    out.append(candidate.edited([*triples, *links], f"added {links}: the question names {name!r}"))
    return out


def name_unknown(candidate: Candidate, reading: QuestionReading, judge: PatternJudge) -> list[Candidate]:
    """No triple names the question's entity: each unknown node in turn taken to be that entity."""
    triples = list(candidate.triples)
    mentions = [m for m in reading.mentions if m.confident]
    if any(not is_unknown(x) for h, _, t in triples for x in (h, t)) or not mentions:
        return []
    out: list[Candidate] = []
    unknowns = list(dict.fromkeys(x for h, _, t in triples for x in (h, t) if is_unknown(x)))
    for mention in sorted(mentions, key=lambda m: -m.words)[:2]:
        name = judge.store.entities[mention.entity]
        for node in unknowns:
            new = [tuple(name if x == node else x for x in t) for t in triples]
            out.append(candidate.edited(new, f"took {node!r} to be {name!r}: the question names it"))  # type: ignore[arg-type]
    return out


def snap_names(candidate: Candidate, reading: QuestionReading, judge: PatternJudge) -> Candidate:
    """Named nodes that are no KG entity renamed to the KG entity of one of the question's confident
    mentions: a node that holds a mention as whole words (the LLM copied a word too many: "The Toy in",
    "The Eagle's"; the longest mention held), or else a node held as whole words by exactly one mention
    whose entity no other node names (the LLM cut the name short: "Detectives" for "Watching the
    Detectives"). The candidate itself when nothing needs it."""
    mentions = sorted((m for m in reading.mentions if m.confident), key=lambda m: -m.words)
    padded_names = [(m.entity, judge.store.entities[m.entity], f" {normalize_name(judge.store.entities[m.entity])} ")
                    for m in mentions]  # longest mention first
    texts = list(dict.fromkeys(x for h, _, t in candidate.triples for x in (h, t)))
    named = {judge.entity_of(x) for x in texts if not is_unknown(x)}
    renames: dict[str, str] = {}
    for text in texts:
        if is_unknown(text) or judge.entity_of(text) is not None:
            continue
        padded = f" {normalize_name(text).replace(chr(39) + 's', '').replace(chr(8217) + 's', '')} "
        held = [name for _, name, padded_name in padded_names if padded_name in padded]
        holders = {entity: name for entity, name, padded_name in padded_names
                   if padded.strip() and padded in padded_name and entity not in named}
        if held:
            renames[text] = held[0]
        elif len(holders) == 1:
            renames[text] = next(iter(holders.values()))
    if not renames:
        return candidate
    new = [tuple(renames.get(x, x) if i != 1 else x for i, x in enumerate(t)) for t in candidate.triples]
    notes = ", ".join(f"{old!r} -> {name!r}" for old, name in renames.items())
    return candidate.edited(new, f"renamed {notes}: the KG's name of the entity the question names")  # type: ignore[arg-type]
