"""The WorldCup2014 (WC2014) KBQA questions: loading, gold patterns and a few-shot examples file.

WC2014 (Zhou, Huang, Zhu, COLING 2018) is a small football KG (``WC2014.txt``, every fact stored as
``relation`` and as ``relation_inverse`` turned round) with questions its authors wrote, one file per
kind (:data:`WC_FILES`). Each data line is::

    question <TAB> answer <TAB> path <TAB> answer set (a/b/…/) <TAB> facts [<TAB> topics]

The path is ``h#r#t`` (1-hop) or ``h#r1#m#r2#t`` (2-hop), either possibly ending ``#<end>#t``; a
conjunctive question (``WC-C.txt``) joins two 1-hop paths with ``*`` that end at the same answer, and
its last column names the two topics (``Forward/Tigres_UANL``).

- :func:`load_wc2014` reads one group (distinct question texts, an optional seeded sample);
- :func:`gold_triples` writes a question's path as the pattern SimGRAG should produce: topics by name,
  the other nodes ``UNKNOWN <kind> <n>``, every ``*_inverse`` relation turned round to its base;
- :func:`qa_items` turns questions into :class:`~simgrag.eval.runner.QAItem` for the QA runner;
- :func:`write_examples` writes a few-shot examples file (the format of
  :func:`~simgrag.pattern.examples.load_examples`) from questions outside an evaluation sample.

The files are read from a folder given by the caller; nothing of the dataset is shipped.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import yaml

from simgrag.bootstrap.files import yaml_item
from simgrag.errors import ConfigError, DatasetError
from simgrag.fileio import write_bytes_atomic

if TYPE_CHECKING:
    from simgrag.eval.runner import QAItem

__all__ = [
    "RELATION_KINDS",
    "WC_FILES",
    "WCQuestion",
    "gold_triples",
    "load_wc2014",
    "qa_items",
    "relation_chain",
    "write_examples",
]

#: question group → its file in the WC2014 folder
WC_FILES: dict[str, str] = {"1-hop": "WC-P1.txt", "2-hop": "WC-P2.txt", "conj": "WC-C.txt"}

#: base relation → (kind of its head, kind of its tail), for the ``UNKNOWN <kind> <n>`` nodes
RELATION_KINDS: dict[str, tuple[str, str]] = {
    "plays_in_club": ("player", "club"),
    "plays_for_country": ("player", "country"),
    "plays_position": ("player", "position"),
    "is_aged": ("player", "age"),
    "wears_number": ("player", "number"),
    "is_in_country": ("club", "country"),
}

INVERSE_SUFFIX = "_inverse"
_END = "<end>"
#: group → (paths joined by ``*``, hops per path)
_SHAPES: dict[str, tuple[int, int]] = {"1-hop": (1, 1), "2-hop": (1, 2), "conj": (2, 1)}
_INSTRUCTIONS = ("Players are linked to their club, national team (country), position, age and shirt number; "
                 "clubs to the country they are in. Write every triple player first (or club first for "
                 "is_in_country) and keep entity names exactly as the question spells them, underscores included.")

Triple = tuple[str, str, str]
_Node = tuple[str, str]  # ("topic", name) | ("mid", "<path>.<i>") | ("answer", "")
_N = TypeVar("_N")


@dataclass(frozen=True)
class WCQuestion:
    """One WC2014 question: gold ``answers`` (the answer set and the answer column), its ``group``
    (a key of :data:`WC_FILES`), the raw ``path``, the named ``topics`` and its 1-based file ``line``."""

    question: str
    answers: tuple[str, ...]
    group: str
    path: str
    topics: tuple[str, ...]
    line: int


def _path_parts(path: str) -> list[list[str]]:
    """``h#r#t[#<end>#t]*…`` → one ``[node, relation, node, …]`` list per ``*``-joined part;
    raises :class:`ValueError` naming what is wrong."""
    parts: list[list[str]] = []
    for part in path.split("*"):
        items = part.split("#")
        if len(items) >= 5 and items[-2] == _END:
            if items[-1] != items[-3]:
                raise ValueError(f"the path ends at {items[-3]!r} but marks {items[-1]!r} as its end")
            items = items[:-2]
        if len(items) < 3 or len(items) % 2 == 0 or not all(item.strip() for item in items):
            raise ValueError(f"bad path part {part!r}: expected node#relation#node[#relation#node…]")
        parts.append(items)
    return parts


def _check_shape(group: str, parts: list[list[str]]) -> None:
    n_parts, hops = _SHAPES[group]
    if len(parts) != n_parts or any(len(p) != 2 * hops + 1 for p in parts):
        raise ValueError(f"a {group} question needs {n_parts} path(s) of {hops} hop(s), got "
                         f"{'*'.join('#'.join(p) for p in parts)!r}")
    ends = {p[-1] for p in parts}
    if len(ends) != 1:
        raise ValueError(f"the paths end at different nodes {sorted(ends)}")


def _parse_line(line: str, group: str) -> tuple[str, tuple[str, ...], str, tuple[str, ...]]:
    """(question, answers, path, topics) of one data line; :class:`ValueError` when malformed."""
    cols = line.rstrip("\r\n").split("\t")
    need = 6 if group == "conj" else 5
    if len(cols) < need:
        raise ValueError(f"expected {need} tab-separated columns (question, answer, path, answer set, facts"
                         f"{', topics' if group == 'conj' else ''}), got {len(cols)}")
    question, answer, path = cols[0].strip(), cols[1].strip(), cols[2].strip()
    if not question or not answer:
        raise ValueError("empty question or answer")
    parts = _path_parts(path)
    _check_shape(group, parts)
    if parts[0][-1] != answer:
        raise ValueError(f"the answer {answer!r} is not the path's end {parts[0][-1]!r}")
    answers = tuple(dict.fromkeys([answer, *(a.strip() for a in cols[3].split("/") if a.strip())]))
    if group == "conj":
        topics = tuple(t.strip() for t in cols[-1].split("/") if t.strip())
        if topics != tuple(p[0] for p in parts):
            raise ValueError(f"the topics {list(topics)} are not the paths' starts {[p[0] for p in parts]}")
    else:
        topics = (parts[0][0],)
    return question, answers, path, topics


def _read_group(wc_dir: str | Path, group: str) -> list[WCQuestion]:
    """Every question of ``group`` in file order, the first of each question text only."""
    if group not in WC_FILES:
        raise ConfigError(f"unknown WC2014 group {group!r}; choose from {', '.join(WC_FILES)}")
    path = Path(wc_dir) / WC_FILES[group]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc} (give the WorldCup2014 folder holding "
                           f"{', '.join(WC_FILES.values())})") from exc
    questions: dict[str, WCQuestion] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            question, answers, raw_path, topics = _parse_line(line, group)
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: {exc}") from exc
        questions.setdefault(question, WCQuestion(question, answers, group, raw_path, topics, n))
    if not questions:
        raise DatasetError(f"{path}: no questions")
    return list(questions.values())


def load_wc2014(wc_dir: str | Path, group: str, *, sample: int | None = None, seed: int = 0) -> list[WCQuestion]:
    """The distinct questions of ``group`` (a key of :data:`WC_FILES`) in file order; with ``sample``,
    ``sample`` of them drawn with ``random.Random(seed)`` (``None`` or 0: all)."""
    questions = _read_group(wc_dir, group)
    if sample is not None and sample < 0:
        raise ConfigError(f"the sample size must be 0 (all) or more, got {sample}")
    if not sample or sample >= len(questions):
        return questions
    picked = random.Random(seed).sample(range(len(questions)), sample)
    return [questions[i] for i in sorted(picked)]


def _turned(head: _N, relation: str, tail: _N) -> tuple[_N, str, _N]:
    """``(Forward, plays_position_inverse, X)`` → ``(X, plays_position, Forward)``; others unchanged."""
    if relation.endswith(INVERSE_SUFFIX):
        return tail, relation[: -len(INVERSE_SUFFIX)], head
    return head, relation, tail


class _Labels:
    """Node texts: a topic by name, the others ``UNKNOWN <kind> <n>`` numbered per kind in order of
    appearance, the kind from the first relation end the node is met at (:data:`RELATION_KINDS`)."""

    def __init__(self) -> None:
        self.labels: dict[_Node, str] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def text(self, node: _Node, relation: str, role: int) -> str:
        if node[0] == "topic":
            return node[1]
        if node not in self.labels:
            kind = RELATION_KINDS.get(relation, ("entity", "entity"))[role]
            self.counts[kind] += 1
            self.labels[node] = f"UNKNOWN {kind} {self.counts[kind]}"
        return self.labels[node]


def _nodes(part: int, names: Sequence[str]) -> list[_Node]:
    """One path's nodes: its start (a topic) by name, a middle node per path, the end shared by all paths."""
    return [("topic", names[0]), *(("mid", f"{part}.{i}") for i in range(1, len(names) - 1)), ("answer", "")]


