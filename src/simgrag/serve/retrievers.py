"""The other retrievers behind /v1/ask and /v1/verify, answered in SimGRAG's response shape.

``simgrag`` is the engine's own path (pattern → subgraphs → answer/verdict). Any other registered
retriever (:mod:`simgrag.retrievers.registry`) retrieves for the question or claim, then the shared
reader (:func:`~simgrag.retrievers.reader.read_context`) answers, or SimGRAG's verification prompt
(:func:`~simgrag.retrievers.verifier.verify_context`) judges. A :class:`RetrieverPool` holds the
names the server allows, builds each retriever on first use and keeps it.

Mapping of a :class:`~simgrag.retrievers.base.RetrievedContext` onto the SimGRAG response:

- ``pattern`` is ``[]`` and ``pattern_attempts`` 0: these retrievers write no pattern graph.
- ``evidence.matches``: one match per path for a path retriever, else one match holding every
  triple of the context (most relevant first); ``rank`` from 1, ``gsd`` 0 (no graph semantic
  distance is measured); ``evidence.algorithm`` is the retriever's name.
- a match's ``nodes`` are the entities of its triples, each its own ``pattern_node``; ``distance``
  is the link distance for a topic entity, else 0. Its ``edges`` carry the KG triple and id
  (-1 if the KG has no such triple), ``pattern`` ``[]``, ``distance`` 0 and the retriever's
  ``score`` when it has one.
- ``candidates`` are the retriever's own answer candidates; ``asked_node`` is ``None``.
- ``timings``: the retriever's stages, ``retrieve_s`` (its total), ``answer_s`` or ``verify_s``
  (the LLM) and ``total_s``; ``retriever`` names the retriever and ``context`` is the full
  :meth:`RetrievedContext.to_dict`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from simgrag.errors import ConfigError, SimGRAGError
from simgrag.kg.store import KGStore, Triple
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import RetrievedContext, Retriever
from simgrag.retrievers.reader import read_context
from simgrag.retrievers.registry import default_style, list_retrievers, resolve_retriever
from simgrag.retrievers.verifier import verify_context

__all__ = ["RetrieverChoiceError", "RetrieverPool", "ask_response", "evidence_of", "verify_response"]


class RetrieverChoiceError(SimGRAGError):
    """The request named a retriever this server does not offer (or cannot build)."""


class RetrieverPool:
    """The retrievers a server offers: ``default`` for requests that name none, ``allowed`` names
    (default: every registered one), ``options`` per name (e.g. ``{"gsr": {"model": DIR}}``)."""

    def __init__(self, default: str = "simgrag", allowed: Sequence[str] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        known = [e.name for e in list_retrievers()]
        self.default = default.strip().lower()
        self.allowed = tuple(n.strip().lower() for n in allowed) if allowed else tuple(known)
        unknown = [n for n in {self.default, *self.allowed} if n not in known]
        if unknown:
            raise ConfigError(f"Unknown retriever(s) {', '.join(sorted(unknown))}; known: {', '.join(known)}.")
        if self.default not in self.allowed:
            self.allowed = (self.default, *self.allowed)
        self.options = {k.strip().lower(): dict(v) for k, v in (options or {}).items()}
        self._built: dict[str, Retriever] = {}
        self._lock = threading.Lock()

    def name_for(self, requested: str | None) -> str:
        """The retriever a request uses: its own ``retriever`` field, else the default."""
        if requested is None or not requested.strip():
            return self.default
        name = requested.strip().lower()
        if name not in self.allowed:
            raise RetrieverChoiceError(f"unknown retriever {requested!r}; this server offers: "
                                       f"{', '.join(self.allowed)}")
        return name

    def get(self, name: str, engine: SimGRAG) -> Retriever:
        """Retriever ``name`` (not ``simgrag``: that is the engine's own path), built once."""
        with self._lock:
            if name not in self._built:
                try:
                    self._built[name] = resolve_retriever(name, index=engine.index, engine=engine,
                                                          **self.options.get(name, {}))
                except ConfigError as exc:
                    raise RetrieverChoiceError(f"retriever {name!r} is not available on this server: {exc}") from exc
            return self._built[name]

    def prepare(self, engine: SimGRAG) -> None:
        """Build the default retriever now (at start-up), so a bad one fails the health check."""
        if self.default != "simgrag":
            self.get(self.default, engine)


def ask_response(retriever: Retriever, engine: SimGRAG, question: str) -> dict[str, Any]:
    """Retrieve, read, and shape the result as an ``AskResponse`` body (see the module docstring)."""
    t0 = time.perf_counter()
    context = retriever.retrieve(question)
    reading = read_context(engine.llm, context, style=default_style(retriever.name))
    reason = f"read by the {reading.style!r} reader over {reading.context_items} context line(s)"
    return {
        "question": question, "entities": list(reading.entities), "candidates": list(context.answer_candidates),
        "short_answer": reading.entities[0] if reading.entities else None, "asked_node": None,
        "text": reading.text, "abstained": False, "reason": reason,
        **_common(engine.index.store, context, reading, "answer_s", t0),
    }


def verify_response(retriever: Retriever, engine: SimGRAG, claim: str) -> dict[str, Any]:
    """Retrieve for the claim, verify, and shape the result as a ``VerifyResponse`` body."""
    t0 = time.perf_counter()
    context = retriever.retrieve(claim)
    verdict = verify_context(engine.llm, claim, context)
    return {
        "claim": claim, "label": verdict.label, "label_binary": verdict.label_binary, "text": verdict.text,
        "abstained": verdict.abstained, "reason": verdict.reason,
        **_common(engine.index.store, context, verdict, "verify_s", t0),
    }


def _common(store: KGStore, context: RetrievedContext, llm_result: Any, llm_stage: str, t0: float) -> dict[str, Any]:
    timings = {k: v for k, v in context.timings.items() if k != "total_s"}
    timings["retrieve_s"] = context.timings.get("total_s", sum(timings.values()))
    timings[llm_stage] = llm_result.latency_s
    timings["total_s"] = time.perf_counter() - t0
    return {
        "retriever": context.retriever, "pattern": [], "pattern_attempts": 0, "pattern_kg_repairs": [],
        "timings": timings, "prompt_tokens": llm_result.prompt_tokens,
        "completion_tokens": llm_result.completion_tokens, "latency_s": llm_result.latency_s,
        "cached": llm_result.cached, "evidence": evidence_of(store, context), "context": context.to_dict(),
    }


def evidence_of(store: KGStore, context: RetrievedContext) -> dict[str, Any]:
    """A context as a ``RetrieveResponse`` body (see the module docstring)."""
    score = dict(zip(context.triples, context.scores, strict=False))
    groups = [list(p) for p in context.paths] if context.paths else ([list(context.triples)] if context.triples else [])
    link = dict(zip(context.topic.names, context.topic.distances, strict=False)) if context.topic else {}
    matches = [_match(store, rank, triples, score, link) for rank, triples in enumerate(groups, start=1)]
    return {"pattern": [], "complete": True, "lower_bound": None, "algorithm": context.retriever,
            "combination": "", "timings": dict(context.timings), "candidate_counts": {"triples": len(context.triples)},
            "steps": 0, "matches": matches}


def _match(store: KGStore, rank: int, triples: Sequence[Triple], score: Mapping[Triple, float],
           link: Mapping[str, float]) -> dict[str, Any]:
    names = list(dict.fromkeys(n for t in triples for n in (t.head, t.tail)))
    nodes = [{"pattern_node": n, "entity": n, "entity_id": _id(store.entities.id_of(n)),
              "distance": float(link.get(n, 0.0)), "unknown": False} for n in names]
    edges = [{"pattern": [], "triple": list(t.as_tuple()), "triple_id": _triple_id(store, t), "distance": 0.0,
              "score": score.get(t)} for t in dict.fromkeys(triples)]
    return {"rank": rank, "gsd": 0.0, "nodes": nodes, "edges": edges}


def _id(value: int | None) -> int:
    return -1 if value is None else int(value)


def _triple_id(store: KGStore, triple: Triple) -> int:
    """The KG id of ``triple`` (looked up through the head's adjacency), -1 if absent."""
    head, tail = store.entities.id_of(triple.head), store.entities.id_of(triple.tail)
    rel = store.relations.id_of(triple.relation)
    if head is None or tail is None or rel is None:
        return -1
    nbrs, rels, tids = store.neighbors(head)
    for nbr, r, tid in zip(nbrs.tolist(), rels.tolist(), tids.tolist(), strict=True):
        if nbr == tail and r == rel and int(store.heads[tid]) == head:
            return int(tid)
    return -1
