"""Held-out evaluation (issue 14): off-template MetaQA wording and a second KG, through the real engine.

Sets (``--set``, several comma-separated; each goes to ``OUT/<set>.jsonl``):

- ``metaqa-reworded``: the hand-reworded MetaQA DEV questions (benchmarks/heldout/metaqa_dev_reworded.jsonl),
  full examples pool;
- ``metaqa-lto``: the same DEV questions in MetaQA's own wording, with the leave-template-out pool (every
  pool example sharing a phrasing template with an evaluated question removed: simgrag.eval.heldout);
- ``metaqa-reworded-lto``: the reworded questions with the leave-template-out pool;
- ``metaqa-dev``: the same DEV questions in MetaQA's own wording with the full pool (the TEST setting, on
  DEV: the pool holds another DEV question of each one's template, never the question itself);
- ``geo``: hand-written questions over the geography KG of benchmarks/heldout/make_geo_kg.py (built into
  runs/heldout/ when missing), with benchmarks/heldout/geo_examples.yaml and geo_aliases.yaml;
- ``geo-wc``: the same KG, questions, examples and aliases rewritten in WorldCup2014 / PathQuestion's
  conventions by benchmarks/heldout/wc_style.py (``snake_case`` entities and relations, an ``_inverse`` twin
  of every relation, lower-case questions): the files go to ``--index-dir``/wc-<digest>/; ``--examples``,
  when given, is used as it is (a file bootstrapped on the rewritten index).

Per set and hop: Hits@1 as simgrag.eval.runner counts it (all questions and the answerable subset), p50/p95
seconds per question, LLM calls per question (a counting wrapper around the LLM), pattern-fit rate against
the gold chain. The engine is ``simgrag.SimGRAG`` with the embedded llama.cpp model and ``answer_mode="auto"``
unless told otherwise; no LLM response cache (``--llm-cache``), so timings are real; a 30 s deadline on
each subgraph search (``--deadline``; a pattern of UNKNOWN nodes only can otherwise search for minutes).
``--pattern-option KEY=VALUE`` (repeatable, VALUE read as JSON when it parses) goes to the engine's
``pattern_options``.
Resumable: a rerun with the same ``--out`` keeps finished rows. Outputs: ``OUT/<set>.jsonl`` (one row per
question), ``OUT/<set>.summary.json``, and ``OUT/summary.json`` + ``OUT/summary.md`` over every set in OUT.

    python benchmarks/heldout_eval.py --set metaqa-reworded,metaqa-lto,metaqa-reworded-lto \\
        --metaqa-dir ../shared/data/MetaQA --per-hop 30 --out runs/heldout/baseline
    python benchmarks/heldout_eval.py --set geo --per-hop 20 --out runs/heldout/baseline
    python benchmarks/heldout_eval.py --set geo --examples my_bootstrapped.yaml --geo-aliases none \\
        --out runs/heldout/geo-boot
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError, SimGRAGError
from simgrag.eval.chains import GEO_RELATION_WORDS, ChainQuestion, keyword_kinds, load_chain_questions
from simgrag.eval.counting import CountingLLM, CountingSimGRAG
from simgrag.eval.heldout import (
    annotate_rows,
    chain_items,
    llm_call_stats,
    load_reworded,
    select_per_hop,
    write_lto_examples,
)
from simgrag.eval.metaqa import metaqa_index
from simgrag.eval.runner import QAItem, run_qa_bench, summarize
from simgrag.fileio import write_bytes_atomic
from simgrag.index.directory import IndexDir
from simgrag.llm.registry import resolve_llm
from simgrag.match.retrieve import RetrievalSettings
from simgrag.pattern.examples import builtin_examples, load_examples
from simgrag.pattern.generate import parse_pattern_options
from simgrag.pipeline import build_index

logger = logging.getLogger("heldout_eval")

HERE = Path(__file__).resolve().parent
DATA = HERE / "heldout"
ROOT = HERE.parent
SETS = ("metaqa-reworded", "metaqa-lto", "metaqa-reworded-lto", "metaqa-dev", "geo", "geo-wc")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", required=True, help=f"comma-separated: {', '.join(SETS)}")
    p.add_argument("--out", type=Path, required=True, help="output folder (rows, summaries)")
    p.add_argument("--per-hop", type=int, default=None, help="questions per hop, seeded sample (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=Path, default=None,
                   help="examples file instead of the set's default (for the LTO sets: the pool to filter)")
    p.add_argument("--pattern-option", action="append", default=[], metavar="KEY=VALUE",
                   help="engine pattern_options entry (repeatable); VALUE is JSON when it parses, else text")
    p.add_argument("--metaqa-dir", type=Path, default=None, help="MetaQA folder (the MetaQA sets)")
    p.add_argument("--reworded", type=Path, default=DATA / "metaqa_dev_reworded.jsonl")
    p.add_argument("--geo-kg", type=Path, default=ROOT / "runs" / "heldout" / "geo_kg.txt",
                   help="geography KG file (built by make_geo_kg.py when missing)")
    p.add_argument("--geo-questions", type=Path, default=DATA / "geo_questions.jsonl")
    p.add_argument("--geo-aliases", default=str(DATA / "geo_aliases.yaml"), help="relation aliases, or 'none'")
    p.add_argument("--index-dir", type=Path, default=ROOT / "runs" / "heldout",
                   help="where the geography index is built and reused")
    p.add_argument("--llm", default="llamacpp")
    p.add_argument("--base-url", default=None)
    p.add_argument("--llm-cache", default="none", help="none (default), default, or a cache file")
    p.add_argument("--answer-mode", default="auto", choices=("auto", "llm"))
    p.add_argument("--no-grounding", action="store_true",
                   help="the LLM's pattern as it is (only the echoed-role repair): the engine before issue 14")
    p.add_argument("--calibration", default="auto", help="abstention thresholds: auto (default), off, or a file")
    p.add_argument("--deadline", type=float, default=30.0,
                   help="seconds for one subgraph search, best-so-far after it (default 30; 0 = none): a pattern of "
                        "UNKNOWN nodes only can otherwise search for many minutes")
    p.add_argument("--no-resume", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    args.sets = [s.strip() for s in args.set.split(",") if s.strip()]
    unknown = set(args.sets) - set(SETS)
    if unknown or not args.sets:
        p.error(f"unknown set(s) {sorted(unknown)}; valid: {', '.join(SETS)}")
    if any(s.startswith("metaqa") for s in args.sets) and args.metaqa_dir is None:
        p.error("the MetaQA sets need --metaqa-dir")
    return args


def pattern_options(pairs: list[str]) -> dict[str, Any]:
    """``--pattern-option`` pairs as the CLI reads them; a bad one ends the run with its message."""
    try:
        return parse_pattern_options(pairs)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from exc


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _geo_kg(args: argparse.Namespace) -> Path:
    """The geography KG file, written from the PyPI packages' data when missing."""
    if not args.geo_kg.is_file():
        sys.path.insert(0, str(DATA))
        from make_geo_kg import write_geo_kg  # benchmarks/heldout/make_geo_kg.py

        write_geo_kg(args.geo_kg)
    return Path(args.geo_kg)


