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

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from simgrag.llm.counting import CountingLLM
from simgrag.pipeline import AskResult, SimGRAG

__all__ = ["CountingLLM", "CountingSimGRAG"]


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
