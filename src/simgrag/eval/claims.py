"""Fact-verification claims generated from a KG (a FactKG stand-in); the runner is in ``claims_bench``.

Claims are built around topic entities in the query shapes of SimGRAG Appendix F: ``one_hop``
(A r B), ``two_hop_path`` (A r1 B r2 C: "Inception was directed by Christopher Nolan, who directed
Memento."), ``three_hop_path``, ``two_hop_conjunction`` (E r1 X, E r2 Y: "Titanic was directed by James
Cameron and was released in 1997.") and ``three_hop_star``. A Supported claim states KG facts; a
Refuted one swaps ONE entity for another of the same role (filling the same relation position
elsewhere) or one relation for another whose positions both entities fill, and is kept only if the KG
does not make it true, even with a path's inner nodes left free. One ``random.Random(seed)`` draws
every choice.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from simgrag.errors import DatasetError
from simgrag.eval.runner import read_question_lines
from simgrag.kg.store import KGStore

__all__ = ["ALL_SHAPES", "RELATION_PREDICATES", "Claim", "generate_claims", "load_claims", "save_claims"]

logger = logging.getLogger(__name__)

ALL_SHAPES = ("one_hop", "two_hop_path", "three_hop_path", "two_hop_conjunction", "three_hop_star")
_HOPS = {"one_hop": 1, "two_hop_path": 2, "three_hop_path": 3, "two_hop_conjunction": 2, "three_hop_star": 3}
_PATHS = {"two_hop_path", "three_hop_path"}

#: relation → (predicate read from the head, predicate read from the tail); ``{o}`` is the other end
RELATION_PREDICATES: dict[str, tuple[str, str]] = {
    "directed_by": ("was directed by {o}", "directed {o}"),
    "written_by": ("was written by {o}", "wrote {o}"),
    "starred_actors": ("starred {o}", "starred in {o}"),
    "release_year": ("was released in {o}", "is the release year of {o}"),
    "in_language": ("is in {o}", "is the language of {o}"),
    "has_genre": ("is a {o} film", "is the genre of {o}"),
    "has_tags": ("is tagged '{o}'", "is a tag of {o}"),
    "has_imdb_votes": ("is {o} on IMDb", "describes the IMDb popularity of {o}"),
    "has_imdb_rating": ("is rated {o} on IMDb", "is the IMDb rating of {o}"),
}
_PERSON_RELATIONS = frozenset({"directed_by", "written_by", "starred_actors"})
#: max share of a shape's claims made of one relation only (has_tags is plentiful and dull)
DEFAULT_RELATION_CAPS: Mapping[str, float] = {"has_tags": 0.15}
_DEFAULT_CAP = 0.5

Label = Literal["Supported", "Refuted"]
Fact = tuple[int, int, int]


@dataclass(frozen=True)
class Claim:
    """A claim and the (head, relation, tail) facts it states; for a Refuted one, ``facts[corrupted_fact]``
    is the false fact and ``corruption`` says what was swapped."""

    text: str
    label: Label
    shape: str
    facts: tuple[tuple[str, str, str], ...]
    corruption: str | None = None
    corrupted_fact: int | None = None


# ---------------------------------------------------------------------------------------- KG view
class _KGView:
    """Fact lookups for generation: membership, (h, r) → tails, (r, t) → heads, role pools."""

    def __init__(self, store: KGStore) -> None:
        self.store = store
        h, r, t = (np.asarray(a, dtype=np.int64).tolist() for a in (store.heads, store.rels, store.tails))
        self.keys: set[Fact] = set(zip(h, r, t, strict=True))
        self.out: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.inc: dict[tuple[int, int], list[int]] = defaultdict(list)
        pools: dict[tuple[int, int], set[int]] = defaultdict(set)
        for hh, rr, tt in self.keys:
            self.out[(hh, rr)].append(tt)
            self.inc[(rr, tt)].append(hh)
            pools[(rr, 0)].add(hh)
            pools[(rr, 1)].add(tt)
        self.pool_sets = dict(pools)
        self.pools = {key: sorted(ids) for key, ids in pools.items()}  # sorted: deterministic sampling

    def rel(self, rid: int) -> str:
        return self.store.relations[rid]

    def fills(self, entity: int, rid: int, side: int) -> bool:
        return entity in self.pool_sets.get((rid, side), ())

    def holds(self, facts: Sequence[Fact], free: frozenset[int] = frozenset()) -> bool:
        """Do the facts hold, with the entities in ``free`` as variables (a fixed end comes first)?"""
        return self._solve(list(facts), free, {})

    def _solve(self, facts: list[Fact], free: frozenset[int], bound: dict[int, int]) -> bool:
        def value(e: int) -> int | None:
            return bound.get(e, None if e in free else e)

        pick = next((i for i, (h, _, t) in enumerate(facts) if value(h) is not None or value(t) is not None), None)
        if pick is None:  # no fact left, or none anchored (not a shape we build): nothing to refute
            return True
        (h, r, t), rest = facts[pick], facts[:pick] + facts[pick + 1:]
        hv, tv = value(h), value(t)
        if hv is not None and tv is not None:
            return (hv, r, tv) in self.keys and self._solve(rest, free, bound)
        if hv is not None:
            return any(self._solve(rest, free, {**bound, t: v}) for v in self.out.get((hv, r), ()))
        tail = tv if tv is not None else -1  # not None: ``pick`` found a fact with a fixed end
        return any(self._solve(rest, free, {**bound, h: v}) for v in self.inc.get((r, tail), ()))


@dataclass
class _Draft:
    """A claim under construction, as ids: ``nodes`` is the path (paths) or ``[centre]``."""

    shape: str
    facts: list[Fact]
    nodes: list[int]

    def free(self) -> frozenset[int]:
        return frozenset(self.nodes[1:-1]) if self.shape in _PATHS else frozenset()


# ---------------------------------------------------------------------------------------- drafting
def _pick_edge(kg: _KGView, node: int, rng: random.Random, avoid: set[int]) -> Fact | None:
    """A random fact at ``node`` whose other end is not in ``avoid``: relation first, then edge."""
    nbr, rel, tid = kg.store.neighbors(node)
    by_rel: dict[int, list[int]] = defaultdict(list)
    for other, r, t in zip(np.asarray(nbr).tolist(), np.asarray(rel).tolist(), np.asarray(tid).tolist(),
                           strict=True):
        if other not in avoid and other != node:
            by_rel[r].append(t)
    if not by_rel:
        return None
    tids = by_rel[rng.choice(sorted(by_rel))]
    t = tids[rng.randrange(len(tids))]
    return int(kg.store.heads[t]), int(kg.store.rels[t]), int(kg.store.tails[t])


def _other(fact: Fact, node: int) -> int:
    return fact[2] if fact[0] == node else fact[0]


def _same_role(kg: _KGView, before: Fact, after: Fact, node: int) -> bool:
    """Does a path's inner ``node`` play one role in both facts (e.g. not a rating reused as a tag)?"""
    if (before[0] == node) != (after[0] == node):
        return False
    return before[0] == node or before[1] == after[1] or {kg.rel(before[1]), kg.rel(after[1])} <= _PERSON_RELATIONS


