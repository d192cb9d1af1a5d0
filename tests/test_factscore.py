"""Open answers and the KG-grounded FActScore: claim splitting, checking, scores, the benchmark
(scripted LLM, toy KG, SimGRAG's own verify)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simgrag import cli
from simgrag.answer.open import OPEN_GROUNDED_SYSTEM, OPEN_KNOWLEDGE_SYSTEM
from simgrag.answer.reader import read_context, reader_messages
from simgrag.answer.verify import Verdict
from simgrag.cli import _common
from simgrag.cli import bench as cli_bench
from simgrag.errors import PatternError
from simgrag.eval import runner
from simgrag.eval.factscore import (
    CLAIM_SYSTEM,
    check_claims,
    claim_messages,
    parse_claims,
    split_claims,
    summarize_scores,
)
from simgrag.eval.factscore_bench import run_factscore_bench
from simgrag.eval.runner import QAItem
from simgrag.index.directory import IndexDir, build_index_dir
from simgrag.kg.store import Triple
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import SimGRAG, VerifyResult
from simgrag.retrievers.base import RetrievedContext
from simgrag.testing import FakeLLM, HashEmbedder, write_toy_kg

TITANIC = Triple("Titanic", "directed_by", "James Cameron")


# ---------------------------------------------------------------- claim splitting
def test_parse_numbered_and_bulleted_lines() -> None:
    reply = ("Here are the atomic facts:\n1. James Cameron directed Titanic.\n2) Kate Winslet starred in Titanic.\n"
             "- Titanic was released in 1997.\n* **Avatar was directed by James Cameron.**\n"
             "• Claim 5: Avatar is a film.\n")
    split = parse_claims(reply)
    assert split.claims == ("James Cameron directed Titanic.", "Kate Winslet starred in Titanic.",
                            "Titanic was released in 1997.", "Avatar was directed by James Cameron.",
                            "Avatar is a film.")
    assert not split.rejected and not split.unparseable and split.duplicates == 0


def test_parse_caps_dedups_and_rejects() -> None:
    reply = "A was born in B.\na  was born in b\n{\"x\": 1}\n42\nC directed D.\nE wrote F.\n\n"
    split = parse_claims(reply, max_claims=2)
    assert split.claims == ("A was born in B.", "C directed D.")
    assert split.duplicates == 1 and split.truncated == 1
    assert split.rejected == ('{"x": 1}', "42")


def test_garbage_reply_is_unparseable_and_none_is_not() -> None:
    garbage = parse_claims('```json\n{"claims": ["Titanic was directed by James Cameron"]}\n```')
    assert garbage.claims == () and garbage.unparseable and len(garbage.rejected) == 2
    none = parse_claims("none")
    assert none.claims == () and none.said_none and not none.unparseable
    assert not parse_claims("").unparseable


def test_split_claims_prompts_with_shots_and_question() -> None:
    llm = FakeLLM(["1. James Cameron directed Titanic.\n2. James Cameron directed Titanic."])
    split = split_claims(llm, "Titanic was directed by James Cameron.", question="who directed Titanic?")
    assert split.claims == ("James Cameron directed Titanic.",) and split.duplicates == 1
    messages = llm.calls[0].messages
    assert messages[0].content == CLAIM_SYSTEM and messages[4].content == "none"  # the second worked example
    assert messages[-1].content == "Question: who directed Titanic?\nAnswer: Titanic was directed by James Cameron."
    assert split_claims(FakeLLM([]), "   ").claims == ()  # no LLM call for an empty answer
    assert len(claim_messages("x")) == 6


# ---------------------------------------------------------------- checking and scores
def _verdict(label: str, claim: str = "c") -> VerifyResult:
    verdict = Verdict(label, f"verdict: {label}", None, False, "read")  # type: ignore[arg-type]
    return VerifyResult(claim, RetrievedContext("kaping", claim, (TITANIC,)), verdict)


def test_check_claims_records_errors_and_memoizes() -> None:
    seen: list[str] = []

    def verify(claim: str) -> Any:
        seen.append(claim)
        if "Zzyzx" in claim:
            raise PatternError("no valid pattern")
        return _verdict("Supported" if "Cameron" in claim else "Refuted")

    memo: dict[str, Any] = {}
    first = check_claims(["James Cameron directed Titanic.", "Spielberg directed Titanic.", "Zzyzx fought."],
                         verify, memo)
    assert [v.label for v in first] == ["Supported", "Refuted", "Not enough evidence"]
    assert first[2].error is not None and "PatternError" in first[2].error and not first[2].supported
    again = check_claims(["james cameron directed titanic", "Zzyzx fought."], verify, memo)
    assert again[0] is first[0]  # from the memo, not checked again
    assert seen.count("Zzyzx fought.") == 2 and len(seen) == 4  # failures are retried


def test_summarize_scores_counts_answers_without_claims_apart() -> None:
    summary = summarize_scores([1.0, 0.5, None])
    assert summary == {"answers": 3, "scored": 2, "no_claims": 1, "factscore": 0.75}
    assert math.isnan(summarize_scores([None, None])["factscore"])


# ---------------------------------------------------------------- the open reader style
def test_open_style_prompt_holds_the_evidence() -> None:
    context = RetrievedContext("kaping", "who directed Titanic?", (TITANIC,))
    messages, kept = reader_messages(context, style="open")
    assert kept == 1 and messages[0].content == OPEN_GROUNDED_SYSTEM
    assert messages[-1].content == "Facts:\n(Titanic, directed_by, James Cameron)\n\nQuestion: who directed Titanic?"
    empty, _ = reader_messages(RetrievedContext("kaping", "who directed Titanic?", ()), style="open")
    assert "(nothing retrieved)" in empty[-1].content
    alone, _ = reader_messages(RetrievedContext("none", "who directed Titanic?", ()), style="open")
    assert alone[0].content == OPEN_KNOWLEDGE_SYSTEM and "Facts:" not in alone[-1].content


def test_open_reading_keeps_the_paragraph_and_names_context_entities() -> None:
    llm = FakeLLM(["Titanic was directed by James Cameron. It was released in 1997."])
    reading = read_context(llm, RetrievedContext("kaping", "who directed Titanic?", (TITANIC,)), style="open")
    assert reading.text == "Titanic was directed by James Cameron. It was released in 1997."
    assert reading.entities == ("Titanic", "James Cameron")


# ---------------------------------------------------------------- the benchmark on the toy KG
PARAGRAPHS = {  # (grounded?, question) → paragraph
    (True, "who directed Titanic"): "Titanic was directed by James Cameron. It starred Kate Winslet.",
    (True, "when was Avatar released"): "Avatar was released in 2009.",
    (True, "who wrote Memento"): "The facts do not say who wrote Memento.",
    (False, "who directed Titanic"): "Titanic was directed by Steven Spielberg in 1997.",
    (False, "when was Avatar released"): "Avatar came out in 2010.",
    (False, "who wrote Memento"): "Memento was written by Christopher Nolan.",
}
SPLITS = {
    "Titanic was directed by James Cameron. It starred Kate Winslet.":
        "1. James Cameron directed Titanic.\n2. Kate Winslet starred in Titanic.",
    "Avatar was released in 2009.": "- Avatar was released in 2009.\n- Avatar was released in 2009.",
    "The facts do not say who wrote Memento.": "none",
    "Titanic was directed by Steven Spielberg in 1997.":
        "Steven Spielberg directed Titanic.\nKate Winslet starred in Titanic.",
    "Avatar came out in 2010.": "Avatar was released in 2010.",
    "Memento was written by Christopher Nolan.": '```json\n{"claims": []}\n```',
}
PATTERNS = {
    "who directed Titanic": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "when was Avatar released": [["Avatar", "release year", "UNKNOWN year 1"]],
    "who wrote Memento": [["Memento", "written by", "UNKNOWN writer 1"]],
    "James Cameron directed Titanic.": [["Titanic", "directed by", "James Cameron"]],
    "Kate Winslet starred in Titanic.": [["Titanic", "starred actors", "Kate Winslet"]],
    "Avatar was released in 2009.": [["Avatar", "release year", "2009"]],
    "Steven Spielberg directed Titanic.": [["Titanic", "directed by", "Steven Spielberg"]],
    "Avatar was released in 2010.": [["Avatar", "release year", "2010"]],
}
TRUE_CLAIMS = {"James Cameron directed Titanic.", "Kate Winslet starred in Titanic.", "Avatar was released in 2009."}
ITEMS = [QAItem("who directed Titanic", ("James Cameron",), "1-hop", "Titanic"),
         QAItem("when was Avatar released", ("2009",), "1-hop", "Avatar"),
         QAItem("who wrote Memento", ("Christopher Nolan",), "2-hop", "Memento")]


def _script(messages: list[ChatMessage]) -> str:
    system, last = messages[0].content, messages[-1].content
    if system in (OPEN_GROUNDED_SYSTEM, OPEN_KNOWLEDGE_SYSTEM):
        return PARAGRAPHS[(system == OPEN_GROUNDED_SYSTEM, last.rsplit("Question: ", 1)[1])]
    if system == CLAIM_SYSTEM:
        return SPLITS[last.split("Answer: ", 1)[1]]
    if "\nclaim: " in last:
        return "verdict: Supported" if last.rsplit("claim: ", 1)[1] in TRUE_CLAIMS else "verdict: Refuted"
    if last.startswith("That answer is not usable"):  # the KG judge's revision: the same pattern again
        last = last.split("for the question '", 1)[1].rsplit("', following", 1)[0]
    return json.dumps({"triples": PATTERNS[last]})


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    root = tmp_path_factory.mktemp("factscore")
    return build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))


def test_bench_writes_rows_table_and_summary(toy_index: IndexDir, tmp_path: Path) -> None:
    llm = FakeLLM(_script)
    engine = SimGRAG(toy_index, llm=llm)
    engines = {"simgrag": engine, "none": engine.variant(retriever="none")}
    summary = run_factscore_bench(engines, llm, engine.verify, ITEMS, tmp_path, progress=False)

    sg, none = summary["simgrag"]["overall"], summary["none"]["overall"]
    assert (sg["factscore"], sg["scored"], sg["no_claims"], sg["claims"], sg["supported"]) == (1.0, 2, 1, 3, 3)
    assert sg["claims_per_answer"] == pytest.approx(1.0) and sg["hit"] == pytest.approx(2 / 3)
    assert sg["unparseable"] == 0 and sg["errors"] == 0
    assert none["factscore"] == pytest.approx(0.25) and none["no_claims"] == 1 and none["unparseable"] == 1
    assert none["claims"] == 3 and none["supported"] == 1 and none["hit"] == pytest.approx(1 / 3)
    assert summary["simgrag"]["2-hop"]["no_claims"] == 1 and summary["none"]["1-hop"]["factscore"] == 0.25

    rows = [json.loads(x) for x in (tmp_path / "simgrag.jsonl").read_text().splitlines()]
    assert [r["question"] for r in rows] == [i.question for i in ITEMS]
    first = rows[0]["factscore"]
    assert [v["claim"] for v in first["verdicts"]] == ["James Cameron directed Titanic.",
                                                      "Kate Winslet starred in Titanic."]
    assert first["verdicts"][0]["label"] == "Supported"
    assert ["Titanic", "directed_by", "James Cameron"] in first["verdicts"][0]["evidence"]
    assert first["verdicts"][0]["pattern"] == [["Titanic", "directed by", "James Cameron"]]
    assert rows[0]["metrics"]["hit"] == 1.0 and rows[2]["metrics"]["factscore"] is None
    assert rows[1]["factscore"]["split"]["duplicates"] == 1
    none_rows = [json.loads(x) for x in (tmp_path / "none.jsonl").read_text().splitlines()]
    assert none_rows[2]["factscore"]["split"]["unparseable"] and none_rows[0]["metrics"]["factscore"] == 0.5

    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["none"]["overall"]["factscore"] == 0.25
    table = (tmp_path / "factscore.md").read_text()
    assert "| simgrag | 3 | 0 | 100.0 | 1.00 | 1 | 0 | 0 | 66.7 |" in table
    assert "| none | 3 | 0 | 25.0 | 1.00 | 1 | 1 | 0 | 33.3 |" in table

    verify_calls = [c for c in llm.calls if "\nclaim: " in c.messages[-1].content]
    assert len(verify_calls) == 5  # six claims; "Kate Winslet starred in Titanic." is checked once (memo)
    before, calls = (tmp_path / "summary.json").read_text(), len(llm.calls)
    again = FakeLLM([])  # resumed: every row is kept, no LLM call
    run_factscore_bench(engines, again, engine.verify, ITEMS, tmp_path, progress=False)
    assert (tmp_path / "summary.json").read_text() == before and not again.calls and len(llm.calls) == calls


def test_cli_ask_open_and_bench_factscore(toy_index: IndexDir, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    llm = FakeLLM(_script)
    monkeypatch.setattr(_common, "llm_for", lambda choice: llm)
    result = CliRunner().invoke(cli.app, ["ask", str(toy_index.path), "who directed Titanic", "--open"])
    assert result.exit_code == 0, result.output
    assert "Answer: Titanic was directed by James Cameron. It starred Kate Winslet." in result.output
    assert "(Titanic, directed_by, James Cameron)" in llm.calls[-1].prompt

    monkeypatch.setattr(cli_bench, "_bench_engine", lambda *a, **k: SimGRAG(toy_index, llm=llm))
    monkeypatch.setattr(runner, "metaqa_items", lambda *a, **k: ITEMS[:2])
    out = tmp_path / "fs"
    result = CliRunner().invoke(cli.app, ["bench", "factscore", "--metaqa-dir", str(tmp_path), "-o", str(out),
                                          "--retriever", "simgrag,none", "--max-claims", "1"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["factscore.md", "none.jsonl", "simgrag.jsonl", "summary.json"]
    saved = json.loads((out / "summary.json").read_text())
    assert saved["simgrag"]["overall"]["claims"] == 2  # capped at one claim per answer
