"""Decoding time of recorded pattern calls under each lookup-draft policy, replayed on batch-cost tables.

Greedy decoding writes the same tokens whatever the drafts, so a recorded call (prompt, output) tells
which drafted tokens any policy would have had accepted; what a policy costs is then the sum of its
batches' costs on a machine's table (seconds per batch size). Policies: ``plain`` (one token per step),
``fill`` (drafts filled up to 4/8/16/32/48 tokens: the default before 2026-11-27), ``agreed`` (only the
part two earlier occurrences agree on), ``measured`` (:meth:`simgrag.llm.batch_costs.BatchCosts.draft_length`
on the table's costs at the probe sizes, interpolated: what ``LlamaCppLLM`` now does).

Recorded calls come from ``benchmarks/pattern_latency.py --out FILE`` (its first arm's rows: question and
output; the prompt is rebuilt with the same PromptBuilder). Tables: ``--measure`` times this machine's
batches (1..16, 20, 24, 28, 32, 40, 48 tokens after ~650 tokens of context) and writes them to ``--costs``;
``avx512`` is the table of the AVX-512 machine in :mod:`simgrag.llm.batch_costs`.

    python benchmarks/pattern_latency.py --questions 60 --arms default --out runs/pattern_calls.json
    python benchmarks/draft_replay.py --calls runs/pattern_calls.json --costs runs/batch_costs.json --measure
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simgrag.llm.batch_costs import PROBE_SIZES, BatchCosts, measure_batch_costs
from simgrag.llm.lookup_decoding import CHEAP_BATCH_SIZES, DecodeResult, lookup_decode
from simgrag.llm.models import pull_default_model
from simgrag.pattern.examples import builtin_examples
from simgrag.pattern.prompt import PromptBuilder

#: the AVX-512 machine's costs (2026-11-22, module docstring of simgrag.llm.batch_costs; seconds)
AVX512 = {1: .063, 4: .109, 8: .193, 10: .222, 15: .283, 16: .225, 32: .378, 48: .524}
MEASURED_SIZES = (*range(1, 17), 20, 24, 28, 32, 40, 48)


class Replay:
    """A "model" that knows the whole greedy sequence: its prediction after a batch's token is the next
    recorded token while the batch agrees with the record, and nothing after a disagreement."""

    def __init__(self, sequence: Sequence[int]) -> None:
        self.sequence = list(sequence)
        self.batches: list[int] = []

    def greedy_next(self, tokens: Sequence[int], n_past: int) -> list[int]:
        self.batches.append(len(tokens))
        out, agrees = [], True
        for i, token in enumerate(tokens):
            position = n_past + i
            agrees = agrees and position < len(self.sequence) and self.sequence[position] == token
            out.append(self.sequence[position + 1] if agrees and position + 1 < len(self.sequence) else -1)
        return out

    def truncate(self, n_past: int) -> None:
        return None


def measure(path: Path) -> dict[int, float]:
    """This machine's table, timed as ``LlamaCppLLM`` times it on its first load but after ~650 tokens of
    context (a pattern prompt's length), at more sizes, fastest of 3."""
    import llama_cpp

    from simgrag.llm.llamacpp import _batch_timer

    llama = llama_cpp.Llama(str(pull_default_model()), n_ctx=2048, n_threads=2, n_threads_batch=2, verbose=False)
    costs = measure_batch_costs(_batch_timer(llama, context_tokens=650), sizes=MEASURED_SIZES, rounds=3)
    path.write_text(json.dumps(costs.to_json()))
    return dict(costs.seconds)


def recorded_calls(files: Sequence[Path]) -> list[tuple[list[int], list[int], int]]:
    """(prompt tokens, output tokens, end token) of each recorded call."""
    import llama_cpp

    from simgrag.llm.llamacpp import LlamaCppLLM

    vocab = llama_cpp.Llama(str(pull_default_model()), vocab_only=True, verbose=False)
    chat = LlamaCppLLM(kv_cache=False)
    builder = PromptBuilder(builtin_examples("metaqa"))
    calls = []
    for path in files:
        report = json.loads(path.read_text())
        for row in next(iter(report["arms"].values()))["rows"]:
            messages = [{"role": m.role, "content": m.content} for m in builder.messages(row["question"])]
            prompt, _, _ = chat._tokenize_chat(vocab, messages)
            output = vocab.tokenize(row["text"].encode("utf-8"), add_bos=False, special=False)
            calls.append((prompt, output, vocab.token_eos()))
    return calls


def replay(calls: list[tuple[list[int], list[int], int]], table: dict[int, float],
           policy: Callable[[Replay, list[int], int, Callable[[int], bool]], DecodeResult]) -> dict[str, Any]:
    seconds, steps, tokens = 0.0, 0, 0
    costs = BatchCosts(table)
    for prompt, output, end in calls:
        model = Replay([*prompt, *output, end])
        result = policy(model, prompt, output[0], lambda t, end=end: t == end)
        assert result.tokens == output, "a replay must write the recorded tokens"
        seconds += sum(costs.cost(b) for b in model.batches)
        steps += len(model.batches)
        tokens += len(output)
    return {"decode_s": round(seconds, 1), "steps": steps, "tokens": tokens}


def policies(table: dict[int, float]) -> dict[str, Callable[..., DecodeResult]]:
    probed = BatchCosts({n: BatchCosts(table).cost(n) for n in PROBE_SIZES})

    def make(**options: Any) -> Callable[..., DecodeResult]:
        return lambda model, prompt, first, is_end: lookup_decode(model, prompt, first, max_tokens=200,
                                                                  is_end=is_end, **options)

    return {"plain": make(batch_sizes=(1,)), "fill": make(batch_sizes=CHEAP_BATCH_SIZES),
            "agreed": make(batch_sizes=()), "measured": make(draft_length=probed.draft_length)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=Path, action="append", required=True, help="pattern_latency.py --out files")
    p.add_argument("--costs", type=Path, default=None, help="this machine's table (JSON; with --measure: written)")
    p.add_argument("--measure", action="store_true")
    args = p.parse_args()
    tables = {"avx512": AVX512}
    if args.costs is not None:
        if args.measure:
            here = measure(args.costs)
        else:
            here = {int(k): v for k, v in json.loads(args.costs.read_text()).items()}
        tables = {"this machine": here, **tables}
    calls = recorded_calls(args.calls)
    print(f"{len(calls)} recorded calls")
    for machine, table in tables.items():
        for name, policy in policies(table).items():
            print(json.dumps({"machine": machine, "policy": name, **replay(calls, table, policy)}), flush=True)


if __name__ == "__main__":
    main()
