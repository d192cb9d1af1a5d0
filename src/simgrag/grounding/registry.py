"""The pattern stage's edits as plug-ins: one ordered registry, a switch per edit, the problem each answers.

An :class:`Edit` takes an :class:`EditContext` (the judge, the question's reading and the judgement of the
candidate to edit) and proposes edited candidates; its ``applies`` says when it is tried at all. The
registry's order is the order the edits offer candidates in (it decides which fit the stage's budget of
judged candidates), so a plug-in names where it goes (:func:`register_edit`).

Each edit is a *family* that a KG may switch off: :mod:`simgrag.grounding.fit` measures, on the KG's
own validation questions, which families raise accuracy there, and the index's manifest keeps the
switches (:class:`~simgrag.grounding.fit.GroundingFit`). ``simgrag ls`` lists them.

Three more switchable families are not shape edits: :data:`ANALOGY` (the examples' patterns with the
question's entity put in, :mod:`~simgrag.grounding.analogy`), :data:`REVISION` (one more LLM call,
told what is wrong) and :data:`CHOICE` (the LLM picks among readings the KG holds equally,
:mod:`~simgrag.grounding.choice`; off until a KG's fit shows it helps).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simgrag.errors import ConfigError
from simgrag.grounding import anchors, bridges, edits
from simgrag.grounding.judge import GOOD_GSD, Candidate, Judgement, PatternJudge
from simgrag.grounding.question import QuestionReading

__all__ = [
    "ANALOGY",
    "CHOICE",
    "EDITS",
    "OFF_UNLESS_FITTED",
    "PROBLEMS",
    "REVISION",
    "TIDY",
    "UNDO_DISPLACED",
    "Edit",
    "EditContext",
    "EditPlugin",
    "edit_names",
    "family_names",
    "propose_edits",
    "propose_one",
    "register_edit",
]

#: the analogy candidates as a switchable family (not a shape edit)
ANALOGY = "analogy"
#: the LLM's revision as a switchable family
REVISION = "revision"
#: the LLM choosing among readings the KG holds equally (:mod:`~simgrag.grounding.choice`)
CHOICE = "llm_choice"
#: families off on an index without a fit unless every family is asked for (``--grounding``): new ones that cost
#: an LLM call, which a KG's fit must first show to help
OFF_UNLESS_FITTED = frozenset({CHOICE})

#: the kinds of problem an edit answers (what the judge reports, :class:`~simgrag.grounding.judge.Judgement`)
PROBLEMS = {
    "shape": "the triples are not connected, or a part hangs loose",
    "anchor": "the question's entity is missing, misspelt or on the wrong node",
    "role": "a named entity sits on a side of a relation the KG never gives it",
    "focus": "the answer node is not what the question's focus word asks for",
    "unworded": "a triple the question has no words for (a copied hop)",
    "uncovered": "a relation the question names that no triple has",
    "no_match": "nothing in the KG is close to the pattern",
    "type": "a typed unknown bound to an entity of another type (a hop is missing)",
}


@dataclass(frozen=True)
class EditContext:
    """What an edit reads: the judge (KG, lexicon, examples), the question and the judged candidate."""

    judge: PatternJudge
    reading: QuestionReading
    judgement: Judgement

    @property
    def candidate(self) -> Candidate:
        return self.judgement.candidate

    def relation_text(self, rel: int) -> str:
        """A KG relation's name as words ("has_capital" → "has capital")."""
        return self.judge.store.relations[rel].replace("_", " ")

    @property
    def named_relations(self) -> list[str]:
        """The relations the question names and no triple has, as words."""
        return [self.relation_text(rel) for rel in self.judgement.uncovered]


@runtime_checkable
class EditPlugin(Protocol):
    """What the stage needs of an edit (a plug-in may be any object with these)."""

    @property
    def name(self) -> str: ...

    @property
    def problem(self) -> str: ...

    def applies(self, ctx: EditContext) -> bool: ...

    def propose(self, ctx: EditContext) -> list[Candidate]: ...


@dataclass(frozen=True)
class Edit:
    """One edit family: ``make`` proposes candidates when ``when`` holds (always, by default)."""

    name: str
    problem: str
    make: Callable[[EditContext], list[Candidate]]
    when: Callable[[EditContext], bool] | None = None

    def applies(self, ctx: EditContext) -> bool:
        return self.when is None or self.when(ctx)

    def propose(self, ctx: EditContext) -> list[Candidate]:
        return self.make(ctx)


