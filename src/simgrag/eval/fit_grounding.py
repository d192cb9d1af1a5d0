"""Fit the pattern stage to one KG on that KG's own validation questions (:mod:`simgrag.grounding.fit`).

The validation questions are questions with gold answers that are never few-shot examples: the held-out
part of the KG's bootstrapped questions, or a file the user gives. Every question is answered

1. with the LLM's own pattern (``--no-grounding``: the floor the stage must not go below),
2. with every edit family on,
3. for each family that made a chosen pattern, with that family off (only on the questions it touched),
4. with the families that raised accuracy on (the fitted stage), and with every family but those that lowered
   it (families that help only together),

all with abstention off (the fit judges patterns, not the answer's abstention) and every LLM call shared
through one call cache, so the configurations differ only in what the stage does. A family stays on only
when it fixed more validation questions than it broke (*an edit family that does not raise validation
accuracy on a KG stays off there*). Of the four stages — none, fitted, pruned, every family — the one with the most
first-answer hits wins, ties going to the simpler (none first), and a stage that answers fewer questions of some
group (hop count, shape) than the LLM's own patterns is not eligible: the stored stage is never below the LLM's own
patterns on the validation set, in total or in any group (*no harm*), and a gain must be more than chance
(:func:`significant_gain`: a one-sided sign test on the questions where the two differ).
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from simgrag.answer.mode_fit import FITTED_MODES, AnswerModeFit
from simgrag.errors import DatasetError, SimGRAGError
from simgrag.eval.runner import QAItem, hits_at_1
from simgrag.grounding.channel import DEFAULT_READINGS, MARGIN, READINGS, VARIANT, fit_margin
from simgrag.grounding.fit import FIRST_READINGS, GroundingFit, lost_groups
from simgrag.grounding.registry import family_names
from simgrag.index.directory import IndexDir
from simgrag.llm.base import LLM, samples_text, scores_text
from simgrag.llm.cache import CachedLLM
from simgrag.llm.counting import CountingLLM
from simgrag.pipeline import SimGRAG
from simgrag.progress import progress_on

__all__ = ["SAMPLED_SET", "SIGNIFICANCE", "STAGES", "Outcome", "choose_stage", "engine_options", "family_gains",
           "fit_answer_mode", "fit_grounding", "fitted_config", "significant_gain", "versus"]

logger = logging.getLogger(__name__)

#: a family stays on when it fixes at least this many more validation questions than it breaks
MIN_GAIN = 1
#: with a deadline, the LLM's own patterns are asked for no later than this share of it (the questions not reached
#: are left out of the fit): every family, which must run too, then takes about as long again, and the optional
#: trials get what is left (the company KG's learning: 20 questions' floor and every family took 213 s of 139)
FLOOR_SHARE = 0.35
#: a channel run's seconds per question against the LLM's own patterns' (its scoring passes, several readings each,
#: against one pattern call): 78 s against 37 s on the company KG's 24 learned validation questions
CHANNEL_OVER_FLOOR = 2.0
#: a run with sampled readings' seconds per question against a channel run's (:data:`~simgrag.grounding.channel.
#: SAMPLES` sampled patterns and their scoring passes per question), against the last channel run: measured in the
#: fits after learning with 72 questions (2026-12-06, E): 316.8 s against 57.5 s on WorldCup2014 (5.5×), 494.1 s
#: against 71.8 s on genealogy (6.9×); it was 2.5 (a guess), so under a deadline a sampled trial could overrun
SAMPLED_OVER_CHANNEL = 6.0


@dataclass(frozen=True)
class Outcome:
    """One question under one stage configuration: first-answer hit, the families of the chosen pattern."""

    hit: bool
    families: tuple[str, ...] = ()
    failed: bool = False
    channel_gap: float | None = None  # the channel choice's gap when it took a reading
    channel_reading: str | None = None  # the kind of that reading


#: the channel choice's (margin, kinds of reading offered)
ChannelSetting = tuple[float, tuple[str, ...]]
#: (grounding on, families off, answer mode, the channel choice's setting or ``None`` for the choice off)
Config = tuple[bool, tuple[str, ...], str, ChannelSetting | None]
#: the sets of reading kinds the fit tries, simplest first: an analogy reading is one more guess to be wrong about
#: (WorldCup2014 with 12 examples, 120 validation questions: with analogies 31 changes at margin 0, the same 5
#: fixed only above a margin of 1.76 instead of 1.15)
#: (a hop shorter and a hop longer, the small model's two slips of chain length, share the first set's margin)
READING_SETS: tuple[tuple[str, ...], ...] = ((*FIRST_READINGS, "contracted", "longer"), READINGS)
#: the set tried after them when the fit is asked to (``sampled=True``): the first with the patterns the LLM samples
#: (:data:`~simgrag.grounding.channel.SAMPLES` more calls per question, ~6× a channel run's time). Not by default: on
#: the KGs measured the fit kept it off (3 fixed, 0 broke on genealogy's 36 and WorldCup2014's 25 learned validation
#: questions), for 4–7 minutes more of fitting (BENCHMARKS.md "Sampled readings")
SAMPLED_SET: tuple[str, ...] = (*READING_SETS[0], "sampled")


def fitted_config(fit: GroundingFit, llm: LLM, mode: str = "auto") -> Config:
    """The configuration ``fit`` runs with ``llm`` and the answer ``mode``: its stage, and its channel choice (the
    fitted one, else the default readings alone where ``llm`` scores text)."""
    return fit.enabled, fit.disabled if fit.enabled else (), mode, fit.channel_setting(scores_text(llm))


def engine_options(config: Config) -> dict[str, Any]:
    """The ``simgrag`` retriever options that run ``config``'s pattern stage and channel choice."""
    on, off, _, channel = config
    options: dict[str, Any] = {"ground_patterns": on, "channel": channel is not None}
    if channel is not None:
        options.update(channel_margin=channel[0], channel_readings=list(channel[1]))
    if on:
        options["grounding_off"] = list(off)
    return options