def _geo_aliases(args: argparse.Namespace) -> Path | None:
    return None if args.geo_aliases.lower() == "none" else Path(args.geo_aliases)


def geo_index(args: argparse.Namespace, kg: Path | None = None, aliases: Path | None = None,
              prefix: str = "geo") -> tuple[IndexDir, str | None]:
    """The geography KG's index (MiniLM), built once per KG and aliases file; the aliases used."""
    if kg is None:
        kg, aliases = _geo_kg(args), _geo_aliases(args)
    tag = f"{prefix}-{_digest(kg)}-{_digest(aliases) if aliases else 'noaliases'}"
    path = args.index_dir / f"{tag}.idx"
    if (path / "manifest.json").exists():
        from simgrag.index.directory import open_index_dir

        return open_index_dir(path), str(aliases) if aliases else None
    logger.info("indexing %s into %s (aliases: %s)", kg, path, aliases)
    return build_index(kg, path, embedder="minilm", relation_aliases=aliases, overwrite=True), \
        str(aliases) if aliases else None


def _retrieval(args: argparse.Namespace) -> RetrievalSettings:
    return RetrievalSettings(deadline_s=args.deadline or None)


def _engine_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"answer_mode": args.answer_mode, "retrieval": _retrieval(args),
            "ground_patterns": not args.no_grounding, "calibration": args.calibration}


class Prepared:
    """One set, ready to run: engine, items, and what the summary records about it."""

    def __init__(self, engine: CountingSimGRAG, items: list[QAItem], config: dict[str, Any],
                 chains: dict[str, ChainQuestion] | None = None,
                 kinds_of: Callable[[str], set[str]] | None = None) -> None:
        self.engine, self.items, self.config, self.chains = engine, items, config, chains
        self.kinds_of = kinds_of  # a relation phrase → the KG relations it names (pattern-fit annotation)


