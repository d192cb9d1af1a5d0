"""Retrievers side by side: the same questions, the same LLM and answerer, the same metrics.

Each retriever is a :class:`~simgrag.pipeline.SimGRAG` engine (usually variants of one engine, sharing
its LLM: :meth:`~simgrag.pipeline.SimGRAG.variant`), so a question goes through exactly what
``simgrag ask`` runs: retrieve (with the item's topic entity when it has one) → the answerer
(SimGRAG's own subgraph prompt and answer mode for SimGRAG, the reader style of its paper for each
other retriever, :mod:`simgrag.answer.answerer`) → score (:mod:`simgrag.eval.metrics`). A question
that raises a :class:`~simgrag.errors.SimGRAGError` gets the error recorded (scored as no answer,
empty context) and the run goes on.

``out_dir`` receives::

    <retriever>.jsonl     one line per question: context, reply, answers, metrics, timings
    summary.json          per retriever, per group (e.g. "1-hop") and "overall": the means
    comparison.md         one Markdown table per group, a row per retriever
    <metric>.png          one grouped bar chart per metric (groups on x, a bar per retriever)
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.answer.qa import Answer
from simgrag.errors import SimGRAGError
from simgrag.eval import metrics as m
from simgrag.eval.plots import pyplot
from simgrag.eval.resumable import resumable_rows
from simgrag.eval.runner import QAItem
from simgrag.pipeline import SimGRAG
from simgrag.progress import progress_on
from simgrag.retrievers.base import RetrievedContext

__all__ = ["METRICS", "format_comparison", "plot_comparison", "run_retriever_comparison", "score_row"]

logger = logging.getLogger(__name__)

#: summary key → (table header, percentage?)
METRICS: dict[str, tuple[str, bool]] = {
    "hits1": ("Hits@1", True), "hit": ("Hit", True), "macro_f1": ("Macro-F1", True),
    "precision": ("precision", True), "recall": ("recall", True),
    "score_h": ("score_h", False), "answer_recall": ("ans. recall", True),
    "context_triples": ("triples", False), "context_tokens": ("ctx tokens", False),
    "retrieve_s": ("retrieve s", False), "read_s": ("read s", False),
}


def score_row(item: QAItem, context: RetrievedContext | None, answer: Answer | None,
              count_tokens: Callable[[str], int] | None = None) -> dict[str, Any]:
    """The metrics of one question (no context / no answer count as empty / no answer)."""
    predicted = answer.entities if answer else ()
    text = answer.text if answer else ""
    entities = context.entities() if context else set()
    size = m.context_size(context, count_tokens) if context else {"triples": 0, "tokens": 0}
    precision, recall, f1 = m.f1_score(predicted, item.answers)
    return {
        "hits1": m.hits_at_1(predicted, item.answers), "hit": m.hit(text, item.answers), "f1": f1,
        "precision": precision, "recall": recall,
        "score_h": m.score_h_sample(predicted, item.answers, answerable=item.answerable is not False,
                                    context_entities=entities),
        "answer_recall": m.answer_recall(entities, item.answers),
        "context_triples": size["triples"], "context_tokens": size["tokens"],
    }


#: the metrics of an answer (``NaN`` in a retrieval-only comparison, which reads no answer)
READER_METRICS = ("hits1", "hit", "f1", "precision", "recall", "score_h")


def _one(name: str, engine: SimGRAG, item: QAItem, read: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {"retriever": name, "question": item.question, "gold": list(item.answers),
                           "group": item.group, "topic": item.topic, "answerable": item.answerable}
    context = answer = None
    topic = [item.topic] if item.topic else None
    try:
        if read:
            result = engine.ask(item.question, topic_entities=topic)
            context, answer = result.context, result.answer
            row["retrieve_s"], row["read_s"] = result.timings["retrieve_s"], result.timings["answer_s"]
        else:
            t0 = time.perf_counter()
            context = engine.retriever.retrieve(item.question, topic_entities=topic)
            row["retrieve_s"] = time.perf_counter() - t0
    except SimGRAGError as exc:
        logger.warning("%s failed on %r: %s", name, item.question, str(exc).splitlines()[0] if str(exc) else exc)
        row["error"] = f"{type(exc).__name__}: {exc}"
    row["metrics"] = score_row(item, context, answer)
    if not read:
        row["metrics"].update(dict.fromkeys(READER_METRICS, float("nan")))
    row["context"] = context.to_dict() if context else None
    row["reading"] = {k: v for k, v in answer.to_dict().items() if k != "evidence"} if answer else None
    return row


def _summarize_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def col(key: str) -> list[float]:
        return [float(r["metrics"].get(key, float("nan"))) for r in rows]  # rows of older runs may lack one

    def timing(key: str) -> float:
        values = [r[key] for r in rows if key in r]
        return float(np.median(values)) if values else float("nan")

    readings = [r["reading"] for r in rows if r.get("reading")]
    return {
        "questions": len(rows), "errors": sum(1 for r in rows if "error" in r),
        "hits1": m.mean(col("hits1")), "hit": m.mean(col("hit")), "macro_f1": m.mean(col("f1")),
        "precision": m.mean(col("precision")), "recall": m.mean(col("recall")),
        "score_h": m.score_h(col("score_h")), "answer_recall": m.mean(col("answer_recall")),
        "context_triples": m.mean(col("context_triples")), "context_tokens": m.mean(col("context_tokens")),
        "retrieve_s": timing("retrieve_s"), "read_s": timing("read_s"),
        "prompt_tokens": m.mean(float(x["prompt_tokens"]) for x in readings),
        "completion_tokens": m.mean(float(x["completion_tokens"]) for x in readings),
    }


def summarize_comparison(rows_by_retriever: Mapping[str, Sequence[dict[str, Any]]],
                         summarize_rows: Callable[[Sequence[dict[str, Any]]], dict[str, Any]] | None = None,
                         ) -> dict[str, dict[str, Any]]:
    """``{retriever: {group: summary, …, "overall": summary}}`` (timings are medians);
    ``summarize_rows`` summarizes one list of rows (default: this module's metrics)."""
    summarize = summarize_rows or _summarize_rows
    out: dict[str, dict[str, Any]] = {}
    for name, rows in rows_by_retriever.items():
        groups = sorted({r["group"] for r in rows})
        out[name] = {g: summarize([r for r in rows if r["group"] == g]) for g in groups}
        out[name]["overall"] = summarize(rows)
    return out


def _cell(value: float, percent: bool) -> str:
    if value != value:  # NaN
        return "–"
    if percent:
        return f"{100 * value:.1f}"
    size = abs(value)
    return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}" if size >= 0.1 \
        else f"{value:.3f}"


