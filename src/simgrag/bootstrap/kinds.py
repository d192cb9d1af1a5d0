"""The kind of thing at each end of a relation (``capital``: country → city), for ``UNKNOWN <type> n`` nodes.

A KG with entity types answers from them (the most common type among a relation's heads, and tails);
any other KG asks the LLM twice per relation, once per end, what a few of the entities there are
(:func:`~simgrag.bootstrap.prompts.kind_messages`: a list of names is easier for a small model than a
relation's direction), and falls back to ``entity`` when the answer is unusable. Answers are kept in the
bootstrap's progress log, so a resumed run asks again for nothing.

:meth:`RelationKinds.prepare_batched` (learning at index time, :mod:`simgrag.bootstrap.learn`) asks the
same about several relations in one call, once per class of things: relation ends that hold mostly the same
entities (the people who work in departments and who manage people) are one group of names
(:func:`end_classes`; :func:`~simgrag.bootstrap.prompts.kind_batch_messages`, whose worked example is about no
KG's domain).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from simgrag.bootstrap.files import ProgressLog
from simgrag.bootstrap.prompts import kind_batch_messages, kind_messages, kind_role, read_kind, read_kind_batch
from simgrag.index.directory import relation_text
from simgrag.kg.store import KGStore
from simgrag.llm.base import LLM
from simgrag.match.kinds import UNTYPED

__all__ = ["RelationKinds", "end_classes", "example_pairs"]

logger = logging.getLogger(__name__)

FALLBACK = UNTYPED  # "entity": no kind known (the kind prior reads it so)
#: entities shown to the LLM per end of a relation; triples counted for a typed KG
SHOWN = 5
COUNTED = 50
#: the kind of a class of literal numbers whose LLM kind is also the kind of named things
NUMBER_KIND = "number"
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)?")
#: two relation ends hold the same class of things when this share of the smaller one's entities is in the other …
CLASS_OVERLAP = 0.5
#: … each end looked at through this many of its triples
CLASS_SAMPLE = 2000


def _numeric(names: Sequence[str]) -> bool:
    """Whether every name is a literal number ("10", "-3", "7.5")."""
    return bool(names) and all(_NUMBER.fullmatch(name.strip()) for name in names)


def example_pairs(store: KGStore, relation: int, count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (head, tail) name pairs of ``relation``, drawn with ``seed`` (the same every time)."""
    tids = np.flatnonzero(np.asarray(store.rels) == relation)
    if len(tids) > count:
        tids = np.sort(np.random.default_rng([seed, relation]).choice(tids, size=count, replace=False))
    return [(store.entities[int(store.heads[t])], store.entities[int(store.tails[t])]) for t in tids]


