"""The 32 index corruptions (simgrag.testing.corrupt) on a real index, each probed in its own process.

For each corruption: hard-link copy of the index with one file really copied and damaged, then a
fresh Python process opens it and retrieves fixed 1- and 2-hop patterns (drawn from the intact
index). The outcome is ``refused`` (a typed error at open), ``served`` (answers identical to the
intact index), ``typed_at_query``, ``silent`` (different answers, no error) or ``crash`` (an untyped
exception or a signal such as SIGSEGV). Afterwards ``simgrag check`` is run on every damaged copy.

    python benchmarks/corrupt_index.py --index-dir /tmp/metaqa.idx --out runs/corrupt_index.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any


def _probe_main(path: Path, patterns_file: Path) -> None:
    from simgrag.testing.corrupt import probe

    patterns = json.loads(patterns_file.read_text())
    print(json.dumps(probe(path, patterns)))


def _run_probe(path: Path, patterns_file: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--probe", str(path), "--patterns-file", str(patterns_file)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode < 0:
        return {"stage": "?", "signal": -proc.returncode, "typed": False,
                "error": f"killed by signal {-proc.returncode}", "answers": []}
    try:
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"stage": "?", "typed": False, "error": f"exit {proc.returncode}: {proc.stderr[-400:]}", "answers": []}


def _check(path: Path) -> int:
    proc = subprocess.run([sys.executable, "-m", "simgrag.cli", "check", str(path)], capture_output=True, text=True,
                          timeout=600)
    return proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path)
    parser.add_argument("--patterns", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/corrupt_index.json"))
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--patterns-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        _probe_main(args.probe, args.patterns_file)
        return
    if args.index_dir is None:
        parser.error("--index-dir is required")
    from simgrag.index.directory import open_index_dir
    from simgrag.testing.corrupt import CORRUPTIONS, classify, copy_index, probe, probe_patterns

    work = Path(tempfile.mkdtemp(prefix="corrupt-", dir=args.index_dir.parent))
    try:
        patterns = probe_patterns(open_index_dir(args.index_dir), n=args.patterns, seed=args.seed)
        patterns_file = work / "patterns.json"
        patterns_file.write_text(json.dumps(patterns))
        reference = probe(args.index_dir, patterns)
        if reference["stage"] != "done":
            raise SystemExit(f"the intact index fails the probe: {reference}")
        rows = []
        for i, corruption in enumerate(CORRUPTIONS):
            damaged = work / f"c{i:02d}"
            copy_index(args.index_dir, damaged, corruption.file)
            corruption.apply(damaged, random.Random(args.seed + i))
            t = time.perf_counter()
            result = _run_probe(damaged, patterns_file)
            outcome = classify(result, reference)
            check_rc = _check(damaged)
            rows.append({"corruption": corruption.name, "group": corruption.group, "outcome": outcome,
                         "error": result.get("error"), "check_exit": check_rc,
                         "seconds": round(time.perf_counter() - t, 2)})
            print(f"{outcome:<15} check={check_rc}  {corruption.name}: {(result.get('error') or '')[:110]}", flush=True)
            shutil.rmtree(damaged)
        counts = Counter(r["outcome"] for r in rows)
        report = {"index": str(args.index_dir), "corruptions": len(rows), "outcomes": dict(counts),
                  "check_failed": sum(r["check_exit"] != 0 for r in rows), "rows": rows}
        print(json.dumps({k: v for k, v in report.items() if k != "rows"}))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
