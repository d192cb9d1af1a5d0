"""The synthetic DBpedia-shaped KG: seeded, the requested shape, readable by simgrag's own loaders."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import ConfigError
from simgrag.eval.synthetic_dbpedia import (
    SyntheticKG,
    drop_qualifier,
    exact_matches,
    generate_dbpedia_like,
    load_schema,
    paraphrase_name,
    planted_triples_present,
    typo,
)
from simgrag.kg import load_kg

N = 6000


@pytest.fixture(scope="module")
def kg() -> SyntheticKG:
    return SyntheticKG(20_000, seed=3)


@pytest.fixture(scope="module")
def planted_nt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("synth") / "kg.nt"
    report = generate_dbpedia_like(path, entities=N, seed=1, planted=45)
    return path, report


def test_same_seed_same_files_other_seed_other_files(tmp_path: Path) -> None:
    def make(seed: int, name: str) -> tuple[bytes, bytes]:
        path = tmp_path / name
        generate_dbpedia_like(path, entities=3000, seed=seed, format="tsv", planted=12)
        return path.read_bytes(), Path(f"{path}.queries.jsonl").read_bytes()

    first, again, other = make(7, "a.tsv"), make(7, "b.tsv"), make(8, "c.tsv")
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]


def test_requested_counts_survive_loading(planted_nt: tuple[Path, object]) -> None:
    path, report = planted_nt
    store, loaded = load_kg(path)
    assert (store.num_types, store.num_relations) == (467, 522)
    assert loaded.triples_read == report.edges  # type: ignore[attr-defined]
    typed = np.diff(store.node_type_indptr) > 0  # literals have no type; every entity has its classes
    assert int(typed.sum()) == N


def test_mean_out_degree_and_heavy_tail(kg: SyntheticKG) -> None:
    degree = np.zeros(kg.num_entities, dtype=np.int64)
    edges = 0
    for _, _, chunk in kg.edge_chunks():
        edges += len(chunk)
        degree += np.bincount(chunk.heads, minlength=kg.num_entities)
        degree += np.bincount(chunk.tails[chunk.tails >= 0], minlength=kg.num_entities)
    assert 4.15 < edges / kg.num_entities < 4.5  # FactKG's DBpedia: 42.9M / 9.9M = 4.33
    assert degree.max() > 100 * degree.mean()  # hubs (popular countries, cities …)
    assert np.median(degree) < degree.mean()


def test_names_are_unique_and_readable(kg: SyntheticKG) -> None:
    names = [kg.names[i] for i in range(kg.num_entities)]
    assert len(set(names)) == len(names)
    assert not any(ch in name for name in names for ch in "_,\t\"")
    qualified = [n for n in names if n.endswith(")")]
    assert qualified and all(drop_qualifier(n) in set(names) for n in qualified[:50])
    assert sum(any(c.isalpha() for c in n) for n in names) == len(names)


def test_relations_respect_domain_and_range(kg: SyntheticKG) -> None:
    rels = kg.schema.relations
    dom = np.array([kg.layout.subtree(r.domain) for r in rels])
    rng = np.array([kg.layout.subtree(r.range) if r.range >= 0 else (0, 0) for r in rels])
    for _, _, chunk in kg.edge_chunks():
        lo, hi = dom[chunk.rels, 0], dom[chunk.rels, 1]
        assert ((chunk.heads >= lo) & (chunk.heads < hi)).all()
        ent = chunk.tails >= 0
        lo, hi = rng[chunk.rels[ent], 0], rng[chunk.rels[ent], 1]
        assert ((chunk.tails[ent] >= lo) & (chunk.tails[ent] < hi)).all()
        assert all(rels[r].literal is not None for r in chunk.rels[~ent].tolist())
        assert len(chunk.literals) == int((~ent).sum())


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_tsv_and_csv_load_like_nt(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"kg.{fmt}"
    report = generate_dbpedia_like(path, entities=2000, seed=2, format=fmt, types=60, relations=90)
    store, loaded = load_kg(path)
    assert loaded.triples_read == report.edges
    assert store.num_relations == 90
    assert store.num_types == (60 if fmt == "csv" else 0)


def test_planted_queries_are_answered_by_the_kg(planted_nt: tuple[Path, object]) -> None:
    path, report = planted_nt
    store, _ = load_kg(path)
    queries = [json.loads(line) for line in Path(report.queries_path).read_text().splitlines()]  # type: ignore[attr-defined]
    assert len(queries) == 45 and {q["shape"] for q in queries} == {"path", "star", "triangle"}
    unique = 0
    for q in queries:
        assert planted_triples_present(store, q), q["id"]
        assert all(store.entities.id_of(name) is not None for name in q["answers"].values())
        assert all(text.startswith("UNKNOWN ") for text in q["answers"])
        assert 2 <= len(q["pattern"]) <= 4
        matches = exact_matches(store, q)
        planted = {u: store.entities.id_of(name) for u, name in q["answers"].items()}
        assert planted in matches, q["id"]
        unique += len(matches) == 1
    assert unique >= 0.8 * len(queries)


def test_schema_cut_keeps_every_top_level_class() -> None:
    full, small = load_schema(467, 522), load_schema(40, 70)
    tops = {c.name for c in full.classes if c.parent < 0}
    assert tops <= {c.name for c in small.classes}
    assert (small.num_classes, len(small.relations)) == (40, 70)
    assert all(0 <= r.domain < 40 and r.range < 40 for r in small.relations)
    with pytest.raises(ConfigError):
        load_schema(10_000, 522)
    with pytest.raises(ConfigError):
        SyntheticKG(100, types=467)


def test_paraphrases() -> None:
    rng = random.Random(0)
    assert drop_qualifier("John Smith (soccer player 2)") == "John Smith"
    for _ in range(50):
        word = "Ashford"
        slipped = typo(word, rng)
        assert slipped != word and abs(len(slipped) - len(word)) <= 1 and slipped[0] == "A"
    text, edits = paraphrase_name("Ashford University (university)", rng, edits=2)
    assert "(" not in text and 1 <= len(edits) <= 2
    assert paraphrase_name("Ashford (town)", rng, edits=0) == ("Ashford", [])


def test_cli_synth_kg(tmp_path: Path) -> None:
    out = tmp_path / "kg.nt"
    result = CliRunner().invoke(app, ["synth-kg", "--entities", "1500", "--types", "50", "--relations", "80",
                                      "-o", str(out), "--planted", "5", "--json", "-v"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    assert data["entities"] == 1500 and data["queries"] == 5
    assert out.exists() and Path(data["queries_path"]).exists()


def test_to_store_equals_loading_the_written_file(tmp_path: Path) -> None:
    path = tmp_path / "kg.nt"
    generate_dbpedia_like(path, entities=2500, seed=4, types=80, relations=120, planted=9)
    loaded, _ = load_kg(path)
    kg = SyntheticKG(2500, seed=4, types=80, relations=120)
    direct = kg.to_store(kg.plant(9)[0])
    assert direct.stats() == loaded.stats()

    def facts(store: object) -> set[tuple[str, str, str]]:
        return {store.triple(i).as_tuple() for i in range(store.num_triples)}  # type: ignore[attr-defined]

    assert facts(direct) == facts(loaded)
    some = loaded.entities.id_of(kg.names[17])
    assert {loaded.types[t] for t in loaded.types_of(some)} == {
        direct.types[t] for t in direct.types_of(direct.entities.id_of(kg.names[17]))}  # type: ignore[index]
