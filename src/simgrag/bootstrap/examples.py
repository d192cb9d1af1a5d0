"""An editable few-shot examples file for any index, bootstrapped from its KG with the LLM.

For each sampled subgraph (:mod:`simgrag.bootstrap.sample`: 1–3-hop chains, stars, conjunctions):

1. the LLM writes several natural questions about it (one call; :func:`~simgrag.bootstrap.prompts.
   question_messages`: it sees the subgraph's pattern, the named entities and the unknowns' kinds, not
   the unknowns' names); a name written another way than the KG's ("Somali Shilling" for
   ``somali_shilling``) is spelt as the KG does (:func:`~simgrag.bootstrap.prompts.respell`), then a
   question that does not name the named entities, or names one of the others (the model may know
   them), is dropped without an LLM call;
2. each remaining question goes through the engine's own pattern stage — the LLM's pattern judged and
   repaired with the KG (:class:`~simgrag.retrievers.simgrag.SimGRAGRetriever`), with the examples
   accepted so far as its few-shot examples (a generic seed, ``data/examples/bootstrap_seed.yaml``,
   fills the static shots until there are enough) — and the subgraph search;
3. the question is kept when one of the sample's gold answers is among the first ``check_top`` answer
   candidates: the question says what the subgraph says, and the system reads it so.

A KG that stores each fact twice (``has_capital`` and ``has_capital_inverse``:
:func:`~simgrag.kg.twins.twin_relations`) is sampled, typed and listed with one relation of each pair;
the instructions say the other exists. A kept question becomes an example with the sample's own pattern
(the KG's relation names, its orientation, ``UNKNOWN <kind> n`` nodes; :mod:`simgrag.bootstrap.kinds`),
not the LLM's. The file is rewritten after every sample; the progress log beside it
(:mod:`simgrag.bootstrap.files`) makes the run resumable. LLM calls: two per relation for its kinds (KGs
without entity types), then per sample one for its questions (a 2-hop chain one more, a 3-hop chain two
more: their middle is described first, one hop per call) and one per screened question (two when the
judge asks the LLM for a revision).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from simgrag.bootstrap.files import ProgressLog, examples_yaml, progress_path
from simgrag.bootstrap.kinds import RelationKinds
from simgrag.bootstrap.prompts import (
    describe_messages,
    question_messages,
    read_description,
    read_questions,
    respell,
    screen_question,
)
from simgrag.bootstrap.sample import FORWARD_CHAIN, SHAPES, Sample, parse_shapes, sample_subgraphs
from simgrag.errors import ConfigError, PatternError
from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.twins import twin_relations
from simgrag.llm.base import LLM
from simgrag.llm.counting import CountingLLM
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.examples import Example, ExampleSet, builtin_examples
from simgrag.pattern.generate import DEFAULT_STATIC_SHOTS
from simgrag.progress import progress_on
from simgrag.retrievers.simgrag import SimGRAGRetriever

__all__ = ["ExamplesReport", "ExamplesSettings", "bootstrap_examples", "relation_instructions"]

logger = logging.getLogger(__name__)

#: relations listed in the file (and typed up front) when the KG has at most this many
MAX_LISTED_RELATIONS = 40

#: the shapes bootstrapped examples are drawn from by default: every shape but the forward-only chain (a
#: kind of 3-hop chain, :data:`~simgrag.bootstrap.sample.SHAPES`)
BOOTSTRAP_SHAPES = tuple(s for s in SHAPES if s != FORWARD_CHAIN)


@dataclass(frozen=True)
class ExamplesSettings:
    """What is sampled and how questions are judged (a progress log is resumed only with the same ones).

    ``per_shape`` samples of each of ``shapes``, ``questions_per_sample`` questions asked for each;
    ``max_answers``: samples with more gold answers are drawn again; ``check_top``: a question is kept
    when a gold answer is among its first ``check_top`` answer candidates; ``ground_patterns``: the
    engine's KG judge on the patterns (as ``simgrag ask`` runs); ``temperature`` of the question calls;
    ``exclude``: entity names no sample may touch (an evaluation's topics, to keep it held out)."""

    shapes: tuple[str, ...] = BOOTSTRAP_SHAPES
    per_shape: int = 8
    questions_per_sample: int = 3
    seed: int = 0
    max_answers: int = 20
    check_top: int = 1
    ground_patterns: bool = True
    temperature: float = 0.0
    exclude: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", parse_shapes(self.shapes))
        object.__setattr__(self, "exclude", frozenset(self.exclude))
        if self.per_shape < 1 or self.questions_per_sample < 1 or self.check_top < 1:
            raise ConfigError("samples per shape, questions per sample and check_top must be at least 1; got "
                              f"{self.per_shape}, {self.questions_per_sample}, {self.check_top}")

    def logged(self) -> dict[str, Any]:
        """The settings as the progress log records them (the excluded names as a count and digest)."""
        digest = hashlib.sha256("\n".join(sorted(self.exclude)).encode()).hexdigest()[:16]
        return {**{k: v for k, v in asdict(self).items() if k != "exclude"}, "shapes": list(self.shapes),
                "exclude": f"{len(self.exclude)} names, sha256 {digest}" if self.exclude else None}

    def max_llm_calls(self, relations: int) -> int:
        """An upper bound of the run's LLM calls (every question revised once), for a KG of ``relations``."""
        samples = len(self.shapes) * self.per_shape
        described = sum({"2hop": 1, "3hop": 2}.get(s, 0) for s in self.shapes) * self.per_shape
        return 2 * relations + described + samples * (1 + 2 * self.questions_per_sample)


@dataclass(frozen=True)
class ExamplesReport:
    """What a run did: the files, the samples, the questions written and kept, LLM calls and seconds."""

    output: Path
    progress: Path
    samples: int
    samples_done: int
    questions: int
    kept: int
    llm_calls: int
    seconds: float
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.samples_done == self.samples

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "output": str(self.output), "progress": str(self.progress), "complete": self.complete}


