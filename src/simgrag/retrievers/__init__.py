"""Retrievers of the field behind one protocol: SimGRAG, SubgraphRAG, GSR, KAPING, PCST, OKGQA paths, none."""

from simgrag.retrievers.base import RetrievedContext, Retriever, TopicEntities

__all__ = ["RetrievedContext", "Retriever", "TopicEntities"]
