"""Small subgraphs sampled from a KG, each a question waiting to be written, with its gold answers.

Six shapes (:data:`SHAPES`); slots are the subgraph's nodes, *named* ones are mentioned by the question,
the *asked* one is its answer::

    1hop         A -r- X?                     "What is the capital of Japan?"
    2hop         A -r- u -s- X?               "What currency is used in the country of Osaka?"
    3hop         A -r- u -s- v -t- X?         "Which languages are spoken in the countries bordering
                                               the country of Hamburg?"
    star         A -r- X? -s- B               "Which country is in Europe and uses the Euro?"
    conjunction  A -r- u -s- B, u -t- X?      "What is the capital of the European country that uses
                                               the Swiss franc?"
    3hop_forward A -r→ u -s→ v -t→ X?         "What is the profession of the father of the father of X?"

``3hop_forward`` walks each hop from a triple's head to its tail: the chain of possessives people ask ("X's
father's father's profession"), which a KG without three such hops in a row does not have (WorldCup2014's
player → club → country stops at two, MetaQA's movie → person at one). The other shapes walk either way.
Triples keep the KG's orientation. Relations are drawn round-robin (shuffled by the seed), so a rare
relation gets as many samples as a frequent one; everything else is drawn from a
:class:`numpy.random.Generator` seeded once, so the same KG, seed and counts give the same samples.

A sample's gold answers are every entity its own pattern binds to the asked slot, the other slots
held to distinct entities (the search's injective setting) — computed on the store, no embedding. A
sample whose answers are too many (``max_answers``: "which cities are in the United States?") or whose
enumeration is too large is drawn again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from simgrag.errors import ConfigError
from simgrag.index.directory import relation_text
from simgrag.kg.bindings import BindingLimitError, connected_order, pattern_bindings
from simgrag.kg.store import KGStore

__all__ = ["FORWARD_CHAIN", "SHAPES", "Edge", "Sample", "gold_answers", "parse_shapes", "sample_subgraphs"]

#: the shape of 3-hop chains walked head → tail only (module docstring)
FORWARD_CHAIN = "3hop_forward"
SHAPES = ("1hop", "2hop", "3hop", "star", "conjunction", FORWARD_CHAIN)
#: draws per wanted sample before a shape is given up on this KG
TRIES_PER_SAMPLE = 40
#: partial bindings enumerated for one sample's gold answers before it counts as too broad
MAX_BINDINGS = 20_000

TypeNamer = Callable[[str, str], str]  # (KG relation name, "head" | "tail") → a type word ("country")


@dataclass(frozen=True)
class Edge:
    """One KG triple of a sample: slots ``head`` and ``tail`` (KG orientation), its relation and id."""

    head: int
    relation: str
    tail: int
    triple_id: int


@dataclass(frozen=True)
class Sample:
    """A sampled subgraph: per slot its entity and whether the question names it; the asked slot; the
    edges in pattern order (each touches a slot of an earlier edge or a named one); the gold answers."""

    shape: str
    entities: tuple[str, ...]
    named: tuple[bool, ...]
    asked: int
    edges: tuple[Edge, ...]
    answers: tuple[str, ...]

    @property
    def triple_ids(self) -> frozenset[int]:
        """The KG triples the sample is made of: two samples with the same ones are the same subgraph."""
        return frozenset(e.triple_id for e in self.edges)

    @property
    def answer(self) -> str:
        """The entity at the asked slot in the sampled subgraph (one of :attr:`answers`)."""
        return self.entities[self.asked]

    @property
    def named_entities(self) -> list[str]:
        return [e for e, named in zip(self.entities, self.named, strict=True) if named]

    @property
    def hidden_entities(self) -> list[str]:
        """Entities of the slots the question must not name (the unknown ones, the answer included)."""
        return [e for e, named in zip(self.entities, self.named, strict=True) if not named]

    def facts(self) -> list[tuple[str, str, str]]:
        """The subgraph's triples as (head, readable relation, tail)."""
        return [(self.entities[e.head], relation_text(e.relation), self.entities[e.tail]) for e in self.edges]

    def pattern_triples(self, type_of: TypeNamer) -> list[list[str]]:
        """The gold pattern: named slots by name, the others ``UNKNOWN <type> <n>`` (the type of a slot
        from the first edge that touches it, ``type_of(relation, role)``), relations readable."""
        labels: dict[int, str] = {}
        counts: dict[str, int] = {}
        for edge in self.edges:
            for slot, role in ((edge.head, "head"), (edge.tail, "tail")):
                if slot in labels:
                    continue
                if self.named[slot]:
                    labels[slot] = self.entities[slot]
                    continue
                kind = type_of(edge.relation, role) or "entity"
                counts[kind] = counts.get(kind, 0) + 1
                labels[slot] = f"UNKNOWN {kind} {counts[kind]}"
        return [[labels[e.head], relation_text(e.relation), labels[e.tail]] for e in self.edges]

    def to_dict(self) -> dict[str, object]:
        return {"shape": self.shape, "entities": list(self.entities), "named": list(self.named),
                "asked": self.asked, "edges": [[e.head, e.relation, e.tail, e.triple_id] for e in self.edges],
                "answers": list(self.answers)}