def gold_triples(q: WCQuestion) -> list[Triple]:
    """The question's gold pattern from its path: topics by name, every other node ``UNKNOWN <kind> <n>``
    (:data:`RELATION_KINDS`), ``*_inverse`` relations turned round to their base relation."""
    try:
        parts = _path_parts(q.path)
    except ValueError as exc:
        raise DatasetError(f"line {q.line}: {exc}") from exc
    labels = _Labels()
    triples: list[Triple] = []
    for p, items in enumerate(parts):
        nodes = _nodes(p, items[0::2])
        for i, relation in enumerate(items[1::2]):
            head, base, tail = _turned(nodes[i], relation, nodes[i + 1])
            triples.append((labels.text(head, base, 0), base, labels.text(tail, base, 1)))
    return triples


def relation_chain(q: WCQuestion) -> tuple[str, ...]:
    """The question's relations as its path has them (``*_inverse`` kept), e.g. ``("plays_in_club",
    "is_in_country")``."""
    return tuple(r for part in _path_parts(q.path) for r in part[1::2])


def qa_items(questions: Iterable[WCQuestion]) -> list[QAItem]:
    """Questions for :func:`~simgrag.eval.runner.run_qa_bench` (``topic``: the first topic)."""
    from simgrag.eval.runner import QAItem

    return [QAItem(q.question, q.answers, q.group, topic=q.topics[0]) for q in questions]


