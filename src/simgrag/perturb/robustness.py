"""Retrievers on perturbed KGs: Hits@1 and score_h against the perturbation level (OKGQA-P, §5.2, Fig. 5).

For the original KG (level 0) and each ``METHOD:LEVEL`` (:func:`parse_perturb_specs`), the same
questions go through :func:`~simgrag.eval.compare.run_retriever_comparison` on that KG::

    OUT/original/             the comparison on the original KG (its JSONL, summary.json, comparison.md, PNGs)
    OUT/<method>-<level>/     the same on each perturbed KG, e.g. OUT/rs-0.3/
    OUT/robustness.json       every (method, level, retriever) row and the KG similarity of each perturbed KG
    OUT/robustness.md         the table: method, level, retriever, Hits@1, score_h, answer recall, SD2, SC2D (ATS)
    OUT/hits1_vs_level.png, OUT/score_h_vs_level.png    one curve per (method, retriever), level 0 = original

A perturbed KG is :func:`simgrag.perturb.perturb` of the base index's store with ``seed``; its index
directory is derived from the base (:func:`simgrag.index.derive.derive_index_dir`: the entity vectors
are reused, nothing is re-embedded but relation labels when needed) and cached under
``<cache>/derived/<base KG hash>-<method>-<level>-s<seed>.idx``, with SD2/SC2D in its manifest, so a
rerun builds nothing. ``rr`` (and ATS, when asked) need the DistMult triple scorer of the base KG:
trained once and cached under ``<cache>/scorers/distmult-<base KG hash>``.

Resuming: a sub-run whose ``done.json`` names the same retrievers and questions is skipped; an
interrupted one resumes question by question (the comparison's own resume).

The SimGRAG engine of a perturbed KG is the given engine with the index swapped
(:func:`simgrag.eval.subrun.engines_for`): the LLM, the few-shot examples and the settings are shared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgrag.config import cache_dir
from simgrag.errors import ConfigError, IndexDirError
from simgrag.eval.plots import pyplot
from simgrag.eval.runner import QAItem
from simgrag.eval.subrun import run_sub_comparison
from simgrag.fileio import write_bytes_atomic
from simgrag.index.derive import derive_index_dir, derived_cache_path, same_tables_store
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.perturb.base import TripleScorer
from simgrag.perturb.methods import METHODS, perturb
from simgrag.perturb.scorer import DistMultScorer, ScorerConfig, train_scorer
from simgrag.perturb.similarity import ats, kg_similarity
from simgrag.pipeline import SimGRAG

__all__ = [
    "PerturbSpec",
    "format_robustness",
    "parse_perturb_specs",
    "perturbed_index",
    "plot_robustness",
    "run_robustness",
    "scorer_for",
]

logger = logging.getLogger(__name__)

ORIGINAL = "original"
#: summary key → (label, percentage?) of the curves and of the table
CURVES: dict[str, tuple[str, bool]] = {"hits1": ("Hits@1", True), "score_h": ("score_h", False)}


@dataclass(frozen=True)
class PerturbSpec:
    """One perturbed KG to measure: a method code (rs, rr, er, ed) and a level in (0, 1]."""

    method: str
    level: float

    @property
    def key(self) -> str:
        """The sub-run folder name, e.g. ``rs-0.3``."""
        return f"{self.method}-{self.level:g}"


def parse_perturb_specs(specs: Sequence[str]) -> list[PerturbSpec]:
    """``["rs:0.1,0.3", "ed:0.3"]`` → one :class:`PerturbSpec` per (method, level), in order, no repeats."""
    out: dict[tuple[str, float], PerturbSpec] = {}
    for spec in specs:
        method, sep, levels = spec.partition(":")
        code = method.strip().lower()
        if not sep or code not in METHODS or not levels.strip():
            raise ConfigError(f"--perturb expects METHOD:LEVEL[,LEVEL…] with METHOD one of "
                              f"{', '.join(METHODS)}, got {spec!r}")
        for text in levels.split(","):
            try:
                level = float(text)
            except ValueError as exc:
                raise ConfigError(f"--perturb {spec!r}: {text!r} is not a number") from exc
            if not 0.0 < level <= 1.0:
                raise ConfigError(f"--perturb {spec!r}: a level is a fraction of the edges in (0, 1], got {level}")
            out.setdefault((code, level), PerturbSpec(code, level))
    return list(out.values())


def scorer_for(base: IndexDir, *, cache: str | Path | None = None, epochs: int | None = None) -> TripleScorer:
    """The DistMult scorer of ``base``'s KG: loaded from the cache, else trained (CPU) and cached."""
    directory = cache_dir(cache) / "scorers" / f"distmult-{base.manifest['kg']['content_hash'][:16]}"
    if DistMultScorer.exists(directory):
        return DistMultScorer.load(directory, store=base.store)
    logger.info("training the DistMult triple scorer of %s (once; cached in %s)", base.path, directory)
    scorer = train_scorer(base.store, ScorerConfig() if epochs is None else ScorerConfig(epochs=epochs))
    scorer.save(directory)
    return scorer


