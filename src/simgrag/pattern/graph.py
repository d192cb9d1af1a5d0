"""Pattern graphs: the small graphs of triples an LLM writes for a question (SimGRAG §4.1, §4.3).

A node or relation is *unknown* when its text starts with the keyword ``UNKNOWN`` in capitals (e.g.
``UNKNOWN director 1``), or with ``unknown`` in any case *and* ends with an id (``unknown director 1``),
so that an entity really named "Unknown" (a film) stays a known node. The words between the keyword
and the trailing id are its type hint (``director``). Distinct texts are distinct nodes. Two triples
between the same pair of nodes are two edges: both must be matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from simgrag.errors import PatternError

__all__ = ["MAX_TEXT_CHARS", "Pattern", "PatternEdge", "PatternNode", "is_unknown", "normalize_text", "singular",
           "type_hint"]

_UNKNOWN = re.compile(r"^\s*unknown\b", re.IGNORECASE)
_UNKNOWN_CAPS = re.compile(r"^\s*UNKNOWN\b")
_TRAILING_ID = re.compile(r"\s*[#_-]?\d+\s*$")
_SPACES = re.compile(r"\s+")
#: longest node or relation text accepted (entity names are short; the regexes and the embedder need a bound)
MAX_TEXT_CHARS = 1000


def is_unknown(text: str) -> bool:
    """True when ``text`` is an ``UNKNOWN …`` placeholder (see the module docstring)."""
    return bool(_UNKNOWN_CAPS.match(text)) or bool(_UNKNOWN.match(text) and _TRAILING_ID.search(text))


def type_hint(text: str) -> str | None:
    """``"UNKNOWN director 1"`` → ``"director"``; ``None`` for known texts or bare placeholders."""
    if not is_unknown(text):
        return None
    rest = _UNKNOWN.sub("", text, count=1)
    rest = _TRAILING_ID.sub("", rest).strip()
    return rest or None


def singular(word: str) -> str:
    """A plural type word made singular ("countries" → "country", "tags" → "tag"; "class" stays)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def normalize_text(text: str) -> str:
    """``text`` with each run of whitespace made one space, stripped: how pattern texts are compared."""
    return _SPACES.sub(" ", text).strip()


def _clean(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise PatternError(f"{where}: expected a string, got {type(text).__name__} {text!r:.200}")
    if len(text) > MAX_TEXT_CHARS:
        raise PatternError(f"{where}: a text of {len(text):,} characters, more than {MAX_TEXT_CHARS:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate such as "\ud800" (e.g. from a JSON escape)
        raise PatternError(f"{where}: invalid Unicode (a lone surrogate at character {exc.start}) in "
                           f"{text!r:.200}") from None
    cleaned = normalize_text(text)
    if not cleaned:
        raise PatternError(f"{where}: empty text")
    return cleaned


@dataclass(frozen=True)
class PatternNode:
    text: str
    unknown: bool
    type_hint: str | None


@dataclass(frozen=True)
class PatternEdge:
    """Edge ``source -relation- target`` between node indices (direction kept for display only)."""

    source: int
    relation: str
    target: int
    unknown: bool


@dataclass(frozen=True)
class Pattern:
    nodes: tuple[PatternNode, ...]
    edges: tuple[PatternEdge, ...]

    @classmethod
    def from_triples(cls, triples: Sequence[Sequence[object]]) -> Pattern:
        """Build from ``[[head, relation, tail], …]``; raises :class:`PatternError` naming the bad triple."""
        if isinstance(triples, (str, bytes)) or not isinstance(triples, Sequence):
            raise PatternError(f"A pattern is a list of [head, relation, tail] triples, got {triples!r:.300}")
        if len(triples) == 0:
            raise PatternError("A pattern needs at least one triple, got an empty list")
        index: dict[str, int] = {}
        nodes: list[PatternNode] = []
        edges: list[PatternEdge] = []
        for i, triple in enumerate(triples):
            where = f"triple {i + 1} {triple!r:.300}"
            if isinstance(triple, (str, bytes)) or not isinstance(triple, Sequence) or len(triple) != 3:
                raise PatternError(f"{where}: expected exactly 3 strings [head, relation, tail]")
            head, rel, tail = (_clean(x, where) for x in triple)
            ends = []
            for text in (head, tail):
                if text not in index:
                    index[text] = len(nodes)
                    nodes.append(PatternNode(text, is_unknown(text), type_hint(text)))
                ends.append(index[text])
            edges.append(PatternEdge(ends[0], rel, ends[1], is_unknown(rel)))
        return cls(tuple(nodes), tuple(edges))

    def triples(self) -> list[tuple[str, str, str]]:
        return [(self.nodes[e.source].text, e.relation, self.nodes[e.target].text) for e in self.edges]

    def node_index(self, text: str) -> int:
        for i, node in enumerate(self.nodes):
            if node.text == text:
                return i
        raise PatternError(f"No pattern node named {text!r}")

    def components(self) -> list[tuple[list[int], list[int]]]:
        """Connected components as (node indices, edge indices), in order of first node."""
        parent = list(range(len(self.nodes)))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for e in self.edges:
            parent[find(e.source)] = find(e.target)
        groups: dict[int, tuple[list[int], list[int]]] = {}
        for v in range(len(self.nodes)):
            groups.setdefault(find(v), ([], []))[0].append(v)
        for i, e in enumerate(self.edges):
            groups[find(e.source)][1].append(i)
        return list(groups.values())

    def is_connected(self) -> bool:
        return len(self.components()) == 1

    def degrees(self) -> list[int]:
        """Per node, the number of triples on it."""
        degree = [0] * len(self.nodes)
        for edge in self.edges:
            degree[edge.source] += 1
            degree[edge.target] += 1
        return degree

    def asked_node(self) -> int | None:
        """Index of the node the question asks for: the highest-index unknown leaf (the end of the chain
        the question walks along), else the last unknown node (a star around an unknown centre);
        ``None`` without unknown nodes. Node indices follow first appearance in the triples."""
        degree = self.degrees()
        unknown = [i for i, node in enumerate(self.nodes) if node.unknown]
        leaves = [i for i in unknown if degree[i] == 1]
        if leaves:
            return leaves[-1]
        return unknown[-1] if unknown else None

    def subpattern(self, node_ids: Sequence[int], edge_ids: Sequence[int]) -> Pattern:
        """The pattern restricted to the given nodes and edges (indices renumbered)."""
        remap = {old: new for new, old in enumerate(node_ids)}
        nodes = tuple(self.nodes[i] for i in node_ids)
        edges = tuple(
            PatternEdge(remap[self.edges[i].source], self.edges[i].relation,
                        remap[self.edges[i].target], self.edges[i].unknown)
            for i in edge_ids
        )
        return Pattern(nodes, edges)
