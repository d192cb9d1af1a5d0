"""Facts of the KG that contradict a claim: the claim's own entity with the claim's relation bound to
*another* entity, where the KG's statistics say that relation has one partner per entity.

"Heat was directed by Steven Spielberg" has the pattern ``[Heat, directed by, Steven Spielberg]``; the
KG holds no such edge, so no subgraph matches it. Each triple of the claim with both ends named is
searched again with one end left free (``[Heat, directed by, UNKNOWN 1]``) by the one subgraph search
(:class:`~simgrag.match.retrieve.SubgraphRetriever`), from the side its relation is functional from
(:mod:`simgrag.kg.functional`: ``directed_by`` from the film). A match that binds the kept end to the
claim's own entity (same name) and the free end to another entity, while the KG does not hold the
claimed fact, is a :class:`Contradiction`: ``Heat|directed_by|Michael Mann``.

For a relation that is not functional (``starred_actors``: a film has many actors) the same search
finds what the KG holds on the claim's entity and relation (:attr:`ClaimCheck.related`): no proof, but
evidence the LLM can read, where the claim's own pattern matched nothing — when the KG has both of the
triple's entities by name (a claim about a film the KG lacks is not checked against its actor's films).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from simgrag.errors import PatternError
from simgrag.kg.functional import Side, relation_functionality
from simgrag.kg.store import Triple
from simgrag.match.answers import names_match
from simgrag.match.retrieve import Evidence, Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern

__all__ = ["ClaimCheck", "Contradiction", "check_claim", "exactly_supported"]

logger = logging.getLogger(__name__)

#: the free end of a relaxed claim triple
FREE = "UNKNOWN 1"
#: subgraphs per relaxed search (a functional relation has one partner, a few when names repeat)
RELAXED_K = 5
#: contradicting facts kept per claim
MAX_SHOWN = 3


@dataclass(frozen=True)
class Contradiction:
    """A KG fact against one triple of a claim: ``held`` where the claim says ``claimed``; the relation
    is functional from ``side`` (``share`` of its entities there have exactly one partner)."""

    claimed: tuple[str, str, str]
    held: Triple
    side: Side
    share: float

    def text(self) -> str:
        """One plain sentence: what the KG holds instead, and why that rules the claim out."""
        h, r, t = self.held.as_tuple()
        claimed_other = self.claimed[2] if self.side == "head" else self.claimed[0]
        end, partner = ("head", "tail") if self.side == "head" else ("tail", "head")
        return (f"the KG holds ({h}, {r}, {t}), not {claimed_other}: {self.share:.0%} of the {end}s of {r} "
                f"in this KG have exactly one {partner}")

    def to_dict(self) -> dict[str, Any]:
        return {"claimed": list(self.claimed), "held": list(self.held.as_tuple()), "side": self.side,
                "share": self.share}


@dataclass(frozen=True)
class ClaimCheck:
    """What the relaxed searches found: ``contradictions`` (facts that rule the claim out) and ``related``
    (the first relaxed search that bound the claim's own entity, for the LLM to read), ``None`` if none."""

    contradictions: tuple[Contradiction, ...] = ()
    related: Retrieval | None = None
    evidence: Retrieval | None = None  # the relaxed search the first contradiction came from


def exactly_supported(pattern: Pattern, retrieval: Retrieval | None) -> bool:
    """Some subgraph matches the claim's pattern with every named node bound to its own name and every
    relation as written (GSD ≈ 0)."""
    if retrieval is None:
        return False
    named = {n.text for n in pattern.nodes if not n.unknown}
    return any(ev.gsd <= 1e-6 and all(names_match(b.pattern_node, b.entity) for b in ev.nodes
                                      if b.pattern_node in named) for ev in retrieval.evidence)


def check_claim(retriever: SubgraphRetriever, pattern: Pattern,
                settings: RetrievalSettings | None = None) -> ClaimCheck:
    """Search each fully named triple of ``pattern`` with one end left free (module docstring)."""
    stats = relation_functionality(retriever.store)
    relaxed = replace(settings or RetrievalSettings(), k=max((settings or RetrievalSettings()).k, RELAXED_K))
    found: list[Contradiction] = []
    related: Retrieval | None = None
    evidence: Retrieval | None = None
    unknown = {n.text for n in pattern.nodes if n.unknown}
    for head, relation, tail in pattern.triples():
        rel = retriever.nearest_relation(relation)
        if head in unknown or tail in unknown or rel is None or FREE in (head, tail):
            continue
        name = retriever.store.relations[rel]
        # what the KG holds on the claim's entity and relation is evidence only when the KG has both entities
        known = all(retriever.store.entity_id(x) is not None for x in (head, tail))
        for kept, other in ((head, tail), (tail, head)):
            try:
                retrieval = retriever.retrieve([[kept, relation, FREE]], relaxed)
            except PatternError:
                continue
            own = [ev for ev in retrieval.evidence if _binds(ev, kept, name)]
            if own and related is None and known:
                related = retrieval
            for side in ("head", "tail"):
                info = stats.get(rel)
                held = _contradicting([ev for ev in own if _side(ev, kept) == side], other)
                if held and info is not None and info.functional(side):
                    share = info.single_tail if side == "head" else info.single_head
                    found += [Contradiction((head, relation, tail), t, side, share) for t in held]
                    evidence = evidence or retrieval
    return ClaimCheck(tuple(dict.fromkeys(found))[:MAX_SHOWN], related, evidence)


def _binds(ev: Evidence, kept: str, relation: str) -> bool:
    """The match binds the kept end to the claim's own entity, over the claim's KG relation."""
    node = ev.binding(kept)
    return node is not None and names_match(kept, node.entity) and ev.edges[0].triple.relation == relation


def _side(ev: Evidence, kept: str) -> Side:
    """The side of the KG's triple the kept end is bound on."""
    node = ev.binding(kept)
    return "head" if node is not None and ev.edges[0].triple.head == node.entity else "tail"


def _contradicting(own: list[Evidence], other: str) -> list[Triple]:
    """The KG's facts in ``own`` when none of them has the claimed partner ``other`` (else none)."""
    partners = [(ev.edges[0].triple, ev.binding(FREE)) for ev in own]
    if any(b is not None and names_match(other, b.entity) for _, b in partners):
        return []  # the KG holds the claimed fact too (it was not among the claim's own matches)
    return list(dict.fromkeys(t for t, _ in partners))
