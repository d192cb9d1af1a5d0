"""`simgrag bench metaqa --retriever simgrag` and `simgrag ask` run the same system: on the same questions
they give identical patterns (KG role repairs included) and identical answers.

The LLM is scripted from each question's gold relation chain: chains that start at a person are written
in the *echoed-role* form a 1.5B model often writes (``[Tom Hanks, starred actors, UNKNOWN actor 1]``,
``[UNKNOWN movie 1, starred actors, UNKNOWN actor 1]``), which only the KG role repair turns into a
matchable pattern; every third question uses a paraphrased relation ("acted in"), so its best subgraph is
not an exact match and the LLM answer step runs (in ``--answer-mode auto``).

Two versions: the bundled sample KG (a cut of MetaQA's KB) with 30 generated questions, always run; and
MetaQA's own 30 test questions of BENCHMARKS §4 (``--hops 1,2,3 --sample 10 --seed 0``) on the MetaQA
index, when the data is there.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.cli import _common, app
from simgrag.eval.metaqa import CHAIN_RELATIONS, load_metaqa
from simgrag.index.directory import IndexDir, build_index_dir, relation_text
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import sample_kg_path
from simgrag.testing import FakeLLM, HashEmbedder

PARAPHRASES = {"starred_actors": "acted in", "directed_by": "was the director of", "written_by": "penned"}


def chain_pattern(topic: str, chain: str, *, echoed: bool, paraphrase: bool) -> list[list[str]]:
    """The pattern of a MetaQA chain from ``topic`` (movie always the head of a triple)."""
    types = chain.split("_to_")
    counts: dict[str, int] = {}
    nodes = [topic]
    for kind in types[1:]:
        counts[kind] = counts.get(kind, 0) + 1
        nodes.append(f"UNKNOWN {kind} {counts[kind]}")
    triples: list[list[str]] = []
    for i, (a, b) in enumerate(itertools.pairwise(types)):
        relation = CHAIN_RELATIONS[b if a == "movie" else a]
        text = PARAPHRASES.get(relation, relation_text(relation)) if paraphrase and i == 0 else relation_text(relation)
        if a == "movie":
            triples.append([nodes[i], text, nodes[i + 1]])
        elif i == 0 and echoed:  # the echoed role: the topic put where its own unknown twin is
            twin = f"UNKNOWN {a} 9"
            triples += [[nodes[0], text, twin], [nodes[1], text, twin]]
        else:
            triples.append([nodes[i + 1], text, nodes[i]])
    return triples


def scripted(patterns: dict[str, list[list[str]]]) -> FakeLLM:
    """Pattern prompts get the question's pattern; answer prompts the last tail of graph [1]."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        last = messages[-1].content
        if last in patterns:
            return json.dumps({"triples": patterns[last]})
        graph = re.search(r"graph \[1\]: (.*)", last)
        if graph is None:
            return "answer: none"
        tails = re.findall(r", ([^,()]+)\)", graph.group(1))
        return f"answer: {tails[-1]}" if tails else "answer: none"

    return FakeLLM(reply)


