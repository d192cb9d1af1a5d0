"""Each KG's own labelled data, made at index time: few-shot examples and validation questions.

``simgrag examples bootstrap`` runs the whole engine on every candidate question (1–2 LLM calls each):
45–76 minutes on 2 cores for a 68-triple company KG. Learning makes the same kind of data within a time
budget (5 minutes by default) from a handful of LLM calls, with no engine run:

1. **kinds** — what each relation links (``manages``: person → person): from the KG's entity types when it
   has them, else several relations per LLM call, each shown with a few (head, tail) pairs
   (:meth:`~simgrag.bootstrap.kinds.RelationKinds.prepare_batched`, a worked example about no KG's domain);
   an unusable answer is ``entity``;
2. **samples** — subgraphs of the chosen shapes (1-hop, 2-hop chains and conjunctions by default; 3-hop
   chains and stars on request), relations taken in turn (:func:`~simgrag.bootstrap.sample.sample_subgraphs`),
   none that walks one relation twice (its questions read as one hop); a KG that stores each fact twice
   (:func:`~simgrag.kg.twins.twin_relations`) is sampled, typed and listed with one relation of each pair;
3. **the KG check**, without the LLM — the sample's pattern (the KG's relation names, ``UNKNOWN <kind> n``
   nodes: what its example stores) searched with the engine's own subgraph search must hold one of the
   sample's gold answers in its answer set (:attr:`~simgrag.match.retrieve.Retrieval.answer_set`); a sample
   that fails it (an ambiguous name, kinds that merge two ends) is dropped. It depends on the sample alone,
   so it runs before the LLM is asked about the sample;
4. **questions** — several samples per LLM call (:func:`~simgrag.bootstrap.prompts.question_batch_messages`),
   a sample with a middle node shown as one line whose middle is described through its other facts ("the
   department that Nikolai Kowalski works in | located in | [answer: building]":
   :func:`~simgrag.bootstrap.prompts.described_pattern`; asked line by line, the 1.5B model asks the first hop),
   each question respelt the KG's way (:func:`~simgrag.bootstrap.prompts.respell`) and dropped when it does
   not name its sample's named entities or names one of the others, the answer included
   (:func:`~simgrag.bootstrap.prompts.screen_question`), or when the engine's own KG judge does not read it as
   the sample's pattern (:class:`~simgrag.grounding.judge.PatternJudge`, no LLM: words for every
   triple, no relation worded that the pattern lacks, a focus word that does not ask for something else).
   A small model often asks one hop of a two-hop pattern ("Who is X's mentor?" for *the boss of the one X
   mentors*): as a shot such a question teaches the wrong pattern, as a validation question it carries the
   wrong gold answer. The judge's lexicon is the KG's relation names (and aliases), so the questions kept
   lean to wordings those names explain — read a fit on them with that in mind;
5. **the split**, sample by sample (a sample's questions stay on one side: no validation question is a
   paraphrase of a shot) — a sample becomes a **shot** while there is room and it brings a shape, a relation
   or a kind of middle node (:func:`middle_kinds`) the shots lack, else **validation** (all its kept
   questions) until ``target_validation``, else a shot while there is room. **Forward 3-hop chains** (the
   default ``LearnSettings(shot_shapes=("3hop_forward",))``): chains whose every hop runs from a triple's head to
   its tail (:data:`~simgrag.bootstrap.sample.SHAPES`: "X's father's father's profession", the possessive chain
   people ask), sampled for shots only, on top of the others (at most their share), their questions *composed*
   from the pattern by rule (:mod:`simgrag.bootstrap.compose`: "What is the profession of the father of the father
   of X?") with no LLM call (the 1.5B model's own 3-hop questions mostly fail the judge), drawn from their own
   random stream so the other samples stay as they are, and placed among the static shots. A KG without three
   such hops in a row has none (WorldCup2014: player → club → country; MetaQA: movie → person), so its shots are
   what they were. Genealogy learned: 92.5 / 82.5 / 42.5 → 92.5 / 87.5 / 67.5 (its own patterns 85.0 / 60.0 /
   17.5 → 90.0 / 80.0 / 57.5; BENCHMARKS.md). *Opt-in* (``shot_shapes=("3hop",)``): 3-hop chains walked either
   way, composed likewise ("the mother of the person whose place of birth is the place of death of X"), after
   every other shot (chosen per question, never static: among the static ones they had genealogy's 1-hop
   questions written as chains);
   ``composed_shots`` composes every shot's question so, with no LLM call for any shot (WorldCup2014's real
   questions lost 10 points on 1-hop: the stiff wording lacks people's verbs). ``validation_only`` (a KG that
   comes with examples of its own) makes no shots: every sample's kept questions are validation questions.

Learning stops once the shots are full and validation holds ``target_validation`` questions, when the
samples run out, or before an LLM call that would pass the time budget or the call bound — the report says
which (:attr:`LearnReport.stopped`). It writes into ``out_dir``: ``examples.yaml`` (the shots, in the
format :func:`~simgrag.pattern.examples.load_examples` reads, shapes interleaved so the prompt's static
shots cover them), ``validation.jsonl`` (``{"question", "answers", "group": shape, "sample"}`` per line, as
:func:`~simgrag.eval.runner.load_qa_file` reads) and its progress log (:mod:`simgrag.bootstrap.files`): a
run interrupted or stopped by its bounds goes on where it stopped and asks the LLM nothing twice; a run
with other settings, another KG or another LLM starts over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from simgrag.bootstrap.compose import composed_question, verb_like
from simgrag.bootstrap.examples import MAX_LISTED_RELATIONS, relation_instructions
from simgrag.bootstrap.files import ProgressLog, examples_yaml, progress_path
from simgrag.bootstrap.kinds import RelationKinds
from simgrag.bootstrap.prompts import (
    AskedPattern,
    described_pattern,
    question_batch_messages,
    read_question_batch,
    respell,
    screen_question,
)
from simgrag.bootstrap.sample import FORWARD_CHAIN, SHAPES, Sample, parse_shapes, sample_subgraphs
from simgrag.errors import ConfigError, SimGRAGError
from simgrag.fileio import write_bytes_atomic
from simgrag.grounding.judge import Candidate, PatternJudge
from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.store import KGStore
from simgrag.kg.twins import twin_relations
from simgrag.llm.base import LLM
from simgrag.llm.counting import CountingLLM
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import type_hint
from simgrag.progress import progress_on

__all__ = [
    "DEFAULT_SHAPES",
    "EXAMPLES_FILE",
    "FIT_QUESTION_SHARE",
    "MIN_FIT_QUESTIONS",
    "VALIDATION_FILE",
    "LearnReport",
    "LearnSettings",
    "default_budget",
    "expected_llm_calls",
    "learn_examples",
    "middle_kinds",
    "peak_rss_mb",
]

logger = logging.getLogger(__name__)

EXAMPLES_FILE = "examples.yaml"
VALIDATION_FILE = "validation.jsonl"
#: not 3-hop chains: with them among the defaults, genealogy learned at index time answered 72.5 / 57.5 / 27 % of
#: its 1 / 2 / 3-hop questions against 85.0 / 67.5 / 20.0 % without (fewer shots of each shape in the same budget,
#: and the 1.5B model's 3-hop questions mostly fail the judge); LearnSettings(shapes=…) adds them
DEFAULT_SHAPES = ("1hop", "2hop", "conjunction")
#: shapes sampled for shots only, on top of the others, their questions composed by rule (no LLM call;
#: :mod:`simgrag.bootstrap.compose`): forward 3-hop chains (module docstring, step 5) — ``"3hop"`` (walked either
#: way) lifted genealogy's 2/3-hop questions and cost WorldCup2014 4 points on 1-hop (BENCHMARKS.md, "Composed 3-hop
#: shots"); a KG with no forward chain of three hops gets none
DEFAULT_SHOT_SHAPES: tuple[str, ...] = (FORWARD_CHAIN,)
#: shot-only shapes whose shots may be static (the others come after every other shot: chosen per question only)
STATIC_SHOT_SHAPES = (FORWARD_CHAIN,)
#: added to the seed for the shot-only shapes' samples (their own random stream)
SHOT_SHAPES_SEED = 7919
#: the share of asked samples expected to keep a question (for the expected LLM calls)
KEEP_RATE = 0.7
#: the default time budget grows with the KG's relations: a sample covers a few relations, so a KG of many
#: needs more samples for its shots to cover them. 5 minutes up to SMALL_KG_RELATIONS relations, then linear to
#: 30 minutes at LARGE_KG_RELATIONS and beyond (the bounds learning is held to: 5 min for ≤ 20 relations, 30 for 500)
SMALL_KG_RELATIONS, SMALL_KG_BUDGET_S = 20, 300.0
LARGE_KG_RELATIONS, LARGE_KG_BUDGET_S = 500, 1800.0
#: the fit after learning runs on at least this many validation questions, or not at all
MIN_FIT_QUESTIONS = 8
#: a validation question costs the fit about this share of one learning question call: its pattern call, shared by
#: every configuration through a call cache, a revision now and then, and the answer-mode fit's answer call
#: (measured on WorldCup2014 with the embedded model on 2 cores, every call new: 24 questions fitted in 228 s beside
#: learning calls of 17.5 s each: 0.54). Genealogy's fit on 20 questions took 0.88 of a call each; 0.9 with a 0.45
#: reserve left WorldCup2014 4 shots of its own in the budget, and it lost 9 points on 1-hop (BENCHMARKS.md)
FIT_QUESTION_SHARE = 0.55
#: ... and the time kept for it is at most this share of the budget (this one when more validation questions were
#: asked for: a fit on all of them is what they are for)
FIT_RESERVE_SHARE, MORE_FIT_RESERVE_SHARE = 0.3, 0.7
#: samples drawn per sample wanted: the KG check and the screen drop some
DRAW_FACTOR = 3
#: added to the seed for the samples of validation questions asked beyond ``target_validation``
#: (``LearnSettings.more_validation``): drawn in rounds of this many per shape, round ``r`` from seed + offset + r,
#: so that asking for more extends the list of a run that asked for fewer
MORE_VALIDATION_SEED, MORE_VALIDATION_ROUND = 104_729, 8
#: rounds tried before a KG counts as having no more distinct samples to give
MORE_VALIDATION_ROUNDS = 64
#: the KG check's search (the engine's default search, three subgraphs)
CHECK = RetrievalSettings(k=3)
#: output tokens allowed per question asked, and per call
TOKENS_PER_QUESTION = 40
TOKENS_PER_CALL = 40


def default_budget(relations: int, more_validation: int = 0) -> float:
    """The learning's default time budget in seconds for a KG of ``relations`` relations (see
    :data:`SMALL_KG_RELATIONS`), grown in proportion for ``more_validation`` questions beyond the default ones
    (each costs about what a default shot or question and its share of the fit cost)."""
    share = (relations - SMALL_KG_RELATIONS) / (LARGE_KG_RELATIONS - SMALL_KG_RELATIONS)
    base = SMALL_KG_BUDGET_S + min(max(share, 0.0), 1.0) * (LARGE_KG_BUDGET_S - SMALL_KG_BUDGET_S)
    default = LearnSettings()
    return base * (1.0 + max(0, more_validation) / (default.shots + default.target_validation))


@dataclass(frozen=True)
class LearnSettings:
    """What learning makes and how long it may take (a progress log is resumed only with the same settings,
    its bounds aside).

    Bounds: ``budget_s`` seconds of wall time, ``max_llm_calls`` calls (``None``: no bound) — checked before
    each LLM call (one that would pass the budget at the run's mean call time is not made). What is made:
    up to ``shots`` examples and ``target_validation`` validation questions, from samples of ``shapes``
    (see :data:`~simgrag.bootstrap.sample.SHAPES`) with at most ``max_answers`` gold answers, none touching
    an entity of ``exclude``; ``samples_per_call`` samples and ``questions_per_sample`` questions each per
    question call, ``kinds_per_call`` groups of names (relation ends holding the same things) per kinds call;
    ``seed`` decides the samples. ``shot_shapes``: more shapes sampled for shots only, on top of ``shots`` (at
    most their share of them), with composed questions and no LLM call (:data:`DEFAULT_SHOT_SHAPES`);
    ``composed_shots``: every shot's question composed from its pattern by rule
    (:func:`~simgrag.bootstrap.compose.composed_question`: each triple said, the way the KG runs it) with no LLM
    call, not the LLM's question for it (off: the module docstring, step 5).

    ``more_validation``: validation questions wanted beyond ``target_validation`` — for a fit that can tell smaller
    gains from chance. Once the shots are full they come from the samples a run without them would not have asked,
    then from samples of their own random stream (:data:`MORE_VALIDATION_SEED`; never a shot, none with a shot's
    triples), so the shots and the first ``target_validation`` questions stay those of a run without them and a
    progress log is resumed whatever it is (a bound, like the budget).

    ``fit_questions``: the validation questions a fit after learning wants time for (0: none). Once the
    validation holds :data:`MIN_FIT_QUESTIONS` questions, learning stops writing questions that much time
    early (:meth:`fit_reserve_s`; at most :data:`FIT_RESERVE_SHARE` of the budget), so that the same budget
    also fits the pattern stage: an index whose learning ran out of time before its fit runs the unfitted
    stage, which on WorldCup2014 cost 26 points on conjunctions against the LLM's own patterns.

    ``validation_only``: make no shots — every kept question is a validation question, up to ``target_validation`` +
    ``more_validation`` (no shot-only shapes are sampled). For a KG that comes with examples of its own (a file the
    user wrote): its pattern stage is fitted on questions its examples never saw."""

    budget_s: float = 300.0
    max_llm_calls: int | None = None
    shapes: tuple[str, ...] = DEFAULT_SHAPES
    shot_shapes: tuple[str, ...] = DEFAULT_SHOT_SHAPES
    composed_shots: bool = False
    samples_per_call: int = 4
    questions_per_sample: int = 2
    target_validation: int = 24
    more_validation: int = 0
    shots: int = 12
    seed: int = 0
    max_answers: int = 10
    kinds_per_call: int = 6
    exclude: frozenset[str] = frozenset()
    fit_questions: int = 0
    validation_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", parse_shapes(self.shapes))
        wanted = parse_shapes(self.shot_shapes) if self.shot_shapes and not self.validation_only else ()
        object.__setattr__(self, "shot_shapes", tuple(s for s in wanted if s not in self.shapes))
        object.__setattr__(self, "exclude", frozenset(self.exclude))
        if not self.budget_s > 0:
            raise ConfigError(f"the learning budget must be a positive number of seconds; got {self.budget_s}")
        if self.max_llm_calls is not None and self.max_llm_calls < 0:
            raise ConfigError(f"max_llm_calls must be at least 0; got {self.max_llm_calls}")
        counts = {"samples_per_call": self.samples_per_call, "questions_per_sample": self.questions_per_sample,
                  "shots": self.shots, "max_answers": self.max_answers, "kinds_per_call": self.kinds_per_call}
        low = {k: v for k, v in counts.items() if v < 1}
        negative = {k: v for k, v in (("target_validation", self.target_validation),
                                      ("more_validation", self.more_validation)) if v < 0}
        if low or negative:
            raise ConfigError(f"learning settings must be at least 1 (target_validation and more_validation at "
                              f"least 0); got {low or negative}")

    def logged(self) -> dict[str, Any]:
        """The settings that decide what is made, as the progress log records them (not the bounds; the
        excluded names as a count and digest)."""
        digest = hashlib.sha256("\n".join(sorted(self.exclude)).encode()).hexdigest()[:16]
        kept = {k: v for k, v in asdict(self).items()
                if k not in ("budget_s", "max_llm_calls", "exclude", "fit_questions", "more_validation")}
        return {**kept, "shapes": list(self.shapes), "shot_shapes": list(self.shot_shapes),
                "exclude": f"{len(self.exclude)} names, sha256 {digest}" if self.exclude else None}

    def wanted_samples(self) -> int:
        """Samples that must keep a question to fill the shots and the first ``target_validation`` questions."""
        return self.wanted_shots + math.ceil(self.target_validation / self.questions_per_sample)

    @property
    def wanted_shots(self) -> int:
        """The shots to make: ``shots``, none where ``validation_only``."""
        return 0 if self.validation_only else self.shots

    @property
    def validation_questions(self) -> int:
        """All the validation questions wanted: ``target_validation`` + ``more_validation``."""
        return self.target_validation + self.more_validation

    def full(self, shots: int, validation: int) -> bool:
        return shots >= self.wanted_shots and validation >= self.validation_questions

    def fit_reserve_s(self, seconds_per_call: float, validation: int) -> float:
        """Seconds of the budget kept for the fit after learning, given the mean question call so far and
        the validation questions made (none before the fit could run on them: :data:`MIN_FIT_QUESTIONS`)."""
        if self.fit_questions <= 0 or validation < MIN_FIT_QUESTIONS:
            return 0.0
        wanted = min(self.fit_questions, validation) * FIT_QUESTION_SHARE * seconds_per_call
        share = MORE_FIT_RESERVE_SHARE if self.more_validation else FIT_RESERVE_SHARE
        return min(share * self.budget_s, wanted)


@dataclass(frozen=True)
class LearnReport:
    """What a run made and what it cost. ``stopped``: why it ended before its targets (``"budget"``,
    ``"llm calls"``, ``"samples"``: the KG gave no more) or ``None`` (targets met); ``rejected``: dropped
    samples and questions by reason; ``llm_calls`` and ``seconds`` are this run's; ``seconds_per_call``: the
    mean wall time of the question calls its progress log records (0 without one)."""

    out_dir: Path
    examples_file: Path | None
    validation_file: Path | None
    progress: Path
    samples: int
    samples_asked: int
    questions: int
    kept: int
    shots: int
    validation: int
    llm_calls: int
    seconds: float
    peak_rss_mb: float
    stopped: str | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    seconds_per_call: float = 0.0

    @property
    def complete(self) -> bool:
        return self.stopped is None

    def to_dict(self) -> dict[str, Any]:
        paths = {k: None if v is None else str(v) for k, v in (("out_dir", self.out_dir), ("examples_file",
                 self.examples_file), ("validation_file", self.validation_file), ("progress", self.progress))}
        return {**asdict(self), **paths, "complete": self.complete}

    def summary(self, budget_s: float | None = None) -> str:
        """One line for the command line and logs."""
        why = {"budget": f"stopped at the time budget{f' ({budget_s:.0f} s)' if budget_s else ''}",
               "llm calls": "stopped at the LLM-call bound",
               "samples": "the KG gave no more samples"}.get(self.stopped or "", "")
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items(), key=lambda kv: -kv[1]))
        return (f"Learnt {self.shots} examples and {self.validation} validation questions from {self.samples_asked} "
                f"samples ({self.kept} of {self.questions} questions kept"
                + (f"; dropped: {rejected}" if rejected else "") + f"); {self.llm_calls} LLM calls in "
                f"{self.seconds:.0f} s, peak RSS {self.peak_rss_mb:.0f} MB" + (f" — {why}" if why else ""))


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def expected_llm_calls(index: IndexDir, settings: LearnSettings) -> int:
    """The LLM calls a fresh run is expected to make on ``index`` (kinds, then questions)."""
    store = index.store
    relations = 0 if store.types is not None else len([r for r in store.relations
                                                        if r not in twin_relations(store)])
    if relations > MAX_LISTED_RELATIONS:  # typed as the samples need them: at most a few per sample
        relations = min(relations, 2 * settings.wanted_samples())
    kinds = math.ceil(relations / settings.kinds_per_call)
    wanted = settings.wanted_samples() + math.ceil(settings.more_validation / settings.questions_per_sample)
    asked = math.ceil(wanted / KEEP_RATE / settings.samples_per_call)
    calls = kinds + asked
    return calls if settings.max_llm_calls is None else min(calls, settings.max_llm_calls)


@dataclass(frozen=True)
class _Shot:
    shape: str
    question: str
    triples: tuple[tuple[str, str, str], ...]
    note: str


@dataclass
class _Split:
    """The shots and validation questions so far, and what the shots cover."""

    shots: list[_Shot] = field(default_factory=list)
    validation: list[dict[str, Any]] = field(default_factory=list)
    shapes: set[str] = field(default_factory=set)
    relations: set[str] = field(default_factory=set)
    middles: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def role(self, shape: str, relations: Sequence[str], settings: LearnSettings,
             middles: Sequence[str] = (), *, more: bool = False) -> str | None:
        """Where a sample with kept questions goes (module docstring, step 5); ``None``: both are full. A sample
        brings something new with a shape, a relation, or a kind of *middle* node (an unknown node that is not
        the answer) that the shots lack: "What country does X play in?" walks X's team, where the shots so far
        went through people only — the shot that teaches a chain through that kind of node. ``more``: a sample
        drawn for ``more_validation`` only (never a shot). The questions beyond ``target_validation`` are taken
        only once the shots are full, so the shots are those of a run without them."""
        wanted = settings.validation_questions
        if more or settings.validation_only:
            return "validation" if len(self.validation) < wanted else None
        room = self.regular(settings) < settings.shots
        if room and self.brings(shape, relations, middles):
            return "shot"
        if len(self.validation) < settings.target_validation:
            return "validation"
        if room:
            return "shot"
        return "validation" if len(self.validation) < wanted else None

    def regular(self, settings: LearnSettings) -> int:
        """How many shots are of the sampled shapes (the shot-only shapes' shots come on top of ``settings.shots``)."""
        return sum(shot.shape not in settings.shot_shapes for shot in self.shots)

    def brings(self, shape: str, relations: Sequence[str], middles: Sequence[str] = ()) -> bool:
        """Whether a sample brings a shape, a relation or a kind of middle node the shots lack."""
        return (shape not in self.shapes or not set(relations) <= self.relations
                or not set(middles) <= self.middles)

    def add(self, row: Mapping[str, Any]) -> None:
        kept = [q["question"] for q in row["questions"] if q.get("kept")]
        if not kept or row.get("role") is None:
            return
        self.seen.update(q.lower() for q in kept)
        sample = row["sample"]
        if row["role"] == "shot":
            triples = tuple((str(h), str(r), str(t)) for h, r, t in row["triples"])
            question = str(row.get("shot_question") or kept[0])
            self.shots.append(_Shot(row["shape"], question, triples, _note(row["shape"], sample)))
            self.shapes.add(row["shape"])
            self.relations.update(e[1] for e in sample["edges"])
            self.middles.update(row.get("middles", ()))
        else:
            self.validation += [{"question": q, "answers": list(sample["answers"]), "group": row["shape"],
                                 "sample": int(row["index"])} for q in kept]

    def ordered(self, last: Collection[str] = ()) -> list[_Shot]:
        """The shots with their shapes interleaved (the first of each shape first): the static shots cover them.
        The shapes in ``last`` (shot-only ones but the forward chains) come after all the others: chosen per
        question, never static — a 3-hop chain walked either way among the static shots had genealogy's 1-hop
        questions written as chains (85.0 → 75.0)."""
        rank: dict[str, int] = {}
        keyed = []
        for shot in self.shots:
            keyed.append(((shot.shape in last, rank.get(shot.shape, 0), SHAPES.index(shot.shape)), shot))
            rank[shot.shape] = rank.get(shot.shape, 0) + 1
        return [shot for _, shot in sorted(keyed, key=lambda pair: pair[0])]


def middle_kinds(sample: Sample, triples: Sequence[Sequence[str]]) -> list[str]:
    """The kinds of ``sample``'s middle nodes — unknown, not the answer — as its pattern ``triples`` (aligned
    with its edges) name them: ``UNKNOWN team 1`` → ``team``."""
    kinds: dict[int, str] = {}
    for edge, (head, _, tail) in zip(sample.edges, triples, strict=True):
        for slot, label in ((edge.head, head), (edge.tail, tail)):
            kind = type_hint(str(label))
            if slot != sample.asked and not sample.named[slot] and slot not in kinds and kind is not None:
                kinds[slot] = kind
    return sorted(set(kinds.values()))


def _possessive(sample: Sample) -> bool:
    """Whether every relation of ``sample`` reads as a noun ("father", "place of birth"): a forward chain of them
    composes as a chain of possessives ("the profession of the father of the father of X"); one of verbs ("works
    in", "funded by") nests clauses no reader parses ("the location that the organization that the project that X
    contributes to funded by located in"), so it is no shot."""
    return not any(verb_like(relation_text(e.relation)) for e in sample.edges)


def _one_walk(sample: Sample) -> bool:
    """Whether no relation is walked twice by ``sample``."""
    return len({e.relation for e in sample.edges}) == len(sample.edges)


def _more_samples(store: KGStore, settings: LearnSettings, drawn: Sequence[Sample],
                  skip: Collection[str]) -> list[Sample]:
    """The samples for ``settings.more_validation`` (:data:`MORE_VALIDATION_SEED`): rounds of
    :data:`MORE_VALIDATION_ROUND` per shape until :data:`DRAW_FACTOR` times the samples they need are found, none
    with the triples of a sample in ``drawn`` (a shot among them) or of an earlier one; asking for more extends the
    list asked for fewer."""
    if settings.more_validation <= 0:
        return []
    wanted = DRAW_FACTOR * math.ceil(settings.more_validation / settings.questions_per_sample)
    seen = {s.triple_ids for s in drawn}
    found: list[Sample] = []
    for round_ in range(MORE_VALIDATION_ROUNDS):
        if len(found) >= wanted:
            break
        for sample in sample_subgraphs(store, settings.shapes, MORE_VALIDATION_ROUND,
                                       seed=settings.seed + MORE_VALIDATION_SEED + round_,
                                       max_answers=settings.max_answers, exclude=settings.exclude,
                                       skip_relations=skip):
            if sample.triple_ids not in seen and _one_walk(sample):
                seen.add(sample.triple_ids)
                found.append(sample)
    return found[:wanted]


def _interleaved(drawn: Sequence[Sample], extra: Sequence[Sample], every: int, take: int) -> list[Sample]:
    """``drawn`` with ``take`` samples of ``extra`` after each ``every`` of them (the rest of either at the end)."""
    out: list[Sample] = []
    rest = list(extra)
    for i, sample in enumerate(drawn, start=1):
        out.append(sample)
        if i % every == 0:
            out += rest[:take]
            rest = rest[take:]
    return out + rest


def _note(shape: str, sample: Mapping[str, Any]) -> str:
    answers = list(sample["answers"])
    answer = sample["entities"][sample["asked"]]
    extra = len(answers) - 1
    return " ".join(f"{shape}; answer: {answer}{f' (+{extra} more)' if extra else ''}".split())


class _Learn:
    """One learning run (module docstring): the samples, the kinds, the split, the bounds."""

    def __init__(self, index: IndexDir, llm: CountingLLM, settings: LearnSettings, log: ProgressLog,
                 out_dir: Path, t0: float) -> None:
        self.index, self.llm, self.settings, self.log, self.out_dir, self.t0 = index, llm, settings, log, out_dir, t0
        store = index.store
        self.twins = twin_relations(store)
        self.kinds = RelationKinds(store, llm, log, seed=settings.seed)
        relations = [r for r in store.relations if r not in self.twins]
        self.listed = relations if len(relations) <= MAX_LISTED_RELATIONS else []
        per_shape = math.ceil(DRAW_FACTOR * settings.wanted_samples() / len(settings.shapes))
        drawn = sample_subgraphs(store, settings.shapes, per_shape, seed=settings.seed,
                                 max_answers=settings.max_answers, exclude=settings.exclude, skip_relations=self.twins)
        if settings.shot_shapes:  # their own random stream: the other samples stay those learning draws without them
            extra = sample_subgraphs(store, settings.shot_shapes, per_shape, seed=settings.seed + SHOT_SHAPES_SEED,
                                     max_answers=settings.max_answers, exclude=settings.exclude,
                                     skip_relations=self.twins)
            drawn = _interleaved(drawn, extra, len(settings.shapes), len(settings.shot_shapes))
        # a relation walked twice ("the departments in the building of Security's department") reads as one hop
        # to a small model and to the judge alike: such samples make wrong questions, not examples
        self.samples = [s for s in drawn if _one_walk(s) and (s.shape != FORWARD_CHAIN or _possessive(s))]
        #: the samples from here on are drawn for ``more_validation`` only
        self.first_more = len(self.samples)
        self.samples += _more_samples(store, settings, drawn, self.twins)
        if not self.samples:
            raise ConfigError(f"No subgraph of the shapes {', '.join(settings.shapes)} could be sampled from this KG "
                              f"with at most {settings.max_answers} answers")
        self.subgraphs = SubgraphRetriever(index)
        self._judge: PatternJudge | None = None
        self.split = _Split()
        self.done: set[int] = set()
        self.stopped: str | None = None
        self.rejected: dict[str, int] = {}
        for record in log.of_kind("batch"):
            self._replay(record)

    # -- bounds ------------------------------------------------------------------------------------
    def may_call(self) -> bool:
        """Whether one more LLM call stays within the bounds (at the run's mean call time so far)."""
        if self.settings.max_llm_calls is not None and self.llm.calls >= self.settings.max_llm_calls:
            self.stopped = "llm calls"
            return False
        per_call = self.llm.seconds / self.llm.calls if self.llm.calls else 0.0
        reserve = self.settings.fit_reserve_s(per_call, len(self.split.validation))
        if time.perf_counter() - self.t0 + per_call > self.settings.budget_s - reserve:
            self.stopped = "budget"
            return False
        return True

    def full(self) -> bool:
        return self.settings.full(self.split.regular(self.settings), len(self.split.validation))

    def _reject(self, why: str, count: int = 1) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + count

    # -- the run -----------------------------------------------------------------------------------
    def run(self, bar: Any) -> None:
        per_call = self.settings.kinds_per_call
        if self.listed and not self.kinds.prepare_batched(self.listed, per_call=per_call, allow=self.may_call):
            return
        batch: list[int] = []
        for i, sample in enumerate(self.samples):
            if self.full():
                break
            if i in self.done:
                continue
            if not self.kinds.prepare_batched([e.relation for e in sample.edges], per_call=per_call,
                                              allow=self.may_call):
                return
            shot_only = sample.shape in self.settings.shot_shapes
            composes = ((shot_only or self.settings.composed_shots) and i < self.first_more
                        and self.wants_shot(sample))
            if shot_only and not composes:
                continue
            why = self.check(sample)
            if why is not None:
                logger.debug("sample %d dropped by the KG check: %s", i, why)
                self._reject("failed the KG check")
                continue
            if composes and self.compose(i):
                self.show(bar)
                continue
            if shot_only:
                continue
            batch.append(i)
            if len(batch) == self.settings.samples_per_call:
                if not self.ask(batch, bar):
                    return
                batch = []
        if batch and not self.full() and not self.ask(batch, bar):
            return
        if not self.full():
            self.stopped = "samples"

    def wants_shot(self, sample: Sample) -> bool:
        """Whether ``sample`` would be a shot now (:meth:`_Split.role`; a shot-only shape: only while it brings
        a shape, a relation or a kind of middle node the shots lack)."""
        relations = [e.relation for e in sample.edges]
        middles = middle_kinds(sample, self.triples(sample))
        if sample.shape in self.settings.shot_shapes:  # its share of the shots, on top of them
            share = self.settings.shots // (len(self.settings.shapes) + len(self.settings.shot_shapes))
            of_shape = sum(shot.shape == sample.shape for shot in self.split.shots)
            return of_shape < max(1, share) and self.split.brings(sample.shape, relations, middles)
        return self.split.role(sample.shape, relations, self.settings, middles) == "shot"

    def compose(self, i: int) -> bool:
        """Sample ``i`` made a shot with its composed question, no LLM call (logged as a batch); ``False``: its
        pattern composes no question."""
        sample = self.samples[i]
        triples = self.triples(sample)
        question = composed_question(triples)
        if question is None:
            self._reject("no composed question")
            return False
        row = {"index": i, "shape": sample.shape, "sample": sample.to_dict(), "triples": triples,
               "questions": [{"question": question, "kept": True, "composed": True}], "role": "shot",
               "middles": middle_kinds(sample, triples), "shot_question": question}
        self.split.add(row)
        record = {"kind": "batch", "samples": [row], "llm_calls": 0, "seconds": 0.0}
        self.log.append(record)
        self.done.add(i)
        self.write()
        return True

    def triples(self, sample: Sample) -> list[list[str]]:
        return sample.pattern_triples(self.kinds)

    def check(self, sample: Sample) -> str | None:
        """Why the sample's own pattern does not find one of its answers in the KG (``None``: it does)."""
        try:
            found = self.subgraphs.retrieve(self.triples(sample), CHECK)
        except SimGRAGError as exc:
            return f"no match: {str(exc).splitlines()[0][:200]}"
        names = set(found.answer_set.names()) if found.answer_set is not None else set()
        return None if names & set(sample.answers) else f"its pattern finds {sorted(names)[:3] or 'nothing'}"

    @property
    def judge(self) -> PatternJudge:
        """The engine's KG judge, its lexicon's kinds those of the samples' patterns (built on first use: after the
        relation kinds are known). With them "What club does PSV Eindhoven belong to?" written for *the people who
        play in PSV Eindhoven* asks for a club where its answer is a person: its focus word is contradicted, and the
        question, whose gold answers are people, is dropped rather than kept as a shot or a validation question."""
        if self._judge is None:
            self._judge = PatternJudge(self.subgraphs, examples=[self.triples(s) for s in self.samples])
        return self._judge

    def unread(self, question: str, triples: Sequence[Sequence[str]]) -> str | None:
        """Why the engine's KG judge does not read ``question`` as the pattern ``triples`` (``None``: it does)."""
        try:
            judged = self.judge.judge(self.judge.read(question), Candidate(tuple((h, r, t) for h, r, t in triples)))
        except SimGRAGError as exc:
            return f"the judge failed: {str(exc).splitlines()[0][:200]}"
        if judged.unsupported:
            return "not read as its pattern: no words for " + ", ".join(repr(t[1]) for t in judged.unsupported)
        if judged.uncovered:
            return "not read as its pattern: it words a relation the pattern lacks"
        if judged.focus == "contradicted":
            return "not read as its pattern: its focus word asks for something else"
        return None

    def ask(self, batch: list[int], bar: Any) -> bool:
        """One LLM call for the questions of ``batch``'s samples, screened and split; ``False``: not allowed."""
        if not self.may_call():
            return False
        t, calls = time.perf_counter(), self.llm.calls
        n = self.settings.questions_per_sample
        items = [AskedPattern(described_pattern(self.triples(self.samples[i])), len(self.samples[i].answers),
                              tuple(self.samples[i].named_entities)) for i in batch]
        response = self.llm.complete(question_batch_messages(items, n), temperature=0.0,
                                     max_tokens=TOKENS_PER_QUESTION * n * len(batch) + TOKENS_PER_CALL)
        read = read_question_batch(response.text, len(batch), n)
        rows = []
        for k, i in enumerate(batch, start=1):
            row = self._row(i, read.get(k, []))
            self.split.add(row)
            rows.append(row)
        record: dict[str, Any] = {"kind": "batch", "samples": rows, "llm_calls": self.llm.calls - calls,
                                  "seconds": round(time.perf_counter() - t, 3)}
        if not read:
            record["unreadable"] = response.text[:500]
        self.log.append(record)
        self.done.update(batch)
        self._tally(record)
        self.write()
        self.show(bar)
        return True

    def show(self, bar: Any) -> None:
        """The progress bar brought up to the shots and validation questions made so far."""
        bar.update(max(0, min(len(self.split.shots) + len(self.split.validation), bar.total) - bar.n))
        bar.set_postfix(shots=len(self.split.shots), validation=len(self.split.validation), llm_calls=self.llm.calls)

    def _row(self, i: int, written: Sequence[str]) -> dict[str, Any]:
        """The log row of sample ``i``: its questions screened, and its role in the split."""
        sample = self.samples[i]
        questions = []
        for text in written:
            question = respell(text, sample.named_entities)
            row: dict[str, Any] = {"question": question, "kept": False}
            if question != text:
                row["written"] = text
            why = screen_question(question, sample)
            if why is None and question.lower() in self.split.seen:
                why = "a repeat"
            if why is None:
                why = self.unread(question, self.triples(sample))
            row.update({"kept": True} if why is None else {"why": why})
            questions.append(row)
        relations = [e.relation for e in sample.edges]
        kept = any(q["kept"] for q in questions)
        triples = self.triples(sample)
        middles = middle_kinds(sample, triples)
        more = i >= self.first_more
        role = self.split.role(sample.shape, relations, self.settings, middles, more=more) if kept else None
        row = {"index": i, "shape": sample.shape, "sample": sample.to_dict(), "triples": triples,
               "questions": questions, "role": role, "middles": middles}
        composed = composed_question(triples) if role == "shot" and self.settings.composed_shots else None
        if composed is not None:
            row["shot_question"] = composed
        return row

    def _replay(self, record: Mapping[str, Any]) -> None:
        for row in record.get("samples", []):
            self.done.add(int(row["index"]))
            self.split.add(row)
        self._tally(record)

    def _tally(self, record: Mapping[str, Any]) -> None:
        if "unreadable" in record:
            self._reject("unreadable reply")
        for row in record["samples"]:
            for question in row["questions"]:
                if not question["kept"]:
                    why = str(question.get("why"))
                    keys = ("does not name", "names", "a repeat", "not read as its pattern")
                    self._reject(next((k for k in keys if why.startswith(k)), why))

    # -- files -------------------------------------------------------------------------------------
    def relations(self) -> list[str]:
        used = {t[1] for shot in self.split.shots for t in shot.triples}
        return [relation_text(r) for r in self.listed] or sorted(used)

    def write(self) -> None:
        """``examples.yaml`` (when there is a shot) and ``validation.jsonl`` (when there is a question)."""
        if self.split.shots:
            present = tuple(x for x in self.settings.shot_shapes if any(s.shape == x for s in self.split.shots))
            header = _header(self.settings, self.llm.name, present)
            examples_yaml(self.out_dir / EXAMPLES_FILE, header, self.relations(),
                          relation_instructions(self.kinds, self.listed, self.relations(), self.twins),
                          (({"question": s.question, "triples": [list(t) for t in s.triples]}, s.note)
                           for s in self.split.ordered(tuple(x for x in self.settings.shot_shapes
                                                             if x not in STATIC_SHOT_SHAPES))))
        if self.split.validation:
            text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in self.split.validation)
            write_bytes_atomic(self.out_dir / VALIDATION_FILE, text.encode("utf-8"))

    def report(self, seconds: float) -> LearnReport:
        records = self.log.of_kind("batch")
        rows = [row for r in records for row in r.get("samples", [])
                if not all(q.get("composed") for q in row["questions"])]  # the LLM's samples, not composed shots
        questions = [q for row in rows for q in row["questions"]]
        examples, validation = self.out_dir / EXAMPLES_FILE, self.out_dir / VALIDATION_FILE
        calls = sum(int(r.get("llm_calls", 0)) for r in records)
        per_call = sum(float(r.get("seconds", 0.0)) for r in records) / calls if calls else 0.0
        return LearnReport(self.out_dir, examples if self.split.shots else None,
                           validation if self.split.validation else None, self.log.path, len(self.samples), len(rows),
                           len(questions), sum(1 for q in questions if q["kept"]), len(self.split.shots),
                           len(self.split.validation), self.llm.calls, round(seconds, 3), round(peak_rss_mb(), 1),
                           self.stopped, dict(self.rejected), round(per_call, 3))


def _header(settings: LearnSettings, llm: str, shot_shapes: Sequence[str]) -> str:
    """The examples file's comment; ``shot_shapes``: the shot-only shapes among its shots (a KG may have none)."""
    rule = "composed by rule (every triple said, the way the KG runs it)"
    composed = (f"Each question is {rule} from a subgraph sampled from the KG" if settings.composed_shots else
                "Each question was written by the LLM for a subgraph sampled from the KG"
                + (f" ({', '.join(shot_shapes)}: {rule})" if shot_shapes else ""))
    return (f"Few-shot examples learnt from this KG (LLM {llm}, seed {settings.seed}, shapes "
            f"{', '.join((*settings.shapes, *shot_shapes))}). {composed}; it names the subgraph's named "
            "entities and\nnot its answer, and the subgraph's pattern (stored "
            "here, with the KG's relation names) finds its answer in the KG.\nThe validation questions beside "
            "this file (validation.jsonl) are never shots. Edit freely: fix or delete questions, add your own;\n"
            "the first 6 examples are the prompt's static shots, the others are chosen per question. Then attach "
            "the file: simgrag examples install INDEX_DIR FILE")


def _open_log(out_dir: Path, logged: Mapping[str, Any], resume: bool) -> ProgressLog:
    """The run's progress log: resumed when it records the same settings, else started over (and the
    previous run's files removed)."""
    path = progress_path(out_dir / EXAMPLES_FILE)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if resume and path.exists():
            try:
                return ProgressLog(path, logged, resume=True)
            except ConfigError:
                logger.info("%s records another KG, LLM or settings: learning starts over", path)
        for name in (EXAMPLES_FILE, VALIDATION_FILE):
            (out_dir / name).unlink(missing_ok=True)
        return ProgressLog(path, logged, resume=False)
    except OSError as exc:
        raise ConfigError(f"Cannot write the learning files in {out_dir}: {exc}") from exc


def learn_examples(index: IndexDir, llm: LLM, out_dir: str | Path, settings: LearnSettings | None = None, *,
                   progress: bool | None = None, resume: bool = True) -> LearnReport:
    """Learn ``index``'s few-shot examples and validation questions into ``out_dir`` (module docstring);
    the run's report. ``progress``: the progress bar (default: :func:`~simgrag.progress.progress_on`);
    ``resume``: go on from the progress log in ``out_dir`` (with other settings it starts over anyway).
    LLM errors are raised as they come (what was finished is on disk: run again to go on)."""
    settings = settings or LearnSettings()
    out_dir, t0 = Path(out_dir), time.perf_counter()
    counted = CountingLLM(llm)
    logged = {"kg": index.manifest.get("kg", {}).get("content_hash"), "llm": counted.name,
              "embedder": index.manifest.get("embedder", {}).get("name"), **settings.logged()}
    log = _open_log(out_dir, logged, resume)
    run = _Learn(index, counted, settings, log, out_dir, t0)
    logger.info("learning examples and validation questions for %s: about %d LLM calls, at most %.0f s",
                index.path, expected_llm_calls(index, settings), settings.budget_s)
    total = settings.wanted_shots + settings.validation_questions
    bar = tqdm(total=total, initial=min(total, len(run.split.shots) + len(run.split.validation)), unit="question",
               desc="learning validation questions" if settings.validation_only else "learning examples",
               disable=not progress_on(progress))
    try:
        run.run(bar)
    finally:
        bar.close()
    run.write()
    report = run.report(time.perf_counter() - t0)
    logger.info("%s", report.summary(settings.budget_s))
    return report
