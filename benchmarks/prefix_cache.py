"""What the on-disk prompt-prefix KV cache saves: the same pattern prompts in fresh model instances,
with the prefix evaluated (empty cache directory) and then loaded from disk (the cache that run wrote).

    python benchmarks/prefix_cache.py [--questions 6] [--out runs/prefix_cache.json]

Each round loads a new :class:`~simgrag.llm.llamacpp.LlamaCppLLM` (as a new process would) and asks the
pattern prompt (6 static + 2 dynamic MetaQA dev shots) for each question once. Reported per round: the
latency of each call, how many prefixes were evaluated / loaded / already in context, and whether the
outputs are identical across rounds (they must be: the state is the same KV cache).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.pattern.examples import builtin_examples
from simgrag.pattern.prompt import PromptBuilder

QUESTIONS = [
    "who directed Inception", "what movies did Tom Hanks star in", "who acted in the movies directed by Ridley Scott",
    "what genres are the movies written by Philip Rosenthal in", "when was Casablanca released",
    "what languages are the films that share actors with Heat in",
]


def run_round(builder: PromptBuilder, questions: list[str], kv_dir: Path | None) -> dict[str, object]:
    llm = LlamaCppLLM(kv_cache=kv_dir is not None, kv_cache_dir=kv_dir)
    start = time.perf_counter()
    llm.load()
    load_s = time.perf_counter() - start
    latencies, texts = [], []
    for question in questions:
        response = llm.complete(builder.messages(question), max_tokens=128)
        latencies.append(response.latency_s)
        texts.append(response.text)
    llm.close()
    return {"model_load_s": load_s, "latency_s": latencies, "p50_s": statistics.median(latencies),
            "total_s": sum(latencies), "prefix_stats": dict(llm.prefix_stats), "outputs": texts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--out", type=Path, default=Path("runs/prefix_cache.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    builder = PromptBuilder(builtin_examples("metaqa"))
    questions = QUESTIONS[: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        rounds = {
            "no_cache": run_round(builder, questions, None),
            "cache_cold": run_round(builder, questions, Path(tmp)),   # evaluates and saves each prefix
            "cache_warm": run_round(builder, questions, Path(tmp)),   # a new instance loads them
        }
    same = rounds["no_cache"]["outputs"] == rounds["cache_cold"]["outputs"] == rounds["cache_warm"]["outputs"]
    report = {"questions": questions, "identical_outputs": same, "rounds": rounds}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| round | prefixes evaluated / loaded / in context | total s | p50 s | per call s |")
    print("|---|---|---|---|---|")
    for name, r in rounds.items():
        stats = r["prefix_stats"]
        calls = " ".join(f"{x:.2f}" for x in r["latency_s"])  # type: ignore[attr-defined]
        print(f"| {name} | {stats['evaluated']} / {stats['loaded']} / {stats['in_context']} | "  # type: ignore[index]
              f"{r['total_s']:.1f} | {r['p50_s']:.2f} | {calls} |")
    print(f"identical outputs across rounds: {same}")


if __name__ == "__main__":
    main()
