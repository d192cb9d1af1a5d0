"""Greedy decoding with prompt-lookup drafts: the same tokens as plain greedy decoding, fewer steps.

What the pattern and answer prompts ask for is mostly copied: entity names from the question, relation
names and ``UNKNOWN movie 1`` from the few-shot examples, whole triples from the example right above
the question. So the tokens that followed the latest earlier occurrence of the last few generated
tokens are a good guess of what comes next (*prompt-lookup decoding*, a draft-model-free form of
speculative decoding). Each step evaluates the pending token plus such a draft in one batch and keeps
the draft's longest prefix that greedy decoding would have produced, plus one more token from the
batch's own prediction.

How long a draft to send is a cost question. On 2 CPU cores (llama.cpp, Qwen2.5-1.5B Q4_K_M, repacked
q4_K_8x8 weights, ~680 tokens of context) a batch of 1 token costs 63 ms, 4: 109, 8: 193, 10: 222,
15: 283 — and 16: 225, 32: 378, 48: 524 ms (the matrix kernels work in blocks of 16 rows). So a draft is
(1) cut after an end-of-generation token, (2) trusted as far as the two latest occurrences of the
suffix agree on what follows (text the prompt continues in several ways — the relation after an entity
name — is a guess; text it always continues the same way — ``","UNKNOWN movie 1"],["`` — is not), and
(3) filled up, with the latest occurrence's continuation, to the next of :data:`CHEAP_BATCH_SIZES`.
Replayed on 106 recorded pattern calls (MetaQA DEV, DEV reworded by hand, the geography KG), against
the former fixed 10-token drafts: 1.57 s → 1.06 s of decoding per call (a replay by the session that
wrote this, on an AVX-512 machine; ``benchmarks/pattern_latency.py --arms default,fixed-draft`` measures
it afresh on live calls, BENCHMARKS §10).

Those costs are not every CPU's: on an AVX2-only EPYC a batch of 4 costs 161 ms and 8 costs 408 ms
against 57 ms for one token, and the filled-up drafts decoded *slower* than one token per step. So a
caller may pass ``draft_length`` instead: it chooses the length from the draft's agreed part and the
machine's measured batch costs (:meth:`simgrag.llm.batch_costs.BatchCosts.draft_length`; the embedded
llama.cpp backend does this by default).

The decoding loop is independent of llama.cpp: it drives a :class:`GreedyModel` (evaluate a batch at
a position, return the greedy next token after each of its tokens; drop the cache after a position),
so it is tested with a scripted model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["CHEAP_BATCH_SIZES", "DecodeResult", "DraftLength", "GreedyModel", "find_draft", "lookup_decode"]

#: Batch sizes (pending token + draft) a draft is filled up to; see the module docstring.
CHEAP_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 48)
#: A draft whose two latest sources disagree at once still proposes this many tokens.
MIN_TRUSTED = 2

#: A single earlier occurrence of the last this-many tokens counts as agreed on (by ``draft_length``): in
#: replayed pattern calls such drafts were accepted like agreed ones (first token 100 %, 6.9 tokens on
#: average), those after a 1-token match were not (54 %, 1.1).
SURE_SINGLE_NGRAM = 3

#: ``draft_length(available, agreed)``: how many of ``available`` drafted tokens to send, ``agreed`` of them
#: continuing the two latest occurrences alike (with a single occurrence: all after a match of
#: :data:`SURE_SINGLE_NGRAM` tokens or more, else none)
DraftLength = Callable[[int, int], int]


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


def find_draft(
    tokens: Sequence[int],
    *,
    max_ngram: int = 4,
    max_draft: int = 47,
    batch_sizes: Sequence[int] = CHEAP_BATCH_SIZES,
    is_end: Callable[[int], bool] | None = None,
    draft_length: DraftLength | None = None,
) -> list[int]:
    """A draft of what follows ``tokens``: the continuation of the latest earlier occurrence of their
    longest suffix of at most ``max_ngram`` tokens (longer suffixes tried first), at most ``max_draft``
    tokens, cut after the first token for which ``is_end`` holds; ``[]`` when no suffix occurs earlier.

    Only the part on which the latest and the second latest occurrence agree (at least
    :data:`MIN_TRUSTED` tokens) counts; the draft is then filled up with the latest continuation so that
    it and the pending token make the smallest of ``batch_sizes`` that holds them (``()``: no rounding).
    ``draft_length(available, trusted)``, when given, decides instead how many of the ``available`` drafted
    tokens to send, ``trusted`` of them agreed on (e.g. by what batches cost: :mod:`simgrag.llm.batch_costs`).
    """
    seq = list(tokens)
    for n in range(min(max_ngram, len(seq) - 1), 0, -1):
        latest, before = _two_latest_occurrences(seq, n)
        if latest is None:
            continue
        draft = seq[latest + n:latest + n + max_draft]
        if is_end is not None:
            draft = _cut_after_end(draft, is_end)
        trusted = len(draft)
        if before is not None:
            agreed = _agreement(draft, seq[before + n:before + n + len(draft)])
            if draft_length is not None:
                return draft[:draft_length(len(draft), agreed)]
            trusted = max(agreed, MIN_TRUSTED)
        elif draft_length is not None:  # a single earlier occurrence: trusted after a long enough match
            return draft[:draft_length(len(draft), len(draft) if n >= SURE_SINGLE_NGRAM else 0)]
        return draft[:_batch_fill(trusted, batch_sizes)] if batch_sizes else draft[:trusted]
    return []


def _two_latest_occurrences(seq: list[int], n: int) -> tuple[int | None, int | None]:
    """Start positions of the latest and the second latest earlier occurrence of the last ``n`` tokens."""
    tail = seq[len(seq) - n:]
    first = tail[0]
    found: list[int] = []
    for start in range(len(seq) - n - 1, -1, -1):
        if seq[start] == first and seq[start:start + n] == tail:
            found.append(start)
            if len(found) == 2:
                break
    return (found[0] if found else None), (found[1] if len(found) > 1 else None)


def _cut_after_end(draft: list[int], is_end: Callable[[int], bool]) -> list[int]:
    for i, token in enumerate(draft):
        if is_end(token):
            return draft[:i + 1]
    return draft


def _agreement(a: Sequence[int], b: Sequence[int]) -> int:
    same = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        same += 1
    return same


def _batch_fill(trusted: int, batch_sizes: Sequence[int]) -> int:
    """Draft length for ``trusted`` tokens: the smallest batch size holding them and the pending token,
    less the pending token (the largest size when none holds them)."""
    size = next((b for b in sorted(batch_sizes) if b >= trusted + 1), max(batch_sizes))
    return max(size - 1, 0)


def lookup_decode(
    model: GreedyModel,
    context: Sequence[int],
    first_token: int,
    *,
    max_tokens: int,
    is_end: Callable[[int], bool],
    should_stop: Callable[[list[int]], bool] | None = None,
    max_draft: int = 47,
    max_ngram: int = 4,
    batch_sizes: Sequence[int] = CHEAP_BATCH_SIZES,
    draft_length: DraftLength | None = None,
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
                           max_draft=min(max_draft, max_tokens - len(out)), batch_sizes=batch_sizes,
                           is_end=is_end, draft_length=draft_length)
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
