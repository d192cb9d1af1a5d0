"""Generated fact-verification claims (toy KG and MetaQA KB) and the claim benchmark runner."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from simgrag.answer.verify import VERIFY_SYSTEM
from simgrag.config import metaqa_dir
from simgrag.errors import DatasetError, LLMTimeoutError
from simgrag.eval.claims import (
    ALL_SHAPES,
    Claim,
    _KGView,
    generate_claims,
    load_claims,
    save_claims,
)
from simgrag.eval.claims_bench import format_claims_summary, run_claims_bench
from simgrag.kg.store import KGStore
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import SimGRAG
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import TOY_TRIPLES

METAQA = metaqa_dir() or Path("MetaQA-not-found")
_PATH_SHAPES = {"two_hop_path", "three_hop_path"}


@pytest.fixture(scope="module")
def toy_store() -> KGStore:
    return KGStore.from_triples(TOY_TRIPLES)


@pytest.fixture(scope="module")
def toy_topics() -> list[str]:
    return ["Inception", "Titanic", "Memento", "Juno", "Avatar", "Leonardo DiCaprio", "Ellen Page"]


@pytest.fixture(scope="module")
def metaqa() -> tuple[KGStore, list[str]]:
    if not (METAQA / "kb.txt").is_file():
        pytest.skip("MetaQA kb.txt not available")
    from simgrag.eval.metaqa import load_metaqa
    from simgrag.kg.loader import load_kg

    store, _ = load_kg(METAQA / "kb.txt", show_progress=False)
    topics = [q.topic for hop in (1, 2) for q in load_metaqa(METAQA, hop, "dev")[:3000]]
    return store, topics


def check_claims(store: KGStore, claims: list[Claim]) -> None:
    """The properties every generated claim set must have."""
    kg = _KGView(store)
    keys = {store.triple(i).as_tuple() for i in range(store.num_triples)}
    for claim in claims:
        assert claim.text.endswith((".", "?", "!")) and claim.facts
        if claim.label == "Supported":
            assert set(claim.facts) <= keys, claim
            assert claim.corruption is None
        else:
            assert claim.corrupted_fact is not None and claim.corruption
            assert claim.facts[claim.corrupted_fact] not in keys, claim
            ids = [_ids(store, f) for f in claim.facts]
            free = frozenset(_path_inner(ids)) if claim.shape in _PATH_SHAPES else frozenset()
            assert not kg.holds(ids, free), f"an alternative makes {claim} true"


def _ids(store: KGStore, fact: tuple[str, str, str]) -> tuple[int, int, int]:
    h, r, t = (store.entities.id_of(fact[0]), store.relations.id_of(fact[1]), store.entities.id_of(fact[2]))
    assert h is not None and r is not None and t is not None
    return h, r, t


def _path_inner(facts: list[tuple[int, int, int]]) -> set[int]:
    """Entities shared by consecutive path facts (the inner nodes)."""
    return {e for a, b in itertools.pairwise(facts) for e in {a[0], a[2]} & {b[0], b[2]}}


def test_toy_generation_is_valid_balanced_and_covers_shapes(toy_store: KGStore, toy_topics: list[str]) -> None:
    claims = generate_claims(toy_store, toy_topics, n=20, seed=3)
    check_claims(toy_store, claims)
    by_shape = Counter((c.shape, c.label) for c in claims)
    assert {c.shape for c in claims} == set(ALL_SHAPES)
    for shape in ALL_SHAPES:
        assert by_shape[(shape, "Supported")] == by_shape[(shape, "Refuted")] >= 1
    assert len({c.text for c in claims}) == len(claims)
    hops = {"one_hop": 1, "two_hop_path": 2, "three_hop_path": 3, "two_hop_conjunction": 2, "three_hop_star": 3}
    assert all(len(c.facts) == hops[c.shape] for c in claims)


def test_generation_is_deterministic_by_seed(toy_store: KGStore, toy_topics: list[str]) -> None:
    first = generate_claims(toy_store, toy_topics, n=20, seed=7)
    assert first == generate_claims(toy_store, toy_topics, n=20, seed=7)
    assert first != generate_claims(toy_store, toy_topics, n=20, seed=8)


def test_unknown_topics_and_shapes(toy_store: KGStore) -> None:
    assert generate_claims(toy_store, ["Nowhere Film"], n=10, seed=0) == []
    assert generate_claims(toy_store, ["Inception"], n=2, seed=0, shapes=("one_hop",))
    with pytest.raises(DatasetError, match="shapes"):
        generate_claims(toy_store, ["Inception"], n=2, seed=0, shapes=("four_hop",))


def test_claims_roundtrip_jsonl(tmp_path: Path, toy_store: KGStore, toy_topics: list[str]) -> None:
    claims = generate_claims(toy_store, toy_topics, n=10, seed=1)
    path = save_claims(tmp_path / "claims.jsonl", claims)
    assert load_claims(path) == claims
    (tmp_path / "bad.jsonl").write_text('{"text": 1}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1"):
        load_claims(tmp_path / "bad.jsonl")


def test_metaqa_generation(metaqa: tuple[KGStore, list[str]]) -> None:
    store, topics = metaqa
    claims = generate_claims(store, topics, n=200, seed=0)
    assert len(claims) == 200
    check_claims(store, claims)
    assert Counter(c.label for c in claims) == {"Supported": 100, "Refuted": 100}
    assert Counter(c.shape for c in claims) == dict.fromkeys(ALL_SHAPES, 40)
    tags_only = [c for c in claims if {f[1] for f in c.facts} == {"has_tags"}]
    assert len(tags_only) <= 5 * len(ALL_SHAPES)
    assert generate_claims(store, topics, n=50, seed=5) == generate_claims(store, topics, n=50, seed=5)


# ------------------------------------------------------------------------------------------ runner
RUN_CLAIMS = [
    Claim("Titanic was directed by James Cameron.", "Supported", "one_hop",
          (("Titanic", "directed_by", "James Cameron"),)),
    Claim("Avatar was directed by Christopher Nolan.", "Refuted", "one_hop",
          (("Avatar", "directed_by", "Christopher Nolan"),), "entity: 'James Cameron' -> 'Christopher Nolan'", 0),
    Claim("Blorp flarg.", "Refuted", "one_hop", (("Blorp", "flarg", "Zot"),), "made up", 0),
    Claim("Memento was released in 2000 and starred Guy Pearce.", "Supported", "two_hop_conjunction",
          (("Memento", "release_year", "2000"), ("Memento", "starred_actors", "Guy Pearce"))),
    Claim("Juno is in English.", "Supported", "one_hop", (("Juno", "in_language", "English"),)),
]


def scripted(messages: list[ChatMessage]) -> str:
    """Patterns from the claims' facts; 'Blorp' gets nonsense; the verifier always says Supported,
    except that it times out on Juno."""
    text = messages[-1].content
    claim = next(c for c in RUN_CLAIMS if c.text in text)
    if messages[0].content == VERIFY_SYSTEM:
        if "Juno" in claim.text:
            raise LLMTimeoutError("verify call timed out")
        return "verdict: Supported"
    if "Blorp" in claim.text:
        return "nonsense"
    return json.dumps({"triples": [[h, r.replace("_", " "), t] for h, r, t in claim.facts]})


def test_runner_writes_jsonl_and_summary(toy_dir: Path, tmp_path: Path) -> None:
    engine = SimGRAG(toy_dir, llm=FakeLLM(scripted))
    out = tmp_path / "run.jsonl"
    summary = run_claims_bench(engine, RUN_CLAIMS, out_path=out, progress=False)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["claim"] for r in rows] == [c.text for c in RUN_CLAIMS]
    first, wrong, failed, conj, timeout = rows
    assert first["predicted"] == "Supported" and first["correct"] and first["error"] is None
    assert first["evidence"] == [["Titanic", "directed_by", "James Cameron"]]
    assert first["pattern"] == [["Titanic", "directed by", "James Cameron"]]
    assert {"pattern_s", "answer_s", "total_s"} <= set(first["timings"])
    assert not wrong["correct"] and wrong["gold"] == "Refuted"
    assert failed["error"]["stage"] == "pattern" and failed["predicted"] is None
    assert failed["label_binary"] == "Refuted" and failed["correct"]  # errors count as Refuted by default
    assert sorted(map(tuple, conj["evidence"])) == [("Memento", "release_year", "2000"),
                                                    ("Memento", "starred_actors", "Guy Pearce")]
    assert timeout["error"]["stage"] == "llm" and not timeout["correct"]
    assert summary["n"] == 5 and summary["correct"] == 3
    assert summary["accuracy"] == pytest.approx(0.6)
    assert summary["by_gold"]["Supported"] == {"n": 3, "correct": 2, "accuracy": pytest.approx(2 / 3)}
    assert summary["by_gold"]["Refuted"]["correct"] == 1
    assert summary["by_shape"]["two_hop_conjunction"]["accuracy"] == 1.0
    assert summary["errors"] == {"pattern": 1, "llm": 1}
    assert set(summary["latency"]) == {"pattern_s", "answer_s", "total_s"}
    table = format_claims_summary(summary)
    assert "| all | 5 | 3 | 0.600 |" in table and "pattern: 1" in table and "| total_s |" in table


def test_runner_can_score_errors_as_wrong(toy_dir: Path, tmp_path: Path) -> None:
    engine = SimGRAG(toy_dir, llm=FakeLLM(scripted))
    summary = run_claims_bench(engine, RUN_CLAIMS[2:3], out_path=tmp_path / "r.jsonl", progress=False,
                               errors_as="wrong")
    assert summary["correct"] == 0 and summary["errors"] == {"pattern": 1}


def test_generated_claims_run_end_to_end(toy_dir: Path, toy_store: KGStore, toy_topics: list[str],
                                         tmp_path: Path) -> None:
    claims = generate_claims(toy_store, toy_topics, n=10, seed=0)

    def answer(messages: list[ChatMessage]) -> str:
        claim = next(c for c in claims if c.text in messages[-1].content)
        if messages[0].content == VERIFY_SYSTEM:
            return f"verdict: {claim.label}"
        return json.dumps({"triples": [[h, r.replace("_", " "), t] for h, r, t in claim.facts]})

    summary = run_claims_bench(SimGRAG(toy_dir, llm=FakeLLM(answer)), claims, out_path=tmp_path / "g.jsonl",
                               progress=False)
    assert summary["accuracy"] == 1.0 and summary["n"] == len(claims) and not summary["errors"]
