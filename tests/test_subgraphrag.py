"""SubgraphRAG: DDE by hand, candidate caps, shortest-path supervision, training, save/load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from simgrag.errors import ModelError
from simgrag.index.directory import IndexDir, build_index_dir
from simgrag.kg.store import KGStore, Triple
from simgrag.retrievers.base import Retriever
from simgrag.retrievers.gsr import GSRModel
from simgrag.retrievers.neighborhood import bfs_layers, neighborhood_triples, shortest_path_triples
from simgrag.retrievers.subgraphrag import (
    SubgraphRAGConfig,
    SubgraphRAGModel,
    SubgraphRAGRetriever,
    candidate_triples,
    directional_distance_encoding,
)
from simgrag.retrievers.subgraphrag_train import PreparedQuestion, SubgraphRAGTrainer
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.synthetic import synthetic_movie_kg, synthetic_questions
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

torch.set_num_threads(1)

CONFIG = SubgraphRAGConfig(hidden=64, dropout=0.0)


def _write_kg(path: Path, triples: list[tuple[str, str, str]]) -> Path:
    path.write_text("\n".join("|".join(t) for t in triples) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[IndexDir, list[tuple[str, str, str]]]:
    root = tmp_path_factory.mktemp("synthetic")
    triples = synthetic_movie_kg()
    index = build_index_dir(_write_kg(root / "kg.txt", triples), root / "kg.idx", embedder=HashEmbedder(dim=64))
    return index, triples


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    root = tmp_path_factory.mktemp("toy")
    return build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))


@pytest.fixture(scope="module")
def trained(synthetic: tuple[IndexDir, list[tuple[str, str, str]]],
            ) -> tuple[SubgraphRAGTrainer, SubgraphRAGModel, list[PreparedQuestion]]:
    index, triples = synthetic
    trainer = SubgraphRAGTrainer(index, config=CONFIG, seed=0, show_progress=False)
    held_out = trainer.prepare(synthetic_questions(triples, 40, seed=99))
    model = trainer.fit(synthetic_questions(triples, 300, seed=1), epochs=8, lr=3e-3, batch_questions=8,
                        eval_k=5, description="synthetic movies")
    return trainer, model, held_out


# ---------------------------------------------------------------------- DDE
def test_dde_matches_hand_computation() -> None:
    # a → b ← d, b → c; topic a.  Local ids a=0, b=1, c=2, d=3.
    heads, tails = np.array([0, 3, 1]), np.array([1, 1, 2])
    dde = directional_distance_encoding(heads, tails, np.array([True, False, False, False]), rounds=2)
    #                 s0        fwd1        fwd2        rev1      rev2
    expected = np.array([
        [1, 0,   0, 0,     0, 0,     0, 1,   0, 1],   # a: nothing flows in; its out-neighbour b is no topic
        [0, 1,   .5, .5,   0, 0,     0, 1,   0, 0],   # b: mean of a (topic) and d; c has no out-edge
        [0, 1,   0, 1,     .5, .5,   0, 0,   0, 0],   # c: fed by b, which was fed half by the topic
        [0, 1,   0, 0,     0, 0,     0, 1,   0, 1],   # d
    ], dtype=np.float32)
    np.testing.assert_allclose(dde, expected)


def test_candidate_dde_is_head_then_tail() -> None:
    store = KGStore.from_triples([("a", "r", "b"), ("d", "r", "b"), ("b", "s", "c")])
    a = store.entities.id_of("a")
    assert a is not None
    cands = candidate_triples(store, [a], SubgraphRAGConfig())
    assert cands.dde.shape == (3, SubgraphRAGConfig().dde_dim) == (3, 20)
    by_triple = {store.triple(int(t)).as_tuple(): row for t, row in zip(cands.tids, cands.dde, strict=True)}
    np.testing.assert_allclose(by_triple[("a", "r", "b")][:10], [1, 0, 0, 0, 0, 0, 0, 1, 0, 1])
    np.testing.assert_allclose(by_triple[("a", "r", "b")][10:], [0, 1, .5, .5, 0, 0, 0, 1, 0, 0])


# ---------------------------------------------------------------------- candidates and supervision
def test_neighborhood_cap_is_shared_fairly() -> None:
    triples = [("t", "r", "hub"), ("t", "r", "small")]
    triples += [(f"x{i}", "r", "hub") for i in range(99)] + [("small", "s", "y1"), ("small", "s", "y2")]
    store = KGStore.from_triples(triples)
    topic = store.entities.id_of("t")
    assert topic is not None
    full, capped = neighborhood_triples(store, [topic], hops=2, max_triples=1000)
    assert len(full) == len(triples) and not capped
    tids, capped = neighborhood_triples(store, [topic], hops=2, max_triples=20)
    names = [store.triple(int(t)).as_tuple() for t in tids]
    assert capped and len(tids) == 20
    assert names[:2] == [("t", "r", "hub"), ("t", "r", "small")]  # the topic's own triples first
    assert {("small", "s", "y1"), ("small", "s", "y2")} <= set(names)  # the small node keeps all it has
    assert sum(t[2] == "hub" for t in names[2:]) == 16  # the hub fills the rest
    one_hop, _ = neighborhood_triples(store, [topic], hops=1)
    assert len(one_hop) == 2


def test_shortest_path_positives_on_toy_kg() -> None:
    store = KGStore.from_triples(TOY_TRIPLES)

    def ids(*names: str) -> list[int]:
        return [i for n in names if (i := store.entities.id_of(n)) is not None]

    def names(tids: np.ndarray) -> set[tuple[str, str, str]]:
        return {store.triple(int(t)).as_tuple() for t in tids}

    assert names(shortest_path_triples(store, ids("Inception"), ids("Memento"))) == {
        ("Inception", "directed_by", "Christopher Nolan"), ("Inception", "written_by", "Christopher Nolan"),
        ("Memento", "directed_by", "Christopher Nolan")}
    # undirected: the path may run against the triples' direction
    assert names(shortest_path_triples(store, ids("Christopher Nolan"), ids("2010", "2000"))) == {
        ("Inception", "directed_by", "Christopher Nolan"), ("Inception", "written_by", "Christopher Nolan"),
        ("Inception", "release_year", "2010"), ("Memento", "directed_by", "Christopher Nolan"),
        ("Memento", "release_year", "2000")}
    assert len(shortest_path_triples(store, ids("Inception"), ids("Memento"), max_hops=1)) == 0
    assert len(shortest_path_triples(store, ids("Inception"), ids("Inception"))) == 0
    layers = bfs_layers(store, ids("Juno"), 2)
    assert [sorted(store.entities[int(i)] for i in layer) for layer in layers[:2]] == [
        ["Juno"], ["Ellen Page", "English", "Jason Reitman"]]


# ---------------------------------------------------------------------- training
def test_training_lowers_loss_and_raises_recall(
        synthetic: tuple[IndexDir, list[tuple[str, str, str]]],
        trained: tuple[SubgraphRAGTrainer, SubgraphRAGModel, list[PreparedQuestion]]) -> None:
    index, _ = synthetic
    trainer, model, held_out = trained
    before = trainer.evaluate(SubgraphRAGModel.create(index, CONFIG, seed=0), held_out, k=5)
    after = trainer.evaluate(model, held_out, k=5)
    assert after["loss"] < 0.5 * before["loss"]
    assert after["recall@5"] > before["recall@5"] + 0.15
    assert after["answer_recall@5"] > before["answer_recall@5"]
    history = model.training["history"]
    assert len(history) == 8 and history[-1]["train_loss"] < history[0]["train_loss"]
    assert {"val_loss", "val_recall@5", "val_answer_recall@5"} <= set(history[-1])


def test_retriever_returns_top_k_with_scores(
        synthetic: tuple[IndexDir, list[tuple[str, str, str]]],
        trained: tuple[SubgraphRAGTrainer, SubgraphRAGModel, list[PreparedQuestion]]) -> None:
    index, triples = synthetic
    retriever = SubgraphRAGRetriever(index, trained[1], top_k=5)
    assert isinstance(retriever, Retriever)
    director = next(t for h, r, t in triples if h == "Film 7" and r == "directed_by")
    given = retriever.retrieve("who directed Film 7", topic_entities=["Film 7"])
    assert given.topic is not None and given.topic.source == "given"
    assert len(given.triples) == len(given.scores) == 5
    assert list(given.scores) == sorted(given.scores, reverse=True)
    assert Triple("Film 7", "directed_by", director) in given.triples[:2]
    linked = retriever.retrieve("who directed Film 7")
    assert linked.topic is not None and linked.topic.source == "linked" and linked.topic.names == ("Film 7",)
    assert linked.info["candidates"] >= 5 and not linked.info["candidates_capped"]


# ---------------------------------------------------------------------- persistence
def test_save_load_gives_identical_scores(
        tmp_path: Path, synthetic: tuple[IndexDir, list[tuple[str, str, str]]],
        trained: tuple[SubgraphRAGTrainer, SubgraphRAGModel, list[PreparedQuestion]]) -> None:
    index, _ = synthetic
    model = trained[1]
    model.save(tmp_path / "sg")
    manifest = json.loads((tmp_path / "sg" / "manifest.json").read_text())
    assert manifest["kind"] == "subgraphrag"
    assert manifest["kg"]["content_hash"] == index.store.content_hash()
    assert manifest["embedder"] == {"name": "hash-64", "dim": 64}
    assert manifest["config"]["hidden"] == 64 and manifest["training"]["description"] == "synthetic movies"
    assert "val_recall@5" in manifest["metrics"]
    assert not [p.name for p in (tmp_path / "sg").iterdir() if p.name.endswith(".tmp")]
    first = SubgraphRAGRetriever(index, model)
    again = SubgraphRAGRetriever(index, tmp_path / "sg")
    topic = [index.store.entities.id_of("Person 3") or 0]
    for question in ("which films did Person 3 act in", "who directed the films that Person 3 acted in"):
        (c1, s1), (c2, s2) = first.score(question, topic), again.score(question, topic)
        np.testing.assert_array_equal(c1.tids, c2.tids)
        np.testing.assert_array_equal(s1, s2)


def test_load_refuses_another_kg_or_a_broken_save(
        tmp_path: Path, toy_index: IndexDir,
        synthetic: tuple[IndexDir, list[tuple[str, str, str]]],
        trained: tuple[SubgraphRAGTrainer, SubgraphRAGModel, list[PreparedQuestion]]) -> None:
    trained[1].save(tmp_path / "sg")
    with pytest.raises(ModelError, match="trained on a different KG"):
        SubgraphRAGModel.load(tmp_path / "sg", toy_index)
    with pytest.raises(ModelError, match=r"holds a 'subgraphrag' model, not a 'gsr' one"):
        GSRModel.load(tmp_path / "sg", synthetic[0])
    (tmp_path / "sg" / "weights.pt").write_bytes(b"truncated")
    with pytest.raises(ModelError, match="does not match"):
        SubgraphRAGModel.load(tmp_path / "sg", synthetic[0])
    with pytest.raises(ModelError, match=r"manifest\.json is missing"):
        SubgraphRAGModel.load(tmp_path / "nothing", synthetic[0])


def test_examples_from_tuples_and_objects() -> None:
    from dataclasses import dataclass

    from simgrag.errors import ConfigError
    from simgrag.retrievers.training import QAExample, as_example, split_examples

    assert as_example(("who?", "Film 1", ["A", "B"])) == QAExample("who?", ("Film 1",), ("A", "B"))
    assert as_example(("who?", ["X", "Y"], "A", ["directed_by"])).chain == ("directed_by",)

    @dataclass
    class Question:  # shaped like simgrag.eval.metaqa.MetaQAQuestion
        question: str
        topic: str
        answers: tuple[str, ...]
        chain: str

    assert as_example(Question("q", "T", ("A",), "directed_by")).topics == ("T",)
    with pytest.raises(ConfigError, match="chain_relations"):
        as_example(Question("q", "T", ("A",), "movie_to_director_to_movie"))
    with pytest.raises(ConfigError):
        as_example(("only", "two"))
    train, val = split_examples(list(range(100)), 0.1, seed=0)
    assert len(val) == 10 and sorted(train + val) == list(range(100))
    assert split_examples(list(range(100)), 0.1, seed=0) == (train, val)
