"""The QA benchmark runner on the toy KG with the scripted LLM, and `simgrag bench summarize`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import DatasetError
from simgrag.eval.runner import format_summary, load_qa_file, run_qa_bench, summarize
from simgrag.index.directory import build_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import write_toy_kg

QUESTIONS = [
    {"question": "who directed Titanic", "answers": ["James Cameron"], "group": "1-hop"},
    {"question": "who directed Juno", "answers": ["Jason Reitman"], "group": "1-hop"},
    {"question": "when was Memento released", "answers": ["2000"], "group": "1-hop"},
    {"question": "gibberish nobody can parse", "answers": ["x"], "group": "other"},
]
PATTERNS = {
    "who directed Titanic": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "who directed Juno": [["Juno", "directed by", "UNKNOWN director 1"]],
    "when was Memento released": [["Memento", "release year", "UNKNOWN year 1"]],
}


def scripted(messages: list[ChatMessage]) -> str:
    question = messages[-1].content
    for text, triples in PATTERNS.items():
        if text in question:
            return json.dumps({"triples": triples})
    return "no idea"


@pytest.fixture(scope="module")
def engine(toy_dir: Path) -> SimGRAG:
    return SimGRAG(toy_dir, llm=FakeLLM(scripted), answer_mode="auto")


def test_runner_scores_and_records_every_question(engine: SimGRAG, tmp_path: Path) -> None:
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "out.jsonl"
    summary = run_qa_bench(engine, load_qa_file(qa), out, progress=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["question"] for r in rows] == [q["question"] for q in QUESTIONS]
    assert [r["hit"] for r in rows] == [True, True, True, False]
    assert rows[3]["stage"] == "pattern" and "no idea" in rows[3]["error"]
    assert summary["1-hop"]["questions"] == 3 and summary["1-hop"]["hits1"] == pytest.approx(1.0)
    assert summary["overall"]["questions"] == 4


def test_hits_at_1_is_the_first_answer_not_any_answer() -> None:
    """A pattern that names no entity answers with every node of a kind: the gold answer is somewhere in that
    set (the lenient "any answer"), but Hits@1 counts only a right first answer."""
    rows = [{"group": "2-hop", "hit": True, "strict": False, "abstained": False, "answerable": True},
            {"group": "2-hop", "hit": True, "strict": True, "abstained": False, "answerable": True},
            {"group": "2-hop", "hit": False, "strict": False, "abstained": True, "answerable": True},
            {"group": "2-hop", "hit": False, "strict": False, "abstained": False, "answerable": False}]
    s = summarize(rows)["2-hop"]
    assert s["hits1"] == pytest.approx(1 / 4) and s["any_answer"] == pytest.approx(2 / 4)
    assert s["hits1_answerable"] == pytest.approx(1 / 3) and s["any_answer_answerable"] == pytest.approx(2 / 3)
    assert s["not_found"] == pytest.approx(1 / 4) and s["not_found_answerable"] == pytest.approx(1 / 3)
    assert "| 2-hop | 4 | 25.0 | 50.0 | 3 | 33.3 | 66.7 | 25.0 |" in format_summary({"2-hop": s})


def test_bench_summarize_combines_split_runs(engine: SimGRAG, tmp_path: Path) -> None:
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    whole = run_qa_bench(engine, load_qa_file(qa), tmp_path / "all.jsonl", progress=False)
    lines = (tmp_path / "all.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:2]))
    (tmp_path / "b.jsonl").write_text("".join(lines[2:]))
    result = CliRunner().invoke(app, ["bench", "summarize", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                                      "-o", str(tmp_path / "both.jsonl")])
    assert result.exit_code == 0, result.output
    combined = json.loads((tmp_path / "both.summary.json").read_text())
    assert combined["overall"]["questions"] == whole["overall"]["questions"]
    assert combined["1-hop"]["hits1"] == whole["1-hop"]["hits1"]
    assert "| 1-hop |" in result.output


def test_bad_qa_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n" + '{"question": "no answers"}\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl:2"):
        load_qa_file(bad)


def test_interrupted_run_resumes_and_asks_only_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "kg"
    root.mkdir()
    build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))
    asked: list[str] = []

    def counting(messages: list[ChatMessage]) -> str:
        asked.append(messages[-1].content)
        return scripted(messages)

    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    items = load_qa_file(qa)
    out = tmp_path / "out.jsonl"
    full = run_qa_bench(SimGRAG(root / "toy.idx", llm=FakeLLM(scripted), answer_mode="auto",
                                pattern_options={"analogy": False}), items, out,
                        progress=False)
    first_rows = out.read_text().splitlines()
    # the process died while writing the third row: two rows and half a line are left
    out.write_text("\n".join(first_rows[:2]) + "\n" + first_rows[2][:25])
    engine = SimGRAG(root / "toy.idx", llm=FakeLLM(counting), answer_mode="auto", pattern_options={"analogy": False})
    resumed = run_qa_bench(engine, items, out, progress=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["question"] for r in rows] == [q["question"] for q in QUESTIONS]  # whole file, in order
    assert not any(QUESTIONS[0]["question"] in a or QUESTIONS[1]["question"] in a for a in asked)
    assert any(QUESTIONS[2]["question"] in a for a in asked)
    for group, stats in full.items():  # the same scores (timings differ between runs)
        assert {k: v for k, v in resumed[group].items() if k != "latency_s"} == \
            {k: v for k, v in stats.items() if k != "latency_s"}
    run_qa_bench(engine, items, out, progress=False, resume=False)  # starts over
    assert sum(QUESTIONS[0]["question"] in a for a in asked) >= 1


def test_not_found_is_never_a_hit_though_its_nearest_evidence_holds_the_answer() -> None:
    from simgrag.answer.qa import NOT_FOUND, Answer
    from simgrag.eval.runner import hits_at_1 as _hits
    from simgrag.pipeline import AskResult
    from simgrag.retrievers.base import RetrievedContext

    def result(answer: Answer) -> AskResult:
        return AskResult("what 's the capital of peru ?", RetrievedContext("simgrag", "q", ()), answer)

    shown = f"{NOT_FOUND}; nearest evidence: (peru, has_capital, lima)"
    assert _hits(result(Answer(shown, (), candidates=("lima",), abstained=True)), {"lima"}) == (False, False)
    assert _hits(result(Answer("answer: lima", ("lima",), short_answer="lima")), {"lima"}) == (True, True)


def test_a_run_whose_questions_fail_says_so_with_the_first_error(toy_dir: Path, tmp_path: Path) -> None:
    """A run where every question failed (a KG with no examples, an LLM that is down) is not a table of zeros:
    the summary counts the failures and the table names the first error."""
    from simgrag.errors import LLMConnectionError
    from simgrag.eval.runner import format_summary

    def down(messages: list[ChatMessage]) -> str:
        raise LLMConnectionError("the model server went away")

    qa = tmp_path / "qa.jsonl"
    asked = [{"question": "gibberish nobody can parse", "answers": ["x"], "group": "other"},
             {"question": "more gibberish for the model", "answers": ["y"], "group": "other"}]
    qa.write_text("".join(json.dumps(q) + "\n" for q in asked))
    summary = run_qa_bench(SimGRAG(toy_dir, llm=FakeLLM(down)), load_qa_file(qa), tmp_path / "out.jsonl",
                           progress=False)
    assert summary["overall"]["failed"] == 2 and "went away" in summary["overall"]["first_error"]
    table = format_summary(summary)
    assert "2 of 2 questions failed with an error" in table and "went away" in table


def test_bench_qa_reports_the_pattern_stage_and_its_per_edit_ablation(toy_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench qa` says what the pattern stage was on the run (the index's fit, unfitted, or forced) and prints the
    fit's per-edit ablation on the KG's validation questions; the summary JSON carries both."""
    import shutil

    from simgrag.cli import _common
    from simgrag.grounding.fit import GroundingFit, store_fit

    index = tmp_path / "toy.idx"
    shutil.copytree(toy_dir, index)
    monkeypatch.setattr(_common, "llm_for", lambda choice: FakeLLM(scripted))
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps(QUESTIONS[0]) + "\n")

    def bench(*flags: str) -> tuple[str, dict]:
        out = tmp_path / f"out{len(flags)}.jsonl"
        result = CliRunner().invoke(app, ["bench", "qa", "--index", str(index), "--questions", str(qa), "-o",
                                          str(out), "--calibration", "off", *flags])
        assert result.exit_code == 0, result.output
        return result.output, json.loads(out.with_suffix(".summary.json").read_text())

    output, summary = bench()
    assert "pattern stage: not fitted" in output and summary["pattern_stage"]["families"] == {}
    families = {"analogy": {"used": 5, "fixed": 1, "broke": 2}, "drop_leaf": {"used": 1, "fixed": 1, "broke": 0}}
    store_fit(index, GroundingFit(True, ("analogy",), {"families": families, "questions": 12}))
    output, summary = bench("--llm-cache", "none")
    assert "pattern stage: fitted: on, without analogy" in output
    assert "analogy: 5 / 1 / 2" in output and "drop_leaf: 1 / 1 / 0" in output
    assert summary["pattern_stage"]["families"] == families
    output, summary = bench("--no-grounding", "--llm-cache", "none")
    assert "pattern stage: off (--no-grounding)" in output


@pytest.mark.parametrize("loader", ["claims", "calibration", "abstention"])
def test_every_rows_loader_says_which_file_and_line_is_wrong(loader: str, tmp_path: Path) -> None:
    from simgrag.eval.abstention import _read_rows
    from simgrag.eval.calibrate import load_rows
    from simgrag.eval.claims import load_claims

    read = {"claims": load_claims, "calibration": load_rows, "abstention": _read_rows}[loader]
    with pytest.raises(DatasetError, match="cannot read"):  # was an OSError past the exception tree
        read(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"facts": []}\n[1, 2\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:[12]"):
        read(bad)
    bad.write_bytes(b"\xff\xfe not text")
    with pytest.raises(DatasetError):
        read(bad)
