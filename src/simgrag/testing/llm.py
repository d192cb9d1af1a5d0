"""A scripted LLM for tests: :class:`FakeLLM` answers from a list (or a function) and records calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simgrag.llm.base import BaseLLM, ChatMessage, CompletionRequest, LLMResponse

__all__ = ["FakeCall", "FakeLLM", "FakeLLMExhaustedError"]

Script = Sequence["str | BaseException"] | Callable[[list[ChatMessage]], str]
#: ``scores(prefix, condition, scored)`` → the log-likelihood a :class:`FakeLLM` gives ``scored``
Scorer = Callable[[str, str, str], float]
#: ``samples(messages, seed)`` → the reply a :class:`FakeLLM` samples with that seed
Sampler = Callable[[list[ChatMessage], int], str]


class FakeLLMExhaustedError(AssertionError):
    """More calls were made than the script has answers. An ``AssertionError`` on purpose: it is a
    bug in the test, and code under test that handles ``SimGRAGError`` must not swallow it."""


#: One recorded call to a :class:`FakeLLM` (``messages``, ``json_schema``, ``max_tokens``, ``temperature``,
#: ``stop``, and ``prompt``: the message contents joined by newlines).
FakeCall = CompletionRequest


class FakeLLM(BaseLLM):
    """Answers with ``responses`` in order, or with ``responses(messages)`` when it is a function.

    An exception instance in the list is raised instead of answered (to script failures). Token
    counts are word counts. ``calls`` records every call; running out raises
    :class:`FakeLLMExhaustedError`. With ``scores`` it also scores text
    (:class:`~simgrag.llm.base.ScoresText`): each ``(condition, scored)`` item gets ``scores(prefix, condition,
    scored)``, recorded in ``scored``. With ``samples`` it samples by seed (:class:`~simgrag.llm.base.SamplesText`):
    each seed's reply is ``samples(messages, seed)``, each call recorded in ``sampled`` (as a request with its seed).
    """

    def __init__(self, responses: Script, *, name: str = "fake:scripted", scores: Scorer | None = None,
                 samples: Sampler | None = None) -> None:
        self.name = name
        self.calls: list[FakeCall] = []
        self.scored: list[tuple[str, str, str]] = []
        self.sampled: list[FakeCall] = []
        self._scores = scores
        self._samples = samples
        self._fn = responses if callable(responses) else None
        self._script = [] if callable(responses) else list(responses)

    def __repr__(self) -> str:
        return f"FakeLLM(name={self.name!r}, calls={len(self.calls)})"

    @property
    def can_score_text(self) -> bool:
        """Whether this fake scores text (given ``scores``)."""
        return self._scores is not None

    def score_continuations(self, prefix: str, items: Sequence[tuple[str, str]]) -> list[float]:
        """``scores(prefix, condition, scored)`` per item; an AssertionError without ``scores``."""
        if self._scores is None:
            raise AssertionError("this FakeLLM was made without scores= and cannot score text")
        out = []
        for condition, scored in items:
            self.scored.append((prefix, condition, scored))
            out.append(float(self._scores(prefix, condition, scored)))
        return out

    @property
    def can_sample_text(self) -> bool:
        """Whether this fake samples by seed (given ``samples``)."""
        return self._samples is not None

    def sample(self, messages: Sequence[ChatMessage], seeds: Sequence[int], *, temperature: float,
               max_tokens: int = 256) -> list[LLMResponse]:
        """``samples(messages, seed)`` per seed; an AssertionError without ``samples``."""
        if self._samples is None:
            raise AssertionError("this FakeLLM was made without samples= and cannot sample by seed")
        out = []
        for seed in seeds:
            self.sampled.append(CompletionRequest(tuple(messages), None, max_tokens, temperature, None, seed))
            text = self._samples(list(messages), seed)
            out.append(LLMResponse(text=text, completion_tokens=len(text.split())))
        return out

    def score_replies(self, messages: Sequence[ChatMessage], replies: Sequence[str]) -> list[float]:
        """``scores(prompt, "", reply)`` per reply, ``prompt`` the messages as ``role: content`` lines (what a chat
        template would render), each recorded in ``scored``; an AssertionError without ``scores``."""
        prompt = "".join(f"{m.role}: {m.content}\n" for m in messages)
        return self.score_continuations(prompt, [("", reply) for reply in replies])

    @property
    def remaining(self) -> int:
        """Answers left in a list script (0 for a function)."""
        return max(0, len(self._script) - len(self.calls)) if self._fn is None else 0

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        """Record the call and return the next scripted answer."""
        messages = request.messages
        index = len(self.calls)
        self.calls.append(request)
        answer = self._answer(index, list(messages))
        return LLMResponse(
            text=answer,
            prompt_tokens=sum(len(m.content.split()) for m in messages),
            completion_tokens=len(answer.split()),
        )

    def _answer(self, index: int, messages: list[ChatMessage]) -> str:
        if self._fn is not None:
            return self._fn(messages)
        if index >= len(self._script):
            last = messages[-1].content if messages else ""
            raise FakeLLMExhaustedError(
                f"FakeLLM has {len(self._script)} scripted answers but got call {index + 1}; "
                f"last message: {last[:200]!r}"
            )
        answer = self._script[index]
        if isinstance(answer, BaseException):
            raise answer
        return answer
