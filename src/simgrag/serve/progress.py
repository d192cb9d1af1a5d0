"""Stage events of one /v1/ask or /v1/verify call, for ``"stream": true`` (NDJSON, one event a line).

The facade has no progress hook, so the server observes the stages from outside: the request runs on
a shallow copy of the chosen engine whose retriever is wrapped (:func:`observed`). Entering the
retriever starts ``pattern`` (or ``retrieve`` for a retriever without one); the retriever's call to
its subgraph search starts ``search``; its return starts ``answer`` (``verify`` for a claim). Nothing
is shared with other requests: the copy, the wrapper and a copy of the retriever are per request.

Events, each a JSON object on its own line, in this order::

    {"event": "stage", "stage": "queued", "label": "waiting for the LLM (1 ahead)", "elapsed_s": 0.0}
    {"event": "stage", "stage": "question", "label": "reading the question", "elapsed_s": 0.01}
    {"event": "stage", "stage": "pattern", ...}  {"event": "stage", "stage": "search", ...}
    {"event": "stage", "stage": "answer", ...}
    {"event": "result", "elapsed_s": 1.2, "result": {...the non-streaming response body...}}

or, in place of the result, ``{"event": "error", "status": 422, "error": {...the error body...}}``.
``elapsed_s`` counts from the request's arrival. ``queued`` comes only when others were waiting.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from simgrag.pipeline import SimGRAG

__all__ = ["LABELS", "Emit", "observed", "stage_event"]

Emit = Callable[[str], None]

#: what the page says while a stage runs
LABELS = {
    "queued": "waiting for the LLM",
    "question": "reading the question",
    "claim": "reading the claim",
    "pattern": "writing the pattern graph",
    "retrieve": "retrieving triples",
    "search": "searching the KG for matching subgraphs",
    "answer": "answering from the evidence",
    "verify": "checking the claim against the evidence",
}


def observed(engine: SimGRAG, emit: Emit, *, claim: bool = False) -> SimGRAG:
    """A shallow copy of ``engine`` whose retriever reports its stages to ``emit(stage)``."""
    return engine.with_retriever(_ObservedRetriever(engine.retriever, emit, "verify" if claim else "answer"))


class _ObservedSearch:
    """A subgraph search that says ``search`` when it starts."""

    def __init__(self, inner: Any, emit: Emit) -> None:
        self._inner, self._emit = inner, emit

    def retrieve(self, *args: Any, **kwargs: Any) -> Any:
        self._emit("search")
        return self._inner.retrieve(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _ObservedRetriever:
    """A retriever that says ``pattern``/``retrieve`` on entry and ``answer``/``verify`` on return. Only
    the optional protocols the wrapped one has (``retrieve_claim``, ``adjusted``) are offered."""

    def __init__(self, inner: Any, emit: Emit, then: str) -> None:
        self._inner, self._emit, self._then = inner, emit, then
        self.name = inner.name
        # instance attributes, not __getattr__: protocol checks may look them up statically (Python 3.12)
        if hasattr(inner, "retrieve_claim"):
            self.retrieve_claim = lambda claim: self._run("retrieve_claim", claim)
        if hasattr(inner, "adjusted") and hasattr(inner, "adjustable"):
            self.adjustable = inner.adjustable
            self.adjusted = lambda **settings: _ObservedRetriever(inner.adjusted(**settings), emit, then)

    def _run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        inner = self._inner
        has_pattern = hasattr(inner, "patterns") and hasattr(inner, "subgraphs")
        if has_pattern:  # its own copy, so the search it calls says when it starts
            inner = copy.copy(inner)
            inner.subgraphs = _ObservedSearch(inner.subgraphs, self._emit)
        self._emit("pattern" if has_pattern else "retrieve")
        found = getattr(inner, method)(*args, **kwargs)
        self._emit(self._then)
        return found

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Any:
        return self._run("retrieve", question, topic_entities=topic_entities)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def stage_event(stage: str, started: float, detail: str | None = None) -> dict[str, Any]:
    """One ``stage`` event; ``started``: the request's arrival (:func:`time.monotonic`)."""
    label = LABELS.get(stage, stage) + (f" ({detail})" if detail else "")
    return {"event": "stage", "stage": stage, "label": label, "elapsed_s": round(time.monotonic() - started, 3)}
