"""KG-aware repair of one frequent small-model pattern error: the *echoed role*.

Asked "who directed the movies acted by Mary McCormack", a 1.5B model often writes::

    [Mary McCormack, starred actors, UNKNOWN actor 1]
    [UNKNOWN movie 1, starred actors, UNKNOWN actor 1]      ← echoes the first triple
    [UNKNOWN movie 1, directed by, UNKNOWN director 1]

instead of ``[UNKNOWN movie 1, starred actors, Mary McCormack]``. The same shape is *right* for
"movies directed by the same director as Ronin" — ``[Ronin, directed by, UNKNOWN director 1]``,
``[UNKNOWN movie 1, directed by, UNKNOWN director 1]`` — and only the KG tells the two apart: Ronin is
the head of ``directed_by`` edges, Mary McCormack is never the head of a ``starred_actors`` edge, only
its tail. So: when a known entity K heads a pattern triple ``(K, r, U)`` whose unknown U is shared
with exactly one other triple ``(X, r, U)`` of the same relation and nothing else, and K (matched by
exact name) has edges of r's nearest KG relation only as their tail, the two triples are replaced by
``(X, r, K)``.
"""

from __future__ import annotations

import numpy as np

from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pattern.graph import Pattern, is_unknown

__all__ = ["repair_echoed_roles"]

Triple3 = tuple[str, str, str]


def repair_echoed_roles(pattern: Pattern, retriever: SubgraphRetriever) -> tuple[Pattern, list[str]]:
    """The repaired pattern and a note per change (empty when nothing changed)."""
    triples: list[Triple3] = pattern.triples()
    notes: list[str] = []
    changed = True
    while changed:
        changed = False
        for i, (head, relation, _) in enumerate(triples):
            partner = _echo_partner(triples, i)
            if partner is None or not _only_tail_of(retriever, head, relation):
                continue
            other_head = triples[partner][0]
            fixed = (other_head, relation, head)
            notes.append(f"{list(triples[i])} + {list(triples[partner])} -> {list(fixed)}: "
                         f"{head!r} is only ever the tail of {relation!r} in the KG")
            triples = [fixed if k == partner else t for k, t in enumerate(triples) if k != i]
            changed = True
            break
    return (Pattern.from_triples(triples) if notes else pattern), notes


def _echo_partner(triples: list[Triple3], i: int) -> int | None:
    head, relation, tail = triples[i]
    if is_unknown(head) or not is_unknown(tail):
        return None
    partners = [j for j, (h, r, t) in enumerate(triples)
                if j != i and r == relation and t == tail and is_unknown(h) and h != tail]
    if len(partners) != 1:
        return None
    others = [t for k, t in enumerate(triples) if k not in (i, partners[0])]
    if any(tail in (h, t) or head in (h, t) for h, _, t in others):
        return None
    return partners[0]


def _only_tail_of(retriever: SubgraphRetriever, name: str, relation_text: str) -> bool:
    store = retriever.store
    entity = store.entity_id(name)
    relation = retriever.nearest_relation(relation_text)
    if entity is None or relation is None:
        return False
    _, rels, tids = store.neighbors(entity)
    mine = tids[rels == relation]
    if len(mine) == 0:
        return False
    return not bool(np.any(store.heads[mine] == entity))
