"""Questions over any KG given as a topic entity and a relation chain; gold answers follow the chain.

A questions file (JSONL) holds one question per line::

    {"hop": 3, "topic": "Lima", "chain": ["~capital", "borders", "currency"],
     "question": "What currencies are used by the countries that border the country whose capital is Lima?"}

Each chain step is a KG relation name, followed from head to tail, or with a leading ``~`` from tail
to head (``~capital`` from Lima reaches Peru, since the KG holds ``Peru|capital|Lima``). The gold
answers are not stored: :func:`load_chain_questions` computes them by following the chain on the KG
(the topic itself excluded, as in MetaQA) and refuses a question whose answer set is empty.

:func:`pattern_fits_relations` is the structural check of a pattern against such a chain (MetaQA's
:func:`~simgrag.eval.metaqa.pattern_fits_chain` uses the same path walk): one edge per hop, a simple
path from the topic entity through ``UNKNOWN`` nodes, each edge's relation text (or, when it names no
relation, a type hint at its ends) read as the hop's KG relation by keywords (:data:`GEO_RELATION_WORDS`
for the held-out geography KG).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simgrag.errors import DatasetError
from simgrag.kg.store import KGStore
from simgrag.pattern.graph import Pattern

__all__ = [
    "GEO_RELATION_WORDS",
    "ChainQuestion",
    "find_topic_node",
    "follow_chain",
    "keyword_kinds",
    "load_chain_questions",
    "parse_step",
    "pattern_fits_relations",
    "walk_path",
]

#: keyword stems (lower case, matched as substrings) → the geography KG relation they name
GEO_RELATION_WORDS: Mapping[str, tuple[str, ...]] = {
    "capital": ("capital", "seat of government"),
    "continent": ("continent",),
    "currency": ("currenc", "money", "legal tender", "pays with", "pay with", "cash"),
    "official language": ("language", "speak", "spoken", "tongue"),
    "borders": ("border", "neighbo", "adjacent", "next to", "bounded"),
    "located in": ("located", "locat", "situated", "lies in", "is in", "city in", "cities in", "city of", "part of",
                   "within", "country", "in"),
}


@dataclass(frozen=True)
class ChainQuestion:
    """A question with its topic entity, relation chain and the answers the chain reaches."""

    hop: int
    topic: str
    chain: tuple[str, ...]
    question: str
    answers: tuple[str, ...]

    @property
    def relations(self) -> list[str]:
        """The chain's relation names, without direction marks."""
        return [parse_step(step)[0] for step in self.chain]


def parse_step(step: str) -> tuple[str, bool]:
    """``"capital"`` → ``("capital", True)`` (head to tail); ``"~capital"`` → ``("capital", False)``."""
    name = step.strip()
    forward = not name.startswith("~")
    name = name.lstrip("~").strip()
    if not name:
        raise DatasetError(f"empty relation in chain step {step!r}")
    return name, forward


def follow_chain(store: KGStore, topic: str, chain: Sequence[str]) -> set[str]:
    """Entities reached from ``topic`` by following ``chain`` (directions respected), the topic excluded;
    raises :class:`DatasetError` when the topic or a relation is not in the KG."""
    start = store.entities.id_of(topic)
    if start is None:
        raise DatasetError(f"topic entity {topic!r} is not in the KG")
    frontier = {start}
    for step in chain:
        name, forward = parse_step(step)
        rid = store.relations.id_of(name)
        if rid is None:
            raise DatasetError(f"relation {name!r} of chain {list(chain)} is not in the KG")
        nxt: set[int] = set()
        for node in frontier:
            nbr, rel, tid = (np.asarray(a) for a in store.neighbors(node))
            keep = rel == rid
            # forward: this node is the triple's head; backward: its tail
            keep &= (np.asarray(store.heads)[tid] == node) if forward else (np.asarray(store.tails)[tid] == node)
            nxt.update(int(v) for v in nbr[keep])
        frontier = nxt
    frontier.discard(start)
    return {store.entities[v] for v in frontier}


