"""An LLM wrapper that counts calls (benchmarks report LLM calls per question with it; the bootstrap bounds
its LLM work with it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simgrag.llm.base import LLM, ChatMessage, LLMResponse

__all__ = ["CountingLLM"]


class CountingLLM:
    """Forwards to ``inner`` and counts ``complete`` calls; other attributes (``load``, …) are the inner's."""

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