def parse_shapes(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"1hop,star"`` (or a list) → the shapes in :data:`SHAPES` order; unknown names are refused."""
    names = [s.strip().lower() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    unknown = sorted(set(names) - set(SHAPES))
    if unknown or not names:
        raise ConfigError(f"unknown sample shape(s) {unknown or names}; known: {', '.join(SHAPES)}")
    return tuple(s for s in SHAPES if s in names)


class _Sampler:
    """Draws the samples of one KG (see the module docstring)."""

    def __init__(self, store: KGStore, rng: np.random.Generator, max_answers: int, excluded: set[int],
                 skipped: set[int]) -> None:
        if store.num_triples == 0:
            raise ConfigError("The KG has no triples to sample questions from")
        self.store, self.rng, self.max_answers, self.excluded = store, rng, max_answers, excluded
        self._skipped = np.asarray(sorted(skipped), dtype=np.int64)
        rels = np.asarray(store.rels)
        self._by_rel = np.argsort(rels, kind="stable")
        self._rel_start = np.concatenate([[0], np.cumsum(np.bincount(rels, minlength=store.num_relations))])
        present = [r for r in range(store.num_relations)
                   if self._rel_start[r + 1] > self._rel_start[r] and r not in skipped]
        if not present:
            raise ConfigError("Every relation of the KG is skipped: nothing to sample questions from")
        self._relations = [int(r) for r in rng.permutation(present)]
        self._turn = 0
        self._heads, self._tails = np.asarray(store.heads), np.asarray(store.tails)

    # -- drawing pieces ------------------------------------------------------------------------------
    def _next_relation(self) -> int:
        rel = self._relations[self._turn % len(self._relations)]
        self._turn += 1
        return rel

    def _triple_of(self, rel: int) -> int:
        start, end = int(self._rel_start[rel]), int(self._rel_start[rel + 1])
        return int(self._by_rel[start + int(self.rng.integers(end - start))])

    def _ends(self, tid: int, from_head: bool) -> tuple[int, int]:
        """(this end, the other end) of triple ``tid``, starting at its head or its tail."""
        h, t = int(self._heads[tid]), int(self._tails[tid])
        return (h, t) if from_head else (t, h)

    def _incident(self, node: int, used: set[int], avoid: set[int], *,
                  forward: bool = False) -> tuple[int, int] | None:
        """A random (triple id, other end) at ``node``: a relation first (uniform), then a triple of it;
        triples in ``used`` and ends in ``avoid`` are skipped, and with ``forward`` those whose head is not ``node``."""
        nbr, rel, tid = (np.asarray(a) for a in self.store.neighbors(node))
        keep = ~np.isin(tid, list(used)) & ~np.isin(nbr, list(avoid)) & ~np.isin(rel, self._skipped)
        if forward:
            keep &= self._heads[tid] == node
        if not keep.any():
            return None
        rels = np.unique(rel[keep])
        chosen = rels[int(self.rng.integers(len(rels)))]
        rows = np.flatnonzero(keep & (rel == chosen))
        row = rows[int(self.rng.integers(len(rows)))]
        return int(tid[row]), int(nbr[row])

    def _edge(self, tid: int, slot_of: dict[int, int]) -> Edge:
        return Edge(slot_of[int(self._heads[tid])], self.store.relations[int(self.store.rels[tid])],
                    slot_of[int(self._tails[tid])], tid)

    # -- shapes --------------------------------------------------------------------------------------
    def chain(self, hops: int, *, forward: bool = False) -> tuple[list[int], list[int], set[int], int] | None:
        """Entity ids along the walk, its triple ids, the named slots and the asked slot; ``forward``: every hop
        from a triple's head to its tail."""
        tid = self._triple_of(self._next_relation())
        start, nxt = self._ends(tid, forward or bool(self.rng.integers(2)))
        nodes, triples = [start, nxt], [tid]
        while len(triples) < hops:
            step = self._incident(nodes[-1], set(triples), set(nodes) | self.excluded, forward=forward)
            if step is None:
                return None
            triples.append(step[0])
            nodes.append(step[1])
        return nodes, triples, {0}, len(nodes) - 1

    def star(self, arms: int) -> tuple[list[int], list[int], set[int], int] | None:
        """A centre with ``arms`` named leaves (``arms == 3``: the last leaf is asked, the centre unknown)."""
        tid = self._triple_of(self._next_relation())
        centre, first = self._ends(tid, bool(self.rng.integers(2)))
        nodes, triples = [first, centre], [tid]
        while len(triples) < arms:
            step = self._incident(centre, set(triples), set(nodes) | self.excluded)
            if step is None:
                return None
            triples.append(step[0])
            nodes.append(step[1])
        if arms == 2:  # A, X?, B: both leaves named, the centre asked
            return nodes, triples, {0, 2}, 1
        return nodes, triples, {0, 2}, 3  # A, u, B, X?: the third leaf asked

    def draw(self, shape: str) -> Sample | None:
        drawn = {"1hop": lambda: self.chain(1), "2hop": lambda: self.chain(2), "3hop": lambda: self.chain(3),
                 "star": lambda: self.star(2), "conjunction": lambda: self.star(3),
                 FORWARD_CHAIN: lambda: self.chain(3, forward=True)}[shape]()
        if drawn is None:
            return None
        nodes, triples, named, asked = drawn
        if self.excluded.intersection(nodes):
            return None
        slot_of = {entity: slot for slot, entity in enumerate(nodes)}
        edges = tuple(self._edge(t, slot_of) for t in triples)
        names = tuple(self.store.entities[n] for n in nodes)
        flags = tuple(i in named for i in range(len(nodes)))
        answers = gold_answers(self.store, edges, nodes, flags, asked)
        if answers is None or not 1 <= len(answers) <= self.max_answers:
            return None
        return Sample(shape, names, flags, asked, edges, tuple(sorted(self.store.entities[a] for a in answers)))


def sample_subgraphs(store: KGStore, shapes: Sequence[str], per_shape: int, *, seed: int = 0,
                     max_answers: int = 20, exclude: Collection[str] = (),
                     skip_relations: Collection[str] = ()) -> list[Sample]:
    """``per_shape`` samples of each shape (fewer when the KG has too few), shapes interleaved
    (1hop, 2hop, …, 1hop, 2hop, …); the same arguments give the same list. No sample touches an entity
    named in ``exclude`` (names the KG does not have are ignored): e.g. the topics of an evaluation; nor
    a relation in ``skip_relations`` (e.g. :func:`~simgrag.kg.twins.twin_relations`' twins)."""
    if per_shape < 0 or max_answers < 1:
        raise ConfigError(f"per_shape must be >= 0 and max_answers >= 1; got {per_shape}, {max_answers}")
    excluded = {i for i in (store.entities.id_of(name) for name in exclude) if i is not None}
    skipped = {i for i in (store.relations.id_of(name) for name in skip_relations) if i is not None}
    sampler = _Sampler(store, np.random.default_rng(seed), max_answers, excluded, skipped)
    found: dict[str, list[Sample]] = {s: [] for s in parse_shapes(shapes)}
    for shape, bucket in found.items():
        bucket.extend(_draw_distinct(sampler, shape, per_shape))
    return [bucket[i] for i in range(per_shape) for bucket in found.values() if i < len(bucket)]


def _draw_distinct(sampler: _Sampler, shape: str, wanted: int) -> Iterator[Sample]:
    seen: set[frozenset[int]] = set()
    tries = 0
    while len(seen) < wanted and tries < wanted * TRIES_PER_SAMPLE:
        tries += 1
        sample = sampler.draw(shape)
        if sample is None:
            continue
        if sample.triple_ids not in seen:
            seen.add(sample.triple_ids)
            yield sample


def gold_answers(store: KGStore, edges: Sequence[Edge], entities: Sequence[int], named: Sequence[bool],
                 asked: int) -> set[int] | None:
    """Entity ids the pattern of ``edges`` binds to slot ``asked`` with the named slots fixed to their
    ``entities`` and all slots distinct; ``None`` when more than :data:`MAX_BINDINGS` partial bindings
    would be enumerated. Each edge must touch a named slot or a slot of an earlier edge."""
    fixed = {slot: int(entities[slot]) for slot, flag in enumerate(named) if flag}
    slot_edges = [(e.head, _relation_id(store, e.relation), e.tail) for e in edges]
    if connected_order(slot_edges, set(fixed)) is None:
        raise ConfigError("an edge of a sample touches no bound slot")
    try:
        return {bound[asked] for bound, _ in pattern_bindings(store, slot_edges, fixed, distinct=True,
                                                              limit=MAX_BINDINGS)}
    except BindingLimitError:
        return None


def _relation_id(store: KGStore, relation: str) -> int:
    rid = store.relations.id_of(relation)
    if rid is None:
        raise ConfigError(f"relation {relation!r} of a sample is not in the KG")
    return rid