def perturbed_index(base: IndexDir, spec: PerturbSpec, *, seed: int = 0, cache: str | Path | None = None,
                    scorer: TripleScorer | None = None) -> IndexDir:
    """The index directory of ``base``'s KG perturbed by ``spec`` with ``seed``, derived once and cached.

    Its manifest's ``derived_from`` holds the perturbation summary and SD2/SC2D against the base.
    """
    kg_hash = base.manifest["kg"]["content_hash"]
    path = derived_cache_path(base, f"{spec.key}-s{seed}", cache)
    if (path / "manifest.json").is_file():
        try:
            cached = open_index_dir(path, embedder=base.embedder)
            info = cached.manifest.get("derived_from", {})
            if info.get("kg_content_hash") == kg_hash and info.get("perturbation", {}).get("seed") == seed:
                return cached
        except IndexDirError as exc:
            logger.warning("rebuilding %s: %s", path, exc)
    if spec.method == "rr" and scorer is None:
        scorer = scorer_for(base, cache=cache)
    result = perturb(base.store, spec.method, spec.level, seed=seed, scorer=scorer)
    store = same_tables_store(base.store, result.heads, result.rels, result.tails)
    similarity = kg_similarity(base.store, result)
    derivation = {"perturbation": result.summary(), "similarity": similarity.to_dict()}
    logger.info("%s (seed %d): %d edges changed; SD2 %.4f SC2D %.4f", spec.key, seed, result.num_changed,
                similarity.sd2, similarity.sc2d)
    return derive_index_dir(base, store, path, derivation=derivation, overwrite=True)


def _similarity(base: IndexDir, derived: IndexDir, scorer: TripleScorer | None) -> dict[str, Any]:
    sim = dict(derived.manifest.get("derived_from", {}).get("similarity") or {})
    if scorer is not None:
        sim["ats"] = ats(scorer, derived.store, trained_on=base.store)
    return sim


