"""Seeded input generators for fuzzing simgrag's input paths, shared by the test suite and
``benchmarks/fuzz.py``.

Each generator takes a :class:`random.Random` and returns one hostile input built by mutating valid
ones (truncation, deletion, insertion of brackets, quotes, escapes, lone surrogates, NUL and other
control bytes, non-ASCII letters, nesting bombs, huge values …):

- :func:`llm_output` — text an LLM might write for a pattern prompt;
- :func:`pattern_value` — a Python value passed as a pattern (``SimGRAG.retrieve``, ``/v1/retrieve``);
- :func:`kg_file` — the bytes of a KG file in one of the reader formats;
- :func:`http_body` — a request body (bytes) for one of the HTTP endpoints.

:func:`check` runs a callable on an input and classifies the outcome: ``ok``, a typed error (the
:class:`~simgrag.errors.SimGRAGError` subclass name) or ``untyped`` — the only outcome that is a bug.
The ``fuzz_*`` runners drive each input path (parser, pattern validation, KG readers, HTTP API)
``n`` times from a seed and return a :class:`FuzzTally`.
"""

from __future__ import annotations

import json
import random
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import SimGRAGError

__all__ = [
    "FuzzTally",
    "check",
    "fuzz_http",
    "fuzz_kg_files",
    "fuzz_parser",
    "fuzz_patterns",
    "http_body",
    "kg_file",
    "llm_output",
    "mutate",
    "pattern_value",
]

_VALID_OUTPUTS = (
    '{"triples": [["Inception", "directed by", "UNKNOWN director 1"]]}',
    '{"triples": [["UNKNOWN movie 1", "starred actors", "Tom Hanks"], ["UNKNOWN movie 1", "directed by", '
    '"UNKNOWN director 1"]]}',
    '```json\n{"triples": [["Heat", "starred_actors", "UNKNOWN actor 1"]]}\n```',
    "Here is the pattern: {'triples': [('Titanic', 'release year', 'UNKNOWN year 1')]}",
    '[["Avatar", "directed by", "James Cameron"]]',
    '{"divided": ["who directed Juno"], "triples": [["Juno", "directed by", "UNKNOWN director 1"],]}',
    '{"triples": [["Amélie", "in language", "UNKNOWN language 1"], ["Amélie", "has genre", "Comédie"]]}',
    '{"pattern": [["Le Fabuleux Destin", "written_by", "UNKNOWN writer 1"]], "note": None}',
    '["Memento", "directed by", "Christopher Nolan"]',
    '{"triples": [["william  talbot", "children", "william talbot"]]}',
)
_SNIPPETS = (
    "[", "]", "{", "}", "(", ")", '"', "'", ",", ":", "\\", "\\u", "\\ud800", "\\udfff", "\\n", "\\\\", "```",
    "```json\n", "True", "None", "null", "UNKNOWN", "unknown 1", "triples", '"triples":', "\ud800", "\udc00x",
    "\x00", "\x1b[31m", "\u202e", "\ufeff", "é", "ß", "中文", "🎬", "Ω", "\t", "\n", "\r\n", " " * 40, "-1e999",
    "NaN", "Infinity", "1e400", "0x1F", "[" * 50, "{" * 30, '"a":' * 10,
)
_NAME_CHARS = "abcdefghij KLMNOP_-'\".|,\t#<>é中🎬\\"


def mutate(rng: random.Random, text: str, rounds: int | None = None) -> str:
    """``text`` after 1-6 random edits: cut, delete, insert a snippet, duplicate, swap quotes, truncate."""
    for _ in range(rounds if rounds is not None else rng.randint(1, 6)):
        n = len(text)
        op = rng.randrange(7)
        i = rng.randrange(n + 1)
        j = min(n, i + rng.randint(0, 12))
        if op == 0:
            text = text[:i]
        elif op == 1:
            text = text[:i] + text[j:]
        elif op in (2, 3):
            text = text[:i] + rng.choice(_SNIPPETS) + text[i:]
        elif op == 4:
            text = text[:i] + text[i:j] * rng.randint(2, 4) + text[j:]
        elif op == 5:
            text = text.replace(*rng.choice([('"', "'"), ("'", '"'), ("[", "("), ("]", ")"), (",", "")]), 1)
        else:
            text = text[:i] + chr(rng.randrange(0x20, 0x3000)) + text[j:]
    return text


def llm_output(rng: random.Random) -> str:
    """A mutated pattern answer; sometimes a bracket bomb or very long."""
    roll = rng.random()
    if roll < 0.02:
        return "[" * rng.randint(500, 5000) + '"x"' + "]" * rng.randint(0, 10)
    if roll < 0.03:
        return '{"triples": [' + ", ".join(['["a", "r", "b"]'] * rng.randint(100, 3000)) + "]}"
    return mutate(rng, rng.choice(_VALID_OUTPUTS))


