"""OKGQA-P perturbations, the triple scorer and the KG-similarity metrics (simgrag.perturb)."""

from __future__ import annotations

import json
import logging
from itertools import combinations, pairwise
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simgrag.errors import ConfigError, KGError, ModelError
from simgrag.kg.store import KGStore
from simgrag.perturb.base import Perturbation, perturbed_count
from simgrag.perturb.files import load_perturbed, perturb_file
from simgrag.perturb.methods import perturb
from simgrag.perturb.scorer import DistMultScorer, ScorerConfig, train_scorer
from simgrag.perturb.similarity import ats, clustering_coefficients, kg_similarity, sc2d, sd2
from simgrag.retrievers._torch import torch
from simgrag.testing.synthetic import synthetic_movie_kg
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

torch.set_num_threads(1)

METHODS = ("rs", "rr", "er", "ed")
LEVELS = (0.1, 0.3, 0.5)


class StubScorer:
    """A fixed, hand-checkable plausibility: ((31h + 17r + 7t) mod 11) / 10."""

    def score(self, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> np.ndarray:
        h, r, t = (np.asarray(a, dtype=np.int64) for a in (heads, rels, tails))
        return ((31 * h + 17 * r + 7 * t) % 11) / 10.0


def clustered_kg(groups: int = 24, size: int = 5) -> list[tuple[str, str, str]]:
    """Cliques of people, each clique under one relation (so every relation subgraph has triangles),
    joined in a ring by ``knows`` edges."""
    triples = []
    for g in range(groups):
        people = [f"P{g}.{i}" for i in range(size)]
        triples += [(a, f"rel{g % 3}", b) for a, b in combinations(people, 2)]
        triples.append((people[0], "knows", f"P{(g + 1) % groups}.1"))
    return triples


@pytest.fixture(scope="module")
def movies() -> KGStore:
    return KGStore.from_triples(synthetic_movie_kg())


@pytest.fixture(scope="module")
def cliques() -> KGStore:
    return KGStore.from_triples(clustered_kg())


@pytest.fixture(scope="module")
def scorer(movies: KGStore) -> DistMultScorer:
    return train_scorer(movies, ScorerConfig(epochs=5, batch_size=128, min_steps=250), show_progress=False)


def run(store: KGStore, method: str, level: float, seed: int = 0) -> Perturbation:
    return perturb(store, method, level, seed=seed, scorer=StubScorer() if method == "rr" else None)


def triple_set(h: np.ndarray, r: np.ndarray, t: np.ndarray) -> set[tuple[int, int, int]]:
    return set(zip(h.tolist(), r.tolist(), t.tolist(), strict=True))


# ------------------------------------------------------------------------------------------ counts
def test_perturbed_count_rounds_half_up() -> None:
    assert [perturbed_count(x, 10) for x in (0.0, 0.14, 0.15, 0.25, 0.3, 0.35, 1.0)] == [0, 1, 2, 3, 3, 4, 10]
    assert perturbed_count(0.5, 3) == 2  # round(1.5) would be 2 too, but round(2.5) = 2 where ours is 3
    assert perturbed_count(0.5, 5) == 3
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ConfigError):
            perturbed_count(bad, 10)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("level", LEVELS)
def test_changes_exactly_the_documented_number_and_keeps_entities(movies: KGStore, method: str,
                                                                 level: float) -> None:
    p = run(movies, method, level)
    k = perturbed_count(level, movies.num_triples)
    assert p.num_changed == k == len(list(p.changes()))
    before = triple_set(movies.heads, movies.rels, movies.tails)
    after = triple_set(p.heads, p.rels, p.tails)
    assert len(before - after) == k
    if method == "ed":
        assert p.num_triples == movies.num_triples - k and after <= before
    else:
        assert p.num_triples == movies.num_triples == len(after)  # no duplicate triple was made
        assert len(after - before) == k
    store = p.to_store()
    assert store.duplicates_removed == 0
    assert list(store.entities) == list(movies.entities)
    assert store.num_entities == movies.num_entities


@pytest.mark.parametrize("method", METHODS)
def test_reproducible_by_seed_and_different_across_seeds(movies: KGStore, method: str) -> None:
    a, b, c = run(movies, method, 0.3, seed=7), run(movies, method, 0.3, seed=7), run(movies, method, 0.3, seed=8)
    assert np.array_equal(a.changed, b.changed) and np.array_equal(a.new_triples, b.new_triples)
    assert list(a.changes()) == list(b.changes())
    assert not np.array_equal(a.changed, c.changed)
    assert triple_set(a.heads, a.rels, a.tails) != triple_set(c.heads, c.rels, c.tails)


