"""Dynamic few-shot examples chosen by the question's *structure*, not only its words.

A 1.5B model copies its nearest shot. Chosen by shared words alone, the nearest shot of an off-template
question ("Who were the directors on films Silvia Richards wrote?") may have another shape ("the
screenwriter of X also wrote which films": a writer *of* a named film), and the pattern copies that
shape. :class:`ShotRanker` scores each example of the examples file by what the question and the KG say
about the pattern it needs, before the LLM writes anything:

- **anchor**: the example names an entity in a role (relation, side) that the question's entity has in
  the KG — Silvia Richards is only ever the *tail* of ``written_by``, so "films written by X" fits and
  "the writer of X" does not;
- **relations**: the KG relations the question's phrases read as (``wrote`` → ``written_by``,
  ``directors`` → ``directed_by``) against the example's relations (Jaccard);
- **focus**: the type the question's focus word names ("which **directors**") against the type of the
  example's answer node.

The scores are added to the prompt builder's word similarity (:meth:`PromptBuilder.dynamic_examples`),
so among examples of the right structure the one worded most alike still comes last, nearest the
question. No LLM call; a few embeddings of the question's phrases (cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simgrag.errors import PatternError
from simgrag.grounding.judge import PatternJudge
from simgrag.grounding.lexicon import kg_roles
from simgrag.grounding.question import QuestionReading
from simgrag.pattern.examples import Example
from simgrag.pattern.graph import Pattern, singular

__all__ = ["ANCHOR_WEIGHT", "FOCUS_WEIGHT", "RELATION_WEIGHT", "ShotRanker"]

#: weights of the three structure scores; each score is in [0, 1] and word similarity (also in [0, 1])
#: only orders examples of equal structure
ANCHOR_WEIGHT = 2.0
RELATION_WEIGHT = 2.0
FOCUS_WEIGHT = 1.0

Role = tuple[int, str]  # (KG relation, side: "head" | "tail")


@dataclass(frozen=True)
class _Shape:
    """What the ranker needs of one example: its named nodes' roles, its relations, its answer type."""

    roles: frozenset[Role]
    relations: frozenset[int]
    answer_type: str | None


class ShotRanker:
    """Structure scores of ``examples`` for a question, read with ``judge``'s lexicon (module doc)."""

    def __init__(self, judge: PatternJudge, examples: Sequence[Example]) -> None:
        self.judge = judge
        self.shapes = [self._shape(e) for e in examples]

    def _shape(self, example: Example) -> _Shape | None:
        try:
            pattern = Pattern.from_triples(example.triples)
        except PatternError:
            return None
        roles: set[Role] = set()
        relations: set[int] = set()
        for _, rel, node, side in self.judge.lexicon.relation_ends(pattern.triples()):
            relations.add(rel)
            if not pattern.nodes[pattern.node_index(node)].unknown:
                roles.add((rel, side))
        asked = pattern.asked_node()
        hint = pattern.nodes[asked].type_hint if asked is not None else None
        return _Shape(frozenset(roles), frozenset(relations), singular(hint.lower()) if hint else None)

    def scores(self, question: str) -> list[float]:
        """Per example (in the examples file's order), its structure score for ``question``."""
        reading = self.judge.read(question)
        roles: set[Role] = set()
        for mention in reading.mentions:
            if mention.confident:
                for rel, sides in kg_roles(self.judge.retriever, mention.entity).items():
                    roles |= {(rel, side) for side in sides}
        relations = set(self.judge.lexicon.relation_phrases(reading.phrases))
        focus = self._focus_type(reading)
        out = []
        for shape in self.shapes:
            if shape is None:
                out.append(0.0)
                continue
            anchor = 1.0 if shape.roles & roles else 0.0
            union = relations | shape.relations
            overlap = len(relations & shape.relations) / len(union) if union else 0.0
            typed = 1.0 if focus is not None and focus == shape.answer_type else 0.0
            out.append(ANCHOR_WEIGHT * anchor + RELATION_WEIGHT * overlap + FOCUS_WEIGHT * typed)
        return out

    def _focus_type(self, reading: QuestionReading) -> str | None:
        """The examples' node type the question's focus word names ("which **directors**" → director)."""
        covered = [False] * len(reading.words)
        for m in reading.mentions:
            if m.confident:
                covered[m.start:m.end] = [True] * m.words
        index = reading.focus(covered)
        types = self.judge.lexicon.types
        if index is None or not types:
            return None
        found = self.judge.lexicon.type_words(reading.clean_words(), [index], list(types))
        return found.get(index)
