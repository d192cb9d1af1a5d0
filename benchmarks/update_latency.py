"""Live-update latency (issue 19): N added triples made visible vs a full rebuild of the same KG. No LLM.

For each KG, a base index is built once; then, for each size N, a copy of it (hard links: an update
never writes a file in place) takes N new triples with ``update_index_dir`` (read the file, merge,
embed the new entities, append their vectors, write and swap the new version), is opened again and
answers a pattern about the first new triple ("visible" = update + open + that query). The rebuild
is ``build_index_dir`` on the whole final KG (base + N) with the same embedder and index settings.

The new triples: groups of five about a new entity each ("added entity 17"), relations drawn from
the KG's triples, tails an existing entity (70 %) or a new one (30 %), so 1,000 triples bring ~500
new entities to embed.

    # MetaQA (MiniLM, the default faiss-hnsw index, MetaQA relation aliases, as `simgrag bench` builds it)
    python benchmarks/update_latency.py metaqa --metaqa-dir ../shared/data/MetaQA
    # the 1M-entity synthetic KG of benchmarks/scale.py (static embedder, faiss-ivfpq)
    python benchmarks/update_latency.py synthetic --entities 1000000

Writes ``<work>/update-<kg>.json`` and prints Markdown rows for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from simgrag.index.directory import build_index_dir, open_index_dir, relation_text
from simgrag.index.update import update_index_dir
from simgrag.kg.delta import apply_delta
from simgrag.kg.loader import load_kg
from simgrag.kg.store import KGStore
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever

GROUP = 5  # new triples per new entity
NEW_TAIL = 0.3


def new_triples(store: KGStore, n: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` new triples in groups about new entities (module docstring)."""
    rng = random.Random(seed)
    picks = [rng.randrange(store.num_triples) for _ in range(n)]
    out = []
    for i, tid in enumerate(picks):
        fact = store.triple(tid)
        tail = f"added value {i}" if rng.random() < NEW_TAIL else fact.tail
        out.append((f"added entity {i // GROUP}", fact.relation, tail))
    return out


def hardlink_copy(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=os.link)


def visible(path: Path, embedder: Any, fact: tuple[str, str, str]) -> tuple[float, float, bool]:
    """Open the updated index and ask for the first new triple: (open s, query s, found)."""
    t = time.perf_counter()
    index = open_index_dir(path, embedder=embedder)
    opened = time.perf_counter() - t
    t = time.perf_counter()
    result = SubgraphRetriever(index).retrieve([[fact[0], relation_text(fact[1]), "UNKNOWN thing 1"]],
                                              RetrievalSettings(k=3, deadline_s=None))
    found = any(e.triple.as_tuple() == fact for ev in result.evidence for e in ev.edges)
    return opened, time.perf_counter() - t, found


