"""An LLM wrapper that counts calls (benchmarks report LLM calls per question with it; the bootstrap bounds
its LLM work with it)."""

from __future__ import annotations

from typing import Any

from simgrag.llm.base import LLM, BaseLLM, CompletionRequest, LLMResponse

__all__ = ["CountingLLM"]


class CountingLLM(BaseLLM):
    """Forwards to ``inner`` and counts ``complete`` calls; other attributes (``load``, …) are the inner's."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        self.calls += 1
        return request.send(self.inner)
