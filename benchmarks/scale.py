"""Scale benchmark (issue 7): a synthetic DBpedia-shaped KG of N entities, end to end, no LLM.

Stages: generate the seeded KG with planted subgraphs (:class:`SyntheticKG`), build its store straight
from the arrays (``to_store``), build the index directory (store, entity embeddings with the static
embedder, compressed ``faiss-ivfpq`` entity index; ``--backend milvus`` puts the entity vectors in
Milvus Lite instead), then, in a fresh process (so its peak RSS is the query side's alone), run the
planted queries (paraphrased names, relation phrases, typed ``UNKNOWN`` nodes) at FactKG settings
(k_n = 16384, k_r = 512, k_t = 16, SimGRAG §5) and report:

- build time per stage, peak RSS of build and query processes, disk size of the index directory;
- retrieval p50/p95/p99 of vector (embedding + vector search), graph (subgraph search) and total;
- planted-subgraph Hits@1: the top subgraph binds every pattern node to its planted entity;
- vector recall@10 and recall@k_n against exact search (blocked over the memory-mapped vectors)
  for the paraphrased names of a sample of queries.

    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/scale.py --entities 100000
    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/scale.py --entities 100000 --backend milvus

Writes ``<work>/scale-<N>-<backend>.json`` and prints a Markdown row for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.eval.synthetic_dbpedia import PlantedQuery, SyntheticKG
from simgrag.index import load_index
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.index.faiss_ivfpq import FaissIVFPQIndex
from simgrag.match import restrict as restrict_module
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern

BACKENDS = {"faiss": "faiss-ivfpq", "hnsw": "faiss-hnsw", "milvus": "milvus"}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def rss_split_mb() -> dict[str, float]:
    """Current resident memory split into anonymous (heap, arrays) and file-backed (memory-mapped files).

    File-backed pages of the memory-mapped store and vectors count toward ``ru_maxrss`` but are page
    cache the kernel can drop under memory pressure; the anonymous part is what the process needs.
    """
    out: dict[str, float] = {}
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                out[f"{key.lower()}_mb"] = round(int(value.split()[0]) / 1024, 1)
    return out


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def pct(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values) * 1e3
    return {f"p{q}": round(float(np.percentile(arr, q)), 2) for q in (50, 95, 99)} | {
        "max": round(float(arr.max()), 2), "mean": round(float(arr.mean()), 2)}


# ---------------------------------------------------------------------------------------------- build
def build(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    timings: dict[str, float] = {}
    t = time.perf_counter()
    kg = SyntheticKG(args.entities, seed=args.seed)
    planted, queries = kg.plant(args.planted)
    timings["generate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    store = kg.to_store(planted)
    timings["to_store_s"] = time.perf_counter() - t
    rss_store = peak_rss_mb()
    with (work / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q.to_json(), ensure_ascii=False) + "\n")
    kind = BACKENDS[args.backend]
    params = dict(json.loads(args.index_params)) if args.index_params else {}
    t = time.perf_counter()
    index = build_index_dir(store, work / "index", embedder=args.embedder, index_kind=kind, index_params=params,
                            overwrite=True, show_progress=False)
    timings["index_dir_s"] = time.perf_counter() - t
    timings |= {k: round(v, 3) for k, v in index.manifest["timings"].items()}
    close = getattr(index.entity_index, "close", None)
    if callable(close):
        close()
    return {"stats": store.stats(), "queries": len(queries), "timings": {k: round(v, 3) for k, v in timings.items()},
            "peak_rss_mb_after_store": round(rss_store, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
            "disk_mb": round(disk_mb(work / "index"), 1), "index": index.manifest["entity_index"]}


def reindex(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Another IVF-PQ entity index (``--index-params``) over the vectors of the work directory ``--from-work``:
    ``work/index`` links every other file of that index directory (nothing is copied) and gets its own
    ``entity_index/`` and manifest, so the two indexes can be queried side by side."""
    if args.from_work is None:
        raise SystemExit("--phase reindex needs --from-work DIR (a built work directory)")
    src, dst = args.from_work.resolve() / "index", work / "index"
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.name not in ("entity_index", "manifest.json") and not (dst / item.name).exists():
            (dst / item.name).symlink_to(item.resolve())
    if not (work / "queries.jsonl").exists():
        (work / "queries.jsonl").symlink_to((args.from_work / "queries.jsonl").resolve())
    vectors = np.load(src / "entity_vectors.npy", mmap_mode="r")
    params = dict(json.loads(args.index_params)) if args.index_params else {}
    t = time.perf_counter()
    index = FaissIVFPQIndex(vectors.shape[1], **params)
    index.attach_vectors(vectors, src / "entity_vectors.npy")
    block = 262_144
    for start in tqdm(range(0, len(vectors), block), desc="entity index", unit="block"):
        index.add(np.asarray(vectors[start:start + block], dtype=np.float32))
    (dst / "entity_index").mkdir(exist_ok=True)
    index.save(dst / "entity_index")
    manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    manifest["entity_index"] = {"kind": index.kind, "params": {k: v for k, v in index.params.items()
                                                               if k != "vectors_file"}}
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return {"entity_index_s": round(time.perf_counter() - t, 1), "params": index.params,
            "peak_rss_mb": round(peak_rss_mb(), 1), "disk_mb_entity_index": round(disk_mb(dst / "entity_index"), 1)}


