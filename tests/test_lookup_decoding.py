"""Prompt-lookup greedy decoding against a scripted model: same tokens as plain greedy, fewer steps."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.llm.lookup_decoding import find_draft, lookup_decode

END = 0


class ScriptedModel:
    """A deterministic "LM": the greedy next token is a function of the last two tokens of the
    sequence. It keeps a KV-cache stand-in (the evaluated tokens) and checks how it is driven."""

    def __init__(self, context: Sequence[int], table: dict[tuple[int, int], int], default: int = END) -> None:
        self.cache = list(context)
        self.table = table
        self.default = default
        self.batches: list[int] = []

    def next_of(self, seq: Sequence[int]) -> int:
        return self.table.get((seq[-2], seq[-1]), self.default)

    def greedy_next(self, tokens: Sequence[int], n_past: int) -> list[int]:
        assert n_past == len(self.cache), "a batch must start right after the cached tokens"
        self.batches.append(len(tokens))
        out = []
        for token in tokens:
            self.cache.append(token)
            out.append(self.next_of(self.cache))
        return out

    def truncate(self, n_past: int) -> None:
        assert n_past <= len(self.cache)
        del self.cache[n_past:]


def plain_greedy(context: list[int], table: dict[tuple[int, int], int], max_tokens: int) -> list[int]:
    seq, out = list(context), []
    while len(out) < max_tokens:
        token = table.get((seq[-2], seq[-1]), END)
        if token == END:
            break
        out.append(token)
        seq.append(token)
    return out


def test_find_draft_takes_the_latest_longest_match() -> None:
    tokens = [5, 6, 7, 8, 1, 5, 6, 9, 2, 5, 6]
    # latest earlier "5 6" is followed by 9 2 5 6; the one before by 7 8 …: they disagree at once, so the
    # two trusted tokens are sent, filled up to a batch of 4 (pending token + 3)
    assert find_draft(tokens, max_ngram=2, max_draft=10) == [9, 2, 5]
    assert find_draft(tokens, max_ngram=2, max_draft=10, batch_sizes=()) == [9, 2]
    assert find_draft([1, 2, 3, 4, 9, 3, 4], max_ngram=3, max_draft=2) == [9, 3]
    assert find_draft([1, 2, 3], max_ngram=3, max_draft=5) == []
    assert find_draft([], max_ngram=3, max_draft=5) == []
    assert find_draft([4, 4], max_ngram=3, max_draft=5) == [4]


def test_a_single_earlier_occurrence_is_drafted_to_its_end_or_max_draft() -> None:
    tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2]
    assert find_draft(tokens, max_ngram=2, max_draft=40) == [3, 4, 5, 6, 7, 8, 9, 1, 2]
    assert find_draft(tokens, max_ngram=2, max_draft=4) == [3, 4, 5, 6]


def test_draft_is_cut_after_the_end_token() -> None:
    tokens = [1, 2, 3, END, 7, 7, 1, 2]
    assert find_draft(tokens, max_ngram=2, is_end=lambda t: t == END) == [3, END]
    assert find_draft(tokens, max_ngram=2) == [3, END, 7, 7, 1, 2]


def test_agreed_part_is_filled_up_to_a_cheap_batch() -> None:
    # "1 2" occurs twice before the end; the continuations agree on 3 4 5 6 7, then differ (8 vs 9)
    common = [3, 4, 5, 6, 7]
    tokens = [1, 2, *common, 8, 8, 8, 8, 8, 8, 8, 8, 1, 2, *common, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 2]
    # 5 trusted + the pending token = 6 → the batch of 8: 7 draft tokens from the latest occurrence
    assert find_draft(tokens, max_ngram=2, batch_sizes=(1, 2, 4, 8, 16)) == [*common, 9, 9]
    assert find_draft(tokens, max_ngram=2, batch_sizes=()) == common
    # sizes too small for the trusted part: the largest one
    assert find_draft(tokens, max_ngram=2, batch_sizes=(1, 4)) == [3, 4, 5]


def copying_case() -> tuple[list[int], dict[tuple[int, int], int]]:
    """A "prompt" holding an example output 10 20 30 40 50 60 70, and a model that copies it after 10 20."""
    example = [10, 20, 30, 40, 50, 60, 70]
    context = [1, 2, *example, 99, 3, 10]
    table = {(a, b): c for a, b, c in zip(example, example[1:], example[2:], strict=False)}
    table[(3, 10)] = 20
    return context, table


def test_copying_a_previous_span_takes_few_steps() -> None:
    context, table = copying_case()
    model = ScriptedModel(context, table)
    result = lookup_decode(model, context, 20, max_tokens=50, is_end=lambda t: t == END)
    assert result.tokens == [20, 30, 40, 50, 60, 70] == plain_greedy(context, table, 50)
    assert result.finish_reason == "stop"
    assert result.steps < len(result.tokens)  # plain greedy needs one step per token
    assert model.cache == [*context, *result.tokens][: result.n_past]


@settings(max_examples=200, deadline=None)
@given(
    context=st.lists(st.integers(1, 6), min_size=2, max_size=30),
    pairs=st.dictionaries(st.tuples(st.integers(1, 6), st.integers(1, 6)), st.integers(0, 6), max_size=36),
    max_tokens=st.integers(1, 25),
    max_draft=st.integers(1, 8),
)
def test_same_tokens_as_plain_greedy(context: list[int], pairs: dict[tuple[int, int], int], max_tokens: int,
                                     max_draft: int) -> None:
    first = pairs.get((context[-2], context[-1]), END)
    model = ScriptedModel(context, pairs)
    result = lookup_decode(model, context, first, max_tokens=max_tokens, is_end=lambda t: t == END,
                           max_draft=max_draft)
    assert result.tokens == plain_greedy(context, pairs, max_tokens)
    assert result.finish_reason == ("length" if len(result.tokens) == max_tokens else "stop")
    # the cache holds the context and a prefix of the output, nothing else
    assert model.cache == [*context, *result.tokens][: result.n_past]
    assert result.n_past >= len(context) + len(result.tokens) - 1
    assert all(size <= max_draft + 1 for size in model.batches)


def test_should_stop_ends_on_the_token_that_completes_it() -> None:
    context = [1, 2, 3, 4, 5, 6, 1, 2]
    table = {(1, 2): 3, (2, 3): 4, (3, 4): 5, (4, 5): 6, (5, 6): 1, (6, 1): 2}
    model = ScriptedModel(context, table)
    result = lookup_decode(model, context, 3, max_tokens=40, is_end=lambda t: t == END,
                           should_stop=lambda out: out[-2:] == [5, 6])
    assert result.tokens == [3, 4, 5, 6]
    assert result.finish_reason == "stop"
    assert model.cache == [*context, *result.tokens][: result.n_past]


def test_max_tokens_is_honoured_inside_an_accepted_draft() -> None:
    context = [7, 8, 9, 7, 8, 9, 7, 8]
    table = {(7, 8): 9, (8, 9): 7, (9, 7): 8}
    model = ScriptedModel(context, table)
    result = lookup_decode(model, context, 9, max_tokens=5, is_end=lambda t: t == END)
    assert result.tokens == [9, 7, 8, 9, 7]
    assert result.finish_reason == "length"
    assert model.cache == [*context, *result.tokens][: result.n_past]
