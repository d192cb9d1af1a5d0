"""Write the leave-template-out (LTO) examples file for a sample of the reworded DEV questions.

The evaluated questions are those ``heldout_eval.py --set metaqa-lto|metaqa-reworded-lto`` draws with
the same ``--per-hop`` and ``--seed`` (the harness writes the same file into its ``--out`` folder).
See :mod:`simgrag.eval.heldout` for the rule. The file holds MetaQA DEV text: write it under runs/.

    python benchmarks/heldout/make_lto_examples.py --metaqa-dir ../shared/data/MetaQA \\
        --per-hop 30 --out runs/heldout/lto_examples.yaml
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from simgrag.eval.heldout import load_reworded, select_per_hop, write_lto_examples
from simgrag.pattern.examples import builtin_examples, load_examples

logger = logging.getLogger("make_lto_examples")
REWORDED = Path(__file__).resolve().parent / "metaqa_dev_reworded.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--reworded", type=Path, default=REWORDED)
    parser.add_argument("--per-hop", type=int, default=None, help="questions per hop (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", type=Path, default=None, help="examples pool (default: the bundled metaqa.yaml)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    questions = select_per_hop(load_reworded(args.reworded, args.metaqa_dir), args.per_hop, args.seed)
    pool = load_examples(args.pool) if args.pool else builtin_examples("metaqa")
    kept = write_lto_examples(pool, [q.dev for q in questions], args.out)
    logger.info("%d evaluated questions: %d of %d pool examples kept in %s", len(questions), len(kept), len(pool),
                args.out)


if __name__ == "__main__":
    main()
