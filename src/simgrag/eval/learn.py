"""Learning at index time: a KG's own few-shot examples and validation questions, attached to its index, and
the pattern stage fitted on them.

:func:`learn_kg` is what ``simgrag index`` runs after building a KG that comes with no examples (no
``--examples``, relations not MetaQA's), what ``simgrag ask`` runs on such an index before its first answer,
and ``simgrag learn INDEX_DIR``:

1. :func:`~simgrag.bootstrap.learn.learn_examples` writes into ``INDEX_DIR.learn/`` beside the index, its
   work area (the index directory holds only what its manifest lists, or ``simgrag check`` fails); a rerun
   goes on there;
2. the shots become the index's examples (:func:`~simgrag.bootstrap.install.install_examples`) and the
   validation questions its ``validation`` attachment (:mod:`simgrag.index.attach`), each recorded in the
   manifest with its sha256;
3. with ``fit``, the pattern stage is fitted on the validation questions
   (:func:`~simgrag.eval.fit_grounding.fit_grounding`, stored by :func:`~simgrag.grounding.fit.store_fit`)
   — on as many of them as the time budget still allows, estimated from the learning's own LLM call times
   (shapes taken in turn); learning stops writing questions early enough to leave time for
   :data:`FIT_QUESTIONS` of them once it has :data:`MIN_FIT_QUESTIONS`, and the fit asks at least that many
   while the budget lasts (not only within its first pass's share of the time); with fewer the fit is skipped, the
   stage is stored off (no edit family has shown it helps on this KG) and the report says how to fit it;
4. what it cost — seconds, LLM calls, peak RSS — and what it made is recorded in the manifest under
   ``learned``.

A KG that comes with examples of its own (``simgrag index --examples FILE``, or a file attached later) learns
*validation questions only* (``LearnSettings(validation_only=True)``): its examples stay the prompt's, and the
pattern stage is fitted with them on questions they never saw — unfitted, every edit family runs, and edits read
off other KGs dropped correct hops of a genealogy KG asked by synonyms (issue 41).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simgrag.answer.mode_fit import store_answer_mode
from simgrag.bootstrap.install import install_examples
from simgrag.bootstrap.learn import (
    FIT_QUESTION_SHARE,
    MIN_FIT_QUESTIONS,
    LearnReport,
    LearnSettings,
    expected_llm_calls,
    learn_examples,
    peak_rss_mb,
)
from simgrag.errors import ConfigError
from simgrag.eval.fit_grounding import fit_answer_mode, fit_grounding
from simgrag.eval.runner import QAItem, load_qa_file
from simgrag.grounding.fit import GroundingFit, store_fit
from simgrag.index.attach import attach_file, read_manifest_json, write_manifest
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.llm.base import LLM
from simgrag.llm.cache import CachedLLM
from simgrag.llm.counting import CountingLLM

__all__ = ["FIT_QUESTIONS", "LEARNED_KEY", "MIN_FIT_QUESTIONS", "LearnKGReport", "expected_seconds", "learn_dir",
           "learn_kg"]

logger = logging.getLogger(__name__)

#: the manifest section that records a learning run
LEARNED_KEY = "learned"
#: the work area's folder of a run that learns validation questions alone (:func:`learn_dir`)
VALIDATION_ONLY_DIR = "validation"
#: the validation questions the fit wants time for: learning stops that much early once it has enough of them
#: (:meth:`~simgrag.bootstrap.learn.LearnSettings.fit_reserve_s`)
FIT_QUESTIONS = 16
#: the answer-mode fit runs after the stage fit only when the budget leaves this share of the stage fit's time (its
#: LLM answer calls: 90 s against the stage fit's 80 s on genealogy's 9 learned validation questions)
ANSWER_FIT_SHARE = 1.0
#: seconds per LLM call assumed before a run has timed one: the embedded model on this many CPU cores
#: (measured: ~17 s per batched call on 2 cores), or a server
LOCAL_CALL_CORE_S = 34.0
SERVER_CALL_S = 4.0


def learn_dir(index_dir: str | Path, validation_only: bool = False) -> Path:
    """The work area of ``index_dir``'s learning: ``INDEX_DIR.learn/`` beside it; ``validation_only``: its
    ``validation/`` folder (a run that learns validation questions alone never clears the examples a full run
    left there, which the user may be editing)."""
    root = Path(index_dir)
    work = root.with_name(root.name + ".learn")
    return work / VALIDATION_ONLY_DIR if validation_only else work


def expected_seconds(index: IndexDir, settings: LearnSettings, llm_name: str) -> tuple[int, float]:
    """The LLM calls a fresh learning run on ``index`` is expected to make, and the seconds they are
    expected to take with the LLM ``llm_name`` (at most the budget)."""
    calls = expected_llm_calls(index, settings)
    per_call = LOCAL_CALL_CORE_S / max(1, os.cpu_count() or 1) if llm_name.startswith("llamacpp") else SERVER_CALL_S
    return calls, min(settings.budget_s, calls * per_call)


@dataclass(frozen=True)
class LearnKGReport:
    """A :func:`learn_kg` run: the learning's report, the fit (``None``: not fitted, ``fit_note`` says why),
    and the whole run's seconds, LLM calls and peak RSS."""

    index: Path
    learned: LearnReport
    fit: GroundingFit | None
    fit_note: str
    fit_questions: int
    seconds: float
    llm_calls: int
    peak_rss_mb: float
    #: lookups a call cache under the LLM answered, and those it passed to the model (``None``: no cache); counted
    #: as the cache counts them (a batched call is a lookup per request), so not a share of ``llm_calls``
    cache_hits: int | None = None
    cache_misses: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": str(self.index), "learned": self.learned.to_dict(),
                "fit": None if self.fit is None else self.fit.to_dict(), "fit_note": self.fit_note,
                "fit_questions": self.fit_questions, "seconds": self.seconds, "llm_calls": self.llm_calls,
                "cache_hits": self.cache_hits, "cache_misses": self.cache_misses, "peak_rss_mb": self.peak_rss_mb}

    def lines(self, budget_s: float | None = None) -> list[str]:
        """What the command line prints."""
        attached = (f"Attached to {self.index}: {self.learned.shots} examples (its default from now on)"
                    + (f" and {self.learned.validation} validation questions" if self.learned.validation else "")
                    if self.learned.shots else
                    f"Attached to {self.index}: {self.learned.validation} validation questions (its examples stay "
                    "its own)")
        lines = [self.learned.summary(budget_s), attached,
                 self.fit_note,
                 f"Learning took {self.seconds:.0f} s, {self.llm_calls} LLM calls"
                 + (f" (the call cache answered {self.cache_hits} lookups, passed {self.cache_misses} to the model)"
                    if self.cache_hits is not None else "")
                 + f", peak RSS {self.peak_rss_mb:.0f} MB."]
        if not self.learned.complete and self.learned.stopped != "samples":
            lines.append(f"Run `simgrag learn {self.index}` to go on where it stopped.")
        return lines


