"""Which MetaQA questions can this KB answer? Follow the gold relation chain from the topic entity.

The KB shipped in ../shared was rebuilt and misses some triples, so Hits@1 is reported on all
questions *and* on the subset whose gold chain, followed on this KB, reaches a gold answer.
"""

from __future__ import annotations

import numpy as np

from simgrag.eval.metaqa import MetaQAQuestion, chain_relations
from simgrag.kg.store import KGStore

__all__ = ["chain_targets", "is_answerable"]


def chain_targets(store: KGStore, topic: str, chain: str) -> set[str]:
    """Entities reached from ``topic`` by following ``chain``'s relations (either direction),
    never returning to the topic itself (MetaQA's answers exclude it)."""
    start = store.entities.id_of(topic)
    if start is None:
        return set()
    frontier = {start}
    for rel_name in chain_relations(chain):
        rid = store.relations.id_of(rel_name)
        if rid is None:
            return set()
        nxt: set[int] = set()
        for node in frontier:
            nbr, rel, _ = store.neighbors(node)
            nxt.update(int(v) for v in np.asarray(nbr)[np.asarray(rel) == rid])
        frontier = nxt
    frontier.discard(start)
    return {store.entities[v] for v in frontier}


def is_answerable(store: KGStore, question: MetaQAQuestion) -> bool:
    return bool(chain_targets(store, question.topic, question.chain) & set(question.answers))

