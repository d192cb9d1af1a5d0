"""The pattern stage with the KG in the loop: LLM pattern → judged → edited → (one revision) → chosen.

:class:`GroundedPatterns` wraps a :class:`~simgrag.pattern.generate.PatternGenerator`:

1. the LLM writes a pattern (one call, as before);
2. the :class:`~simgrag.match.judge.PatternJudge` checks it against the question and the KG; a *sound*
   pattern (no problem, every triple supported, a close KG match) is used as it is — most are;
3. otherwise candidates are derived by the edits of :mod:`~simgrag.grounding.edits` (each small, each
   answering one frequent small-model mistake) and judged too; the few best that still have a
   problem are edited again, twice at most (:data:`EDIT_ROUNDS`). An edited candidate may replace the
   LLM's pattern only when it has fewer problems, or when it has none and the question's focus word
   confirms its answer node — no rewriting a pattern on a hunch;
4. when the best candidate is still not sound (a problem, a triple without words, or nothing in the KG close
   to it), the LLM is asked once more, told what is wrong (``revise``); its new pattern and that pattern's
   edits join the candidates;
5. the best-ranked candidate wins; its edits are reported as ``kg_repairs``.

At most one extra LLM call per question (``max_revisions``), only for patterns that stay unsound (asking
also when the KG holds nothing close, not only on a problem: BENCHMARKS.md §17, +0.03–0.2 calls per question);
at most :data:`EDIT_BUDGET` edited candidates are judged (a count: the choice does not depend on the machine's
load); every candidate search runs under the judge's deadline.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from simgrag.errors import ConfigError, PatternError
from simgrag.grounding import anchors, choice, edits
from simgrag.grounding.analogy import analog_candidates
from simgrag.grounding.english import STOPWORDS
from simgrag.grounding.judge import Candidate, Judgement, PatternJudge, Triple3, judge_settings, triple_set
from simgrag.grounding.question import QuestionReading
from simgrag.grounding.registry import ANALOGY, CHOICE, REVISION, UNDO_DISPLACED, propose_edits, propose_one
from simgrag.grounding.shots import ShotRanker
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.generate import PatternGenerator, PatternResult
from simgrag.pattern.graph import is_unknown, type_hint
from simgrag.pattern.prompt import question_tokens

__all__ = ["STAGE_OPTIONS", "GroundedPatterns", "best_candidate", "candidate_edits", "confirmed_relations",
           "replaces_confirmed"]

logger = logging.getLogger(__name__)

#: edited candidates that fixed some problems but not all are edited again, the best few of them per round
SECOND_ROUND = 4
#: rounds of edits: the LLM's pattern edited, then the best few edits that still have a problem, then theirs
EDIT_ROUNDS = 3
#: edited candidates of one question judged at most — a count, not seconds, so the chosen pattern does not depend
#: on how busy the machine is (BENCHMARKS.md §17: a 1.5 s budget cut 2 of geo-wc's 195 questions on a quiet machine,
#: more beside other work); quiet, most questions judge none, the most was 124 offered
EDIT_BUDGET = 64
#: seconds spent judging edited candidates of one question, at most: a safety net behind :data:`EDIT_BUDGET`
#: (64 judgements took at most ~3 s on the 2-core machine), each search also under the judge's own deadline
EDIT_DEADLINE_S = 6.0
#: added to the shot score of an example worded exactly as the question (above any structure score)
SAME_WORDING_BONUS = 10.0
#: a pattern relation this near (embedding distance) the KG relation bound to it is that relation's own text or
#: alias, not a paraphrase: float noise of one text embedded twice, not a fitted threshold
EXACT_RELATION = 1e-3


def candidate_edits(judge: PatternJudge, reading: QuestionReading, judgement: Judgement,
                    disabled: Container[str] = ()) -> list[Candidate]:
    """The edited candidates worth judging for ``judgement`` (nothing when it is sound): every registered
    edit (:mod:`~simgrag.grounding.registry`) not in ``disabled``, in the registry's order."""
    return propose_edits(judge, reading, judgement, disabled)