def _draft(kg: _KGView, shape: str, topic: int, rng: random.Random) -> _Draft | None:
    hops = _HOPS[shape]
    if shape == "one_hop" or shape in _PATHS:
        nodes, facts = [topic], list[Fact]()
        for _ in range(hops):
            fact = _pick_edge(kg, nodes[-1], rng, set(nodes))
            if fact is None or (facts and not _same_role(kg, facts[-1], fact, nodes[-1])):
                return None
            facts.append(fact)
            nodes.append(_other(fact, nodes[-1]))
        return _Draft(shape, facts, nodes)
    leaves: set[int] = {topic}
    facts = []
    for _ in range(hops):
        fact = _pick_edge(kg, topic, rng, leaves)
        if fact is None:
            return None
        facts.append(fact)
        leaves.add(_other(fact, topic))
    return _Draft(shape, facts, [topic])


def _swap_entity(kg: _KGView, draft: _Draft, rng: random.Random) -> tuple[_Draft, int, str] | None:
    counts = Counter(e for h, _, t in draft.facts for e in (h, t))
    slots = [(i, side) for i, f in enumerate(draft.facts) for side in (0, 1) if counts[f[2 * side]] == 1]
    if not slots:
        return None
    i, side = rng.choice(slots)
    old = draft.facts[i][2 * side]
    pool = kg.pools[(draft.facts[i][1], side)]
    for _ in range(20):
        new = pool[rng.randrange(len(pool))]
        if new in counts:
            continue
        fact = (new, draft.facts[i][1], draft.facts[i][2]) if side == 0 else (*draft.facts[i][:2], new)
        facts = [*draft.facts[:i], fact, *draft.facts[i + 1:]]
        cand = _Draft(draft.shape, facts, [new if n == old else n for n in draft.nodes])
        if not kg.holds(cand.facts, cand.free()):
            names = kg.store.entities
            return cand, i, f"entity: {names[old]!r} -> {names[new]!r}"
    return None


