"""Search time with and without the kind prior (simgrag.match.kinds), on the final patterns a bench run recorded.

One process: every pattern searched once with each setting first (embeddings cached, each kind's candidate list
built, the search compiled), then with ``kind_penalty`` 1.0 and ``None`` in turn, twice; prints milliseconds per
search::

    python benchmarks/kind_prior_speed.py runs/metaqa.idx src/simgrag/data/examples/metaqa.yaml runs/mq1.jsonl ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from simgrag.index.directory import open_index_dir
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.examples import load_examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=Path)
    parser.add_argument("examples", type=Path, help="the examples whose kinds the search takes")
    parser.add_argument("rows", type=Path, nargs="+", help="bench --output files (their 'pattern' fields)")
    args = parser.parse_args()
    patterns = [row["pattern"] for path in args.rows for row in map(json.loads, path.open(encoding="utf-8"))
                if row.get("pattern")]
    if not patterns:
        parser.error("no recorded pattern in the rows given")
    search = SubgraphRetriever(open_index_dir(args.index), search_cache_size=0)  # time every search, none reused
    search.use_kinds(e.triples for e in load_examples(args.examples).examples)
    on, off = RetrievalSettings(), RetrievalSettings(kind_penalty=None)
    for settings in (on, off):
        for pattern in patterns:
            search.retrieve(pattern, settings)
    timings: dict[str, float] = {}
    for name, settings in (("on", on), ("off", off), ("on again", on), ("off again", off)):
        t0 = time.perf_counter()
        for pattern in patterns:
            search.retrieve(pattern, settings)
        timings[name] = round((time.perf_counter() - t0) / len(patterns) * 1000, 2)
    kinds = search.kinds()
    print(f"{args.index}: {len(patterns)} patterns; ms per search {timings}; kinds {kinds.kinds if kinds else None}")


if __name__ == "__main__":
    main()
