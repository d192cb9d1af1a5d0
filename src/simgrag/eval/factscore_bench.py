"""The KG-grounded FActScore benchmark: open answers from several retrievers, scored claim by claim.

For each retriever (a :class:`~simgrag.pipeline.SimGRAG` engine) and question: retrieve (with the
item's topic entity when it has one), write an open answer with the reader style ``"open"``
(:mod:`simgrag.answer.open`; the ``none`` retriever answers from the LLM's own knowledge), split it
into atomic claims and check each against the KG (:mod:`simgrag.eval.factscore`). Hit: the paragraph
names a gold answer. A retriever or reader that raises a :class:`~simgrag.errors.SimGRAGError` gets the
error recorded and the run goes on; such rows count only under ``errors`` and run again when the run
is resumed.

``out_dir`` receives::

    <retriever>.jsonl     one line per question: open answer, claims, per-claim verdicts, score, Hit
    summary.json          per retriever, per group (e.g. "1-hop") and "overall"
    factscore.md          one Markdown table per group, a row per retriever

LLM calls per question: the retriever's (SimGRAG: 1 pattern), 1 open answer, 1 split, and per
distinct claim 2 for ``SimGRAG.verify`` (pattern + verdict; a claim already checked in the run is
not checked again).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import SimGRAGError
from simgrag.eval import metrics as m
from simgrag.eval.compare import _cell, _groups, _no_nan, rows_by_engine, summarize_comparison
from simgrag.eval.factscore import MAX_CLAIMS, ClaimVerdict, factscore, summarize_scores
from simgrag.eval.runner import QAItem
from simgrag.llm.base import LLM
from simgrag.pipeline import SimGRAG, VerifyResult

__all__ = ["COLUMNS", "format_factscore", "run_factscore_bench", "summarize_factscore", "summarize_factscore_rows"]

logger = logging.getLogger(__name__)

#: summary key → (table header, kind: "%" percentage, "n" count, "x" number)
COLUMNS: dict[str, tuple[str, str]] = {
    "factscore": ("FActScore", "%"), "claims_per_answer": ("claims/answer", "x"), "no_claims": ("no claims", "n"),
    "unparseable": ("unparseable", "n"), "claim_errors": ("claim errors", "n"), "hit": ("Hit", "%"),
    "answer_s": ("answer s", "x"),
}


@dataclass
class _Checker:
    """What every (retriever, question) of a run shares: the LLM, the claim checker, the options and
    the verdicts so far (an identical claim from another answer is not checked twice)."""

    llm: LLM
    verify: Callable[[str], VerifyResult]
    max_claims: int
    memo: dict[str, ClaimVerdict] = field(default_factory=dict)


def _fact_row(name: str, engine: SimGRAG, item: QAItem, checker: _Checker) -> dict[str, Any]:
    row: dict[str, Any] = {"retriever": name, "question": item.question, "gold": list(item.answers),
                           "group": item.group, "topic": item.topic, "answerable": item.answerable}
    try:
        result = engine.ask(item.question, topic_entities=[item.topic] if item.topic else None)
        context, reading = result.context, result.answer
        t2 = time.perf_counter()
        scored = factscore(checker.llm, reading.text, checker.verify, question=item.question,
                           max_claims=checker.max_claims, memo=checker.memo)
    except SimGRAGError as exc:
        logger.warning("%s failed on %r: %s", name, item.question, str(exc).splitlines()[0] if str(exc) else exc)
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    reading_dict = {k: v for k, v in reading.to_dict().items() if k != "evidence"}
    row.update(answer=reading.text, context_triples=len(context.triples), reading=reading_dict,
               factscore=scored.to_dict(),
               timings={"retrieve_s": result.timings["retrieve_s"], "answer_s": result.timings["answer_s"],
                        "check_s": time.perf_counter() - t2})
    row["metrics"] = {"factscore": scored.score, "claims": len(scored.verdicts), "supported": scored.supported,
                      "unparseable": scored.split.unparseable, "hit": m.hit(reading.text, item.answers),
                      "claim_errors": sum(v.error is not None for v in scored.verdicts)}
    return row


def summarize_factscore_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The means of one retriever's rows; rows with an error count only under ``errors``."""
    done = [r["metrics"] for r in rows if "error" not in r and "metrics" in r]
    times = sorted(r["timings"]["answer_s"] for r in rows if "timings" in r)
    return {
        "questions": len(rows), "errors": len(rows) - len(done),
        **summarize_scores(x["factscore"] for x in done),
        "claims_per_answer": m.mean(float(x["claims"]) for x in done),
        "claims": sum(int(x["claims"]) for x in done), "supported": sum(int(x["supported"]) for x in done),
        "unparseable": sum(bool(x["unparseable"]) for x in done),
        "claim_errors": sum(int(x["claim_errors"]) for x in done),
        "hit": m.mean(float(x["hit"]) for x in done),
        "answer_s": times[len(times) // 2] if times else float("nan"),
    }


def summarize_factscore(rows_by_retriever: Mapping[str, Sequence[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``{retriever: {group: summary, …, "overall": summary}}``."""
    return summarize_comparison(rows_by_retriever, summarize_factscore_rows)


def format_factscore(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """One Markdown table per group (``overall`` last), a row per retriever."""
    header = "| retriever | n | errors | " + " | ".join(h for h, _ in COLUMNS.values()) + " |"
    lines = ["# KG-grounded FActScore", "",
             "FActScore: the mean, over answers with at least one claim, of the fraction of the answer's atomic "
             "claims that SimGRAG's verification finds Supported in the KG (%). Answers with no claims are counted "
             "apart (no claims), as are splitting replies that gave no claim (unparseable). Hit: the paragraph "
             "names a gold answer (%). answer s: median seconds to write the paragraph.", ""]
    for group in _groups(summary):
        lines += [f"## {group}", "", header, "|" + "---|" * (len(COLUMNS) + 3)]
        for name, per in summary.items():
            if group in per:
                s = per[group]
                cells = " | ".join(str(s[k]) if kind == "n" else _cell(float(s[k]), kind == "%")
                                   for k, (_, kind) in COLUMNS.items())
                lines.append(f"| {name} | {s['questions']} | {s['errors']} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def run_factscore_bench(
    engines: Mapping[str, SimGRAG],
    llm: LLM,
    verify: Callable[[str], VerifyResult],
    items: Sequence[QAItem],
    out_dir: str | Path,
    *,
    max_claims: int = MAX_CLAIMS,
    resume: bool = True,
    progress: bool | None = None,
) -> dict[str, dict[str, Any]]:
    """For every engine (one per retriever, by name) and item: an open answer (each engine's answerer
    with the reader style ``"open"``), its atomic claims, each checked with ``verify`` (e.g.
    ``engine.verify``); writes the files of the module docstring and returns the summary. ``resume``:
    rows already in ``<retriever>.jsonl`` without an error are kept."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    checker = _Checker(llm, verify, max_claims)

    def compute(name: str, engine: SimGRAG) -> Callable[[QAItem], dict[str, Any]]:
        return functools.partial(_fact_row, name, engine.variant(reader_style="open"), checker=checker)

    rows = rows_by_engine(engines, items, out, compute, desc="factscore", progress=progress, resume=resume)
    summary = summarize_factscore(rows)
    (out / "summary.json").write_text(json.dumps(_no_nan(summary), indent=2) + "\n", encoding="utf-8")
    (out / "factscore.md").write_text(format_factscore(summary) + "\n", encoding="utf-8")
    return summary