def _contradicted(ctx: EditContext) -> bool:
    return ctx.judgement.focus == "contradicted"


def _contradicted_word(ctx: EditContext) -> bool:
    return _contradicted(ctx) and ctx.judgement.focus_word is not None


def _contradicted_wanted(ctx: EditContext) -> bool:
    return _contradicted(ctx) and ctx.judgement.wanted_relation is not None


def _contradicted_or_far(ctx: EditContext) -> bool:
    return _contradicted(ctx) or ctx.judgement.gsd > GOOD_GSD


def _no_evidence(ctx: EditContext) -> bool:
    retrieval = ctx.judgement.retrieval
    return not (retrieval and retrieval.evidence)


def _wanted_text(ctx: EditContext) -> str:
    return ctx.relation_text(ctx.judgement.wanted_relation or 0)


def _rebind_uncovered(ctx: EditContext) -> list[Candidate]:
    return [e for text in ctx.named_relations for e in edits.rebind_asked(ctx.candidate, text, ctx.judge)]


#: every edit, in the order its candidates are offered (the order of the stage before the registry, kept so
#: that the judged-candidate budget picks the same candidates)
EDITS: list[EditPlugin] = [
    Edit("connect_parts", "shape", lambda x: edits.connect_parts(x.candidate, x.named_relations)),
    Edit("merge_parts", "shape", lambda x: edits.merge_parts(x.candidate)),
    Edit("rechain_leaf", "shape", lambda x: edits.rechain_leaf(x.candidate)),
    Edit("anchor_entity", "anchor", lambda x: anchors.anchor_entity(x.candidate, x.reading, x.judge.retriever)),
    Edit("name_unknown", "anchor", lambda x: anchors.name_unknown(x.candidate, x.reading, x.judge)),
    Edit("anchor_via", "anchor", lambda x: anchors.anchor_via(x.candidate, x.reading, x.judge)),
    Edit("costar", "focus", lambda x: edits.costar(x.candidate, x.judge)),
    Edit("flip_role", "role", lambda x: edits.flip_role(x.candidate, x.judge)),
    Edit("turn_typed", "role", lambda x: edits.turn_typed(x.candidate, x.judge)),
    Edit("split_shared", "shape", lambda x: edits.split_shared(x.candidate)),
    Edit("expand_roles", "role", lambda x: edits.expand_roles(x.candidate, x.judge)),
    Edit("detach_named", "role", lambda x: edits.detach_named(x.candidate, x.judge)),
    Edit("collapse_echo", "role", lambda x: edits.collapse_echo(x.candidate, x.judge.retriever)),
    Edit("rebind_relation", "role", lambda x: edits.rebind_relation(x.candidate, x.judge)),
    Edit("prune_unsupported", "unworded", lambda x: edits.prune_unsupported(x.candidate, x.judgement)),
    Edit("skip_named_hop", "unworded",
         lambda x: edits.skip_named_hop(x.candidate, x.judgement, x.judge, x.reading)),
    Edit("undo_displaced", "anchor", lambda x: edits.undo_displaced(x.candidate, x.judgement, x.judge)),
    Edit("bridge_named", "role", lambda x: bridges.bridge_named(x.candidate, x.judge, x.reading)),
    Edit("retype", "type", lambda x: bridges.retype(x.candidate, x.judge)),
    Edit("bridge_typed", "type", lambda x: bridges.bridge_typed(x.candidate, x.judge)),
    Edit("insert_hop", "type", lambda x: bridges.insert_hop(x.candidate, x.reading, x.judge)),
    Edit("extend_to_who", "focus", lambda x: edits.extend_to_who(x.candidate, x.judge),
         lambda x: x.reading.asks_who()),
    Edit("swap_named", "focus", lambda x: edits.swap_named(x.candidate), _contradicted),
    Edit("name_in_place", "focus", lambda x: edits.name_in_place(x.candidate), _contradicted),
    Edit("drop_leaf", "unworded", lambda x: edits.drop_leaf(x.candidate), _contradicted_or_far),
    Edit("shortcut_answer", "unworded", lambda x: edits.shortcut_answer(x.candidate), _contradicted_or_far),
    Edit("extend_to_focus", "focus",
         lambda x: bridges.extend_to_focus(x.candidate, x.judge, x.judgement.focus_word or ""), _contradicted_word),
    Edit("free_focus", "focus", lambda x: edits.free_focus(x.candidate, x.judgement.focus_word or ""),
         _contradicted_word),
    Edit("rebind_asked", "focus", lambda x: edits.rebind_asked(x.candidate, _wanted_text(x), x.judge),
         _contradicted_wanted),
    Edit("extend_asked", "focus",
         lambda x: edits.extend_asked(x.candidate, _wanted_text(x), x.judgement.focus_word or "entity"),
         _contradicted_wanted),
    # a relation the question names and no triple has, put on the answer's triple ("the big **cities of**
    # Tunisia" left as ``[Tunisia, capital, city 1]`` once a copied hop is gone: ``[city 1, located in, Tunisia]``)
    Edit("rebind_uncovered", "uncovered", _rebind_uncovered),
    Edit("drop_any", "no_match", lambda x: edits.drop_any(x.candidate), _no_evidence),
]
#: applied last, to the candidate and to every edit of it: a part no named entity anchors is dropped
TIDY = Edit("drop_part", "shape", lambda x: edits.drop_part(x.candidate))


