"""Compressed L2 search for very large indexes: FAISS IVF-PQ, re-ranked exactly from float vectors.

Ten million 256-d float32 vectors are 10 GB; their product-quantized codes (``m`` bytes each,
``dim / 4`` by default) are 640 MB. The IVF-PQ index finds candidates from the codes; the best of
them are then re-ranked with exact distances read from the float vectors, which stay on disk
(memory-mapped ``.npy``), so resident memory is the codes, the ids and the page cache.

Candidate counts for a query asking ``k`` neighbours:

- the codes give ``n_pq = min(ntotal, max(k, min(max(refine * k, 64), k + max_rerank)))`` candidates;
- the ``min(n_pq, max_rerank)`` best of them get exact distances, the rest keep their PQ estimate
  (raised to at least the largest exact one, so the re-ranked head stays in front);
- everything is sorted by distance and cut to ``k``.

For ordinary ``k`` (tens) every returned distance is exact. For SimGRAG's ``k_n = 16384`` the
head of the list (``max_rerank``) is exact and the tail estimated. ``nprobe`` grows with ``k`` so the
probed lists hold at least twice ``n_pq`` vectors. Indexes no larger than ``n_pq`` are scanned exactly.

Where re-ranking reads from (``rerank``): ``"float32"`` (default) reads the float vectors, memory-
mapped; on a cold page cache every re-ranked row is a random disk read. ``"sq8"`` keeps an 8-bit
scalar-quantized copy in RAM (one byte per dimension: 2.6 GB for 10M x 256-d; the per-dimension
range comes from the training sample, values outside it are clipped) and re-ranks from it, so a
query never touches the vectors file; its distances are exact up to the 8-bit rounding.

Where the float vectors live: vectors given to :meth:`add` are kept in memory and written to
``vectors.npy`` by :meth:`save`; an index directory build instead calls :meth:`attach_vectors`
with its ``entity_vectors.npy``, and the index records that file's path relative to its own
directory (nothing is copied). Training uses a strided sample of the attached file, or the first
block given to :meth:`add`.
"""

from __future__ import annotations

import logging
import math
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag._options import scalar_value
from simgrag.errors import IndexDirError, VectorIndexError
from simgrag.fileio import atomic_path, write_npy_atomic
from simgrag.index._checks import as_matrix, check_k, check_searchable, pad_results
from simgrag.index.faiss_hnsw import _faiss
from simgrag.index.manifest import int_params, read_manifest, save_index_manifest
from simgrag.progress import progress_on

__all__ = ["FaissIVFPQIndex", "auto_nlist", "auto_pq_m"]

logger = logging.getLogger(__name__)

_INDEX_FILE = "faiss.index"
_VECTORS_FILE = "vectors.npy"
_HNSW_QUANTIZER_MIN_LISTS = 1024  # from here on, the coarse quantizer is an HNSW graph (fast add/search)
_TRAIN_PER_LIST = 40
_MIN_CANDIDATES = 64
_PQ_TRAIN_PER_CENTROID = 64
_RERANK_KINDS = ("float32", "sq8")
_SQ8_CODES_FILE = "rerank_sq8.npy"
_SQ8_RANGE_FILE = "rerank_sq8_range.npy"
_SQ8_BLOCK = 262_144


def auto_nlist(n: int) -> int:
    """Inverted lists for ``n`` vectors: the power of two nearest ``sqrt(n)`` (10M → 4096)."""
    return 1 if n < 2 else 2 ** max(0, round(math.log2(math.sqrt(n))))


def _flag(name: str, value: object) -> bool:
    """A yes/no setting given as a bool, 0/1 (``index.json`` reads its settings as ints) or a word, read as
    the ``KEY=VALUE`` settings are (:func:`~simgrag._options.scalar_value`)."""
    read = scalar_value(value) if isinstance(value, str) else value
    if isinstance(read, bool | int) and read in (0, 1):
        return bool(read)
    raise VectorIndexError(f"Invalid IVF-PQ {name}={value!r}: give true or false.")