def end_classes(store: KGStore, relations: Sequence[str], *, seed: int = 0
                ) -> list[tuple[list[tuple[str, int]], list[str]]]:
    """The ends of ``relations`` (``(relation, 0)`` its heads, ``(relation, 1)`` its tails) grouped into
    classes of the same things — two ends are one class when :data:`CLASS_OVERLAP` of the smaller one's
    entities are in the other (each end looked at through its first :data:`CLASS_SAMPLE` triples) — each
    class with up to :data:`SHOWN` of its entity names (drawn with ``seed``), in the order of ``relations``."""
    rels = np.asarray(store.rels)
    order = np.argsort(rels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(rels, minlength=store.num_relations))])
    ends: list[tuple[str, int]] = []
    members: list[np.ndarray] = []
    for relation in relations:
        rid = store.relations.id_of(relation)
        if rid is None:
            continue
        tids = order[int(starts[rid]):int(starts[rid + 1])][:CLASS_SAMPLE]
        for side, column in ((0, store.heads), (1, store.tails)):
            ends.append((relation, side))
            members.append(np.unique(np.asarray(column)[tids]))
    parent = list(range(len(ends)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(ends)):
        for j in range(i + 1, len(ends)):
            shared = np.intersect1d(members[i], members[j], assume_unique=True).size
            if shared and shared >= CLASS_OVERLAP * min(len(members[i]), len(members[j])):
                parent[root(j)] = root(i)
    grouped: dict[int, list[int]] = {}
    for i in range(len(ends)):
        grouped.setdefault(root(i), []).append(i)
    out = []
    for n, group in enumerate(grouped.values()):
        pool = np.unique(np.concatenate([members[i] for i in group]))
        chosen = np.random.default_rng([seed, n]).choice(pool, size=min(SHOWN, len(pool)), replace=False)
        out.append(([ends[i] for i in group], [store.entities[int(e)] for e in chosen]))
    return out


class RelationKinds:
    """``kinds(relation, role)`` → a type word; LLM answers recorded in ``log`` as ``types`` records."""

    def __init__(self, store: KGStore, llm: LLM, log: ProgressLog, *, seed: int = 0) -> None:
        self.store, self.llm, self.log, self.seed = store, llm, log, seed
        self._known: dict[str, tuple[str, str]] = {
            r["relation"]: (r["head"], r["tail"]) for r in log.of_kind("types")}

    def __call__(self, relation: str, role: str) -> str:
        head, tail = self.of(relation)
        return head if role == "head" else tail

    def of(self, relation: str) -> tuple[str, str]:
        """(head type, tail type) of the KG relation ``relation``."""
        if relation not in self._known:
            self._record(relation, self._from_store(relation) or self._ask(relation))
        return self._known[relation]

    def known(self, relation: str) -> bool:
        """Whether the kinds of ``relation`` are known (no LLM call to find them)."""
        return relation in self._known

    def _record(self, relation: str, found: tuple[str, str]) -> None:
        self._known[relation] = found
        self.log.append({"kind": "types", "relation": relation, "head": found[0], "tail": found[1]})

    def prepare_batched(self, relations: Sequence[str], *, per_call: int = 6,
                        allow: Callable[[], bool] = lambda: True) -> bool:
        """Find the kinds of ``relations`` now: from the KG's types when it has them, else by asking the LLM
        what the things at their ends are — ends that hold the same things asked once, as one group
        (:func:`end_classes`: a person is a person in every relation, and the calls are fewer), ``per_call``
        groups per call (:func:`~simgrag.bootstrap.prompts.kind_batch_messages`; an unusable answer is
        ``entity``). ``allow()`` is asked before each call; ``False`` when it refused one (the relations
        with an end not asked about yet stay unknown)."""
        todo: list[str] = []
        for relation in dict.fromkeys(relations):
            if relation in self._known:
                continue
            found = self._from_store(relation)
            if found is not None:
                self._record(relation, found)
            else:
                todo.append(relation)
        classes = end_classes(self.store, todo, seed=self.seed)
        kind_of: dict[tuple[str, int], str] = {}
        step = max(1, per_call)
        for start in range(0, len(classes), step):
            if not allow():
                return False
            chunk = classes[start:start + step]
            response = self.llm.complete(kind_batch_messages([names for _, names in chunk],
                                                             [kind_role(ends) for ends, _ in chunk]),
                                         max_tokens=10 * len(chunk) + 20, temperature=0.0)
            read = read_kind_batch(response.text, len(chunk))
            named_kinds = {kind for (h, t) in self._known.values() for kind in (h, t)} | {
                read[i] for i, (_, names) in enumerate(chunk, start=1) if i in read and not _numeric(names)}
            for i, (ends, names) in enumerate(chunk, start=1):
                if i not in read:
                    logger.info("no usable kind of %s in %r; using %r", names, response.text[:200], FALLBACK)
                kind = read.get(i, FALLBACK)
                if _numeric(names) and kind in named_kinds:
                    # literal numbers are not the named things of another class ("10; 7; 23" called
                    # "position" beside "Goalkeeper; Defender", WorldCup2014's shirt numbers)
                    logger.info("the numbers %s were called %r, the kind of named things; using %r", names, kind,
                                NUMBER_KIND)
                    kind = NUMBER_KIND
                kind_of.update(dict.fromkeys(ends, kind))
            for relation in todo:
                if relation not in self._known and (relation, 0) in kind_of and (relation, 1) in kind_of:
                    self._record(relation, (kind_of[(relation, 0)], kind_of[(relation, 1)]))
        return True

    def _end_names(self, relation: str) -> tuple[list[str], list[str]]:
        """Up to :data:`SHOWN` distinct names at the head end and at the tail end of ``relation``."""
        rid = self.store.relations.id_of(relation)
        pairs = example_pairs(self.store, int(rid or 0), 4 * SHOWN, self.seed)
        heads, tails = (list(dict.fromkeys(pair[side] for pair in pairs))[:SHOWN] for side in (0, 1))
        return heads, tails

    def prepare(self, relations: Sequence[str]) -> None:
        """Find the kinds of ``relations`` now (two LLM calls each for those not known yet)."""
        for relation in relations:
            self.of(relation)

    def described(self) -> list[str]:
        """``"capital (country → city)"`` for each relation known so far, in KG order."""
        return [f"{relation_text(r)} ({h} → {t})" for r in self.store.relations if r in self._known
                for h, t in [self._known[r]]]

    def _from_store(self, relation: str) -> tuple[str, str] | None:
        types = self.store.types
        rid = self.store.relations.id_of(relation)
        if types is None or rid is None:
            return None
        tids = np.flatnonzero(np.asarray(self.store.rels) == rid)[:COUNTED]

        def common(nodes: np.ndarray) -> str:
            counts = Counter(int(t) for n in nodes for t in self.store.types_of(int(n)))
            return relation_text(types[counts.most_common(1)[0][0]]) if counts else FALLBACK

        return common(np.asarray(self.store.heads)[tids]), common(np.asarray(self.store.tails)[tids])

    def _ask(self, relation: str) -> tuple[str, str]:
        found = []
        for names in self._end_names(relation):
            response = self.llm.complete(kind_messages(names), max_tokens=16, temperature=0.0)
            kind = read_kind(response.text)
            if kind is None:
                logger.info("no usable kind of %s in %r; using %r", names, response.text[:200], FALLBACK)
            found.append(kind or FALLBACK)
        return found[0], found[1]
