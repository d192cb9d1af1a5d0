"""Check planted queries against a loaded KG: are the planted triples there, is the answer unique?

``exact_matches`` counts the bindings of a query's unknown nodes that fit its named entities and
KG relations *exactly*, ignoring edge direction as SimGRAG's matcher does. One match means the
planted answer is the only perfect subgraph, so a retriever that ranks it first scores Hits@1; more
than one means an exact tie that even a perfect retriever resolves only by luck.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from simgrag.kg.store import KGStore

__all__ = ["exact_matches", "planted_triples_present"]


def _ids(store: KGStore, query: Mapping[str, Any]) -> tuple[dict[str, int], list[tuple[str, int, str]]] | None:
    fixed: dict[str, int] = {}
    for text, name in query["entities"].items():
        eid = store.entities.id_of(name)
        if eid is None:
            return None
        fixed[text] = eid
    edges = []
    for (h, _, t), (_, rel, _) in zip(query["pattern"], query["triples"], strict=True):
        rid = store.relations.id_of(rel)
        if rid is None:
            return None
        edges.append((h, rid, t))
    return fixed, edges


def _linked(store: KGStore, a: int, rel: int) -> set[int]:
    nbr, rels, _ = store.neighbors(a)
    return set(nbr[rels == rel].tolist())


def exact_matches(store: KGStore, query: Mapping[str, Any], *, limit: int = 1000) -> list[dict[str, int]]:
    """Bindings (unknown node text → entity id) that fit the query exactly, at most ``limit``."""
    resolved = _ids(store, query)
    if resolved is None:
        return []
    fixed, edges = resolved
    unknown = [t for t in query["answers"]]
    candidates: dict[str, set[int] | None] = dict.fromkeys(unknown)
    for h, rel, t in edges:
        for u, other in ((h, t), (t, h)):
            if u in candidates and other in fixed:
                linked = _linked(store, fixed[other], rel)
                known = candidates[u]
                candidates[u] = linked if known is None else known & linked
    if any(c is None for c in candidates.values()):
        raise ValueError("every unknown node needs a named neighbour to be checked")
    found: list[dict[str, int]] = []
    taken = set(fixed.values())
    for combo in itertools.product(*(sorted(candidates[u] or ()) for u in unknown)):
        binding = dict(zip(unknown, combo, strict=True))
        if len(set(combo)) != len(combo) or taken & set(combo):
            continue
        ids = {**fixed, **binding}
        if all(ids[t] in _linked(store, ids[h], rel) for h, rel, t in edges):
            found.append(binding)
            if len(found) >= limit:
                break
    return found


def planted_triples_present(store: KGStore, query: Mapping[str, Any]) -> bool:
    """True when every planted triple of ``query`` is in ``store`` (names as the KG states them)."""
    for h, rel, t in query["triples"]:
        hid, rid, tid = store.entities.id_of(h), store.relations.id_of(rel), store.entities.id_of(t)
        if hid is None or rid is None or tid is None:
            return False
        nbr, rels, tids = store.neighbors(hid)
        hits = tids[(nbr == tid) & (rels == rid)]
        if not any(int(store.heads[x]) == hid and int(store.tails[x]) == tid for x in hits.tolist()):
            return False
    return True
