"""RDF files through pyoxigraph: every syntax (and its gzip) gives the same KG from the fixture files in
tests/fixtures/rdf/ — names from labels (language and predicate preference), types from rdf:type,
literals as entities or skipped, blank nodes, IRIs kept into the evidence — and malformed files fail
with ``file:line``."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyoxigraph")

from simgrag.errors import EmptyKGError, KGFormatError
from simgrag.index.directory import build_index_dir
from simgrag.kg.loader import load_kg
from simgrag.kg.rdf import SKOS_PREF_LABEL, RDFOptions, load_rdf, rdf_format
from simgrag.kg.store import KGStore
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder

FIXTURES = Path(__file__).parent / "fixtures" / "rdf"
FORMATS = ["movies.ttl", "movies.nq", "movies.trig", "movies.rdf", "movies.jsonld"]
EX = "http://example.org/movies/"
NOLAN_JR = EX + "Nolan_Junior"  # its label clashes with Christopher Nolan's: named by its IRI
EXPECTED = {
    ("Inception", "directed by", "Christopher Nolan"),
    ("Interstellar", "directed by", "Christopher Nolan"),
    ("Tenet", "directed by", "Christopher Nolan"),
    ("Inception", "releaseYear", "2010"),
    ("Inception", "hasRating", "_:b1"),
    ("_:b1", "source", "IMDb"),
    ("_:b1", "score", "8.8"),
    (NOLAN_JR, "bornIn", "London"),
}


def triples(store: KGStore) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}


def typed(store: KGStore) -> dict[str, set[str]]:
    assert store.types is not None
    return {store.types[t]: {store.entities[int(e)] for e in store.nodes_of_type(t)} for t in range(store.num_types)}


def gzipped(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / (path.name + ".gz")
    with path.open("rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("compressed", [False, True])
def test_every_syntax_gives_the_same_kg(name: str, compressed: bool, tmp_path: Path) -> None:
    path = gzipped(FIXTURES / name, tmp_path) if compressed else FIXTURES / name
    store, report = load_kg(path)
    assert report.format == rdf_format(path)
    assert triples(store) == EXPECTED
    assert typed(store) == {"film": {"Inception", "Interstellar"}, "person": {"Christopher Nolan"}}
    assert (report.triples_read, report.entities, report.relations, report.types) == (8, 10, 6, 2)
    iris = store.iris
    assert iris is not None
    nolan = store.entities.id_of("Christopher Nolan")
    assert nolan is not None and iris.entity(nolan) == EX + "Christopher_Nolan"
    london = store.entities.id_of("London")
    assert london is not None and iris.entity(london) == "http://example.org/places/London"
    for literal_or_blank in ("2010", "8.8", "IMDb", "_:b1"):
        found = store.entities.id_of(literal_or_blank)
        assert found is not None and iris.entity(found) is None
    directed = store.relations.id_of("directed by")
    assert directed is not None and iris.relation(directed) == EX + "directedBy"


def test_format_detection() -> None:
    assert rdf_format(Path("kb.ttl")) == "turtle"
    assert rdf_format(Path("kb.TTL.gz")) == "turtle"
    assert rdf_format(Path("kb.nq")) == "nquads"
    assert rdf_format(Path("dump.owl")) == "rdfxml"
    assert rdf_format(Path("kb.json-ld")) == "jsonld"
    assert rdf_format(Path("kb.nt.gz")) == "ntriples"  # gzipped N-Triples through pyoxigraph
    assert rdf_format(Path("kb.nt")) is None  # plain N-Triples keep the line reader (skip_bad_lines)
    assert rdf_format(Path("kb.txt")) is None
    assert rdf_format(Path("kb.data"), "ttl") == "turtle"
    assert rdf_format(Path("kb.txt"), "pipe") is None


def test_label_language_preference_is_configurable() -> None:
    store, _ = load_rdf(FIXTURES / "movies.ttl", options=RDFOptions(languages=("fr", "")))
    names = set(store.entities)
    assert "Origine" in names and "Inception" not in names
    # untagged first: skos:prefLabel "Chris Nolan" beats rdfs:label "Christopher Nolan"@en, so the
    # en-GB label of Nolan Junior no longer clashes
    store, _ = load_rdf(FIXTURES / "movies.ttl", options=RDFOptions(languages=("",)))
    names = set(store.entities)
    assert {"Chris Nolan", "Christopher Nolan"} <= names and NOLAN_JR not in names
    nolan = store.entities.id_of("Chris Nolan")
    assert nolan is not None and store.iris is not None and store.iris.entity(nolan) == EX + "Christopher_Nolan"


def test_label_predicates_are_configurable() -> None:
    store, _ = load_rdf(FIXTURES / "movies.ttl", options=RDFOptions(label_predicates=(SKOS_PREF_LABEL,)))
    names = set(store.entities)
    assert "Chris Nolan" in names
    assert "Interstellar" in names  # no label predicate left for it: the IRI's local name
    # schema:name is an ordinary predicate now: its literal is a node (named apart from the IRI's node)
    assert {(h, r) for h, r, _ in triples(store)} >= {("Interstellar", "name"), ("Inception", "label")}
    assert "directedBy" in set(store.relations)


def test_literals_can_be_skipped() -> None:
    store, report = load_rdf(FIXTURES / "movies.ttl", options=RDFOptions(literals="skip"))
    assert triples(store) == {t for t in EXPECTED if t[2] not in ("2010", "IMDb", "8.8")}
    assert report.skipped_reasons == {"literal object (literals='skip')": 3}


@pytest.mark.parametrize(("name", "line"), [("bad.ttl", 5), ("bad.nq", 2), ("bad.trig", 4), ("bad.rdf", 8),
                                            ("bad.jsonld", 6)])
def test_malformed_files_fail_with_file_and_line(name: str, line: int, tmp_path: Path) -> None:
    for path in (FIXTURES / name, gzipped(FIXTURES / name, tmp_path)):
        with pytest.raises(KGFormatError) as caught:
            load_kg(path)
        assert caught.value.problems[0][:2] == (str(path), line)
        assert str(caught.value).startswith(f"{path}:{line}: ")


def test_not_gzip_and_no_triples(tmp_path: Path) -> None:
    fake = tmp_path / "kb.ttl.gz"
    fake.write_bytes(b"@prefix ex: <http://example.org/> .\n")
    with pytest.raises(Exception, match="gzip") as caught:
        load_kg(fake)
    assert caught.type.__module__ == "simgrag.errors"
    labels_only = tmp_path / "labels.ttl"
    labels_only.write_text('<http://example.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "A" .\n')
    with pytest.raises(EmptyKGError, match=r"labels\.ttl"):
        load_kg(labels_only)


def test_ntriples_keep_their_iris_too(tmp_path: Path) -> None:
    path = tmp_path / "kb.nt"
    path.write_text(f"<{EX}Tenet> <{EX}directedBy> <{EX}Christopher_Nolan> .\n"
                    f'<{EX}Tenet> <{EX}releaseYear> "2020" .\n')
    store, _ = load_kg(path)
    assert store.iris is not None
    tenet = store.entities.id_of("Tenet")
    assert tenet is not None and store.iris.entity(tenet) == EX + "Tenet"
    assert {store.iris.relation(r) for r in range(store.num_relations)} == {EX + "directedBy", EX + "releaseYear"}


def test_evidence_carries_the_iris(tmp_path: Path) -> None:
    build_index_dir(FIXTURES / "movies.ttl", tmp_path / "movies.idx", embedder=HashEmbedder(dim=64))
    engine = SimGRAG(tmp_path / "movies.idx", llm=None)
    assert engine.index.store.iris is not None  # saved with the store and loaded back
    result = engine.retrieve([["UNKNOWN film 1", "directed by", "Christopher Nolan"]]).to_dict()
    best = result["matches"][0]
    nolan = next(n for n in best["nodes"] if n["pattern_node"] == "Christopher Nolan")
    assert nolan["entity"] == "Christopher Nolan" and nolan["iri"] == EX + "Christopher_Nolan"
    edge = best["edges"][0]
    head, _, tail = edge["triple"]
    assert edge["iris"] == [EX + head, EX + "directedBy", EX + "Christopher_Nolan"]
    assert tail == "Christopher Nolan"


def test_the_http_api_returns_the_iris(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from simgrag.serve import ServeSettings, create_app

    build_index_dir(FIXTURES / "movies.ttl", tmp_path / "movies.idx", embedder=HashEmbedder(dim=64))
    engine = SimGRAG(tmp_path / "movies.idx", llm=None)
    with TestClient(create_app(engine, ServeSettings(warmup=False))) as client:
        for _ in range(200):
            if client.get("/v1/health").status_code == 200:
                break
        response = client.post("/v1/retrieve", json={"pattern": [["Tenet", "directed by", "UNKNOWN person 1"]]})
    assert response.status_code == 200, response.text
    best = response.json()["matches"][0]
    assert best["edges"][0]["iris"] == [EX + "Tenet", EX + "directedBy", EX + "Christopher_Nolan"]
    assert {n["entity"]: n["iri"] for n in best["nodes"]} == {"Tenet": EX + "Tenet",
                                                               "Christopher Nolan": EX + "Christopher_Nolan"}


def test_cli_indexes_rdf_with_options(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simgrag import cli
    from simgrag.index.directory import open_index_dir

    args = ["index", str(FIXTURES / "movies.rdf"), "-o", str(tmp_path / "m.idx"), "--embedder", "hash:32", "--no-learn",
            "--label-lang", "fr,", "--literals", "skip"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    store = open_index_dir(tmp_path / "m.idx").store
    assert "Origine" in set(store.entities) and "2010" not in set(store.entities)
    bad = CliRunner().invoke(cli.app, ["index", str(FIXTURES / "bad.ttl"), "-o", str(tmp_path / "b.idx"),
                                       "--embedder", "hash:32"])
    assert bad.exit_code == 2 and "bad.ttl:5:" in bad.output


def test_triple_terms_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "star.ttl"
    path.write_text("@prefix ex: <http://example.org/> .\n"
                    "ex:Inception ex:directedBy ex:Nolan .\n"
                    "ex:Critic ex:says <<( ex:Inception ex:directedBy ex:Nolan )>> .\n"
                    "<< ex:Inception ex:directedBy ex:Nolan >> ex:source ex:IMDb .\n")
    store, report = load_kg(path)
    # the reifier of the annotation is a blank node: its own triple stays, its rdf:reifies goes
    assert triples(store) == {("Inception", "directedBy", "Nolan"), ("_:b1", "source", "IMDb")}
    assert report.skipped_reasons == {"triple term (RDF-star) as object": 2}
