"""What every retriever returns, the protocol it implements, and the optional capabilities.

A retriever answers "which part of the KG does the LLM need for this question?". SimGRAG does it
with a pattern graph; the others of the field (SubgraphRAG, GSR-style relation chains, KAPING,
G-Retriever's PCST, OKGQA's triplets and paths, and ``none``) each in their own way. They all
return a :class:`RetrievedContext` so that one answerer (:mod:`simgrag.answer.answerer`), one set of
metrics and one benchmark serve them all.

Optional capabilities, each a small protocol checked with ``isinstance``:

- :class:`ClaimRetriever`: retrieves for a *claim* in its own way (SimGRAG writes a claim's pattern
  with claim examples); any other retriever gets the claim's text as its question.
- :class:`AdjustableRetriever`: a copy with some settings changed for one call (``k``, a deadline).
- :class:`PatternRetriever`: writes a pattern graph and returns matched subgraphs with their graph
  semantic distances (SimGRAG); what GSD-based abstention and the exact-match answer mode need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from simgrag.kg.store import Triple
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.generate import PatternResult

__all__ = [
    "AdjustableRetriever",
    "ClaimRetriever",
    "PatternRetriever",
    "PatternStage",
    "RetrievedContext",
    "Retriever",
    "TopicEntities",
]


@dataclass(frozen=True)
class TopicEntities:
    """The question's topic entities and where they came from: ``given`` by the caller (MetaQA marks
    them) or ``linked`` by vector search over entity names. ``distances``: link distances (0 when given
    or matched exactly)."""

    names: tuple[str, ...]
    ids: tuple[int, ...]
    source: Literal["given", "linked"]
    distances: tuple[float, ...] = ()


@dataclass(frozen=True)
class RetrievedContext:
    """The KG context one retriever found for one question.

    ``triples``: what the reader sees, in the KG's orientation, most relevant first. ``paths``: for
    path retrievers, each path as its triples. ``answer_candidates``: entities the retriever itself
    proposes as answers (GSR's chain ends, SimGRAG's bindings), best first. ``scores``: one relevance
    score per triple when the method has one. ``timings``: seconds per stage. ``info``: anything
    method-specific worth logging (e.g. the relation chain GSR decoded).

    A pattern retriever (SimGRAG) also fills ``pattern`` (the pattern graph it matched, with the
    changes made to it with the KG's help in ``kg_repairs``) and ``subgraphs`` (the matched subgraphs:
    bindings of every pattern node and edge, with their distances and GSD); ``triples`` are then the
    subgraphs' triples, best GSD first.
    """

    retriever: str
    question: str
    triples: tuple[Triple, ...]
    topic: TopicEntities | None = None
    paths: tuple[tuple[Triple, ...], ...] = ()
    answer_candidates: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    pattern: PatternResult | None = None
    subgraphs: Retrieval | None = None

    def entities(self) -> set[str]:
        """Every entity name that occurs in the context's triples and answer candidates."""
        names = {t.head for t in self.triples} | {t.tail for t in self.triples}
        return names | set(self.answer_candidates)

    def to_dict(self, *, subgraphs: bool = True) -> dict[str, Any]:
        """A JSON-ready view; ``subgraphs=False`` leaves the matched subgraphs out (a result that shows
        them as its evidence already)."""
        found = self.pattern
        return {
            "retriever": self.retriever, "question": self.question,
            "triples": [list(t.as_tuple()) for t in self.triples],
            "topic": None if self.topic is None else {
                "names": list(self.topic.names), "source": self.topic.source,
                "distances": list(self.topic.distances)},
            "paths": [[list(t.as_tuple()) for t in path] for path in self.paths],
            "answer_candidates": list(self.answer_candidates), "scores": list(self.scores),
            "timings": self.timings, "info": self.info,
            "pattern": None if found is None else [list(t) for t in found.pattern.triples()],
            "pattern_kg_repairs": [] if found is None else list(found.kg_repairs),
            **({"subgraphs": None if self.subgraphs is None else self.subgraphs.to_dict()} if subgraphs else {}),
        }


@runtime_checkable
class Retriever(Protocol):
    """``retrieve(question, topic_entities=None)``: ``topic_entities`` are entity names the caller
    already knows (e.g. MetaQA's bracketed entity); without them the retriever links entities itself
    when it needs them."""

    name: str

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext: ...


@runtime_checkable
class ClaimRetriever(Protocol):
    """Retrieves for a claim (a statement to verify) differently from a question."""

    def retrieve_claim(self, claim: str) -> RetrievedContext: ...


@runtime_checkable
class AdjustableRetriever(Protocol):
    """Can make a copy with some settings changed for one call. ``adjusted`` raises
    :class:`~simgrag.errors.ConfigError` for a setting it does not have; ``adjustable`` names the ones
    it has (e.g. ``{"k", "deadline_s"}``)."""

    adjustable: frozenset[str]

    def adjusted(self, **settings: Any) -> Retriever: ...


@runtime_checkable
class PatternStage(Protocol):
    """Text → pattern graph: the step of a pattern retriever that a caller may swap (e.g. for one that
    writes several candidate patterns and lets the KG judge them). Raises
    :class:`~simgrag.errors.PatternError` when no valid pattern comes out."""

    def pattern(self, text: str) -> PatternResult: ...


@runtime_checkable
class PatternRetriever(Protocol):
    """A retriever whose contexts carry a pattern and matched subgraphs with GSDs (SimGRAG)."""

    patterns: PatternStage