def prepare_metaqa(name: str, args: argparse.Namespace, llm: CountingLLM, options: dict[str, Any]) -> Prepared:
    from simgrag.eval.heldout import reworded_items

    index = metaqa_index(args.metaqa_dir)
    questions = select_per_hop(load_reworded(args.reworded, args.metaqa_dir), args.per_hop, args.seed)
    config: dict[str, Any] = {"reworded_file": str(args.reworded), "reworded_sha": _digest(args.reworded),
                              "index": str(index.path)}
    if name.endswith("-lto"):
        pool = load_examples(args.examples) if args.examples else builtin_examples("metaqa")
        lto_path = args.out / f"{name}.examples.yaml"
        kept = write_lto_examples(pool, [q.dev for q in questions], lto_path)
        examples: Any = lto_path
        config.update({"examples": str(lto_path), "examples_count": len(kept), "lto_pool": pool.source,
                       "lto_pool_size": len(pool), "lto_removed": len(pool) - len(kept)})
    else:
        examples = args.examples or "metaqa"
        config["examples"] = str(examples) if args.examples else "builtin:metaqa"
        config["examples_count"] = len(load_examples(args.examples) if args.examples else builtin_examples("metaqa"))
    engine = CountingSimGRAG(index, llm=llm, examples=examples, pattern_options=options, **_engine_options(args))
    items = reworded_items(questions, index.store, original=name in ("metaqa-lto", "metaqa-dev"))
    return Prepared(engine, items, config)


def prepare_geo(args: argparse.Namespace, llm: CountingLLM, options: dict[str, Any]) -> Prepared:
    index, aliases = geo_index(args)
    examples = args.examples or DATA / "geo_examples.yaml"
    return _prepare_chains(args, llm, options, index, aliases, args.geo_kg, args.geo_questions, examples,
                           keyword_kinds(GEO_RELATION_WORDS))


def prepare_geo_wc(args: argparse.Namespace, llm: CountingLLM, options: dict[str, Any]) -> Prepared:
    sys.path.insert(0, str(DATA))
    from wc_style import RELATIONS, write_wc_set  # benchmarks/heldout/wc_style.py

    kg, aliases = _geo_kg(args), _geo_aliases(args)
    source_examples = DATA / "geo_examples.yaml"
    parts = [_digest(p) for p in (kg, args.geo_questions, source_examples, aliases) if p is not None]
    files = write_wc_set(kg, args.geo_questions, source_examples, aliases,
                         args.index_dir / f"wc-{hashlib.sha256('-'.join(parts).encode()).hexdigest()[:12]}")
    wc_kg, wc_aliases = files["kg.txt"], files["aliases.yaml"]
    assert wc_kg is not None
    index, used = geo_index(args, wc_kg, wc_aliases, prefix="geo-wc")
    examples = args.examples or files["examples.yaml"]
    assert examples is not None
    geo_kinds = keyword_kinds(GEO_RELATION_WORDS)

    def wc_kinds(text: str) -> set[str]:  # the geo keyword stems, read on the snake_case names
        return {RELATIONS[k] for k in geo_kinds(text.replace("_", " "))}

    questions = files["questions.jsonl"]
    assert questions is not None
    return _prepare_chains(args, llm, options, index, used, wc_kg, questions, examples, wc_kinds)


def _prepare_chains(args: argparse.Namespace, llm: CountingLLM, options: dict[str, Any], index: IndexDir,
                    aliases: str | None, kg: Path, questions_file: Path, examples: Path,
                    kinds_of: Callable[[str], set[str]]) -> Prepared:
    questions = load_chain_questions(questions_file, index.store)
    chosen = select_per_hop(questions, args.per_hop, args.seed)
    engine = CountingSimGRAG(index, llm=llm, examples=examples, pattern_options=options, **_engine_options(args))
    config = {"kg": str(kg), "kg_sha": _digest(kg), "index": str(index.path),
              "questions_file": str(questions_file), "questions_sha": _digest(questions_file),
              "examples": str(examples), "examples_count": len(load_examples(examples)),
              "relation_aliases": aliases}
    return Prepared(engine, chain_items(chosen), config, {q.question: q for q in chosen}, kinds_of)


