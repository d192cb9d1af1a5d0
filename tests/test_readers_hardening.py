"""KG readers under odd input: CSV records across lines, files that change while read, comment
lines counted apart, many bad lines reported by reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from simgrag.errors import KGError, KGFormatError
from simgrag.index.directory import build_index_dir
from simgrag.kg.loader import load_kg
from simgrag.kg.readers import MAX_RECORD_LINES, iter_triples
from simgrag.testing.embedders import HashEmbedder


def triples(store: object) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}  # type: ignore[attr-defined]


def test_csv_field_quoted_across_lines_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "kb.csv"
    path.write_text('head,relation,tail\nHeat,starred_actors,"Al\nPacino"\n"Heat ""95""",year,1995\n'
                    'Juno,in_language,English\n', encoding="utf-8")
    store, report = load_kg(path)
    assert triples(store) == {("Heat", "starred_actors", "Al\nPacino"), ('Heat "95"', "year", "1995"),
                              ("Juno", "in_language", "English")}
    assert report.skipped_lines == 0 and report.lines_read == 5
    assert [t.tail for t in iter_triples(path)] == ["Al\nPacino", "1995", "English"]


def test_csv_quote_never_closed_is_one_bad_line_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "kb.csv"
    path.write_text('head,relation,tail\na,r,"b\nc,r,d\ne,r,f\n', encoding="utf-8")
    with pytest.raises(KGFormatError) as info:
        load_kg(path)
    assert info.value.bad_lines == 1 and info.value.problems[0][1] == 2
    assert "not closed within the end of the file" in str(info.value)
    store, report = load_kg(path, skip_bad_lines=True)
    assert triples(store) == {("c", "r", "d"), ("e", "r", "f")}  # no bogus triple from the continuation
    long = tmp_path / "long.csv"
    long.write_text('head,relation,tail\na,r,"b\n' + "x,r,y\n" * (MAX_RECORD_LINES + 5), encoding="utf-8")
    store, report = load_kg(long, skip_bad_lines=True)
    assert report.skipped_lines == 1 and triples(store) == {("x", "r", "y")}
    assert f"not closed within {MAX_RECORD_LINES} lines" in report.examples[0]


def test_file_truncated_while_read_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    path.write_text("".join(f"e{i}|r|e{i + 1}\n" for i in range(200_000)), encoding="utf-8")
    stream = iter_triples(path)
    assert next(stream).head == "e0"
    with path.open("r+b") as fh:  # another process cuts the file while it is read
        fh.truncate(100_000)
    with pytest.raises(KGError, match="changed while it was read"):
        list(stream)


def test_comment_and_blank_lines_are_counted_apart_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    path.write_text("# a comment\n\na|r|b\n  # indented comment\n \nb|r|c\n", encoding="utf-8")
    _, report = load_kg(path)
    assert (report.comment_lines, report.blank_lines, report.comment_or_blank_lines) == (2, 2, 4)
    assert "(2 comment, 2 blank)" in report.summary()
    built = build_index_dir(path, tmp_path / "kb.idx", embedder=HashEmbedder(dim=16))
    kg = built.manifest["kg"]
    assert (kg["comment_lines"], kg["blank_lines"], kg["lines"], kg["skipped_lines"]) == (2, 2, 6, 0)


def test_many_bad_lines_are_counted_by_reason_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    lines = ["a|r|b"] + ["only|two"] * 30 + ["x| |y"] * 5 + ["c|r|d"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(KGFormatError) as info:
        load_kg(path)
    message = str(info.value)
    assert info.value.bad_lines == 35 and len(info.value.problems) == 20
    assert "All 35 by reason: 30× expected 3 '|'-separated fields, got 2 (lines 2–31); 5× empty relation field " \
           "(lines 32–36)" in message
    store, report = load_kg(path, skip_bad_lines=True)
    assert report.skipped_lines == 35 and triples(store) == {("a", "r", "b"), ("c", "r", "d")}
    assert report.skipped_by_reason == ["30× expected 3 '|'-separated fields, got 2 (lines 2–31)",
                                        "5× empty relation field (lines 32–36)"]
    assert "35 bad lines skipped: 30× expected" in report.summary()
