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
from simgrag.index.attach import read_manifest_json, write_manifest
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
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
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
    edges = [(e.source, store.relations.id_of(e.relation), e.target) for e in pattern.edges]
    fixed = {i: store.entities.id_of(n.text) for i, n in enumerate(pattern.nodes) if not is_unknown(n.text)}
    if asked is None or not gold or any(r is None for _, r, _ in edges) or any(v is None for v in fixed.values()):
        return np.zeros(0, dtype=np.int64)
    order = _connected_order(edges, set(fixed))
    if order is None:
        return np.zeros(0, dtype=np.int64)
    heads, tails = np.asarray(store.heads), np.asarray(store.tails)
    keep: set[int] = set()
    budget = [MAX_BINDINGS]

    def extend(i: int, bound: dict[int, int], used: list[int]) -> bool:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        if i == len(order):
            if bound.get(asked) in gold:
                keep.update(used)
            return True
        source, rid, target = order[i]
        forward = source in bound
        here = bound[source] if forward else bound[target]
        nbr, rel, tid = (np.asarray(a) for a in store.neighbors(here))
        mask = (rel == rid) & ((heads[tid] == here) if forward else (tails[tid] == here))
        other = target if forward else source
        for v, t in zip(nbr[mask], tid[mask], strict=True):
            if other in bound and bound[other] != int(v):
                continue
            if not extend(i + 1, {**bound, other: int(v)}, [*used, int(t)]):
                return False
        return True

    if not extend(0, {k: int(v) for k, v in fixed.items() if v is not None}, []):
        return np.zeros(0, dtype=np.int64)
    return np.asarray(sorted(keep), dtype=np.int64)


def _connected_order(edges: Sequence[tuple[int, int | None, int]],
                     bound: set[int]) -> list[tuple[int, int, int]] | None:
    """``edges`` in an order where each touches a node bound before it (named, or an earlier edge's);
    ``None`` when some part of the pattern touches no named node."""
    order: list[tuple[int, int, int]] = []
    left = [(s, int(r), t) for s, r, t in edges if r is not None]
    reached = set(bound)
    while left:
        nxt = next((e for e in left if e[0] in reached or e[2] in reached), None)
        if nxt is None or not reached:
            return None
        order.append(nxt)
        left.remove(nxt)
        reached |= {nxt[0], nxt[2]}
    return order


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
    manifest = read_manifest_json(Path(root))
    if calibration is None:
        manifest.pop(MANIFEST_KEY, None)
    else:
        manifest[MANIFEST_KEY] = calibration.to_dict()
    write_manifest(Path(root), manifest)
