"""Benchmark rows that survive an interruption: one JSON line per question, appended as it is computed.

A rerun with the same output file keeps the rows an earlier run finished (same group and question,
judged finished by the caller) and computes only the rest; at the end of a resumed run the file is
rewritten whole, in question order, atomically. Used by every benchmark runner that writes JSONL rows
(:mod:`simgrag.eval.runner`, :mod:`simgrag.eval.compare`, :mod:`simgrag.eval.factscore_bench`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from simgrag.fileio import write_bytes_atomic

__all__ = ["finished_rows", "resumable_rows"]

logger = logging.getLogger(__name__)


class KeyedItem(Protocol):
    """What resuming needs of a question: its group (e.g. ``"2-hop"``) and its text."""

    @property
    def group(self) -> str: ...

    @property
    def question(self) -> str: ...


Item = TypeVar("Item", bound=KeyedItem)
Row = dict[str, Any]


def _key(item: KeyedItem) -> tuple[str, str]:
    return (item.group, item.question)


def _without_error(row: Row) -> bool:
    return "error" not in row


def finished_rows(path: Path, items: Sequence[KeyedItem],
                  finished: Callable[[Row], bool] = _without_error) -> dict[tuple[str, str], Row]:
    """Rows of an earlier run in ``path`` for questions among ``items`` that ``finished`` accepts
    (by default: rows without an ``"error"``, so failed questions run again)."""
    if not path.exists():
        return {}
    wanted = {_key(item) for item in items}
    done: dict[tuple[str, str], Row] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d: not a JSON row (an interrupted write?); that question runs again", path, number)
                continue
            key = (row.get("group"), row.get("question"))
            if key in wanted and finished(row):
                done[key] = row
    return done


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _dump(row: Row) -> str:
    return json.dumps(row, ensure_ascii=False, default=str) + "\n"


def resumable_rows(path: str | Path, items: Sequence[Item], compute: Callable[[Item], Row], *,
                   resume: bool = True, finished: Callable[[Row], bool] = _without_error,
                   label: str = "") -> Iterator[Row]:
    """Each item's row, in order: kept from ``path`` when an earlier run finished it (``resume``), else
    ``compute(item)``, appended to ``path`` and flushed at once. Without ``resume`` the file starts empty."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = finished_rows(path, items, finished) if resume else {}
    if done:
        logger.info("%sresuming: %d of %d questions already in %s (kept as they are; start the file over "
                    "to rerun them)", f"{label}: " if label else "", len(done), len(items), path)
    rows = []
    with path.open("a" if done else "w", encoding="utf-8") as sink:
        if done and not _ends_with_newline(path):
            sink.write("\n")  # a line cut short by the interruption stays a line of its own
        for item in items:
            row = done.get(_key(item))
            if row is None:
                row = compute(item)
                sink.write(_dump(row))
                sink.flush()
            rows.append(row)
            yield row
    if done:  # once more in question order, replacing the file whole
        write_bytes_atomic(path, "".join(_dump(r) for r in rows).encode("utf-8"))
