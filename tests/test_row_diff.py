"""`simgrag bench diff`: two QA result files question by question — per-group Hits@1, fixed and broken questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import DatasetError
from simgrag.eval.row_diff import diff_files, diff_rows, format_diff


def _row(question: str, group: str, strict: bool, pattern: str = "p") -> dict[str, Any]:
    return {"question": question, "group": group, "strict": strict, "pattern": [[pattern]], "short_answer": pattern}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_fixed_and_broken_questions_per_group_with_both_patterns() -> None:
    before = [_row("q1", "1-hop", False, "a"), _row("q2", "1-hop", True), _row("q3", "2-hop", True, "c"),
              _row("only before", "2-hop", True)]
    after = [_row("q1", "1-hop", True, "b"), _row("q2", "1-hop", True), _row("q3", "2-hop", False, "d"),
             _row("only after", "1-hop", False)]
    diff = diff_rows(before, after)
    assert [(g.group, g.n, g.before, g.after) for g in diff.groups] == [("1-hop", 2, 50.0, 100.0),
                                                                         ("2-hop", 1, 100.0, 0.0)]
    (fixed,) = diff.fixed
    assert (fixed.question, fixed.before_pattern, fixed.after_pattern) == ("q1", [["a"]], [["b"]])
    (broke,) = diff.broke
    assert (broke.question, broke.group, broke.after_answer) == ("q3", "2-hop", "d")
    assert (diff.only_before, diff.only_after) == (1, 1)
    text = format_diff(diff)
    assert "| 1-hop | 2 | 50.0 | 100.0 | 1 | 0 |" in text and "FIXED [1-hop] q1" in text and "BROKE [2-hop] q3" in text
    assert "1 before, 1 after" in text
    assert "FIXED" not in format_diff(diff, show=0) and "… 1 more fixed" in format_diff(diff, show=0)


def test_a_question_asked_in_two_groups_is_two_questions() -> None:
    diff = diff_rows([_row("q", "a", True), _row("q", "b", False)], [_row("q", "a", True), _row("q", "b", True)])
    assert [c.group for c in diff.fixed] == ["b"] and not diff.broke


def test_rows_that_are_no_qa_results_are_refused_with_the_file_and_row(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.jsonl", [_row("q", "g", True)])
    odd = _write(tmp_path / "odd.jsonl", [_row("q", "g", True), {"question": "q2"}])
    with pytest.raises(DatasetError, match=r"odd\.jsonl: row 2 is not a QA result row"):
        diff_files(good, odd)
    (tmp_path / "broken.jsonl").write_text('{"question": "q"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"broken\.jsonl:1: not JSON"):
        diff_files(good, tmp_path / "broken.jsonl")


_ROWS = st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3", "q4"]), st.sampled_from(["1-hop", "2-hop"]),
                           st.booleans()), max_size=8)


@settings(max_examples=200, deadline=None)
@given(_ROWS, _ROWS)
def test_fixed_minus_broken_is_the_change_in_hits(before: list[tuple[str, str, bool]],
                                                  after: list[tuple[str, str, bool]]) -> None:
    """Per group: (fixed − broke) = (after − before) × n / 100; a file against itself changes nothing."""
    diff = diff_rows([_row(*r) for r in before], [_row(*r) for r in after])
    for score in diff.groups:
        fixed = sum(c.group == score.group for c in diff.fixed)
        broke = sum(c.group == score.group for c in diff.broke)
        assert fixed - broke == round((score.after - score.before) * score.n / 100)
    same = diff_rows([_row(*r) for r in before], [_row(*r) for r in before])
    assert not same.fixed and not same.broke and all(g.before == g.after for g in same.groups)


def test_the_command_prints_the_table_and_fails_cleanly_on_a_missing_file(tmp_path: Path) -> None:
    before = _write(tmp_path / "floor.jsonl", [_row("q1", "1-hop", False, "a"), _row("q2", "1-hop", True)])
    after = _write(tmp_path / "default.jsonl", [_row("q1", "1-hop", True, "b"), _row("q2", "1-hop", True)])
    result = CliRunner().invoke(app, ["bench", "diff", str(before), str(after)])
    assert result.exit_code == 0, result.output
    assert "| 1-hop | 2 | 50.0 | 100.0 | 1 | 0 |" in result.output and "FIXED [1-hop] q1" in result.output
    missing = CliRunner().invoke(app, ["bench", "diff", str(tmp_path / "none.jsonl"), str(after)])
    assert missing.exit_code != 0 and "cannot read the QA results file" in missing.output