class _Runner:
    """Asks validation questions under stage configurations, one engine per configuration, one LLM.

    ``deadline``: a :func:`time.perf_counter` time after which :meth:`affords` refuses optional runs (``None``: no
    deadline); every run is kept in :attr:`steps` (what, kind — ``"stage"``, ``"channel"`` or ``"sampled"`` —,
    questions asked, seconds), from which the next one's length is estimated."""

    def __init__(self, index: IndexDir, llm: LLM, items: Sequence[QAItem], options: dict[str, Any],
                 progress: bool | None, deadline: float | None = None) -> None:
        self.index, self.llm, self.items, self.options = index, llm, items, options
        self.progress = progress
        self._engines: dict[tuple[Config, bool | None], SimGRAG] = {}
        self.first_error: str | None = None
        self.deadline = deadline
        self.skipped: list[str] = []
        self.steps: list[dict[str, Any]] = []

    def estimate(self, questions: int, kind: str) -> float:
        """Seconds a run of ``kind`` on ``questions`` questions should take: the last such run's rate; before any
        channel run, :data:`CHANNEL_OVER_FLOOR` times the first run's (the LLM's own patterns); before any run with
        sampled readings, :data:`SAMPLED_OVER_CHANNEL` times a channel run's; else the mean rate of every run so far,
        else 0."""
        asked = [s for s in self.steps if s["questions"] and s["kind"] != "search"]
        same = [s for s in asked if s["kind"] == kind]
        if same:
            rate = same[-1]["seconds"] / same[-1]["questions"]
        elif kind == "sampled" and asked:
            rate = SAMPLED_OVER_CHANNEL * self.estimate(1, "channel")
        elif kind == "channel" and asked:
            rate = CHANNEL_OVER_FLOOR * asked[0]["seconds"] / asked[0]["questions"]
        else:
            total = sum(s["questions"] for s in asked)
            rate = sum(s["seconds"] for s in asked) / total if total else 0.0
        return questions * rate

    def affords(self, questions: int, kind: str, what: str) -> bool:
        """Whether an optional run of ``kind`` on ``questions`` questions should end before the deadline; if not,
        ``what`` is recorded as skipped."""
        if self.deadline is None or time.perf_counter() + self.estimate(questions, kind) <= self.deadline:
            return True
        self.skipped.append(what)
        logger.info("skipped (the fit's time is up): %s", what)
        return False

    def engine(self, config: Config, kind_prior: bool | None = None) -> SimGRAG:
        """The engine of ``config``; ``kind_prior`` overrides the runner's options (``None``: as they say)."""
        options = {**self.options, **engine_options(config)}
        if kind_prior is not None:
            options["kind_prior"] = kind_prior
        key = (config, options.get("kind_prior"))
        if key not in self._engines:
            self._engines[key] = SimGRAG(self.index, llm=self.llm, calibration="off", answer_mode=config[2],
                                         retriever_options=options)
        return self._engines[key]

    def run(self, config: Config, which: Sequence[int], what: str, until: float | None = None,
            kind_prior: bool | None = None, step_kind: str | None = None,
            at_least: tuple[int, float] | None = None) -> dict[int, Outcome]:
        """``config``'s outcome on the questions ``which``; with ``until`` (a :func:`time.perf_counter` time) no
        question is started after it (the outcomes so far are returned) — with ``at_least`` ``(n, hard)``, not before
        ``n`` outcomes unless the time ``hard`` has passed too; ``kind_prior`` as :meth:`engine`'s;
        ``step_kind``: the run's kind for time estimates (default: :func:`_kind`; ``"search"``: a run whose LLM calls
        are all in the cache, estimated from no other)."""
        started = time.perf_counter()
        out: dict[int, Outcome] = {}
        try:
            self._run(self.engine(config, kind_prior), which, what, until, out, at_least or (1, math.inf))
            return out
        finally:
            self.steps.append({"run": what, "kind": step_kind or _kind(config), "questions": len(out),
                               "seconds": time.perf_counter() - started})

    def _run(self, engine: SimGRAG, which: Sequence[int], what: str, until: float | None,
             out: dict[int, Outcome], at_least: tuple[int, float]) -> None:
        for i in tqdm(which, desc=what, disable=not progress_on(self.progress), leave=False):
            now = time.perf_counter()
            if until is not None and out and now > until and (len(out) >= at_least[0] or now > at_least[1]):
                break
            item = self.items[i]
            try:
                result = engine.ask(item.question)
            except SimGRAGError as exc:
                logger.info("validation question failed (%s): %r: %s", what, item.question, str(exc).splitlines()[0])
                self.first_error = self.first_error or str(exc)
                out[i] = Outcome(False, failed=True)
                continue
            families = result.pattern.families if result.pattern is not None else ()
            gap = result.pattern.channel_gap if result.pattern is not None else None
            kind = result.pattern.channel_reading if result.pattern is not None else None
            out[i] = Outcome(hits_at_1(result, set(item.answers))[1], families, channel_gap=gap, channel_reading=kind)


