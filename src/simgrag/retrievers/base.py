"""What every retriever returns, and the protocol it implements.

A retriever answers "which part of the KG does the LLM need for this question?". SimGRAG does it
with a pattern graph; the others of the field (SubgraphRAG, GSR-style relation chains, KAPING,
G-Retriever's PCST, OKGQA's triplets and paths, and ``none``) each in their own way. They all
return a :class:`RetrievedContext` so that one reader, one set of metrics and one benchmark serve
them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from simgrag.kg.store import Triple

__all__ = ["RetrievedContext", "Retriever", "TopicEntities"]


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

    def entities(self) -> set[str]:
        """Every entity name that occurs in the context's triples and answer candidates."""
        names = {t.head for t in self.triples} | {t.tail for t in self.triples}
        return names | set(self.answer_candidates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "retriever": self.retriever, "question": self.question,
            "triples": [list(t.as_tuple()) for t in self.triples],
            "topic": None if self.topic is None else {
                "names": list(self.topic.names), "source": self.topic.source,
                "distances": list(self.topic.distances)},
            "paths": [[list(t.as_tuple()) for t in path] for path in self.paths],
            "answer_candidates": list(self.answer_candidates), "scores": list(self.scores),
            "timings": self.timings, "info": self.info,
        }


@runtime_checkable
class Retriever(Protocol):
    """``retrieve(question, topic_entities=None)``: ``topic_entities`` are entity names the caller
    already knows (e.g. MetaQA's bracketed entity); without them the retriever links entities itself
    when it needs them."""

    name: str

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext: ...
