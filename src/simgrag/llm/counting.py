"""An LLM wrapper that counts calls and the seconds spent in them (benchmarks report LLM calls per question
with it; the bootstrap and learning bound their LLM work with it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from simgrag.llm.base import LLM, BaseLLM, ChatMessage, CompletionRequest, LLMResponse

__all__ = ["CountingLLM"]


class CountingLLM(BaseLLM):
    """Forwards to ``inner`` and counts ``complete`` calls and seeded samples (``calls``) and their wall seconds
    (``seconds``, failed calls included); other attributes (``load``, …) are the inner's."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.seconds = 0.0

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        self.calls += 1
        start = time.perf_counter()
        try:
            return request.send(self.inner)
        finally:
            self.seconds += time.perf_counter() - start

    def sample(self, messages: Sequence[ChatMessage], seeds: Sequence[int], *, temperature: float,
               max_tokens: int = 256) -> list[LLMResponse]:
        """The inner model's seeded samples (:class:`~simgrag.llm.base.SamplesText`), one call counted per seed."""
        self.calls += len(seeds)
        start = time.perf_counter()
        try:
            return list(self.inner.sample(messages, seeds, temperature=temperature,  # type: ignore[attr-defined]
                                          max_tokens=max_tokens))
        finally:
            self.seconds += time.perf_counter() - start
