"""`simgrag ask --retriever …`: another retriever, then the shared reader (scripted LLM, toy KG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simgrag import cli
from simgrag.index.directory import build_index_dir
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import write_toy_kg


@pytest.fixture
def toy_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    llm = FakeLLM(lambda messages: "ans: James Cameron")

    def engine(*args: Any, **kwargs: Any) -> SimGRAG:
        return SimGRAG(tmp_path / "toy.idx", llm=llm)

    monkeypatch.setattr(cli, "_engine", engine)
    return llm


def test_ask_with_kaping(toy_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic",
                                          "--retriever", "kaping", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["answer"]["entities"] == ["James Cameron"]
    assert ["Titanic", "directed_by", "James Cameron"] in body["context"]["triples"]
    assert body["context"]["topic"]["names"] == ["Titanic"]
    assert "(Titanic, directed_by, James Cameron)" in toy_engine.calls[0].prompt  # the facts reached the reader


def test_ask_with_unknown_retriever_is_a_clean_error(toy_engine: FakeLLM, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["ask", str(tmp_path / "toy.idx"), "who directed Titanic",
                                          "--retriever", "nosuch"])
    assert result.exit_code == 2 and "Unknown retriever 'nosuch'" in result.output
