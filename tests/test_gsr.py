"""GSR-style relation chains: tokens, directions, KG walks, training, constrained decoding, save/load."""

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
from simgrag.retrievers.gsr import (
    EOS,
    GSRConfig,
    GSRModel,
    GSRRetriever,
    RelationVocab,
    allowed_tokens,
    constrained_beam_search,
    mask_topic,
    walk_chain,
)
from simgrag.retrievers.gsr_train import ChainExample, GSRTrainer, directed_chain, indexing_data
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.synthetic import QUESTION_TEMPLATES, synthetic_movie_kg, synthetic_questions
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

torch.set_num_threads(1)

CONFIG = GSRConfig(hidden=64, token_dim=32, dropout=0.0)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[IndexDir, list[tuple[str, str, str]]]:
    root = tmp_path_factory.mktemp("synthetic")
    triples = synthetic_movie_kg()
    (root / "kg.txt").write_text("\n".join("|".join(t) for t in triples) + "\n", encoding="utf-8")
    return build_index_dir(root / "kg.txt", root / "kg.idx", embedder=HashEmbedder(dim=64)), triples


@pytest.fixture(scope="module")
def trained(synthetic: tuple[IndexDir, list[tuple[str, str, str]]]) -> tuple[GSRTrainer, GSRModel]:
    index, triples = synthetic
    trainer = GSRTrainer(index, config=CONFIG, seed=0, show_progress=False)
    model = trainer.fit(synthetic_questions(triples, 200, seed=1), epochs=25, lr=5e-3, per_direction=5,
                        compositions=50, description="synthetic movies")
    return trainer, model


def _ids(store: KGStore, *names: str) -> list[int]:
    return [i for n in names if (i := store.entities.id_of(n)) is not None]


# ---------------------------------------------------------------------- tokens and walks
def test_vocab_tokens_round_trip() -> None:
    vocab = RelationVocab(["directed_by", "starred_actors"])
    assert len(vocab) == 3 + 4
    assert vocab.token(0) == 3 and vocab.token(0, inverse=True) == 4 and vocab.token(1, True) == 6
    assert [vocab.name(t) for t in range(len(vocab))] == [
        "<pad>", "<bos>", "<eos>", "directed_by", "~directed_by", "starred_actors", "~starred_actors"]
    assert all(vocab.parse(vocab.name(t)) == t for t in range(3, len(vocab)))
    with pytest.raises(KeyError):
        vocab.parse("~unknown")


def test_mask_topic_replaces_whole_names_case_insensitively() -> None:
    assert mask_topic("who directed the movie inception?", ["Inception"]) == "who directed the movie [entity]?"
    assert mask_topic("films of Film 1 and Film 12", ["Film 1"]) == "films of [entity] and Film 12"


def test_directed_chain_reads_directions_from_the_kg() -> None:
    store = KGStore.from_triples(TOY_TRIPLES)
    vocab = RelationVocab(list(store.relations))
    directed = store.relations.id_of("directed_by")
    assert directed is not None
    tokens = directed_chain(store, _ids(store, "Inception"), _ids(store, "Memento"), [directed, directed])
    assert tokens is not None and [vocab.name(t) for t in tokens] == ["directed_by", "~directed_by"]
    tokens = directed_chain(store, _ids(store, "James Cameron"), _ids(store, "Titanic", "Avatar"), [directed])
    assert tokens is not None and [vocab.name(t) for t in tokens] == ["~directed_by"]
    assert directed_chain(store, _ids(store, "Juno"), _ids(store, "Memento"), [directed]) is None


def test_walk_chain_prunes_to_complete_paths() -> None:
    store = KGStore.from_triples(TOY_TRIPLES)
    vocab = RelationVocab(list(store.relations))
    walk = walk_chain(store, _ids(store, "Leonardo DiCaprio"),
                      [vocab.parse("~starred_actors"), vocab.parse("directed_by")])
    assert sorted(store.entities[int(e)] for e in walk.ends) == ["Christopher Nolan", "James Cameron"]
    assert {store.triple(int(t)) for t in walk.triple_ids()} == {
        Triple("Inception", "starred_actors", "Leonardo DiCaprio"),
        Triple("Titanic", "starred_actors", "Leonardo DiCaprio"),
        Triple("Inception", "directed_by", "Christopher Nolan"), Triple("Titanic", "directed_by", "James Cameron")}
    paths = list(walk.paths(10))
    assert len(paths) == 2 and all(store.triple(p[0]).tail == "Leonardo DiCaprio" for p in paths)
    # release_year then directed_by: the year has no directed_by edge, so nothing survives the pruning
    dead = walk_chain(store, _ids(store, "Inception"), [vocab.parse("release_year"), vocab.parse("directed_by")])
    assert len(dead.ends) == 0 and len(dead.triple_ids()) == 0


def test_indexing_data_covers_every_directed_relation(synthetic: tuple[IndexDir, list]) -> None:
    store = synthetic[0].store
    data = indexing_data(store, per_direction=3, compositions=20, seed=0)
    singles = {ex.tokens[0] for ex in data if len(ex.tokens) == 1}
    assert singles == set(range(3, 3 + 2 * store.num_relations))
    for ex in data:  # every pseudo-question's chain is executable from its entity
        assert len(walk_chain(store, ex.topic_ids, ex.tokens).ends) > 0
        assert ex.topics[0] in ex.text
    assert sum(len(ex.tokens) == 2 for ex in data) >= 15


