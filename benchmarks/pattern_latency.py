"""Where a pattern LLM call's time goes on this machine: prefix (KV load or evaluation), the rest of the
prompt (dynamic shots + question), and decoding — per arm, on the same questions, in one process.

Arms (``--arms``, comma-separated; alternated question by question so a busy machine slows all alike):

- ``default``: today's pattern prompt (6 static + 2 dynamic shots) and lookup decoding with each draft as
  long as pays on this machine's measured batch costs (:mod:`simgrag.llm.batch_costs`);
- ``fill``: drafts filled up to the fixed sizes 4/8/16/32/48 whatever they cost here (the default before
  2026-11-27);
- ``dyn1``: one dynamic shot instead of two;
- ``plain``: lookup decoding off (one model step per generated token);
- ``fixed-draft``: lookup drafts of at most 10 tokens taken as they come (no agreement check, no
  filling up to cheap batch sizes: the drafts before 2026-11-26).

Each arm has its own model instance and KV directory (a fresh temporary one, whose first call evaluates
the fixed part: ``--skip`` first calls are left out of the figures). Questions: the hand-reworded MetaQA DEV
questions of ``benchmarks/heldout`` (no dataset needed). Outputs must not differ between arms that change
only the decoding (reported as ``same_output``).

    python benchmarks/pattern_latency.py --questions 30 --arms default,fill,dyn1,plain,fixed-draft \\
        --out runs/pattern_latency.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from simgrag.llm import lookup_decoding
from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.pattern.examples import builtin_examples
from simgrag.pattern.prompt import PromptBuilder

HERE = Path(__file__).resolve().parent
ARMS = ("default", "fill", "dyn1", "plain", "fixed-draft")


def _questions(n: int) -> list[str]:
    rows = [json.loads(line) for line in (HERE / "heldout" / "metaqa_dev_reworded.jsonl").read_text().splitlines()]
    by_hop = [[r["question"] for r in rows if r["hop"] == h] for h in (1, 2, 3)]
    out: list[str] = []
    while len(out) < n and any(by_hop):
        for hop in by_hop:
            if hop and len(out) < n:
                out.append(hop.pop(0))
    return out


def _old_find_draft(tokens: Any, *, max_ngram: int = 4, max_draft: int = 10, **_: Any) -> list[int]:
    """The drafts before 2026-11-26: the latest earlier occurrence's continuation, at most 10 tokens."""
    seq = list(tokens)
    for n in range(min(max_ngram, len(seq) - 1), 0, -1):
        tail = seq[len(seq) - n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start:start + n] == tail:
                return seq[start + n:start + n + min(max_draft, 10)]
    return []


def run(args: argparse.Namespace) -> dict[str, Any]:
    examples = builtin_examples("metaqa")
    questions = _questions(args.questions)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"unknown arms {sorted(unknown)}; valid: {', '.join(ARMS)}")
    temps = {arm: tempfile.TemporaryDirectory(prefix=f"kv-{arm}-") for arm in arms}
    llms = {arm: LlamaCppLLM(kv_cache_dir=temps[arm].name, lookup_decoding=arm != "plain",
                             batch_sizes=lookup_decoding.CHEAP_BATCH_SIZES if arm in ("fill", "fixed-draft") else None)
            for arm in arms}
    builders = {arm: PromptBuilder(examples, n_dynamic_shots=1 if arm == "dyn1" else 2) for arm in arms}
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for i, question in enumerate(questions):
        for arm in arms if i % 2 == 0 else list(reversed(arms)):
            llm = llms[arm]
            before = dict(llm.decode_stats)
            patch = (mock.patch.object(lookup_decoding, "find_draft", _old_find_draft) if arm == "fixed-draft"
                     else mock.patch.object(lookup_decoding, "find_draft", lookup_decoding.find_draft))
            messages = builders[arm].messages(question)
            prefix_before = dict(llm.prefix_stats)
            start = time.perf_counter()
            with patch:
                response = llm.complete(messages, max_tokens=200)
            wall = time.perf_counter() - start
            row = {k: llm.decode_stats[k] - before[k] for k in llm.decode_stats}
            row.update({f"prefix_{k}": llm.prefix_stats[k] - prefix_before[k] for k in llm.prefix_stats})
            rows[arm].append({"question": question, "wall_s": wall, "text": response.text, **row})
    report: dict[str, Any] = {"questions": len(questions), "skip": args.skip, "arms": {}}
    for arm in arms:
        kept = rows[arm][args.skip:]
        def med(key: str, kept: list[dict[str, Any]] = kept) -> float:
            return statistics.median(r[key] for r in kept) if kept else float("nan")
        same = [a["text"] == b["text"] for a, b in zip(rows[arm], rows[arms[0]], strict=True)]
        report["arms"][arm] = {
            "wall_p50_s": med("wall_s"), "prefix_p50_s": med("prefix_s"), "prompt_tokens_p50": med("prompt_tokens"),
            "prompt_p50_s": med("prompt_s"), "decode_p50_s": med("decode_s"), "tokens_p50": med("tokens"),
            "steps_p50": med("steps"), "first_call_s": rows[arm][0]["wall_s"] if rows[arm] else None,
            "same_output_as_first_arm": sum(same),
            "prefix_partial_loads": sum(r["prefix_partial"] for r in kept),
            "prefix_s_sum": sum(r["prefix_s"] for r in kept), "rows": rows[arm]}
        a = report["arms"][arm]
        print(f"{arm:12s} wall p50 {a['wall_p50_s']:.2f} s | prefix {a['prefix_p50_s']:.3f} s | prompt "
              f"{a['prompt_tokens_p50']:.0f} tok {a['prompt_p50_s']:.2f} s | decode {a['tokens_p50']:.0f} tok in "
              f"{a['steps_p50']:.0f} steps {a['decode_p50_s']:.2f} s | first call {a['first_call_s']:.1f} s | "
              f"same output {a['same_output_as_first_arm']}/{len(rows[arm])} | prefix loaded up to a message boundary "
              f"{a['prefix_partial_loads']}x, prefix total {a['prefix_s_sum']:.1f} s", flush=True)
    for llm in llms.values():
        llm.close()
    for temp in temps.values():
        temp.cleanup()
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=30)
    p.add_argument("--arms", default="default,fill,dyn1,plain,fixed-draft")
    p.add_argument("--skip", type=int, default=1, help="first calls per arm left out (the fixed part evaluated)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    report = run(args)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
