"""Claim verification over any retriever's context, with SimGRAG's verification prompt.

The prompt is :func:`simgrag.answer.verify.verify_messages` (the same rules and worked examples as
SimGRAG's own verifier) and the reply is read by :func:`simgrag.answer.verify.parse_verdict`. Only
the evidence differs: the retriever's triples, written as :mod:`simgrag.answer.verbalize` writes
subgraphs. A context with paths (OKGQA's ``paths``) shows each path as one ``graph [i]``; any other
context is a flat list of triples, one per line (the compact form), most relevant first::

    (Titanic, directed_by, James Cameron)
    (Titanic, starred_actors, Leonardo DiCaprio)

The claim stands in for the question: a retriever that needs topic entities links them from the
claim text. An empty context gives "Not enough evidence" without calling the LLM, as SimGRAG's
verifier does when no subgraph matched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from simgrag.answer._common import call_llm
from simgrag.answer.verbalize import verbalize_graphs
from simgrag.answer.verify import NOT_ENOUGH, SUPPORTED, VERDICT_SCHEMA, Label, parse_verdict, verify_messages
from simgrag.llm.base import LLM
from simgrag.retrievers.base import RetrievedContext, Retriever

__all__ = ["ContextVerdict", "context_evidence", "verify_context", "verify_with"]


@dataclass(frozen=True)
class ContextVerdict:
    """The verdict on one claim over one retriever's context. ``label``: Supported, Refuted or Not
    enough evidence; ``timings``: the retriever's stages plus ``verify_s`` (the LLM call)."""

    label: Label
    text: str
    context: RetrievedContext
    abstained: bool
    reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    evidence_items: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def label_binary(self) -> Literal["Supported", "Refuted"]:
        """Supported or Refuted; "Not enough evidence" counts as Refuted (as FactKG scores it)."""
        return "Supported" if self.label == SUPPORTED else "Refuted"

    @property
    def supported(self) -> bool:
        return self.label == SUPPORTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "label_binary": self.label_binary, "text": self.text,
            "abstained": self.abstained, "reason": self.reason, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "latency_s": self.latency_s, "cached": self.cached,
            "evidence_items": self.evidence_items, "timings": self.timings, "context": self.context.to_dict(),
        }


def context_evidence(context: RetrievedContext, *, max_triples: int = 100) -> tuple[str, int]:
    """The evidence block for ``context`` (see the module docstring) and how many paths or triples
    it holds (at most ``max_triples``); ``("", 0)`` for an empty context."""
    if context.paths:
        paths = [[t.as_tuple() for t in path] for path in context.paths[:max_triples]]
        return verbalize_graphs(paths), len(paths)
    triples = [t.as_tuple() for t in context.triples[:max_triples]]
    return verbalize_graphs([triples], compact=True), len(triples)


def verify_context(llm: LLM, claim: str, context: RetrievedContext, *, max_triples: int = 100,
                   max_tokens: int = 32, use_json_schema: bool = False) -> ContextVerdict:
    """Verify ``claim`` against ``context`` (retrieved for the claim's text) with SimGRAG's prompt.

    An unreadable reply gives "Not enough evidence" with ``abstained=False`` and a reason saying so.
    LLM failures propagate as :class:`~simgrag.errors.LLMError`.
    """
    evidence, items = context_evidence(context, max_triples=max_triples)
    if not items:
        return ContextVerdict(NOT_ENOUGH, "not found in the KG", context, True,
                              f"the {context.retriever} retriever found no triples", timings=dict(context.timings))
    t0 = time.perf_counter()
    # the worked examples in the evidence's own form: graphs for paths, else the compact list
    messages = verify_messages(claim, evidence, compact=not context.paths, use_json_schema=use_json_schema)
    response = call_llm(llm, messages, task=f"verify ({context.retriever})", max_tokens=max_tokens,
                        json_schema=VERDICT_SCHEMA if use_json_schema else None)
    latency = response.latency_s or (time.perf_counter() - t0)
    text = response.text.strip()
    label = parse_verdict(text)
    why = "verdict read from the reply" if label is not None else "the reply holds no verdict"
    return ContextVerdict(label or NOT_ENOUGH, text, context, False, why, response.prompt_tokens,
                          response.completion_tokens, latency, response.cached, items,
                          {**context.timings, "verify_s": latency})


def verify_with(retriever: Retriever, llm: LLM, claim: str, *, topic_entities: Sequence[str] | None = None,
                **options: Any) -> ContextVerdict:
    """Retrieve for ``claim`` with ``retriever`` (linking its entities unless given), then
    :func:`verify_context` (``options`` go to it)."""
    context = retriever.retrieve(claim, topic_entities=topic_entities)
    return verify_context(llm, claim, context, **options)
