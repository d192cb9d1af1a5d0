"""Issue 7 at test size: the compressed IVF-PQ index (recall, re-ranking, files), index builds from a
ready store, and a build killed with SIGKILL in the middle of the entity embeddings resuming."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import faiss
import numpy as np
import pytest

from simgrag.errors import VectorIndexError
from simgrag.eval.synthetic_dbpedia import SyntheticKG, generate_dbpedia_like
from simgrag.index import ExactIndex, load_index, make_index
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.index.faiss_ivfpq import FaissIVFPQIndex, auto_nlist, auto_pq_m
from simgrag.kg.loader import load_kg
from simgrag.testing.embedders import HashEmbedder


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, dim))
    return (centres[rng.integers(0, 200, n)] + 0.35 * rng.normal(size=(n, dim))).astype(np.float32)


def recall(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got, want, strict=True)]))


def test_auto_parameters() -> None:
    assert auto_nlist(10_000_000) == 4096 and auto_nlist(1_000_000) == 1024 and auto_nlist(1) == 1
    assert (auto_pq_m(384), auto_pq_m(256), auto_pq_m(4), auto_pq_m(100)) == (96, 64, 1, 25)


@pytest.fixture(scope="module")
def ivfpq_case() -> tuple[np.ndarray, np.ndarray, FaissIVFPQIndex, ExactIndex]:
    data, queries = clustered(10_000, 64, 0), clustered(50, 64, 1)
    index = FaissIVFPQIndex(64)
    index.add(data[:6000])
    index.add(data[6000:])
    exact = ExactIndex(64)
    exact.add(data)
    return data, queries, index, exact


def test_ivfpq_recall_against_exact(ivfpq_case: tuple[np.ndarray, np.ndarray, FaissIVFPQIndex, ExactIndex]) -> None:
    data, queries, index, exact = ivfpq_case
    for k, floor in ((10, 0.95), (500, 0.95)):
        _, want = exact.search(queries, k)
        got_d, got = index.search(queries, k)
        print(f"IVF-PQ recall@{k} = {recall(got, want):.4f}")
        assert recall(got, want) >= floor
        assert np.all(np.diff(got_d, axis=1) >= 0)
    d10, i10 = index.search(queries, 10)  # every distance of a small k is exact
    np.testing.assert_allclose(d10, np.linalg.norm(queries[:, None, :] - data[i10], axis=2), rtol=1e-5)


def test_ivfpq_fast_scan_recall_and_reload(ivfpq_case: tuple[np.ndarray, np.ndarray, FaissIVFPQIndex, ExactIndex],
                                           tmp_path: Path) -> None:
    data, queries, plain, exact = ivfpq_case
    index = FaissIVFPQIndex(64, fast_scan=True, nlist=64, nprobe=16)
    index.add(data[:6000])
    index.add(data[6000:])
    assert (index.m, index.nbits) == (2 * auto_pq_m(64), 4)  # twice the sub-quantizers: the same bytes per vector
    assert "FastScan" in type(faiss.downcast_index(faiss.extract_index_ivf(index._index))).__name__
    for k in (10, 500):
        _, want = exact.search(queries, k)
        d, got = index.search(queries, k)
        assert recall(got, want) >= 0.95 and np.all(np.diff(d, axis=1) >= 0)
    d10, i10 = index.search(queries, 10)  # re-ranked exactly, as without fast scan
    np.testing.assert_allclose(d10, np.linalg.norm(queries[:, None, :] - data[i10], axis=2), rtol=1e-5)
    (tmp_path / "fs").mkdir()
    index.save(tmp_path / "fs")
    again = FaissIVFPQIndex.load(tmp_path / "fs")
    assert again.params["fast_scan"] is True and again.params == index.params
    np.testing.assert_array_equal(again.search(queries, 50)[1], index.search(queries, 50)[1])
    assert "fast_scan" not in plain.params  # an index without it reads as before
    with pytest.raises(VectorIndexError, match="even m"):
        FaissIVFPQIndex(64, fast_scan=True, m=1)
    # as --index-param KEY=VALUE gives it: a word
    assert FaissIVFPQIndex(64, fast_scan="true").fast_scan and not FaissIVFPQIndex(64, fast_scan="false").fast_scan
    with pytest.raises(VectorIndexError, match="fast_scan='maybe'"):
        FaissIVFPQIndex(64, fast_scan="maybe")


def test_ivfpq_large_k_reranks_only_the_head(ivfpq_case: tuple[np.ndarray, np.ndarray, FaissIVFPQIndex,
                                                                ExactIndex]) -> None:
    data, queries, _, _ = ivfpq_case
    index = FaissIVFPQIndex(64, max_rerank=100)
    index.add(data)
    d, i = index.search(queries[:3], 2000)
    assert (i >= 0).all() and np.all(np.diff(d, axis=1) >= 0)
    true = np.linalg.norm(queries[:3, None, :] - data[i], axis=2)
    head = np.isclose(d, true, rtol=1e-5)
    assert head[:, :100].all(), "the nearest candidates come from the exact re-ranking"
    assert np.all(d[:, 100:] >= d[:, 99:100])
    assert not head.all(), "past max_rerank distances are PQ estimates"


def test_ivfpq_tune_changes_search_not_codes(ivfpq_case: tuple[np.ndarray, np.ndarray, FaissIVFPQIndex,
                                                                ExactIndex]) -> None:
    data, queries, _, exact = ivfpq_case
    index = FaissIVFPQIndex(64, nlist=64)
    index.add(data)
    _, want = exact.search(queries, 10)
    index.tune(nprobe=1)
    one_list = recall(index.search(queries, 10)[1], want)
    index.tune(nprobe=64)
    all_lists = recall(index.search(queries, 10)[1], want)
    assert all_lists > one_list and all_lists >= 0.95
    index.tune(max_rerank=5)
    assert (index.nprobe, index.max_rerank, index.refine) == (64, 5, 16)
    with pytest.raises(VectorIndexError, match="max_rerank"):
        index.tune(max_rerank=0)
    assert index.max_rerank == 5, "a rejected setting changes nothing"


def test_ivfpq_sq8_rerank_is_near_exact_and_never_reads_the_vectors_file(tmp_path: Path) -> None:
    data, queries = clustered(3000, 32, 5), clustered(20, 32, 6)
    np.save(tmp_path / "entity_vectors.npy", data)
    (tmp_path / "entity_index").mkdir()
    index = FaissIVFPQIndex(32, nlist=16, nprobe=16, rerank="sq8")
    index.attach_vectors(np.load(tmp_path / "entity_vectors.npy", mmap_mode="r"), tmp_path / "entity_vectors.npy")
    for start in range(0, 3000, 1000):
        index.add(data[start:start + 1000])
    exact = ExactIndex(32)
    exact.add(data)
    want_d, want = exact.search(queries, 10)
    got_d, got = index.search(queries, 10)
    assert recall(got, want) >= 0.95
    np.testing.assert_allclose(got_d, want_d, atol=0.05 * float(want_d.mean()))
    index.save(tmp_path / "entity_index")
    loaded = load_index(tmp_path / "entity_index")
    assert isinstance(loaded, FaissIVFPQIndex) and loaded.rerank == "sq8"
    on_disk = np.lib.format.open_memmap(tmp_path / "entity_vectors.npy", mode="r+")
    on_disk[:] = 0.0  # a float32 re-ranking would now see zero vectors
    on_disk.flush()
    d, i = loaded.search(queries, 10)
    np.testing.assert_array_equal(i, got)
    np.testing.assert_allclose(d, got_d, rtol=1e-6)
    loaded.save(tmp_path / "entity_index")  # re-saving an attached index records the file, copies nothing
    assert not (tmp_path / "entity_index" / "vectors.npy").exists()
    float_index = FaissIVFPQIndex(32, nlist=16, nprobe=16)
    float_index.add(data)
    float_index.quantize_rerank()  # converting a built index gives the same 8-bit store
    assert float_index.rerank == "sq8" and recall(float_index.search(queries, 10)[1], want) >= 0.95
    with pytest.raises(VectorIndexError, match="rerank"):
        FaissIVFPQIndex(32, rerank="fp16")


def test_ivfpq_attached_vectors_are_not_copied(tmp_path: Path) -> None:
    data = clustered(3000, 32, 2)
    np.save(tmp_path / "entity_vectors.npy", data)
    vectors = np.load(tmp_path / "entity_vectors.npy", mmap_mode="r")
    (tmp_path / "entity_index").mkdir()
    index = FaissIVFPQIndex(32, nlist=16)
    index.attach_vectors(vectors, tmp_path / "entity_vectors.npy")
    for start in range(0, 3000, 1000):
        index.add(vectors[start:start + 1000])
    with pytest.raises(VectorIndexError, match="More vectors"):
        index.add(data[:1])
    before = index.search(data[:5], 10)
    index.save(tmp_path / "entity_index")
    manifest = json.loads((tmp_path / "entity_index" / "index.json").read_text())
    assert manifest["params"]["vectors_file"] == "../entity_vectors.npy"
    assert manifest["params"]["nlist"] == 16 and manifest["params"]["m"] == 8
    assert not (tmp_path / "entity_index" / "vectors.npy").exists()
    assert not list((tmp_path / "entity_index").glob("*.tmp"))
    (tmp_path / "entity_index").rename(tmp_path / "moved")  # a relative path survives the build's rename
    (tmp_path / "moved").rename(tmp_path / "entity_index")
    loaded = load_index(tmp_path / "entity_index")
    after = loaded.search(data[:5], 10)
    np.testing.assert_array_equal(after[1], before[1])
    np.testing.assert_allclose(after[0], before[0], rtol=1e-6)
    assert isinstance(loaded, FaissIVFPQIndex) and isinstance(loaded.vectors(), np.memmap)
    smaps = Path("/proc/self/smaps")
    if smaps.exists():  # Linux: the re-ranking memmap is advised random access (VmFlags "rr"), no readahead
        assert "rr" in _vm_flags(smaps.read_text(), str((tmp_path / "entity_vectors.npy").resolve()))


def _vm_flags(smaps: str, path: str) -> list[str]:
    """The VmFlags of the mapping of ``path`` in a /proc/<pid>/smaps text."""
    inside = False
    for line in smaps.splitlines():
        if not line[:1].isupper() or ":" not in line.split()[0]:  # a mapping's header line
            inside = line.rstrip().endswith(path)
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise AssertionError(f"{path} is not mapped")


def test_index_dir_from_store_with_ivfpq(tmp_path: Path) -> None:
    kg = SyntheticKG(3000, seed=1)
    store = kg.to_store(kg.plant(6)[0])
    built = build_index_dir(store, tmp_path / "idx", embedder=HashEmbedder(dim=32), index_kind="ivfpq",
                            index_params={"nlist": 8})
    assert built.manifest["entity_index"]["kind"] == "faiss-ivfpq"
    assert built.manifest["kg"]["content_hash"] == store.content_hash()
    opened = open_index_dir(tmp_path / "idx", embedder=HashEmbedder(dim=32))
    assert opened.entity_index.ntotal == store.num_entities
    _, ids = opened.entity_index.search(np.asarray(opened.entity_vectors[[5, 77]]), 1)
    np.testing.assert_array_equal(ids[:, 0], [5, 77])


def test_bulk_store_equals_loader_on_tsv(tmp_path: Path) -> None:
    kg = SyntheticKG(2000, seed=4)
    generate_dbpedia_like(tmp_path / "kg.tsv", entities=2000, seed=4, format="tsv", planted=5)
    slow, _ = load_kg(tmp_path / "kg.tsv")
    fast = kg.to_store(kg.plant(5)[0])
    assert sorted(map(tuple, _named(slow))) == sorted(map(tuple, _named(fast)))
    assert (slow.num_relations, slow.num_triples) == (fast.num_relations, fast.num_triples)


def _named(store: object) -> list[tuple[str, str, str]]:
    from simgrag.kg.store import KGStore

    assert isinstance(store, KGStore)
    return [store.triple(t).as_tuple() for t in range(store.num_triples)]


_KILLED_BUILD = textwrap.dedent("""
    import logging, sys, time
    from simgrag.index import directory
    from simgrag.eval.synthetic_dbpedia import SyntheticKG
    from simgrag.testing.embedders import HashEmbedder

    class Slow(HashEmbedder):
        def encode(self, texts, **kw):
            time.sleep(float(sys.argv[2]))
            return super().encode(texts, **kw)

    logging.basicConfig(level=logging.INFO)
    directory._CHUNK = 256
    store = SyntheticKG(3000, seed=3).to_store()
    directory.build_index_dir(store, sys.argv[1], embedder=Slow(dim=16), index_kind="exact")
