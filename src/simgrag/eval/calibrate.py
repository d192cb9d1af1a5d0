"""Fitting the abstention and substitution thresholds on MetaQA DEV (:mod:`simgrag.answer.calibration`).

Data: DEV questions that the KG answers along their gold chain, asked twice — on the full KG
(*answerable*) and on the KG without the triples of every sampled question's gold-chain walks to its
gold answers (*removed*, :func:`simgrag.eval.abstention.reduced_index`, the abstention benchmark's
rule). Each ask records the evidence features of the best match (:func:`~simgrag.answer.calibration.evidence_features`),
the named-node bindings and whether the answer set holds a gold answer. Patterns come from the gold
chain (``patterns="gold"``: :func:`~simgrag.eval.gold_patterns.gold_pattern`, no LLM) or from the
retriever's own pattern stage (``"llm"``: the LLM and the KG judge, on each KG).

Fit (:func:`fit_calibration`), with ``alpha`` the Hits@1 the rule may cost on answerable questions:

- ``substitution``: the smallest distance above which at most ``alpha`` of the right answers on the
  full KG have a named binding of another name (0 when none has one);
- abstention: thresholds on the features ``named``, ``relation``, ``relation_excess``, ``gsd``,
  ``answers``, ``missing`` and ``unworded``, chosen greedily one at a time — each step takes the threshold
  that makes the rule abstain on the most removed questions whose answer set is not gold, as long as it
  abstains on at most ``alpha`` of the answerable questions answered right; a threshold sits halfway
  between the largest value it keeps and the next value seen.

Only DEV is read: :func:`run_calibration` has no split argument.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.answer.calibration import COUNT_FEATURES, FEATURES, Calibration, evidence_features, save_calibration
from simgrag.errors import DatasetError, SimGRAGError
from simgrag.eval.abstention import reduced_index, sample_answerable, supporting_edges
from simgrag.eval.gold_patterns import gold_pattern
from simgrag.eval.metaqa import MetaQAQuestion
from simgrag.eval.metrics import answers_match
from simgrag.eval.resumable import resumable_rows
from simgrag.eval.runner import QAItem, read_jsonl
from simgrag.index.directory import IndexDir
from simgrag.match.answers import names_match
from simgrag.match.retrieve import Retrieval, SubgraphRetriever
from simgrag.pattern.graph import Pattern
from simgrag.pipeline import SimGRAG
from simgrag.progress import progress_on

__all__ = ["fit_calibration", "format_calibration", "observe", "run_calibration"]

KGS = ("full", "removed")


def observe(pattern: Pattern, retrieval: Retrieval, gold: Sequence[str], repairs: Sequence[str] = (),
            unworded: int = 0) -> dict[str, Any]:
    """What the fit needs of one ask: features, named bindings, whether the answer set is gold."""
    features = evidence_features(pattern, retrieval, repairs, unworded)
    best = min(retrieval.evidence, key=lambda ev: (ev.gsd, ev.rank)) if retrieval.evidence else None
    named = [] if best is None else [
        {"node": b.pattern_node, "entity": b.entity, "distance": b.distance,
         "same_name": names_match(b.pattern_node, b.entity)} for b in best.nodes if not b.unknown]
    answers = retrieval.answer_set.names() if retrieval.answer_set is not None else ()
    return {"features": None if features is None else features.to_dict(), "named": named,
            "gold": any(answers_match(a, g) for a in answers[:1] for g in gold),
            "answers": list(answers[:10]), "pattern": [list(t) for t in pattern.triples()],
            "repairs": list(repairs)}


def _ask(item: QAItem, kgs: dict[str, Any], patterns: str, seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"group": item.group, "question": item.question, "topic": item.topic,
                           "chain": item.chain, "gold_answers": list(item.answers)}
    for name, target in kgs.items():
        try:
            if patterns == "gold":
                question = MetaQAQuestion(item.question, item.topic or "", item.answers, item.chain or "")
                pattern = gold_pattern(question, random.Random(f"{seed}:{item.question}"))
                retrieval, repairs, unworded = target.retrieve(pattern), (), 0
            else:
                context = target.retriever.retrieve(item.question)
                if context.pattern is None or context.subgraphs is None:
                    raise DatasetError(f"the {context.retriever} retriever returns no subgraphs to calibrate on")
                pattern, retrieval = context.pattern.pattern, context.subgraphs
                repairs, unworded = context.pattern.kg_repairs, context.pattern.unworded
            row[name] = observe(pattern, retrieval, item.answers, repairs, unworded)
        except SimGRAGError as exc:
            row[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return row


def _finished(row: dict[str, Any]) -> bool:
    return all(kg in row and "error" not in row[kg] for kg in KGS)


def _between(kept: float, values: np.ndarray) -> float:
    """A threshold halfway between ``kept`` and the next larger value of ``values`` (``kept`` + 10 %
    when there is none)."""
    above = values[values > kept]
    return float((kept + above.min()) / 2) if len(above) else float(kept * 1.1 + 1e-6)


def _matrix(rows: Sequence[dict[str, Any]], kg: str) -> tuple[np.ndarray, np.ndarray]:
    """Features (rows × FEATURES; a missing match → +inf everywhere) and the gold flags of one KG."""
    feats, gold = [], []
    for row in rows:
        seen = row.get(kg) or {}
        f = seen.get("features")
        feats.append([np.inf] * len(FEATURES) if f is None else [float(f.get(name, 0.0)) for name in FEATURES])
        gold.append(bool(seen.get("gold")))
    return np.asarray(feats, dtype=np.float64).reshape(len(rows), len(FEATURES)), np.asarray(gold, dtype=bool)


def _fit_substitution(rows: Sequence[dict[str, Any]], alpha: float) -> float:
    """The substitution threshold (module docstring)."""
    right = [r["full"] for r in rows if r.get("full", {}).get("gold")]
    worst = np.array([max((b["distance"] for b in seen["named"] if not b["same_name"]), default=-1.0)
                      for seen in right])
    allowed = int(np.floor(alpha * len(right)))
    flagged = np.sort(worst[worst >= 0])[::-1]  # differently named right bindings, largest distance first
    if len(flagged) <= allowed:
        return 0.0
    return float(flagged[allowed])  # flag above the (allowed+1)-th largest: at most `allowed` right ones flagged


def fit_calibration(rows: Sequence[dict[str, Any]], *, alpha: float = 0.01, info: dict[str, Any] | None = None,
                    features: Sequence[str] = FEATURES) -> Calibration:
    """Thresholds from calibration rows (module docstring), on ``features`` only (default: all)."""
    usable = [r for r in rows if _finished(r)]
    if not usable:
        raise DatasetError("no calibration rows with both KGs answered: nothing to fit")
    full, full_gold = _matrix(usable, "full")
    removed, removed_gold = _matrix(usable, "removed")
    budget = int(np.floor(alpha * len(usable)))
    limits = np.full(len(FEATURES), np.inf)

    def abstains(x: np.ndarray, lim: np.ndarray) -> np.ndarray:
        return np.asarray((x > lim).any(axis=1))

    def score(lim: np.ndarray) -> tuple[int, int]:
        return int((abstains(removed, lim) & ~removed_gold).sum()), int((abstains(full, lim) & full_gold).sum())

    best, _ = score(limits)
    while True:
        step: tuple[int, int, float] | None = None
        for j in range(len(FEATURES)):
            if FEATURES[j] not in features:
                continue
            column = full[full_gold, j]
            for value in np.unique(column[np.isfinite(column)]):
                if value >= limits[j]:
                    continue
                trial = limits.copy()
                trial[j] = value
                gain, cost = score(trial)
                if cost <= budget and gain > best and (step is None or gain > step[0]):
                    step = (gain, j, float(value))
        if step is None:
            break
        best, j, value = step
        limits[j] = value
    everything = np.concatenate([full[:, :], removed[:, :]])
    thresholds: dict[str, Any] = {}
    for j, name in enumerate(FEATURES):
        if np.isfinite(limits[j]):
            cut = _between(limits[j], everything[:, j][np.isfinite(everything[:, j])])
            thresholds[name] = int(np.floor(cut)) if name in COUNT_FEATURES else cut
    found = Calibration(substitution=_fit_substitution(usable, alpha), **thresholds)
    return replace(found, info={**dict(info or {}), **_rates(found, usable)})


def _decided(calibration: Calibration, seen: dict[str, Any]) -> tuple[bool, bool]:
    """(abstains, flags a substitution) for one observation."""
    f = seen.get("features")
    if f is None:
        return True, False
    abstain = any(getattr(calibration, n) is not None and float(f.get(n, 0.0)) > getattr(calibration, n)
                  for n in FEATURES)
    flag = any(not b["same_name"] and b["distance"] > calibration.substitution for b in seen.get("named", []))
    return abstain, flag


def _rates(calibration: Calibration, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How the calibration does on its own rows: per KG, abstain / flagged / right / wrong rates."""
    out: dict[str, Any] = {"questions": len(rows)}
    for kg in KGS:
        counts = {"abstain": 0, "flagged": 0, "right": 0, "wrong": 0}
        for row in rows:
            abstain, flag = _decided(calibration, row[kg])
            key = "abstain" if abstain else "right" if row[kg].get("gold") else "flagged" if flag else "wrong"
            counts[key] += 1
        out[kg] = {k: v / max(1, len(rows)) for k, v in counts.items()}
        out[kg + "_before"] = {"right": sum(bool(r[kg].get("gold")) for r in rows) / max(1, len(rows))}
    return out


