"""WorldCup2014 test and validation questions as JSONL files for ``simgrag bench qa`` and ``simgrag grounding fit``.

The test set is what ``simgrag bench wc2014 --sample N --seed S`` asks (N distinct questions per file); the
validation set is drawn (``--val-per-file``, ``--val-seed``) from the questions outside the test set and outside the
examples file (``simgrag bench wc2014-examples`` with the same ``--sample``/``--seed``), so a fit never sees a test
question or a shot::

    python benchmarks/wc2014_split.py --wc-dir ../shared/data/WC2014 --examples runs/wc12.yaml \\
        --test runs/wc_test.jsonl --validation runs/wc_val.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

import yaml

from simgrag.eval.wc2014 import WC_FILES, WCQuestion, load_wc2014
from simgrag.fileio import write_bytes_atomic

logger = logging.getLogger("wc2014_split")


def _lines(questions: list[WCQuestion]) -> bytes:
    return "".join(json.dumps({"question": q.question, "answers": list(q.answers), "group": q.group},
                              ensure_ascii=False) + "\n" for q in questions).encode("utf-8")


def split(wc_dir: Path, examples: Path | None, sample: int, seed: int, val_per_file: int,
          val_seed: int) -> tuple[list[WCQuestion], list[WCQuestion]]:
    """(test, validation) questions, file by file in :data:`WC_FILES` order."""
    shots = set()
    if examples is not None:
        shots = {str(e["question"]) for e in (yaml.safe_load(examples.read_text(encoding="utf-8")) or {})
                 .get("examples", [])}
    test: list[WCQuestion] = []
    validation: list[WCQuestion] = []
    for group in WC_FILES:
        drawn = load_wc2014(wc_dir, group, sample=sample, seed=seed)
        asked = {q.question for q in drawn}
        pool = [q for q in load_wc2014(wc_dir, group) if q.question not in asked and q.question not in shots]
        if len(pool) < val_per_file:
            raise SystemExit(f"{group}: only {len(pool)} questions outside the test set and the examples")
        test += drawn
        validation += random.Random(val_seed).sample(pool, val_per_file)
    return test, validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wc-dir", type=Path, required=True, help="the WorldCup2014 folder")
    parser.add_argument("--examples", type=Path, help="the examples file whose questions stay out of validation")
    parser.add_argument("--test", type=Path, required=True, help="test questions to write (JSONL)")
    parser.add_argument("--validation", type=Path, required=True, help="validation questions to write (JSONL)")
    parser.add_argument("--sample", type=int, default=100, help="test questions per file (bench wc2014 --sample)")
    parser.add_argument("--seed", type=int, default=0, help="the test sample's seed (bench wc2014 --seed)")
    parser.add_argument("--val-per-file", type=int, default=40)
    parser.add_argument("--val-seed", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    test, validation = split(args.wc_dir, args.examples, args.sample, args.seed, args.val_per_file, args.val_seed)
    write_bytes_atomic(args.test, _lines(test))
    write_bytes_atomic(args.validation, _lines(validation))
    logger.info("%d test questions → %s; %d validation questions → %s", len(test), args.test, len(validation),
                args.validation)


if __name__ == "__main__":
    main()