def _swap_relation(kg: _KGView, draft: _Draft, rng: random.Random) -> tuple[_Draft, int, str] | None:
    i = rng.randrange(len(draft.facts))
    h, r, t = draft.facts[i]
    options = [r2 for r2 in range(kg.store.num_relations)
               if r2 != r and kg.fills(h, r2, 0) and kg.fills(t, r2, 1)]
    rng.shuffle(options)
    for r2 in options:
        cand = _Draft(draft.shape, [*draft.facts[:i], (h, r2, t), *draft.facts[i + 1:]], list(draft.nodes))
        if not kg.holds(cand.facts, cand.free()):
            return cand, i, f"relation: {kg.rel(r)} -> {kg.rel(r2)}"
    return None


def _corrupt(kg: _KGView, draft: _Draft, rng: random.Random) -> tuple[_Draft, int, str] | None:
    first, second = (_swap_entity, _swap_relation) if rng.random() < 0.6 else (_swap_relation, _swap_entity)
    return first(kg, draft, rng) or second(kg, draft, rng)


# ---------------------------------------------------------------------------------------- wording
def _predicate(kg: _KGView, fact: Fact, subject: int) -> tuple[str, bool]:
    """The predicate of ``fact`` read from ``subject``, and whether it ends with the other entity."""
    rel = kg.rel(fact[1])
    words = rel.replace("_", " ")
    forward, backward = RELATION_PREDICATES.get(rel, (f"has {words} {{o}}", f"is the {words} of {{o}}"))
    template = forward if fact[0] == subject else backward
    text = template.format(o=kg.store.entities[_other(fact, subject)])
    return text, template.rstrip("'").endswith("{o}")


def _is_person(kg: _KGView, facts: Sequence[Fact], node: int) -> bool:
    return any(t == node and kg.rel(r) in _PERSON_RELATIONS for _, r, t in facts)


def _verbalize(kg: _KGView, draft: _Draft) -> str:
    name = kg.store.entities
    subject = draft.nodes[0]
    if draft.shape not in _PATHS:
        preds = [_predicate(kg, f, subject)[0] for f in draft.facts]
        body = preds[0] if len(preds) == 1 else ", ".join(preds[:-1]) + (
            ", and " if len(preds) > 2 else " and ") + preds[-1]
        return f"{name[subject]} {body}" + ("" if body.endswith((".", "?", "!")) else ".")
    text, ends = _predicate(kg, draft.facts[0], subject)
    text = f"{name[subject]} {text}"
    for fact, node in zip(draft.facts[1:], draft.nodes[1:], strict=False):
        pred, next_ends = _predicate(kg, fact, node)
        if ends:
            text += f", {'who' if _is_person(kg, draft.facts, node) else 'which'} {pred}"
        else:
            text += f", and {name[node]} {pred}"
        ends = next_ends
    return text if text.endswith((".", "?", "!")) else text + "."


def _claim(kg: _KGView, draft: _Draft, label: Label, corruption: str | None, index: int | None) -> Claim:
    facts = tuple((kg.store.entities[h], kg.rel(r), kg.store.entities[t]) for h, r, t in draft.facts)
    return Claim(_verbalize(kg, draft), label, draft.shape, facts, corruption, index)


# ---------------------------------------------------------------------------------------- generation
def _topic_ids(store: KGStore, topics: Iterable[str]) -> list[int]:
    ids = [store.entities.id_of(t) for t in dict.fromkeys(topics)]
    found = [i for i in ids if i is not None]
    if len(found) < len(ids):
        logger.info("%d of %d topics are not KG entities; skipped", len(ids) - len(found), len(ids))
    return found


