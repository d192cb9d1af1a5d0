"""Question-answering benchmark runner: MetaQA (with gold chains) or any ``{"question", "answers"}`` file.

Per question it records the pattern, the answer, both hit criteria and where a miss came from:

- *strict* hit, reported as **Hits@1**: the first answer (the short answer) is a gold answer;
- *lenient* hit (SimGRAG's criterion), reported as "any answer": some gold answer appears in the output
  (the LLM's reply or the answer entities). It can mislead: a pattern that names no entity binds every
  node of a kind, and its answer set holds the gold answer whatever the question asked;
- error stage (paper Table 2), decided automatically: ``pattern`` when the pattern does not fit the
  gold chain (MetaQA only) or could not be produced; ``retrieval`` when no gold answer is in the
  retrieved subgraphs; ``generation`` when it was retrieved but the answer missed it.

One JSON line per question goes to ``out``; the summary has Hits@1 on all questions and on the
answerable subset, the error breakdown, latency per stage and token counts.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import DatasetError, LLMError, PatternError, SimGRAGError
from simgrag.eval.answerable import is_answerable
from simgrag.eval.metaqa import MetaQAQuestion, load_metaqa, pattern_fits_chain
from simgrag.eval.resumable import resumable_rows
from simgrag.pipeline import AskResult, SimGRAG
from simgrag.progress import progress_on

__all__ = ["QAItem", "hits_at_1", "load_qa_file", "metaqa_items", "read_question_lines", "run_qa_bench", "summarize"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QAItem:
    question: str
    answers: tuple[str, ...]
    group: str = "all"
    topic: str | None = None
    chain: str | None = None
    answerable: bool | None = None
    #: questions that share one (e.g. paraphrases of one learnt sample) count once in a fit's sign test
    cluster: str | None = None


def metaqa_items(engine: SimGRAG, metaqa_dir: str | Path, hops: Sequence[int], sample: int | None,
                 seed: int, split: str = "test") -> list[QAItem]:
    """Sampled MetaQA questions per hop (seeded), with answerability on the engine's KB."""
    items: list[QAItem] = []
    for hop in hops:
        questions: list[MetaQAQuestion] = load_metaqa(metaqa_dir, hop, split)
        if sample:
            questions = random.Random(seed + hop).sample(questions, min(sample, len(questions)))
        items += [QAItem(q.question, q.answers, f"{hop}-hop", q.topic, q.chain,
                         is_answerable(engine.index.store, q)) for q in questions]
    return items


