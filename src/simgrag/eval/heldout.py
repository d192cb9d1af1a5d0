"""Held-out MetaQA evaluation sets built from DEV: hand-reworded questions and leave-template-out shots.

*Reworded* (``benchmarks/heldout/metaqa_dev_reworded.jsonl``): one JSON line per question,
``{"hop": 2, "line": 1234, "question": "…"}``, where ``line`` is the 1-based line of
``{hop}-hop/vanilla/qa_dev.txt`` whose question it rewords. The file holds only our wording; the
topic, gold answers and chain are read from the dataset at run time (:func:`load_reworded`), which
also checks that every reworded question still contains its topic entity's exact text.

*Geography* (:mod:`simgrag.eval.chains`): hand-written questions over a second KG with a topic and a
relation chain; :func:`chain_items` makes them benchmark items and :func:`annotate_rows` adds each
row's chain fit (and LLM calls) after the run.

*Leave-template-out* (:func:`leave_template_out`): a question's phrasing *template* is its text with
the topic entity replaced by ``{e}`` (as in ``benchmarks/make_metaqa_examples.py``, which keeps one
DEV question per template in the examples pool). For a set of evaluated DEV questions, the LTO pool is
the pool without every example whose template is the template of an evaluated question, and without
any example whose text is an evaluated question. The file's order is kept, so the prompt's static
shots are the first ``n_static_shots`` examples that remain: a removed static shot is replaced by
the next example in the pool's order.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from simgrag.errors import DatasetError, PatternError
from simgrag.eval.answerable import is_answerable
from simgrag.eval.chains import ChainQuestion, pattern_fits_relations
from simgrag.eval.metaqa import MetaQAQuestion, load_metaqa
from simgrag.eval.runner import QAItem
from simgrag.kg.store import KGStore
from simgrag.pattern.examples import Example, ExampleSet
from simgrag.pattern.graph import Pattern

__all__ = [
    "RewordedQuestion",
    "annotate_rows",
    "chain_items",
    "dump_examples",
    "example_topic",
    "leave_template_out",
    "llm_call_stats",
    "load_reworded",
    "question_template",
    "reworded_items",
    "sample_dev_lines",
    "select_per_hop",
    "write_lto_examples",
]


@dataclass(frozen=True)
class RewordedQuestion:
    """A hand-reworded DEV question: our text, and the DEV question (topic, answers, chain) it rewords."""

    hop: int
    line: int
    question: str
    dev: MetaQAQuestion


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def question_template(question: str, topic: str) -> str:
    """The phrasing template: the first occurrence of ``topic`` replaced by ``{e}``, spaces normalised."""
    return " ".join(re.sub(re.escape(topic), "{e}", question, count=1).split())


def sample_dev_lines(questions: Sequence[MetaQAQuestion], n: int, *, seed: int,
                     exclude: Collection[str] = ()) -> list[int]:
    """``n`` 1-based line numbers drawn uniformly (seeded) among questions whose text is not in
    ``exclude``; sorted."""
    excluded = {_norm(q) for q in exclude}
    eligible = [i + 1 for i, q in enumerate(questions) if _norm(q.question) not in excluded]
    if n > len(eligible):
        raise DatasetError(f"asked for {n} questions, only {len(eligible)} are eligible")
    return sorted(random.Random(seed).sample(eligible, n))


class _HasHop(Protocol):
    @property
    def hop(self) -> int: ...


H = TypeVar("H", bound=_HasHop)


def select_per_hop(questions: Sequence[H], per_hop: int | None, seed: int) -> list[H]:
    """Per hop, ``per_hop`` questions drawn with ``random.Random(seed + hop)`` (all of them when
    ``per_hop`` is None or at least their number); file order is kept."""
    out: list[H] = []
    for hop in sorted({q.hop for q in questions}):
        of_hop = [q for q in questions if q.hop == hop]
        if per_hop is not None and per_hop < len(of_hop):
            chosen = set(random.Random(seed + hop).sample(range(len(of_hop)), per_hop))
            of_hop = [q for i, q in enumerate(of_hop) if i in chosen]
        out += of_hop
    return out


def load_reworded(path: str | Path, metaqa_dir: str | Path) -> list[RewordedQuestion]:
    """The reworded questions of ``path``, each resolved to its DEV question; raises
    :class:`DatasetError` naming ``file:line`` for a bad line, a line number outside the DEV file, a
    question without its topic's exact text, a ``[bracket]``, or a DEV line reworded twice."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"Cannot read {path}: {exc}") from exc
    dev: dict[int, list[MetaQAQuestion]] = {}
    seen: set[tuple[int, int]] = set()
    out = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        hop, line, question = _parse_reworded(text, f"{path}:{n}")
        if hop not in dev:
            dev[hop] = load_metaqa(metaqa_dir, hop, "dev")
        if not 1 <= line <= len(dev[hop]):
            raise DatasetError(f"{path}:{n}: line {line} is outside {hop}-hop qa_dev.txt ({len(dev[hop])} lines)")
        if (hop, line) in seen:
            raise DatasetError(f"{path}:{n}: {hop}-hop line {line} is reworded twice")
        seen.add((hop, line))
        original = dev[hop][line - 1]
        if original.topic not in question:
            raise DatasetError(f"{path}:{n}: {question!r} does not contain its topic entity {original.topic!r}")
        out.append(RewordedQuestion(hop, line, question, original))
    if not out:
        raise DatasetError(f"{path}: no questions")
    return out