def load_chain_questions(path: str | Path, store: KGStore) -> list[ChainQuestion]:
    """The questions of ``path`` with answers computed on ``store``; raises :class:`DatasetError`
    naming ``file:line`` for a malformed line, a hop count that is not the chain's length, a question
    without its topic's text, a topic or relation missing from the KG, or an empty answer set."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"Cannot read {path}: {exc}") from exc
    out = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(text)
            hop, topic, chain, question = int(row["hop"]), str(row["topic"]), row["chain"], str(row["question"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetError(f"{where}: expected {{\"hop\", \"topic\", \"chain\", \"question\"}} ({exc})") from exc
        if not isinstance(chain, list) or not chain or not all(isinstance(s, str) for s in chain):
            raise DatasetError(f"{where}: 'chain' must be a non-empty list of relation names")
        if hop != len(chain):
            raise DatasetError(f"{where}: hop {hop} but the chain has {len(chain)} steps")
        if topic not in question:
            raise DatasetError(f"{where}: {question!r} does not contain its topic {topic!r}")
        try:
            answers = follow_chain(store, topic, chain)
        except DatasetError as exc:
            raise DatasetError(f"{where}: {exc}") from exc
        if not answers:
            raise DatasetError(f"{where}: following {chain} from {topic!r} reaches nothing in the KG")
        out.append(ChainQuestion(hop, topic, tuple(chain), " ".join(question.split()), tuple(sorted(answers))))
    if not out:
        raise DatasetError(f"{path}: no questions")
    return out


def keyword_kinds(words: Mapping[str, Sequence[str]]) -> Callable[[str], set[str]]:
    """A function from a relation phrase (or type hint) to the KG relations whose stems it contains;
    a stem of one or two letters (``in``) must be a whole word."""
    def kinds(text: str) -> set[str]:
        low = " ".join(text.lower().replace("_", " ").split())
        tokens = set(low.split())
        return {rel for rel, stems in words.items()
                if any((stem in tokens) if len(stem) <= 2 else (stem in low) for stem in stems)}
    return kinds


def find_topic_node(pattern: Pattern, topic: str) -> int | None:
    """The pattern node naming ``topic`` (case and spacing ignored)."""
    want = " ".join(topic.lower().split())
    for i, node in enumerate(pattern.nodes):
        if not node.unknown and " ".join(node.text.lower().split()) == want:
            return i
    return None


def walk_path(pattern: Pattern, start: int) -> tuple[list[int], list[int]] | None:
    """Follow the unique unused edge from ``start``; None unless all edges form one simple path."""
    nodes: list[int] = [start]
    edges: list[int] = []
    used: set[int] = set()
    while len(edges) < len(pattern.edges):
        here = nodes[-1]
        nxt = [(i, e.target if e.source == here else e.source) for i, e in enumerate(pattern.edges)
               if i not in used and here in (e.source, e.target)]
        if len(nxt) != 1 or nxt[0][1] in nodes:
            return None
        edge_id, node = nxt[0]
        used.add(edge_id)
        edges.append(edge_id)
        nodes.append(node)
    return nodes, edges


def pattern_fits_relations(pattern: Pattern, topic: str, relations: Sequence[str],
                           kinds_of: Callable[[str], set[str]],
                           hint_kinds: Callable[[str], set[str]] | None = None) -> tuple[bool, str]:
    """Does ``pattern`` have the structure of the chain ``relations`` from ``topic``? ``(ok, reason)``.

    Strict on structure: exactly one edge per hop, a simple path starting at the topic entity node,
    every other node ``UNKNOWN``. Lenient on wording: each edge's relation text (or, when it names no
    kind, the type hints of its ends, read by ``hint_kinds``, default ``kinds_of``) must map to the
    hop's relation."""
    if len(pattern.edges) != len(relations):
        return False, f"{len(pattern.edges)} triples for a {len(relations)}-hop question"
    start = find_topic_node(pattern, topic)
    if start is None:
        return False, f"topic {topic!r} is not a node"
    path = walk_path(pattern, start)
    if path is None:
        return False, "not a simple path starting at the topic"
    nodes, edges = path
    if any(not pattern.nodes[v].unknown for v in nodes[1:]):
        return False, "a node other than the topic is not UNKNOWN"
    for step, (edge_id, want) in enumerate(zip(edges, relations, strict=True), start=1):
        relation = pattern.edges[edge_id].relation
        kinds = kinds_of(relation)
        if not kinds:
            for v in (nodes[step - 1], nodes[step]):
                hint = pattern.nodes[v].type_hint
                kinds |= (hint_kinds or kinds_of)(hint) if hint else set()
        if want not in kinds:
            return False, f"hop {step}: relation {relation!r} read as {sorted(kinds) or '?'}, want {want}"
    return True, "ok"
