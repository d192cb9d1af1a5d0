"""The command line: index and retrieve (readable, --json, --patterns batch), with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.testing.toy import write_toy_kg

runner = CliRunner()


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    kg = write_toy_kg(root / "toy.txt")
    result = runner.invoke(app, ["index", str(kg), "-o", str(root / "toy.idx"), "--embedder", "hash:64"])
    assert result.exit_code == 0, result.output
    assert "Indexed 17 triples" in result.output
    return root / "toy.idx"


def test_retrieve_readable(toy_index: Path) -> None:
    result = runner.invoke(app, ["retrieve", str(toy_index), "--pattern",
                                 '[["UNKNOWN director 1","directed by","Inception"]]', "-k", "2"])
    assert result.exit_code == 0, result.output
    assert "Inception —directed_by→ Christopher Nolan" in result.output
    assert "#2" in result.output


def test_retrieve_json(toy_index: Path) -> None:
    result = runner.invoke(app, ["retrieve", str(toy_index), "--json", "--pattern",
                                 '[["UNKNOWN director 1","directed by","Inception"]]'])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["complete"] is True
    assert payload["matches"][0]["edges"][0]["triple"] == ["Inception", "directed_by", "Christopher Nolan"]


def test_retrieve_batch_reports_bad_lines(toy_index: Path, tmp_path: Path) -> None:
    patterns = tmp_path / "p.jsonl"
    patterns.write_text('[["UNKNOWN director 1","directed by","Titanic"]]\n\nnot json\n[["a","b"]]\n')
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["retrieve", str(toy_index), "--patterns", str(patterns), "-o", str(out)])
    assert result.exit_code == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["line"] for x in lines] == [1, 3, 4]
    assert lines[0]["matches"][0]["nodes"][0]["entity"] == "James Cameron"
    assert "not valid JSON" in lines[1]["error"] and "exactly 3 strings" in lines[2]["error"]


def test_bad_pattern_and_missing_index_are_clear_errors(toy_index: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["retrieve", str(toy_index), "--pattern", '[["x","y"]'])
    assert bad.exit_code == 2 and "not valid JSON" in bad.output
    missing = runner.invoke(app, ["retrieve", str(tmp_path), "--pattern", '[["a","b","c"]]'])
    assert missing.exit_code == 2 and "not a simgrag index directory" in missing.output
