"""The embedded LLM with one context against several: wall time and peak RSS of the same questions.

Each :class:`llama_cpp.Llama` context of :class:`~simgrag.llm.llamacpp.LlamaCppLLM` is a whole model
instance. This script asks the same questions of the bundled sample KG (``--questions``, default: ones
that need the pattern call, and ``verify`` claims, so the pattern, answer and claim prompts take turns) in a
fresh process per setting of ``max_contexts``, alternating the settings over ``--rounds`` so that a busy
machine slows both alike, and prints per setting: the seconds of every question, their sum, the process's
peak RSS, and how many model instances were loaded. The KV store of prompt prefixes is the user's (warm
after the first round): that is what a user's machine has after ``simgrag models pull``.

    python benchmarks/llm_contexts.py --settings 1,4 --rounds 2 --out runs/llm_contexts.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

QUESTIONS = (
    "Name the films whose director also made Titanic",
    "Who starred in the films directed by Michael Mann?",
    "What genre are the movies written by Ben Hecht?",
    "Which movies did the director of Alien write?",
)
CLAIMS = (
    "Christopher Nolan directed Inception.",
    "Heat was directed by Steven Spielberg.",
)

_CHILD = r"""
import json, resource, sys, time
from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.pipeline import SimGRAG, sample_index
k, questions, claims = json.loads(sys.argv[1])
llm = LlamaCppLLM(max_contexts=k)
engine = SimGRAG(sample_index(), llm=llm)
times = []
for i in range(max(len(questions), len(claims))):
    for text, call in ((questions[i] if i < len(questions) else None, engine.ask),
                       (claims[i] if i < len(claims) else None, engine.verify)):
        if text is None:
            continue
        t = time.perf_counter()
        call(text)
        times.append(round(time.perf_counter() - t, 3))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"max_contexts": k, "seconds": times, "total_s": round(sum(times), 2),
                  "peak_rss_mb": round(rss), "contexts": len(llm._contexts), "prefix_stats": llm.prefix_stats}))
"""


def run_one(k: int, questions: list[str], claims: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([k, questions, claims])], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        return {"max_contexts": k, "error": done.stderr[-2000:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="1,4", help="max_contexts values, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--question", action="append", help="a question (repeatable; default: four built in)")
    parser.add_argument("--claim", action="append", help="a claim (repeatable; default: two built in)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = [int(x) for x in args.settings.split(",") if x.strip()]
    questions, claims = list(args.question or QUESTIONS), list(args.claim or CLAIMS)
    rows = []
    for r in range(args.rounds):
        for k in settings if r % 2 == 0 else reversed(settings):
            row = {"round": r, **run_one(k, questions, claims)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
