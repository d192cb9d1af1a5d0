"""One contract for every VectorIndex kind in the registry, plus per-kind extras (recall, Milvus Lite)."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from simgrag.errors import ConfigError, IndexDirError, VectorIndexError
from simgrag.index import (
    ExactIndex,
    FaissHNSWIndex,
    VectorIndex,
    choose_default_kind,
    list_index_kinds,
    load_index,
    make_index,
)

# Every kind in the registry must appear here; test_every_registered_kind_is_covered enforces it.
CONTRACT_KINDS = ("exact", "faiss-hnsw", "faiss-hnsw:float16", "faiss-ivfpq", "milvus")
EXACT_KINDS = {"exact"}

Factory = Callable[[int], VectorIndex]


def brute_force(data: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    dist = np.linalg.norm(queries[:, None, :].astype(np.float64) - data[None, :, :], axis=2)
    ids = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(dist, ids, axis=1), ids


def close(index: object) -> None:
    closer = getattr(index, "close", None)
    if callable(closer):
        closer()


@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    return str(tmp_path_factory.mktemp("milvus") / "contract.db")


@pytest.fixture(params=CONTRACT_KINDS)
def make(request: pytest.FixtureRequest) -> Iterator[Factory]:
    """A factory for empty indexes of one kind; Milvus ones share a Milvus Lite file, one collection each."""
    kind: str = request.param
    created: list[VectorIndex] = []

    def factory(dim: int) -> VectorIndex:
        if kind == "milvus":
            uri = request.getfixturevalue("milvus_uri")
            index = make_index(kind, dim, uri=uri, collection=f"c_{uuid.uuid4().hex[:12]}")
        else:
            name, _, storage = kind.partition(":")
            index = make_index(name, dim, **({"storage": storage} if storage else {}))
        created.append(index)
        return index

    yield factory
    for index in created:
        close(index)


@pytest.fixture
def data() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(300, 16)).astype(np.float32)


class TestVectorIndexContract:
    """What every index promises (see simgrag.index.base.VectorIndex)."""

    def test_starts_empty(self, make: Factory) -> None:
        index = make(16)
        assert isinstance(index, VectorIndex)
        assert (index.ntotal, index.dim) == (0, 16)
        assert index.kind in {kind.name for kind in list_index_kinds()}

    def test_shapes_and_dtypes(self, make: Factory, data: np.ndarray) -> None:
        index = make(16)
        index.add(data)
        distances, ids = index.search(data[:7], 5)
        assert distances.shape == ids.shape == (7, 5)
        assert distances.dtype == np.float32 and ids.dtype == np.int64

    def test_matches_brute_force(self, make: Factory, data: np.ndarray) -> None:
        index = make(16)
        index.add(data)
        queries = np.random.default_rng(1).normal(size=(20, 16)).astype(np.float32)
        distances, ids = index.search(queries, 10)
        want_d, want_i = brute_force(data, queries, 10)
        assert np.all(np.diff(distances, axis=1) >= 0), "distances must ascend"
        if index.kind in EXACT_KINDS:
            np.testing.assert_array_equal(ids, want_i)
            np.testing.assert_allclose(distances, want_d, rtol=1e-5, atol=1e-5)
        else:
            recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, want_i, strict=True)])
            assert recall >= 0.95
            true = np.linalg.norm(queries[:, None, :] - data[ids], axis=2)
            tolerance = 2e-3 if getattr(index, "storage", None) == "float16" else 1e-4  # float16 rows: 11-bit mantissas
            np.testing.assert_allclose(distances, true, rtol=tolerance, atol=tolerance)

    def test_plain_not_squared_l2(self, make: Factory) -> None:
        index = make(4)
        index.add(np.array([[0, 0, 0, 0], [3, 4, 0, 0], [6, 8, 0, 0]], dtype=np.float32))
        distances, ids = index.search(np.zeros(4, dtype=np.float32), 3)
        np.testing.assert_allclose(distances, [[0.0, 5.0, 10.0]], atol=1e-4)
        np.testing.assert_array_equal(ids, [[0, 1, 2]])

    def test_pads_when_k_exceeds_ntotal(self, make: Factory, data: np.ndarray) -> None:
        index = make(16)
        index.add(data[:5])
        distances, ids = index.search(data[:2], 8)
        assert sorted(ids[0, :5]) == [0, 1, 2, 3, 4]
        np.testing.assert_array_equal(ids[:, 5:], -1)
        assert np.isinf(distances[:, 5:]).all() and np.isfinite(distances[:, :5]).all()

    def test_incremental_add_continues_ids(self, make: Factory, data: np.ndarray) -> None:
        index = make(16)
        index.add(data[:100])
        index.add(data[100:150].astype(np.float64))  # any float dtype is accepted
        assert index.ntotal == 150
        distances, ids = index.search(data[[120, 3]], 1)
        np.testing.assert_array_equal(ids[:, 0], [120, 3])
        np.testing.assert_allclose(distances[:, 0], 0.0, atol=1e-3)

    def test_save_load_round_trip(self, make: Factory, data: np.ndarray, tmp_path: Path) -> None:
        index = make(16)
        index.add(data)
        before = index.search(data[:10], 5)
        index.save(tmp_path)
        manifest = json.loads((tmp_path / "index.json").read_text())
        assert {manifest["kind"], manifest["dim"], manifest["ntotal"]} == {index.kind, 16, 300}
        assert isinstance(manifest["params"], dict)
        loaded = load_index(tmp_path)
        try:
            assert (loaded.kind, loaded.dim, loaded.ntotal) == (index.kind, 16, 300)
            after = loaded.search(data[:10], 5)
            np.testing.assert_array_equal(after[1], before[1])
            np.testing.assert_allclose(after[0], before[0], rtol=1e-6)
        finally:
            close(loaded)

    @pytest.mark.parametrize(
        ("case", "match"),
        [
            ("add_wrong_dim", "Dimension mismatch"),
            ("search_wrong_dim", "Dimension mismatch"),
            ("k_zero", "positive integer"),
            ("k_negative", "positive integer"),
            ("add_nan", "NaN"),
            ("search_3d", "2-D"),
        ],
    )
    def test_bad_input_raises(self, make: Factory, data: np.ndarray, case: str, match: str) -> None:
        index = make(16)
        index.add(data[:10])
        calls: dict[str, Callable[[], object]] = {
            "add_wrong_dim": lambda: index.add(np.ones((2, 8), np.float32)),
            "search_wrong_dim": lambda: index.search(np.ones((2, 17), np.float32), 3),
            "k_zero": lambda: index.search(data[:1], 0),
            "k_negative": lambda: index.search(data[:1], -2),
            "add_nan": lambda: index.add(np.full((1, 16), np.nan, np.float32)),
            "search_3d": lambda: index.search(np.ones((1, 2, 16), np.float32), 3),
        }
        with pytest.raises(VectorIndexError, match=match):
            calls[case]()
        assert index.ntotal == 10

    def test_search_empty_index_raises(self, make: Factory) -> None:
        with pytest.raises(VectorIndexError, match="empty"):
            make(16).search(np.zeros((1, 16), np.float32), 3)


def test_every_registered_kind_is_covered() -> None:
    registered = {kind.name for kind in list_index_kinds()}
    missing = registered - {kind.partition(":")[0] for kind in CONTRACT_KINDS}
    assert not missing, f"index kinds without contract tests: {sorted(missing)}; add them to CONTRACT_KINDS"


def test_registry_names_and_errors(tmp_path: Path) -> None:
    assert isinstance(make_index("faiss", 8), FaissHNSWIndex)
    assert isinstance(make_index("EXACT", 8), ExactIndex)
    with pytest.raises(ConfigError, match="exact, faiss-hnsw, faiss-ivfpq, milvus"):
        make_index("annoy", 8)
    with pytest.raises(ConfigError, match="Bad parameters"):
        make_index("exact", 8, M=4)
    with pytest.raises(IndexDirError, match=r"index\.json is missing"):
        load_index(tmp_path)
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(IndexDirError, match="corrupt"):
        load_index(tmp_path)


def test_choose_default_kind() -> None:
    assert choose_default_kind(100) == "exact"
    assert choose_default_kind(19_999) == "exact"
    assert choose_default_kind(20_000) == "faiss-hnsw"


def test_exact_ties_break_by_lower_id() -> None:
    index = ExactIndex(2)
    index.add(np.array([[1, 0], [0, 1], [1, 0], [0, 1], [-1, 0]], dtype=np.float32))
    _, ids = index.search(np.zeros((1, 2), np.float32), 3)
    np.testing.assert_array_equal(ids, [[0, 1, 2]])
    _, ids = index.search(np.array([[1.0, 0.0]], np.float32), 2)
    np.testing.assert_array_equal(ids, [[0, 2]])


def test_faiss_hnsw_storage_is_checked(tmp_path: Path) -> None:
    """A storage the class does not know is refused; index.json's storage must be what faiss.index holds,
    and an index of float32 rows keeps the manifest it had before storages existed."""
    with pytest.raises(VectorIndexError, match="storage 'int8'"):
        FaissHNSWIndex(8, storage="int8")
    rows = np.random.default_rng(3).normal(size=(50, 8)).astype(np.float32)
    for storage in ("float32", "float16"):
        index = FaissHNSWIndex(8, storage=storage)
        index.add(rows)
        (tmp_path / storage).mkdir()
        index.save(tmp_path / storage)
        params = json.loads((tmp_path / storage / "index.json").read_text())["params"]
        assert ("storage" in params) == (storage == "float16")
        assert FaissHNSWIndex.load(tmp_path / storage).storage == storage
    manifest = json.loads((tmp_path / "float32" / "index.json").read_text())
    manifest["params"]["storage"] = "float16"  # says float16, holds float32 rows
    (tmp_path / "float32" / "index.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexDirError, match=r"IndexHNSWFlat.*float16"):
        load_index(tmp_path / "float32")
    good = json.loads((tmp_path / "float16" / "index.json").read_text())
    for bad, match in (({"storage": "int4"}, "bad HNSW parameters"), ({"colour": 3}, "bad HNSW parameters"),
                       ({"M": "many"}, "'M' = 'many' is not an integer"),
                       ({"ef_search": math.inf}, "'ef_search' = inf is not an integer")):
        manifest = {**good, "params": {**good["params"], **bad}}
        (tmp_path / "float16" / "index.json").write_text(json.dumps(manifest))  # inf is written as Infinity
        with pytest.raises(IndexDirError, match=match):
            load_index(tmp_path / "float16")


def test_faiss_ivfpq_parameters_are_checked(tmp_path: Path) -> None:
    """index.json's IVF-PQ parameters that are no integers (Infinity, a word) or that the class refuses or does
    not know are IndexDirErrors, not OverflowError / ValueError / TypeError."""
    index = make_index("faiss-ivfpq", 16, nlist=4)
    data = np.random.default_rng(5).normal(size=(300, 16)).astype(np.float32)
    index.add(data)
    index.save(tmp_path)
    good = json.loads((tmp_path / "index.json").read_text())
    for bad, match in (({"nprobe": math.inf}, "'nprobe' = inf is not an integer"),
                       ({"nlist": "many"}, "'nlist' = 'many' is not an integer"),
                       ({"colour": 3}, "bad IVF-PQ parameters"), ({"nlist": -4}, "bad IVF-PQ parameters")):
        (tmp_path / "index.json").write_text(json.dumps({**good, "params": {**good["params"], **bad}}))
        with pytest.raises(IndexDirError, match=match):
            load_index(tmp_path)


def test_exact_load_detects_inconsistent_directory(tmp_path: Path) -> None:
    index = ExactIndex(4)
    index.add(np.ones((3, 4), np.float32))
    index.save(tmp_path)
    manifest = json.loads((tmp_path / "index.json").read_text())
    (tmp_path / "index.json").write_text(json.dumps(manifest | {"ntotal": 5}))
    with pytest.raises(IndexDirError, match="inconsistent"):
        load_index(tmp_path)


@pytest.mark.parametrize("storage", ["float32", "float16"])
@pytest.mark.parametrize("kind", ["clustered", "gaussian"])
def test_faiss_hnsw_recall_at_default_parameters(kind: str, storage: str) -> None:
    """Recall@10 vs exact on 20,000 x 64 random vectors: drawn around 200 centres (embedding-like
    data), and isotropic Gaussian, HNSW's worst case; with float32 and float16 rows."""
    rng = np.random.default_rng(0)
    if kind == "clustered":
        centres = rng.normal(size=(200, 64))
        data = (centres[rng.integers(0, 200, 20_000)] + 0.35 * rng.normal(size=(20_000, 64))).astype(np.float32)
        queries = (centres[rng.integers(0, 200, 200)] + 0.35 * rng.normal(size=(200, 64))).astype(np.float32)
    else:
        data = rng.normal(size=(20_000, 64)).astype(np.float32)
        queries = rng.normal(size=(200, 64)).astype(np.float32)
    hnsw = FaissHNSWIndex(64, storage=storage)
    start = time.perf_counter()
    hnsw.add(data)
    build_s = time.perf_counter() - start
    exact = ExactIndex(64)
    exact.add(data)
    _, want = exact.search(queries, 10)
    start = time.perf_counter()
    _, got = hnsw.search(queries, 10)
    search_s = time.perf_counter() - start
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, want, strict=True)])
    print(f"FAISS HNSW ({storage}) recall@10={recall:.4f} build={build_s:.2f}s search(200 q)={search_s * 1e3:.1f}ms")
    assert recall >= 0.99


def test_milvus_lite_persists_across_reopen(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from simgrag.index.milvus import MilvusIndex

    data = np.random.default_rng(3).normal(size=(500, 32)).astype(np.float32)
    db, saved = tmp_path / "kg.db", tmp_path / "index"
    saved.mkdir()
    with MilvusIndex(db, "entities", 32) as index:
        index.add(data[:250])
        index.add(data[250:])
        before = index.search(data[:20], 10)
        index.save(saved)
    assert json.loads((saved / "index.json").read_text())["params"]["collection"] == "entities"
    reopened = load_index(saved)
    try:
        assert reopened.ntotal == 500
        after = reopened.search(data[:20], 10)
        np.testing.assert_array_equal(after[1], before[1])
        np.testing.assert_allclose(after[0], before[0], rtol=1e-5)
    finally:
        close(reopened)
    with pytest.raises(VectorIndexError, match="Dimension mismatch"):
        MilvusIndex(db, "entities", 16)