# ---------------------------------------------------------------------------------------------- query
def hit(result: Any, q: PlantedQuery) -> bool:
    if not result.evidence:
        return False
    want = q.answers | q.entities
    top = result.evidence[0]
    return all(top.binding(text) is not None and top.binding(text).entity == name for text, name in want.items())


def exact_topk(vectors: np.ndarray, queries: np.ndarray, k: int, block: int = 262_144) -> np.ndarray:
    """Ids of the exact k nearest rows of (memory-mapped) ``vectors``, nearest first, streamed in blocks."""
    best_d = np.full((len(queries), 0), np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    qn = np.einsum("ij,ij->i", queries, queries)[:, None]
    for start in range(0, len(vectors), block):
        x = np.asarray(vectors[start:start + block], dtype=np.float32)
        d = np.concatenate([best_d, qn + np.einsum("ij,ij->i", x, x)[None, :] - 2.0 * queries @ x.T], axis=1)
        ids = np.arange(start, start + len(x))
        i = np.concatenate([best_i, np.broadcast_to(ids, (len(queries), len(x)))], axis=1)
        part = np.argpartition(d, min(k, d.shape[1]) - 1, axis=1)[:, :k]
        best_d, best_i = np.take_along_axis(d, part, axis=1), np.take_along_axis(i, part, axis=1)
    return np.take_along_axis(best_i, np.argsort(best_d, axis=1), axis=1)


def vector_recall(index: Any, texts: list[str], ks: tuple[int, ...]) -> dict[str, float]:
    vecs = index.embedder.encode(texts, show_progress=False)
    kmax = min(max(ks), index.entity_index.ntotal)
    want = exact_topk(index.entity_vectors, vecs, kmax)
    out = {}
    for k in ks:
        k = min(k, kmax)
        _, got = index.entity_index.search(vecs, k)
        out[f"recall@{k}"] = round(float(np.mean([len(set(g.tolist()) & set(w[:k].tolist())) / k
                                                  for g, w in zip(got, want, strict=True)])), 4)
    return out


def warm_page_cache(index_dir: Path) -> float:
    """Read the memory-mapped KG store once, as a long-running service has it cached; returns GiB read.

    The vector indexes are read into RAM when opened anyway; the float vectors are left out (with
    ``rerank="sq8"`` queries never read them).
    """
    total = 0
    for path in sorted((index_dir / "store").rglob("*")):
        if path.is_file():
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 24):
                    total += len(chunk)
    return total / 2**30


def evict_page_cache(index_dir: Path) -> float:
    """Drop the index files' pages from the page cache (posix_fadvise DONTNEED); returns GiB covered.

    A cold start without root: clean pages not mapped by any process are dropped.
    """
    total = 0
    for path in sorted(index_dir.rglob("*")):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                total += path.stat().st_size
            finally:
                os.close(fd)
    return total / 2**30


