"""A KG where searches explode, and the patterns that make them explode, for load and fuzz tests.

:func:`hub_kg` is a seeded random KG whose every entity has ``degree`` neighbours under a handful of
relations, plus a few hubs linked to everyone: a chain of unknown nodes from any named entity has
``degree ** hops`` candidate paths. :func:`hostile_pattern` is such a chain (anchored by one name, so
validation lets it through: only the deadline bounds it); :func:`normal_pattern` is a one-hop
question with a known answer.
"""

from __future__ import annotations

import random

__all__ = ["hostile_pattern", "hub_kg", "normal_pattern", "unanchored_pattern"]


def hub_kg(entities: int = 400, degree: int = 30, hubs: int = 3, seed: int = 0) -> list[tuple[str, str, str]]:
    """``(head, relation, tail)`` triples: ``entities`` nodes ``e0…``, ``degree`` random links each,
    and ``hubs`` nodes ``hub0…`` linked to every entity."""
    rng = random.Random(seed)
    relations = ["linked to", "related to", "next to"]
    triples = {(f"e{a}", rng.choice(relations), f"e{b}")
               for a in range(entities) for b in rng.sample(range(entities), degree) if a != b}
    triples |= {(f"hub{h}", "covers", f"e{a}") for h in range(hubs) for a in range(entities)}
    return sorted(triples)


def hostile_pattern(hops: int = 8, start: str = "e0") -> list[list[str]]:
    """A chain of ``hops`` untyped-relation edges from ``start`` through unknown nodes."""
    names = [start] + [f"UNKNOWN thing {i}" for i in range(1, hops + 1)]
    return [[names[i], "UNKNOWN relation", names[i + 1]] for i in range(hops)]


def unanchored_pattern(hops: int = 4) -> list[list[str]]:
    """A chain of unknowns with no name at all: refused before any search."""
    return [[f"UNKNOWN {i}", "UNKNOWN relation", f"UNKNOWN {i + 1}"] for i in range(hops)]


def normal_pattern(entity: str = "e1") -> list[list[str]]:
    """One hop from a named entity: answered in milliseconds."""
    return [[entity, "linked to", "UNKNOWN thing 1"]]