def _capped(kg: _KGView, draft: _Draft, single: Counter[int], target: int, caps: Mapping[str, float]) -> bool:
    rels = {r for _, r, _ in draft.facts}
    if len(rels) != 1:
        return False
    rid = next(iter(rels))
    return single[rid] >= max(1, math.ceil(caps.get(kg.rel(rid), _DEFAULT_CAP) * target))


def _shape_claims(kg: _KGView, shape: str, topics: list[int], target: int, rng: random.Random,
                  caps: Mapping[str, float], seen: set[str]) -> list[Claim]:
    want = {"Supported": target // 2, "Refuted": target // 2}
    got: dict[str, list[Claim]] = {"Supported": [], "Refuted": []}
    single: Counter[int] = Counter()
    order = list(topics)
    rng.shuffle(order)
    for attempt in range(max(100, 30 * target)):
        if not order or all(len(got[k]) >= want[k] for k in want):
            break
        label: Label = "Supported" if len(got["Supported"]) - want["Supported"] < \
            len(got["Refuted"]) - want["Refuted"] else "Refuted"
        draft = _draft(kg, shape, order[attempt % len(order)], rng)
        if draft is None or _capped(kg, draft, single, target, caps):
            continue
        claim = _labelled(kg, draft, label, rng)
        if claim is None or claim.text in seen:
            continue
        seen.add(claim.text)
        single.update({r for _, r, _ in draft.facts} if len({r for _, r, _ in draft.facts}) == 1 else ())
        got[label].append(claim)
    keep = min(len(got["Supported"]), len(got["Refuted"]))
    if keep * 2 < target:
        logger.warning("only %d balanced %s claims of %d asked for", keep * 2, shape, target)
    return [c for pair in zip(got["Supported"][:keep], got["Refuted"][:keep], strict=True) for c in pair]


def _labelled(kg: _KGView, draft: _Draft, label: Label, rng: random.Random) -> Claim | None:
    corrupted = _corrupt(kg, draft, rng) if label == "Refuted" else (draft, None, None)
    return None if corrupted is None else _claim(kg, corrupted[0], label, corrupted[2], corrupted[1])


def generate_claims(store: KGStore, topics: Iterable[str], *, n: int, seed: int,
                    shapes: Sequence[str] = ALL_SHAPES,
                    relation_caps: Mapping[str, float] = DEFAULT_RELATION_CAPS) -> list[Claim]:
    """About ``n`` claims around ``topics`` (entity names), split evenly over ``shapes`` and, within
    each shape, half Supported and half Refuted. Deterministic for a given ``seed``.

    Topics that are not entities, or cannot form a shape, are skipped; a shape short of topics
    yields fewer claims (with a warning). ``relation_caps`` bounds, per relation, the share of a
    shape's claims made of that relation only (default: has_tags ≤ 15%, any other ≤ 50%).
    """
    unknown = [s for s in shapes if s not in _HOPS]
    if unknown:
        raise DatasetError(f"Unknown claim shapes {unknown}; choose from {list(ALL_SHAPES)}")
    kg = _KGView(store)
    rng = random.Random(seed)
    topic_ids = _topic_ids(store, topics)
    seen: set[str] = set()
    claims: list[Claim] = []
    base, extra = divmod(n, len(shapes))
    for i, shape in enumerate(shapes):
        target = base + (1 if i < extra else 0)
        claims.extend(_shape_claims(kg, shape, topic_ids, target, rng, relation_caps, seen))
    logger.info("generated %d claims from %d topics (seed %d)", len(claims), len(topic_ids), seed)
    return claims


def save_claims(path: str | Path, claims: Iterable[Claim]) -> Path:
    """Write claims as JSON lines."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        for claim in claims:
            fh.write(json.dumps(asdict(claim), ensure_ascii=False) + "\n")
    return path


def load_claims(path: str | Path) -> list[Claim]:
    """Read claims written by :func:`save_claims`."""
    claims = []
    for lineno, line in enumerate(read_question_lines(path), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            data["facts"] = tuple(tuple(f) for f in data["facts"])
            claims.append(Claim(**data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise DatasetError(f"{path}:{lineno}: not a claim record ({exc})") from exc
    return claims
