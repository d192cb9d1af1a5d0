"""Which draft lengths pay on this machine: the rule, the measurement's early stop, the cost file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simgrag.llm.batch_costs import MAX_MARGINAL_SHARE, BatchCostFile, BatchCosts, cpu_identity, measure_batch_costs
from simgrag.llm.lookup_decoding import lookup_decode
from test_lookup_decoding import END, ScriptedModel, copying_case, plain_greedy

# measured costs (seconds) on two machines (module docstring of simgrag.llm.batch_costs)
AVX512 = {1: 0.063, 4: 0.109, 8: 0.193, 16: 0.225, 32: 0.378, 48: 0.524}
AVX2 = {1: 0.058, 4: 0.179, 8: 0.360, 16: 0.476, 32: 0.977, 48: 1.151}


def test_cheap_sizes_follow_the_marginal_cost_of_a_drafted_token() -> None:
    assert BatchCosts(AVX512).cheap_sizes() == (1, 4, 8, 16, 32, 48)
    assert BatchCosts(AVX2).cheap_sizes() == (1,)  # drafting never pays: plain decoding
    # exactly at the limit is cheap, just above it is not
    one = 0.1
    at_limit = one + MAX_MARGINAL_SHARE * one * 3
    assert BatchCosts({1: one, 4: at_limit}).is_cheap(4)
    assert not BatchCosts({1: one, 4: at_limit * 1.01}).is_cheap(4)
    assert not BatchCosts({1: one}).is_cheap(8)  # not measured: not cheap


def test_costs_need_a_positive_one_token_cost() -> None:
    with pytest.raises(ValueError, match="one-token"):
        BatchCosts({4: 0.1})
    with pytest.raises(ValueError, match="one-token"):
        BatchCosts({1: 0.0})


def test_measurement_keeps_the_fastest_round_and_stops_after_two_dear_sizes() -> None:
    calls: list[int] = []
    noise = iter([0.5, 0.0] * 100)  # the first round of each size is slowed down

    def evaluate(n: int) -> float:
        calls.append(n)
        return AVX2[n] + next(noise)

    costs = measure_batch_costs(evaluate)
    assert costs.seconds == {1: AVX2[1], 4: AVX2[4], 8: AVX2[8]}  # 4 and 8 dear: 16, 32, 48 not probed
    assert calls == [1, 1, 4, 4, 8, 8]
    costs = measure_batch_costs(lambda n: AVX512[n])
    assert costs.seconds == AVX512  # every size cheap: all probed


def test_plain_decoding_when_only_single_steps_are_cheap() -> None:
    context, table = copying_case()
    model = ScriptedModel(context, table)
    result = lookup_decode(model, context, 20, max_tokens=50, is_end=lambda t: t == END,
                           batch_sizes=BatchCosts(AVX2).cheap_sizes())
    assert result.tokens == plain_greedy(context, table, 50)
    assert set(model.batches) == {1} and result.steps == len(result.tokens)


def test_cost_file_round_trip_and_damage(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "costs.json"
    store = BatchCostFile(path)
    assert store.get("k") is None  # no file yet
    store.put("k", BatchCosts(AVX2))
    store.put("other", BatchCosts(AVX512))
    assert store.get("k") == BatchCosts(AVX2) and store.get("other") == BatchCosts(AVX512)
    for damage in ("", "{not json", "[1, 2]", json.dumps({"k": {"1": "fast"}}), json.dumps({"k": {"1": -1}}),
                   json.dumps({"k": [1]}), json.dumps({"k": {"x": 1}})):
        path.write_text(damage)
        assert store.get("k") is None, damage  # damage reads as "not measured": measured again
    path.write_bytes(b"\xff\xfe\x00")
    assert store.get("k") is None
    store.put("k", BatchCosts(AVX2))  # a damaged file is replaced
    assert store.get("k") == BatchCosts(AVX2)


def test_cost_file_on_a_read_only_place_does_not_fail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = BatchCostFile(blocker / "costs.json")  # its parent is a file: cannot be created
    store.put("k", BatchCosts(AVX2))
    assert store.get("k") is None
    assert "cannot save the batch costs" in caplog.text


def test_cpu_identity_names_the_cpu() -> None:
    ident = cpu_identity()
    assert ident and ident == cpu_identity()
