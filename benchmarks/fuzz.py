"""Fuzz every input path at scale (10^5+ cases) and report the outcome counts.

Uses the seeded generators of ``simgrag.testing.fuzz`` (the test suite runs ~10^4 of the same):
mutated LLM outputs through the parser and validation, odd Python values as patterns, mutated KG
files (pipe, TSV, CSV, N-Triples) through the readers, and hostile HTTP bodies through the API
(toy index, an LLM that answers fuzzed text). ``untyped`` must be 0 everywhere.

    python benchmarks/fuzz.py --parser 100000 --patterns 100000 --kg-files 20000 --http 20000 \
        --out runs/fuzz.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from simgrag.testing.fuzz import FuzzTally, fuzz_http, fuzz_kg_files, fuzz_parser, fuzz_patterns, llm_output


def _http(n: int, seed: int, workdir: Path) -> FuzzTally:
    from fastapi.testclient import TestClient

    from simgrag.index.directory import build_index_dir
    from simgrag.pipeline import SimGRAG
    from simgrag.serve import ServeSettings, create_app
    from simgrag.testing.embedders import HashEmbedder
    from simgrag.testing.llm import FakeLLM
    from simgrag.testing.toy import write_toy_kg

    embedder = HashEmbedder(dim=32)
    build_index_dir(write_toy_kg(workdir / "toy.txt"), workdir / "toy.idx", embedder=embedder)
    rng = random.Random(seed)
    good = json.dumps({"triples": [["Titanic", "directed by", "UNKNOWN director 1"]]})
    llm = FakeLLM(lambda messages: llm_output(rng) if rng.random() < 0.8 else good)
    engine = SimGRAG(workdir / "toy.idx", llm=llm, embedder=embedder, claim_examples=None)
    with TestClient(create_app(engine, ServeSettings()), raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while client.get("/v1/health").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.05)
        return fuzz_http(client, n, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parser", type=int, default=100_000, help="LLM outputs through parse + validate")
    parser.add_argument("--patterns", type=int, default=100_000, help="odd values through pattern validation")
    parser.add_argument("--kg-files", type=int, default=20_000, help="mutated KG files through the readers")
    parser.add_argument("--http", type=int, default=20_000, help="hostile bodies through the HTTP API")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/fuzz.json"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # skipped-line warnings by the thousand
    report: dict[str, Any] = {"seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="simgrag-fuzz-") as tmp:
        work = Path(tmp)
        runs = [("parser", lambda: fuzz_parser(args.parser, args.seed)),
                ("patterns", lambda: fuzz_patterns(args.patterns, args.seed + 1)),
                ("kg_files", lambda: fuzz_kg_files(args.kg_files, work, args.seed + 2)),
                ("http", lambda: _http(args.http, args.seed + 3, work))]
        for name, run in runs:
            t = time.perf_counter()
            result = run()
            tally, extra = (result if isinstance(result, tuple) else (result, None))
            row = tally.as_dict() | {"seconds": round(time.perf_counter() - t, 1)}
            if extra is not None:
                row["kg_lines"] = extra
            report[name] = row
            print(f"{name:<9} cases {row['cases']:>7,}  untyped {row['untyped']}  {row['seconds']:>6.1f} s  "
                  f"{row['outcomes']}" + (f"  lines {extra:,}" if extra is not None else ""), flush=True)
            for value, trace in tally.untyped[:3]:
                print("   UNTYPED:", value, "\n", trace)
    report["total_cases"] = sum(report[k]["cases"] for k in ("parser", "patterns", "kg_files", "http"))
    report["total_untyped"] = sum(report[k]["untyped"] for k in ("parser", "patterns", "kg_files", "http"))
    print(f"total: {report['total_cases']:,} cases, {report['total_untyped']} untyped")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
