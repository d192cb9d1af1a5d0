"""Shared by QA and verification: the abstention rule and the LLM call with logging."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from simgrag.llm.base import LLM, ChatMessage, LLMResponse
from simgrag.match.retrieve import Retrieval

__all__ = ["abstain_reason", "best_gsd", "call_llm"]

logger = logging.getLogger("simgrag.answer")


def best_gsd(retrieval: Retrieval) -> float | None:
    """The smallest GSD among the retrieved subgraphs, ``None`` without evidence."""
    return min((ev.gsd for ev in retrieval.evidence), default=None)


def abstain_reason(retrieval: Retrieval, abstain_gsd: float | None) -> str | None:
    """Why to answer "not found" without asking the LLM, or ``None`` to go on.

    Abstain when nothing was retrieved, or when ``abstain_gsd`` is set and even the best subgraph's
    GSD is above it (the KG holds nothing close enough to the pattern).
    """
    best = best_gsd(retrieval)
    if best is None:
        return "no subgraph matched the pattern"
    if abstain_gsd is not None and best > abstain_gsd:
        return f"best GSD {best:.3f} is above abstain_gsd={abstain_gsd:g}"
    return None


def call_llm(llm: LLM, messages: Sequence[ChatMessage], *, task: str, max_tokens: int,
             json_schema: Mapping[str, Any] | None = None, stop: Sequence[str] | None = None) -> LLMResponse:
    """``llm.complete`` at temperature 0, logging tokens and latency (the prompt at DEBUG)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s prompt:\n%s", task, "\n".join(f"[{m.role}] {m.content}" for m in messages))
    response = llm.complete(messages, json_schema=json_schema, max_tokens=max_tokens, temperature=0.0,
                            stop=stop)
    logger.info("%s: %s, %d prompt + %d completion tokens, %.2fs%s", task, llm.name, response.prompt_tokens,
                response.completion_tokens, response.latency_s, " (cached)" if response.cached else "")
    logger.debug("%s output: %r", task, response.text)
    return response
