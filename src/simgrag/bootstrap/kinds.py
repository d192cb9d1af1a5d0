"""The kind of thing at each end of a relation (``capital``: country → city), for ``UNKNOWN <type> n`` nodes.

A KG with entity types answers from them (the most common type among a relation's heads, and tails);
any other KG asks the LLM twice per relation, once per end, what a few of the entities there are
(:func:`~simgrag.bootstrap.prompts.kind_messages`: a list of names is easier for a small model than a
relation's direction), and falls back to ``entity`` when the answer is unusable. Answers are kept in the
bootstrap's progress log, so a resumed run asks again for nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import numpy as np

from simgrag.bootstrap.files import ProgressLog
from simgrag.bootstrap.prompts import kind_messages, read_kind
from simgrag.index.directory import relation_text
from simgrag.kg.store import KGStore
from simgrag.llm.base import LLM

__all__ = ["RelationKinds", "example_pairs"]

logger = logging.getLogger(__name__)

FALLBACK = "entity"
#: entities shown to the LLM per end of a relation; triples counted for a typed KG
SHOWN = 5
COUNTED = 50


def example_pairs(store: KGStore, relation: int, count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (head, tail) name pairs of ``relation``, drawn with ``seed`` (the same every time)."""
    tids = np.flatnonzero(np.asarray(store.rels) == relation)
    if len(tids) > count:
        tids = np.sort(np.random.default_rng([seed, relation]).choice(tids, size=count, replace=False))
    return [(store.entities[int(store.heads[t])], store.entities[int(store.tails[t])]) for t in tids]


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
            found = self._from_store(relation) or self._ask(relation)
            self._known[relation] = found
            self.log.append({"kind": "types", "relation": relation, "head": found[0], "tail": found[1]})
        return self._known[relation]

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
        rid = self.store.relations.id_of(relation)
        pairs = example_pairs(self.store, int(rid or 0), 4 * SHOWN, self.seed)
        found = []
        for side in (0, 1):
            names = list(dict.fromkeys(pair[side] for pair in pairs))[:SHOWN]
            response = self.llm.complete(kind_messages(names), max_tokens=16, temperature=0.0)
            kind = read_kind(response.text)
            if kind is None:
                logger.info("no usable kind of %s in %r; using %r", names, response.text[:200], FALLBACK)
            found.append(kind or FALLBACK)
        return found[0], found[1]