def _weird_string(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.1:
        return ""
    if roll < 0.15:
        return "x" * rng.choice([301, 1001, 100_000])
    if roll < 0.2:
        return "\ud800" + "x"
    if roll < 0.25:
        return "UNKNOWN " + rng.choice(["thing", "", "movie"]) + " " + str(rng.randint(0, 9))
    if roll < 0.3:
        return rng.choice([1, 2.5, None, True, [], {}, float("nan"), ["a"]])
    return "".join(rng.choice(_NAME_CHARS) for _ in range(rng.randint(1, 12)))


def pattern_value(rng: random.Random) -> Any:
    """A value given as a pattern: mostly lists of triples of odd strings, sometimes not a list at all."""
    roll = rng.random()
    if roll < 0.05:
        return rng.choice([None, "", "[[a, r, b]]", 42, {"pattern": []}, [], [[]], b"x", [["a", "r"]]])
    if roll < 0.08:
        return [["UNKNOWN a 1", "r", "UNKNOWN b 2"]] * rng.randint(13, 40)
    if roll < 0.2:  # a chain of unknowns: nothing anchors it
        n = rng.randint(1, 6)
        return [[f"UNKNOWN {i}", "UNKNOWN r", f"UNKNOWN {i + 1}"] for i in range(n)]
    triples = []
    for _ in range(rng.randint(1, 5)):
        triple = [_weird_string(rng) for _ in range(3 if rng.random() < 0.9 else rng.randint(0, 5))]
        triples.append(triple if rng.random() < 0.95 else tuple(triple))
    return triples


_KG_VALID = {
    "pipe": "Inception|directed_by|Christopher Nolan\nHeat|starred_actors|Al Pacino\n# comment\n\n"
            "Juno|in_language|English\n",
    "tsv": "Inception\tdirected_by\tChristopher Nolan\nHeat\tstarred_actors\tAl Pacino\n",
    "csv": 'head,relation,tail,head_type\nInception,directed_by,"Nolan, Christopher",film\n'
           '"Heat ""95""",starred_actors,"Al\nPacino",film\n',
    "ntriples": '<http://x/Inception> <http://x/directedBy> <http://x/Nolan> .\n'
                '<http://x/Inception> <http://www.w3.org/2000/01/rdf-schema#label> "Inception"@en .\n'
                '_:b1 <http://x/p> "lit\\"eral"^^<http://x/t> .\n',
}
_KG_SNIPPETS = ("|", "\t", ",", '"', "\n", "\r\n", "#", "\x00", "\xff", "\ufeff", "<", ">", " .", "@en", "^^",
                "\\u00", "_:", "é", "\ud800")


def kg_file(rng: random.Random, fmt: str) -> bytes:
    """The bytes of a mutated KG file in ``fmt`` (pipe, tsv, csv, ntriples)."""
    text = _KG_VALID[fmt]
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(4)
        if op == 0:
            text = text[:i] + rng.choice(_KG_SNIPPETS) + text[i:]
        elif op == 1:
            text = text[:i] + text[i + rng.randint(1, 10):]
        elif op == 2:
            text = text[:i] + text[i:]  # keep: the truncation below handles cutting
        else:
            text = text + rng.choice(list(_KG_VALID.values()))
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.2:
        data = data[: rng.randrange(len(data) + 1)]
    if rng.random() < 0.1:
        pos = rng.randrange(len(data) + 1)
        data = data[:pos] + bytes([rng.randrange(256)]) + data[pos:]
    return data


_BODIES: dict[str, tuple[dict[str, Any], ...]] = {
    "/v1/retrieve": ({"pattern": [["Titanic", "directed by", "UNKNOWN director 1"]], "k": 2},
                     {"pattern": [["Inception", "starred actors", "UNKNOWN actor 1"]], "k_n": 8, "k_r": 4}),
    "/v1/ask": ({"question": "who directed Titanic?", "k": 2},),
    "/v1/verify": ({"claim": "Titanic was directed by James Cameron.", "k": 1},),
}
_ODD_VALUES: tuple[Any, ...] = (None, True, 0, -1, 1e11, 2.5, float("nan"), float("inf"), "", "\ud800x",
                                "x" * 5000, [], {}, [[]], "UNKNOWN x 1", 10**30)


def http_body(rng: random.Random) -> tuple[str, bytes]:
    """(endpoint path, request body bytes): a valid body with odd values, or broken JSON."""
    path = rng.choice(sorted(_BODIES))
    body: dict[str, Any] = json.loads(json.dumps(rng.choice(_BODIES[path])))
    for _ in range(rng.randint(1, 3)):
        key = rng.choice([*body, "extra", "k", "retriever"])
        if rng.random() < 0.7:
            body[key] = rng.choice(_ODD_VALUES) if rng.random() < 0.6 else pattern_value(rng)
        else:
            body.pop(key, None)
    text = json.dumps(body, allow_nan=True, ensure_ascii=rng.random() < 0.5, default=repr)
    if rng.random() < 0.3:
        text = mutate(rng, text, rounds=rng.randint(1, 3))
    return path, text.encode("utf-8", "surrogatepass")


@dataclass
class FuzzTally:
    """Outcomes by kind; ``untyped`` holds (input, traceback) of the first failures."""

    outcomes: Counter[str] = field(default_factory=Counter)
    untyped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    @property
    def untyped_count(self) -> int:
        return self.outcomes["untyped"]

    def as_dict(self) -> dict[str, Any]:
        return {"cases": self.total, "outcomes": dict(self.outcomes.most_common()),
                "untyped": self.untyped_count, "untyped_examples": self.untyped[:5]}


def check(tally: FuzzTally, fn: Callable[[Any], object], value: Any, *,
          allowed: Sequence[type[Exception]] = ()) -> None:
    """Run ``fn(value)``; count ``ok``, the typed error's class name, or ``untyped`` (a bug)."""
    try:
        fn(value)
    except SimGRAGError as exc:
        tally.outcomes[type(exc).__name__] += 1
    except tuple(allowed) as exc:
        tally.outcomes[type(exc).__name__] += 1
    except Exception:
        tally.outcomes["untyped"] += 1
        if len(tally.untyped) < 20:
            tally.untyped.append((repr(value)[:300], traceback.format_exc(limit=6)))
    else:
        tally.outcomes["ok"] += 1


# ---------------------------------------------------------------------------------------- runners
def fuzz_parser(n: int, seed: int = 0) -> FuzzTally:
    """``n`` mutated LLM outputs through :func:`parse_pattern_text`, the copies merge and
    :func:`validate_triples` (the pattern generator's path)."""
    from simgrag.pattern.copies import merge_unknown_copies
    from simgrag.pattern.parse import parse_pattern_text
    from simgrag.pattern.validate import validate_triples

    def run(text: str) -> None:
        validate_triples(merge_unknown_copies(parse_pattern_text(text).triples)[0])

    rng, tally = random.Random(seed), FuzzTally()
    for _ in range(n):
        check(tally, run, llm_output(rng))
    return tally


def fuzz_patterns(n: int, seed: int = 0) -> FuzzTally:
    """``n`` odd values through :func:`validate_triples` (what ``SimGRAG.retrieve`` first does with them)."""
    from simgrag.pattern.copies import merge_unknown_copies
    from simgrag.pattern.graph import Pattern
    from simgrag.pattern.validate import validate_pattern, validate_triples

    def run(value: Any) -> None:
        if isinstance(value, list):
            merge_unknown_copies(value)
        validate_triples(value)
        validate_pattern(Pattern.from_triples(value))

    rng, tally = random.Random(seed), FuzzTally()
    for _ in range(n):
        check(tally, run, pattern_value(rng))
    return tally


def fuzz_kg_files(n: int, workdir: Path, seed: int = 0) -> tuple[FuzzTally, int]:
    """``n`` mutated KG files through :func:`~simgrag.kg.loader.load_kg` (strict and skipping);
    returns the tally and the number of lines read. A loaded store must be consistent with its report."""
    from simgrag.kg.loader import load_kg

    rng, tally = random.Random(seed), FuzzTally()
    formats = ("pipe", "tsv", "csv", "ntriples")
    lines = 0

    def run(case: tuple[Path, str, bool]) -> None:
        nonlocal lines
        path, fmt, skip = case
        store, report = load_kg(path, format=fmt, skip_bad_lines=skip)
        lines += report.lines_read
        if store.num_triples != report.triples_read - report.duplicates_removed or store.num_triples <= 0:
            raise AssertionError(f"store and report disagree: {store.num_triples} vs {report}")
        if len(list(store.entities)) != store.num_entities:
            raise AssertionError("entity names do not decode")

    for i in range(n):
        fmt = formats[i % len(formats)]
        path = workdir / f"fuzz-{i % 8}.kg"
        path.write_bytes(kg_file(rng, fmt))
        check(tally, run, (path, fmt, rng.random() < 0.5))
    return tally, lines


def fuzz_http(client: Any, n: int, seed: int = 0) -> FuzzTally:
    """``n`` hostile bodies POSTed through ``client`` (a ``TestClient`` or ``httpx.Client``): every answer
    must be 200 or a 4xx/503/504 with the ``{"error", "detail"}`` JSON body. A 500, a non-JSON body or a
    client-side exception counts as ``untyped``."""
    rng, tally = random.Random(seed), FuzzTally()
    for _ in range(n):
        path, body = http_body(rng)
        try:
            response = client.post(path, content=body, headers={"Content-Type": "application/json"})
            status, payload = response.status_code, response.json()
            if status != 200 and ((status >= 500 and status not in (503, 504)) or set(payload) != {"error", "detail"}):
                raise AssertionError(f"HTTP {status}: {response.text[:300]}")
        except Exception:
            tally.outcomes["untyped"] += 1
            if len(tally.untyped) < 20:
                tally.untyped.append((repr((path, body))[:300], traceback.format_exc(limit=6)))
            continue
        tally.outcomes["http_200" if status == 200 else f"http_{status}_{payload['error']}"] += 1
    return tally