def _groups(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [*sorted({g for per in summary.values() for g in per if g != "overall"}), "overall"]


def format_comparison(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """One Markdown table per group (``overall`` last), a row per retriever."""
    groups = _groups(summary)
    header = "| retriever | n | errors | " + " | ".join(h for h, _ in METRICS.values()) + " |"
    lines = ["# Retriever comparison", "",
             "Hits@1, Hit, Macro-F1 and answer recall in %; score_h on 0–100; triples and context tokens "
             "are means; timings are medians in seconds.", ""]
    for group in groups:
        lines += [f"## {group}", "", header, "|" + "---|" * (len(METRICS) + 3)]
        for name, per in summary.items():
            if group not in per:
                continue
            s = per[group]
            cells = " | ".join(_cell(float(s[k]), pct) for k, (_, pct) in METRICS.items())
            lines.append(f"| {name} | {s['questions']} | {s['errors']} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def plot_comparison(summary: Mapping[str, Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """One PNG per metric: a bar per retriever in each group (matplotlib, Agg backend; ``simgrag[bench]``)."""
    plt = pyplot()

    names = list(summary)
    groups = _groups(summary)
    width = 0.8 / max(1, len(names))
    written = []
    for key, (label, percent) in METRICS.items():
        fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(groups) * max(1, len(names)) / 2), 3.2))
        for i, name in enumerate(names):
            values = [float(summary[name].get(g, {}).get(key, float("nan"))) * (100 if percent else 1)
                      for g in groups]
            ax.bar(np.arange(len(groups)) + i * width, np.nan_to_num(values), width, label=name)
        ax.set_xticks(np.arange(len(groups)) + width * (len(names) - 1) / 2, groups)
        ax.set_ylabel(label + (" (%)" if percent else ""))
        ax.set_title(label)
        if percent:
            ax.set_ylim(0, 100)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.tight_layout()
        path = Path(out_dir) / f"{key}.png"  # metric keys are plain identifiers
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def _file_stem(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name) or "retriever"


def _no_nan(value: Any) -> Any:
    """``value`` with NaN floats as ``None`` (strict JSON has no NaN)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def _compared(row: dict[str, Any]) -> bool:
    """A row an earlier comparison finished: it has metrics and no error."""
    return "error" not in row and "metrics" in row


def rows_by_engine(engines: Mapping[str, Any], items: Sequence[QAItem], out: Path,
                   compute: Callable[[str, Any], Callable[[QAItem], dict[str, Any]]], *, desc: str,
                   progress: bool | None, resume: bool) -> dict[str, list[dict[str, Any]]]:
    """Every engine's rows over ``items`` (``compute(name, engine)`` makes one item's row), each engine's kept
    in ``out/<name>.jsonl`` and resumed from it (:func:`~simgrag.eval.resumable.resumable_rows`), with one
    progress bar over all."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in engines}
    with tqdm(total=len(engines) * len(items), desc=desc, disable=not progress_on(progress)) as bar:
        for name, engine in engines.items():
            path = out / f"{_file_stem(name)}.jsonl"
            for row in resumable_rows(path, items, compute(name, engine), resume=resume, finished=_compared,
                                      label=name):
                rows[name].append(row)
                bar.update(1)
    return rows


def run_retriever_comparison(
    engines: Mapping[str, SimGRAG],
    items: Sequence[QAItem],
    out_dir: str | Path,
    *,
    plots: bool = True,
    progress: bool | None = None,
    resume: bool = True,
    read: bool = True,
) -> dict[str, dict[str, Any]]:
    """Ask every engine (one per retriever, by name) every item, write the files of the module
    docstring, return the summary. ``resume``: rows already in ``<retriever>.jsonl`` for the same
    questions (and without an error) are kept instead of re-run, so an interrupted run goes on where
    it stopped. ``read=False``: retrieval only — the context's metrics (answer recall, size, retrieval
    time), no reader call, the answer's metrics ``NaN`` (shown as "–"); cheap enough for every question
    when the reader is the slow part."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_by_engine(engines, items, out, lambda name, engine: functools.partial(_one, name, engine, read=read),
                          desc="retrievers x questions", progress=progress, resume=resume)
    summary = summarize_comparison(rows)
    (out / "summary.json").write_text(json.dumps(_no_nan(summary), indent=2) + "\n", encoding="utf-8")
    (out / "comparison.md").write_text(format_comparison(summary) + "\n", encoding="utf-8")
    if plots:
        plot_comparison(summary, out)
    return summary