def learn_kg(index_dir: str | Path, llm: LLM, settings: LearnSettings | None = None, *,
             progress: bool | None = None, fit: bool = True, resume: bool = True,
             sampled: bool = False, variant: bool = False) -> LearnKGReport:
    """Learn the examples and validation questions of the index ``index_dir``, attach them, fit the pattern
    stage on them (``fit``; ``sampled``: the fit also tries the patterns the LLM samples, ``variant``: the pattern it
    writes with more examples shown, :func:`~simgrag.eval.fit_grounding.fit_grounding`) and record the cost (module
    docstring).
    ``settings.budget_s`` bounds the whole run. Raises :class:`~simgrag.errors.ConfigError` when no example was
    kept (the progress is kept: run again to go on), and LLM errors as they come."""
    settings = settings or LearnSettings()
    root, t0 = Path(index_dir), time.perf_counter()
    counted = CountingLLM(llm)
    cache = llm if isinstance(llm, CachedLLM) else None
    before = (cache.hits, cache.misses) if cache is not None else (0, 0)
    if fit and settings.fit_questions == 0:  # learning keeps time for the fit: on all the questions asked for
        wanted = settings.validation_questions if settings.more_validation else FIT_QUESTIONS  # beyond the default
        settings = replace(settings, fit_questions=wanted)
    work = learn_dir(root, settings.validation_only)
    learned = learn_examples(open_index_dir(root), counted, work, settings, progress=progress, resume=resume)
    made = learned.validation_file if settings.validation_only else learned.examples_file
    if made is None:
        what = "validation question" if settings.validation_only else "example"
        raise ConfigError(f"Learning kept no {what} for {root}: {learned.summary(settings.budget_s)}. The "
                          f"progress is kept in {work}: run `simgrag learn {root}` again to go on (a "
                          "larger --learn-budget gives it more time), or use another LLM (--llm).")
    if learned.examples_file is not None:
        install_examples(root, learned.examples_file, info={"bootstrapped": True, "learned": True,
                                                            "llm": counted.name, "complete": learned.complete,
                                                            "settings": settings.logged()})
    if learned.validation_file is not None:
        attach_file(root, "validation", learned.validation_file,
                    info={"questions": learned.validation, "learned": True, "llm": counted.name})
    fitted, note, used = _fit(root, counted, learned, settings, t0, fit, progress, sampled, variant)
    seconds = round(time.perf_counter() - t0, 1)
    hits, misses = (cache.hits - before[0], cache.misses - before[1]) if cache is not None else (None, None)
    report = LearnKGReport(root, learned, fitted, note, used, seconds, counted.calls, round(peak_rss_mb(), 1), hits,
                           misses)
    _record(root, report, counted.name)
    return report


