"""Index directories: build, manifest checks, atomic writes and resumable builds; retrieval on top."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from simgrag.errors import IndexDirError, PatternError
from simgrag.index import directory as directory_mod
from simgrag.index.directory import build_index_dir, open_index_dir, relation_text, with_relation_aliases
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg


@pytest.fixture()
def toy_index(tmp_path: Path) -> Path:
    kg = write_toy_kg(tmp_path / "toy.txt")
    build_index_dir(kg, tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    return tmp_path / "toy.idx"


def test_build_writes_manifest_and_loads(toy_index: Path) -> None:
    manifest = json.loads((toy_index / "manifest.json").read_text())
    assert manifest["kg"]["triples"] == len(TOY_TRIPLES)
    assert manifest["embedder"] == {"spec": "hash:64", "name": "hash-64", "dim": 64}
    index = open_index_dir(toy_index, embedder=HashEmbedder(dim=64))
    assert index.store.num_triples == len(TOY_TRIPLES)
    assert index.entity_index.ntotal == index.store.num_entities
    assert not any(p.name.endswith(".building") for p in toy_index.parent.iterdir())


def test_open_refuses_other_embedder(toy_index: Path) -> None:
    with pytest.raises(IndexDirError, match=r"built with embedder hash-64"):
        open_index_dir(toy_index, embedder=HashEmbedder(dim=32))


def test_open_refuses_non_index_and_newer_format(tmp_path: Path, toy_index: Path) -> None:
    with pytest.raises(IndexDirError, match=r"manifest\.json is missing"):
        open_index_dir(tmp_path)
    manifest = json.loads((toy_index / "manifest.json").read_text())
    manifest["format_version"] = 99
    (toy_index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexDirError, match="format 99"):
        open_index_dir(toy_index, embedder=HashEmbedder(dim=64))


def test_existing_directory_needs_overwrite(tmp_path: Path, toy_index: Path) -> None:
    with pytest.raises(IndexDirError, match="already exists"):
        build_index_dir(tmp_path / "toy.txt", toy_index, embedder=HashEmbedder(dim=64))
    build_index_dir(tmp_path / "toy.txt", toy_index, embedder=HashEmbedder(dim=64), overwrite=True)
    assert open_index_dir(toy_index, embedder=HashEmbedder(dim=64)).store.num_triples == len(TOY_TRIPLES)


class _CrashingEmbedder(HashEmbedder):
    """Fails after ``budget`` texts: a crash in the middle of the entity embeddings."""

    def __init__(self, budget: int) -> None:
        super().__init__(dim=64)
        self.budget = budget

    def encode(self, texts, *, batch_size=64, show_progress=None):  # type: ignore[no-untyped-def,override]
        self.budget -= len(texts)
        if self.budget < 0:
            raise RuntimeError("simulated crash")
        return super().encode(texts, batch_size=batch_size, show_progress=show_progress)


def test_crash_leaves_no_valid_index_and_rebuild_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kg = write_toy_kg(tmp_path / "toy.txt")
    monkeypatch.setattr(directory_mod, "_CHUNK", 4)  # several checkpoints on the toy KG
    with pytest.raises(IndexDirError, match="resume"):
        build_index_dir(kg, tmp_path / "out.idx", embedder=_CrashingEmbedder(budget=9))
    assert not (tmp_path / "out.idx").exists()
    work = tmp_path / ".out.idx.building"
    assert int((work / "entity_vectors.progress").read_text()) == 8
    with pytest.raises(IndexDirError, match="interrupted"):
        open_index_dir(tmp_path / "out.idx")
    counting = _CrashingEmbedder(budget=10_000)
    built = build_index_dir(kg, tmp_path / "out.idx", embedder=counting)
    n = built.store.num_entities
    relation_texts = len(built.relation_texts)
    assert 10_000 - counting.budget == (n - 8) + relation_texts  # only the missing entities were embedded
    fresh = build_index_dir(kg, tmp_path / "fresh.idx", embedder=HashEmbedder(dim=64))
    assert np.array_equal(np.asarray(built.entity_vectors), np.asarray(fresh.entity_vectors))
    order = directory_mod._length_order(built.store)  # the chunks' order: names by length, every entity once
    assert sorted(order.tolist()) == list(range(n))
    lengths = [len(built.store.entities[int(i)]) for i in order]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]


def test_retrieve_on_toy_index(toy_index: Path) -> None:
    index = open_index_dir(toy_index, embedder=HashEmbedder(dim=64))
    retriever = SubgraphRetriever(index)
    result = retriever.retrieve([["UNKNOWN director 1", "directed by", "Inception"]], RetrievalSettings(k=2))
    assert result.complete
    top = result.evidence[0]
    assert top.edges[0].triple.as_tuple() == ("Inception", "directed_by", "Christopher Nolan")
    assert top.binding("UNKNOWN director 1").entity == "Christopher Nolan"  # type: ignore[union-attr]
    assert set(result.timings) == {"embed_s", "vector_s", "graph_s", "answers_s", "total_s"}
    assert result.answer_set is not None and result.answer_set.names() == ("Christopher Nolan",)
    payload = result.to_dict()
    assert payload["matches"][0]["edges"][0]["triple"] == ["Inception", "directed_by", "Christopher Nolan"]
    json.dumps(payload)


def test_retrieve_two_hop_and_bad_pattern(toy_index: Path) -> None:
    retriever = SubgraphRetriever(open_index_dir(toy_index, embedder=HashEmbedder(dim=64)))
    result = retriever.retrieve([["Titanic", "directed by", "UNKNOWN director 1"],
                                 ["UNKNOWN movie 2", "directed by", "UNKNOWN director 1"]], RetrievalSettings(k=1))
    assert result.evidence[0].binding("UNKNOWN movie 2").entity == "Avatar"  # type: ignore[union-attr]
    with pytest.raises(PatternError, match="exactly 3 strings"):
        retriever.retrieve([["Titanic", "directed by"]])


def test_relation_aliases_change_relation_candidates(toy_index: Path, tmp_path: Path) -> None:
    index = open_index_dir(toy_index, embedder=HashEmbedder(dim=64))
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text("starred_actors: [played the lead in]\n")
    tuned = with_relation_aliases(index, aliases)
    assert "played the lead in" in tuned.relation_texts
    result = SubgraphRetriever(tuned).retrieve([["UNKNOWN person 1", "played the lead in", "Juno"]],
                                               RetrievalSettings(k=1, k_r=1))
    assert result.evidence[0].edges[0].triple.relation == "starred_actors"
    assert result.evidence[0].edges[0].distance == pytest.approx(0.0, abs=1e-5)


def test_relation_text() -> None:
    assert relation_text("directed_by") == "directed by"
    assert relation_text("birthPlace") == "birth place"


def test_typed_unknown_nodes_use_type_candidates(tmp_path: Path) -> None:
    """App. C.1: an UNKNOWN node with a type hint matches only entities of the k_t nearest types."""
    kg = tmp_path / "typed.csv"
    kg.write_text(
        "head,relation,tail,head_type,tail_type\n"
        "Inception,created by,Christopher Nolan,film,person\n"
        "Inception,created by,Syncopy,film,company\n"
        "Memento,created by,Christopher Nolan,film,person\n",
        encoding="utf-8",
    )
    built = build_index_dir(kg, tmp_path / "typed.idx", embedder=HashEmbedder(dim=64))
    assert built.manifest["kg"]["types"] == 3
    retriever = SubgraphRetriever(built)
    pattern = [["UNKNOWN person 1", "created by", "Inception"]]
    untyped = retriever.retrieve(pattern, RetrievalSettings(k=5, k_n=1))
    assert {ev.nodes[0].entity for ev in untyped.evidence} == {"Christopher Nolan", "Syncopy"}
    typed = retriever.retrieve(pattern, RetrievalSettings(k=5, k_n=1, k_t=1))
    assert [ev.nodes[0].entity for ev in typed.evidence] == ["Christopher Nolan"]
    assert typed.candidate_counts["UNKNOWN person 1"] == 1


def test_unknown_placeholders_vs_entities_named_unknown() -> None:
    from simgrag.pattern.graph import is_unknown, type_hint

    assert is_unknown("UNKNOWN director 1") and is_unknown("unknown movie 2") and is_unknown("UNKNOWN")
    assert not is_unknown("Unknown") and not is_unknown("Unknown Pleasures") and not is_unknown("Of Unknown Origin")
    assert type_hint("UNKNOWN director 1") == "director" and type_hint("Unknown") is None


def test_atomic_writes_get_a_plain_files_permissions(tmp_path: Path) -> None:
    """mkstemp's private 0600 must not leak into the user's files (examples, manifests, caches)."""
    import stat

    from simgrag import fileio

    fresh = tmp_path / "fresh.yaml"
    fileio.write_bytes_atomic(fresh, b"a: 1\n")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~fileio._UMASK != 0o600
    shared = tmp_path / "shared.json"
    shared.write_text("{}")
    shared.chmod(0o664)
    fileio.write_bytes_atomic(shared, b"{}")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and shared.read_bytes() == b"{}"


def test_entity_names_take_the_embedders_bulk_path_relation_texts_do_not(tmp_path: Path) -> None:
    """Index builds embed entity names with ``encode_bulk`` (bfloat16 for MiniLM where the
    CPU has it); relation texts keep ``encode``, so a pattern's relation phrase can match at distance 0."""

    class Recording(HashEmbedder):
        def __init__(self) -> None:
            super().__init__(dim=64)
            self.bulk: list[str] = []

        def encode_bulk(self, texts: Sequence[str], *, batch_size: int = 64,
                        show_progress: bool | None = None) -> np.ndarray:
            self.bulk.extend(texts)
            return self.encode(texts)

    emb = Recording()
    kg = write_toy_kg(tmp_path / "toy.txt")
    build_index_dir(kg, tmp_path / "toy.idx", embedder=emb)
    index = open_index_dir(tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    assert sorted(emb.bulk) == sorted(index.store.entities[i] for i in range(index.store.num_entities))
    assert not set(emb.bulk) & {relation_text(r) for r in index.store.relations}


def test_hnsw_gets_the_faster_settings_on_small_kgs_unless_given(tmp_path: Path) -> None:
    from simgrag.index.registry import HNSW_FAST_MAX_VECTORS, default_index_params

    assert default_index_params("hnsw", HNSW_FAST_MAX_VECTORS) == {"ef_construction": 100, "ef_search": 128,
                                                                   "storage": "float16"}
    assert default_index_params("faiss-hnsw", HNSW_FAST_MAX_VECTORS + 1) == {}  # large: the class defaults
    assert default_index_params("exact", 10) == {}
    from simgrag.index.registry import IVFPQ_FAST_SCAN_MIN_VECTORS
    assert default_index_params("faiss-ivfpq", IVFPQ_FAST_SCAN_MIN_VECTORS) == {"fast_scan": True}  # large: 4-bit
    assert default_index_params("faiss-ivfpq", IVFPQ_FAST_SCAN_MIN_VECTORS - 1) == {}
    kg = write_toy_kg(tmp_path / "toy.txt")
    build_index_dir(kg, tmp_path / "a.idx", embedder=HashEmbedder(dim=16), index_kind="faiss-hnsw")
    build_index_dir(kg, tmp_path / "b.idx", embedder=HashEmbedder(dim=16), index_kind="hnsw",
                    index_params={"ef_search": 256, "storage": "float32"})
    params = [json.loads((tmp_path / n / "manifest.json").read_text())["entity_index"]["params"]
              for n in ("a.idx", "b.idx")]
    assert params == [{"M": 32, "ef_construction": 100, "ef_search": 128, "storage": "float16"},
                      {"M": 32, "ef_construction": 100, "ef_search": 256}]
