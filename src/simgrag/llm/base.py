"""The LLM protocol: chat messages in, text out, with optional JSON-schema constrained decoding; and
the optional capabilities some backends add, each a small protocol checked with ``isinstance``."""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "LLM", "BaseLLM", "ChatMessage", "CompletionRequest", "LLMResponse", "LoadsWeights", "SamplesText", "ScoresText",
    "SlowSchemaDecoding", "log_response", "samples_text", "schema_by_default", "scores_text",
]


@dataclass(frozen=True)
class ChatMessage:
    """One chat message. ``cache_after``: the prompt up to and including this message is shared by many
    calls (the fixed few-shot part): a backend that keeps prompt states may keep this one (the embedded
    llama.cpp backend saves it to its KV store; others ignore the hint)."""

    role: str  # "system" | "user" | "assistant"
    content: str
    cache_after: bool = False


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


@dataclass(frozen=True)
class CompletionRequest:
    """One call of :meth:`LLM.complete`, its arguments as a value: ``stop`` is ``None`` when empty. ``seed``: the
    sampler's seed of one of :meth:`SamplesText.sample`'s replies (``None``: the backend's own; :meth:`send` does
    not pass it, the :class:`LLM` protocol has none)."""

    messages: tuple[ChatMessage, ...]
    json_schema: Mapping[str, Any] | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] | None = None
    seed: int | None = None

    @property
    def prompt(self) -> str:
        """All message contents joined by newlines (handy for logs and ``in`` assertions)."""
        return "\n".join(m.content for m in self.messages)

    def send(self, llm: LLM) -> LLMResponse:
        """This call made on ``llm`` (any :class:`LLM`: wrappers forward requests with it)."""
        return llm.complete(self.messages, json_schema=self.json_schema, max_tokens=self.max_tokens,
                            temperature=self.temperature, stop=self.stop)


class BaseLLM(ABC):
    """The bundled backends' and wrappers' common base: :meth:`complete` has the one public signature
    of :class:`LLM` and hands a :class:`CompletionRequest` to :meth:`_complete`. Subclassing it is not
    required: anything with ``name`` and a ``complete`` of that signature is an :class:`LLM`."""

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
        """One chat completion; see :class:`LLM`."""
        stops = tuple(stop) if stop else None
        return self._complete(CompletionRequest(tuple(messages), json_schema, max_tokens, temperature, stops))

    @abstractmethod
    def _complete(self, request: CompletionRequest) -> LLMResponse:
        """The completion of ``request``."""


def log_response(logger: logging.Logger, name: str, response: LLMResponse) -> None:
    """The backends' log lines of one completion: tokens and latency at INFO, the text at DEBUG."""
    logger.info(
        "%s: %d prompt + %d completion tokens in %.2f s",
        name, response.prompt_tokens, response.completion_tokens, response.latency_s,
    )
    logger.debug("%s output: %s", name, response.text)


@runtime_checkable
class LoadsWeights(Protocol):
    """An in-process model that can load its weights now rather than on the first call (llama.cpp)."""

    def load(self) -> None: ...


@runtime_checkable
class SlowSchemaDecoding(Protocol):
    """A backend that says whether JSON-schema constrained decoding is slow on it: on the embedded
    llama.cpp model grammar sampling over a 151K-token vocabulary cut decoding from ~13 to ~8 tokens/s
    on 2 CPU cores, so callers prefer plain output plus parse → repair → retry there."""

    @property
    def schema_decoding_slow(self) -> bool: ...


def schema_by_default(llm: LLM) -> bool:
    """Whether to ask ``llm`` for schema-constrained output when the caller did not say: yes, unless
    the backend declares constrained decoding slow (:class:`SlowSchemaDecoding`)."""
    return not (isinstance(llm, SlowSchemaDecoding) and llm.schema_decoding_slow)


@runtime_checkable
class ScoresText(Protocol):
    """A backend that gives the log-likelihood of a text, not only a sampled continuation (the embedded
    llama.cpp model): ``score_continuations(prefix, items)`` returns, per ``(condition, scored)`` item, the
    summed natural-log probability of the tokens of ``scored`` after ``prefix + condition`` (plain text, no
    chat template). ``prefix`` is the part the items share (a backend keeps its state once); a wrapper
    (the call cache) says with ``can_score_text`` whether the model it wraps can. ``score_replies(messages,
    replies)`` returns, per reply, its log-likelihood as the assistant's answer to ``messages`` (the chat template
    applied, as :meth:`LLM.complete` would send them)."""

    def score_continuations(self, prefix: str, items: Sequence[tuple[str, str]]) -> list[float]: ...

    def score_replies(self, messages: Sequence[ChatMessage], replies: Sequence[str]) -> list[float]: ...


def scores_text(llm: object) -> bool:
    """Whether ``llm`` can score text (:class:`ScoresText`), looking through wrappers that say so."""
    said = getattr(llm, "can_score_text", None)
    if isinstance(said, bool):
        return said
    return isinstance(llm, ScoresText)


@runtime_checkable
class SamplesText(Protocol):
    """A backend that samples replies by seed (the embedded llama.cpp model): ``sample(messages, seeds, *,
    temperature, max_tokens)`` returns one reply per seed, sampled at ``temperature`` with that seed's random
    numbers. The logits may round differently with the model's state (a prompt prefix reused or not), so the same
    seed can give another reply; the call cache keeps each seed's first, which fixes them between runs. A wrapper
    says with ``can_sample_text`` whether the model it wraps can."""

    def sample(self, messages: Sequence[ChatMessage], seeds: Sequence[int], *, temperature: float,
               max_tokens: int = 256) -> list[LLMResponse]: ...


def samples_text(llm: object) -> bool:
    """Whether ``llm`` samples replies by seed (:class:`SamplesText`), looking through wrappers that say so."""
    said = getattr(llm, "can_sample_text", None)
    if isinstance(said, bool):
        return said
    return isinstance(llm, SamplesText)