def _kind(config: Config) -> str:
    """A run's kind for its time estimate: ``"stage"`` (no channel), ``"channel"``, or ``"sampled"`` (a channel that
    samples patterns)."""
    if config[3] is None:
        return "stage"
    return "sampled" if "sampled" in config[3][1] else "channel"


def _all_failed(runner: _Runner, outcomes: dict[int, Outcome]) -> None:
    """Refuse to fit on a run where no validation question could be asked at all (no examples, a dead LLM):
    a fit of zeros would switch everything off and look like a measurement."""
    if outcomes and all(o.failed for o in outcomes.values()):
        raise DatasetError("every validation question failed, nothing to fit on; the first error: "
                           f"{runner.first_error}")


def _hits(outcomes: dict[int, Outcome]) -> int:
    return sum(o.hit for o in outcomes.values())


def family_gains(full: dict[int, Outcome], ablations: dict[str, dict[int, Outcome]]) -> dict[str, dict[str, int]]:
    """Per family, on the questions whose chosen pattern it made: how many it answers that its absence loses
    (``fixed``) and how many its absence answers that it loses (``broke``)."""
    table: dict[str, dict[str, int]] = {}
    for family, without in ablations.items():
        touched = list(without)
        table[family] = {"used": len(touched),
                         "fixed": sum(full[i].hit and not without[i].hit for i in touched),
                         "broke": sum(without[i].hit and not full[i].hit for i in touched)}
    return table


#: the stages a fit chooses among, simplest first (a tie goes to the simpler: no harm, no unproven edit): the
#: LLM's own patterns; only the families that fixed more than they broke; every family but those that broke
#: more than they fixed (families help in combination: one alone may fix nothing); every family
STAGES = ("no_grounding", "fitted", "pruned", "every_family")


