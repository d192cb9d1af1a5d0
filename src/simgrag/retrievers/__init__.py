"""Retrievers of the field behind one protocol: SimGRAG, SubgraphRAG, GSR, KAPING, PCST, OKGQA paths, none.

:func:`resolve_retriever` builds one by name (:func:`list_retrievers` lists them); the answerer that
reads any of their contexts is :mod:`simgrag.answer.answerer`. Names other than the protocol's are
imported lazily, so importing the protocol stays cheap.
"""

from __future__ import annotations

from simgrag._lazy import lazy_exports
from simgrag.retrievers.base import (
    AdjustableRetriever,
    ClaimRetriever,
    PatternRetriever,
    PatternStage,
    RetrievedContext,
    Retriever,
    TopicEntities,
)

_EXPORTS = {
    "EntityLinker": "simgrag.retrievers.linking",
    "KapingRetriever": "simgrag.retrievers.kaping",
    "PCSTRetriever": "simgrag.retrievers.pcst",
    "TripletRetriever": "simgrag.retrievers.paths",
    "PathRetriever": "simgrag.retrievers.paths",
    "NoRetriever": "simgrag.retrievers.none",
    "SimGRAGRetriever": "simgrag.retrievers.simgrag",
    "LLMPatternStage": "simgrag.retrievers.simgrag",
    "RETRIEVERS": "simgrag.retrievers.registry",
    "resolve_retriever": "simgrag.retrievers.registry",
    "list_retrievers": "simgrag.retrievers.registry",
}

__all__ = ["AdjustableRetriever", "ClaimRetriever", "PatternRetriever", "PatternStage", "RetrievedContext",
           "Retriever", "TopicEntities", *sorted(_EXPORTS)]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
