"""The Kùzu source against a real Kùzu database (embedded, from PyPI): name properties, labels → types,
relationship types → relations, optional properties as triples, the bundled sample KG read back whole,
an index built from the database and queried."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("kuzu")

import kuzu

from simgrag.errors import EmptyKGError, KGError
from simgrag.index.directory import build_index_dir
from simgrag.kg.graphdb import KuzuSource
from simgrag.kg.loader import load_kg
from simgrag.kg.readers import iter_triples
from simgrag.kg.sources import open_source
from simgrag.kg.store import KGStore
from simgrag.pipeline import SimGRAG, sample_kg_path
from simgrag.testing.embedders import HashEmbedder


def names(store: KGStore) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}


def run(conn: object, *queries: str) -> None:
    for query in queries:
        conn.execute(query)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def movie_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kuzu") / "movies.kz"
    conn = kuzu.Connection(kuzu.Database(str(path)))
    run(conn,
        "CREATE NODE TABLE Person(id SERIAL, name STRING, born INT64, PRIMARY KEY(id))",
        "CREATE NODE TABLE Movie(title STRING, year INT64, PRIMARY KEY(title))",
        "CREATE NODE TABLE Studio(code STRING, PRIMARY KEY(code))",
        "CREATE REL TABLE DIRECTED_BY(FROM Movie TO Person)",
        "CREATE REL TABLE STARRED(FROM Person TO Movie, role STRING)",
        "CREATE REL TABLE MADE_BY(FROM Movie TO Studio)",
        "CREATE (:Person {name: 'Christopher Nolan', born: 1970})",
        "CREATE (:Person {name: 'Christopher Nolan', born: 1999})",  # a namesake
        "CREATE (:Person {name: 'Leonardo DiCaprio', born: 1974})",
        "CREATE (:Person {born: 1950})",  # no name: 'Person 3'
        "CREATE (:Person {name: 'Nobody Else'})",  # no relationship: left out
        "CREATE (:Movie {title: 'Inception', year: 2010})",
        "CREATE (:Movie {title: 'Interstellar', year: 2014})",
        "CREATE (:Studio {code: 'WB'})",
        "MATCH (m:Movie), (p:Person) WHERE p.id = 0 CREATE (m)-[:DIRECTED_BY]->(p)",
        "MATCH (m:Movie {title: 'Inception'}), (p:Person) WHERE p.id = 2 CREATE (p)-[:STARRED {role: 'Cobb'}]->(m)",
        "MATCH (m:Movie {title: 'Interstellar'}), (p:Person) WHERE p.id = 1 CREATE (p)-[:STARRED]->(m)",
        "MATCH (m:Movie {title: 'Interstellar'}), (p:Person) WHERE p.id = 3 CREATE (p)-[:STARRED]->(m)",
        "MATCH (m:Movie {title: 'Inception'}), (s:Studio) CREATE (m)-[:MADE_BY]->(s)")
    return path


def test_nodes_relationships_and_labels(movie_db: Path) -> None:
    store, report = KuzuSource(movie_db).load()
    assert names(store) == {
        ("Inception", "DIRECTED_BY", "Christopher Nolan"),
        ("Interstellar", "DIRECTED_BY", "Christopher Nolan"),
        ("Leonardo DiCaprio", "STARRED", "Inception"),
        ("Christopher Nolan (Person 1)", "STARRED", "Interstellar"),  # the namesake keeps apart
        ("Person 3", "STARRED", "Interstellar"),
        ("Inception", "MADE_BY", "WB"),  # a string primary key names the node
    }
    assert store.types is not None
    typed = {store.types[t]: {store.entities[int(e)] for e in store.nodes_of_type(t)} for t in range(store.num_types)}
    assert typed == {"Movie": {"Inception", "Interstellar"}, "Studio": {"WB"},
                     "Person": {"Christopher Nolan", "Christopher Nolan (Person 1)", "Leonardo DiCaprio", "Person 3"}}
    assert (report.format, report.path, report.entities) == ("kuzu", f"kuzu:{movie_db}", 7)


def test_properties_as_triples_and_name_properties(movie_db: Path) -> None:
    store, _ = KuzuSource(movie_db, properties=True).load()
    triples = names(store)
    assert {("Inception", "year", "2010"), ("Christopher Nolan", "born", "1970"),
            ("Person 3", "born", "1950")} <= triples
    assert not any(r in ("title", "name", "id") for _, r, _ in triples)  # names and SERIAL keys are no triples
    assert "Nobody Else" not in set(store.entities)  # no relationship and no property value
    by_key, _ = KuzuSource(movie_db, name_properties=("nickname",)).load()
    assert {"Person 0", "Person 1", "Person 2", "Inception"} <= set(by_key.entities)  # no such property: keys


def test_the_sample_kg_read_back_from_kuzu_and_queried(tmp_path: Path) -> None:
    triples = [t.as_tuple() for t in iter_triples(sample_kg_path())]
    path = tmp_path / "sample.kz"
    conn = kuzu.Connection(kuzu.Database(str(path)))
    conn.execute("CREATE NODE TABLE Entity(name STRING, PRIMARY KEY(name))")
    conn.execute("UNWIND $names AS n CREATE (:Entity {name: n})",
                 {"names": sorted({h for h, _, _ in triples} | {t for _, _, t in triples})})
    for relation in sorted({r for _, r, _ in triples}):
        conn.execute(f"CREATE REL TABLE {relation}(FROM Entity TO Entity)")
        conn.execute(f"UNWIND $pairs AS p MATCH (a:Entity {{name: p[1]}}), (b:Entity {{name: p[2]}}) "
                     f"CREATE (a)-[:{relation}]->(b)", {"pairs": [[h, t] for h, r, t in triples if r == relation]})
    del conn
    source = open_source(f"kuzu:{path}")
    assert isinstance(source, KuzuSource)
    built = build_index_dir(source, tmp_path / "sample.idx", embedder=HashEmbedder(dim=64), show_progress=False)
    reference, _ = load_kg(sample_kg_path())
    assert names(built.store) == names(reference)
    assert built.manifest["kg"]["source"] == f"kuzu:{path}" and built.manifest["kg"]["format"] == "kuzu"
    best = SimGRAG(built, llm=None).retrieve([["Inception", "directed_by", "UNKNOWN director 1"]]).evidence[0]
    assert [e.triple.as_tuple() for e in best.edges] == [("Inception", "directed_by", "Christopher Nolan")]


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(KGError, match="no Kùzu database"):
        KuzuSource(tmp_path / "missing").load()
    path = tmp_path / "nodes_only.kz"
    conn = kuzu.Connection(kuzu.Database(str(path)))
    conn.execute("CREATE NODE TABLE Thing(name STRING, PRIMARY KEY(name))")
    conn.execute("CREATE (:Thing {name: 'alone'})")
    del conn
    with pytest.raises(EmptyKGError, match="no relationship"):
        KuzuSource(path).load()


def test_cli_indexes_a_kuzu_database(movie_db: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simgrag import cli
    from simgrag.index.directory import open_index_dir

    args = ["index", f"kuzu:{movie_db}", "-o", str(tmp_path / "k.idx"), "--embedder", "hash:32", "--no-learn",
            "--source-param", "properties=true", "--source-param", "name_properties=name,title"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    store = open_index_dir(tmp_path / "k.idx").store
    assert ("Inception", "year", "2010") in names(store)
    bad = CliRunner().invoke(cli.app, ["index", f"kuzu:{movie_db}", "-o", str(tmp_path / "x.idx"),
                                       "--source-param", "page_size=10"])
    assert bad.exit_code == 2 and "does not apply to a Kùzu database" in bad.output
