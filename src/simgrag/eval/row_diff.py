"""Two QA result files question by question: what a change fixed and what it broke.

A change to the pattern stage is judged per KG against a baseline run of the same questions — the floor
(``--no-grounding --no-channel``) or the code before — and an accuracy figure alone hides how it moved: "85 → 85"
may be 5 fixed and 5 broken. :func:`diff_rows` pairs the rows of two ``bench qa`` / ``bench metaqa`` /
``bench wc2014`` files by question (and group, where a question is asked in two), and gives per group the Hits@1 of
each (the first answer, ``strict``) and the questions fixed (wrong in the first, right in the second) and broken
(the other way), each with the two runs' patterns. Rows without ``question`` or ``strict`` are a
:class:`~simgrag.errors.DatasetError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import DatasetError
from simgrag.eval.runner import read_jsonl

__all__ = ["Change", "GroupScore", "RowDiff", "diff_files", "diff_rows", "format_diff"]

#: a row's key: (group, question)
Key = tuple[str, str]


@dataclass(frozen=True)
class Change:
    """One question answered right in one run and wrong in the other, with each run's pattern and first answer."""

    group: str
    question: str
    before_pattern: Any
    after_pattern: Any
    before_answer: str | None
    after_answer: str | None


@dataclass(frozen=True)
class GroupScore:
    """Hits@1 of both runs on the questions of one group that both answered."""

    group: str
    n: int
    before: float
    after: float


@dataclass(frozen=True)
class RowDiff:
    """:func:`diff_rows`'s result: per-group scores, the questions fixed and broken, and the questions only one
    run has (counted, not scored)."""

    groups: tuple[GroupScore, ...]
    fixed: tuple[Change, ...] = field(default_factory=tuple)
    broke: tuple[Change, ...] = field(default_factory=tuple)
    only_before: int = 0
    only_after: int = 0


def _keyed(rows: Sequence[dict[str, Any]], name: str) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for n, row in enumerate(rows, start=1):
        question, strict = row.get("question"), row.get("strict")
        if not isinstance(question, str) or not isinstance(strict, bool):
            raise DatasetError(f"{name}: row {n} is not a QA result row (it needs 'question' and 'strict')")
        out[(str(row.get("group") or "all"), question)] = row
    return out


def diff_rows(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], *,
              names: tuple[str, str] = ("before", "after")) -> RowDiff:
    """Pair ``before`` and ``after`` (QA result rows) by (group, question) and compare them (module docstring)."""
    first, second = _keyed(before, names[0]), _keyed(after, names[1])
    both = [key for key in first if key in second]
    groups: dict[str, list[Key]] = {}
    for key in both:
        groups.setdefault(key[0], []).append(key)
    scores = tuple(GroupScore(group, len(keys), 100 * sum(first[k]["strict"] for k in keys) / len(keys),
                              100 * sum(second[k]["strict"] for k in keys) / len(keys))
                   for group, keys in sorted(groups.items()))

    def change(key: Key) -> Change:
        a, b = first[key], second[key]
        return Change(key[0], key[1], a.get("pattern"), b.get("pattern"), a.get("short_answer"),
                      b.get("short_answer"))

    fixed = tuple(change(k) for k in both if not first[k]["strict"] and second[k]["strict"])
    broke = tuple(change(k) for k in both if first[k]["strict"] and not second[k]["strict"])
    return RowDiff(scores, fixed, broke, sum(k not in second for k in first), sum(k not in first for k in second))


def diff_files(before: str | Path, after: str | Path) -> RowDiff:
    """:func:`diff_rows` of two result files (``bench qa`` / ``bench metaqa`` / ``bench wc2014`` ``-o``)."""
    return diff_rows(read_jsonl(before, "QA results"), read_jsonl(after, "QA results"),
                        names=(str(before), str(after)))


def format_diff(diff: RowDiff, *, show: int = 20) -> str:
    """A table of the per-group scores, the fixed / broken counts, and up to ``show`` of each with their patterns."""
    lines = ["| group | n | before | after | fixed | broke |", "|---|---|---|---|---|---|"]
    for score in diff.groups:
        fixed = sum(c.group == score.group for c in diff.fixed)
        broke = sum(c.group == score.group for c in diff.broke)
        lines.append(f"| {score.group} | {score.n} | {score.before:.1f} | {score.after:.1f} | {fixed} | {broke} |")
    if diff.only_before or diff.only_after:
        lines.append(f"questions in one file only (not scored): {diff.only_before} before, "
                     f"{diff.only_after} after")
    for title, changes in (("fixed", diff.fixed), ("broke", diff.broke)):
        for c in changes[:show]:
            lines.append(f"{title.upper()} [{c.group}] {c.question}")
            lines.append(f"    before: {c.before_answer!r} from {c.before_pattern}")
            lines.append(f"    after:  {c.after_answer!r} from {c.after_pattern}")
        if len(changes) > show:
            lines.append(f"… {len(changes) - show} more {title}")
    return "\n".join(lines)