def confirmed_relations(judgement: Judgement, judge: PatternJudge | None = None,
                        reading: QuestionReading | None = None) -> Counter[str]:
    """The KG relations of ``judgement``'s pattern that the KG has and matches: each triple whose relation the
    best subgraph binds to a KG relation at distance ≈ 0 (the LLM wrote the KG's own relation, or an alias of
    it), counted by the KG relation's name — when, given the ``judge`` and ``reading``, the pattern stands where
    the question does (it names the question's entity, is connected and asks something: no structure problem).
    A pattern that names none of the question's entities confirms nothing: "which money is used next to
    Porto's country?" written ``[country 1, official language, language 1]`` matches exactly, anywhere. A name
    spelt otherwise than the KG's ("Oscar" for ``OSCAR``) does not unconfirm the relations."""
    found: Counter[str] = Counter()
    if judgement.pattern is None or judgement.retrieval is None or not judgement.retrieval.evidence:
        return found
    if judge is not None and reading is not None and judge.structure_problems(reading, judgement.pattern):
        return found
    for binding in judgement.retrieval.evidence[0].edges:
        if binding.distance <= EXACT_RELATION and not is_unknown(binding.pattern_triple[1]):
            found[binding.triple.relation] += 1
    return found


def _relations(judge: PatternJudge, judgement: Judgement) -> Counter[str]:
    """The KG relations ``judgement``'s triples read as (each triple's nearest KG relation), by name."""
    found: Counter[str] = Counter()
    for _, relation, _ in judgement.candidate.triples:
        rel = None if is_unknown(relation) else judge.retriever.nearest_relation(relation)
        if rel is not None:
            found[judge.store.relations[rel]] += 1
    return found


def replaces_confirmed(judge: PatternJudge, base: Judgement, confirmed: Counter[str], other: Judgement) -> bool:
    """Whether ``other`` swaps a relation of the LLM's pattern that the KG has and matches
    (:func:`confirmed_relations`) for another: it lacks one of them and has a relation the LLM's pattern does
    not. The LLM keeps semantic authority over such a relation: word similarity alone (a judge's reading of
    "plays" as ``plays_position``) may drop a hop, where the KG's fit for the edits is measured per KG
    (:mod:`~simgrag.grounding.fit`), but not put another relation in its place."""
    if not confirmed:
        return False
    theirs = _relations(judge, other)
    return bool(confirmed - theirs) and bool(theirs - _relations(judge, base))


def _eligible(judgement: Judgement, base: Judgement) -> bool:
    """Whether an edited candidate may replace the LLM's pattern: it has fewer problems, or none and the
    focus word confirms its answer node. (Dropping a triple only because no phrase reads as its relation
    was tried, 2026-11-26: where the question's words are unknown to the embedder — a KG's own jargon, the
    hash embedder of the tests — it dropped needed hops, so an unworded triple alone changes nothing.)"""
    if len(judgement.problems) < len(base.problems):
        return True
    return not judgement.problems and judgement.focus == "confirmed"