def _rows(method: str, level: float, summary: Mapping[str, Any], kg: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, per in summary.items():
        s = per["overall"]
        rows.append({"method": method, "level": level, "retriever": name, "questions": s["questions"],
                     "errors": s["errors"], "hits1": s["hits1"], "score_h": s["score_h"],
                     "answer_recall": s["answer_recall"], **kg})
    return rows


def run_robustness(engine: SimGRAG, items: Sequence[QAItem], retrievers: Sequence[str],
                   specs: Sequence[PerturbSpec], out_dir: str | Path, *, seed: int = 0,
                   model_dirs: Mapping[str, str] | None = None, cache: str | Path | None = None,
                   with_ats: bool = False, plots: bool = True,
                   progress: bool | None = None) -> dict[str, Any]:
    """The comparison on the original KG and on each perturbed KG; writes the files of the module docstring."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [n.strip().lower() for n in retrievers if n.strip()]
    if not names:
        raise ConfigError("give at least one retriever (--retriever simgrag,kaping,…)")
    base = engine.index
    scorer = scorer_for(base, cache=cache) if with_ats or any(s.method == "rr" for s in specs) else None
    ats_scorer = scorer if with_ats else None
    base_kg: dict[str, Any] = {"sd2": 1.0, "sc2d": 1.0, "changed": 0, "triples": base.store.num_triples}
    if ats_scorer is not None:
        base_kg["ats"] = ats(ats_scorer, base.store)
    summary = run_sub_comparison(engine, names, items, out / ORIGINAL, model_dirs=model_dirs, progress=progress)
    rows = _rows(ORIGINAL, 0.0, summary, base_kg)
    kgs: dict[str, Any] = {ORIGINAL: {"index": str(base.path), **base_kg}}
    for spec in specs:
        derived = perturbed_index(base, spec, seed=seed, cache=cache, scorer=scorer)
        pert = derived.manifest["derived_from"].get("perturbation", {})
        kg = {**_similarity(base, derived, ats_scorer), "changed": pert.get("changed"),
              "triples": derived.store.num_triples}
        kgs[spec.key] = {"index": str(derived.path), **kg}
        summary = run_sub_comparison(engine, names, items, out / spec.key, index=derived, model_dirs=model_dirs,
                                     progress=progress)
        rows += _rows(spec.method, spec.level, summary, kg)
    result = {"seed": seed, "questions": len(items), "retrievers": names,
              "perturbations": [s.key for s in specs], "kgs": kgs, "rows": rows}
    write_bytes_atomic(out / "robustness.json", (json.dumps(result, indent=2) + "\n").encode("utf-8"))
    write_bytes_atomic(out / "robustness.md", (format_robustness(result) + "\n").encode("utf-8"))
    if plots:
        plot_robustness(result, out)
    return result


def _num(value: Any, percent: bool, digits: int = 1) -> str:
    if value is None or value != value:
        return "–"
    return f"{100 * float(value):.{digits}f}" if percent else f"{float(value):.{digits}f}"


def format_robustness(result: Mapping[str, Any]) -> str:
    """The Markdown table of :func:`run_robustness`'s result (a row per method, level and retriever)."""
    rows = result["rows"]
    with_ats = any("ats" in r for r in rows)
    header = "| method | level | retriever | n | errors | Hits@1 | score_h | ans. recall | edges changed | SD2 | SC2D |"
    rule = "|---|---|---|---|---|---|---|---|---|---|---|"
    if with_ats:
        header, rule = header + " ATS |", rule + "---|"
    lines = ["# Robustness to KG perturbations (OKGQA-P)", "",
             f"{result['questions']} questions, perturbation seed {result['seed']}. Hits@1 and answer recall in %, "
             "score_h on 0–100; SD2 / SC2D (and ATS) compare each perturbed KG with the original (1 = same).",
             "", header, rule]
    for r in rows:
        line = (f"| {r['method']} | {r['level']:g} | {r['retriever']} | {r['questions']} | {r['errors']} | "
                f"{_num(r['hits1'], True)} | {_num(r['score_h'], False)} | {_num(r['answer_recall'], True)} | "
                f"{r.get('changed', '–')} | {_num(r.get('sd2'), False, 4)} | {_num(r.get('sc2d'), False, 4)} |")
        if with_ats:
            line += f" {_num(r.get('ats'), False, 4)} |"
        lines.append(line)
    return "\n".join(lines)


def plot_robustness(result: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """``hits1_vs_level.png`` and ``score_h_vs_level.png``: a curve per (method, retriever) from level 0
    (the original KG) through the method's levels (OKGQA Fig. 5; ``simgrag[bench]``)."""
    plt = pyplot()

    rows = result["rows"]
    methods = list(dict.fromkeys(r["method"] for r in rows if r["method"] != ORIGINAL))
    styles = ["-", "--", ":", "-."]
    written = []
    for key, (label, percent) in CURVES.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for i, name in enumerate(result["retrievers"]):
            start = [r for r in rows if r["method"] == ORIGINAL and r["retriever"] == name]
            for j, method in enumerate(methods or [ORIGINAL]):
                points = sorted((r["level"], r[key]) for r in rows
                                if r["method"] == method and r["retriever"] == name and method != ORIGINAL)
                xs = [0.0, *[p[0] for p in points]]
                ys = [start[0][key] if start else None, *[p[1] for p in points]]
                values = [float("nan") if y is None else float(y) * (100 if percent else 1) for y in ys]
                ax.plot(xs, values, styles[i % len(styles)], marker="o", color=f"C{j}",
                        label=f"{method} / {name}" if methods else name)
        ax.set_xlabel("perturbation level (fraction of edges changed)")
        ax.set_ylabel(label + (" (%)" if percent else ""))
        ax.set_title(f"{label} vs perturbation level")
        if percent:
            ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.tight_layout()
        path = Path(out_dir) / f"{key}_vs_level.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
