"""A brute-force oracle for the subgraph search: enumerate every mapping, sort, cut at k.

Exponential, for tiny KGs only. It shares nothing with :mod:`simgrag.match` except the input types,
so property tests can compare the two. The GSD is summed in the same canonical order (nodes, then
edges) so equal mappings have bit-identical scores.
"""

from __future__ import annotations

import itertools

from simgrag.kg.store import KGStore
from simgrag.match.candidates import CandidateTable
from simgrag.match.search import Distinct, Match
from simgrag.pattern.graph import Pattern

__all__ = ["brute_force_all", "brute_force_top_k", "brute_force_within"]


def _edge_options(store: KGStore, table: CandidateTable, edge: int, a: int, b: int) -> list[tuple[int, int]]:
    """(triple id, relation id) of every KG triple joining entities a and b, either direction."""
    out = []
    for tid in range(store.num_triples):
        h, r, t = int(store.heads[tid]), int(store.rels[tid]), int(store.tails[tid])
        if ((h, t) == (a, b) or (h, t) == (b, a)) and table.rel_dists[edge, r] != float("inf"):
            out.append((tid, r))
    return out


def brute_force_top_k(store: KGStore, pattern: Pattern, table: CandidateTable, k: int,
                      *, injective: Distinct = True) -> list[Match]:
    """Exactly the top-k matches, by (GSD, entity ids, triple ids)."""
    return brute_force_all(store, pattern, table, injective=injective)[:k]


def brute_force_within(store: KGStore, pattern: Pattern, table: CandidateTable, within: float,
                       *, injective: Distinct = True) -> list[Match]:
    """Every match whose GSD is at most the best GSD plus ``within``, by (GSD, entity ids, triple ids)."""
    found = brute_force_all(store, pattern, table, injective=injective)
    return [m for m in found if m.gsd <= found[0].gsd + within] if found else []


def brute_force_all(store: KGStore, pattern: Pattern, table: CandidateTable,
                    *, injective: Distinct = True) -> list[Match]:
    """Every match, by (GSD, entity ids, triple ids)."""
    domains = []
    for cand in table.nodes:
        if cand.any_entity:
            domains.append([(v, 0.0) for v in range(store.num_entities)])
        else:
            domains.append([(int(v), float(d)) for v, d in zip(cand.ids, cand.dists, strict=True)])
    found: list[Match] = []
    for choice in itertools.product(*domains):
        nodes = tuple(v for v, _ in choice)
        if injective is True and len(set(nodes)) != len(nodes):
            continue
        if not isinstance(injective, bool) and any(nodes[a] == nodes[b] for a, b in injective):
            continue
        options = [_edge_options(store, table, e, nodes[edge.source], nodes[edge.target])
                   for e, edge in enumerate(pattern.edges)]
        for assign in itertools.product(*options):
            tids = tuple(t for t, _ in assign)
            if injective is not False and len(set(tids)) != len(tids):
                continue
            gsd = 0.0
            for _, d in choice:
                gsd += d
            edge_d = tuple(float(table.rel_dists[e, r]) for e, (_, r) in enumerate(assign))
            for d in edge_d:
                gsd += d
            found.append(Match(gsd, nodes, tids, tuple(d for _, d in choice), edge_d))
    found.sort(key=Match.key)
    return found
