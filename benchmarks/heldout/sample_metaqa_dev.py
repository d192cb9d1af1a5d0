"""Draw the MetaQA DEV questions that benchmarks/heldout/metaqa_dev_reworded.jsonl rewords (seeded).

Per hop, ``--per-hop`` line numbers of ``{hop}-hop/vanilla/qa_dev.txt`` drawn uniformly with
``random.Random(seed * 10 + hop)``, leaving out every DEV question whose text is an example of the
bundled examples pool (src/simgrag/data/examples/metaqa.yaml): those would hand the model the exact
pattern. Writes a worklist (JSONL: hop, line, chain, question, topic, answers) for the person who
rewords them; the worklist holds MetaQA text and stays out of the repository (write it under runs/).

    python benchmarks/heldout/sample_metaqa_dev.py --metaqa-dir ../shared/data/MetaQA \
        --out runs/heldout/worklist.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from simgrag.eval.heldout import sample_dev_lines
from simgrag.eval.metaqa import load_metaqa
from simgrag.pattern.examples import builtin_examples

logger = logging.getLogger("sample_metaqa_dev")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--per-hop", type=int, default=100)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pool = {ex.question for ex in builtin_examples("metaqa").examples}
    rows = []
    for hop in (1, 2, 3):
        questions = load_metaqa(args.metaqa_dir, hop, "dev")
        for line in sample_dev_lines(questions, args.per_hop, seed=args.seed * 10 + hop, exclude=pool):
            q = questions[line - 1]
            rows.append({"hop": hop, "line": line, "chain": q.chain, "question": q.question, "topic": q.topic,
                         "answers": list(q.answers)})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    logger.info("wrote %d questions to %s", len(rows), args.out)


if __name__ == "__main__":
    main()