# ---------------------------------------------------------------------- training and decoding
def test_trained_model_decodes_the_right_chains(synthetic: tuple[IndexDir, list],
                                                trained: tuple[GSRTrainer, GSRModel]) -> None:
    index, triples = synthetic
    trainer, model = trained
    held_out = trainer.retrieval_data(synthetic_questions(triples, 60, seed=42))
    untrained = trainer.evaluate(GSRModel.create(index, CONFIG, seed=0), held_out)
    result = trainer.evaluate(model, held_out)
    assert result["chain_accuracy"] >= 0.9 > untrained["chain_accuracy"]
    assert result["answer_hit"] >= 0.9
    history = model.training["history"]
    assert history[-1]["train_loss"] < 0.5 * history[0]["train_loss"]

    retriever = GSRRetriever(index, model, beam_size=4, num_chains=2)
    assert isinstance(retriever, Retriever)
    actor = next(t for h, r, t in triples if r == "starred_actors")
    context = retriever.retrieve(f"who directed the films that {actor} acted in", topic_entities=[actor])
    assert context.info["chains"][0]["chain"] == ["~starred_actors", "directed_by"]
    films = {h for h, r, t in triples if r == "starred_actors" and t == actor}
    directors = {t for h, r, t in triples if r == "directed_by" and h in films} - {actor}
    assert directors <= set(context.answer_candidates) and actor not in context.answer_candidates
    assert context.topic is not None and context.topic.source == "given"
    assert len(context.scores) == len(context.triples) and all(0 < s <= 1 for s in context.scores)
    assert all(path[0].tail == actor or path[0].head == actor for path in context.paths)


def test_beam_search_only_returns_executable_chains(synthetic: tuple[IndexDir, list],
                                                    trained: tuple[GSRTrainer, GSRModel]) -> None:
    index, _ = synthetic
    store = index.store
    rng = np.random.default_rng(0)
    untrained = GSRModel.create(index, CONFIG, seed=3)
    questions = [t[0].format("it") for t in QUESTION_TEMPLATES] + ["zzz", "what is the airspeed of a swallow"]
    for model in (trained[1], untrained):
        for entity in rng.choice(store.num_entities, size=25, replace=False):
            qvec = model.question_vectors(index, [str(rng.choice(questions))], [[]])[0]
            chains = constrained_beam_search(model.net, qvec, store, model.vocab, [int(entity)], beam_size=6)
            assert chains, "a node with an edge always has a chain"
            for chain in chains:
                assert 1 <= len(chain.tokens) <= model.config.max_hops and EOS not in chain.tokens
                frontier = np.array([int(entity)])
                for token in chain.tokens:  # each step was allowed where it was taken
                    assert token in allowed_tokens(store, frontier)
                    frontier = walk_chain(store, frontier.tolist(), [token]).ends
                assert len(walk_chain(store, [int(entity)], chain.tokens).ends) > 0
            assert [c.logprob for c in chains] == sorted((c.logprob for c in chains), reverse=True)
    # a year only has ~release_year edges: even "who directed" cannot leave that way
    year = next(i for i, name in enumerate(store.entities) if name.isdigit())
    qvec = trained[1].question_vectors(index, ["who directed it"], [[]])[0]
    chains = constrained_beam_search(trained[1].net, qvec, store, trained[1].vocab, [year], beam_size=3)
    assert all(trained[1].vocab.name(c.tokens[0]) == "~release_year" for c in chains)


# ---------------------------------------------------------------------- persistence
def test_save_load_and_refuse_another_kg(tmp_path: Path, synthetic: tuple[IndexDir, list],
                                         trained: tuple[GSRTrainer, GSRModel]) -> None:
    index, _ = synthetic
    model = trained[1]
    model.save(tmp_path / "gsr")
    manifest = json.loads((tmp_path / "gsr" / "manifest.json").read_text())
    assert manifest["kind"] == "gsr" and manifest["vocab"] == list(index.store.relations)
    assert manifest["kg"]["content_hash"] == index.store.content_hash()
    assert manifest["training"]["description"] == "synthetic movies" and "val_chain_accuracy" in manifest["metrics"]
    loaded = GSRModel.load(tmp_path / "gsr", index)
    a, b = GSRRetriever(index, model), GSRRetriever(index, tmp_path / "gsr")
    topic = _ids(index.store, "Person 5")
    for question in ("which films did Person 5 write", "what genres are the films directed by Person 5"):
        assert a.decode(question, topic) == b.decode(question, topic)
    assert loaded.config == model.config

    root = tmp_path / "toy"
    root.mkdir()
    toy = build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))
    with pytest.raises(ModelError, match="trained on a different KG"):
        GSRModel.load(tmp_path / "gsr", toy)
    with pytest.raises(ModelError, match="trained on a different KG"):
        GSRRetriever(toy, tmp_path / "gsr")


def test_examples_without_chain_or_answers_are_skipped(synthetic: tuple[IndexDir, list]) -> None:
    trainer = GSRTrainer(synthetic[0], config=CONFIG, show_progress=False)
    data = trainer.retrieval_data([
        ("who directed Film 1", "Film 1", ("Nobody Known",), ("directed_by",)),  # answer not in the KG
        ("who directed Film 1", "Film 1", ("Person 1",), ()),  # no gold chain
        ("who directed Film 2", ["Film 2"], [t for h, r, t in synthetic[1] if h == "Film 2" and r == "directed_by"],
         ["directed_by"]),
    ])
    assert trainer.skipped == 2 and len(data) == 1
    assert isinstance(data[0], ChainExample) and data[0].tokens == (3 + 2 * (synthetic[0].store.relations.id_of(
        "directed_by") or 0),)
