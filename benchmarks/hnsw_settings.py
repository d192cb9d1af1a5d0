"""HNSW settings on an index's own entity vectors: recall against exact search, build time, query time.

Queries are the embedded topic names of sampled MetaQA TEST questions, the same names with one letter
dropped and lower-cased (typed the way users type), and a few type words; each is searched alone (as
the vector stage does) for its ``k`` nearest entities, and compared with exact (flat L2) search.
Reported per ``M x ef_construction`` and ``ef_search``: recall@k, top-1 agreement, p50/p99 per query,
and the graph's build time. Used to choose ``FaissHNSWIndex``'s defaults (BENCHMARKS.md §10).

    python benchmarks/hnsw_settings.py --index-dir ~/.cache/simgrag/metaqa-minilm-….idx \\
        --metaqa-dir ../shared/data/MetaQA --settings 32x200,32x100,16x100

On a ``benchmarks/scale.py`` work directory the queries are instead the paraphrased names of its planted
queries (``queries.jsonl``; typos, word order, case):

    python benchmarks/hnsw_settings.py --scale-work runs/scale-1000000-faiss --settings 32x100,32x200
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from simgrag.index.directory import open_index_dir

TYPE_WORDS = ["movie", "film", "director", "actor", "writer", "genre", "language", "year", "tag", "person"]


def _topic_names(metaqa_dir: Path, per_hop: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    names = []
    for hop in (1, 2, 3):
        lines = (metaqa_dir / f"{hop}-hop" / "vanilla" / "qa_test.txt").read_text(encoding="utf-8").splitlines()
        for line in rng.sample(lines, min(per_hop, len(lines))):
            question = line.split("\t")[0]
            if "[" in question and "]" in question:
                names.append(question[question.index("[") + 1:question.index("]")])
    return names


def _planted_names(work: Path, limit: int) -> list[str]:
    names: dict[str, None] = {}
    for line in (work / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        for head, _, tail in json.loads(line)["pattern"]:
            names.update((x, None) for x in (head, tail) if not x.startswith("UNKNOWN"))
    return list(names)[:limit]


def _typo(name: str, rng: random.Random) -> str:
    if len(name) < 4:
        return name.lower()
    i = rng.randrange(1, len(name) - 1)
    return (name[:i] + name[i + 1:]).lower()


def main() -> None:
    import faiss

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, help="an index directory (default: WORK/index with --scale-work)")
    parser.add_argument("--metaqa-dir", type=Path, help="queries from MetaQA TEST topic names")
    parser.add_argument("--scale-work", type=Path, help="queries from a scale.py work directory's planted names")
    parser.add_argument("--settings", default="32x200,32x100,16x100",
                        help="MxEF_CONSTRUCTION[xfp16], comma-separated (xfp16: float16 rows, IndexHNSWSQ)")
    parser.add_argument("--ef-search", default="32,64,128,256")
    parser.add_argument("--per-hop", type=int, default=200)
    parser.add_argument("-k", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if (args.metaqa_dir is None) == (args.scale_work is None):
        parser.error("give one of --metaqa-dir and --scale-work")
    index_dir = args.index_dir or (args.scale_work / "index" if args.scale_work else None)
    if index_dir is None:
        parser.error("give --index-dir")
    index = open_index_dir(index_dir)
    vectors = np.ascontiguousarray(np.load(index_dir / "entity_vectors.npy"), dtype=np.float32)
    rng = random.Random(args.seed)
    if args.scale_work is not None:
        texts = _planted_names(args.scale_work, 3 * args.per_hop)
    else:
        names = _topic_names(args.metaqa_dir, args.per_hop, args.seed)
        texts = names + [_typo(n, rng) for n in names[: len(names) // 2]] + TYPE_WORDS
    queries = index.embedder.encode(texts, show_progress=False)
    flat = faiss.IndexFlatL2(vectors.shape[1])
    flat.add(vectors)
    _, truth = flat.search(queries, args.k)
    print(f"{len(vectors):,} vectors x {vectors.shape[1]}, {len(texts)} queries, k = {args.k}")
    for setting in args.settings.split(","):
        m_text, ef_text, *storage = setting.split("x")
        m, ef_construction = int(m_text), int(ef_text)
        if storage == ["fp16"]:
            hnsw = faiss.IndexHNSWSQ(vectors.shape[1], faiss.ScalarQuantizer.QT_fp16, m)
        elif not storage:
            hnsw = faiss.IndexHNSWFlat(vectors.shape[1], m)
        else:
            parser.error(f"bad setting {setting!r}: MxEF_CONSTRUCTION or MxEF_CONSTRUCTIONxfp16")
        hnsw.hnsw.efConstruction = ef_construction
        start = time.perf_counter()
        hnsw.add(vectors)
        build_s = time.perf_counter() - start
        for ef in (int(x) for x in args.ef_search.split(",")):
            params = faiss.SearchParametersHNSW(efSearch=max(ef, 2 * args.k))
            found, times = [], []
            for row in queries:
                start = time.perf_counter()
                _, ids = hnsw.search(row[None, :], args.k, params=params)
                times.append(1000 * (time.perf_counter() - start))
                found.append(ids[0])
            recall = np.mean([len(set(a) & set(b)) / args.k for a, b in zip(found, truth, strict=True)])
            top1 = np.mean([a[0] == b[0] for a, b in zip(found, truth, strict=True)])
            rows = "float16" if storage else "float32"
            print(f"M {m} ef_construction {ef_construction} {rows} (build {build_s:.1f} s) ef_search {ef}: "
                  f"recall@{args.k} {recall:.4f} top-1 {top1:.4f} "
                  f"p50 {np.percentile(times, 50):.3f} ms p99 {np.percentile(times, 99):.3f} ms")


if __name__ == "__main__":
    main()
