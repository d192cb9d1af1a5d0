"""Planted patterns: small known subgraphs inserted into the KG, with the queries that find them.

Each planted subgraph has 2–4 edges over typed entities, respecting every relation's domain and
range, in one of three shapes:

- ``path``: named — unknown (— unknown) — named, e.g. "which film links A and B";
- ``star``: an unknown centre with 2–4 named neighbours (FactKG's conjunctions);
- ``triangle``: two named entities, both linked to one unknown and to each other.

Named neighbours are drawn uniformly from their class (so rarely hubs) and the edges are added to
the KG, which makes the planted binding the (almost always unique) exact match. The query is the
pattern as a user's LLM would write it: named nodes paraphrased (qualifier dropped, typos, word
order, abbreviations; see :mod:`~simgrag.eval.synthetic_dbpedia.paraphrase`), relations as one of their
phrases, unknown nodes as ``UNKNOWN <type> <n>`` with the entity's class (or its parent class). The
planted bindings are the answers, so retrieval Hits@1 can be measured.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simgrag.eval.synthetic_dbpedia.edges import EdgeChunk, EdgeModel
from simgrag.eval.synthetic_dbpedia.names import NameBlob
from simgrag.eval.synthetic_dbpedia.paraphrase import paraphrase_name
from simgrag.eval.synthetic_dbpedia.schema import class_label

__all__ = ["SHAPES", "PlantedQuery", "plant_patterns"]

SHAPES = ("path", "star", "triangle")
_TRIES = 200


@dataclass(frozen=True)
class PlantedQuery:
    """One planted subgraph and its query (see module docstring); names are KG entity names."""

    id: str
    shape: str
    pattern: list[tuple[str, str, str]]
    answers: dict[str, str]
    entities: dict[str, str]
    triples: list[tuple[str, str, str]]
    edits: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "shape": self.shape, "pattern": [list(t) for t in self.pattern],
                "answers": self.answers, "entities": self.entities,
                "triples": [list(t) for t in self.triples], "edits": self.edits}


@dataclass
class _Plan:
    nodes: list[int]
    unknown: list[bool]
    edges: list[tuple[int, int, int]]  # (head node index, relation, tail node index)


class _Planter:
    def __init__(self, model: EdgeModel, rng: np.random.Generator) -> None:
        self.model, self.schema, self.rng = model, model.schema, rng
        self._out: dict[int, list[int]] = {}
        self._in: dict[int, list[int]] = {}

    def incident(self, c: int) -> tuple[list[int], list[int]]:
        """Entity relations with ``c`` in their domain (outgoing) and in their range (incoming)."""
        if c not in self._out:
            anc = set(self.schema.ancestors(c))
            rels = self.schema.relations
            self._out[c] = [i for i, r in enumerate(rels) if r.range >= 0 and r.domain in anc]
            self._in[c] = [i for i, r in enumerate(rels) if r.range >= 0 and r.range in anc]
        return self._out[c], self._in[c]

    def entity(self, c: int) -> int:
        start, end = self.model.layout.subtree(c)
        return int(self.rng.integers(start, end))

    def cls(self, entity: int) -> int:
        return int(self.model.layout.class_of(np.array([entity]))[0])

    def step(self, plan: _Plan, at: int, unknown: bool) -> bool:
        """Add a neighbour of node ``at`` by a random incident relation."""
        out, inc = self.incident(self.cls(plan.nodes[at]))
        choices = [(r, True) for r in out] + [(r, False) for r in inc]
        if not choices:
            return False
        weight = self.model.weight[[r for r, _ in choices]]
        rel, outgoing = choices[int(self.rng.choice(len(choices), p=weight / weight.sum()))]
        spec = self.schema.relations[rel]
        new = self.entity(spec.range if outgoing else spec.domain)
        if new in plan.nodes:
            return False
        plan.nodes.append(new)
        plan.unknown.append(unknown)
        j = len(plan.nodes) - 1
        plan.edges.append((at, rel, j) if outgoing else (j, rel, at))
        return True

    def link(self, plan: _Plan, a: int, b: int) -> bool:
        """Add an edge between existing nodes ``a`` and ``b`` if some relation fits."""
        ca, cb = self.cls(plan.nodes[a]), self.cls(plan.nodes[b])
        options = [(a, r, b) for r in set(self.incident(ca)[0]) & set(self.incident(cb)[1])]
        options += [(b, r, a) for r in set(self.incident(cb)[0]) & set(self.incident(ca)[1])]
        if not options:
            return False
        plan.edges.append(sorted(options)[int(self.rng.integers(len(options)))])
        return True

    def plan(self, shape: str) -> _Plan | None:
        start = int(self.rng.integers(self.model.layout.num_entities))
        size = int(self.rng.integers(2, 5)) if shape == "star" else int(self.rng.integers(2, 4))
        if shape == "star":
            plan = _Plan([start], [True], [])
            ok = all(self.step(plan, 0, False) for _ in range(size))
        elif shape == "path":
            plan = _Plan([start], [False], [])
            ok = all(self.step(plan, i, i < size - 1) for i in range(size))
        else:
            plan = _Plan([start], [True], [])
            ok = self.step(plan, 0, False) and self.step(plan, 0, False) and self.link(plan, 1, 2)
        return plan if ok else None


def _query(qid: str, shape: str, plan: _Plan, planter: _Planter, names: NameBlob,
           rng: random.Random) -> PlantedQuery:
    schema = planter.schema
    texts: list[str] = []
    answers: dict[str, str] = {}
    entities: dict[str, str] = {}
    edits: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for node, unknown in zip(plan.nodes, plan.unknown, strict=True):
        name = names[node]
        if unknown:
            c = planter.cls(node)
            parent = schema.classes[c].parent
            label = class_label(schema.classes[parent if parent >= 0 and rng.random() < 0.3 else c].name)
            counts[label] = counts.get(label, 0) + 1
            text = f"UNKNOWN {label} {counts[label]}"
            answers[text] = name
        else:
            text, done = paraphrase_name(name, rng, edits=rng.choice((0, 1, 1, 2)))
            if text in entities:  # two named nodes written alike: keep this one's full name
                text, done = name, []
            entities[text] = name
            edits[text] = done
        texts.append(text)
    pattern, triples = [], []
    for h, r, t in plan.edges:
        spec = schema.relations[r]
        phrase = rng.choice(spec.phrases) if spec.phrases else spec.name
        pattern.append((texts[h], phrase, texts[t]))
        triples.append((names[plan.nodes[h]], spec.name, names[plan.nodes[t]]))
    return PlantedQuery(qid, shape, pattern, answers, entities, triples, edits)


def plant_patterns(model: EdgeModel, names: NameBlob, count: int, seed: int) -> tuple[EdgeChunk, list[PlantedQuery]]:
    """``count`` planted subgraphs: their edges (to add to the KG) and their queries."""
    planter = _Planter(model, np.random.default_rng([seed, 5]))
    rng = random.Random(seed)
    heads: list[int] = []
    rels: list[int] = []
    tails: list[int] = []
    queries: list[PlantedQuery] = []
    for i in range(count):
        shape = SHAPES[i % len(SHAPES)]
        plan = next((p for p in (planter.plan(shape) for _ in range(_TRIES)) if p is not None), None)
        if plan is None:
            continue
        for h, r, t in plan.edges:
            heads.append(plan.nodes[h])
            rels.append(r)
            tails.append(plan.nodes[t])
        queries.append(_query(f"planted-{i:06d}", shape, plan, planter, names, rng))
    chunk = EdgeChunk(np.array(heads, dtype=np.int64), np.array(rels, dtype=np.int32),
                      np.array(tails, dtype=np.int64), [])
    return chunk, queries