def run_calibration(engine: SimGRAG, metaqa_dir: str | Path, out_dir: str | Path, *, hops: Sequence[int] = (1, 2, 3),
                    sample: int = 100, seed: int = 0, patterns: str = "gold", alpha: float = 0.01,
                    progress: bool | None = None, add_rows: Sequence[str | Path] = ()) -> Calibration:
    """Sample DEV questions, ask them on both KGs, fit, write ``calibration.json``, ``rows.jsonl`` and
    ``calibration.md`` into ``out_dir`` (resumable: rows already there are kept). ``add_rows``: rows of
    earlier calibration runs (``rows.jsonl``, DEV too) fitted together with these — e.g. gold-pattern
    rows, whose natural relation phrases teach the rule to tolerate paraphrases, beside LLM-pattern rows."""
    if patterns not in ("gold", "llm"):
        raise DatasetError(f"patterns must be 'gold' or 'llm', got {patterns!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base: IndexDir = engine.index
    items = sample_answerable(base.store, metaqa_dir, hops, sample, seed, split="dev")
    edges = [supporting_edges(base.store, it.topic, it.chain, it.answers) for it in items]
    removed = np.unique(np.concatenate(edges)) if edges else np.zeros(0, dtype=np.int64)
    reduced = reduced_index(base, removed, derivation={"questions": len(items), "split": "dev"})
    kgs: dict[str, Any]
    if patterns == "gold":
        kgs = {"full": _Searcher(engine.subgraphs, engine.retrieval),
               "removed": _Searcher(SubgraphRetriever(reduced), engine.retrieval)}
    else:
        kgs = {"full": engine, "removed": engine.variant(index=reduced)}
    rows = []
    computed = resumable_rows(out / "rows.jsonl", items, lambda it: _ask(it, kgs, patterns, seed), finished=_finished)
    for row in tqdm(computed, total=len(items), desc="calibration questions", disable=not progress_on(progress)):
        rows.append(row)
    extra = [row for path in add_rows for row in load_rows(path)]
    info = {"fitted_on": "MetaQA dev", "hops": list(hops), "sample_per_hop": sample, "seed": seed,
            "patterns": patterns, "alpha": alpha, "removed_triples": len(removed),
            "embedder": base.manifest.get("embedder", {}).get("name"),
            "relations": sorted(base.store.relations),  # resolve_calibration: used only on a KG of these relations
            "added_rows": {str(path): sum(1 for _ in load_rows(path)) for path in add_rows}}
    calibration = fit_calibration([*rows, *extra], alpha=alpha, info=info)
    save_calibration(calibration, out / "calibration.json")
    (out / "calibration.md").write_text(format_calibration(calibration) + "\n", encoding="utf-8")
    return calibration


class _Searcher:
    """A subgraph search with fixed settings (gold patterns need no pattern stage)."""

    def __init__(self, subgraphs: SubgraphRetriever, settings: Any) -> None:
        self.subgraphs, self.settings = subgraphs, settings

    def retrieve(self, pattern: Pattern) -> Retrieval:
        return self.subgraphs.retrieve(pattern, self.settings)


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):.1f}"


