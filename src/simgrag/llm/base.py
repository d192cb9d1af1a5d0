"""The LLM protocol: chat messages in, text out, with optional JSON-schema constrained decoding."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["LLM", "ChatMessage", "LLMResponse"]


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class LLMResponse:
    """One completion. A lone surrogate in ``text`` (a server's JSON escape ``\\ud800``, a decoding
    accident) becomes U+FFFD: the text always encodes, in prompts, logs and HTTP responses."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.text, str) and not self.text.isascii() and _SURROGATE.search(self.text):
            object.__setattr__(self, "text", _SURROGATE.sub("\ufffd", self.text))


@runtime_checkable
class LLM(Protocol):
    """A chat model. ``name`` is ``backend:model`` (e.g. ``llamacpp:qwen2.5-coder-1.5b-instruct-q4_k_m``)."""

    name: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> LLMResponse:
        """One chat completion. With ``json_schema`` the backend constrains decoding to it where it
        can (llama.cpp grammar, OpenAI ``response_format``, Ollama ``format``). Raises
        :class:`simgrag.errors.LLMError` subclasses on failure."""
        ...