def _pick_examples(questions: Sequence[WCQuestion], n: int, rng: random.Random,
                   covered: set[str]) -> list[WCQuestion]:
    """``n`` questions, one per relation chain while chains last (then again), each time the chain with
    the most relations not yet ``covered`` (ties in a seeded order); ``covered`` grows."""
    by_chain: dict[tuple[str, ...], list[WCQuestion]] = defaultdict(list)
    for q in questions:
        by_chain[relation_chain(q)].append(q)
    order = sorted(by_chain)
    rng.shuffle(order)
    picked: list[WCQuestion] = []
    unused = list(order)
    while len(picked) < min(n, len(questions)):
        unused = [c for c in unused if by_chain[c]] or [c for c in order if by_chain[c]]
        chain = max(unused, key=lambda c: len(set(c) - covered))  # max keeps the first of a tie
        unused.remove(chain)
        pool = by_chain[chain]
        picked.append(pool.pop(rng.randrange(len(pool))))
        covered.update(chain)
    return picked


def _interleave(groups: Sequence[list[WCQuestion]]) -> list[WCQuestion]:
    """One of each group in turn, so the first (static) shots mix the groups."""
    longest = max((len(g) for g in groups), default=0)
    return [g[i] for i in range(longest) for g in groups if i < len(g)]


def _examples_text(picked: Sequence[WCQuestion], seed: int) -> str:
    header = (f"# Few-shot examples for WorldCup2014 (written by `simgrag bench wc2014-examples`, seed {seed}).\n"
              "# Questions from WC-P1/WC-P2/WC-C outside the evaluation sample, one per relation chain where\n"
              "# possible; the KG also stores every relation turned round as <relation>_inverse.\n")
    parts = [header, "name: wc2014\n", "relations:\n", *(yaml_item(r) for r in RELATION_KINDS),
             yaml.safe_dump({"instructions": _INSTRUCTIONS}, allow_unicode=True, width=10_000), "examples:\n"]
    for q in picked:
        parts.append(f"  # {q.group}, {WC_FILES[q.group]}:{q.line}\n")
        parts.append(yaml_item({"question": q.question, "triples": [list(t) for t in gold_triples(q)]}))
    return "".join(parts)


def write_examples(wc_dir: str | Path, out_path: str | Path, *, n_per_group: int = 4, seed: int = 0,
                   exclude: Collection[str] = ()) -> Path:
    """Write a few-shot examples file: ``n_per_group`` questions of each group whose text is not in
    ``exclude`` (an evaluation sample), one per relation chain where possible, gold patterns as triples.

    The groups with the fewest chains choose first, so the 1-hop examples favour relations the others
    did not show. Relations are listed without their ``_inverse`` twins. Returns the path written."""
    if n_per_group < 1:
        raise ConfigError(f"n_per_group must be at least 1, got {n_per_group}")
    rng = random.Random(seed)
    pools = {g: [q for q in load_wc2014(wc_dir, g) if q.question not in exclude] for g in WC_FILES}
    empty = [g for g, pool in pools.items() if not pool]
    if empty:
        raise DatasetError(f"no {', '.join(empty)} question is left outside the evaluation sample for examples")
    covered: set[str] = set()
    chosen: dict[str, list[WCQuestion]] = {}
    for group in sorted(pools, key=lambda g: len({relation_chain(q) for q in pools[g]})):
        chosen[group] = _pick_examples(pools[group], n_per_group, rng, covered)
    out = Path(out_path)
    write_bytes_atomic(out, _examples_text(_interleave([chosen[g] for g in WC_FILES]), seed).encode("utf-8"))
    return out
