"""`simgrag ask/verify --retriever …`: another retriever through the same facade, then the shared reader
or SimGRAG's verification prompt (scripted LLM, toy KG); options a retriever cannot use are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.answer.verify import VERIFY_SYSTEM, verify_context
from simgrag.cli import _common
from simgrag.cli import qa as cli
from simgrag.index.directory import build_index_dir
from simgrag.kg.store import Triple
from simgrag.llm.base import ChatMessage
from simgrag.retrievers.base import RetrievedContext
from simgrag.testing import FakeLLM, HashEmbedder, write_toy_kg


def _script(monkeypatch: pytest.MonkeyPatch, llm: FakeLLM) -> None:
    monkeypatch.setattr(_common, "llm_for", lambda choice: llm)


@pytest.fixture
def toy_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    llm = FakeLLM(lambda messages: "ans: James Cameron")
    _script(monkeypatch, llm)
    return llm


def test_ask_with_kaping(toy_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic",
                                          "--retriever", "kaping", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["retriever"] == "kaping" and body["entities"] == ["James Cameron"] and body["style"] == "kaping"
    assert body["pattern"] == [] and body["evidence"] is None  # the same result shape as simgrag's
    assert ["Titanic", "directed_by", "James Cameron"] in body["context"]["triples"]
    assert body["context"]["topic"]["names"] == ["Titanic"]
    assert "(Titanic, directed_by, James Cameron)" in toy_engine.calls[0].prompt  # the facts reached the reader


@pytest.mark.parametrize(("extra", "refusal"), [
    (["--retriever", "pcst", "-k", "5"], "The 'pcst' retriever takes no option 'k'"),
    (["--retriever", "kaping", "--examples", "my.yaml"], "The 'kaping' retriever takes no option 'examples'"),
    (["--retriever", "kaping", "--abstain-gsd", "0.5"], "abstain_gsd needs a retriever that matches subgraphs"),
    (["--retriever", "kaping", "--retriever-model", "gsr=m.dir"], "--retriever-model names gsr"),
    (["--retriever-model", "gsr"], "--retriever-model expects NAME=DIR"),
])
def test_options_a_retriever_cannot_use_are_refused(toy_engine: FakeLLM, tmp_path: Path, extra: list[str],
                                                     refusal: str) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic", *extra])
    assert result.exit_code == 2 and refusal in result.output, result.output
    assert toy_engine.calls == []


def test_k_reaches_a_retriever_that_takes_it(toy_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic",
                                          "--retriever", "kaping", "-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["context"]["triples"]) == 1


def test_ask_with_unknown_retriever_is_a_clean_error(toy_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic",
                                          "--retriever", "nosuch"])
    assert result.exit_code == 2 and "Unknown retriever 'nosuch'" in result.output


def judge(messages: list[ChatMessage]) -> str:
    """A scripted verifier: Supported iff the evidence holds Titanic's director and the claim names him."""
    evidence, _, claim = messages[-1].content.partition("\nclaim: ")
    supported = "(Titanic, directed_by, James Cameron)" in evidence and "James Cameron" in claim
    return "verdict: Supported" if supported else "verdict: Refuted"


@pytest.fixture
def judge_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    llm = FakeLLM(judge)
    _script(monkeypatch, llm)
    return llm


@pytest.mark.parametrize(("claim", "label"), [("Titanic was directed by James Cameron.", "Supported"),
                                              ("Titanic was directed by Christopher Nolan.", "Refuted")])
def test_verify_with_kaping(judge_engine: FakeLLM, tmp_path: Path, claim: str, label: str) -> None:
    result = CliRunner().invoke(cli.app, ["verify", str(tmp_path / "toy.idx"), claim, "--retriever", "kaping",
                                          "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["retriever"] == "kaping" and body["label"] == label
    assert "Titanic" in body["context"]["topic"]["names"]  # linked from the claim text
    assert {"link_s", "rank_s", "retrieve_s", "answer_s"} <= set(body["timings"])
    (call,) = judge_engine.calls
    assert call.messages[0].content == VERIFY_SYSTEM  # SimGRAG's rules and shots, not a copy
    assert "(Titanic, directed_by, James Cameron)\n" in call.messages[-1].content
    assert call.messages[-1].content.endswith(f"claim: {claim}")


def test_verify_with_kaping_prints_verdict_evidence_and_timings(judge_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["verify", str(tmp_path / "toy.idx"), "Titanic was directed by James Cameron.",
                                          "--retriever", "kaping"])
    assert result.exit_code == 0, result.output
    assert "Verdict: Supported" in result.output and "Retriever: kaping" in result.output
    assert "Titanic --directed_by--> James Cameron" in result.output and "stage timings: link" in result.output


def test_verify_without_context_does_not_call_the_llm(judge_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["verify", str(tmp_path / "toy.idx"), "Titanic was directed by James Cameron.",
                                          "--retriever", "none", "--json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.output)
    assert verdict["label"] == "Not enough evidence" and verdict["abstained"] is True
    assert judge_engine.calls == []


def test_verify_context_shows_paths_as_graphs() -> None:
    path = (Triple("Titanic", "directed_by", "James Cameron"), Triple("Avatar", "directed_by", "James Cameron"))
    context = RetrievedContext(retriever="paths", question="q", triples=path, paths=(path,))
    llm = FakeLLM(["verdict: Supported"])
    verdict = verify_context(llm, "Titanic and Avatar share a director.", context)
    assert verdict.label == "Supported" and verdict.evidence_items == 1
    graph = "graph [1]: (Titanic, directed_by, James Cameron), (Avatar, directed_by, James Cameron)"
    assert graph in llm.calls[0].prompt


def test_verify_with_unknown_retriever_is_a_clean_error(judge_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["verify", str(tmp_path / "toy.idx"), "x", "--retriever", "nosuch"])
    assert result.exit_code == 2 and "Unknown retriever 'nosuch'" in result.output


def test_errors_print_brackets_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install hint like pip install 'simgrag[llamacpp]' must not lose its brackets to console markup."""
    from simgrag.errors import LLMError

    def broken(choice: object) -> FakeLLM:
        return FakeLLM([LLMError("install it with pip install 'simgrag[llamacpp]'")])

    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    monkeypatch.setattr(_common, "llm_for", broken)
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic", "--no-analogy"])
    assert result.exit_code == 2 and "pip install 'simgrag[llamacpp]'" in result.output, result.output
