"""Greedy decoding with prompt-lookup drafts: the same tokens as plain greedy decoding, fewer steps.

What the pattern and answer prompts ask for is mostly copied: entity names from the question, relation
names and ``UNKNOWN movie 1`` from the few-shot examples, whole triples from the example right above
the question. So the tokens that followed the latest earlier occurrence of the last few generated
tokens are a good guess of what comes next (*prompt-lookup decoding*, a draft-model-free form of
speculative decoding). Each step evaluates the pending token plus such a draft in one batch and keeps
the draft's longest prefix that greedy decoding would have produced, plus one more token from the
batch's own prediction. On 2 CPU cores a batch of 8 tokens costs ~3.4x one token (measured with
llama.cpp, Qwen2.5-1.5B Q4_K_M), so each accepted draft token is nearly free.

The decoding loop is independent of llama.cpp: it drives a :class:`GreedyModel` (evaluate a batch at
a position, return the greedy next token after each of its tokens; drop the cache after a position),
so it is tested with a scripted model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DecodeResult", "GreedyModel", "find_draft", "lookup_decode"]


class GreedyModel(Protocol):
    """What :func:`lookup_decode` needs of a causal LM with a KV cache."""

    def greedy_next(self, tokens: Sequence[int], n_past: int) -> list[int]:
        """Evaluate ``tokens`` at positions ``n_past …`` (appending them to the cache) and return,
        for each of them, the greedy (arg-max) next token."""
        ...

    def truncate(self, n_past: int) -> None:
        """Forget the cache from position ``n_past`` on."""
        ...


@dataclass(frozen=True)
class DecodeResult:
    tokens: list[int]  # the generated tokens, without the end-of-generation token
    finish_reason: str  # "stop" (end of generation or a stop condition) or "length"
    n_past: int  # tokens held in the model's cache afterwards: the context + generated tokens evaluated
    steps: int  # batches evaluated (plain greedy decoding needs one per generated token)


def find_draft(tokens: Sequence[int], *, max_ngram: int = 4, max_draft: int = 10) -> list[int]:
    """The tokens that followed the latest earlier occurrence of the longest suffix of ``tokens`` of at
    most ``max_ngram`` tokens (longer suffixes tried first), at most ``max_draft`` of them; ``[]`` when
    no suffix occurs earlier."""
    n_total = len(tokens)
    seq = list(tokens)
    for n in range(min(max_ngram, n_total - 1), 0, -1):
        tail = seq[n_total - n:]
        first = tail[0]
        for start in range(n_total - n - 1, -1, -1):
            if seq[start] == first and seq[start:start + n] == tail:
                return seq[start + n:start + n + max_draft]
    return []


def lookup_decode(
    model: GreedyModel,
    context: Sequence[int],
    first_token: int,
    *,
    max_tokens: int,
    is_end: Callable[[int], bool],
    should_stop: Callable[[list[int]], bool] | None = None,
    max_draft: int = 10,
    max_ngram: int = 4,
) -> DecodeResult:
    """Greedy decoding after ``context`` (already evaluated, ``len(context)`` tokens in the cache),
    whose greedy next token is ``first_token``.

    Stops at a token for which ``is_end`` holds (not included), when ``should_stop(generated)`` holds
    (the last token included), or after ``max_tokens`` tokens. Yields the tokens plain greedy
    decoding yields, up to the model's numerical agreement between batched and single-token evaluation.
    """
    out: list[int] = []
    n_past = len(context)  # cache positions holding context + out[: n_past - len(context)]
    steps = 0

    def finished() -> str | None:
        if should_stop is not None and should_stop(out):
            return "stop"
        return "length" if len(out) >= max_tokens else None

    pending = first_token
    while True:
        if is_end(pending):
            return DecodeResult(out, "stop", n_past, steps)
        out.append(pending)  # not in the cache yet: the next batch starts with it
        if (finish := finished()) is not None:
            return DecodeResult(out, finish, n_past, steps)
        draft = find_draft([*context, *out], max_ngram=max_ngram,
                           max_draft=min(max_draft, max_tokens - len(out)))
        predicted = model.greedy_next([pending, *draft], n_past)
        steps += 1
        n_past += 1
        accepted = 0
        for drafted, greedy in zip(draft, predicted, strict=False):
            if drafted != greedy or is_end(drafted):
                break
            out.append(drafted)
            n_past += 1
            accepted += 1
            if (finish := finished()) is not None:
                model.truncate(n_past)
                return DecodeResult(out, finish, n_past, steps)
        if accepted < len(draft):
            model.truncate(n_past)  # the rejected part of the draft leaves the cache
        pending = predicted[accepted]