def _drops_unnamed_answer(judge: PatternJudge, reading: QuestionReading, base: Judgement,
                          edited: Judgement) -> bool:
    """Whether ``edited``, with no focus word to confirm it, may still replace the LLM's pattern: it only
    drops unsupported triples, the LLM's answer node goes with them, and no word of the question names that
    node's type. "What has Harvey Fierstein played in?" written as ``[UNKNOWN movie 1, starred actors,
    Harvey Fierstein], [UNKNOWN movie 1, has genre, UNKNOWN genre 1]`` (a shot's extra hop): nothing says
    "genre", so the answer is the film. The new answer node's type must not be named either ("What else
    did the **writer** of X write?": the writer is a step; "what types are the **films** …": "types"
    reads no relation, but the films are a step too), and some phrase must read a relation the edit keeps
    ("played" reads ``starred_actors``): where the embedder reads none of the question's words, it cannot
    tell a needed hop from a copied one. (:func:`_eligible` keeps an unread triple otherwise:
    the words of a KG's own jargon may read no relation at all, and a hop to an answer the question names
    by its type, or asks for with "who", is kept.)"""
    if base.focus != "unknown" or not edited.sound or base.asked is None:
        return False
    kept, had = set(edited.candidate.triples), set(base.candidate.triples)
    dropped = had - kept
    if not (kept < had and dropped <= set(base.unsupported)):
        return False
    if not any(base.asked in (head, tail) for head, _, tail in dropped):
        return False
    kind = type_hint(base.asked)
    if kind is None or edited.pattern is None or reading.asks_who():
        return False  # "Who has shared the screen with X?": the co-star hop's actor is what "who" asks
    relations = {judge.retriever.nearest_relation(e.relation) for e in edited.pattern.edges if not e.unknown}
    if not relations & set(judge.lexicon.relation_phrases(judge.view(reading, edited.pattern).phrases)):
        return False  # the words read none of the relations kept: a KG's jargon, where the LLM knows better
    words = reading.clean_words()
    # nor may the new answer be a node the question names: "the **writer** of X" is a step, not the answer
    kinds = [k.lower() for k in (kind, type_hint(edited.asked or "")) if k]
    named = {i for m in reading.mentions if m.confident for i in range(m.start, m.end)}
    content = [i for i, w in enumerate(words) if w and w not in STOPWORDS and i not in named]
    return not judge.lexicon.type_words(words, content, kinds)


def best_candidate(judge: PatternJudge, reading: QuestionReading, originals: list[Judgement], *,
                   budget: int = EDIT_BUDGET, deadline_s: float = EDIT_DEADLINE_S,
                   alternatives: Sequence[Judgement] = (),
                   disabled: Container[str] = ()) -> tuple[Judgement, list[Judgement]]:
    """The chosen judgement among ``originals`` (the LLM's patterns) and their edits (:data:`EDIT_ROUNDS`
    rounds: the best few edits that still have a problem, fewer than those edited before, are edited again);
    all judgements considered, originals first. At most ``budget`` distinct edits are judged (the first
    round's first, in the order the edits offer them), and none after ``deadline_s`` seconds.
    ``alternatives`` (judged already: the analogies of :mod:`~simgrag.grounding.analogy`) compete like edits;
    ``disabled``: edit families not tried (a KG's fit). No candidate may swap a relation of the LLM's pattern
    that the KG has and matches for another (:func:`replaces_confirmed`)."""
    base = min(originals, key=lambda j: j.key)
    considered = [*originals, *alternatives]
    if base.sound:
        return base, considered
    deadline = time.perf_counter() + deadline_s
    limit = max(len(base.problems) - 1, 0)  # an edit needs fewer problems than the LLM's pattern to win
    first = judge.judge_all(reading, [e for j in originals for e in candidate_edits(judge, reading, j, disabled)],
                            max_problems=limit, deadline=deadline, budget=budget)
    # a displaced name is undone in the same round: the edit that made it may be right apart from that hop
    # ("List cities located in New Zealand." given [entity 1, located in, New Zealand] as its entity's triple)
    judged = _distinct(j.candidate for j in first)
    undone = [e for j in first for e in propose_one(UNDO_DISPLACED, judge, reading, j, disabled)
              if triple_set(e.triples) not in judged]
    first += judge.judge_all(reading, undone, max_problems=limit, deadline=deadline, budget=budget - len(judged))
    # edited again: unsound edits with fewer problems than the LLM's pattern, none left included ("the big cities of
    # Tunisia" written [Tunisia, located in, country 1] + [country 1, capital, city 1]: turned round, nothing close in
    # the KG; shortened next). Not those with as many other problems: on MetaQA's reworded questions such second
    # edits (a relation rebound, then bridged) beat the LLM's right pattern with one no question asks.
    # A third round likewise, from edits with fewer problems still than the best one edited in the second:
    # "Which money do the neighbours of the country containing Oran use?" written [country 1, official language,
    # language 1] — the currency hop, then Oran's hop, then the neighbours' hop, one per round.
    edited, bar = list(first), len(base.problems)
    for _ in range(EDIT_ROUNDS - 1):
        promising = sorted((j for j in edited if not j.sound and len(j.problems) < bar), key=lambda j: j.key)
        promising = promising[:SECOND_ROUND]
        left = budget - len(_distinct(j.candidate for j in edited))
        if not promising or left <= 0:
            break
        bar = min(len(j.problems) for j in promising)
        edited += judge.judge_all(reading, [e for j in promising for e in candidate_edits(judge, reading, j, disabled)],
                                  max_problems=limit, deadline=deadline, budget=left)
    considered += edited
    confirmed = confirmed_relations(base, judge, reading)
    eligible = [j for j in [*alternatives, *edited]
                if j.retrieval is not None and (_eligible(j, base) or _drops_unnamed_answer(judge, reading, base, j))
                and not replaces_confirmed(judge, base, confirmed, j)]
    return min([base, *eligible], key=lambda j: j.key), considered


