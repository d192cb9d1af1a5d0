"""A/B of the candidate-restricted search (match/restrict.py) on a scale.py index, one process.

For each planted query of ``benchmarks/scale.py`` (FactKG settings), the candidate table is computed
once and the graph search runs twice on it, alternating which goes first: on the whole KG
(restriction off) and on the restricted graph (on). Reported per arm: graph-search p50/p95/p99, the
share that stopped at the deadline, search steps, planted Hits@1; and whether both arms returned the
same top-k where both completed (they must).

    python benchmarks/restrict_ab.py --work runs/scale-1000000-faiss [--queries 300] [--deadline 0.8]

``--arms off`` or ``--arms on`` runs one arm only, so that each arm's peak RSS (reported as
``peak_rss_mb``, this process's ``ru_maxrss``) is its own; the top-k comparison needs both arms.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.eval.synthetic_dbpedia import PlantedQuery
from simgrag.index.directory import open_index_dir
from simgrag.match import restrict as restrict_module
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.match.search import SearchResult, search_subgraphs
from simgrag.pattern.graph import Pattern


def _pct(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values) * 1e3
    return {f"p{q}": round(float(np.percentile(arr, q)), 2) for q in (50, 95, 99)} | {
        "max": round(float(arr.max()), 2), "mean": round(float(arr.mean()), 2)}


def _hit(result: SearchResult, pattern: Pattern, q: PlantedQuery, names: Any) -> bool:
    """scale.py's criterion: the top match binds every pattern node to its planted entity."""
    if not result.matches:
        return False
    top = {node.text: names[v] for node, v in zip(pattern.nodes, result.matches[0].nodes, strict=True)}
    return all(top.get(text) == name for text, name in (q.answers | q.entities).items())


def _planted_in_candidates(pattern: Pattern, table: Any, q: PlantedQuery, store: Any) -> bool:
    """Whether every planted entity is among its pattern node's candidates (vector recall of the query);
    a miss with the planted subgraph among the candidates and a complete search is a distance confusion."""
    planted = q.answers | q.entities
    for node, cands in zip(pattern.nodes, table.nodes, strict=True):
        name = planted.get(node.text)
        if name is None or cands.any_entity:
            continue
        eid = store.entity_id(name)
        if eid is None or not np.isin(eid, cands.ids):
            return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="a scale.py work directory (index/, queries.jsonl)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--deadline", type=float, default=0.8, help="graph-search deadline per arm (s)")
    p.add_argument("--k-n", type=int, default=16384)
    p.add_argument("--k-r", type=int, default=512)
    p.add_argument("--k-t", type=int, default=16)
    p.add_argument("--no-name-words", action="store_true", help="candidates from the vector index only")
    p.add_argument("--arms", default="off,on", help="which arms to run: off,on (alternating), off, or on")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    arm_names = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    if not arm_names or set(arm_names) - {"off", "on"}:
        p.error(f"--arms must name off and/or on, got {args.arms!r}")
    logging.basicConfig(level=logging.WARNING)
    index = open_index_dir(args.work / "index", embedder="static")
    retriever = SubgraphRetriever(index, search_cache_size=0)  # time every search, none reused
    store = index.store
    queries = [PlantedQuery(**{**d, "pattern": [tuple(x) for x in d["pattern"]],
                               "triples": [tuple(x) for x in d["triples"]]})
               for d in map(json.loads, (args.work / "queries.jsonl").read_text(encoding="utf-8").splitlines())]
    queries = queries[: args.queries]
    settings = RetrievalSettings(k=3, k_n=args.k_n, k_r=args.k_r, k_t=args.k_t, name_words=not args.no_name_words)
    arms: dict[str, dict[str, list[Any]]] = {a: {"s": [], "complete": [], "steps": [], "hit": [], "recalled": []}
                                             for a in arm_names}
    same = differ = 0
    default_min = restrict_module.MIN_CANDIDATES
    for i, q in enumerate([queries[0], *queries]):  # the first run warms the compiled code
        pattern = Pattern.from_triples(q.pattern)
        table = retriever.candidates(pattern, settings)
        recalled = _planted_in_candidates(pattern, table, q, store)
        results = {}
        for arm in (arm_names if i % 2 else arm_names[::-1]):
            restrict_module.MIN_CANDIDATES = default_min if arm == "on" else 1 << 62
            t = time.perf_counter()
            results[arm] = search_subgraphs(store, pattern, table, k=3, deadline_s=args.deadline)
            if i == 0:
                continue
            a = arms[arm]
            a["s"].append(time.perf_counter() - t)
            a["complete"].append(results[arm].complete)
            a["steps"].append(results[arm].steps)
            a["hit"].append(_hit(results[arm], pattern, q, store.entities))
            a["recalled"].append(recalled)
        restrict_module.MIN_CANDIDATES = default_min
        if i and len(results) == 2 and results["on"].complete and results["off"].complete:
            keys = [[m.key() for m in results[a].matches] for a in ("off", "on")]
            same, differ = (same + 1, differ) if keys[0] == keys[1] else (same, differ + 1)
    report = {"work": str(args.work), "queries": len(queries), "deadline_s": args.deadline,
              "name_words": not args.no_name_words,
              "both_complete_same_topk": same, "both_complete_different_topk": differ}
    for arm, a in arms.items():
        report[arm] = {"graph_ms": _pct(a["s"]), "deadline_stops": round(1 - float(np.mean(a["complete"])), 4),
                       "steps_p50": int(np.median(a["steps"])), "hits1": round(float(np.mean(a["hit"])), 4),
                       "hits1_where_complete": round(float(np.mean([h for h, c in zip(a["hit"], a["complete"],
                                                                                      strict=True) if c] or [0])), 4)}
        hit, complete, recalled = (np.asarray(a[key], dtype=bool) for key in ("hit", "complete", "recalled"))
        report[arm]["misses"] = {  # each miss once: vector recall, then deadline, then the distances
            "planted_not_in_candidates": int((~hit & ~recalled).sum()),
            "deadline_stop": int((~hit & recalled & ~complete).sum()),
            "complete_other_subgraph_nearer": int((~hit & recalled & complete).sum())}
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
