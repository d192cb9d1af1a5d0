"""Retrievers of the field behind one protocol: SimGRAG, SubgraphRAG, GSR, KAPING, PCST, OKGQA paths, none.

:func:`resolve_retriever` builds one by name (:func:`list_retrievers` lists them) and
:func:`read_context` is the LLM reading step they share (:func:`verify_context` the verifying
one). Names other than the protocol's are imported lazily, so importing the protocol stays cheap.
"""

from __future__ import annotations

from typing import Any

from simgrag._lazy import load_export
from simgrag.retrievers.base import RetrievedContext, Retriever, TopicEntities

_EXPORTS = {
    "EntityLinker": "simgrag.retrievers.linking",
    "KapingRetriever": "simgrag.retrievers.kaping",
    "PCSTRetriever": "simgrag.retrievers.pcst",
    "TripletRetriever": "simgrag.retrievers.paths",
    "PathRetriever": "simgrag.retrievers.paths",
    "NoRetriever": "simgrag.retrievers.none",
    "SimGRAGRetriever": "simgrag.retrievers.simgrag_adapter",
    "Reading": "simgrag.retrievers.reader",
    "read_context": "simgrag.retrievers.reader",
    "ContextVerdict": "simgrag.retrievers.verifier",
    "verify_context": "simgrag.retrievers.verifier",
    "resolve_retriever": "simgrag.retrievers.registry",
    "list_retrievers": "simgrag.retrievers.registry",
}

__all__ = ["RetrievedContext", "Retriever", "TopicEntities", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name)


def __dir__() -> list[str]:
    return sorted(__all__)
