"""Claim labels against an independent oracle: a claim holds when some choice of entities for a path's
inner nodes makes every stated fact a KG triple (a brute force over all entities; it shares nothing
with the generator's ``holds``). Every Supported claim must hold; no Refuted claim may."""

from __future__ import annotations

import itertools

import pytest

from simgrag.eval.claims import Claim, generate_claims
from simgrag.kg.store import KGStore
from simgrag.testing.synthetic import synthetic_movie_kg

PATHS = {"two_hop_path", "three_hop_path"}


def inner_nodes(claim: Claim) -> list[str]:
    """A path claim's inner nodes: the entity each fact shares with the next one."""
    if claim.shape not in PATHS:
        return []
    shared = []
    for a, b in itertools.pairwise(claim.facts):
        common = {a[0], a[2]} & {b[0], b[2]}
        assert len(common) == 1, claim
        shared.append(common.pop())
    return shared


def holds_by_brute_force(claim: Claim, triples: set[tuple[str, str, str]], entities: list[str]) -> bool:
    names = inner_nodes(claim)
    for values in itertools.product(entities, repeat=len(names)):
        bind = dict(zip(names, values, strict=True))
        if all((bind.get(h, h), r, bind.get(t, t)) in triples for h, r, t in claim.facts):
            return True
    return False


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labels_agree_with_the_brute_force_oracle(seed: int) -> None:
    kg = synthetic_movie_kg(n_movies=40, n_people=12, seed=seed)  # few people: many alternative paths
    store = KGStore.from_triples(kg)
    triples = set(kg)
    entities = sorted({e for h, _, t in kg for e in (h, t)})
    topics = sorted({h for h, _, _ in kg})[:30] + sorted({t for _, r, t in kg if r == "directed_by"})
    claims = generate_claims(store, topics, n=60, seed=seed)
    assert sum(c.shape in PATHS and c.label == "Refuted" for c in claims) >= 8
    wrong = [c for c in claims if holds_by_brute_force(c, triples, entities) != (c.label == "Supported")]
    assert not wrong, wrong[:3]