#: a configuration other than the floor must fix more validation questions than it breaks, by a margin that a
#: fair coin would give at most this often (a one-sided sign test on the questions where the two differ): +1 on
#: 36 questions is noise (genealogy: the LLM answer mode 29 vs 28 on validation, 2.5 and 6 points lower on test)
SIGNIFICANCE = 0.1


def significant_gain(fixed: int, broke: int, alpha: float = SIGNIFICANCE) -> bool:
    """Whether ``fixed`` questions gained against ``broke`` lost is more than chance (one-sided sign test)."""
    n = fixed + broke
    if fixed <= broke:
        return False
    return sum(math.comb(n, k) for k in range(fixed, n + 1)) / 2 ** n <= alpha


def _evidence(items: Sequence[QAItem] | None, i: int) -> tuple[str, object]:
    """What question ``i`` counts as in the sign test: its :attr:`~simgrag.eval.runner.QAItem.cluster` (paraphrases
    of one learnt sample count once), else itself."""
    cluster = items[i].cluster if items is not None else None
    return ("question", i) if cluster is None else ("cluster", cluster)


def _samples(items: Sequence[QAItem], asked: Sequence[int]) -> int | None:
    """How many pieces of evidence the questions ``asked`` are in the sign test (:func:`versus`); ``None`` when none
    has a cluster (then it is the questions' count)."""
    if all(items[i].cluster is None for i in asked):
        return None
    return len({_evidence(items, i) for i in asked})


def versus(candidate: dict[int, Outcome], floor: dict[int, Outcome],
           items: Sequence[QAItem] | None = None) -> tuple[int, int]:
    """(questions ``candidate`` answers and ``floor`` does not, questions ``floor`` answers and it does not).
    With ``items``, questions of one :attr:`~simgrag.eval.runner.QAItem.cluster` (paraphrases of one learnt
    sample) count once, by their net change: two wordings of one sample are not two pieces of evidence."""
    net: dict[tuple[str, object], int] = {}
    for i, o in candidate.items():
        if i in floor and o.hit != floor[i].hit:
            key = _evidence(items, i)
            net[key] = net.get(key, 0) + (1 if o.hit else -1)
    return sum(d > 0 for d in net.values()), sum(d < 0 for d in net.values())


def choose_stage(hits: dict[str, int], groups: dict[str, dict[str, int]] | None = None,
                 gains: dict[str, tuple[int, int]] | None = None) -> str:
    """The stage with the most validation hits among those measured (the keys of ``hits``), ties going to the
    simpler (:data:`STAGES` order). A stage other
    than the LLM's own patterns is not eligible when, with ``groups`` (per stage, hits per question group: hop
    count, shape), it answers fewer questions of some group (*no harm* per group, not only in total), or when,
    with ``gains`` (per stage, :func:`versus` the LLM's own patterns), its gain is not :func:`significant_gain`."""
    return _choose(tuple(k for k in STAGES if k in hits), hits, groups, gains)


def _choose(order: Sequence[str], hits: dict[str, int], groups: dict[str, dict[str, int]] | None,
            gains: dict[str, tuple[int, int]] | None) -> str:
    floor = order[0]

    def eligible(k: str) -> bool:
        if k == floor:
            return True
        if groups is not None and lost_groups(groups[k], groups[floor]):
            return False
        return gains is None or significant_gain(*gains[k])

    return max((k for k in order if eligible(k)), key=lambda k: (hits[k], -order.index(k)))