@dataclass(frozen=True)
class _Kept:
    shape: str
    sample: int
    rank: int  # the question's place among its sample's kept ones
    example: Example
    note: str


class _Run:
    """One bootstrap: the samples, the accepted examples, the pattern stage (see the module docstring)."""

    def __init__(self, index: IndexDir, llm: CountingLLM, settings: ExamplesSettings, log: ProgressLog,
                 twins: Mapping[str, str]) -> None:
        self.index, self.llm, self.settings, self.log, self.twins = index, llm, settings, log, dict(twins)
        self.kinds = RelationKinds(index.store, llm, log, seed=settings.seed)
        self.subgraphs = SubgraphRetriever(index)
        self.seed_examples = builtin_examples("bootstrap_seed").examples
        self.kept: list[_Kept] = []
        self.retrieval = RetrievalSettings(k=3)
        relations = [r for r in index.store.relations if r not in self.twins]
        self.listed = relations if len(relations) <= MAX_LISTED_RELATIONS else []

    # -- the examples so far -----------------------------------------------------------------------
    def ordered(self) -> list[_Kept]:
        """Kept examples, first questions first, shapes interleaved: the static shots cover the shapes."""
        shape_rank = {s: i for i, s in enumerate(SHAPES)}
        per_shape: dict[str, list[int]] = {}
        for k in self.kept:
            if k.sample not in per_shape.setdefault(k.shape, []):
                per_shape[k.shape].append(k.sample)
        return sorted(self.kept, key=lambda k: (k.rank, per_shape[k.shape].index(k.sample), shape_rank[k.shape]))

    def relations(self) -> list[str]:
        used = {t[1] for k in self.kept for t in k.example.triples}
        return [relation_text(r) for r in self.listed] or sorted(used)

    def instructions(self) -> str | None:
        return relation_instructions(self.kinds, self.listed, self.relations(), self.twins)

    def pool(self) -> ExampleSet:
        own = [k.example for k in self.ordered()]
        seed = list(self.seed_examples[: max(0, DEFAULT_STATIC_SHOTS - len(own))])
        return ExampleSet(tuple(own + seed), tuple(self.relations()), self.instructions(), source="bootstrap")

    def replay(self, record: Mapping[str, Any]) -> None:
        rank = 0
        for row in record.get("questions", []):
            if row.get("kept"):
                example = Example(row["question"], tuple(tuple(t) for t in record["triples"]))
                self.kept.append(_Kept(record["shape"], record["index"], rank, example, record.get("note", "")))
                rank += 1

    # -- one sample ----------------------------------------------------------------------------------
    def _asked(self, sample: Sample, triples: list[list[str]]) -> tuple[str, list[list[str]], list[str]]:
        """The question prompt's shape and pattern: a chain's middle described first (one call per hop:
        "the countries bordering Kuwait"), then only its last hop is asked; the descriptions made."""
        if sample.shape not in ("2hop", "3hop"):
            return sample.shape, triples, []
        first = triples[0]
        named = first[2] if first[0].startswith("UNKNOWN ") else first[0]
        anchor = old = named  # the text that stands for node ``old``: the named entity, then each description
        said: list[str] = []
        for fact in triples[:-1]:
            shown = [anchor if t == old else t for t in fact]
            response = self.llm.complete(describe_messages(shown, anchor), max_tokens=40, temperature=0.0)
            described = read_description(response.text, named)
            if described is None or described.lower() in (d.lower() for d in (anchor, *said)):  # no step taken
                return sample.shape, triples, said  # the whole pattern at once, as for other shapes
            old = next(t for t in shown if t.startswith("UNKNOWN "))
            anchor = described
            said.append(described)
        return "described", [[anchor if t == old else t for t in triples[-1]]], said

    def run_sample(self, i: int, sample: Sample) -> dict[str, Any]:
        t0, calls0 = time.perf_counter(), self.llm.calls
        triples = sample.pattern_triples(self.kinds)
        n = self.settings.questions_per_sample
        shape, shown, described = self._asked(sample, triples)
        response = self.llm.complete(question_messages(shape, shown, len(sample.answers), n),
                                     max_tokens=40 * n + 60, temperature=self.settings.temperature)
        questions = read_questions(response.text, n)
        # the check asks whether the LLM's own pattern for the question finds the answer (no analogies of the
        # examples kept so far: a question is worth keeping when the model reads it, not when it resembles one)
        retriever = SimGRAGRetriever(self.index, self.llm, retrieval=self.retrieval, examples=self.pool(),
                                     ground_patterns=self.settings.ground_patterns, subgraphs=self.subgraphs,
                                     pattern_options={"analogy": False})
        rows = [self._judge(q, sample, retriever) for q in questions]
        extra = len(sample.answers) - 1
        note = f"{sample.shape}; answer: {sample.answer}" + (f" (+{extra} more)" if extra else "")
        record = {"kind": "sample", "index": i, "shape": sample.shape, "sample": sample.to_dict(), "triples": triples,
                  "note": " ".join(note.split()), "described": described, "questions": rows,
                  "llm_calls": self.llm.calls - calls0,
                  "seconds": round(time.perf_counter() - t0, 3)}
        if not questions:
            record["unreadable"] = response.text[:500]
        return record

    def _judge(self, written: str, sample: Sample, retriever: SimGRAGRetriever) -> dict[str, Any]:
        question = respell(written, sample.named_entities)
        asked = {"question": question} if question == written else {"question": question, "written": written}
        why = screen_question(question, sample)
        if why is not None:
            return {**asked, "kept": False, "why": why}
        try:
            context = retriever.retrieve(question)
        except PatternError as exc:
            return {**asked, "kept": False, "why": f"no pattern: {str(exc).splitlines()[0][:200]}"}
        found = list(context.answer_candidates[: self.settings.check_top])
        kept = bool(set(found) & set(sample.answers))
        pattern = [list(t) for t in context.pattern.pattern.triples()] if context.pattern is not None else []
        return {**asked, "kept": kept, "pattern": pattern,
                "why": None if kept else f"its pattern found {found or 'nothing'}"}

    def write(self, output: Path, header: str) -> None:
        ordered = self.ordered()
        examples_yaml(output, header, self.relations(), self.instructions(),
                      (({"question": k.example.question, **k.example.output()}, k.note) for k in ordered))


