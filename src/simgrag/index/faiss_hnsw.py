"""Approximate L2 search with a FAISS HNSW graph (``faiss.IndexHNSWFlat``, or ``IndexHNSWSQ`` on float16 rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import IndexDirError, VectorIndexError
from simgrag.fileio import atomic_path
from simgrag.index._checks import as_matrix, check_k, check_searchable, pad_results
from simgrag.index.manifest import int_params, open_index_file, save_index_manifest

__all__ = ["FaissHNSWIndex"]

_INDEX_FILE = "faiss.index"
#: batches up to this size are searched one query at a time: FAISS runs a batch on OpenMP threads, whose
#: start-up and spinning cost more than the search for a handful of queries, and on cores busy with
#: other work (the LLM) 5-10x more (2 queries at 43K vectors: 9-17 ms batched, 1.7-2 ms one by one)
SERIAL_QUERIES = 16
#: how the graph stores its vectors: ``float32`` rows (``IndexHNSWFlat``) or ``float16`` rows (``IndexHNSWSQ``,
#: half the memory; on MetaQA's 42,718 MiniLM names the graph builds in two thirds of the time and answers
#: sooner at the same recall, BENCHMARKS.md §17). Distances from float16 rows differ from float32's by ~1e-4.
STORAGES = ("float32", "float16")


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss-cpu is a core dependency
        raise VectorIndexError("faiss is not installed: pip install faiss-cpu") from exc
    return faiss


class FaissHNSWIndex:
    """HNSW graph over flat float32 vectors, L2 metric.

    ``M`` is the graph degree, ``ef_construction`` the build-time beam. At search time the beam is
    ``efSearch = max(ef_search, 2 * k)``, so asking for many neighbours never starves the beam.
    When the index holds no more vectors than that beam would visit, the search scans the stored
    vectors exactly instead (same cost, no missed neighbours, complete rows when ``k >= ntotal``).
    FAISS reports squared L2; this class returns plain L2 (the square root). ``storage="float16"`` keeps the
    rows in half precision (:data:`STORAGES`).

    Measured recall@10 against exact search (20,000 x 64, 200 queries): 1.000 on clustered,
    embedding-like data; on isotropic Gaussian data (the hard case) 0.98 with ef_search=128, 0.994 with
    192 and 0.997 with 256, the default (about 1.6x the search time of 128). Index directories of up to
    100K entities are built with ``ef_construction=100, ef_search=128`` instead
    (:func:`~simgrag.index.registry.default_index_params`; BENCHMARKS.md §10, ``benchmarks/hnsw_settings.py``):
    on MetaQA's 42,718 MiniLM name vectors recall@16 0.990 (0.998 with these defaults), half the build and
    query time, the same MetaQA answers; on 1.1M static name vectors they would give 0.81 (these: 0.91).
    """

    kind = "faiss-hnsw"

    def __init__(self, dim: int, M: int = 32, ef_construction: int = 200, ef_search: int = 256,
                 storage: str = "float32") -> None:
        if dim <= 0 or M <= 1 or ef_construction <= 0 or ef_search <= 0:
            raise VectorIndexError(
                f"Invalid HNSW settings dim={dim}, M={M}, ef_construction={ef_construction}, "
                f"ef_search={ef_search}: dim and the ef values must be positive, M at least 2."
            )
        if storage not in STORAGES:
            raise VectorIndexError(f"Invalid HNSW storage {storage!r}: one of {', '.join(STORAGES)}")
        self.dim = int(dim)
        self.M = int(M)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self.storage = storage
        faiss = _faiss()
        if storage == "float16":
            self._index = faiss.IndexHNSWSQ(self.dim, faiss.ScalarQuantizer.QT_fp16, self.M)
        else:
            self._index = faiss.IndexHNSWFlat(self.dim, self.M)
        self._index.hnsw.efConstruction = self.ef_construction

    @property
    def ntotal(self) -> int:
        return int(self._index.ntotal)

    @property
    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"M": self.M, "ef_construction": self.ef_construction, "ef_search": self.ef_search}
        if self.storage != "float32":  # an index of float32 rows keeps the manifest it always had
            out["storage"] = self.storage
        return out

    def add(self, vectors: np.ndarray) -> None:
        """Insert vectors into the graph; they get the next ids in order."""
        block = as_matrix(vectors, self.dim, what="vectors")
        try:
            self._index.add(block)
        except RuntimeError as exc:
            raise VectorIndexError(f"FAISS failed to add {len(block)} vectors: {exc}") from exc

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate ``k`` nearest neighbours: ``(plain L2 distances, ids)``, padded with inf / -1."""
        k = check_k(k)
        check_searchable(self.ntotal, self.kind)
        q = as_matrix(queries, self.dim, what="queries")
        ef = max(self.ef_search, 2 * k)
        try:
            if self.ntotal <= ef:
                sq, ids = self._flat_storage().search(q, min(k, self.ntotal))
            else:
                sq, ids = self._hnsw_search(q, k, ef)
        except RuntimeError as exc:
            raise VectorIndexError(f"FAISS search failed: {exc}") from exc
        distances = np.sqrt(np.maximum(sq, 0.0))
        return pad_results(distances, ids, k)

    def _hnsw_search(self, q: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        params = _faiss().SearchParametersHNSW(efSearch=ef)
        if len(q) > SERIAL_QUERIES or len(q) == 0:
            return self._index.search(q, k, params=params)  # type: ignore[no-any-return]
        found = [self._index.search(q[i : i + 1], k, params=params) for i in range(len(q))]
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])

    def _flat_storage(self) -> Any:
        return _faiss().downcast_index(self._index.storage)

    def save(self, directory: Path) -> None:
        """Write ``faiss.index`` (temp file, then ``os.replace``) and ``index.json``."""
        directory = Path(directory)
        with atomic_path(directory / _INDEX_FILE) as tmp:
            _faiss().write_index(self._index, str(tmp))
        save_index_manifest(directory, self, "FAISS HNSW index")

    @classmethod
    def load(cls, directory: Path) -> FaissHNSWIndex:
        """Read an index written by :meth:`save`."""
        manifest, path = open_index_file(directory, cls.kind, _INDEX_FILE)
        if not path.is_file():
            raise IndexDirError(f"{path} is missing; rebuild the index.")
        params: dict[str, Any] = dict(manifest.params)
        storage = str(params.pop("storage", "float32"))
        ints = int_params(directory, params)
        try:
            index = cls(manifest.dim, storage=storage, **ints)
        except (TypeError, VectorIndexError) as exc:
            raise IndexDirError(f"{directory}/index.json has bad HNSW parameters {manifest.params}: {exc}") from exc
        expected = type(index._index)  # the FAISS class the constructor chose for this storage
        try:
            index._index = _faiss().read_index(str(path))
        except RuntimeError as exc:
            raise IndexDirError(f"Cannot read {path} ({exc}); rebuild the index.") from exc
        if type(index._index) is not expected:
            raise IndexDirError(f"{path} holds a {type(index._index).__name__}, but index.json says {storage} rows "
                                f"({expected.__name__}); rebuild the index.")
        if index._index.d != manifest.dim or index.ntotal != manifest.ntotal:
            raise IndexDirError(
                f"{path} holds {index.ntotal} x {index._index.d} vectors but index.json says "
                f"{manifest.ntotal} x {manifest.dim}; rebuild the index."
            )
        return index