def _group_hits(outcomes: dict[int, Outcome], items: Sequence[QAItem]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, outcome in outcomes.items():
        out[items[i].group] = out.get(items[i].group, 0) + int(outcome.hit)
    return out


@contextmanager
def _runner(index: IndexDir, llm: LLM, items: Sequence[QAItem], examples: Any, pattern_options: dict[str, Any] | None,
            progress: bool | None, calls_cache: str | Path | None,
            deadline: float | None = None) -> Iterator[tuple[_Runner, CountingLLM]]:
    """A runner whose engines share one counted, cached LLM (``calls_cache``, else a temporary file)."""
    options: dict[str, Any] = {"pattern_options": dict(pattern_options or {})}
    if examples is not None:
        options["examples"] = examples
    with tempfile.TemporaryDirectory(prefix="simgrag-fit-") as tmp:
        counted = CountingLLM(llm)
        shared = CachedLLM(counted, Path(calls_cache) if calls_cache is not None else Path(tmp) / "calls.sqlite")
        yield _Runner(index, shared, items, options, progress, deadline), counted


def fit_grounding(index: IndexDir, llm: LLM, items: Sequence[QAItem], *, examples: Any = None,
                  pattern_options: dict[str, Any] | None = None, progress: bool | None = None,
                  source: str = "validation questions", calls_cache: str | Path | None = None,
                  on_step: Callable[[str], None] | None = None, deadline_s: float | None = None,
                  sampled: bool = False, variant: bool = False, min_questions: int = 1) -> GroundingFit:
    """The fitted stage for ``index``'s KG on ``items`` (module docstring); store it with
    :func:`~simgrag.grounding.fit.store_fit`. ``examples``/``pattern_options`` as the engine will use
    them (default: the index's examples); ``calls_cache``: the LLM call cache file the runs share (default: a
    temporary one; give a path to share the calls with a later fit, :mod:`simgrag.eval.fit_abstention`).

    ``deadline_s``: seconds from now after which no optional run starts that should not end in time (its length
    estimated from the runs before it). The LLM's own patterns and every family always run, on the questions the
    first reached by :data:`FLOOR_SHARE` of the deadline (``info["offered"]``: how many were given) — but at least
    ``min_questions`` of them unless the whole deadline has passed (the learning's fit needs that many); then, as time
    allows, the per-family ablations (a family not measured stays off), the fitted and pruned stages, the harm check
    of the default readings (unchecked, they stay on, as on an unfitted KG), the channel's reading sets. What was
    skipped is listed under ``info["skipped"]``. ``sampled``: also try the channel with the patterns the LLM samples
    (:data:`SAMPLED_SET`; off by default, its cost and what it did on the KGs measured there). ``variant``: also try
    the variant among the default readings, in their harm check (one more LLM call a question;
    :attr:`~simgrag.grounding.fit.GroundingFit.variant`)."""
    if not items:
        raise DatasetError("no validation questions to fit the pattern stage on")
    t0 = time.perf_counter()
    deadline = None if deadline_s is None else t0 + deadline_s
    with _runner(index, llm, items, examples, pattern_options, progress, calls_cache, deadline) as (runner, counted):
        everyone = list(range(len(items)))
        say = on_step or (lambda text: logger.info("%s", text))
        runner.options.setdefault("kind_prior", True)  # the LLM's own patterns with it first: it is on by default
        say(f"fitting the pattern stage on {len(items)} {source}: the LLM's own patterns")
        raw = runner.run((False, (), "auto", None), everyone, "no grounding",
                         until=None if deadline_s is None else t0 + FLOOR_SHARE * deadline_s,
                         at_least=None if deadline is None else (min_questions, deadline))
        _all_failed(runner, raw)
        if len(raw) < len(everyone):
            say(f"the time allows {len(raw)} of the {len(items)} questions: the fit runs on those")
            everyone = sorted(raw)
        kind_verdict, without_prior = _kind_prior_check(runner, raw, items, say)
        if not kind_verdict["on"]:  # the rest of the fit runs as the KG will: without the prior
            runner.options["kind_prior"] = False
            raw = without_prior
        say("every edit family")
        full = runner.run((True, (), "auto", None), everyone, "every family")
        used: dict[str, list[int]] = {}
        for i, outcome in full.items():
            for family in outcome.families:
                used.setdefault(family, []).append(i)
        ablations: dict[str, dict[int, Outcome]] = {}
        for family, touched in sorted(used.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            if not runner.affords(len(touched), "stage", f"without {family}"):
                continue
            say(f"without {family} ({len(touched)} questions)")
            ablations[family] = runner.run((True, (family,), "auto", None), touched, f"without {family}")
        families = family_gains(full, ablations)
        kept = {f for f, r in families.items() if r["fixed"] - r["broke"] >= MIN_GAIN}
        off = tuple(f for f in family_names() if f not in kept)
        runs = {"no_grounding": raw, "every_family": full}
        if not kept:
            runs["fitted"] = raw
        elif runner.affords(len(everyone), "stage", "the fitted stage"):
            say(f"the fitted stage (on: {', '.join(sorted(kept))})")
            runs["fitted"] = runner.run((True, off, "auto", None), everyone, "fitted")
        harmful = tuple(f for f, r in families.items() if r["broke"] > r["fixed"])
        if not harmful:
            runs["pruned"] = full
        elif runner.affords(len(everyone), "stage", "every family but those that broke more than they fixed"):
            say(f"every family but those that broke more than they fixed ({', '.join(harmful)})")
            runs["pruned"] = runner.run((True, harmful, "auto", None), everyone, "pruned")
        runs = {k: runs[k] for k in STAGES if k in runs}
        hits = {k: _hits(v) for k, v in runs.items()}
        groups = {k: _group_hits(v, items) for k, v in runs.items()}
        gains = {k: versus(v, raw, items) for k, v in runs.items()}
        choice = choose_stage(hits, groups, gains)
        # the families stored as off (with the stage off: those the fit did not keep, as before)
        stage_off = {"no_grounding": off, "fitted": off, "pruned": harmful, "every_family": ()}[choice]
        channel = _fit_channel(runner, llm, (choice != "no_grounding", stage_off, "auto", None), runs[choice],
                               items, say, sampled=sampled, variant_asked=variant)
        calls = counted.calls
    info = {"questions": len(everyone), "source": source, "hits": hits, "group_hits": groups,
            "versus_no_grounding": {k: list(v) for k, v in gains.items()}, "chosen": choice,
            "families": families,
            "embedder": index.manifest.get("embedder", {}).get("name"), "llm": llm.name,
            "kg_content_hash": index.manifest.get("kg", {}).get("content_hash"), "llm_calls": calls,
            "seconds": round(time.perf_counter() - t0, 1), "fitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                      time.gmtime()),
            "failed": sum(o.failed for o in raw.values()), "channel": channel, "kind_prior": kind_verdict}
    samples = _samples(items, everyone)
    if samples is not None:
        info["samples"] = samples
    info["steps"] = [{**step, "seconds": round(step["seconds"], 1)} for step in runner.steps]
    if len(everyone) < len(items):
        info["offered"] = len(items)
    if runner.skipped:
        info["skipped"] = list(runner.skipped)
    on = bool(channel.get("on"))
    named = channel.get("named") or {}
    variant = bool((named.get("variant") or {}).get("on", False))
    return GroundingFit(choice != "no_grounding", stage_off, info, on, float(channel.get("margin", 0.0)) if on else 0.0,
                        tuple(channel.get("readings") or READINGS) if on else READINGS,
                        float(named["margin"]) if named.get("on") else None, variant, bool(kind_verdict["on"]))


def _kind_prior_check(runner: _Runner, raw: dict[int, Outcome], items: Sequence[QAItem],
                      say: Callable[[str], None]) -> tuple[dict[str, Any], dict[int, Outcome]]:
    """Whether the search's kind prior (:mod:`simgrag.match.kinds`) stays on: the LLM's own patterns (``raw``, run with
    it) against the same patterns searched without it; on unless a question group loses (the rule of the default
    readings: it runs on a KG never fitted, so only harm turns it off). The verdict, and the outcomes without it."""
    if runner.options.get("kind_prior") is False:
        return {"on": False, "why": "turned off by the caller"}, raw
    say("the LLM's own patterns searched without the kind prior (on unless it costs a question group)")
    # not an optional run: its patterns are the raw run's (cached calls), so it costs searches only
    without = runner.run((False, (), "auto", None), sorted(raw), "no kind prior", kind_prior=False, step_kind="search")
    fixed, broke = versus(raw, without, items)
    loses = bool(lost_groups(_group_hits(raw, items), _group_hits(without, items)))
    return {"on": not loses, "fixed": fixed, "broke": broke,
            "why": "a question group lost" if loses else "no question group lost"}, without


def _fit_channel(runner: _Runner, llm: LLM, config: Config, base: dict[int, Outcome], items: Sequence[QAItem],
                 say: Callable[[str], None], *, sampled: bool = False, variant_asked: bool = False) -> dict[str, Any]:
    """The channel choice (:mod:`simgrag.grounding.channel`) on top of the chosen stage ``config``: for each of
    :data:`READING_SETS` (and, with ``sampled`` and an LLM that samples by seed, :data:`SAMPLED_SET`), its margin
    and whether it answers more validation questions than the stage alone (``base``) beyond chance and no group
    fewer; the set with the largest gain of those (ties: the simpler) is the one stored, with what each set did
    under ``"tried"``. Their longer readings carry the direct score (:class:`~simgrag.grounding.channel.ChannelChoice`
    adds it wherever longer readings are offered), so no separate trial with it runs."""
    if not scores_text(llm):
        return {"on": False, "why": f"{llm.name} cannot score text"}
    n = len(base)
    if runner.affords(n, "channel", f"the harm check of the default readings ({', '.join(DEFAULT_READINGS)})"):
        say(f"the default readings alone ({', '.join(DEFAULT_READINGS)}; on unless they break validation questions)")
        runs = _channel_runs(runner, config, (*DEFAULT_READINGS, VARIANT) if variant_asked else DEFAULT_READINGS, base)
        variant = _variant_check(runs, base, items) if variant_asked else {"on": False, "why": "not asked"}
        if not variant["on"]:  # judged without it: the questions it changed as the LLM's own pattern answered them
            runs = {i: base[i] if o.channel_reading == VARIANT else o for i, o in runs.items()}
        named = _channel_outcome(runs, DEFAULT_READINGS, base, items, keep_ties=True)
        named_on = not named["group_lost"]
        checked = {"on": named_on, "margin": named["margin"], "fixed": named["fixed"], "broke": named["broke"],
                   "used": named["used"], "kept": named["kept"], "variant": variant,
                   "why": "no harm on the validation questions" if named_on else "a question group lost"}
    else:  # as on a KG never fitted (the variant off)
        variant = {"on": False, "why": "not checked: the fit's time ran out"}
        checked = {"on": True, "margin": MARGIN, "variant": variant, "why": "not checked: the fit's time ran out"}
    tried: dict[str, dict[str, Any]] = {}
    sets = (*READING_SETS, SAMPLED_SET) if sampled and samples_text(llm) else READING_SETS
    for kinds in sets:
        if not runner.affords(n, _kind((*config[:3], (0.0, kinds))),
                              f"the channel choice with readings {', '.join(kinds)}"):
            break
        say(f"the channel choice with readings {', '.join(kinds)} (the question's likelihood given each pattern)")
        tried[",".join(kinds)] = _channel_with(runner, config, kinds, base, items)
    for found in tried.values():
        found.pop("changed")
    if not tried:
        return {"on": False, "why": "not tried: the fit's time ran out", "tried": {}, "named": checked}
    best = max(tried.values(), key=lambda r: (r["on"], r["fixed"] - r["broke"] if r["on"] else 0))
    return {**best, "tried": {k: {x: r[x] for x in ("on", "margin", "fixed", "broke", "used")}
                              for k, r in tried.items()},
            "named": checked}


def _channel_with(runner: _Runner, config: Config, kinds: tuple[str, ...], base: dict[int, Outcome],
                  items: Sequence[QAItem], *, keep_ties: bool = False) -> dict[str, Any]:
    """The channel choice offering ``kinds`` of reading, run at margin 0 on the questions of ``base`` and kept above
    its fitted margin (``keep_ties``: see :func:`~simgrag.grounding.channel.fit_margin`). Under ``"changed"``: the
    questions where it took a reading."""
    return _channel_outcome(_channel_runs(runner, config, kinds, base), kinds, base, items, keep_ties=keep_ties)


def _channel_runs(runner: _Runner, config: Config, kinds: tuple[str, ...],
                  base: dict[int, Outcome]) -> dict[int, Outcome]:
    """The channel choice offering ``kinds`` of reading at margin 0 on the questions of ``base``."""
    what = f"channel choice ({', '.join(kinds)})"
    return runner.run((*config[:3], (0.0, kinds)), list(base), what) if base else {}


def _variant_check(runs: dict[int, Outcome], base: dict[int, Outcome], items: Sequence[QAItem]) -> dict[str, Any]:
    """Whether the variant readings (:func:`~simgrag.grounding.channel.variant_readings`) join the default readings:
    only where the validation questions on which the channel took one fixed more than they broke beyond chance (the
    rule of every optional part of the stage; counted like every other change: a learnt sample once). "No harm" was
    not enough: the company KG's validation questions gave 2 fixed, 1 broke, and its test questions 0 fixed, 4 broke
    (BENCHMARKS.md "Variant readings")."""
    took = [i for i, o in runs.items() if o.channel_reading == VARIANT]
    fixed, broke = versus({i: runs[i] for i in took}, {i: base[i] for i in took}, items) if took else (0, 0)
    on = significant_gain(fixed, broke)
    return {"on": on, "used": len(took), "fixed": fixed, "broke": broke,
            "why": "more validation questions right, beyond chance" if on else "no gain beyond chance"}


def _channel_outcome(runs: dict[int, Outcome], kinds: tuple[str, ...], base: dict[int, Outcome],
                     items: Sequence[QAItem], *, keep_ties: bool = False) -> dict[str, Any]:
    """What the channel choice's ``runs`` (at margin 0) come to, kept above their fitted margin."""
    changed = {i: o.channel_gap for i, o in runs.items() if o.channel_gap is not None}
    margin, _, _ = fit_margin([(gap, int(runs[i].hit) - int(base[i].hit)) for i, gap in changed.items()],
                              keep_ties=keep_ties)
    # at the fitted margin: the channel's outcome where its gap is above it, the stage's elsewhere
    kept = {i: (runs[i] if changed.get(i, -1.0) > margin else base[i]) for i in base}
    fixed, broke = versus(kept, base, items)
    loses = bool(lost_groups(_group_hits(kept, items), _group_hits(base, items)))
    on = significant_gain(fixed, broke) and not loses
    return {"on": on, "readings": list(kinds), "margin": round(margin, 4), "hits": _hits(kept),
            "group_lost": loses,
            "without": _hits(base), "used": len(changed), "kept": sum(g > margin for g in changed.values()),
            "fixed": fixed, "broke": broke, "at_margin_0": list(versus(runs, base, items)), "changed": sorted(changed),
            "why": "more validation questions right, beyond chance" if on else
            ("a question group lost" if loses else "no gain beyond chance")}


def fit_answer_mode(index: IndexDir, llm: LLM, items: Sequence[QAItem], fit: GroundingFit, *, examples: Any = None,
                    pattern_options: dict[str, Any] | None = None, progress: bool | None = None,
                    source: str = "validation questions", calls_cache: str | Path | None = None,
                    on_step: Callable[[str], None] | None = None) -> AnswerModeFit:
    """The answer mode for ``index``'s KG (:mod:`simgrag.answer.mode_fit`): each of
    :data:`~simgrag.answer.mode_fit.FITTED_MODES` answers ``items`` with the pattern stage ``fit`` (the one just
    fitted), abstention off; the most first-answer hits wins, ties going to the first (``auto``, no LLM call on
    an exact match), and a mode that answers fewer questions of some group (hop count, shape) than ``auto`` is
not eligible. Give the ``calls_cache`` of :func:`fit_grounding` to reuse its pattern calls."""
    if not items:
        raise DatasetError("no validation questions to fit the answer mode on")
    t0 = time.perf_counter()
    say = on_step or (lambda text: logger.info("%s", text))
    with _runner(index, llm, items, examples, pattern_options, progress, calls_cache) as (runner, counted):
        runner.options["kind_prior"] = fit.kind_prior
        everyone = list(range(len(items)))
        runs: dict[str, dict[int, Outcome]] = {}
        for mode in FITTED_MODES:
            say(f"answer mode {mode} on {len(items)} {source}")
            runs[mode] = runner.run(fitted_config(fit, llm, mode), everyone, f"answer mode {mode}")
            _all_failed(runner, runs[mode])
        calls = counted.calls
    hits = {m: _hits(v) for m, v in runs.items()}
    groups = {m: _group_hits(v, items) for m, v in runs.items()}
    # the first mode (the shortcut) is the floor: another wins only with more hits, significantly, and no group below
    gains = {m: versus(v, runs[FITTED_MODES[0]], items) for m, v in runs.items()}
    chosen = _choose(FITTED_MODES, hits, groups, gains)
    return AnswerModeFit(chosen, {"questions": len(items), "source": source, "hits": hits, "group_hits": groups,
                                  "versus_auto": {m: list(v) for m, v in gains.items()},
                                  "llm": llm.name,
                                  "llm_calls": calls, "seconds": round(time.perf_counter() - t0, 1),
                                  "kg_content_hash": index.manifest.get("kg", {}).get("content_hash"),
                                  "fitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