def run_sizes(args: argparse.Namespace, work: Path, base_store: KGStore, base_idx: Path, build: Any) -> list[dict]:
    """One update and one rebuild per size; ``build(final_store_or_file, out)`` does the rebuild."""
    rows = []
    added_all = new_triples(base_store, max(args.sizes), args.seed)
    warm = open_index_dir(base_idx)  # compiled search kernels and the embedder loaded, as in a running server
    SubgraphRetriever(warm).retrieve([[warm.store.entities[0], "related to", "UNKNOWN thing 1"]])
    for n in args.sizes:
        added = added_all[:n]
        add_file = work / f"add-{n}.txt"
        add_file.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in added), encoding="utf-8")
        target = work / f"updated-{n}.idx"
        hardlink_copy(base_idx, target)
        t = time.perf_counter()
        result = update_index_dir(target, add=add_file, format="pipe", show_progress=False)
        update_s = time.perf_counter() - t
        embedder = open_index_dir(base_idx).embedder  # resolved outside the timing, as a server holds it
        open_s, query_s, found = visible(target, embedder, added[0])
        row: dict[str, Any] = {"added": n, "new_entities": result.report.entities_added, "update_s": round(update_s, 3),
                               "open_s": round(open_s, 3), "query_s": round(query_s, 3),
                               "visible_s": round(update_s + open_s + query_s, 3), "found": found,
                               "update_stages": {k: round(v, 3) for k, v in result.timings.items()}}
        if n in args.rebuild_sizes:
            t = time.perf_counter()
            build(added, add_file, work / f"rebuilt-{n}.idx")
            row["rebuild_s"] = round(time.perf_counter() - t, 1)
            row["speedup_visible"] = round(row["rebuild_s"] / row["visible_s"], 1)
            shutil.rmtree(work / f"rebuilt-{n}.idx")
        shutil.rmtree(target)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def metaqa(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from simgrag.pipeline import builtin_aliases_path

    kb = Path(args.metaqa_dir) / "kb.txt"
    aliases = builtin_aliases_path("metaqa")
    t = time.perf_counter()
    base = build_index_dir(kb, work / "base.idx", embedder=args.embedder, relation_aliases=aliases,
                           overwrite=True, show_progress=False)
    base_build_s = time.perf_counter() - t

    def rebuild(added: list[tuple[str, str, str]], add_file: Path, out: Path) -> None:
        final = work / "final.txt"
        final.write_bytes(kb.read_bytes() + add_file.read_bytes())
        build_index_dir(final, out, embedder=args.embedder, relation_aliases=aliases, overwrite=True,
                        show_progress=False)

    rows = run_sizes(args, work, base.store, work / "base.idx", rebuild)
    return {"kg": "metaqa", "base": base.manifest["kg"], "index": base.manifest["entity_index"],
            "embedder": args.embedder, "base_build_s": round(base_build_s, 1), "rows": rows}


def synthetic(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from simgrag.eval.synthetic_dbpedia import SyntheticKG

    kg = SyntheticKG(args.entities, seed=args.seed)
    planted, _ = kg.plant(300)
    store = kg.to_store(planted)
    params = {"kind": "faiss-ivfpq"}
    t = time.perf_counter()
    base = build_index_dir(store, work / "base.idx", embedder=args.embedder, index_kind=params["kind"],
                           overwrite=True, show_progress=False)
    base_build_s = time.perf_counter() - t

    def rebuild(added: list[tuple[str, str, str]], add_file: Path, out: Path) -> None:
        batch, _ = load_kg(add_file, format="pipe", show_progress=False)
        final = apply_delta(store, add=batch).store  # the final KG as a store, as scale.py builds from one
        build_index_dir(final, out, embedder=args.embedder, index_kind=params["kind"], overwrite=True,
                        show_progress=False)

    rows = run_sizes(args, work, store, work / "base.idx", rebuild)
    return {"kg": f"synthetic-{args.entities}", "base": base.manifest["kg"], "index": base.manifest["entity_index"],
            "embedder": args.embedder, "base_build_s": round(base_build_s, 1), "rows": rows}


def markdown(report: dict[str, Any]) -> str:
    lines = []
    for r in report["rows"]:
        st = r["update_stages"]
        stages = " / ".join(f"{st.get(k, 0):.2f}" for k in ("read_s", "merge_s", "save_store_s", "embed_s",
                                                               "entity_index_s", "manifest_s"))
        rebuild = f"{r['rebuild_s']:.1f} s" if "rebuild_s" in r else "–"
        speed = f"{r['speedup_visible']:.0f}×" if "speedup_visible" in r else "–"
        lines.append(f"| {report['kg']} | {r['added']:,} | {r['new_entities']:,} | {r['update_s']:.2f} s ({stages}) | "
                     f"{r['open_s'] + r['query_s']:.2f} s | **{r['visible_s']:.2f} s** | {rebuild} | **{speed}** |")
    return "\n".join(lines)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kg", choices=("metaqa", "synthetic"))
    p.add_argument("--metaqa-dir", default="../shared/data/MetaQA")
    p.add_argument("--entities", type=int, default=1_000_000)
    p.add_argument("--embedder", default=None, help="default: minilm (metaqa), static (synthetic)")
    p.add_argument("--sizes", default="1,1000,100000")
    p.add_argument("--rebuild-sizes", default=None, help="sizes that also get a full rebuild (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=None, help="default: runs/update-<kg>")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.rebuild_sizes = set(args.sizes) if args.rebuild_sizes is None else {
        int(s) for s in args.rebuild_sizes.split(",") if s.strip()}
    args.embedder = args.embedder or ("minilm" if args.kg == "metaqa" else "static")
    work = args.work or Path("runs") / f"update-{args.kg}"
    work.mkdir(parents=True, exist_ok=True)
    report = metaqa(args, work) if args.kg == "metaqa" else synthetic(args, work)
    report["command"] = " ".join(sys.argv)
    (work / f"update-{args.kg}.json").write_text(json.dumps(report, indent=2))
    print(markdown(report))


if __name__ == "__main__":
    main()
