"""No retrieval: the LLM alone (SubgraphRAG App. C, Table 9's "NoRetriever"; SimGRAG Table 1's
"LLM only"). The reader's ``"none"`` style asks the question without any KG context."""

from __future__ import annotations

from collections.abc import Sequence

from simgrag.index.directory import IndexDir
from simgrag.retrievers.base import RetrievedContext

__all__ = ["NoRetriever"]


class NoRetriever:
    """Returns an empty context for every question."""

    name = "none"

    def __init__(self, index: IndexDir | None = None) -> None:
        self.index = index

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        """An empty context (``topic_entities`` are ignored)."""
        return RetrievedContext(retriever=self.name, question=question, triples=(), timings={"total_s": 0.0})
