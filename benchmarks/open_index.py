"""How long opening an index directory takes, and what the open-time checks cost (issue #15).

Opens ``--index-dir`` ``--repeat`` times in one process (warm page cache, the embedder resolved
once, outside the timing) and prints the median and minimum; then times each check of
``simgrag.index.verify`` / ``simgrag.kg.checks`` on its own, when this simgrag has them.

    python benchmarks/open_index.py --index-dir /tmp/metaqa.idx
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000, min(runs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    from simgrag.embed.registry import resolve_embedder
    from simgrag.index.directory import open_index_dir

    embedder = resolve_embedder("minilm")
    median, best = timed(lambda: open_index_dir(args.index_dir, embedder=embedder), args.repeat)
    print(f"open_index_dir: median {median:.1f} ms, min {best:.1f} ms ({args.repeat} opens)")
    try:
        from simgrag.index.verify import _all_finite, check_content_hash
        from simgrag.kg import checks
    except ImportError:
        return  # a simgrag without the open-time checks
    index = open_index_dir(args.index_dir, embedder=embedder)
    store = index.store
    parts: dict[str, Callable[[], object]] = {
        "names (UTF-8, offsets)": lambda: (checks.check_names(store.entities, "entities"),
                                           checks.check_names(store.relations, "relations")),
        "store shapes, ranges, CSR": lambda: checks.check_store(store, full=False),
        "adjacency = triples": lambda: checks._check_adjacency(store),
        "entity vectors finite": lambda: _all_finite(index.entity_vectors),
        "KG content hash": lambda: check_content_hash(index.path, store, index.manifest),
    }
    for name, fn in parts.items():
        median, best = timed(fn, args.repeat)
        print(f"  {name:<28} median {median:6.2f} ms, min {best:6.2f} ms")


if __name__ == "__main__":
    main()