def run_set(name: str, args: argparse.Namespace, llm: CountingLLM, options: dict[str, Any]) -> dict[str, Any]:
    prepare = {"geo": prepare_geo, "geo-wc": prepare_geo_wc}.get(name)
    prepared = prepare(args, llm, options) if prepare else prepare_metaqa(name, args, llm, options)
    engine = prepared.engine
    warm = engine.warmup()
    rows_path = args.out / f"{name}.jsonl"
    logger.info("%s: %d questions -> %s", name, len(prepared.items), rows_path)
    run_qa_bench(engine, prepared.items, rows_path, progress=not args.quiet, resume=not args.no_resume)
    rows = [json.loads(line) for line in rows_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = annotate_rows(rows, calls=engine.calls_by_question, chains=prepared.chains,
                         kinds_of=prepared.kinds_of)
    write_bytes_atomic(rows_path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n"
                                          for r in rows).encode("utf-8"))
    summary = summarize(rows)
    for group, stats in summary.items():
        of_group = [r for r in rows if group == "overall" or r["group"] == group]
        stats["llm_calls"] = llm_call_stats(of_group)
        # a first answer can be right by luck when the gold set is large: hits whose pattern also fits the chain
        fitting = sum(1 for r in of_group if r["strict"] and r.get("pattern_fits"))
        stats["hits1_with_fit"] = fitting / max(1, len(of_group))
    record = {"set": name, "summary": summary, "config": {
        **prepared.config, "per_hop": args.per_hop, "seed": args.seed, "questions": len(rows),
        "llm": engine.llm_name, "llm_cache": args.llm_cache, "answer_mode": args.answer_mode,
        "retrieval_deadline_s": args.deadline or None,
        "pattern_options": options, "warmup_s": warm, "commit": _git_commit(), "cpus": os.cpu_count(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}}
    (args.out / f"{name}.summary.json").write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    return record


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "—" if value is None else f"{scale * value:.{digits}f}"


def markdown(records: list[dict[str, Any]]) -> str:
    lines = ["| set | hop | n | Hits@1 | Hits@1 (answerable) | pattern fits | hit and fits | invalid patterns | "
             "misses pattern/retrieval/generation | p50 s | p95 s | LLM calls/q |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in records:
        for group, s in rec["summary"].items():
            e, total, calls = s["errors_by_stage"], s["latency_s"].get("total_s", {}), s.get("llm_calls", {})
            lines.append(
                f"| {rec['set']} | {group} | {s['questions']} | {_fmt(s['hits1'], 100)} | "
                f"{_fmt(s['hits1_answerable'], 100)} ({s['answerable']}) | {_fmt(s['pattern_fits'], 100)} | "
                f"{_fmt(s.get('hits1_with_fit'), 100)} | "
                f"{s['invalid_patterns']} | {e.get('pattern', 0)}/{e.get('retrieval', 0)}/{e.get('generation', 0)} | "
                f"{_fmt(total.get('p50'), digits=2)} | {_fmt(total.get('p95'), digits=2)} | "
                f"{_fmt(calls.get('mean'), digits=2)} |")
    return "\n".join(lines) + "\n"


def write_overall(out: Path) -> str:
    """``summary.json`` and ``summary.md`` over every ``<set>.summary.json`` in ``out``."""
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("*.summary.json"))]
    records.sort(key=lambda r: SETS.index(r["set"]) if r["set"] in SETS else len(SETS))
    (out / "summary.json").write_text(json.dumps(records, indent=2, default=str), encoding="utf-8")
    table = markdown(records)
    configs = [f"- `{r['set']}`: examples `{r['config'].get('examples')}`, pattern options "
               f"`{json.dumps(r['config'].get('pattern_options'))}`, llm `{r['config'].get('llm')}`, "
               f"commit `{r['config'].get('commit')}`, {r['config'].get('date')}"
               + (f", relation aliases `{r['config'].get('relation_aliases')}`" if r["set"].startswith("geo") else "")
               for r in records]
    (out / "summary.md").write_text(table + "\n" + "\n".join(configs) + "\n", encoding="utf-8")
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("simgrag", "httpx", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    options = pattern_options(args.pattern_option)
    cache: Any = False if args.llm_cache == "none" else (True if args.llm_cache == "default" else args.llm_cache)
    try:
        llm = CountingLLM(resolve_llm(args.llm, base_url=args.base_url, cache=cache))
        for name in args.sets:
            run_set(name, args, llm, options)
    except SimGRAGError as exc:
        logger.error("%s", exc)
        return 1
    print(write_overall(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
