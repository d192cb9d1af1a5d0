"""The SPARQL source against a real endpoint on loopback (``oxigraph serve``, from the oxigraph wheel)
holding the bundled sample KG as RDF: paging, graph and CONSTRUCT filters, retries, and the endpoint
going down mid-way (the load fails, no index is written or replaced, the next run resumes)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("pyoxigraph")

from simgrag.errors import ConfigError, KGError
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.kg.loader import load_kg
from simgrag.kg.readers import iter_triples
from simgrag.kg.sources import open_source
from simgrag.kg.sparql import SparqlSource
from simgrag.kg.store import KGStore
from simgrag.pipeline import sample_kg_path
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.rdf import entity_iri, write_rdf
from simgrag.testing.sparql import OxigraphServer, oxigraph_binary

pytestmark = pytest.mark.skipif(oxigraph_binary() is None, reason="the oxigraph server binary is missing "
                                "(pip install oxigraph; it is in the dev extra)")
FIXTURES = Path(__file__).parent / "fixtures" / "rdf"
PAGE = 2000  # the sample KG is 8,561 triples + 4,330 labels: 7 pages


def names(store: KGStore) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}


@pytest.fixture(scope="module")
def sample_nt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rdf(iter_triples(sample_kg_path()), tmp_path_factory.mktemp("rdf") / "sample.nt")


@pytest.fixture(scope="module")
def reference() -> KGStore:
    return load_kg(sample_kg_path())[0]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory, sample_nt: Path) -> Path:
    location = tmp_path_factory.mktemp("oxigraph") / "db"
    OxigraphServer.loaded(location, [sample_nt])
    return location


@pytest.fixture
def server(store_dir: Path) -> Iterator[OxigraphServer]:
    with OxigraphServer(store_dir) as running:
        yield running


def source(server: OxigraphServer, tmp_path: Path, **options: object) -> SparqlSource:
    options.setdefault("page_size", PAGE)
    return SparqlSource(server.query_url, checkpoint_dir=tmp_path / "pages", **options)  # type: ignore[arg-type]


def test_pages_the_whole_default_graph(server: OxigraphServer, tmp_path: Path, reference: KGStore,
                                      caplog: pytest.LogCaptureFixture) -> None:
    pages: list[int] = []
    with caplog.at_level(logging.WARNING, logger="simgrag.kg.sparql"):
        store, report = source(server, tmp_path, on_page=lambda page, _: pages.append(page)).load(show_progress=False)
    assert caplog.text == ""  # the pages add up to the endpoint's COUNT(*)
    assert names(store) == names(reference)  # labels name every node and relation as in the pipe file
    assert (report.format, report.path) == ("sparql", "sparql+" + server.query_url)
    assert pages == list(range(7))
    inception = store.entities.id_of("Inception")
    assert inception is not None and store.iris is not None
    assert store.iris.entity(inception) == entity_iri("Inception")


def test_graph_filter(tmp_path: Path) -> None:
    with OxigraphServer.loaded(tmp_path / "db", [FIXTURES / "movies.trig"]) as server:
        films, _ = source(server, tmp_path, graph="http://example.org/graphs/films", order=True,
                          page_size=2).load(show_progress=False)  # ORDER BY, 3 pages of 2
    # only the films graph: the labels of Nolan, directedBy and Film live in other graphs
    assert names(films) == {("Inception", "directedBy", "Christopher Nolan"), ("Inception", "releaseYear", "2010"),
                            ("Inception", "hasRating", "_:b1"), ("_:b1", "source", "IMDb"), ("_:b1", "score", "8.8"),
                            ("Interstellar", "directedBy", "Christopher Nolan")}
    assert films.types is not None and set(films.types) == {"Film"}


def test_construct_filter(server: OxigraphServer, tmp_path: Path) -> None:
    query = ("PREFIX r: <http://example.org/kg/relation/> "
             "CONSTRUCT { ?m r:directed_by ?d . ?m <http://www.w3.org/2000/01/rdf-schema#label> ?name } "
             "WHERE { ?m r:directed_by ?d ; <http://www.w3.org/2000/01/rdf-schema#label> ?name } ORDER BY ?m ?d")
    directed, _ = source(server, tmp_path / "c", construct=query).load(show_progress=False)
    heads = {h for h, _, _ in names(directed)}
    assert {r for _, r, _ in names(directed)} == {"directed by"}  # no relation label constructed: its IRI name
    assert "Inception" in heads and len(directed.relations) == 1


def test_endpoint_down_midway_then_resume(server: OxigraphServer, tmp_path: Path, reference: KGStore) -> None:
    out = tmp_path / "kg.idx"
    waits: list[float] = []

    def crash_after_third(page: int, _triples: int) -> None:
        if page == 2:
            server.kill()  # the endpoint goes down for real: connections are refused from now on

    first = source(server, tmp_path, on_page=crash_after_third, retries=2, backoff_s=0.25, sleep=waits.append)
    with pytest.raises(KGError, match=r"page 4 failed after 3 attempt\(s\)"):
        build_index_dir(first, out, embedder=HashEmbedder(dim=32), show_progress=False)
    assert waits == [0.25, 0.5]  # exponential backoff between the attempts
    assert not out.exists() and not (tmp_path / ".kg.idx.building").exists()  # nothing that could be served
    assert sorted(p.name for p in (tmp_path / "pages").glob("page-*")) == [f"page-00000{i}.ntriples" for i in range(3)]

    server.start()
    fetched: list[int] = []
    second = source(server, tmp_path, on_page=lambda page, _: fetched.append(page))
    built = build_index_dir(second, out, embedder=HashEmbedder(dim=32), show_progress=False)
    assert fetched == [3, 4, 5, 6]  # resumed after the saved pages
    assert names(built.store) == names(reference)
    assert built.manifest["kg"]["source"] == "sparql+" + server.query_url
    assert not (tmp_path / "pages").exists()  # dropped once the index is in place


def test_changed_data_is_paged_again_not_resumed(tmp_path: Path, sample_nt: Path, reference: KGStore) -> None:
    with OxigraphServer.loaded(tmp_path / "db", [sample_nt]) as server:
        def crash_after_second(page: int, _triples: int) -> None:
            if page == 1:
                server.kill()

        with pytest.raises(KGError):
            source(server, tmp_path, on_page=crash_after_second, retries=0).load(show_progress=False)
        server.start()
        update = ("INSERT DATA { <http://example.org/kg/entity/Inception> "
                  "<http://example.org/kg/relation/directed_by> <http://example.org/kg/entity/Someone%20Else> }")
        httpx.post(server.query_url.replace("/query", "/update"), data={"update": update}).raise_for_status()
        fetched: list[int] = []
        store, _ = source(server, tmp_path, on_page=lambda page, _: fetched.append(page)).load(show_progress=False)
    assert fetched == list(range(7))  # the saved pages no longer add up to the endpoint's count: all again
    assert names(store) == names(reference) | {("Inception", "directed_by", "Someone Else")}


def test_a_short_outage_is_ridden_out_by_the_retries(server: OxigraphServer, tmp_path: Path, reference: KGStore,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    restarts: list[float] = []

    def restart_while_waiting(seconds: float) -> None:
        restarts.append(seconds)
        server.start()

    def crash_after_second(page: int, _triples: int) -> None:
        if page == 1 and not restarts:
            server.kill()

    with caplog.at_level(logging.WARNING, logger="simgrag.kg.sparql"):
        store, _ = source(server, tmp_path, on_page=crash_after_second, sleep=restart_while_waiting).load(
            show_progress=False)
    assert restarts == [1.0]
    assert names(store) == names(reference)
    assert "page 3 failed" in caplog.text and "retry 1/5" in caplog.text


def test_a_failed_reindex_keeps_the_old_index(server: OxigraphServer, tmp_path: Path) -> None:
    out = tmp_path / "kg.idx"
    build_index_dir(FIXTURES / "movies.ttl", out, embedder=HashEmbedder(dim=32), show_progress=False)
    before = open_index_dir(out).manifest["kg"]["content_hash"]
    server.kill()
    dead = source(server, tmp_path, retries=1, sleep=lambda _: None)
    with pytest.raises(KGError, match="failed after 2 attempt"):
        build_index_dir(dead, out, embedder=HashEmbedder(dim=32), overwrite=True, show_progress=False)
    assert open_index_dir(out).manifest["kg"]["content_hash"] == before


def test_bad_query_fails_at_once_with_the_endpoint_message(server: OxigraphServer, tmp_path: Path) -> None:
    waits: list[float] = []
    bad = source(server, tmp_path, construct="CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o FILTER(nosuchfn(?s)) }",
                 sleep=waits.append)
    with pytest.raises(KGError, match="HTTP 400"):
        bad.load(show_progress=False)
    assert waits == []  # a client error is not retried


def test_source_specs_and_options() -> None:
    spec = open_source("sparql+http://user:secret@127.0.0.1:7878/query", sparql={"page_size": 5})
    assert isinstance(spec, SparqlSource) and spec.page_size == 5
    assert spec.endpoint == "http://user:secret@127.0.0.1:7878/query"
    assert spec.description == "sparql+http://127.0.0.1:7878/query"  # no credentials in logs and manifests
    assert spec.page_query(2) == "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 5 OFFSET 10"
    ordered = SparqlSource("http://x/q", graph="http://g", order=True, page_size=5)
    assert ordered.page_query(0) == ("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <http://g> { ?s ?p ?o } } "
                                     "ORDER BY ?s ?p ?o LIMIT 5 OFFSET 0")
    with pytest.raises(ConfigError, match="CONSTRUCT"):
        SparqlSource("http://x/q", construct="SELECT * WHERE { ?s ?p ?o }")
    with pytest.raises(ConfigError, match="LIMIT/OFFSET"):
        SparqlSource("http://x/q", construct="CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 10")
    with pytest.raises(ConfigError, match="sparql"):
        open_source("sparql+ftp://host/q")
    with pytest.raises(ConfigError, match="not a sparql"):
        open_source("kb.txt", sparql={"page_size": 5})


def test_cli_indexes_an_endpoint(server: OxigraphServer, tmp_path: Path, reference: KGStore) -> None:
    from typer.testing import CliRunner

    from simgrag import cli

    pages = tmp_path / "pages"
    args = ["index", f"sparql+{server.query_url}", "-o", str(tmp_path / "cli.idx"), "--embedder", "hash:32",
            "--no-learn", "--source-param", "page_size=3000", "--source-param", f"checkpoint_dir={pages}"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "Indexed 8,561 triples" in result.output and not pages.exists()
    assert names(open_index_dir(tmp_path / "cli.idx").store) == names(reference)
    server.kill()
    again = CliRunner().invoke(cli.app, ["index", "--sparql", server.query_url, "-o", str(tmp_path / "b.idx"),
                                         "--embedder", "hash:32", "--source-param", "retries=0",
                                         "--source-param", f"checkpoint_dir={pages}"])
    assert again.exit_code == 2 and "failed after 1 attempt" in again.output
    wrong = CliRunner().invoke(cli.app, ["index", str(FIXTURES / "movies.ttl"), "-o", str(tmp_path / "c.idx"),
                                         "--source-param", "page_size=3"])
    assert wrong.exit_code == 2 and "--source-param applies to" in wrong.output
