"""Streaming readers for KG files: ``pipe``, ``tsv``, ``csv`` and ``ntriples``.

Files are read line by line in binary mode; each line is decoded on its own, so an invalid UTF-8
byte or a NUL byte is reported at its own line. Blank lines and lines starting with ``#`` are skipped
and counted (apart). A bad line becomes a *problem* ``(path, line, reason)`` in a :class:`Problems`
collector, which lists the first :data:`MAX_LISTED` and counts every one by reason (with its first
and last line numbers); the caller decides whether problems are fatal (strict) or skipped and
reported. A CSV record may span lines inside a quoted field (``"Al\nPacino"``); a quote left open
for :data:`MAX_RECORD_LINES` lines, or to the end of the file, is one bad line where it opened, and
the lines after it are read again as records. A file that changes size while it is read (truncated,
or still being written) raises :class:`~simgrag.errors.KGError` rather than loading a part of it.

Every format is turned into *facts*, ``(kind, a, b, c)`` tuples of strings:

- ``(TRIPLE, head, relation, tail)``;
- ``(TYPE, entity, type_name, "")`` — from CSV type columns or ``rdf:type``;
- ``(LABEL, entity, label, language)`` — from ``rdfs:label`` (N-Triples only).

For N-Triples, entities and relations are term keys (see :mod:`simgrag.kg.ntriples`); for the other
formats they are the names themselves.
"""

from __future__ import annotations

import csv
import logging
import stat
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import BinaryIO

from simgrag.errors import ConfigError, KGError, KGFormatError
from simgrag.kg.ntriples import RDF_TYPE, RDFS_LABEL, LineError, parse_ntriples_line, term_name
from simgrag.kg.store import Triple

__all__ = [
    "FORMATS",
    "LABEL",
    "TRIPLE",
    "TYPE",
    "CsvColumns",
    "Fact",
    "Problems",
    "Tally",
    "detect_format",
    "iter_facts",
    "iter_triples",
    "read_error",
]

logger = logging.getLogger(__name__)

FORMATS = ("pipe", "tsv", "csv", "ntriples")
_ALIASES = {"nt": "ntriples", "n-triples": "ntriples", "tab": "tsv", "psv": "pipe"}
_EXTENSIONS = {".nt": "ntriples", ".csv": "csv", ".tsv": "tsv"}
TRIPLE, TYPE, LABEL = 0, 1, 2
Fact = tuple[int, str, str, str]
MAX_LISTED = 20
MAX_RECORD_LINES = 100  # physical lines one quoted CSV record may span
_SNIFF_BYTES = 1 << 16


class _FatalLineError(LineError):
    """A line that makes the rest of the file unreadable (e.g. a CSV header without its columns)."""