def query(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    if args.no_restrict:
        restrict_module.MIN_CANDIDATES = 1 << 62
    evicted_gib = evict_page_cache(work / "index") if args.cold else 0.0
    warmed_gib = warm_page_cache(work / "index") if args.warm else 0.0
    t = time.perf_counter()
    index = open_index_dir(work / "index", embedder=args.embedder)
    if args.search_params:
        tune = getattr(index.entity_index, "tune", None)
        if not callable(tune):
            raise SystemExit(f"--search-params: the {args.backend} backend has no search-time settings")
        tune(**json.loads(args.search_params))
    retriever = SubgraphRetriever(index, search_cache_size=0)  # time every search, none reused
    load_s = time.perf_counter() - t
    queries = [PlantedQuery(**{**d, "pattern": [tuple(x) for x in d["pattern"]],
                               "triples": [tuple(x) for x in d["triples"]]})
               for d in map(json.loads, (work / "queries.jsonl").read_text(encoding="utf-8").splitlines())]
    queries = queries[: args.queries]
    settings = RetrievalSettings(k=args.k, k_n=args.k_n, k_r=args.k_r, k_t=args.k_t, deadline_s=args.deadline,
                                 name_words=not args.no_name_words)
    if args.answer_tolerance is not None:
        settings = dataclasses.replace(
            settings, answer_tolerance=None if args.answer_tolerance < 0 else args.answer_tolerance)
    retriever.retrieve(Pattern.from_triples(queries[0].pattern), settings)  # warm-up (caches, page faults)
    vector, graph, total, hits, complete = [], [], [], [], []
    by_shape: dict[str, list[bool]] = {}
    for q in queries:
        result = retriever.retrieve(Pattern.from_triples(q.pattern), settings)
        tm = result.timings
        vector.append(tm["embed_s"] + tm["vector_s"])
        graph.append(tm["graph_s"])
        total.append(tm["total_s"])
        hits.append(hit(result, q))
        complete.append(result.complete)
        by_shape.setdefault(q.shape, []).append(hits[-1])
    rss_retrieval, rss_split = peak_rss_mb(), rss_split_mb()
    names = [t for q in queries[: args.recall_sample] for t in q.entities]
    recall = vector_recall(index, names, (10, args.k_n))
    close = getattr(index.entity_index, "close", None)
    if callable(close):
        close()
    return {"load_index_s": round(load_s, 3), "queries": len(queries), "hits1": round(float(np.mean(hits)), 4),
            "hits1_by_shape": {s: round(float(np.mean(v)), 4) for s, v in sorted(by_shape.items())},
            "complete": round(float(np.mean(complete)), 4), "vector_ms": pct(vector), "graph_ms": pct(graph),
            "total_ms": pct(total), "vector_recall": recall, "recall_names": len(names),
            "peak_rss_mb": round(rss_retrieval, 1), "rss_after_queries": rss_split,
            "peak_rss_mb_with_recall": round(peak_rss_mb(), 1),
            "evicted_gib": round(evicted_gib, 2), "warmed_gib": round(warmed_gib, 2), "deadline_s": args.deadline,
            "search_params": json.loads(args.search_params or "{}"), "restricted_search": not args.no_restrict,
            "name_words": not args.no_name_words, "answer_tolerance": settings.answer_tolerance,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


# ---------------------------------------------------------------------------------------------- main
def markdown_row(report: dict[str, Any]) -> str:
    b, q = report["build"], report["query"]
    st, tm = b["stats"], b["timings"]
    rec = " / ".join(f"{v:.3f}" for v in q["vector_recall"].values())
    return (f"| {st['entities']:,} | {st['triples']:,} | {report['backend']} | "
            f"{tm['generate_s'] + tm['to_store_s']:.1f} + {tm['embed_entities_s']:.1f} + {tm['entity_index_s']:.1f} s "
            f"| {b['peak_rss_mb'] / 1024:.2f} / {q['peak_rss_mb'] / 1024:.2f} GB | {b['disk_mb']:.0f} MB | "
            f"{q['vector_ms']['p50']:.0f}/{q['vector_ms']['p95']:.0f}/{q['vector_ms']['p99']:.0f} | "
            f"{q['graph_ms']['p50']:.0f}/{q['graph_ms']['p95']:.0f}/{q['graph_ms']['p99']:.0f} | "
            f"{q['total_ms']['p50']:.0f}/{q['total_ms']['p95']:.0f}/{q['total_ms']['p99']:.0f} | "
            f"{q['hits1']:.3f} ({q['queries']}) | {rec} |")


HEADER = ("| entities | triples | backend | build: generate+store / embed / index | peak RSS build / query | "
          "disk | vector ms p50/95/99 | graph ms | total ms | planted Hits@1 (n) | recall@10 / @k_n |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entities", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--planted", type=int, default=300, help="planted subgraphs (queries)")
    p.add_argument("--queries", type=int, default=300, help="how many planted queries to run")
    p.add_argument("--embedder", default="static")
    p.add_argument("--backend", choices=sorted(BACKENDS), default="faiss",
                   help="faiss = faiss-ivfpq (compressed), hnsw = faiss-hnsw, milvus = Milvus Lite")
    p.add_argument("--index-params", default="", help='JSON, e.g. {"nprobe": 64, "max_rerank": 8192}')
    p.add_argument("--search-params", default="",
                   help='query phase, faiss only: JSON for FaissIVFPQIndex.tune, e.g. {"nprobe": 128}')
    p.add_argument("--cold", action="store_true",
                   help="query phase: drop the index files from the page cache first (cold start)")
    p.add_argument("--warm", action="store_true",
                   help="query phase: read the KG store files into the page cache first (steady state)")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--k-n", type=int, default=16384)
    p.add_argument("--k-r", type=int, default=512)
    p.add_argument("--k-t", type=int, default=16)
    p.add_argument("--deadline", type=float, default=None, help="per-query graph-search deadline (s)")
    p.add_argument("--no-restrict", action="store_true",
                   help="search the whole KG, not the candidate-restricted graph (match/restrict.py): the 'before'")
    p.add_argument("--no-name-words", action="store_true",
                   help="named nodes' candidates from the vector index only (no entities found by name words)")
    p.add_argument("--answer-tolerance", type=float, default=None,
                   help="answer-set GSD tolerance (default: the library's; < 0: top-k only, no answer set)")
    p.add_argument("--recall-sample", type=int, default=100, help="queries whose names measure vector recall")
    p.add_argument("--work", type=Path, default=None, help="default: runs/scale-<N>")
    p.add_argument("--phase", choices=("all", "build", "query", "quantize", "reindex"), default="all",
                   help="reindex: a new entity index (--index-params) over --from-work's vectors, in --work")
    p.add_argument("--from-work", type=Path, default=None, help="--phase reindex: the built work directory")
    p.add_argument("--keep", action="store_true", help="keep the index directory afterwards")
    return p.parse_args(argv)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    args = parse()
    work = args.work or Path("runs") / f"scale-{args.entities}-{args.backend}"
    work.mkdir(parents=True, exist_ok=True)
    if args.phase == "build":
        print(json.dumps(build(args, work)))
        return
    if args.phase == "quantize":  # an existing float32-re-ranking IVF-PQ index → rerank="sq8", in place
        t = time.perf_counter()
        entity_index = load_index(work / "index" / "entity_index")
        if not isinstance(entity_index, FaissIVFPQIndex):
            raise SystemExit(f"--phase quantize needs a faiss-ivfpq index, not {entity_index.kind}")
        entity_index.quantize_rerank(show_progress=True)
        entity_index.save(work / "index" / "entity_index")
        print(json.dumps({"quantize_s": round(time.perf_counter() - t, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
                          "disk_mb": round(disk_mb(work / "index"), 1)}))
        return
    if args.phase == "query":
        print(json.dumps(query(args, work)))
        return
    if args.phase == "reindex":
        print(json.dumps(reindex(args, work)))
        return
    report: dict[str, Any] = {"entities": args.entities, "seed": args.seed, "backend": args.backend,
                              "embedder": args.embedder, "settings": {"k": args.k, "k_n": args.k_n,
                                                                      "k_r": args.k_r, "k_t": args.k_t},
                              "command": " ".join(sys.argv)}
    for phase in ("build", "query"):  # one process each: peak RSS per phase
        cmd = [sys.executable, __file__, *sys.argv[1:], "--phase", phase, "--work", str(work)]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        report[phase] = json.loads(out.strip().splitlines()[-1])
        print(f"{phase}: {json.dumps(report[phase])}", file=sys.stderr)
    path = work / f"scale-{args.entities}-{args.backend}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(HEADER)
    print(markdown_row(report))
    print(f"report: {path}")
    if not args.keep:
        shutil.rmtree(work / "index", ignore_errors=True)


if __name__ == "__main__":
    main()