def relation_instructions(kinds: RelationKinds, listed: Sequence[str], relations: Sequence[str],
                          twins: Mapping[str, str]) -> str | None:
    """The examples file's instructions: each relation's kinds in its direction (those known, of the
    ``relations`` listed when ``listed``), and that the KG stores ``twins`` (turned round) too."""
    described = [d for d in kinds.described() if not listed or d.split(" (")[0] in relations]
    said = []
    if described and len(described) <= MAX_LISTED_RELATIONS:
        said.append("Each relation links two kinds of things; write its triples in this direction: "
                    + "; ".join(described) + ".")
    if twins:  # the twins are neither listed nor sampled: their facts are the listed relations'
        twin, kept = next(iter(twins.items()))
        said.append(f"The KG also stores facts turned round ({relation_text(twin)} for {relation_text(kept)}"
                    + (", …" if len(twins) > 1 else "") + "); write them with the relations listed.")
    return " ".join(said) or None


def _reason(why: str) -> str:
    for key in ("does not name", "names", "no pattern", "its pattern found"):
        if why.startswith(key):
            return {"its pattern found": "wrong answer"}.get(key, key)
    return why


def bootstrap_examples(index: IndexDir, llm: LLM, output: str | Path, settings: ExamplesSettings | None = None, *,
                       resume: bool = True, max_llm_calls: int | None = None,
                       show_progress: bool | None = None) -> ExamplesReport:
    """Write an examples file for ``index`` to ``output`` (see the module docstring); the run's report.

    ``resume``: go on from ``output``'s progress log when it records the same settings; ``max_llm_calls``:
    stop before the next sample once this many calls were made (run again to go on). Raises
    :class:`ConfigError` when a complete run kept no question, and LLM errors as they come (what was
    finished is on disk: run again to go on)."""
    settings = settings or ExamplesSettings()
    output, t0 = Path(output), time.perf_counter()
    counted = CountingLLM(llm)
    twins = twin_relations(index.store)
    samples = sample_subgraphs(index.store, settings.shapes, settings.per_shape, seed=settings.seed,
                               max_answers=settings.max_answers, exclude=settings.exclude, skip_relations=twins)
    if not samples:
        raise ConfigError(f"No subgraph of the shapes {', '.join(settings.shapes)} could be sampled from this KG "
                          f"with at most {settings.max_answers} answers; try other --shapes")
    logged = {"kg": index.manifest.get("kg", {}).get("content_hash"), "llm": counted.name,
              "embedder": index.manifest.get("embedder", {}).get("name"), **settings.logged()}
    if twins:
        logged["twins_skipped"] = sorted(twins)
    log = ProgressLog(progress_path(output), logged, resume=resume, command="simgrag examples bootstrap")
    run = _Run(index, counted, settings, log, twins)
    done = {int(r["index"]): r for r in log.of_kind("sample")}
    for i in sorted(done):
        run.replay(done[i])
    if run.listed:
        run.kinds.prepare(run.listed)
    header = _header(settings, counted.name)
    bar = tqdm(total=len(samples), initial=len(done), unit="sample", desc="bootstrap examples",
               disable=not progress_on(show_progress))
    try:
        for i, sample in enumerate(samples):
            if i in done:
                continue
            if max_llm_calls is not None and counted.calls >= max_llm_calls:
                logger.info("stopping after %d LLM calls (max_llm_calls); run again to go on", counted.calls)
                break
            record = run.run_sample(i, sample)
            log.append(record)
            done[i] = record
            run.replay(record)
            if run.kept:
                run.write(output, header)
            bar.update(1)
            bar.set_postfix(kept=len(run.kept), llm_calls=counted.calls)
    finally:
        bar.close()
    return _report(output, log, samples, run, counted.calls, time.perf_counter() - t0)