def _even_divisor(dim: int, target: int) -> int:
    """The largest even divisor of ``dim`` not above ``target`` (fast-scan codes pair their sub-quantizers)."""
    return next((m for m in range(min(target, dim), 1, -1) if dim % m == 0 and m % 2 == 0), 2)


def auto_pq_m(dim: int) -> int:
    """PQ sub-quantizers: the largest divisor of ``dim`` not above ``dim / 4`` (one byte per 4 dims)."""
    target = max(1, dim // 4)
    return next(m for m in range(target, 0, -1) if dim % m == 0)


class FaissIVFPQIndex:
    """IVF-PQ candidates (``faiss.IndexIVFPQ``), exact re-ranking from float vectors (module docstring).

    ``fast_scan``: 4-bit codes (``faiss.IndexIVFPQFastScan``, ``m`` twice the default: the same bytes
    per vector) scanned with SIMD table lookups: at 2M of the 10M synthetic names, 1.8 against 10.7 ms
    a name at the same probes and nearly the same recall (BENCHMARKS §13).

    ``nprobe`` of 0 probes ``max(32, nlist / 8)`` lists: on WordLlama embeddings of 135K synthetic
    entity names (nlist 512) recall@10 against exact search was 0.88 with 32 probed lists, 0.96 with
    128 and 1.00 with all 512 (0.7 / 2.0 / 7.0 ms per query). ``nlist`` / ``m`` / ``train_size`` of 0
    are chosen when training (:func:`auto_nlist`,
    :func:`auto_pq_m`, ``40 * nlist``); ``nbits`` shrinks when there are fewer than ``2**nbits``
    training vectors. Plain L2 distances (not squared), ids in insertion order.
    """

    kind = "faiss-ivfpq"

    def __init__(self, dim: int, nlist: int = 0, m: int = 0, nbits: int = 8, nprobe: int = 0,
                 refine: int = 16, max_rerank: int = 4096, train_size: int = 0,
                 vectors_file: str | None = None, rerank: str = "float32", fast_scan: bool = False) -> None:
        if dim <= 0 or min(nlist, m, nprobe, train_size) < 0 or not 1 <= nbits <= 16 or min(refine, max_rerank) < 1:
            raise VectorIndexError(
                f"Invalid IVF-PQ settings dim={dim}, nlist={nlist}, m={m}, nbits={nbits}, nprobe={nprobe}, "
                f"refine={refine}, max_rerank={max_rerank}, train_size={train_size}: dim must be positive, "
                "nlist/m/nprobe/train_size >= 0 (0 = automatic), 1 <= nbits <= 16, the rest >= 1."
            )
        if rerank not in _RERANK_KINDS:
            raise VectorIndexError(f"Invalid IVF-PQ rerank={rerank!r}: choose one of {', '.join(_RERANK_KINDS)}.")
        if m and dim % m:
            raise VectorIndexError(f"m={m} must divide dim={dim} (product quantization splits the vector).")
        self.fast_scan = _flag("fast_scan", fast_scan)
        if self.fast_scan and (nbits not in (4, 8) or m % 2):
            raise VectorIndexError(f"fast_scan codes are 4 bits per sub-quantizer (nbits 4, or the default 8, read "
                                   f"as 4) and an even m; got nbits={nbits}, m={m}.")
        nbits = 4 if self.fast_scan else nbits
        self.dim, self.nlist, self.m, self.nbits = int(dim), int(nlist), int(m), int(nbits)
        self.nprobe, self.refine, self.max_rerank = int(nprobe), int(refine), int(max_rerank)
        self.train_size = int(train_size)
        self.vectors_file = vectors_file
        self._index: Any = None
        self._chunks: list[np.ndarray] = []  # vectors added in memory (no attached file)
        self._vectors: np.ndarray | None = None  # attached or loaded float vectors (row i = id i)
        self._ntotal = 0
        self.rerank = rerank
        self._sq8: _ScalarQuantizer | None = None

    def tune(self, *, nprobe: int | None = None, max_rerank: int | None = None, refine: int | None = None) -> None:
        """Change the search-time settings of a built index (the codes stay as trained).

        ``nprobe`` trades speed for recall (each probed list is scanned in full; 0 = automatic),
        ``max_rerank`` bounds the rows read from the vectors file per query (the cold-cache cost).
        Not saved unless :meth:`save` is called.
        """
        nprobe = self.nprobe if nprobe is None else int(nprobe)
        max_rerank = self.max_rerank if max_rerank is None else int(max_rerank)
        refine = self.refine if refine is None else int(refine)
        if nprobe < 0 or min(max_rerank, refine) < 1:
            raise VectorIndexError(
                f"Invalid IVF-PQ search settings nprobe={nprobe}, max_rerank={max_rerank}, refine={refine}: "
                "nprobe >= 0 (0 = automatic), max_rerank and refine >= 1."
            )
        self.nprobe, self.max_rerank, self.refine = nprobe, max_rerank, refine

    # ------------------------------------------------------------------ state
    @property
    def ntotal(self) -> int:
        return self._ntotal

    @property
    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nlist": self.nlist, "m": self.m, "nbits": self.nbits, "nprobe": self.nprobe,
                               "refine": self.refine, "max_rerank": self.max_rerank, "train_size": self.train_size,
                               "rerank": self.rerank}
        if self.fast_scan:
            out["fast_scan"] = True
        if self.vectors_file is not None:
            out["vectors_file"] = self.vectors_file
        return out

    def vectors(self) -> np.ndarray:
        """The float vectors (row i = id i), memory-mapped when attached or loaded."""
        if self._vectors is None or len(self._vectors) < self._ntotal:
            stored = [self._vectors[: self._ntotal]] if self._vectors is not None else []
            self._vectors = np.concatenate(stored + self._chunks) if stored or self._chunks else (
                np.empty((0, self.dim), np.float32))
            self._chunks = []
        return self._vectors[: self._ntotal]

    def _source(self) -> np.ndarray:
        return self._vectors if self._vectors is not None else np.empty((0, self.dim), np.float32)

    def attach_vectors(self, vectors: np.ndarray, path: Path) -> None:
        """Use ``vectors`` (the contents of ``path``, row i = id i) for training and re-ranking.

        Later :meth:`add` calls must pass the same rows in order; they are not copied. :meth:`save`
        records ``path`` relative to the index directory.
        """
        if self._ntotal:
            raise VectorIndexError("attach_vectors must come before the first add().")
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise VectorIndexError(f"Dimension mismatch: attached vectors have shape {vectors.shape}, "
                                   f"the index holds {self.dim}-d vectors.")
        self._vectors = vectors
        self.vectors_file = str(Path(path).resolve())

    # ------------------------------------------------------------------ build
    def _train(self, sample: np.ndarray, expected: int) -> None:
        faiss = _faiss()
        self.nlist = self.nlist or auto_nlist(expected)
        self.nlist = max(1, min(self.nlist, len(sample)))
        coarse = f"IVF{self.nlist}_HNSW32" if self.nlist >= _HNSW_QUANTIZER_MIN_LISTS else f"IVF{self.nlist}"
        if self.fast_scan:  # 4-bit codes scanned with SIMD lookups: twice the sub-quantizers for the same bytes
            self.m = self.m or _even_divisor(self.dim, 2 * auto_pq_m(self.dim))
            codes = f"PQ{self.m}x4fs"
        else:
            self.m = self.m or auto_pq_m(self.dim)
            self.nbits = min(self.nbits, max(1, int(math.log2(len(sample)))))
            codes = f"PQ{self.m}x{self.nbits}"
        index = faiss.index_factory(self.dim, f"{coarse},{codes}", faiss.METRIC_L2)
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        if not self.fast_scan:
            ivf.do_polysemous_training = False  # unused here, and ~6x the training time
        ivf.pq.cp.max_points_per_centroid = _PQ_TRAIN_PER_CENTROID  # 4-d sub-vectors train slowly; 64/centroid do
        logger.info("training IVF-PQ (%s, %s) on %d vectors", coarse, codes, len(sample))
        try:
            index.train(np.ascontiguousarray(sample, dtype=np.float32))
        except RuntimeError as exc:
            raise VectorIndexError(f"FAISS failed to train IVF-PQ on {len(sample)} vectors: {exc}") from exc
        self._index = index
        if self.rerank == "sq8":
            self._sq8 = _ScalarQuantizer.fit(sample)

    def _training_sample(self, block: np.ndarray) -> tuple[np.ndarray, int]:
        if self._vectors is None:
            return block, len(block)
        n = len(self._vectors)
        want = self.train_size or _TRAIN_PER_LIST * (self.nlist or auto_nlist(n))
        step = max(1, n // max(1, want))
        return np.asarray(self._vectors[::step][:want], dtype=np.float32), n

    def add(self, vectors: np.ndarray) -> None:
        """Encode vectors (training the quantizers on the first call); they get the next ids."""
        block = as_matrix(vectors, self.dim, what="vectors")
        attached = self._vectors is not None and self.vectors_file is not None
        if attached and self._ntotal + len(block) > len(self._source()):
            raise VectorIndexError(f"More vectors added than the attached file {self.vectors_file} holds.")
        if self._index is None:
            self._train(*self._training_sample(block))
        try:
            self._index.add(block)
        except RuntimeError as exc:
            raise VectorIndexError(f"FAISS failed to add {len(block)} vectors: {exc}") from exc
        if self.vectors_file is None:
            self._chunks.append(block.copy())
        if self._sq8 is not None:
            self._sq8.add(block)
        self._ntotal += len(block)

    def quantize_rerank(self, *, show_progress: bool | None = None) -> None:
        """Switch a built ``float32`` index to ``rerank="sq8"``: encode every vector (one pass over the file).

        The 8-bit range comes from the same strided sample training uses. Call :meth:`save` to keep it.
        """
        vectors = self.vectors()
        quantizer = _ScalarQuantizer.fit(self._training_sample(vectors)[0])
        starts = range(0, len(vectors), _SQ8_BLOCK)
        for i in tqdm(starts, desc="8-bit re-ranking codes", unit="block", disable=not progress_on(show_progress)):
            quantizer.add(vectors[i: i + _SQ8_BLOCK])
        self._sq8, self.rerank = quantizer, "sq8"

    @property
    def holds_vectors(self) -> bool:
        """Whether :meth:`vectors_of` reads memory (the 8-bit copy) rather than the vectors file."""
        return self._sq8 is not None

    def vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` (ascending) as re-ranking sees them (8-bit rounded with ``sq8``)."""
        return self._rerank_rows(np.asarray(rows, dtype=np.int64))

    def _rerank_rows(self, rows: np.ndarray) -> np.ndarray:
        """Float32 vectors of ``rows`` (ascending) from the re-ranking store."""
        if self._sq8 is None:
            return np.asarray(self.vectors()[rows], dtype=np.float32)
        return self._sq8.decode(self._sq8.codes[rows])

    # ------------------------------------------------------------------ search
    def _counts(self, k: int) -> tuple[int, int]:
        n_pq = min(self._ntotal, max(k, min(max(self.refine * k, _MIN_CANDIDATES), k + self.max_rerank)))
        return n_pq, min(n_pq, self.max_rerank)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``k`` nearest neighbours: ``(plain L2 distances, ids)``, padded with inf / -1."""
        k = check_k(k)
        check_searchable(self._ntotal, self.kind)
        q = as_matrix(queries, self.dim, what="queries")
        n_pq, n_exact = self._counts(k)
        if n_pq >= self._ntotal:
            ids = np.broadcast_to(np.arange(self._ntotal, dtype=np.int64), (len(q), self._ntotal))
            approx = np.full(ids.shape, np.inf, dtype=np.float32)
            n_exact = self._ntotal
        else:
            approx, ids = self._pq_search(q, n_pq)
        out_d = np.full((len(q), k), np.inf, dtype=np.float32)
        out_i = np.full((len(q), k), -1, dtype=np.int64)
        for row in range(len(q)):
            d, i = self._rerank(q[row], approx[row], ids[row], n_exact)
            out_d[row, : len(i[:k])], out_i[row, : len(i[:k])] = d[:k], i[:k]
        return pad_results(out_d, out_i, k)

    def _pq_search(self, q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        faiss = _faiss()
        per_list = self._ntotal / max(1, self.nlist)
        base = self.nprobe or max(32, self.nlist // 8)
        nprobe = min(self.nlist, max(base, math.ceil(2 * n / max(per_list, 1.0))))
        params = faiss.SearchParametersIVF(nprobe=nprobe)
        if self.nlist >= _HNSW_QUANTIZER_MIN_LISTS:
            params.quantizer_params = faiss.SearchParametersHNSW(efSearch=max(64, 2 * nprobe))
        try:
            sq, ids = self._index.search(q, n, params=params)
        except RuntimeError as exc:
            raise VectorIndexError(f"FAISS search failed: {exc}") from exc
        return np.sqrt(np.maximum(sq, 0.0)), ids

    def _rerank(self, query: np.ndarray, approx: np.ndarray, ids: np.ndarray,
                n_exact: int) -> tuple[np.ndarray, np.ndarray]:
        valid = ids >= 0
        ids, dist = ids[valid], approx[valid].astype(np.float32)
        head = ids[:n_exact]
        order = np.argsort(head, kind="stable")  # ascending rows read the memmap sequentially
        rows = self._rerank_rows(head[order])
        exact = np.empty(len(head), dtype=np.float32)
        exact[order] = np.linalg.norm(rows - query[None, :], axis=1)
        tail = dist[n_exact:]
        if len(exact) and len(tail):  # estimates rank after the exact head, as the PQ order had them
            tail = np.maximum(tail, exact.max())
        dist = np.concatenate([exact, tail])
        final = np.lexsort((ids, np.arange(len(dist)) >= len(exact), dist))
        return dist[final], ids[final]

    # ------------------------------------------------------------------ persistence
    def save(self, directory: Path) -> None:
        """Write ``faiss.index``, the float vectors (unless attached) and ``index.json``, each atomically."""
        directory = Path(directory)
        params = self.params
        if self.vectors_file is None:
            write_npy_atomic(directory / _VECTORS_FILE, self.vectors())
        else:
            params["vectors_file"] = os.path.relpath(self.vectors_file, directory.resolve())
        if self._index is not None:
            with atomic_path(directory / _INDEX_FILE) as tmp:
                _faiss().write_index(self._index, str(tmp))
        if self._sq8 is not None:
            self._sq8.save(directory)
        save_index_manifest(directory, self, f"FAISS IVF-PQ index {params}", params)

    @classmethod
    def load(cls, directory: Path) -> FaissIVFPQIndex:
        """Read an index written by :meth:`save`; the float vectors are memory-mapped."""
        directory = Path(directory)
        manifest = read_manifest(directory, expect_kind=cls.kind)
        params = dict(manifest.params)
        vectors_file = params.pop("vectors_file", None)
        rerank = str(params.pop("rerank", "float32"))
        ints: dict[str, Any] = int_params(directory, params)
        try:
            index = cls(manifest.dim, **ints, rerank=rerank)
        except (TypeError, VectorIndexError) as exc:
            raise IndexDirError(f"{directory}/index.json has bad IVF-PQ parameters {manifest.params}: {exc}") from exc
        vpath = directory / (vectors_file or _VECTORS_FILE)
        if vectors_file is not None:  # a later save() records the same file again instead of copying it
            index.vectors_file = str(vpath.resolve())
        try:
            index._vectors = np.load(vpath, mmap_mode="r")
            _advise_random_access(index._vectors)
            if manifest.ntotal:
                index._index = _faiss().read_index(str(directory / _INDEX_FILE))
            if rerank == "sq8" and manifest.ntotal:
                index._sq8 = _ScalarQuantizer.load(directory)
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexDirError(f"Cannot read the IVF-PQ index in {directory} ({exc}); rebuild the index.") from exc
        if vectors_file is not None:
            index.vectors_file = str(vpath.resolve())
        found = 0 if index._index is None else int(index._index.ntotal)
        if found != manifest.ntotal or len(index._vectors) < manifest.ntotal or index._vectors.shape[1:] != (
                manifest.dim,):
            raise IndexDirError(f"{directory}: index.json says {manifest.ntotal} x {manifest.dim}, the files hold "
                                f"{found} codes and vectors of shape {index._vectors.shape}; rebuild the index.")
        index._ntotal = manifest.ntotal
        return index


def _advise_random_access(vectors: np.ndarray) -> None:
    """Re-ranking reads scattered rows: ask the kernel not to read ahead around each one.

    Without this, every cold row (1 KB at 256-d) faults in a readahead window of 128 KB or more,
    which multiplies disk reads and resident page cache on a 10 GB vectors file. Linux only; a no-op
    where ``madvise`` or ``MADV_RANDOM`` is missing or the array is not a memory map.
    """
    handle = getattr(vectors, "_mmap", None)  # numpy.memmap keeps its mmap.mmap here
    advice = getattr(mmap, "MADV_RANDOM", None)
    if handle is None or advice is None or not hasattr(handle, "madvise"):
        return
    try:
        handle.madvise(advice)
    except OSError as exc:  # advice is a hint; never fail a load over it
        logger.debug("madvise(MADV_RANDOM) on the vectors file failed: %s", exc)


class _ScalarQuantizer:
    """8-bit per-dimension quantization for in-RAM re-ranking: ``x ≈ lo + code * step``."""

    def __init__(self, lo: np.ndarray, step: np.ndarray, codes: np.ndarray | None = None) -> None:
        self.lo, self.step = lo.astype(np.float32), step.astype(np.float32)
        self._codes = codes if codes is not None else np.empty((0, len(lo)), dtype=np.uint8)
        self._pending: list[np.ndarray] = []  # codes of blocks added since the last read, joined lazily

    @property
    def codes(self) -> np.ndarray:
        if self._pending:
            self._codes = np.concatenate([self._codes, *self._pending])
            self._pending = []
        return self._codes

    def add(self, block: np.ndarray) -> None:
        self._pending.append(self.encode(block))

    @classmethod
    def fit(cls, sample: np.ndarray) -> _ScalarQuantizer:
        lo, hi = sample.min(axis=0), sample.max(axis=0)
        step = (hi - lo) / 255.0
        return cls(lo, np.where(step > 0, step, 1.0))

    def encode(self, block: np.ndarray) -> np.ndarray:
        scaled = np.rint((np.asarray(block, dtype=np.float32) - self.lo) / self.step)
        return np.clip(scaled, 0, 255).astype(np.uint8)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        out: np.ndarray = codes.astype(np.float32) * self.step + self.lo
        return out

    def save(self, directory: Path) -> None:
        write_npy_atomic(directory / _SQ8_CODES_FILE, self.codes)
        write_npy_atomic(directory / _SQ8_RANGE_FILE, np.stack([self.lo, self.step]))

    @classmethod
    def load(cls, directory: Path) -> _ScalarQuantizer:
        lo, step = np.load(directory / _SQ8_RANGE_FILE)
        return cls(lo, step, np.load(directory / _SQ8_CODES_FILE))  # read into RAM: no disk reads per query