def test_change_records(movies: KGStore) -> None:
    for method in METHODS:
        for change in run(movies, method, 0.1).changes():
            assert change.method == method and change.old == movies.triple(change.edge)
            if method == "ed":
                assert change.new is None
            else:
                assert change.new is not None and change.new != change.old
                same = {"rs": (0, 2), "rr": (0, 2), "er": (0, 1)}[method]
                assert all(change.new.as_tuple()[i] == change.old.as_tuple()[i] for i in same)


def test_level_zero_changes_nothing(movies: KGStore) -> None:
    for method in METHODS:
        p = run(movies, method, 0.0)
        assert p.num_changed == 0 and triple_set(p.heads, p.rels, p.tails) == triple_set(
            movies.heads, movies.rels, movies.tails)


# ------------------------------------------------------------------------------------------ methods
def test_relation_swapping_moves_relations_between_edges(movies: KGStore) -> None:
    for level in (0.1, 0.3):  # k = 42 (pairs) and 127 (pairs + one three-cycle)
        p = run(movies, "rs", level)
        old_rels = np.asarray(movies.rels)[p.changed]
        new_rels = p.new_triples[:, 1]
        assert np.all(old_rels != new_rels)
        assert sorted(old_rels.tolist()) == sorted(new_rels.tolist())  # the relations were only moved around
        assert np.bincount(p.rels, minlength=movies.num_relations).tolist() == np.bincount(
            movies.rels, minlength=movies.num_relations).tolist()


def test_relation_swapping_odd_count_with_two_relations(caplog: pytest.LogCaptureFixture) -> None:
    store = KGStore.from_triples([(f"a{i}", "r" if i % 2 else "s", f"b{i}") for i in range(10)])
    with caplog.at_level(logging.WARNING):
        p = perturb(store, "rs", 0.3, seed=0)  # 3 edges asked for; only pairs are possible
    assert p.num_changed == 2 and "odd" in caplog.text


def test_relation_replacement_picks_the_lowest_scored_relation(movies: KGStore) -> None:
    stub = StubScorer()
    p = perturb(movies, "rr", 0.5, seed=3, scorer=stub)
    original = triple_set(movies.heads, movies.rels, movies.tails)
    made: set[tuple[int, int, int]] = set()
    for row, (h, r, t) in zip(p.changed.tolist(), p.new_triples.tolist(), strict=True):
        allowed = [x for x in range(movies.num_relations) if (h, x, t) not in original and (h, x, t) not in made]
        scores = stub.score(np.full(len(allowed), h), np.array(allowed), np.full(len(allowed), t))
        assert r == allowed[int(np.argmin(scores))]  # argmin takes the lowest relation id on ties
        assert (h, t) == (int(movies.heads[row]), int(movies.tails[row]))
        made.add((h, r, t))


def test_relation_replacement_needs_a_scorer(movies: KGStore) -> None:
    with pytest.raises(ConfigError, match="scorer"):
        perturb(movies, "rr", 0.1)
    with pytest.raises(ConfigError, match="unknown"):
        perturb(movies, "xx", 0.1)


def test_edge_rewiring_never_rewires_to_a_one_hop_neighbour(movies: KGStore) -> None:
    p = run(movies, "er", 0.5, seed=2)
    for row, (h, r, t) in zip(p.changed.tolist(), p.new_triples.tolist(), strict=True):
        assert (h, r) == (int(movies.heads[row]), int(movies.rels[row]))
        assert t != h and t not in set(movies.neighbors(h)[0].tolist())


def test_edge_rewiring_fails_loudly_when_no_entity_is_outside() -> None:
    triangle = KGStore.from_triples([("a", "r", "b"), ("b", "r", "c"), ("c", "s", "a")])
    with pytest.raises(KGError, match="lower level"):
        perturb(triangle, "er", 0.5)


def test_edge_deletion_keeps_isolated_entities_in_the_table(movies: KGStore) -> None:
    p = run(movies, "ed", 0.5)
    isolated = p.isolated_entities()
    assert len(isolated) > 0
    touched = set(p.heads.tolist()) | set(p.tails.tolist())
    assert not touched & set(isolated.tolist())
    assert touched | set(isolated.tolist()) == set(range(movies.num_entities))
    assert p.to_store().num_entities == movies.num_entities