""")


def test_sigkill_mid_embedding_resumes_and_matches_a_clean_build(tmp_path: Path) -> None:
    script = tmp_path / "build.py"
    script.write_text(_KILLED_BUILD)
    out = tmp_path / "idx"
    progress = tmp_path / ".idx.building" / "entity_vectors.progress"
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(out), "0.3"], env=env)
    deadline = time.monotonic() + 120
    while not (progress.exists() and int(progress.read_text() or 0) >= 512) and time.monotonic() < deadline:
        assert proc.poll() is None, "the build ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = int(progress.read_text())
    assert 512 <= done < 2900 and not out.exists()
    log = tmp_path / "resume.log"
    with log.open("w") as fh:
        subprocess.run([sys.executable, str(script), str(out), "0"], env=env, check=True, stderr=fh)
    assert f"resuming entity embeddings at {done} /" in log.read_text()
    resumed = open_index_dir(out, embedder=HashEmbedder(dim=16))
    clean = build_index_dir(SyntheticKG(3000, seed=3).to_store(), tmp_path / "clean", embedder=HashEmbedder(dim=16),
                            index_kind="exact")
    np.testing.assert_array_equal(np.asarray(resumed.entity_vectors), np.asarray(clean.entity_vectors))
    assert not (out / "entity_vectors.progress").exists()


def test_make_index_aliases() -> None:
    assert isinstance(make_index("ivf-pq", 8), FaissIVFPQIndex)
    with pytest.raises(VectorIndexError, match="must divide"):
        FaissIVFPQIndex(10, m=3)


def test_cli_index_params_and_ivfpq_build(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simgrag.cli import _index_params, app

    assert _index_params(["nprobe=64", "uri=http://h:19530", "x=0.5"]) == {"nprobe": 64, "uri": "http://h:19530",
                                                                          "x": 0.5}
    generate_dbpedia_like(tmp_path / "kg.tsv", entities=1500, seed=2, format="tsv")
    result = CliRunner().invoke(app, ["index", str(tmp_path / "kg.tsv"), "-o", str(tmp_path / "kg.idx"),
                                      "--embedder", "hash:16", "--no-learn", "--index-kind", "faiss-ivfpq",
                                      "--index-param", "nlist=4", "--index-param", "nprobe=2"])
    assert result.exit_code == 0, result.output
    params = json.loads((tmp_path / "kg.idx" / "manifest.json").read_text())["entity_index"]["params"]
    assert (params["nlist"], params["nprobe"]) == (4, 2)
    bad = CliRunner().invoke(app, ["index", str(tmp_path / "kg.tsv"), "-o", str(tmp_path / "x.idx"),
                                   "--embedder", "hash:16", "--index-param", "nlist"])
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output


def test_index_dir_with_milvus_lite_reopens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    monkeypatch.chdir(tmp_path)  # a relative index path (as the scale benchmark gives) must reopen too
    store = SyntheticKG(800, seed=5).to_store()
    built = build_index_dir(store, Path("idx"), embedder=HashEmbedder(dim=16), index_kind="milvus")
    try:
        _, ids = built.entity_index.search(np.asarray(built.entity_vectors[[3]]), 1)
        assert ids[0, 0] == 3 and built.entity_index.ntotal == store.num_entities
    finally:
        getattr(built.entity_index, "close", lambda: None)()
