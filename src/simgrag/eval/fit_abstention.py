"""Abstention thresholds fitted on one KG's own validation questions, stored with its index.

The thresholds of the "not found in the KG" rule (:mod:`simgrag.answer.calibration`) were fitted on
MetaQA DEV; applied to a genealogy KG and to WorldCup2014 they answered 22–60 % of answerable questions
"not found". Here they are fitted per KG, as :mod:`simgrag.eval.calibrate` fits MetaQA's, on the KG's
validation questions: each is asked on the full KG (*answerable*) and on the KG without the triples of its
gold pattern's matches that reach a gold answer (*removed*), with the index's own pattern stage and
embedder; :func:`~simgrag.eval.calibrate.fit_calibration` then picks thresholds that abstain on the most
removed questions while abstaining on at most ``alpha`` of the answerable ones answered right — on the
distances of the best match only (:data:`FITTED_FEATURES`), and only from :data:`MIN_QUESTIONS` questions on.

A validation question needs its gold pattern for this (``triples``: the KG's relation names, ``UNKNOWN``
nodes, the named entities as the KG spells them); questions without one are skipped. The fit is stored in
the index manifest under ``calibration`` (:func:`store_calibration`) with the relations it was fitted on,
and ``resolve_calibration`` uses it before any bundled one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.answer.calibration import MANIFEST_KEY, Calibration
from simgrag.errors import DatasetError, PatternError, SimGRAGError
from simgrag.eval.abstention import reduced_index
from simgrag.eval.calibrate import fit_calibration, observe
from simgrag.eval.runner import read_question_lines
from simgrag.index.attach import store_section
from simgrag.kg.bindings import BindingLimitError, pattern_bindings
from simgrag.kg.store import KGStore
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.pipeline import SimGRAG
from simgrag.progress import progress_on

__all__ = ["ValidationItem", "fit_abstention", "load_validation", "store_calibration", "supporting_triples"]

logger = logging.getLogger(__name__)

#: bindings enumerated per gold pattern at most (a pattern this broad is skipped)
MAX_BINDINGS = 50_000
#: validation questions with a gold pattern needed before thresholds are fitted: on 36 WorldCup2014 questions
#: an answer-set size of 52 became a threshold, and 6 % of the answerable test questions (119 players "from
#: England") were answered "not found" (BENCHMARKS.md §21)
MIN_QUESTIONS = 60
#: the features a per-KG fit may use: distances of the best match, not counts (an answer-set size or a count of
#: unworded triples seen on a few dozen questions does not bound the next question's)
FITTED_FEATURES = ("named", "relation", "relation_excess", "gsd")


@dataclass(frozen=True)
class ValidationItem:
    """A validation question with its gold answers and, when known, its gold pattern (KG relation names)."""

    question: str
    answers: tuple[str, ...]
    triples: tuple[tuple[str, str, str], ...] = ()
    group: str = "all"


def load_validation(path: str | Path) -> list[ValidationItem]:
    """``{"question", "answers", "triples"?, "group"?}`` per line; a bad line is a :class:`DatasetError`
    naming ``file:line``."""
    items: list[ValidationItem] = []
    for n, line in enumerate(read_question_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            triples = tuple((str(h), str(r), str(t)) for h, r, t in row.get("triples") or ())
            items.append(ValidationItem(str(row["question"]), tuple(str(a) for a in row["answers"]), triples,
                                        str(row.get("group", "all"))))
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetError(f"{path}:{n}: expected {{\"question\", \"answers\", \"triples\"?}} ({exc})") from exc
    return items


def supporting_triples(store: KGStore, triples: Sequence[Sequence[str]], answers: Sequence[str]) -> np.ndarray:
    """Triple ids of every match of the gold pattern ``triples`` on ``store`` whose answer node (the
    pattern's asked node) is a gold answer; empty when the pattern does not hold on the KG, names an entity or
    relation the KG lacks, or has more than :data:`MAX_BINDINGS` bindings."""
    try:
        pattern = Pattern.from_triples([list(t) for t in triples])
    except PatternError:
        return np.zeros(0, dtype=np.int64)
    asked = pattern.asked_node()
    gold = {i for i in (store.entities.id_of(a) for a in answers) if i is not None}
    relation_ids = [store.relations.id_of(e.relation) for e in pattern.edges]
    named = {i: store.entities.id_of(n.text) for i, n in enumerate(pattern.nodes) if not is_unknown(n.text)}
    if asked is None or not gold or None in relation_ids or None in named.values():
        return np.zeros(0, dtype=np.int64)
    edges = [(e.source, int(r or 0), e.target) for e, r in zip(pattern.edges, relation_ids, strict=True)]
    fixed = {slot: int(eid or 0) for slot, eid in named.items()}
    keep: set[int] = set()
    try:
        for bound, used in pattern_bindings(store, edges, fixed, limit=MAX_BINDINGS):
            if bound.get(asked) in gold:
                keep.update(used)
    except BindingLimitError:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(sorted(keep), dtype=np.int64)


def fit_abstention(engine: SimGRAG, items: Sequence[ValidationItem], *, alpha: float = 0.0,
                   progress: bool | None = None, min_questions: int = MIN_QUESTIONS) -> Calibration:
    """Thresholds fitted on ``items`` (module docstring) with ``engine``'s pattern stage; the engine's own
    abstention should be off (``calibration="off"``). Raises :class:`DatasetError` when no item has a gold
    pattern that holds on the KG."""
    store = engine.index.store
    usable = [(item, supporting_triples(store, item.triples, item.answers)) for item in items if item.triples]
    usable = [(item, edges) for item, edges in usable if len(edges)]
    if len(usable) < min_questions:
        raise DatasetError(f"{len(usable)} validation questions have a gold pattern that holds on this KG; the "
                           f"abstention thresholds need {min_questions} (fewer do not bound the next question: "
                           "nothing to fit on)")
    removed = np.unique(np.concatenate([edges for _, edges in usable]))
    reduced = reduced_index(engine.index, removed, derivation={"questions": len(usable), "split": "validation"})
    kgs = {"full": engine, "removed": engine.variant(index=reduced)}
    rows = []
    for item, _ in tqdm(usable, desc="abstention fit", disable=not progress_on(progress), leave=False):
        row: dict[str, Any] = {"group": item.group, "question": item.question, "gold_answers": list(item.answers)}
        for name, target in kgs.items():
            try:
                context = target.retriever.retrieve(item.question)
                if context.pattern is None or context.subgraphs is None:
                    raise DatasetError(f"the {context.retriever} retriever returns no subgraphs to fit on")
                found = context.pattern
                row[name] = observe(found.pattern, context.subgraphs, item.answers, found.kg_repairs, found.unworded)
            except SimGRAGError as exc:
                row[name] = {"error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
    info = {"fitted_on": "this KG's validation questions", "questions": len(usable), "alpha": alpha,
            "removed_triples": len(removed), "relations": sorted(store.relations),
            "embedder": engine.index.manifest.get("embedder", {}).get("name"), "patterns": "llm"}
    fitted = fit_calibration(rows, alpha=alpha, info=info, features=FITTED_FEATURES)
    return fitted


def store_calibration(root: str | Path, calibration: Calibration | None) -> None:
    """Record ``calibration`` in the index directory ``root``'s manifest (``None`` removes it), atomically."""
    store_section(root, MANIFEST_KEY, None if calibration is None else calibration.to_dict())