def edit_names() -> list[str]:
    """The registered shape edits, in order (``drop_part`` last)."""
    return [e.name for e in EDITS] + [TIDY.name]


def family_names() -> list[str]:
    """Every switchable family: the shape edits, then :data:`ANALOGY`, :data:`REVISION` and :data:`CHOICE`."""
    return [*edit_names(), ANALOGY, REVISION, CHOICE]


def register_edit(edit: EditPlugin, *, before: str | None = None) -> None:
    """Add a plug-in edit (before the edit named ``before``, else at the end). Names are unique."""
    if not isinstance(edit, EditPlugin):
        raise ConfigError(f"{edit!r} is not an edit: it needs name, problem, applies(ctx) and propose(ctx)")
    if edit.name in family_names():
        raise ConfigError(f"an edit named {edit.name!r} is registered already")
    if edit.problem not in PROBLEMS:
        raise ConfigError(f"edit {edit.name!r}: unknown problem {edit.problem!r} (one of {', '.join(PROBLEMS)})")
    names = [e.name for e in EDITS]
    if before is not None and before not in names:
        raise ConfigError(f"no edit named {before!r} to put {edit.name!r} before (edits: {', '.join(names)})")
    EDITS.insert(names.index(before) if before is not None else len(EDITS), edit)


def _tagged(candidates: list[Candidate], family: str) -> list[Candidate]:
    return [c.tagged(family) for c in candidates]


#: the edit the stage applies a second time in its first round, to the first round's own edits
UNDO_DISPLACED: EditPlugin = next(e for e in EDITS if e.name == "undo_displaced")


def propose_one(edit: EditPlugin, judge: PatternJudge, reading: QuestionReading, judgement: Judgement,
                disabled: Container[str] = ()) -> list[Candidate]:
    """The candidates of one ``edit`` for ``judgement``, tagged; none when it is in ``disabled`` or does not
    apply."""
    if edit.name in disabled or judgement.pattern is None:
        return []
    ctx = EditContext(judge, reading, judgement)
    return _tagged(edit.propose(ctx), edit.name) if edit.applies(ctx) else []


def propose_edits(judge: PatternJudge, reading: QuestionReading, judgement: Judgement,
                  disabled: Container[str] = ()) -> list[Candidate]:
    """The edited candidates of ``judgement`` from every registered edit not in ``disabled``, each tagged
    with the family that made it (nothing when the judgement is sound)."""
    if judgement.sound or judgement.pattern is None:
        return []
    ctx = EditContext(judge, reading, judgement)
    out: list[Candidate] = []
    for edit in EDITS:
        if edit.name not in disabled and edit.applies(ctx):
            out += _tagged(edit.propose(ctx), edit.name)
    if TIDY.name in disabled:
        return out
    # an edit that leaves a part no named entity anchors (a hop bridged past it) is offered without it too
    return out + [tidy for e in [ctx.candidate, *out]
                  for tidy in _tagged(edits.drop_part(e), TIDY.name)]