def _fit(root: Path, llm: CountingLLM, learned: LearnReport, settings: LearnSettings, t0: float, fit: bool,
         progress: bool | None, sampled: bool = False,
         variant: bool = False) -> tuple[GroundingFit | None, str, int]:
    """The fit on the validation questions the budget leaves time for; its note and question count."""
    command = (f"simgrag grounding fit {root} --questions {learned.validation_file}"
               + (" --llm-samples" if sampled else "") + (" --llm-variant" if variant else ""))
    if not fit:
        return None, "Pattern stage not fitted (--no-fit): every edit family runs.", 0
    if learned.validation_file is None:
        return _floor(root, "no validation questions", "")
    items = load_qa_file(learned.validation_file)
    if len(items) < MIN_FIT_QUESTIONS:
        return _floor(root, f"{len(items)} validation questions, fewer than {MIN_FIT_QUESTIONS}", command)
    per_question = FIT_QUESTION_SHARE * learned.seconds_per_call
    left = settings.budget_s - (time.perf_counter() - t0)
    n = len(items) if per_question <= 0 else min(len(items), int(max(0.0, left) // per_question))
    if n < MIN_FIT_QUESTIONS:
        return _floor(root, f"the budget leaves {max(0.0, left):.0f} s, about {n} validation questions' worth (it "
                            f"needs {MIN_FIT_QUESTIONS})", command)
    chosen = _interleaved(items, n)
    logger.info("fitting the pattern stage on %d of %d validation questions", n, len(items))
    index = open_index_dir(root)
    with tempfile.TemporaryDirectory(prefix="simgrag-learn-fit-") as tmp:
        calls = Path(tmp) / "calls.sqlite"  # the answer-mode fit reuses the stage fit's pattern calls
        started = time.perf_counter()
        found = fit_grounding(index, llm, chosen, progress=progress, source="bootstrapped validation",
                              calls_cache=calls, deadline_s=max(0.0, settings.budget_s - (time.perf_counter() - t0)),
                              sampled=sampled, variant=variant, min_questions=MIN_FIT_QUESTIONS)
        found = replace(found, info={**found.info, "learned": True})
        n = int(found.info.get("questions", n))  # the deadline may have reached fewer: the first n, asked in order
        if n < MIN_FIT_QUESTIONS:
            return _floor(root, f"the budget let the fit reach {n} validation questions (it needs "
                                f"{MIN_FIT_QUESTIONS})", command)
        store_fit(root, found)
        chosen = chosen[:n]
        took, left = time.perf_counter() - started, settings.budget_s - (time.perf_counter() - t0)
        thin = _thin(n, len(items), command)
        if left < ANSWER_FIT_SHARE * took:  # its LLM answer calls cost about as much as the stage fit's pattern calls
            store_answer_mode(root, None)  # a mode fitted on earlier validation questions does not stay
            return found, (f"Pattern stage fitted on {n} validation questions: {found.describe()}; answer mode not "
                           f"fitted (the budget leaves {max(0.0, left):.0f} s, the stage fit took {took:.0f} s): auto. "
                           f"Fit both later{' on all of them' if thin else ''}: {command}"), n
        mode = fit_answer_mode(index, llm, chosen, found, progress=progress, source="bootstrapped validation",
                               calls_cache=calls)
        store_answer_mode(root, replace(mode, info={**mode.info, "learned": True}))
    return found, (f"Pattern stage fitted on {n} validation questions: {found.describe()}; "
                   f"answer mode: {mode.describe()}{thin}"), n


def _thin(n: int, made: int, command: str) -> str:
    """What to say when the budget let the fit reach ``n`` of the ``made`` validation questions: a fit on a few can
    show no gain (the company KG's stage stayed off on 8 of 25 on a slow machine; its 25 turn it on)."""
    if n >= made:
        return ""
    return f". The budget reached {n} of the {made} validation questions; to fit on all of them: {command}"


def _floor(root: Path, reason: str, command: str) -> tuple[GroundingFit, str, int]:
    """Where the fit cannot run, the stage is stored off (the LLM's own patterns: no edit family has shown on this
    KG that it helps, and unfitted they can lower it), answers from exact bindings; ``grounding fit`` replaces it."""
    floor = GroundingFit(enabled=False, info={"learned": True, "unfitted": reason})
    store_fit(root, floor)
    store_answer_mode(root, None)
    later = f" Fit it later: {command}" if command else ""
    return floor, f"Pattern stage not fitted: {reason}; it stays off (the LLM's own patterns).{later}", 0


def _interleaved(items: Sequence[QAItem], n: int) -> list[QAItem]:
    """The first ``n`` of ``items`` taking their groups (shapes) in turn, each group in its order."""
    groups: dict[str, list[QAItem]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    out: list[QAItem] = []
    depth = 0
    while len(out) < min(n, len(items)):
        out += [g[depth] for g in groups.values() if depth < len(g)][:n - len(out)]
        depth += 1
    return out


def _record(root: Path, report: LearnKGReport, llm: str) -> None:
    """The run's cost and results in the manifest under :data:`LEARNED_KEY`."""
    manifest = read_manifest_json(root)
    learned = report.learned
    manifest[LEARNED_KEY] = {
        "seconds": report.seconds, "llm_calls": report.llm_calls, "cache_hits": report.cache_hits,
        "cache_misses": report.cache_misses,
        "peak_rss_mb": report.peak_rss_mb, "llm": llm,
        "examples": learned.shots, "validation": learned.validation, "stopped": learned.stopped,
        "learning_seconds": learned.seconds, "learning_llm_calls": learned.llm_calls,
        "fit_questions": report.fit_questions, "fit": report.fit_note, "work_dir": str(learned.out_dir),
        "learned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_manifest(root, manifest)
