"""Patterns by analogy: a worked example of the question's structure, with the question's entity put in
place of the example's own.

The examples file already holds the pattern most questions need: "Who were the directors on films Silvia
Richards wrote?" needs the pattern of the example "who are the directors of the films written by Laura
Kerr", with *Silvia Richards* for *Laura Kerr*. The examples that fit the question's structure best
(:class:`~simgrag.grounding.shots.ShotRanker`, then words) are turned into candidates this way
(:func:`analog_candidates`) and judged like any other. When the best of them is *sound* — every triple
worded in the question, no problem, a close KG match — and the question's focus word confirms its answer
node, the pattern stage uses it without calling the LLM (:class:`~simgrag.grounding.stage.GroundedPatterns`);
otherwise the analogies join the LLM's pattern and its edits as candidates.

A named node of the example is replaced by the KG name of an entity the question names (confident
mentions only). With several named nodes the assignment must give each entity the KG roles (relation,
side) its node has in the example, and be the only one that does.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence

from simgrag.errors import PatternError
from simgrag.grounding.judge import Candidate, PatternJudge
from simgrag.grounding.lexicon import kg_roles
from simgrag.grounding.question import Mention, QuestionReading
from simgrag.pattern.examples import Example
from simgrag.pattern.graph import Pattern

__all__ = ["MAX_ANALOGS", "analog_candidates"]

#: examples (the best-ranked first) turned into candidates per question
MAX_ANALOGS = 3

Role = tuple[int, str]


def analog_candidates(judge: PatternJudge, reading: QuestionReading, examples: Sequence[Example],
                      order: Sequence[int], *, limit: int = MAX_ANALOGS,
                      same_wording: Collection[int] = ()) -> list[Candidate]:
    """The first ``limit`` examples of ``order`` (indices into ``examples``) that can take the question's
    entities, as candidates (module docstring); identical patterns once. Those of ``same_wording`` (worded
    as the question is) get the origin ``"template"``: the examples file answers this wording itself."""
    mentions = [m for m in reading.mentions if m.confident]
    out: dict[tuple[tuple[str, str, str], ...], Candidate] = {}
    for i in order:
        if len(out) >= limit:
            break
        example = examples[i]
        try:
            pattern = Pattern.from_triples(example.triples)
        except PatternError:
            continue
        mapping = _assignment(judge, pattern, mentions)
        if mapping is None:
            continue
        triples = tuple((mapping.get(h, h), r, mapping.get(t, t)) for h, r, t in pattern.triples())
        asked = pattern.asked_node()
        note = (f"the pattern of the example {example.question!r} with "
                + ", ".join(f"{new!r} for {old!r}" for old, new in mapping.items()))
        origin = "template" if i in same_wording else "analogy"
        out.setdefault(triples, Candidate(triples, origin, (note,),
                                          pattern.nodes[asked].text if asked is not None else None))
    return list(out.values())


def _assignment(judge: PatternJudge, pattern: Pattern, mentions: Sequence[Mention]) -> dict[str, str] | None:
    """Example node text → KG entity name, or ``None`` (module docstring)."""
    named = [n.text for n in pattern.nodes if not n.unknown]
    if not named or len(named) != len(mentions):
        return None
    names = [judge.store.entities[m.entity] for m in mentions]
    if len(named) == 1:
        return {named[0]: names[0]}
    needed: dict[str, set[Role]] = {text: set() for text in named}
    for _, rel, node, side in judge.lexicon.relation_ends(pattern.triples()):
        if node in needed:
            needed[node].add((rel, side))
    has = [{(rel, side) for rel, sides in kg_roles(judge.retriever, m.entity).items() for side in sides}
           for m in mentions]
    fitting = [perm for perm in itertools.permutations(range(len(mentions)))
               if all(needed[node] <= has[k] for node, k in zip(named, perm, strict=True))]
    if len(fitting) != 1:
        return None
    return {node: names[k] for node, k in zip(named, fitting[0], strict=True)}
