"""Mutation check: five plausible bugs, each of which the test suite once let through (issue #15).

Each mutation edits one line of a copy of ``src/`` (the working tree is never touched), runs the
tests that should notice it against the copy, and reports whether at least one test failed
("killed") or all passed ("survived": a hole in the tests). The unmutated copy runs first and must
pass. Exit status 1 when a mutation survives.

    python benchmarks/mutation.py                 # the five mutations, their relevant tests
    python benchmarks/mutation.py --all-tests     # each against the whole suite (slow)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to src/simgrag
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation("search stack growth zeroed (grown stack loses its entries)", "match/search.py",
             "self.stk_j = np.resize(self.stk_j, size)\n            self.stk_c = np.resize(self.stk_c, size)",
             "self.stk_j = np.zeros(size, dtype=np.int64)\n            self.stk_c = np.zeros(size, dtype=np.float64)",
             ("tests/test_search_oracle.py", "tests/test_match_property.py")),
    Mutation("_combine advances only the first component", "match/search.py",
             "        for c in range(len(lists)):\n            nxt = ",
             "        for c in range(1):\n            nxt = ",
             ("tests/test_search_oracle.py", "tests/test_match_property.py")),
    Mutation("from_pairs keeps the largest distance of a duplicate id", "match/candidates.py",
             "order = np.lexsort((dist_arr, id_arr))", "order = np.lexsort((-dist_arr, id_arr))",
             ("tests/test_search_oracle.py", "tests/test_match_property.py")),
    Mutation("exact-name candidate injection removed", "match/retrieve.py",
             "if exact_names and self.store.num_entities <= EXACT_NAME_MAX_ENTITIES:", "if False:",
             ("tests/test_search_oracle.py", "tests/test_index_dir.py", "tests/test_pipeline.py")),
    Mutation("claim holds() ignores free inner nodes", "eval/claims.py",
             "return self._solve(list(facts), free, {})", "return self._solve(list(facts), frozenset(), {})",
             ("tests/test_claims_oracle.py", "tests/test_claims.py")),
)


def _pytest(src: Path, tests: list[str], timeout: int) -> tuple[bool, list[str], float]:
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(src.parent / "numba-cache")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not llm", *tests]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    failed = sorted(set(re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.MULTILINE)))
    return proc.returncode == 0, failed, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all-tests", action="store_true", help="run the whole suite for every mutation")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--out", type=Path, default=Path("runs/mutation.json"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="simgrag-mutation-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        every = sorted({t for m in MUTATIONS for t in m.tests})
        ok, failed, seconds = _pytest(src, ["tests"] if args.all_tests else every, args.timeout)
        print(f"{'unmutated':<62} {'passes' if ok else 'FAILS'}  ({seconds:.0f} s) {failed}", flush=True)
        if not ok:
            raise SystemExit("the unmutated copy fails its tests; fix that first")
        for mutation in MUTATIONS:
            path = src / "simgrag" / mutation.file
            original = path.read_text(encoding="utf-8")
            if original.count(mutation.old) != 1:
                raise SystemExit(f"{mutation.name}: the line to mutate is not found exactly once in {mutation.file}")
            path.write_text(original.replace(mutation.old, mutation.new), encoding="utf-8")
            try:
                ok, failed, seconds = _pytest(src, ["tests"] if args.all_tests else list(mutation.tests), args.timeout)
            finally:
                path.write_text(original, encoding="utf-8")
            rows.append({"mutation": mutation.name, "file": mutation.file, "killed": not ok, "failing_tests": failed,
                         "tests_run": ["tests"] if args.all_tests else list(mutation.tests),
                         "seconds": round(seconds, 1)})
            print(f"{mutation.name:<62} {'killed' if not ok else 'SURVIVED'} ({seconds:.0f} s) by {len(failed)} "
                  f"test(s): {', '.join(failed[:4])}{' …' if len(failed) > 4 else ''}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    survived = [r["mutation"] for r in rows if not r["killed"]]
    print(f"{len(rows) - len(survived)} of {len(rows)} mutations killed")
    if survived:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