def _distinct(candidates: Iterable[Candidate]) -> set[tuple[Triple3, ...]]:
    """The distinct triple sets among ``candidates`` (as :meth:`PatternJudge.judge_all` counts them)."""
    return {triple_set(c.triples) for c in candidates}


def _candidate(result: PatternResult, origin: str) -> Candidate:
    asked = result.pattern.asked_node()
    return Candidate(tuple(result.pattern.triples()), origin,
                     asked=result.pattern.nodes[asked].text if asked is not None else None)


@dataclass(frozen=True)
class GroundingReport:
    """What the grounding did for one question (for logs, results and benchmarks)."""

    llm_calls: int
    candidates: int
    judge_s: float
    chosen: Judgement


#: the stage's own options and their defaults, which ``pattern_options`` (the CLI's ``--pattern-option``) may set
#: beside :class:`~simgrag.pattern.generate.PatternGenerator`'s
STAGE_OPTIONS: Mapping[str, Any] = MappingProxyType({"shot_selection": "structure", "analogy": True})


class GroundedPatterns:
    """Question → pattern with the KG as judge (see module doc); ``generate`` returns a
    :class:`PatternResult` whose ``kg_repairs`` list the edits made and whose ``attempts`` count
    every LLM call. ``asks=False`` for claims (no answer node, no focus word).

    ``shot_selection``: ``"structure"`` chooses the prompt's dynamic shots by the question's structure (the
    relations its words name in the KG) as well as its words; ``"words"``: by words only, as the generator alone
    does. ``analogy``: also try the best-fitting examples' patterns with the question's entity put in
    (:mod:`~simgrag.grounding.analogy`), and skip the LLM when one is confirmed. ``search``: the retriever's
    search settings, which the judge searches under with its own step cap
    (:func:`~simgrag.grounding.judge.judge_settings`)."""

    def __init__(self, generator: PatternGenerator, retriever: SubgraphRetriever, *, asks: bool = True,
                 max_revisions: int = 1, on_report: Callable[[GroundingReport], None] | None = None,
                 disabled: Iterable[str] = (), search: RetrievalSettings | None = None,
                 shot_selection: Literal["structure", "words"] = "structure", analogy: bool = True) -> None:
        if shot_selection not in ("structure", "words"):
            raise ConfigError(f"shot_selection must be 'structure' or 'words', got {shot_selection!r}")
        self.generator = generator
        self.analogy = bool(analogy)
        #: the families switched off (a KG's fit, :mod:`~simgrag.grounding.fit`): edits by name,
        #: ``analogy``, ``revision``
        self.disabled = frozenset(disabled)
        examples = [e.triples for e in generator.prompt.examples.examples]
        self.judge = PatternJudge(retriever, judge_settings(search), asks=asks, examples=examples,
                                  example_questions=[e.question for e in generator.prompt.examples.examples])
        self.shots = (ShotRanker(self.judge, generator.prompt.examples.examples)
                      if shot_selection == "structure" and generator.prompt.n_dynamic_shots > 0 else None)
        self.max_revisions = 0 if REVISION in self.disabled else max(0, max_revisions)
        self.on_report = on_report
        self.last_report: GroundingReport | None = None

    def pattern(self, text: str) -> PatternResult:
        """The :class:`~simgrag.retrievers.base.PatternStage` method: :meth:`generate`."""
        return self.generate(text)

    def generate(self, question: str) -> PatternResult:
        """The chosen pattern for ``question`` (raises :class:`PatternError` only when the LLM produced
        no usable pattern at all). A sound analogy confirmed by the focus word, with no stray relation
        (:meth:`PatternJudge._unsupported`), is used without an LLM call."""
        t0 = time.perf_counter()
        reading = self.judge.read(question)
        same_wording = self._same_wording(reading)
        scores = self.shots.scores(question) if self.shots is not None else None
        if same_wording:  # the examples file holds this very wording: those examples come first
            scores = list(scores) if scores is not None else [0.0] * len(self.generator.prompt.examples.examples)
            for i in same_wording:
                scores[i] += SAME_WORDING_BONUS
        analogies = self._analogies(question, reading, scores, same_wording)
        # a sound example in the question's own wording first: the examples file answers it
        shortcut = min(analogies, key=lambda j: (not (j.sound and j.candidate.origin == "template"), j.key),
                       default=None)
        if (shortcut is not None and shortcut.sound and shortcut.focus == "confirmed"
                and (not shortcut.stray or shortcut.candidate.origin == "template") and shortcut.pattern is not None):
            judge_s = time.perf_counter() - t0
            own = PatternResult(pattern=shortcut.pattern, raw_text="", attempts=0, prompt_tokens=0,
                                completion_tokens=0, latency_s=judge_s, repaired=False)
            return self._result(question, [own], shortcut, analogies, judge_s)
        judge_s = time.perf_counter() - t0
        result = self.generator.generate(question, scores)
        results = [result]
        t0 = time.perf_counter()
        originals = self.judge.judge_all(reading, [self._own(result, "llm", reading)])
        best, considered = best_candidate(self.judge, reading, originals, alternatives=analogies,
                                          disabled=self.disabled)
        judge_s += time.perf_counter() - t0
        for _ in range(self.max_revisions):
            if best.sound:
                break
            revised = self._revise(question, result.raw_text, best, scores)
            if revised is None:
                break
            results.append(revised)
            t0 = time.perf_counter()
            originals += self.judge.judge_all(reading, [self._own(revised, "llm-revised", reading)])
            best, more = best_candidate(self.judge, reading, originals, alternatives=analogies,
                                        disabled=self.disabled)
            considered += more
            judge_s += time.perf_counter() - t0
        best, chose = self._choose(question, reading, best)
        return self._result(question, results, best, considered, judge_s, chose)

    def _choose(self, question: str, reading: QuestionReading, best: Judgement) -> tuple[Judgement, int]:
        """The LLM's pick between ``best`` and the readings the KG holds as closely (:mod:`.choice`), when
        that family is on; the calls it made."""
        if CHOICE in self.disabled or not self.judge.asks:
            return best, 0
        others = choice.rivals(self.judge, reading, best)
        picked, called = choice.choose(self.generator.llm, question, best, others)
        if picked is not best:
            picked = replace(picked, candidate=picked.candidate.tagged(CHOICE))
        return picked, int(called)

    def _own(self, result: PatternResult, origin: str, reading: QuestionReading) -> Candidate:
        """The LLM's pattern as a candidate, its names of the question's entities spelled as the KG does."""
        return anchors.snap_names(_candidate(result, origin), reading, self.judge)

    def _same_wording(self, reading: QuestionReading) -> list[int]:
        """The examples worded exactly as the question, its entity names left out."""
        covered = [False] * len(reading.words)
        for m in reading.mentions:
            if m.confident:
                covered[m.start:m.end] = [True] * m.words
        words = question_tokens(" ".join(w for w, c in zip(reading.words, covered, strict=True) if not c))
        return self.generator.prompt.worded_like(words)

    def _analogies(self, question: str, reading: QuestionReading, scores: Sequence[float] | None,
                   same_wording: Sequence[int] = ()) -> list[Judgement]:
        """The judged analogies of the best-ranked examples (none for claims, or with ``analogy`` off)."""
        if not (self.analogy and self.judge.asks) or ANALOGY in self.disabled:
            return []
        examples = self.generator.prompt.examples.examples
        order = self.generator.prompt.ranked(question, scores)
        judged = self.judge.judge_all(reading, analog_candidates(self.judge, reading, examples, order,
                                                                 same_wording=same_wording))
        return [self._without_stray_hops(reading, j) for j in judged]

    def _without_stray_hops(self, reading: QuestionReading, analogy: Judgement) -> Judgement:
        """An example's pattern may bring along hops the question never asked for, through relations its
        words did not choose (*stray*): the analogy without them, when that is sound and stray-free."""
        if not analogy.stray or analogy.problems or analogy.candidate.origin != "analogy":
            return analogy
        for pruned in self.judge.judge_all(reading, edits.prune_stray(analogy.candidate, analogy, self.judge)):
            if pruned.sound and not pruned.stray:
                return replace(pruned, candidate=replace(pruned.candidate, asked=pruned.asked))
        return analogy

    def _revise(self, question: str, previous: str, best: Judgement,
                scores: Sequence[float] | None) -> PatternResult | None:
        reason = best.describe()
        logger.info("pattern for %r revised by the LLM: %s", question, reason)
        try:
            return self.generator.revise(question, previous, reason, scores)
        except PatternError as exc:
            logger.info("the revision of %r failed: %s", question, str(exc).splitlines()[0])
            return None

    def _result(self, question: str, results: list[PatternResult], best: Judgement,
                considered: list[Judgement], judge_s: float, extra_calls: int = 0) -> PatternResult:
        source = results[-1] if best.candidate.origin == "llm-revised" else results[0]
        report = GroundingReport(sum(r.attempts for r in results) + extra_calls, len(considered), judge_s, best)
        self.last_report = report
        if self.on_report is not None:
            self.on_report(report)
        notes = list(best.candidate.edits)
        if best.candidate.origin == "analogy" and report.llm_calls == 0:
            notes[0] += " (no LLM call: the question and the KG confirm it)"
        elif best.candidate.origin == "template" and report.llm_calls == 0:
            notes[0] += " (no LLM call: the example has the question's own wording, and the KG confirms it)"
        if best.candidate.origin == "llm-revised":
            notes.insert(0, f"revised by the LLM after: {considered[0].describe()}")
        if best.problems:
            notes.append(f"unresolved: {best.describe()}")
        pattern = best.pattern if best.pattern is not None else source.pattern
        families = list(best.candidate.families)
        if best.candidate.origin in ("analogy", "template"):
            families.insert(0, ANALOGY)
        elif best.candidate.origin == "llm-revised":
            families.insert(0, REVISION)
        logger.debug("grounded pattern for %r: %s (%d candidates, %.3f s)", question, pattern.triples(),
                     len(considered), judge_s)
        return replace(source, pattern=pattern, attempts=report.llm_calls,
                       prompt_tokens=sum(r.prompt_tokens for r in results),
                       completion_tokens=sum(r.completion_tokens for r in results),
                       latency_s=sum(r.latency_s for r in results) + judge_s,
                       repaired=source.repaired or len(results) > 1, kg_repairs=tuple(notes),
                       unworded=len(best.unsupported), families=tuple(dict.fromkeys(families)))