def read_question_lines(path: str | Path) -> list[str]:
    """The lines of a questions file; a missing, unreadable or non-UTF-8 file is a :class:`DatasetError`."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the questions file {path}: {exc}") from exc


def read_jsonl(path: str | Path, what: str = "rows") -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, blank lines skipped; a file that cannot be read or a line that is not a
    JSON object is a :class:`DatasetError` naming ``path:line`` (``what`` names the file's kind in it)."""
    rows = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the {what} file {path}: {exc}") from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def load_qa_file(path: str | Path) -> list[QAItem]:
    """A JSONL file of ``{"question": …, "answers": […], "group": optional, "sample": optional}`` lines
    (``sample``: the questions that share it are paraphrases, :attr:`QAItem.cluster`)."""
    items = []
    for n, line in enumerate(read_question_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            sample = row.get("sample")
            items.append(QAItem(str(row["question"]), tuple(str(a) for a in row["answers"]),
                                str(row.get("group", "all")), cluster=None if sample is None else str(sample)))
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetError(f"{path}:{n}: expected {{\"question\": …, \"answers\": […]}} ({exc})") from exc
    if not items:
        raise DatasetError(f"{path}: no questions")
    return items


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def hits_at_1(result: AskResult, gold: set[str]) -> tuple[bool, bool]:
    """(lenient, strict) Hits@1. "Not found in the KG" is never a hit, though the nearest evidence it
    shows may hold a gold answer."""
    ans = result.answer
    if ans.abstained:
        return False, False
    gold_n = {_norm(g) for g in gold}
    said = {_norm(e) for e in ans.entities}
    text = _norm(ans.text)
    lenient = bool(said & gold_n) or any(g and g in text for g in gold_n if len(g) > 3 or g in said)
    if not ans.entities and ans.short_answer:
        lenient = lenient or _norm(ans.short_answer) in gold_n
    strict = ans.short_answer is not None and _norm(ans.short_answer) in gold_n
    return lenient, strict


def _fits(item: QAItem, result: AskResult) -> bool | None:
    """Whether the pattern fits the gold chain (MetaQA); ``None`` without a chain or a pattern."""
    if not (item.chain and item.topic) or result.pattern is None:
        return None
    return pattern_fits_chain(result.pattern.pattern, item.topic, item.chain)[0]


def _stage(item: QAItem, result: AskResult, hit: bool) -> str | None:
    """Where a miss (``hit``: the first answer) came from; ``None`` for a hit."""
    if hit:
        return None
    if _fits(item, result) is False:
        return "pattern"
    gold = {_norm(a) for a in item.answers}
    retrieved = {_norm(name) for name in result.context.entities()}
    return "generation" if gold & retrieved else "retrieval"


def _not_failed(row: dict[str, Any]) -> bool:
    """A row an earlier run finished: answered, or failed at the pattern stage (a result, not an outage)."""
    return "error" not in row or row.get("stage") == "pattern"


def _record(item: QAItem, result: AskResult | None, error: SimGRAGError | None) -> dict[str, Any]:
    row: dict[str, Any] = {"question": item.question, "gold": list(item.answers), "group": item.group,
                           "answerable": item.answerable, "chain": item.chain}
    if result is None:
        stage = "pattern" if isinstance(error, PatternError) else "llm" if isinstance(error, LLMError) else "other"
        row.update({"hit": False, "strict": False, "stage": stage, "error": str(error)})
        return row
    lenient, strict = hits_at_1(result, set(item.answers))
    ans, found = result.answer, result.pattern
    row.update({
        "hit": lenient, "strict": strict, "stage": _stage(item, result, strict),
        "retriever": result.retriever,
        "pattern": [list(t) for t in found.pattern.triples()] if found else [],
        "pattern_attempts": found.attempts if found else 0,
        "pattern_kg_repairs": list(found.kg_repairs) if found else [],
        "pattern_families": list(found.families) if found else [],
        "pattern_fits": _fits(item, result),
        "answer": ans.text, "entities": list(ans.entities), "short_answer": ans.short_answer,
        "candidates": list(ans.candidates[:10]), "abstained": ans.abstained, "timings": result.timings,
        "evidence_features": None if ans.features is None else ans.features.to_dict(),
        "tokens": {"pattern_prompt": found.prompt_tokens if found else 0,
                   "pattern_completion": found.completion_tokens if found else 0,
                   "answer_prompt": ans.prompt_tokens, "answer_completion": ans.completion_tokens},
        "top_evidence": ([list(t.as_tuple()) for t in result.evidence.evidence[0].triples()]
                         if result.evidence is not None and result.evidence.evidence else []),
    })
    return row


def _ask(engine: SimGRAG, item: QAItem) -> dict[str, Any]:
    try:
        return _record(item, engine.ask(item.question), None)
    except SimGRAGError as exc:
        logger.warning("question failed: %r: %s", item.question, str(exc).splitlines()[0])
        return _record(item, None, exc)


def run_qa_bench(engine: SimGRAG, items: Iterable[QAItem], out: str | Path, *, progress: bool | None = None,
                 resume: bool = True, on_row: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Ask every question, write one JSON line each to ``out``, return :func:`summarize` of the rows.

    ``resume``: rows already in ``out`` for the same questions are kept (those that failed with an
    LLM or other error run again), so an interrupted run goes on where it stopped."""
    rows = []
    items = list(items)
    computed = resumable_rows(out, items, functools.partial(_ask, engine), resume=resume, finished=_not_failed)
    for row in tqdm(computed, total=len(items), desc="questions", disable=not progress_on(progress)):
        rows.append(row)
        if on_row:
            on_row(row)
    return summarize(rows)


def _pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "mean": float(arr.mean())}


def _group_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    ans = [r for r in rows if r.get("answerable")]
    timed = [r for r in rows if "timings" in r]
    stages = Counter(r["stage"] for r in rows if r.get("stage"))
    return {
        "questions": n,
        "hits1": sum(r["strict"] for r in rows) / max(1, n),
        "any_answer": sum(r["hit"] for r in rows) / max(1, n),
        "not_found": sum(bool(r.get("abstained")) for r in rows) / max(1, n),
        "answerable": len(ans),
        "hits1_answerable": sum(r["strict"] for r in ans) / max(1, len(ans)),
        "any_answer_answerable": sum(r["hit"] for r in ans) / max(1, len(ans)),
        "not_found_answerable": sum(bool(r.get("abstained")) for r in ans) / max(1, len(ans)),
        "errors_by_stage": dict(stages),
        "failed": sum(1 for r in rows if "error" in r),
        "first_error": next((str(r["error"]).splitlines()[0][:300] for r in rows if "error" in r), None),
        "invalid_patterns": sum(1 for r in rows if r.get("stage") == "pattern" and "error" in r),
        "pattern_fits": sum(1 for r in rows if r.get("pattern_fits")) / max(1, n),
        "latency_s": {k: _pct([r["timings"][k] for r in timed if k in r["timings"]])
                      for k in ("pattern_s", "embed_s", "vector_s", "graph_s", "answer_s", "total_s")},
        "tokens_mean": {k: float(np.mean([r["tokens"][k] for r in timed])) if timed else 0.0
                        for k in ("pattern_prompt", "pattern_completion", "answer_prompt", "answer_completion")},
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group (e.g. hop) and overall."""
    groups = sorted({r["group"] for r in rows})
    out = {g: _group_summary([r for r in rows if r["group"] == g]) for g in groups}
    out["overall"] = _group_summary(rows)
    return out


def _p50(latency: dict[str, Any], key: str) -> float:
    return float(latency.get(key, {}).get("p50", float("nan")))


def format_summary(summary: dict[str, Any]) -> str:
    """A Markdown table of a :func:`summarize` result."""
    lines = ["| group | n | Hits@1 | any answer | answerable n | Hits@1 (ans.) | any answer (ans.) | not found | "
             "pattern fits | invalid patterns | misses pattern/retrieval/generation | failed | p50 total s | "
             "p50 pattern s | p50 answer s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for group, s in summary.items():
        e = s["errors_by_stage"]
        lat = s["latency_s"]
        lines.append(
            f"| {group} | {s['questions']} | {100 * s['hits1']:.1f} | {100 * s['any_answer']:.1f} | "
            f"{s['answerable']} | {100 * s['hits1_answerable']:.1f} | {100 * s['any_answer_answerable']:.1f} | "
            f"{100 * s['not_found']:.1f} | "
            f"{100 * s['pattern_fits']:.1f} | {s['invalid_patterns']} | "
            f"{e.get('pattern', 0)}/{e.get('retrieval', 0)}/{e.get('generation', 0)} | {s.get('failed', 0)} | "
            f"{_p50(lat, 'total_s'):.2f} | {_p50(lat, 'pattern_s'):.2f} | {_p50(lat, 'answer_s'):.2f} |")
    overall = summary.get("overall") or {}
    if overall.get("failed"):
        lines.append(f"\n{overall['failed']} of {overall['questions']} questions failed with an error (not an "
                     f"answer); the first: {overall.get('first_error')}")
    return "\n".join(lines)