@dataclass(frozen=True)
class CsvColumns:
    """Header names of the CSV columns to read.

    ``head_type``/``tail_type`` name optional columns with entity types; left as ``None`` they are
    used when the header has columns called ``head_type``/``tail_type``. Empty type cells mean
    "no type". Other columns are ignored.
    """

    head: str = "head"
    relation: str = "relation"
    tail: str = "tail"
    head_type: str | None = None
    tail_type: str | None = None

    @classmethod
    def coerce(cls, value: CsvColumns | Mapping[str, str] | None) -> CsvColumns:
        if value is None or isinstance(value, CsvColumns):
            return value or cls()
        known = {f.name for f in fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise ConfigError(f"Unknown csv_columns key(s) {sorted(unknown)}; use {sorted(known)}.")
        return cls(**dict(value))


@dataclass
class Tally:
    """Running counts of one read."""

    lines: int = 0
    comment_or_blank: int = 0
    comments: int = 0
    bytes_read: int = 0

    @property
    def blank(self) -> int:
        return self.comment_or_blank - self.comments


class Problems:
    """Collects bad lines: the first :data:`MAX_LISTED` in full, all of them counted by reason with
    the first and last line of each reason."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.reasons: Counter[str] = Counter()
        self.lines: dict[str, tuple[int, int]] = {}  # reason → (first line, last line)
        self.first: list[tuple[str, int, str]] = []

    def add(self, lineno: int, reason: str, line: str | bytes) -> None:
        self.count += 1
        self.reasons[reason] += 1
        first, _ = self.lines.get(reason, (lineno, lineno))
        self.lines[reason] = (first, lineno)
        if len(self.first) < MAX_LISTED:
            shown = line if len(line) <= 60 else line[:60]
            self.first.append((self.path, lineno, f"{reason}: {shown!r}"))

    def examples(self) -> list[str]:
        return [f"{path}:{line}: {reason}" for path, line, reason in self.first]

    def by_reason(self) -> list[str]:
        """One line per reason, most frequent first: ``N× reason (lines a–b)``."""
        out = []
        for reason, n in self.reasons.most_common():
            first, last = self.lines[reason]
            where = f"line {first}" if first == last else f"lines {first}–{last}"
            out.append(f"{n:,}× {reason} ({where})")
        return out

    def error(self) -> KGFormatError:
        more = ""
        if self.count > len(self.first):
            more = (f" All {self.count:,} by reason: " + "; ".join(self.by_reason()[:10])
                    + ("; …" if len(self.reasons) > 10 else "") + ".")
        return KGFormatError(
            f"{self.path}: {self.count:,} malformed line(s), the first {len(self.first)} listed below.{more} "
            "Fix them, check the format, or pass skip_bad_lines=True to load the other lines.",
            self.first,
            bad_lines=self.count,
            options={"skip_bad_lines=True": "--skip-bad-lines"},
        )


def read_error(path: Path, exc: OSError) -> KGError:
    """A :class:`KGError` for a file that cannot be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return KGError(f"KG file not found: {path} (check the path)")
    return KGError(f"Cannot read the KG file {path}: {exc}")


# ---------------------------------------------------------------------------------------- format
def detect_format(path: Path, format: str | None = None) -> str:
    """The format to read ``path`` with: ``format`` when given, else from the extension or content."""
    if format is not None:
        name = _ALIASES.get(format.lower(), format.lower())
        if name not in FORMATS:
            raise ConfigError(f"Unknown KG format {format!r}; use one of {', '.join(FORMATS)}.")
        return name
    by_ext = _EXTENSIONS.get(path.suffix.lower())
    return by_ext if by_ext is not None else _sniff(path)


def _sniff(path: Path) -> str:
    """Tell pipe, tab and N-Triples apart from the first lines (``.txt`` and unknown extensions)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise read_error(path, exc) from exc
    lines = [ln.strip() for ln in head.decode("utf-8", errors="replace").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")][:50]
    votes = Counter[str]()
    for line in lines:
        votes["pipe"] += line.count("|") == 2
        votes["tsv"] += line.count("\t") == 2
        votes["ntriples"] += line.startswith(("<", "_:")) and line.endswith(".")
    best, score = max(votes.items(), key=lambda kv: kv[1], default=("pipe", 0))
    if score == 0 and lines and path.suffix.lower() != ".txt":
        raise KGFormatError(
            f"{path}: cannot tell the KG format from the extension or the first lines; "
            f"pass format=FORMAT (one of {', '.join(FORMATS)}).",
            options={"format=FORMAT": "--format FORMAT"},
        )
    return best if score > 0 else "pipe"


# ---------------------------------------------------------------------------------------- lines
def _decoded_lines(
    fh: BinaryIO, tally: Tally, problems: Problems, on_progress: Callable[[int], None] | None
) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line that decodes as UTF-8 (blank and comment lines included)."""
    pending = 0
    for lineno, raw in enumerate(fh, 1):
        tally.lines = lineno
        tally.bytes_read += len(raw)
        if on_progress is not None and lineno % 65536 == 0:
            on_progress(tally.bytes_read - pending)
            pending = tally.bytes_read
        if b"\x00" in raw:
            problems.add(lineno, "NUL byte (binary data, not a text KG file?)", raw)
            continue
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            problems.add(lineno, f"invalid UTF-8 (byte {exc.start}); re-encode the file as UTF-8", raw)
            continue
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        yield lineno, text
    if on_progress is not None:
        on_progress(tally.bytes_read - pending)


def _skipped(text: str, tally: Tally) -> bool:
    """Count and skip a blank or ``#`` comment line."""
    stripped = text.strip()
    if stripped and not stripped.startswith("#"):
        return False
    tally.comment_or_blank += 1
    tally.comments += bool(stripped)
    return True


def _content_lines(
    fh: BinaryIO, tally: Tally, problems: Problems, on_progress: Callable[[int], None] | None
) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank, non-comment line that decodes as UTF-8."""
    for lineno, text in _decoded_lines(fh, tally, problems, on_progress):
        if not _skipped(text, tally):
            yield lineno, text


def _open_quote(text: str) -> bool:
    """Does ``text`` end inside a quoted CSV field (``"`` opens a field only at its start; ``""`` escapes)?"""
    if '"' not in text:
        return False
    inside, at_start, i, n = False, True, 0, len(text)
    while i < n:
        ch = text[i]
        if inside:
            if ch == '"':
                if i + 1 < n and text[i + 1] == '"':
                    i += 2
                    continue
                inside = False
        elif ch == '"' and at_start:
            inside = True
        at_start = not inside and ch in ",\n"
        i += 1
    return inside


def _csv_records(
    fh: BinaryIO, tally: Tally, problems: Problems, on_progress: Callable[[int], None] | None
) -> Iterator[tuple[int, str]]:
    """Like :func:`_content_lines`, but a record whose quoted field spans lines comes as one text."""
    lines = _decoded_lines(fh, tally, problems, on_progress)
    pushback: list[tuple[int, str]] = []

    def next_line() -> tuple[int, str] | None:
        return pushback.pop() if pushback else next(lines, None)

    while (item := next_line()) is not None:
        lineno, text = item
        if _skipped(text, tally):
            continue
        if not _open_quote(text):
            yield lineno, text
            continue
        record = [item]
        while True:
            nxt = next_line()
            if nxt is not None and len(record) < MAX_RECORD_LINES:
                record.append(nxt)
                joined = "\n".join(t for _, t in record)
                if not _open_quote(joined):
                    yield lineno, joined
                    break
                continue
            end = "the end of the file" if nxt is None else f"{MAX_RECORD_LINES} lines"
            problems.add(lineno, f"CSV syntax error (a quoted field opened here is not closed within {end})", text)
            pushback.extend(reversed(record[1:] + ([nxt] if nxt is not None else [])))
            break


# ---------------------------------------------------------------------------------------- parsers
def _fields(parts: Sequence[str], names: Sequence[str]) -> list[str]:
    values = [p.strip() for p in parts]
    for name, value in zip(names, values, strict=True):
        if not value:
            raise LineError(f"empty {name} field")
    return values


def _splitter(sep: str, label: str) -> Callable[[str], tuple[Fact, ...]]:
    def parse(line: str) -> tuple[Fact, ...]:
        parts = line.split(sep)
        if len(parts) != 3:
            raise LineError(f"expected 3 {label}-separated fields, got {len(parts)}")
        h, r, t = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not (h and r and t):  # the fast path above; _fields names the empty one
            _fields(parts, ("head", "relation", "tail"))
        return ((TRIPLE, h, r, t),)

    return parse


class _CsvParser:
    """One record per line; the first content line is the header."""

    def __init__(self, columns: CsvColumns) -> None:
        self.columns = columns
        self.width = 0
        self.index: tuple[int, int, int] = (0, 0, 0)
        self.type_index: tuple[int | None, int | None] = (None, None)

    def __call__(self, line: str) -> tuple[Fact, ...]:
        try:
            row = next(csv.reader([line], strict=True))
        except csv.Error as exc:
            raise LineError(f"CSV syntax error ({exc})") from None
        if not self.width:
            self._read_header(row)
            return ()
        if len(row) != self.width:
            raise LineError(f"expected {self.width} comma-separated fields (like the header), got {len(row)}")
        h, r, t = _fields([row[i] for i in self.index], ("head", "relation", "tail"))
        facts: list[Fact] = [(TRIPLE, h, r, t)]
        for entity, col in zip((h, t), self.type_index, strict=True):
            kind = row[col].strip() if col is not None else ""
            if kind:
                facts.append((TYPE, entity, kind, ""))
        return tuple(facts)

    def _read_header(self, row: list[str]) -> None:
        header = [c.strip().casefold() for c in row]
        cols = self.columns

        def find(name: str, required: bool) -> int | None:
            hits = [i for i, c in enumerate(header) if c == name.strip().casefold()]
            if len(hits) > 1:
                raise _FatalLineError(f"CSV header has column {name!r} more than once")
            if not hits and required:
                raise _FatalLineError(
                    f"CSV header {row!r} has no column {name!r}; name the columns with csv_columns="
                )
            return hits[0] if hits else None

        found = [find(n, True) for n in (cols.head, cols.relation, cols.tail)]
        self.index = (int(found[0] or 0), int(found[1] or 0), int(found[2] or 0))
        self.type_index = (
            find(cols.head_type or "head_type", cols.head_type is not None),
            find(cols.tail_type or "tail_type", cols.tail_type is not None),
        )
        self.width = len(row)


def _parse_ntriples(line: str) -> tuple[Fact, ...]:
    subject, predicate, obj, lang = parse_ntriples_line(line)
    if predicate == RDF_TYPE:
        return ((TYPE, subject, term_name(obj), ""),)
    if predicate == RDFS_LABEL and obj.startswith('"'):
        return ((LABEL, subject, obj[1:], lang),)
    if subject.startswith('"'):
        raise LineError("a literal cannot be a subject")
    return ((TRIPLE, subject, "<" + predicate, obj),)


def _make_parser(fmt: str, csv_columns: CsvColumns) -> Callable[[str], Sequence[Fact]]:
    if fmt == "pipe":
        return _splitter("|", "'|'")
    if fmt == "tsv":
        return _splitter("\t", "tab")
    if fmt == "csv":
        return _CsvParser(csv_columns)
    return _parse_ntriples


# ---------------------------------------------------------------------------------------- streams
def iter_facts(
    path: Path,
    fmt: str,
    problems: Problems,
    tally: Tally,
    *,
    csv_columns: CsvColumns | Mapping[str, str] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> Iterator[Fact]:
    """Every fact of ``path``; bad lines go to ``problems`` (a fatal one raises KGFormatError)."""
    parse = _make_parser(fmt, CsvColumns.coerce(csv_columns))
    lines = _csv_records if fmt == "csv" else _content_lines
    try:
        size = _regular_size(path)
        with path.open("rb") as fh:
            for lineno, line in lines(fh, tally, problems, on_progress):
                try:
                    facts = parse(line)
                except _FatalLineError as exc:
                    raise KGFormatError(f"{path}:{lineno}: {exc}", [(str(path), lineno, str(exc))]) from None
                except LineError as exc:
                    problems.add(lineno, str(exc), line)
                    continue
                yield from facts
        _check_unchanged(path, size, tally)
    except OSError as exc:
        raise read_error(path, exc) from exc


def _regular_size(path: Path) -> int | None:
    """The size of a regular file (``None`` for a pipe or device, whose size means nothing)."""
    info = path.stat()
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _check_unchanged(path: Path, size: int | None, tally: Tally) -> None:
    """A file that changed size while it was read loaded only in part: say so rather than load it."""
    if size is None:
        return
    now = path.stat().st_size
    if tally.bytes_read != size or now != size:
        raise KGError(f"{path} changed while it was read ({size:,} bytes at the start, {tally.bytes_read:,} read, "
                      f"{now:,} now): it was truncated or is still being written. Load it again once it is "
                      "complete.")


def iter_triples(
    path: str | Path,
    *,
    format: str | None = None,
    skip_bad_lines: bool = False,
    csv_columns: CsvColumns | Mapping[str, str] | None = None,
) -> Iterator[Triple]:
    """Stream the triples of a KG file, as names, without building a store (duplicates included).

    Types and ``rdfs:label`` statements are not triples and are not yielded; N-Triples terms are
    named per term (labels that appear later in the file cannot be applied). In strict mode the
    :class:`KGFormatError` comes after the last good triple and lists the bad lines.
    """
    path = Path(path)
    problems = Problems(str(path))
    fmt = detect_format(path, format)
    name = term_name if fmt == "ntriples" else str
    for kind, a, b, c in iter_facts(path, fmt, problems, Tally(), csv_columns=csv_columns):
        if kind == TRIPLE:
            yield Triple(name(a), name(b), name(c))
    if problems.count and not skip_bad_lines:
        raise problems.error()
    if problems.count:
        logger.warning("%s: skipped %d malformed line(s): %s", path, problems.count, "; ".join(problems.by_reason()))
