"""How many graph searches a question costs, with the retriever keeping complete searches and without.

The pattern judge searches each candidate pattern, the channel's longer readings search the LLM's pattern to bind its
asked-for node, and the retriever searches the chosen pattern for its evidence; a complete search is exact, so
``SubgraphRetriever`` hands it back for the same pattern and settings (``search_cache_size``). This runs each
question through the ``simgrag`` retriever twice over — once with the default cache, once with none — and counts the
searches really run, their time, and whether the evidence is the same::

    python benchmarks/search_reuse.py runs/m12/co.idx runs/m6/company_questions.jsonl --llm-cache runs/llm.sqlite
    python benchmarks/search_reuse.py runs/genealogy.idx runs/genealogy/questions.jsonl \\
        --examples runs/genealogy/examples.yaml --llm-cache runs/llm.sqlite

Use an LLM cache that already holds the questions' calls (a ``simgrag bench`` run with the same cache): the LLM's
time is not what is measured, and both passes then see the same patterns.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from simgrag.index.directory import open_index_dir
from simgrag.llm.registry import resolve_llm
from simgrag.match.retrieve import SEARCH_CACHE_SIZE, Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.examples import load_examples
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.simgrag import SimGRAGRetriever


def _counting(retriever: SubgraphRetriever, spent: list[float]) -> None:
    search = retriever._search

    def counted(pattern: Pattern, settings: RetrievalSettings) -> Retrieval:
        t0 = time.perf_counter()
        try:
            return search(pattern, settings)
        finally:
            spent.append(time.perf_counter() - t0)

    retriever._search = counted  # type: ignore[method-assign]


def run(args: argparse.Namespace, cache_size: int) -> tuple[dict[str, Any], list[Any]]:
    index = open_index_dir(args.index)
    llm = resolve_llm(args.llm, cache=args.llm_cache)
    subgraphs = SubgraphRetriever(index, search_cache_size=cache_size)
    spent: list[float] = []
    _counting(subgraphs, spent)
    examples = load_examples(args.examples) if args.examples else None
    retriever = SimGRAGRetriever(index, llm, examples=examples, subgraphs=subgraphs)
    questions = [json.loads(line)["question"] for line in args.questions.open(encoding="utf-8") if line.strip()]
    questions = questions[: args.limit] if args.limit else questions
    evidence: list[Any] = []
    failed = 0
    t0 = time.perf_counter()
    for question in questions:
        try:
            context = retriever.retrieve(question)
        except Exception as exc:  # a question the LLM writes no pattern for: counted, not fatal
            failed += 1
            evidence.append(repr(exc))
            continue
        evidence.append([t.as_tuple() for t in context.triples])
    wall = time.perf_counter() - t0
    n = len(questions)
    return ({"search_cache_size": cache_size, "questions": n, "failed": failed,
             "searches_per_question": round(len(spent) / n, 2),
             "search_ms_per_question": round(sum(spent) / n * 1000, 2),
             "wall_s": round(wall, 1)}, evidence)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=Path)
    parser.add_argument("questions", type=Path, help="JSONL with a 'question' field per line")
    parser.add_argument("--examples", type=Path, default=None, help="an examples file (default: the index's)")
    parser.add_argument("--llm", default="llamacpp")
    parser.add_argument("--llm-cache", default=None, help="the LLM call cache file the questions were run with")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions only (0: all)")
    args = parser.parse_args()
    run(args, 0)  # a first pass warms what both share (compiled search, embeddings, prompt caches)
    kept, kept_evidence = run(args, SEARCH_CACHE_SIZE)
    none, none_evidence = run(args, 0)
    same = sum(a == b for a, b in zip(kept_evidence, none_evidence, strict=True))
    print(json.dumps({"index": str(args.index), "kept": kept, "none": none,
                      "same_evidence": f"{same}/{len(kept_evidence)}"}, indent=1))


if __name__ == "__main__":
    main()
