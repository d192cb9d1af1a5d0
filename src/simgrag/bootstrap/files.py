"""What a bootstrap writes: its progress log (resumable, append-only) and the editable YAML files.

The progress log is JSON lines beside the output (``FILE.progress.jsonl``): a first ``settings``
record, then one record per finished unit of work (a sample and its questions, a relation's types or
phrases), each flushed to disk before the next LLM call. A rerun with the same settings replays it and
goes on where it stopped; other settings are refused (start over with ``resume=False``). A line cut by
a crash is ignored.

The YAML files are written whole after each unit, atomically, so an interruption leaves the last
complete version.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from simgrag.errors import ConfigError
from simgrag.fileio import write_bytes_atomic

__all__ = ["ProgressLog", "examples_yaml", "progress_path", "yaml_item"]

logger = logging.getLogger(__name__)


def progress_path(output: Path) -> Path:
    """The progress log of a bootstrap that writes ``output``."""
    return output.with_name(output.name + ".progress.jsonl")


class ProgressLog:
    """The append-only record of one bootstrap run (module docstring)."""

    def __init__(self, path: Path, settings: Mapping[str, Any], *, resume: bool = True, command: str = "") -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        if resume and path.exists():
            lines = self._read()
            if lines and lines[0].get("settings") != dict(settings):
                raise ConfigError(
                    f"{path} records a bootstrap with other settings ({lines[0].get('settings')}); run the same "
                    f"command with its settings to go on, or start over{' with ' + command if command else ''} "
                    "--no-resume (the file is replaced)")
            self.records = lines[1:]
            if self.records:
                logger.info("%s: going on after %d finished record(s)", path, len(self.records))
        if not self.records:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"settings": dict(settings)}, ensure_ascii=False) + "\n", encoding="utf-8")

    def _read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"Cannot read the progress log {self.path}: {exc}") from exc
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                logger.warning("%s: an unfinished line is ignored", self.path)
                break
            if isinstance(record, dict):
                out.append(record)
        return out

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def append(self, record: Mapping[str, Any]) -> None:
        """Add ``record`` and make it durable before returning."""
        line = json.dumps(dict(record), ensure_ascii=False) + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self.records.append(dict(record))


class _Flow(list[Any]):
    """A list written on one line (``[a, b, c]``): a pattern triple."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda dumper, data: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", data, flow_style=True))


def _flowing(value: Any) -> Any:
    """``value`` with every list of scalars marked to be written on one line."""
    if isinstance(value, Mapping):
        return {k: _flowing(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value) and len(value) <= 3:
            return _Flow(value)
        return [_flowing(v) for v in value]
    return value


def yaml_item(value: Any, *, indent: int = 2) -> str:
    """``value`` as one YAML list item, indented; short lists of strings (triples) on one line."""
    text = yaml.dump([_flowing(value)], Dumper=_Dumper, allow_unicode=True, sort_keys=False,
                     default_flow_style=False, width=10_000)
    pad = " " * indent
    return "".join(pad + line + "\n" for line in text.splitlines())


def _comment(text: str) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in text.splitlines())


def examples_yaml(path: Path, header: str, relations: Sequence[str], instructions: str | None,
                  examples: Iterable[tuple[Mapping[str, Any], str]]) -> None:
    """Write an examples file :func:`~simgrag.pattern.examples.load_examples` reads: ``header`` as
    comments, the relations, the instructions and each ``(example, note)`` with its note as a comment."""
    parts = [_comment(header), "name: bootstrapped\n"]
    if relations:
        parts.append("relations:\n" + "".join(yaml_item(r) for r in relations))
    if instructions:
        parts.append(yaml.safe_dump({"instructions": instructions}, allow_unicode=True, width=10_000))
    parts.append("examples:\n")
    for example, note in examples:
        parts.append(f"  # {note}\n" if note else "")
        parts.append(yaml_item(dict(example)))
    write_bytes_atomic(path, "".join(parts).encode("utf-8"))
