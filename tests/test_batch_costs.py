"""How long a lookup draft should be on a machine: the cost model, the choice, the measurement, the cost file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simgrag.llm.batch_costs import (
    P_AGREED,
    P_BEYOND,
    BatchCostFile,
    BatchCosts,
    cpu_identity,
    measure_batch_costs,
)
from simgrag.llm.lookup_decoding import lookup_decode
from test_lookup_decoding import END, ScriptedModel, copying_case, plain_greedy

# measured costs (seconds) on two machines (module docstring of simgrag.llm.batch_costs)
AVX512 = {1: 0.063, 4: 0.109, 8: 0.193, 16: 0.225, 32: 0.378, 48: 0.524}
AVX2 = {1: 0.057, 2: 0.090, 4: 0.161, 8: 0.408, 16: 0.491, 32: 0.907}


def test_costs_are_interpolated_between_and_extrapolated_beyond_the_measured_sizes() -> None:
    costs = BatchCosts({1: 0.05, 4: 0.11, 16: 0.23})
    assert costs.cost(1) == 0.05 and costs.cost(4) == 0.11
    assert costs.cost(2) == pytest.approx(0.07) and costs.cost(10) == pytest.approx(0.17)
    assert costs.cost(28) == pytest.approx(0.35)  # the slope of 4 -> 16 carried on
    assert costs.cost(200) == pytest.approx(0.23 + 0.01 * 184)
    assert BatchCosts({1: 0.05}).cost(3) == pytest.approx(0.15)  # one size: proportional


def test_draft_length_pays_for_itself_on_each_machine() -> None:
    avx2, avx512 = BatchCosts(AVX2), BatchCosts(AVX512)
    # nothing agreed on: a draft is a guess; not worth a batch on AVX2, one token at most on AVX-512
    assert avx2.draft_length(20, 0) == 0 and avx512.draft_length(20, 0) <= 1
    # a long agreed continuation: sent, in full where batches are cheap (AVX-512)
    assert avx512.draft_length(15, 15) == 15
    assert 0 < avx2.draft_length(15, 15) <= 15
    # the same agreement, where a batch costs more: never a longer draft
    for agreed in range(0, 16):
        assert avx2.draft_length(15, agreed) <= avx512.draft_length(15, agreed) or agreed == 0
    assert avx2.draft_length(0, 0) == 0 and avx512.draft_length(3, 10) <= 3  # never more than there is


def test_draft_length_maximises_expected_tokens_per_second() -> None:
    costs = BatchCosts(AVX2)
    for available, agreed in ((15, 15), (15, 3), (30, 12), (5, 5)):
        chosen = costs.draft_length(available, agreed)
        chance, expected, rates = 1.0, 1.0, [1 / costs.cost(1)]
        for length in range(1, available + 1):
            chance *= P_AGREED if length <= agreed else P_BEYOND
            expected += chance
            rates.append(expected / costs.cost(length + 1))
        assert rates[chosen] == max(rates), (available, agreed, chosen)


def test_costs_need_a_positive_one_token_cost() -> None:
    with pytest.raises(ValueError, match="one-token"):
        BatchCosts({4: 0.1})
    with pytest.raises(ValueError, match="one-token"):
        BatchCosts({1: 0.0})


def test_measurement_warms_up_then_keeps_the_fastest_round() -> None:
    calls: list[int] = []
    noise = iter([9.0] + [0.5, 0.0] * 100)  # the untimed first call, then slow-fast per size

    def evaluate(n: int) -> float:
        calls.append(n)
        return AVX2[n] + next(noise)

    costs = measure_batch_costs(evaluate, sizes=(1, 4, 8), rounds=2)
    assert costs.seconds == {1: AVX2[1], 4: AVX2[4], 8: AVX2[8]}
    assert calls == [1, 1, 1, 4, 4, 8, 8]


def test_a_plain_step_when_drafting_does_not_pay() -> None:
    context, table = copying_case()
    model = ScriptedModel(context, table)
    never = BatchCosts({1: 0.05, 2: 0.2, 48: 5.0})  # every extra token costs 3x a step
    result = lookup_decode(model, context, 20, max_tokens=50, is_end=lambda t: t == END,
                           draft_length=never.draft_length)
    assert result.tokens == plain_greedy(context, table, 50)
    assert set(model.batches) == {1} and result.steps == len(result.tokens)
    model = ScriptedModel(context, table)
    cheap = lookup_decode(model, context, 20, max_tokens=50, is_end=lambda t: t == END,
                          draft_length=BatchCosts(AVX512).draft_length)
    assert cheap.tokens == result.tokens and cheap.steps <= result.steps


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
