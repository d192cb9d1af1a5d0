"""Pattern-stage accuracy and latency on MetaQA: does the LLM's pattern fit the gold relation chain?

Questions that appear in the examples file are skipped; the rest are sampled per hop with --seed.
Each --config is ``s<static>d<dynamic>[v][n]``: static shots, dynamic shots, ``v`` = ask for the
paper's "divided" segments too, ``n`` = no JSON-schema constrained decoding. Example::

    python benchmarks/pattern_accuracy.py --metaqa-dir ../shared/data/MetaQA --split dev \\
        --per-hop 40 --config s6d2 --config s12d0 --config s0d3
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from simgrag.errors import PatternError
from simgrag.eval.metaqa import MetaQAQuestion, load_metaqa, pattern_fits_chain
from simgrag.llm.base import LLM
from simgrag.pattern.examples import ExampleSet, builtin_examples, load_examples
from simgrag.pattern.generate import DEFAULT_DYNAMIC_SHOTS, DEFAULT_STATIC_SHOTS, PatternGenerator

logger = logging.getLogger("pattern_accuracy")
_CONFIG = re.compile(r"^s(\d+)d(\d+)(v?)(n?)$")


@dataclass(frozen=True)
class Config:
    name: str
    static: int
    dynamic: int
    divided: bool
    schema: bool


@dataclass(frozen=True)
class Outcome:
    ok: bool
    reason: str
    latency_s: float
    completion_tokens: int
    attempts: int


def parse_config(text: str) -> Config:
    m = _CONFIG.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"config {text!r} is not s<static>d<dynamic>[v][n], e.g. s6d2")
    return Config(text, int(m.group(1)), int(m.group(2)), bool(m.group(3)), not m.group(4))


def sample_questions(metaqa_dir: Path, split: str, hop: int, n: int, seed: int,
                     exclude: set[str]) -> list[MetaQAQuestion]:
    pool = [q for q in load_metaqa(metaqa_dir, hop, split) if q.question.lower() not in exclude]
    return random.Random(f"{seed}:{hop}").sample(pool, min(n, len(pool)))


def run_one(generator: PatternGenerator, q: MetaQAQuestion) -> Outcome:
    start = time.perf_counter()
    try:
        result = generator.generate(q.question)
    except PatternError as exc:
        return Outcome(False, f"error: {str(exc).splitlines()[0]}", time.perf_counter() - start, 0, 2)
    ok, reason = pattern_fits_chain(result.pattern, q.topic, q.chain)
    if not ok:
        logger.info("MISS %s | %s | %s | %s", q.chain, q.question, reason, result.pattern.triples())
    return Outcome(ok, reason, result.latency_s, result.completion_tokens, result.attempts)


def make_generator(llm: LLM, examples: ExampleSet, config: Config, max_tokens: int) -> PatternGenerator:
    return PatternGenerator(llm, examples, n_static_shots=config.static, n_dynamic_shots=config.dynamic,
                            with_divided=config.divided, use_json_schema=config.schema,
                            max_tokens=max_tokens)


def row(config: str, hop: str, outcomes: list[Outcome]) -> str:
    lat = sorted(o.latency_s for o in outcomes)
    n = len(outcomes)
    acc = 100.0 * sum(o.ok for o in outcomes) / n
    p90 = lat[min(n - 1, int(0.9 * n))]
    tokens = statistics.mean(o.completion_tokens for o in outcomes)
    retries = sum(o.attempts > 1 for o in outcomes)
    return (f"| {config:<8} | {hop:<4} | {n:>3} | {acc:6.1f} | {statistics.median(lat):5.2f} | {p90:5.2f} "
            f"| {tokens:6.1f} | {retries:>3} |")


def main() -> None:
    default = f"s{DEFAULT_STATIC_SHOTS}d{DEFAULT_DYNAMIC_SHOTS}"
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--split", default="dev", choices=["dev", "test"])
    parser.add_argument("--per-hop", type=int, default=40)
    parser.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", type=parse_config, action="append",
                        help=f"s<static>d<dynamic>[v][n]; repeatable (default {default})")
    parser.add_argument("--examples", type=Path, help="examples file (default: the built-in metaqa.yaml)")
    parser.add_argument("--llm", default="llamacpp", help="LLM spec, e.g. llamacpp or ollama:<model>")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("-v", "--verbose", action="store_true", help="log every miss")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)

    from simgrag.llm.registry import resolve_llm

    llm = resolve_llm(args.llm, cache=False)  # time real calls, never the disk cache
    examples = load_examples(args.examples) if args.examples else builtin_examples("metaqa")
    exclude = {e.question.lower() for e in examples.examples}
    questions = {h: sample_questions(args.metaqa_dir, args.split, h, args.per_hop, args.seed, exclude)
                 for h in args.hops}
    lines = [f"split={args.split} per_hop={args.per_hop} seed={args.seed} llm={llm.name}",
             "| config   | hop  |   n |  fits% |   p50 |   p90 | tokens | rep |",
             "|----------|------|-----|--------|-------|-------|--------|-----|"]
    for config in args.config or [parse_config(default)]:
        generator = make_generator(llm, examples, config, args.max_tokens)
        generator.generate(examples.examples[-1].question)  # warm-up: loads the model, caches the prefix
        every: list[Outcome] = []
        for hop, qs in questions.items():
            outcomes = [run_one(generator, q) for q in qs]
            every.extend(outcomes)
            lines.append(row(config.name, f"{hop}", outcomes))
            logger.info(lines[-1])
        lines.append(row(config.name, "all", every))
        logger.info(lines[-1])
    print("\n".join(lines))  # the table is this script's output


if __name__ == "__main__":
    main()
