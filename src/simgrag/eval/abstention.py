"""Abstention study: take away the triples that answer a question; does the system say so, or invent?

**Removal rule** (:func:`supporting_edges`). For a MetaQA question with topic entity *s*, gold
relation chain r₁ … r_k (:func:`simgrag.eval.metaqa.chain_relations`) and gold answers *A*, a
*chain walk* is a sequence of KG edges e₁ … e_k where eᵢ has relation rᵢ, is taken in either
direction, starts where e_{i−1} ended (e₁ at *s*), and the walk ends at a gold answer other than *s*
(the walks :func:`simgrag.eval.answerable.chain_targets` follows). Every edge on some chain walk to a
gold answer is removed. For 1-hop questions that is every (s, r₁, a) or (a, r₁, s) edge with a ∈ A;
for 2-hop ``movie_to_director_to_movie`` it is the topic's ``directed_by`` edges to directors who
directed a gold movie, and those directors' ``directed_by`` edges to the gold movies. Afterwards no
gold answer is reachable along the gold chain (each question's ``answerable_after`` is recorded and
is false). Edges of *other* relations between the topic and an answer stay (e.g. ``written_by`` when
the director also wrote the film): ``gold_adjacent_after`` records when a gold answer is still a
direct neighbour of the topic, so such "gold" replies can be told apart.

Only questions answerable on the base KG are sampled (:func:`sample_answerable`), and the removals of
all sampled questions are made in one reduced KG, whose index is derived from the base
(:func:`simgrag.index.derive.derive_index_dir`) and cached by the set of removed triples.

**Reply classes** (:func:`classify_reply`), in this order:

- ``error``: the retriever or the reader raised (no reply);
- ``abstained``: SimGRAG's own not-found (``abstained``), or no answer entity left once the entities
  that say "no answer" (*none*, *unknown*, *not available* …, or a sentence such as *the facts do not
  mention …*) and the entities the question itself names are dropped;
- ``gold``: an answer entity matches a gold answer (:func:`simgrag.eval.metrics.answers_match`): the
  LLM answered from its own knowledge (or from an edge the rule keeps, see above);
- ``flagged``: answered, not gold, but the answer says that a named entity was replaced by the
  nearest one the KG has (SimGRAG's ``substitutions``: "nearest match for 'Doom': Doomsday");
- ``abstained`` also: a reply without an ``ans:``/``answer:`` line that states the facts are missing
  (its entities then come from the reader's fallback extraction of the context names it mentions);
- ``wrong``: answered, and no answer is gold (invented or misread).

With ``answerable=True`` the same questions are also asked on the full KG (``runs_full/``), so the
price of abstaining shows too: how often a question the KG answers is still answered right.

``OUT`` receives ``runs/`` (the comparison's per-retriever JSONL, summary and plots, on the reduced
KG), ``abstention.jsonl`` (a row per retriever and question: class, answers, reply, removed edges),
``removed_triples.tsv``, ``abstention.json`` and ``abstention.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import DatasetError, IndexDirError
from simgrag.eval.answerable import chain_targets, is_answerable
from simgrag.eval.compare import _file_stem
from simgrag.eval.metaqa import chain_relations, load_metaqa
from simgrag.eval.metrics import answers_match
from simgrag.eval.runner import QAItem, read_jsonl
from simgrag.eval.subrun import run_sub_comparison
from simgrag.fileio import write_bytes_atomic
from simgrag.index.derive import derive_index_dir, derived_cache_path, same_tables_store
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.kg.store import KGStore
from simgrag.pipeline import SimGRAG

__all__ = [
    "CLASSES",
    "classify_reply",
    "format_abstention",
    "reduced_index",
    "reduced_store",
    "run_abstention",
    "sample_answerable",
    "supporting_edges",
]

logger = logging.getLogger(__name__)

CLASSES = ("abstained", "flagged", "gold", "wrong", "error")

_NO_ANSWER_ITEM = re.compile(r"(?:none|unknown|n/?a|nothing|no answers?|no information|not available|not found"
                             r"|not found in the kg)[.!]?", re.IGNORECASE)
_STATES_MISSING = re.compile(
    r"\b(?:not available|not found|no (?:relevant )?information|not enough information|insufficient|"
    r"(?:does|do|did)(?: not|n't) (?:contain|mention|include|provide|specify|state|say)|"
    r"not (?:mentioned|provided|present|given|listed|included|specified|stated)|"
    r"(?:cannot|can't|unable to) (?:be )?(?:answer|answered|determine|determined|find|found|identify))\b",
    re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^[ \t>*_-]*(?:ans|answer)[*_ \t]*:", re.IGNORECASE | re.MULTILINE)


# ------------------------------------------------------------------------------------------ removal
def supporting_edges(store: KGStore, topic: str | None, chain: str | None, answers: Sequence[str]) -> np.ndarray:
    """Triple ids of every edge on a chain walk from ``topic`` to a gold answer (the module's rule)."""
    start = store.entities.id_of(topic) if topic else None
    if start is None or not chain:
        return np.zeros(0, dtype=np.int64)
    rids = [store.relations.id_of(name) for name in chain_relations(chain)]
    if any(r is None for r in rids):
        return np.zeros(0, dtype=np.int64)
    layers: list[list[tuple[int, int, int]]] = []  # per hop: (from, to, triple id)
    frontier = {start}
    for rid in rids:
        step = []
        for node in sorted(frontier):
            nbr, rel, tid = store.neighbors(node)
            mask = np.asarray(rel) == rid
            step += [(node, int(v), int(t)) for v, t in zip(np.asarray(nbr)[mask], np.asarray(tid)[mask], strict=True)]
        layers.append(step)
        frontier = {v for _, v, _ in step}
    good = {i for i in (store.entities.id_of(a) for a in answers) if i is not None} - {start}
    keep: set[int] = set()
    for step in reversed(layers):
        used = [(u, t) for u, v, t in step if v in good]
        keep.update(t for _, t in used)
        good = {u for u, _ in used}
    return np.asarray(sorted(keep), dtype=np.int64)


def reduced_store(store: KGStore, removed: np.ndarray) -> KGStore:
    """``store`` without the triples ``removed`` (ids), over the same entity/relation/type tables."""
    keep = np.ones(store.num_triples, dtype=bool)
    keep[np.asarray(removed, dtype=np.int64)] = False
    return same_tables_store(store, np.asarray(store.heads)[keep], np.asarray(store.rels)[keep],
                             np.asarray(store.tails)[keep])


def reduced_index(base: IndexDir, removed: np.ndarray, *, cache: str | Path | None = None,
                  derivation: Mapping[str, Any] | None = None) -> IndexDir:
    """The index of ``base``'s KG less ``removed``, derived once and cached by the removed set
    (:func:`~simgrag.index.derive.derived_cache_path`)."""
    kg_hash = base.manifest["kg"]["content_hash"]
    key = hashlib.sha256(np.asarray(removed, dtype=np.int64).tobytes()).hexdigest()[:16]
    path = derived_cache_path(base, f"abstain-{key}", cache)
    if (path / "manifest.json").is_file():
        try:
            cached = open_index_dir(path, embedder=base.embedder)
            if cached.manifest.get("derived_from", {}).get("kg_content_hash") == kg_hash:
                return cached
        except IndexDirError as exc:
            logger.warning("rebuilding %s: %s", path, exc)
    info = {"removal": {"rule": "gold-chain edges to gold answers", "removed_triples": len(removed),
                        "removed_sha256_16": key, **dict(derivation or {})}}
    return derive_index_dir(base, reduced_store(base.store, removed), path, derivation=info, overwrite=True)


def sample_answerable(store: KGStore, metaqa_dir: str | Path, hops: Sequence[int], sample: int | None,
                      seed: int, split: str = "test") -> list[QAItem]:
    """Up to ``sample`` questions per hop (all when ``None``/0), seeded, among those ``store`` answers."""
    items: list[QAItem] = []
    for hop in hops:
        questions = load_metaqa(metaqa_dir, hop, split)
        order = list(range(len(questions)))
        random.Random(seed + hop).shuffle(order)
        picked = 0
        for i in order:
            q = questions[i]
            if is_answerable(store, q):
                items.append(QAItem(q.question, q.answers, f"{hop}-hop", q.topic, q.chain, True))
                picked += 1
                if sample and picked >= sample:
                    break
    if not items:
        raise DatasetError(f"no {split} question of hops {list(hops)} is answerable on this KG")
    return items


# ------------------------------------------------------------------------------------------ classes
def classify_reply(entities: Sequence[str], text: str, gold: Sequence[str], *, question: str = "",
                   abstained: bool = False, error: bool = False, flagged: bool = False) -> str:
    """One of :data:`CLASSES` for a reply (the module's rule)."""
    if error:
        return "error"
    if abstained:
        return "abstained"
    q = question.lower()
    names = [e for e in entities if e.strip() and not _NO_ANSWER_ITEM.fullmatch(e.strip())
             and not _STATES_MISSING.search(e)
             and not (q and re.search(r"(?<!\w)" + re.escape(e.strip().lower()) + r"(?!\w)", q))]
    if not names:
        return "abstained"
    if any(answers_match(e, g) for e in names for g in gold):
        return "gold"
    if not _ANSWER_LINE.search(text) and _STATES_MISSING.search(text):
        return "abstained"  # the names came from the fallback reading of a "the facts do not say" reply
    return "flagged" if flagged else "wrong"


def _classify_row(row: Mapping[str, Any]) -> str:
    reading = row.get("reading") or {}
    return classify_reply(reading.get("entities") or [], reading.get("text") or "", row.get("gold") or [],
                          question=row.get("question", ""), abstained=bool(reading.get("abstained")),
                          error=not reading, flagged=bool(reading.get("substitutions")))


def _read_rows(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path, "abstention rows")


def _summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    counts = {c: sum(1 for r in rows if r["class"] == c) for c in CLASSES}
    return {"questions": n, **counts, **{f"{c}_rate": counts[c] / n if n else float("nan") for c in CLASSES}}


# ------------------------------------------------------------------------------------------ study
def run_abstention(engine: SimGRAG, items: Sequence[QAItem], retrievers: Sequence[str], out_dir: str | Path, *,
                   model_dirs: Mapping[str, str] | None = None, cache: str | Path | None = None,
                   progress: bool | None = None, answerable: bool = False) -> dict[str, Any]:
    """Remove the supporting triples of ``items``, ask ``retrievers`` (engines like ``engine``) on the reduced KG
    (and, with ``answerable``, on the full KG too), classify the replies; writes the files of the module
    docstring and returns the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = engine.index
    store = base.store
    per_item = [supporting_edges(store, it.topic, it.chain, it.answers) for it in items]
    removed = np.unique(np.concatenate(per_item)) if per_item else np.zeros(0, dtype=np.int64)
    if len(removed) == 0:
        raise DatasetError("the sampled questions have no supporting triples to remove (none answerable?)")
    reduced = reduced_index(base, removed, cache=cache, derivation={"questions": len(items)})
    _write_removed(out / "removed_triples.tsv", store, removed)
    names = [n.strip().lower() for n in retrievers if n.strip()]
    unanswerable = [replace(it, answerable=False) for it in items]  # score_h rewards abstaining now
    comparison = run_sub_comparison(engine, names, unanswerable, out / "runs", index=reduced, model_dirs=model_dirs,
                                    progress=progress)
    facts = {(it.group, it.question): _facts(reduced.store, it, edges) for it, edges in zip(items, per_item,
                                                                                              strict=True)}
    rows: list[dict[str, Any]] = []
    for name in names:
        for row in _read_rows(out / "runs" / f"{_file_stem(name)}.jsonl"):
            reading = row.get("reading") or {}
            rows.append({"retriever": name, "question": row["question"], "group": row["group"],
                         "gold": row["gold"], "class": _classify_row(row), "entities": reading.get("entities", []),
                         "reply": reading.get("text"), "error": row.get("error"),
                         **facts.get((row["group"], row["question"]), {})})
    full_rows: list[dict[str, Any]] = []
    if answerable:
        run_sub_comparison(engine, names, list(items), out / "runs_full", model_dirs=model_dirs, progress=progress)
        for name in names:
            for row in _read_rows(out / "runs_full" / f"{_file_stem(name)}.jsonl"):
                reading = row.get("reading") or {}
                full_rows.append({"retriever": name, "kg": "full", "question": row["question"], "group": row["group"],
                                  "gold": row["gold"], "class": _classify_row(row),
                                  "entities": reading.get("entities", []), "reply": reading.get("text"),
                                  "error": row.get("error")})
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [*rows, *full_rows])
    write_bytes_atomic(out / "abstention.jsonl", text.encode("utf-8"))
    summary = {
        "questions": len(items), "removed_triples": len(removed), "triples_before": store.num_triples,
        "triples_after": reduced.store.num_triples, "reduced_index": str(reduced.path),
        "still_answerable": sum(1 for f in facts.values() if f["answerable_after"]),
        "gold_adjacent_after": sum(1 for f in facts.values() if f["gold_adjacent_after"]),
        "retrievers": {name: {g: _summary([r for r in rows if r["retriever"] == name and (g == "overall"
                                                                                        or r["group"] == g)])
                              for g in [*sorted({it.group for it in items}), "overall"]} for name in names},
        "score_h": {name: comparison.get(name, {}).get("overall", {}).get("score_h") for name in names},
    }
    if answerable:
        summary["answerable"] = {name: {g: _summary([r for r in full_rows if r["retriever"] == name
                                                     and (g == "overall" or r["group"] == g)])
                                        for g in [*sorted({it.group for it in items}), "overall"]} for name in names}
    write_bytes_atomic(out / "abstention.json", (json.dumps(_no_nan(summary), indent=2) + "\n").encode("utf-8"))
    write_bytes_atomic(out / "abstention.md", (format_abstention(summary) + "\n").encode("utf-8"))
    return summary


def _facts(reduced: KGStore, item: QAItem, edges: np.ndarray) -> dict[str, Any]:
    after = chain_targets(reduced, item.topic, item.chain) if item.topic and item.chain else set()
    start = reduced.entities.id_of(item.topic) if item.topic else None
    near = set() if start is None else {reduced.entities[int(v)] for v in np.asarray(reduced.neighbors(start)[0])}
    return {"topic": item.topic, "chain": item.chain, "removed_edges": len(edges),
            "answerable_after": bool(after & set(item.answers)),
            "gold_adjacent_after": bool(near & set(item.answers))}


def _write_removed(path: Path, store: KGStore, removed: np.ndarray) -> None:
    lines = ["head\trelation\ttail\n"] + ["\t".join(store.triple(int(t)).as_tuple()) + "\n" for t in removed]
    write_bytes_atomic(path, "".join(lines).encode("utf-8"))


def _no_nan(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    return value


def _pct(value: Any) -> str:
    return "–" if value is None or value != value else f"{100 * float(value):.1f}"


def format_abstention(summary: Mapping[str, Any]) -> str:
    """Markdown: how the KG was reduced, then a table per group with a row per retriever."""
    lines = ["# Abstention when the answer's triples are removed", "",
             f"{summary['questions']} questions (answerable on the full KG); {summary['removed_triples']:,} "
             f"supporting triples removed ({summary['triples_before']:,} → {summary['triples_after']:,}). "
             f"Still answerable along the gold chain afterwards: {summary['still_answerable']}; a gold answer "
             f"still adjacent to the topic by another relation: {summary['gold_adjacent_after']}.", "",
             "abstain: says the KG lacks the answer; flagged: answers, saying the named entity was replaced by "
             "the nearest the KG has; gold: answers correctly anyway (own knowledge); wrong: answers something "
             "else (invented); error: no reply. Rates in %.", ""]
    per = summary["retrievers"]
    groups = list(next(iter(per.values()))) if per else []
    for group in groups:
        lines += [f"## {group}", "", "| retriever | KG | n | abstain % | flagged % | wrong % | gold % | error % | "
                  "score_h |", "|---|---|---|---|---|---|---|---|---|"]
        for name, by_group in per.items():
            s = by_group[group]
            score = summary.get("score_h", {}).get(name) if group == "overall" else None
            lines.append(f"| {name} | answer removed | {s['questions']} | {_pct(s['abstained_rate'])} | "
                         f"{_pct(s.get('flagged_rate'))} | {_pct(s['wrong_rate'])} | {_pct(s['gold_rate'])} | "
                         f"{_pct(s['error_rate'])} | {'–' if score is None else f'{float(score):.1f}'} |")
            full = summary.get("answerable", {}).get(name, {}).get(group)
            if full:
                lines.append(f"| {name} | full (answerable) | {full['questions']} | {_pct(full['abstained_rate'])} | "
                             f"{_pct(full.get('flagged_rate'))} | {_pct(full['wrong_rate'])} | "
                             f"{_pct(full['gold_rate'])} | {_pct(full['error_rate'])} | – |")
        lines.append("")
    return "\n".join(lines)