def test_perturbations_nest_across_levels(movies: KGStore) -> None:
    for method in ("rr", "er", "ed"):
        low, high = run(movies, method, 0.1), run(movies, method, 0.5)
        assert np.array_equal(high.changed[: low.num_changed], low.changed)
        assert np.array_equal(high.new_triples[: low.num_changed], low.new_triples)


# ------------------------------------------------------------------------------------------ similarity
def test_clustering_coefficients_match_networkx() -> None:
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(0)
    for n, m in ((30, 90), (60, 400), (200, 300)):
        u, v = rng.integers(n, size=m), rng.integers(n, size=m)
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from((a, b) for a, b in zip(u.tolist(), v.tolist(), strict=True) if a != b)
        expected = nx.clustering(graph)
        assert np.allclose(clustering_coefficients(n, u, v), [expected[i] for i in range(n)])


def test_identical_kgs_are_fully_similar(movies: KGStore, cliques: KGStore) -> None:
    for store in (movies, cliques):
        copy = KGStore.from_triples(
            [t.as_tuple() for t in (store.triple(i) for i in reversed(range(store.num_triples)))])
        assert sc2d(store, store) == sd2(store, store) == 1.0
        assert sc2d(store, copy) == sd2(store, copy) == 1.0  # other ids, same names
        sim = kg_similarity(store, run(store, "rs", 0.0))
        assert sim.sc2d == sim.sd2 == 1.0


def _falls(values: list[float]) -> bool:
    return all(b <= a for a, b in pairwise(values)) and values[-1] < values[0]


@pytest.mark.parametrize("method", METHODS)
def test_sc2d_falls_with_the_level(cliques: KGStore, method: str) -> None:
    values = [sc2d(cliques, run(cliques, method, level)) for level in LEVELS]
    assert values[0] < 1.0 and _falls(values), values


@pytest.mark.parametrize("method", ["er", "ed"])
def test_sd2_falls_with_the_level(movies: KGStore, cliques: KGStore, method: str) -> None:
    for store in (movies, cliques):
        values = [sd2(store, run(store, method, level)) for level in LEVELS]
        assert values[0] < 1.0 and _falls(values), values


@pytest.mark.parametrize("method", ["rs", "rr"])
def test_sd2_is_blind_to_relation_changes(movies: KGStore, method: str) -> None:
    """SD2 averages per-relation degree vectors, whose sum is the KG's degree vector: moving an edge
    to another relation changes nothing (OKGQA's Fig. 4 shows a fall; the definition cannot)."""
    assert [sd2(movies, run(movies, method, level)) for level in LEVELS] == [1.0, 1.0, 1.0]


def test_ats_of_the_original_is_high_and_differs_from_one(movies: KGStore, scorer: DistMultScorer) -> None:
    own = ats(scorer, movies)
    assert 0.9 < own < 1.0
    assert ats(scorer, run(movies, "ed", 1.0)) == 0.0  # no edge left


@pytest.mark.parametrize("method", ["rs", "rr", "er"])
def test_ats_falls_with_the_level(movies: KGStore, scorer: DistMultScorer, method: str) -> None:
    values = [ats(scorer, perturb(movies, method, level, seed=0, scorer=scorer)) for level in LEVELS]
    assert _falls(values) and values[-1] < ats(scorer, movies) - 0.2, values


def test_ats_barely_moves_under_edge_deletion(movies: KGStore, scorer: DistMultScorer) -> None:
    """Deleting random edges leaves the mean score of the rest unbiased (OKGQA Fig. 4: ATS stays high)."""
    own = ats(scorer, movies)
    for level in LEVELS:
        assert abs(ats(scorer, run(movies, "ed", level)) - own) < 0.02


def test_relation_replacement_with_the_trained_scorer_hits_ats_hardest(movies: KGStore,
                                                                       scorer: DistMultScorer) -> None:
    rr = ats(scorer, perturb(movies, "rr", 0.5, seed=0, scorer=scorer))
    for method in ("rs", "er"):
        assert rr <= ats(scorer, run(movies, method, 0.5)) + 0.01


