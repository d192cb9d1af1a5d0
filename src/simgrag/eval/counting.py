"""LLM calls per question: a counting wrapper around any LLM, and an engine that records the count.

>>> engine = CountingSimGRAG("movies.idx", llm=CountingLLM(resolve_llm("llamacpp")))   # doctest: +SKIP
>>> engine.ask("who directed Inception").timings["llm_calls"]                          # doctest: +SKIP
1.0

The count is every ``complete`` call the engine made for the question (pattern attempts, checks,
candidate patterns, the answer), whether or not a response cache answered it. It travels in
``AskResult.timings["llm_calls"]`` (a count, not seconds) so that benchmark rows, which copy the
timings, keep it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from simgrag.llm.base import LLM, ChatMessage, LLMResponse
from simgrag.pipeline import AskResult, SimGRAG

__all__ = ["CountingLLM", "CountingSimGRAG"]


class CountingLLM:
    """Forwards to ``inner`` and counts the calls; other attributes (``load``, …) are the inner model's."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def complete(self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, stop: Sequence[str] | None = None) -> LLMResponse:
        self.calls += 1
        return self.inner.complete(messages, json_schema=json_schema, max_tokens=max_tokens,
                                   temperature=temperature, stop=stop)


class CountingSimGRAG(SimGRAG):
    """A :class:`SimGRAG` whose answers carry the number of LLM calls in ``timings["llm_calls"]``;
    ``calls_by_question`` also keeps the count of questions that raised (e.g. no valid pattern)."""

    def __init__(self, index: Any, *, llm: CountingLLM, **options: Any) -> None:
        super().__init__(index, llm=llm, **options)
        self.counter = llm
        self.calls_by_question: dict[str, int] = {}

    def ask(self, question: str, *, topic_entities: Sequence[str] | None = None, k: int | None = None,
            deadline_s: float | None = None) -> AskResult:
        before = self.counter.calls
        try:
            result = super().ask(question, topic_entities=topic_entities, k=k, deadline_s=deadline_s)
        finally:
            self.calls_by_question[question] = self.counter.calls - before
        return replace(result, timings={**result.timings, "llm_calls": float(self.counter.calls - before)})