def _parse_reworded(text: str, where: str) -> tuple[int, int, str]:
    try:
        row = json.loads(text)
        hop, line, question = row["hop"], row["line"], row["question"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{where}: expected {{\"hop\", \"line\", \"question\"}} ({exc})") from exc
    if hop not in (1, 2, 3) or not isinstance(line, int) or not isinstance(question, str) or not question.strip():
        raise DatasetError(f"{where}: hop must be 1, 2 or 3, line an integer, question non-empty text: {text!r}")
    if "[" in question or "]" in question:
        raise DatasetError(f"{where}: {question!r} keeps MetaQA's [brackets]")
    return hop, line, " ".join(question.split())


def example_topic(example: Example) -> str:
    """The entity a pool example's question is about: its only non-``UNKNOWN`` node."""
    known = example.known_texts()
    if len(known) != 1:
        raise DatasetError(f"example {example.question!r} names {len(known)} entities; a MetaQA pool example "
                           "names exactly one (its topic)")
    return known[0]


def leave_template_out(pool: ExampleSet, evaluated: Iterable[MetaQAQuestion]) -> tuple[ExampleSet, list[Example]]:
    """``pool`` without the examples whose template (or text) is that of an evaluated question;
    returns the remaining set (order kept) and the removed examples."""
    evaluated = list(evaluated)
    templates = {_norm(question_template(q.question, q.topic)) for q in evaluated}
    texts = {_norm(q.question) for q in evaluated}
    kept: list[Example] = []
    removed: list[Example] = []
    for example in pool.examples:
        template = _norm(question_template(example.question, example_topic(example)))
        (removed if template in templates or _norm(example.question) in texts else kept).append(example)
    if not kept:
        raise DatasetError("leave-template-out removed every example of the pool")
    return replace(pool, examples=tuple(kept), source=f"{pool.source} (leave-template-out)"), removed


def dump_examples(examples: ExampleSet, header: Sequence[str] = ()) -> str:
    """An examples file (YAML, the format :func:`~simgrag.pattern.examples.load_examples` reads)."""
    lines = [f"# {h}" for h in header]
    name = examples.extra.get("name")
    if name:
        lines.append(f"name: {json.dumps(str(name))}")
    if examples.relations:
        lines += ["relations:", *(f"  - {json.dumps(r, ensure_ascii=False)}" for r in examples.relations)]
    if examples.instructions:
        lines.append(f"instructions: {json.dumps(examples.instructions, ensure_ascii=False)}")
    lines.append("examples:")
    for ex in examples.examples:
        lines.append(f"  - question: {json.dumps(ex.question, ensure_ascii=False)}")
        lines.append("    triples:")
        lines += [f"      - {json.dumps(list(t), ensure_ascii=False)}" for t in ex.triples]
        if ex.divided is not None:
            lines.append(f"    divided: {json.dumps(list(ex.divided), ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def write_lto_examples(pool: ExampleSet, evaluated: Sequence[MetaQAQuestion], path: str | Path) -> ExampleSet:
    """Write the leave-template-out pool for ``evaluated`` to ``path`` (YAML) and return it."""
    kept, removed = leave_template_out(pool, evaluated)
    header = [f"Leave-template-out examples: {pool.source} without the {len(removed)} examples whose phrasing",
              f"template (or text) is that of one of {len(evaluated)} evaluated DEV questions; {len(kept)} remain,",
              "in the pool's order (the first n_static_shots are the static shots).",
              "Generated by simgrag.eval.heldout.write_lto_examples; not for the repository."]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_examples(kept, header), encoding="utf-8")
    return kept


def reworded_items(questions: Sequence[RewordedQuestion], store: KGStore, *, original: bool = False) -> list[QAItem]:
    """Benchmark items: our wording (or, with ``original``, the DEV wording), the DEV question's
    answers, topic and chain, grouped by hop, with answerability on ``store``."""
    return [QAItem(q.dev.question if original else q.question, q.dev.answers, f"{q.hop}-hop", q.dev.topic,
                   q.dev.chain, is_answerable(store, q.dev)) for q in questions]


def chain_items(questions: Sequence[ChainQuestion]) -> list[QAItem]:
    """Benchmark items for chain questions (answerable by construction). Topic and chain stay out of
    the item: the runner's own chain check reads MetaQA chains; :func:`annotate_rows` checks these."""
    return [QAItem(q.question, q.answers, f"{q.hop}-hop", answerable=True) for q in questions]


Row = dict[str, Any]


def annotate_rows(rows: Sequence[Row], *, calls: Mapping[str, int] | None = None,
                  chains: Mapping[str, ChainQuestion] | None = None,
                  kinds_of: Callable[[str], set[str]] | None = None) -> list[Row]:
    """Rows with ``llm_calls`` (from the row's timings, else ``calls`` by question text) and, for
    questions in ``chains``, ``pattern_fits`` by :func:`~simgrag.eval.chains.pattern_fits_relations`
    (a miss whose pattern does not fit becomes a ``pattern``-stage error, as the runner does for MetaQA)."""
    out = []
    for row in rows:
        row = dict(row)
        if row.get("llm_calls") is None:
            counted = (row.get("timings") or {}).get("llm_calls")
            row["llm_calls"] = int(counted) if counted is not None else (calls or {}).get(row["question"])
        question = (chains or {}).get(row["question"])
        if question is not None and kinds_of is not None:
            row["pattern_fits"] = _row_fits(row, question, kinds_of)
            if not row.get("strict", row["hit"]) and not row["pattern_fits"]:
                row["stage"] = "pattern"
        out.append(row)
    return out


def _row_fits(row: Row, question: ChainQuestion, kinds_of: Callable[[str], set[str]]) -> bool:
    triples = row.get("pattern")
    if not triples:
        return False
    try:
        pattern = Pattern.from_triples(triples)
    except PatternError:
        return False
    return pattern_fits_relations(pattern, question.topic, question.relations, kinds_of)[0]


def llm_call_stats(rows: Sequence[Row]) -> dict[str, Any]:
    """LLM calls per question over the rows that know theirs: mean, p50, max and the histogram."""
    counts = [int(r["llm_calls"]) for r in rows if r.get("llm_calls") is not None]
    if not counts:
        return {"questions": 0}
    arr = np.asarray(counts)
    return {"questions": len(counts), "mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)),
            "max": int(arr.max()), "histogram": {str(k): v for k, v in sorted(Counter(counts).items())}}