# ------------------------------------------------------------------------------------------ scorer
def test_scorer_trains_and_reloads_with_identical_scores(movies: KGStore, scorer: DistMultScorer,
                                                         tmp_path: Path) -> None:
    assert scorer.history[-1] < 0.5 * scorer.history[0]
    heads, rels, tails = np.asarray(movies.heads), np.asarray(movies.rels), np.asarray(movies.tails)
    scorer.save(tmp_path / "scorer")
    loaded = DistMultScorer.load(tmp_path / "scorer", store=movies)
    assert np.array_equal(loaded.score(heads, rels, tails), scorer.score(heads, rels, tails))
    assert loaded.config == scorer.config and loaded.history == scorer.history
    manifest = json.loads((tmp_path / "scorer" / "manifest.json").read_text())
    assert manifest["kg"]["content_hash"] == movies.content_hash()
    with pytest.raises(ModelError, match="another KG"):
        DistMultScorer.load(tmp_path / "scorer", store=KGStore.from_triples(TOY_TRIPLES))
    (tmp_path / "scorer" / "embeddings.npz").write_bytes(b"broken")
    with pytest.raises(ModelError, match="does not match"):
        DistMultScorer.load(tmp_path / "scorer")
    with pytest.raises(ModelError, match="missing"):
        DistMultScorer.load(tmp_path / "nowhere")


def test_scorer_training_is_seeded(movies: KGStore) -> None:
    config = ScorerConfig(dim=8, epochs=2, batch_size=256, min_steps=0, seed=5)
    a, b = train_scorer(movies, config), train_scorer(movies, config)
    assert np.array_equal(a.entity_emb, b.entity_emb) and a.history == b.history


# ------------------------------------------------------------------------------------------ files, CLI
def test_written_kg_reads_back_with_its_isolated_entities(movies: KGStore, tmp_path: Path) -> None:
    src = tmp_path / "movies.tsv"
    src.write_text("".join("\t".join(t.as_tuple()) + "\n" for t in map(movies.triple, range(movies.num_triples))))
    report = perturb_file(src, tmp_path / "out.tsv", method="ed", level=0.5, seed=1, similarity=True,
                          scorer_dir=tmp_path / "sc", scorer_epochs=1)
    back = load_perturbed(tmp_path / "out.tsv")
    assert back.num_entities == movies.num_entities and back.num_triples == report.perturbation.num_triples
    assert set(back.entities) == set(movies.entities)
    assert report.similarity is not None
    assert report.similarity.sd2 == pytest.approx(sd2(movies, back))
    assert report.similarity.sc2d == pytest.approx(sc2d(movies, back))
    assert DistMultScorer.exists(tmp_path / "sc")
    meta = json.loads((tmp_path / "out.tsv.perturb.json").read_text())
    assert meta["changed"] == perturbed_count(0.5, movies.num_triples) and meta["similarity"]["sd2"] < 1


@pytest.mark.parametrize(("name", "sep"), [("kg.txt", "|"), ("kg.tsv", "\t")])
def test_cli_writes_the_kg_and_the_change_log(tmp_path: Path, name: str, sep: str) -> None:
    from simgrag.cli import app

    src = tmp_path / name
    if sep == "|":
        write_toy_kg(src)
    else:
        src.write_text("".join("\t".join(t) + "\n" for t in TOY_TRIPLES))
    out = tmp_path / ("out" + src.suffix)
    result = CliRunner().invoke(app, ["perturb", str(src), "--method", "er", "--level", "0.3", "--seed", "4",
                                      "-o", str(out), "--similarity", "--scorer-epochs", "1"])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == len(TOY_TRIPLES) and all(len(line.split(sep)) == 3 for line in lines)
    changes = [json.loads(x) for x in (tmp_path / (out.name + ".changes.jsonl")).read_text().splitlines()]
    assert len(changes) == perturbed_count(0.3, len(TOY_TRIPLES)) == 5
    assert all(c["method"] == "er" and c["old"][:2] == c["new"][:2] for c in changes)
    assert "5 of 17 edges changed" in result.output and "SC2D" in result.output and "ATS" in result.output


def test_cli_reports_errors(tmp_path: Path) -> None:
    from simgrag.cli import app

    src = write_toy_kg(tmp_path / "kg.txt")
    result = CliRunner().invoke(app, ["perturb", str(src), "--method", "zz", "-o", str(tmp_path / "o.txt")])
    assert result.exit_code == 2 and "unknown perturbation method" in result.output


def test_package_exports_resolve() -> None:
    import simgrag.perturb as package

    for name in package.__all__:
        assert getattr(package, name) is not None, name
