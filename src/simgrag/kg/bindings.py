"""Every exact binding of a small pattern on a KG store, by backtracking over its edges.

The gold side of evaluation and learning needs the *exact* answers of a small pattern (a sampled
subgraph, a gold question pattern) and the triples that support them; no embeddings, no ranking. (The
ranked, embedding-distance search that answers questions is :mod:`simgrag.match.search`.)

A pattern is given by slot indices: ``edges`` are ``(head slot, relation id, tail slot)`` in KG
orientation and ``fixed`` maps the named slots to entity ids. Edges are taken in an order where each
touches a slot bound before it; a pattern with a part that touches no named slot has no bindings here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from simgrag.errors import BindingLimitError
from simgrag.kg.store import KGStore

__all__ = ["BindingLimitError", "connected_order", "pattern_bindings"]

SlotEdge = tuple[int, int, int]  # (head slot, relation id, tail slot)


def connected_order(edges: Sequence[SlotEdge], bound: set[int]) -> list[SlotEdge] | None:
    """``edges`` in an order where each touches a slot of ``bound`` or of an earlier edge; ``None`` when
    some edge can never be reached that way (or nothing is bound)."""
    order: list[SlotEdge] = []
    left = list(edges)
    reached = set(bound)
    while left:
        nxt = next((e for e in left if e[0] in reached or e[2] in reached), None)
        if nxt is None:
            return None
        order.append(nxt)
        left.remove(nxt)
        reached |= {nxt[0], nxt[2]}
    return order


def pattern_bindings(store: KGStore, edges: Sequence[SlotEdge], fixed: Mapping[int, int], *,
                     distinct: bool = False, limit: int = 50_000) -> Iterator[tuple[dict[int, int], list[int]]]:
    """Every binding of the slots (``{slot: entity id}``) under which each edge is a KG triple, with the
    ids of those triples (one per edge, in the order walked). ``distinct``: no two slots share an
    entity. Yields nothing when some edge touches no named slot. Raises :class:`BindingLimitError` after
    ``limit`` partial bindings (the pattern is too loose for exact enumeration)."""
    order = connected_order(edges, set(fixed)) if fixed else None
    if order is None:
        return
    heads, tails = np.asarray(store.heads), np.asarray(store.tails)
    budget = [limit]

    def extend(i: int, bound: dict[int, int], used: list[int]) -> Iterator[tuple[dict[int, int], list[int]]]:
        budget[0] -= 1
        if budget[0] < 0:
            raise BindingLimitError(f"more than {limit} partial bindings")
        if i == len(order):
            yield bound, used
            return
        head, rid, tail = order[i]
        forward = head in bound
        here = bound[head] if forward else bound[tail]
        other = tail if forward else head
        nbr, rel, tid = (np.asarray(a) for a in store.neighbors(here))
        mask = (rel == rid) & ((heads[tid] == here) if forward else (tails[tid] == here))
        for v, t in zip(nbr[mask].tolist(), tid[mask].tolist(), strict=True):
            if other in bound:
                if bound[other] != v:
                    continue
                yield from extend(i + 1, bound, [*used, t])
            elif not (distinct and v in bound.values()):
                yield from extend(i + 1, {**bound, other: v}, [*used, t])

    yield from extend(0, dict(fixed), [])