def compare_bench_and_ask(index: IndexDir | Path, metaqa: Path, patterns: dict[str, list[list[str]]],
                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Run the bench comparison, then ``ask`` on each of its questions; both must agree; return the rows."""
    index_dir = str(getattr(index, "path", index))
    monkeypatch.setattr(_common, "llm_for", lambda choice: scripted(patterns))
    out = tmp_path / "bench"
    bench = CliRunner().invoke(app, ["bench", "metaqa", "--metaqa-dir", str(metaqa), "--index", index_dir,
                                     "--hops", "1,2,3", "--sample", "10", "--seed", "0", "--answer-mode", "auto",
                                     "--llm-cache", "none", "--retriever", "simgrag", "-o", str(out)])
    assert bench.exit_code == 0, bench.output
    rows = [json.loads(line) for line in (out / "simgrag.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 30 and not [r for r in rows if "error" in r]
    for row in rows:
        asked = CliRunner().invoke(app, ["ask", index_dir, row["question"], "--answer-mode", "auto",
                                         "--llm-cache", "none", "--json"])
        assert asked.exit_code == 0, asked.output
        body = json.loads(asked.stdout)  # stderr may carry log lines
        context, reading = row["context"], row["reading"]
        assert body["pattern"] == context["pattern"], row["question"]
        assert body["pattern_kg_repairs"] == context["pattern_kg_repairs"], row["question"]
        assert (body["entities"], body["text"], body["short_answer"], body["reason"]) == (
            reading["entities"], reading["text"], reading["short_answer"], reading["reason"]), row["question"]
        assert body["context"]["triples"] == context["triples"]
    repaired = [r for r in rows if r["context"]["pattern_kg_repairs"]]
    by_llm = [r for r in rows if not r["reading"]["reason"].startswith("exact match")]
    assert repaired and by_llm and len(by_llm) < len(rows)  # both answer paths and the repair were exercised
    return rows


def _sample_questions(triples: list[tuple[str, str, str]]) -> dict[int, list[tuple[str, str, str, str]]]:
    """10 questions per hop on the sample KG: (question with [topic], answers, chain, topic)."""
    directed = {h: t for h, r, t in triples if r == "directed_by"}
    written = {h: t for h, r, t in triples if r == "written_by"}
    actors: dict[str, set[str]] = {}
    for h, r, t in triples:
        if r == "starred_actors":
            actors.setdefault(t, set()).add(h)
    rng = random.Random(0)
    movies = sorted(set(directed) & set(written))
    people = sorted(a for a, films in actors.items() if any(f in directed for f in films))
    one = [(f"who directed [{m}]", directed[m], "movie_to_director", m) for m in rng.sample(movies, 10)]
    two = [(f"who directed the movies [{a}] acted in",
            "|".join(sorted({directed[f] for f in actors[a] if f in directed})), "actor_to_movie_to_director", a)
           for a in rng.sample(people, 10)]
    three = [(f"who wrote the movies directed by the director of [{m}]",
              "|".join(sorted({written[f] for f in directed if directed[f] == directed[m] and f in written})),
              "movie_to_director_to_movie_to_writer", m) for m in rng.sample(movies, 10)]
    return {1: one, 2: two, 3: three}


def test_bench_and_ask_agree_on_the_sample_kg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = sample_kg_path()
    triples = [tuple(line.split("|")) for line in kb.read_text(encoding="utf-8").splitlines()
               if line.count("|") == 2 and not line.startswith("#")]
    index = build_index_dir(kb, tmp_path / "sample.idx", embedder=HashEmbedder(dim=64))
    metaqa = tmp_path / "MetaQA"
    patterns: dict[str, list[list[str]]] = {}
    for hop, questions in _sample_questions(triples).items():  # type: ignore[arg-type]
        (metaqa / f"{hop}-hop" / "vanilla").mkdir(parents=True)
        (metaqa / f"{hop}-hop" / "vanilla" / "qa_test.txt").write_text(
            "".join(f"{q}\t{a}\n" for q, a, _, _ in questions), encoding="utf-8")
        (metaqa / f"{hop}-hop" / "qa_test_qtype.txt").write_text("".join(f"{c}\n" for _, _, c, _ in questions))
    for hop in (1, 2, 3):
        for i, question in enumerate(load_metaqa(metaqa, hop, "test")):
            patterns[question.question] = chain_pattern(question.topic, question.chain, echoed=True,
                                                        paraphrase=i % 3 == 2)
    compare_bench_and_ask(index, metaqa, patterns, tmp_path, monkeypatch)


METAQA = Path(os.environ.get("SIMGRAG_METAQA_DIR", Path(__file__).resolve().parents[2] / "shared/data/MetaQA"))


@pytest.mark.slow
@pytest.mark.metaqa
@pytest.mark.skipif(not (METAQA / "kb.txt").is_file(), reason="MetaQA data not found (set SIMGRAG_METAQA_DIR)")
def test_bench_and_ask_agree_on_the_benchmarks_30_metaqa_questions(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """BENCHMARKS §4's 30 MetaQA test questions (10 per hop, seed 0), on the MetaQA MiniLM index."""
    from simgrag.eval.metaqa import metaqa_index

    index = metaqa_index(METAQA)
    patterns = {}
    for hop in (1, 2, 3):
        questions = load_metaqa(METAQA, hop, "test")
        for i, question in enumerate(random.Random(0 + hop).sample(questions, 10)):
            patterns[question.question] = chain_pattern(question.topic, question.chain, echoed=True,
                                                        paraphrase=i % 3 == 2)
    rows = compare_bench_and_ask(index, METAQA, patterns, tmp_path, monkeypatch)
    assert {r["question"] for r in rows} == set(patterns)
