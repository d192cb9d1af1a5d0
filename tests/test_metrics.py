"""Answer/context metrics on hand-made cases, and the retriever comparison writing its files."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from simgrag.errors import MatchError
from simgrag.eval import metrics as m
from simgrag.eval.compare import format_comparison, run_retriever_comparison
from simgrag.eval.runner import QAItem
from simgrag.index.directory import IndexDir, build_index_dir
from simgrag.kg.store import Triple
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import RetrievedContext, Retriever
from simgrag.testing import FakeLLM, HashEmbedder, write_toy_kg


def test_normalize_answer() -> None:
    assert m.normalize_answer("  The  Dark Knight!") == "dark knight"
    assert m.normalize_answer("Walker (footballer, born 1940)") == "walker footballer born 1940"
    assert m.normalize_answer("A") == ""


def test_answers_match_whole_words() -> None:
    assert m.answers_match("james cameron.", "James Cameron")
    assert m.answers_match("2014 (2014 World Series)", "2014")
    assert not m.answers_match("Jim Cameron", "James Cameron")
    assert not m.answers_match("20001", "2000")
    assert not m.answers_match("anything", "the")


def test_hits_at_1_and_hit() -> None:
    gold = ["James Cameron", "Kathryn Bigelow"]
    assert m.hits_at_1(["the James Cameron"], gold) == 1.0
    assert m.hits_at_1(["Ridley Scott", "James Cameron"], gold) == 0.0
    assert m.hits_at_1([], gold) == 0.0
    assert m.hit("It was directed by James Cameron.", gold) == 1.0
    assert m.hit("It was directed by Jamesy Cameronson.", gold) == 0.0


def test_f1_greedy_one_to_one() -> None:
    assert m.f1_score(["P", "Q"], ["P", "Q"]) == (1.0, 1.0, 1.0)
    p, r, f = m.f1_score(["P", "X"], ["P", "Q", "R"])
    assert (p, r) == (0.5, pytest.approx(1 / 3)) and f == pytest.approx(0.4)
    # a prediction matches one gold answer only, and duplicates count once
    assert m.f1_score(["Nolan", "Nolan"], ["Nolan", "Christopher Nolan"])[:2] == (1.0, 0.5)
    # greedy, not optimal: the first prediction takes the first unmatched gold it contains
    # ("Christopher Nolan"), so the second prediction finds nothing left
    preds, gold = ["Emma Thomas and Christopher Nolan", "Christopher Nolan"], ["Christopher Nolan", "Emma Thomas"]
    assert m.f1_score(preds, gold)[:2] == (0.5, 0.5)
    assert m.f1_score([], ["P"]) == (0.0, 0.0, 0.0)
    assert m.f1_score(["P"], []) == (0.0, 0.0, 0.0)


def test_score_h_samples_and_normalization() -> None:
    gold = ["P", "Q"]
    assert m.score_h_sample(["P", "Q"], gold, answerable=True) == 1.0
    assert m.score_h_sample(["P", "X"], gold, answerable=True) == 0.0
    assert m.score_h_sample(["X"], gold, answerable=True) == -1.0
    assert m.score_h_sample([], gold, answerable=True) == 0.0
    assert m.score_h_sample([], gold, answerable=False) == 1.0
    assert m.score_h_sample(["In Context"], gold, answerable=False, context_entities={"in context"}) == -1.0
    assert m.score_h_sample(["Made Up"], gold, answerable=False, context_entities={"in context"}) == -1.5
    assert m.score_h_sample(["In Context", "Made Up"], gold, answerable=False,
                            context_entities={"In Context"}) == -1.25
    assert m.score_h([1.0, 1.0]) == 100.0
    assert m.score_h([-1.5]) == 0.0
    assert m.score_h([0.0]) == pytest.approx(60.0)
    assert math.isnan(m.score_h([]))


def test_answer_recall_and_context_size() -> None:
    context = RetrievedContext("t", "q", (Triple("Titanic", "directed_by", "James Cameron"),
                                          Triple("Titanic", "release_year", "1997")))
    assert m.answer_recall(context.entities(), ["james cameron", "Kate Winslet"]) == 0.5
    assert m.answer_recall(context.entities(), []) == 0.0
    size = m.context_size(context)
    assert size["triples"] == 2 and size["tokens"] == math.ceil(len(
        "(Titanic, directed_by, James Cameron)\n(Titanic, release_year, 1997)") / 3.5)
    assert m.context_size(context, count_tokens=lambda text: len(text.split()))["tokens"] == 7
    assert m.context_size(RetrievedContext("t", "q", ())) == {"triples": 0, "tokens": 0}
    assert m.mean([1.0, float("nan"), 0.0]) == 0.5 and math.isnan(m.mean([]))


# ---------------------------------------------------------------- the comparison run
@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    root = tmp_path_factory.mktemp("compare")
    return build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))


ITEMS = [
    QAItem("who directed Titanic?", ("James Cameron",), "1-hop", "Titanic", answerable=True),
    QAItem("what year was Avatar released?", ("2009",), "1-hop", "Avatar", answerable=True),
    QAItem("who starred in films directed by Jason Reitman?", ("Ellen Page",), "2-hop", None, answerable=True),
]


def _reply(messages: Sequence[ChatMessage]) -> str:
    prompt = messages[-1].content
    for question, answer in (("Titanic", "James Cameron"), ("Avatar", "2009"), ("Reitman", "Ellen Page")):
        if question in prompt.split("Question", 1)[-1]:
            return f"From the facts, the answer is clear.\nans: {answer}"
    return "ans: not available"


class FailsOnAvatar:
    name = "flaky"

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        if "Avatar" in question:
            raise MatchError("no luck")
        return RetrievedContext(self.name, question, (Triple("Titanic", "directed_by", "James Cameron"),))


def _engines(index: IndexDir, llm: FakeLLM, specs: dict[str, str | Retriever]) -> dict[str, SimGRAG]:
    return {name: SimGRAG(index, llm=llm, retriever=spec) for name, spec in specs.items()}


def test_run_retriever_comparison_writes_everything(toy_index: IndexDir, tmp_path: Path,
                                                     assert_drawn_png: Callable[[Path], None]) -> None:
    retrievers: dict[str, str | Retriever] = {"kaping": "kaping", "pcst": "pcst", "none": "none",
                                              "flaky": FailsOnAvatar()}
    llm = FakeLLM(_reply)
    summary = run_retriever_comparison(_engines(toy_index, llm, retrievers), ITEMS, tmp_path, progress=False)
    for name in retrievers:
        rows = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert [r["question"] for r in rows] == [i.question for i in ITEMS]
        assert set(summary[name]) == {"1-hop", "2-hop", "overall"}
    kaping_rows = [json.loads(line) for line in (tmp_path / "kaping.jsonl").read_text().splitlines()]
    assert kaping_rows[0]["metrics"]["hits1"] == 1.0 and kaping_rows[0]["reading"]["style"] == "kaping"
    assert kaping_rows[0]["context"]["topic"]["source"] == "given"
    assert summary["kaping"]["1-hop"]["answer_recall"] == 1.0 and summary["kaping"]["1-hop"]["hits1"] == 1.0
    assert summary["none"]["overall"]["context_triples"] == 0.0
    flaky = [json.loads(line) for line in (tmp_path / "flaky.jsonl").read_text().splitlines()]
    assert "error" in flaky[1] and "no luck" in flaky[1]["error"] and "error" not in flaky[2]
    assert summary["flaky"]["overall"]["errors"] == 1
    assert len(llm.calls) == 3 * 4 - 1
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["kaping"]["overall"]["questions"] == 3
    table = (tmp_path / "comparison.md").read_text()
    assert "## 1-hop" in table and "## 2-hop" in table and "## overall" in table and "| kaping |" in table
    assert table == format_comparison(summary) + "\n"
    for metric in ("hits1", "hit", "macro_f1", "score_h", "answer_recall", "context_triples", "context_tokens"):
        assert_drawn_png(tmp_path / f"{metric}.png")


def test_a_retrieval_only_comparison_calls_no_reader_and_leaves_the_answer_metrics_out(toy_index: IndexDir,
                                                                                       tmp_path: Path) -> None:
    specs: dict[str, str | Retriever] = {"kaping": "kaping", "none": "none", "flaky": FailsOnAvatar()}
    llm = FakeLLM(_reply)
    summary = run_retriever_comparison(_engines(toy_index, llm, specs), ITEMS, tmp_path, progress=False,
                                       plots=False, read=False)
    assert llm.calls == []  # none of these retrievers needs the LLM to retrieve, and nothing was read
    rows = [json.loads(line) for line in (tmp_path / "kaping.jsonl").read_text().splitlines()]
    assert all(r["reading"] is None and r["retrieve_s"] >= 0 and "read_s" not in r for r in rows)
    assert rows[0]["metrics"]["answer_recall"] == 1.0 and rows[0]["metrics"]["context_triples"] > 0
    assert summary["kaping"]["1-hop"]["answer_recall"] == 1.0
    for name in specs:
        for key in ("hits1", "hit", "macro_f1", "precision", "recall", "score_h"):
            assert math.isnan(summary[name]["overall"][key]), (name, key)
    assert summary["none"]["overall"]["answer_recall"] == 0.0 and summary["flaky"]["overall"]["errors"] == 1
    table = format_comparison(summary)
    kaping_line = next(line for line in table.splitlines() if line.startswith("| kaping | 3 |"))
    assert kaping_line.count("| – ") == 7  # the six answer metrics and the reading time, shown as not measured


def test_run_retriever_comparison_resumes(toy_index: IndexDir, tmp_path: Path) -> None:
    specs: dict[str, str | Retriever] = {"kaping": "kaping", "flaky": FailsOnAvatar()}
    first = FakeLLM(_reply)
    run_retriever_comparison(_engines(toy_index, first, specs), ITEMS[:2], tmp_path, progress=False, plots=False)
    with (tmp_path / "kaping.jsonl").open("a") as sink:
        sink.write('{"question": "cut off mid-wr')  # an interrupted write: skipped, not fatal
    again = FakeLLM(_reply)
    summary = run_retriever_comparison(_engines(toy_index, again, specs), ITEMS, tmp_path, progress=False,
                                       plots=False)
    # kaping: only the third question is new; flaky: its error row on Avatar is retried, plus the third
    asked = [c.messages[-1].content.split("Question")[-1] for c in again.calls]
    assert len(asked) == 1 + 1 and all("Reitman" in q for q in asked)
    rows = [json.loads(line) for line in (tmp_path / "kaping.jsonl").read_text().splitlines()]
    assert [r["question"] for r in rows] == [i.question for i in ITEMS]
    assert summary["kaping"]["overall"]["questions"] == 3 and summary["flaky"]["overall"]["errors"] == 1
    fresh = FakeLLM(_reply)
    run_retriever_comparison(_engines(toy_index, fresh, {"kaping": "kaping"}), ITEMS, tmp_path, progress=False,
                             plots=False, resume=False)
    assert len(fresh.calls) == 3

