"""The ontology of the synthetic KG: classes in a shallow hierarchy, typed relations, word lists.

Everything is read from ``simgrag/data/synthetic_dbpedia/`` (``types.txt``, ``relations.txt``,
``words.txt``, ``schemes.json``; their headers describe the formats). :func:`load_schema` cuts the
ontology to the requested numbers of types and relations:

- classes are kept in breadth-first order (top-level classes first), so any count gives a tree
  spread over every top-level class;
- a relation whose domain or range class was cut moves to the nearest kept ancestor, or is dropped
  when there is none; fewer relations keep each domain's most popular ones first (round robin over
  domains, top-level ones first, so every class keeps a relation); more are filled up with
  *variants* of the kept base relations (``team`` → ``formerTeam``, ``notableTeam``, …), the long
  tail DBpedia has too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from simgrag.errors import ConfigError

__all__ = ["LITERAL_KINDS", "ClassSpec", "RelationSpec", "Schema", "class_label", "load_schema", "load_words"]

LITERAL_KINDS = ("date", "year", "count", "number", "decimal")
_DATA = "synthetic_dbpedia"
_WORD_OK = re.compile(r"^[\w .'&-]+$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# relation variants: name prefix and the adverb used in question phrases
_VARIANTS = (("former", "formerly"), ("notable", "notably"), ("associated", "associated with,"),
             ("previous", "previously"), ("current", "currently"), ("other", "also"), ("main", "mainly"),
             ("honorary", "honorary"), ("secondary", "secondarily"), ("early", "early on"))


@dataclass(frozen=True)
class ClassSpec:
    """One class: its parent (index into :attr:`Schema.classes`, -1 for a top-level class)."""

    name: str
    parent: int
    depth: int
    scheme: str
    words: tuple[str, ...]
    share: float
    cap: int | None


@dataclass(frozen=True)
class RelationSpec:
    """A relation with its domain class and either a range class or a literal kind."""

    name: str
    domain: int
    range: int  # class index, or -1 for a literal
    literal: str | None = None  # one of LITERAL_KINDS
    bounds: tuple[float, float] | None = None  # uniform bounds of a literal
    phrases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schema:
    """Classes in pre-order (parents before children, subtrees contiguous) and relations."""

    classes: tuple[ClassSpec, ...]
    relations: tuple[RelationSpec, ...]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def ancestors(self, c: int) -> list[int]:
        """``c`` and its ancestors, most specific first."""
        out = []
        while c >= 0:
            out.append(c)
            c = self.classes[c].parent
        return out

    def is_a(self, c: int, ancestor: int) -> bool:
        return ancestor in self.ancestors(c)


def class_label(name: str) -> str:
    """``SoccerPlayer`` → ``soccer player`` (the text shown for a type)."""
    return _CAMEL.sub(" ", name).lower()


def _data_text(name: str) -> str:
    return resources.files("simgrag").joinpath("data").joinpath(_DATA).joinpath(name).read_text(encoding="utf-8")


def _content_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@cache
def load_words() -> dict[str, tuple[str, ...]]:
    """The word lists of ``words.txt``, deduplicated, in file order."""
    lists: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _content_lines(_data_text("words.txt")):
        if line.startswith("["):
            current = lists.setdefault(line.strip("[] "), [])
            continue
        if current is None:
            raise ConfigError("words.txt: entries before the first [section]")
        current.extend(w.strip() for w in line.split(",") if w.strip())
    bad = [w for ws in lists.values() for w in ws if not _WORD_OK.match(w) or "_" in w]
    if bad:
        raise ConfigError(f"words.txt: entries with characters names cannot hold: {bad[:5]}")
    return {k: tuple(dict.fromkeys(v)) for k, v in lists.items()}


@cache
def load_schemes() -> tuple[dict[str, str], dict[str, dict]]:
    """``(macros, schemes)`` of ``schemes.json``."""
    raw = json.loads(_data_text("schemes.json"))
    return dict(raw["macros"]), dict(raw["schemes"])


def _parse_class_line(line: str) -> tuple[int, str, str | None, tuple[str, ...], float, int | None]:
    depth = (len(line) - len(line.lstrip(" "))) // 2
    head, _, words = line.strip().partition("|")
    tokens = head.split()
    name, scheme, share, cap = tokens[0], None, 1.0, None
    for tok in tokens[1:]:
        if tok.startswith("%"):
            share = float(tok[1:])
        elif tok.startswith("~"):
            cap = int(tok[1:])
        else:
            scheme = tok
    return depth, name, scheme, tuple(w.strip() for w in words.split(",") if w.strip()), share, cap


@cache
def _all_classes() -> tuple[ClassSpec, ...]:
    schemes = load_schemes()[1]
    out: list[ClassSpec] = []
    stack: list[int] = []
    for line in _content_lines(_data_text("types.txt")):
        depth, name, scheme, words, share, cap = _parse_class_line(line)
        del stack[depth:]
        parent = stack[-1] if stack else -1
        if scheme is None:
            if parent < 0:
                raise ConfigError(f"types.txt: top-level class {name} needs a scheme")
            scheme = out[parent].scheme
        if scheme not in schemes:
            raise ConfigError(f"types.txt: class {name} has unknown scheme {scheme!r}")
        out.append(ClassSpec(name, parent, depth, scheme, words, share, cap))
        stack.append(len(out) - 1)
    return tuple(out)


def _select_classes(n_types: int) -> tuple[tuple[ClassSpec, ...], dict[str, int]]:
    """The first ``n_types`` classes breadth-first, re-indexed in pre-order."""
    every = _all_classes()
    if not 1 <= n_types <= len(every):
        raise ConfigError(f"types must be between 1 and {len(every)} (the classes in types.txt); got {n_types}")
    keep = set(sorted(range(len(every)), key=lambda i: (every[i].depth, i))[:n_types])
    index = {old: new for new, old in enumerate(sorted(keep))}
    kept = tuple(
        ClassSpec(c.name, index[c.parent] if c.parent >= 0 else -1, c.depth, c.scheme, c.words, c.share, c.cap)
        for i, c in enumerate(every) if i in index
    )
    return kept, {c.name: i for i, c in enumerate(kept)}


def _nearest_kept(name: str, by_name: dict[str, int]) -> int:
    every = _all_classes()
    full = {c.name: i for i, c in enumerate(every)}
    if name not in full:
        raise ConfigError(f"relations.txt: unknown class {name!r}")
    i = full[name]
    while i >= 0 and every[i].name not in by_name:
        i = every[i].parent
    return by_name[every[i].name] if i >= 0 else -1


def _parse_range(spec: str) -> tuple[str, tuple[float, float] | None]:
    kind, *bounds = spec[1:].split(":")
    if kind not in LITERAL_KINDS:
        raise ConfigError(f"relations.txt: unknown literal kind @{kind}; use one of {LITERAL_KINDS}")
    return kind, (float(bounds[0]), float(bounds[1])) if bounds else None


def _base_relations(by_name: dict[str, int]) -> list[RelationSpec]:
    out = []
    for line in _content_lines(_data_text("relations.txt")):
        head, _, phrases = line.partition("|")
        name, domain_name, range_name = head.split()
        domain = _nearest_kept(domain_name, by_name)
        literal, bounds, rng = None, None, -1
        if range_name.startswith("@"):
            literal, bounds = _parse_range(range_name)
        else:
            rng = _nearest_kept(range_name, by_name)
        if domain < 0 or (literal is None and rng < 0):
            continue
        out.append(RelationSpec(name, domain, rng, literal, bounds,
                                tuple(p.strip() for p in phrases.split(";") if p.strip())))
    return out


def _variants(base: list[RelationSpec], wanted: int) -> list[RelationSpec]:
    taken = {r.name for r in base}
    out: list[RelationSpec] = []
    for prefix, adverb in _VARIANTS:
        for rel in base:
            if len(out) >= wanted:
                return out
            name = prefix + rel.name[0].upper() + rel.name[1:]
            if rel.literal is not None or name in taken:
                continue
            taken.add(name)
            out.append(RelationSpec(name, rel.domain, rel.range, None, None,
                                    tuple(f"{adverb} {p}" for p in rel.phrases)))
    return out


@cache
def load_schema(n_types: int = 467, n_relations: int = 522) -> Schema:
    """The ontology cut to ``n_types`` classes and ``n_relations`` relations (see module docstring)."""
    classes, by_name = _select_classes(n_types)
    if n_relations < 1:
        raise ConfigError(f"relations must be positive; got {n_relations}")
    base = _base_relations(by_name)
    rank: dict[int, int] = {}
    keys = []
    for i, rel in enumerate(base):  # round robin over domains, shallow ones first: any prefix covers every class
        rank[rel.domain] = rank.get(rel.domain, -1) + 1
        keys.append((rank[rel.domain], classes[rel.domain].depth, i))
    base = [base[i] for *_, i in sorted(keys)]
    relations = base[:n_relations] + _variants(base, n_relations - len(base))
    if len(relations) < n_relations:
        raise ConfigError(f"With {n_types} types at most {len(relations)} relations can be made; "
                          f"asked for {n_relations}. Ask for more types or fewer relations.")
    return Schema(classes, tuple(relations))