def _report(output: Path, log: ProgressLog, samples: list[Sample], run: _Run, calls: int,
            seconds: float) -> ExamplesReport:
    records = log.of_kind("sample")
    rows = [row for r in records for row in r.get("questions", [])]
    rejected: dict[str, int] = {}
    for row in rows:
        if not row.get("kept"):
            reason = _reason(str(row.get("why")))
            rejected[reason] = rejected.get(reason, 0) + 1
    unreadable = sum(1 for r in records if "unreadable" in r)
    if unreadable:
        rejected["no questions read"] = unreadable
    report = ExamplesReport(output, log.path, len(samples), len(records), len(rows), len(run.kept), calls,
                            round(seconds, 3), rejected)
    if report.complete and not run.kept:
        raise ConfigError(f"No bootstrapped question passed the retrieval check ({rejected or 'no question written'}); "
                          f"{log.path} lists each question and why. Try more samples (--per-shape), more questions "
                          "per sample, --check-top 3, or another LLM (--llm).")
    return report


def _header(settings: ExamplesSettings, llm: str) -> str:
    return (f"Few-shot examples bootstrapped from this KG by `simgrag examples bootstrap` (LLM {llm}, seed "
            f"{settings.seed}, {settings.per_shape} samples of each of {', '.join(settings.shapes)}, "
            f"{settings.questions_per_sample} questions each). Each question was kept because the pattern the "
            f"engine wrote for it found the sampled subgraph's answer (among the first {settings.check_top}).\n"
            "Edit freely: fix or delete questions, add your own. The first 6 examples are the prompt's static "
            "shots; the others are\nchosen per question by word overlap. Then attach the file to the index: "
            "simgrag examples install INDEX_DIR FILE")