def format_calibration(calibration: Calibration) -> str:
    """Markdown: the thresholds, then the rates on the calibration questions themselves."""
    info = calibration.info
    added = info.get("added_rows") or {}
    also = "".join(f"; plus {n} rows of {path}" for path, n in added.items())
    lines = ["# Abstention calibration", "",
             f"Fitted on {info.get('fitted_on')} ({info.get('questions')} questions, hops {info.get('hops')}, "
             f"patterns: {info.get('patterns')}{also}, alpha {info.get('alpha')}).", "",
             "| threshold | value |", "|---|---|", f"| substitution | {calibration.substitution:.4g} |"]
    lines += [f"| {name} | {'–' if getattr(calibration, name) is None else f'{getattr(calibration, name):.4g}'} |"
              for name in FEATURES]
    lines += ["", "| KG | abstain % | flagged substitution % | right % | wrong % | right before % |",
              "|---|---|---|---|---|---|"]
    for kg in KGS:
        r = info.get(kg, {})
        lines.append(f"| {kg} | {_pct(r.get('abstain'))} | {_pct(r.get('flagged'))} | {_pct(r.get('right'))} | "
                     f"{_pct(r.get('wrong'))} | {_pct(info.get(kg + '_before', {}).get('right'))} |")
    return "\n".join(lines)


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows written by :func:`run_calibration` (to refit with another ``alpha``)."""
    return read_jsonl(path, "calibration rows")
