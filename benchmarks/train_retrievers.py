"""Train the trainable retrievers (SubgraphRAG, GSR-style relation chains) on MetaQA and save them.

    python benchmarks/train_retrievers.py --metaqa-dir ../shared/data/MetaQA --index-dir runs/metaqa.idx \\
        --out-dir runs/retrievers [--which subgraphrag,gsr] [--max-questions 3000]

Training questions come from the MetaQA **dev** split (1-, 2- and 3-hop vanilla, with the gold chains
of ``qa_dev_qtype.txt``), or ``--split train`` where a train qtype file exists; the test split is
never read. ``--max-questions N`` draws at most N questions, evenly from the three hop counts,
seeded. Writes ``OUT/subgraphrag/``, ``OUT/gsr/`` (model directories, each with a manifest) and
``OUT/train_summary.json`` (what was trained, on what, how long, final metrics).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any

from simgrag.eval.metaqa import chain_relations, load_metaqa
from simgrag.fileio import write_bytes_atomic
from simgrag.index.directory import IndexDir, open_index_dir
from simgrag.retrievers._torch import torch
from simgrag.retrievers.gsr import GSRConfig
from simgrag.retrievers.gsr_train import GSRTrainer
from simgrag.retrievers.subgraphrag import SubgraphRAGConfig
from simgrag.retrievers.subgraphrag_train import SubgraphRAGTrainer
from simgrag.retrievers.training import QAExample

WHICH = ("subgraphrag", "gsr")


def metaqa_examples(metaqa_dir: Path, split: str, max_questions: int | None, seed: int) -> list[QAExample]:
    """MetaQA questions of ``split`` as training examples, at most ``max_questions`` (evenly per hop)."""
    if split == "test":
        raise SystemExit("refusing to train on the MetaQA test split")
    rng = random.Random(seed)
    per_hop = None if max_questions is None else -(-max_questions // 3)
    out: list[QAExample] = []
    for hop in (1, 2, 3):
        questions = load_metaqa(metaqa_dir, hop, split)
        if per_hop is not None and len(questions) > per_hop:
            questions = rng.sample(questions, per_hop)
        out.extend(QAExample(q.question, (q.topic,), q.answers, tuple(chain_relations(q.chain))) for q in questions)
    if max_questions is not None and len(out) > max_questions:
        out = rng.sample(out, max_questions)
    return out


def train_subgraphrag(index: IndexDir, examples: list[QAExample], args: argparse.Namespace,
                      description: str) -> dict[str, Any]:
    config = SubgraphRAGConfig(max_candidates=args.max_candidates)
    trainer = SubgraphRAGTrainer(index, config=config, seed=args.seed, show_progress=not args.quiet)
    t0 = time.perf_counter()
    model = trainer.fit(examples, epochs=args.epochs_subgraphrag, train_negatives=args.train_negatives,
                        description=description)
    path = model.save(args.out_dir / "subgraphrag")
    return {"path": str(path), "seconds": round(time.perf_counter() - t0, 1), "metrics": model.metrics,
            "train_questions": model.training["train_questions"], "skipped": model.training["skipped"]}


def train_gsr(index: IndexDir, examples: list[QAExample], args: argparse.Namespace,
              description: str) -> dict[str, Any]:
    trainer = GSRTrainer(index, config=GSRConfig(), seed=args.seed, show_progress=not args.quiet)
    t0 = time.perf_counter()
    model = trainer.fit(examples, epochs=args.epochs_gsr, description=description)
    path = model.save(args.out_dir / "gsr")
    return {"path": str(path), "seconds": round(time.perf_counter() - t0, 1), "metrics": model.metrics,
            "train_retrieval": model.training["train_retrieval"], "skipped": model.training["skipped"]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--which", default=",".join(WHICH), help="comma-separated: subgraphrag,gsr")
    parser.add_argument("--split", default="dev", choices=["dev", "train"])
    parser.add_argument("--max-questions", type=int, default=3000, help="0: all questions of the split")
    parser.add_argument("--epochs-subgraphrag", type=int, default=5)
    parser.add_argument("--epochs-gsr", type=int, default=20)
    parser.add_argument("--max-candidates", type=int, default=SubgraphRAGConfig.max_candidates)
    parser.add_argument("--train-negatives", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--embedder", default=None, help="override the index's embedder spec")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    unknown = set(args.which.split(",")) - set(WHICH)
    if unknown:
        parser.error(f"--which: unknown {', '.join(sorted(unknown))} (choose from {', '.join(WHICH)})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    index = open_index_dir(args.index_dir, embedder=args.embedder)
    examples = metaqa_examples(args.metaqa_dir, args.split, args.max_questions or None, args.seed)
    description = (f"MetaQA {args.split} (1/2/3-hop vanilla) from {args.metaqa_dir}: {len(examples)} questions, "
                   f"sampled evenly per hop with seed {args.seed}")
    logging.info("%s", description)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"index_dir": str(args.index_dir), "data": description, "models": {}}
    for name in args.which.split(","):
        train = train_subgraphrag if name == "subgraphrag" else train_gsr
        summary["models"][name] = train(index, examples, args, description)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    write_bytes_atomic(args.out_dir / "train_summary.json",
                       (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
