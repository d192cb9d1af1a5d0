"""Questions composed from a pattern by rule, with no LLM: learning's opt-in 3-hop shots
(``LearnSettings(shot_shapes=("3hop",))``; every shot with ``composed_shots=True``).

A 1.5B model asked to write a question for a pattern often turns a triple round ("What is the father of Oren?"
for *the person whose father is Oren*) or leaves a hop out ("Which person is Bram's mother?" for *the children
of Bram's mother*); as a shot, such a question teaches the pattern writer the wrong pattern. A composed question
says every triple, each the way the KG runs it, in the pattern's own relation words::

    [X, father, UNKNOWN person 1], [UNKNOWN person 1, profession, UNKNOWN profession 1]
        → "What is the profession of the father of X?"
    [UNKNOWN person 1, place of birth, Lindenfels], [UNKNOWN person 1, ethnicity, UNKNOWN ethnicity 1]
        → "What is the ethnicity of the person whose place of birth is Lindenfels?"
    [UNKNOWN person 1, plays position, Goalkeeper], [UNKNOWN person 1, plays in club, UNKNOWN club 1]
        → "What is the club of the person that plays position Goalkeeper?"

Each unknown node is said through the triples that lead to it from the named nodes: "the R of …" for a hop
the KG runs towards it (the relation's name, or the node's kind when a verb-like name ends with it: "plays in
club" → "the club of …", but "resting place" → "the resting place of …"), "the K whose R is …" / "the K that
R …" for a hop it runs away from it (a relation named like a verb phrase — :func:`verb_like`, an English word
rule — takes "that"). The wording is stiff, and meant to be:
the shot is there to teach the pattern, not the style; the validation questions stay the LLM's own. (Every
shot so worded cost WorldCup2014's real questions 10 points on 1-hop: people's verbs are missing from it.)
"""

from __future__ import annotations

from collections.abc import Sequence

from simgrag.grounding.english import AUXILIARIES, IRREGULAR_PARTICIPLES, RELATION_PREPOSITIONS
from simgrag.pattern.graph import Pattern, is_unknown, type_hint

__all__ = ["composed_question", "verb_like"]


def verb_like(relation: str) -> bool:
    """Whether a relation's name reads as a verb phrase ("plays in club", "is aged", "directed by", "has
    genre") rather than a noun ("father", "place of birth", "release year"); a one-word name is a noun."""
    words = relation.lower().split()
    if len(words) < 2:
        return False
    first, last = words[0], words[-1]
    return (first in AUXILIARIES or first in IRREGULAR_PARTICIPLES or first.endswith("ed")
            or (first.endswith("s") and not first.endswith("ss")) or first in RELATION_PREPOSITIONS
            or last in RELATION_PREPOSITIONS)


def _kind(label: str) -> str:
    return type_hint(label) or "thing"


def _names_kind(relation: str, kind: str) -> bool:
    """Whether ``relation`` ends with the kind's words ("plays in club" and ``club``)."""
    words, end = relation.lower().split(), kind.lower().split()
    return len(words) > len(end) and words[-len(end):] == end


def _phrase(triples: Sequence[tuple[str, str, str]], node: str, said: set[int]) -> str:
    """``node`` as a noun phrase, through the triples not yet ``said`` (which it marks)."""
    if not is_unknown(node):
        return node
    mine = [i for i, (h, _, t) in enumerate(triples) if i not in said and node in (h, t)]
    said.update(mine)
    clauses: list[tuple[bool, str, str]] = []  # (the KG runs towards the node, relation, the other end)
    for i in mine:
        head, relation, tail = triples[i]
        towards = tail == node
        clauses.append((towards, relation, _phrase(triples, head if towards else tail, said)))
    kind = _kind(node)
    if len(clauses) == 1 and clauses[0][0]:
        _, relation, other = clauses[0]
        if verb_like(relation) and _names_kind(relation, kind):  # a noun's own words stay: "the resting place of"
            return f"the {kind} of {other}"
        return f"the {kind} that {other} {relation}" if verb_like(relation) else f"the {relation} of {other}"
    parts = []
    for towards, relation, other in clauses:
        if towards:
            parts.append(f"that {other} {relation}" if verb_like(relation) else f"that is the {relation} of {other}")
        else:
            parts.append(f"that {relation} {other}" if verb_like(relation) else f"whose {relation} is {other}")
    return f"the {kind} " + " and ".join(parts)


def composed_question(triples: Sequence[Sequence[str]]) -> str | None:
    """The question composed from a pattern that is a tree, asks for one unknown node and names some entity
    (module docstring); ``None`` for any other pattern."""
    shown = [(str(h), str(r), str(t)) for h, r, t in triples]
    if not shown:
        return None
    pattern = Pattern.from_triples([list(t) for t in shown])
    asked = pattern.asked_node()
    if (asked is None or not pattern.is_connected() or len(shown) != len(pattern.nodes) - 1
            or all(is_unknown(n.text) for n in pattern.nodes)):
        return None  # a cycle, a repeated triple, nothing to ask or nothing named
    said: set[int] = set()
    phrase = _phrase(shown, pattern.nodes[asked].text, said)
    if len(said) != len(shown):
        return None
    return f"What is {phrase}?"
