"""The claim-verification benchmark: run :meth:`SimGRAG.verify` over generated claims, score by shape.

Claims come from :mod:`simgrag.eval.claims`; one JSON line per claim is written, and the summary has
accuracy overall, per shape and per gold label, abstentions, errors by stage and latency.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import LLMError, MatchError, PatternError, SimGRAGError
from simgrag.eval.claims import Claim
from simgrag.progress import progress_on

__all__ = ["Verifier", "format_claims_summary", "run_claims_bench", "summarize_claim_records"]

logger = logging.getLogger(__name__)


class Verifier(Protocol):
    """What the runner needs: :meth:`simgrag.pipeline.SimGRAG.verify`."""

    def verify(self, claim: str) -> Any: ...


def _stage(exc: SimGRAGError) -> str:
    for kind, stage in ((PatternError, "pattern"), (LLMError, "llm"), (MatchError, "match")):
        if isinstance(exc, kind):
            return stage
    return "other"


def _record(claim: Claim, t0: float, errors_as: str, result: Any = None,
            error: SimGRAGError | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"claim": claim.text, "gold": claim.label, "shape": claim.shape,
                           "facts": [list(f) for f in claim.facts], "corruption": claim.corruption}
    if error is not None:
        rec.update(predicted=None, label_binary="Refuted", abstained=False, pattern=[], evidence=[], gsd=None,
                   timings={"total_s": time.perf_counter() - t0},
                   error={"stage": _stage(error), "type": type(error).__name__, "message": str(error)[:500]})
    else:
        verdict = result.verdict
        top = verdict.evidence.evidence[0] if verdict.evidence.evidence else None
        rec.update(predicted=verdict.label, label_binary=verdict.label_binary, abstained=verdict.abstained,
                   pattern=[list(t) for t in result.pattern.pattern.triples()],
                   evidence=[list(t.as_tuple()) for t in top.triples()] if top else [],
                   gsd=None if top is None else float(top.gsd), timings=dict(result.timings), error=None)
    rec["correct"] = rec["label_binary"] == claim.label and (error is None or errors_as == "refuted")
    return rec


def run_claims_bench(engine: Verifier, claims: Sequence[Claim], *, out_path: str | Path, progress: bool | None = None,
                     errors_as: Literal["refuted", "wrong"] = "refuted") -> dict[str, Any]:
    """Verify every claim with ``engine``, write one JSON line per claim to ``out_path`` and return
    :func:`summarize_claim_records` of them. A :class:`SimGRAGError` on a claim is recorded (stage
    ``pattern``/``llm``/``match``/``other``) and scored as a Refuted verdict (``errors_as="refuted"``,
    as FactKG scores "not enough evidence") or as a wrong one (``errors_as="wrong"``)."""
    records = []
    with Path(out_path).open("w", encoding="utf-8") as fh:
        for claim in tqdm(claims, desc="claims", unit="claim", disable=not progress_on(progress)):
            t0 = time.perf_counter()
            try:
                rec = _record(claim, t0, errors_as, result=engine.verify(claim.text))
            except SimGRAGError as exc:
                logger.warning("claim %r failed at the %s stage: %s", claim.text, _stage(exc), exc)
                rec = _record(claim, t0, errors_as, error=exc)
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            records.append(rec)
    summary = summarize_claim_records(records)
    summary["out_path"] = str(out_path)
    return summary


def _accuracy(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    correct = sum(bool(r["correct"]) for r in records)
    return {"n": len(records), "correct": correct, "accuracy": correct / len(records) if records else 0.0}


def _latency(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for key in ("pattern_s", "answer_s", "total_s"):
        values = np.array([r["timings"][key] for r in records if r["error"] is None and key in r["timings"]])
        if len(values):
            out[key] = {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95))}
    return out


def summarize_claim_records(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy overall / per shape / per gold label, abstentions, errors by stage, latency."""
    def group(key: str) -> dict[str, dict[str, Any]]:
        return {v: _accuracy([r for r in records if r[key] == v]) for v in sorted({r[key] for r in records})}

    return {**_accuracy(records), "by_shape": group("shape"), "by_gold": group("gold"),
            "not_enough_evidence": sum(r["predicted"] == "Not enough evidence" for r in records),
            "abstained": sum(bool(r["abstained"]) for r in records),
            "errors": dict(Counter(r["error"]["stage"] for r in records if r["error"] is not None)),
            "latency": _latency(records)}


def format_claims_summary(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown: an accuracy table, then counts and a latency table."""
    lines = ["| group | n | correct | accuracy |", "|---|---:|---:|---:|",
             f"| all | {summary['n']} | {summary['correct']} | {summary['accuracy']:.3f} |"]
    for kind in ("by_shape", "by_gold"):
        for name, acc in summary[kind].items():
            lines.append(f"| {kind[3:]}: {name} | {acc['n']} | {acc['correct']} | {acc['accuracy']:.3f} |")
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(summary["errors"].items())) or "none"
    lines += ["", f"Not enough evidence: {summary['not_enough_evidence']} (abstained: {summary['abstained']}); "
              f"errors: {errors}", "", "| stage | p50 (s) | p95 (s) |", "|---|---:|---:|"]
    lines += [f"| {k} | {v['p50']:.3f} | {v['p95']:.3f} |" for k, v in summary["latency"].items()]
    return "\n".join(lines)
