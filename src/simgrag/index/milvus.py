"""Milvus as the vector index: Milvus Lite (an embedded server on a local ``.db`` path) or a server.

The same code talks to both through ``pymilvus.MilvusClient``: a ``uri`` that is a local path ending in
``.db`` starts Milvus Lite; ``http(s)://host:19530`` reaches a standalone server or a cluster. The data
lives in Milvus, so :meth:`MilvusIndex.save` only writes a pointer (``index.json``: uri, collection,
dim, build parameters) and :meth:`MilvusIndex.load` reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from simgrag.config import milvus_token
from simgrag.errors import IndexDirError, VectorIndexError
from simgrag.index._checks import as_matrix, check_k, check_searchable, pad_results
from simgrag.index.manifest import IndexManifest, read_manifest, write_manifest

__all__ = ["MilvusIndex"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_ID, _VECTOR = "id", "vector"
_MAX_TOPK = 16384  # Milvus' limit on k per search


def _pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError as exc:
        raise VectorIndexError(
            "The 'milvus' index needs pymilvus (and milvus-lite for local .db files): "
            "pip install 'simgrag[milvus]'"
        ) from exc
    return pymilvus


def _is_local(uri: str) -> bool:
    return "://" not in uri


class MilvusIndex:
    """L2 search in a Milvus collection with an HNSW index; ids are our int64 primary keys.

    An existing collection of the same name is reopened (its dim must match); otherwise it is created.
    Search uses ``ef = max(ef_search, 2 * k)`` like :class:`~simgrag.index.faiss_hnsw.FaissHNSWIndex`.
    Milvus reports squared L2; this class returns plain L2. Call :meth:`close` (or use ``with``) when done.
    ``token`` defaults to ``$SIMGRAG_MILVUS_TOKEN``; it is never written to ``index.json``.
    """

    kind = "milvus"

    def __init__(
        self,
        uri: str | Path,
        collection: str = "simgrag",
        dim: int = 384,
        *,
        M: int = 16,
        ef_construction: int = 200,
        ef_search: int = 128,
        token: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 2000,
    ) -> None:
        if dim <= 0 or batch_size <= 0:
            raise VectorIndexError(
                f"dim and batch_size must be positive; got dim={dim}, batch_size={batch_size}."
            )
        uri = str(uri)
        self.uri = str(Path(uri).resolve()) if _is_local(uri) else uri
        self.collection = collection
        self.dim = int(dim)
        self.M, self.ef_construction, self.ef_search = int(M), int(ef_construction), int(ef_search)
        self.batch_size = int(batch_size)
        self._client = self._call(
            "connect", lambda: _pymilvus().MilvusClient(self.uri, token=milvus_token() if token is None else token,
                                                      timeout=timeout)
        )
        self._ntotal = self._open_or_create()

    @property
    def ntotal(self) -> int:
        return self._ntotal

    @property
    def params(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "collection": self.collection,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
        }

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        """Run one pymilvus call; its errors become :class:`VectorIndexError` naming uri and collection."""
        try:
            return fn()
        except (_pymilvus().MilvusException, OSError, ConnectionError) as exc:
            hint = "" if _is_local(self.uri) else " Is the Milvus server running and the uri right?"
            raise VectorIndexError(
                f"Milvus {what} failed (uri={self.uri}, collection={self.collection!r}): {exc}.{hint}"
            ) from exc

    def _open_or_create(self) -> int:
        client = self._client
        if not self._call("has_collection", lambda: client.has_collection(self.collection)):
            self._create_collection()
            return 0
        found = self._existing_dim()
        if found != self.dim:
            raise VectorIndexError(
                f"Dimension mismatch: Milvus collection {self.collection!r} at {self.uri} holds {found}-d "
                f"vectors, not {self.dim}-d. Use another collection name or drop the old one."
            )
        self._call("load_collection", lambda: client.load_collection(self.collection))
        rows = self._call(
            "count", lambda: client.query(self.collection, filter="", output_fields=["count(*)"])
        )
        return int(rows[0]["count(*)"])

    def _existing_dim(self) -> int:
        info = self._call("describe_collection", lambda: self._client.describe_collection(self.collection))
        for field in info.get("fields", []):
            if field.get("name") == _VECTOR:
                return int(field.get("params", {}).get("dim", -1))
        raise VectorIndexError(f"Milvus collection {self.collection!r} has no {_VECTOR!r} field; not ours.")

    def _create_collection(self) -> None:
        pm = _pymilvus()
        schema = pm.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(_ID, pm.DataType.INT64, is_primary=True)
        schema.add_field(_VECTOR, pm.DataType.FLOAT_VECTOR, dim=self.dim)
        index_params = self._client.prepare_index_params()
        index_params.add_index(
            field_name=_VECTOR,
            index_type="HNSW",
            metric_type="L2",
            params={"M": self.M, "efConstruction": self.ef_construction},
        )
        self._call(
            "create_collection",
            lambda: self._client.create_collection(
                self.collection, schema=schema, index_params=index_params, consistency_level="Strong"
            ),
        )
        logger.info("created Milvus collection %r (dim %d) at %s", self.collection, self.dim, self.uri)

    def add(self, vectors: np.ndarray) -> None:
        """Insert vectors in batches; primary keys continue from :attr:`ntotal`."""
        block = as_matrix(vectors, self.dim, what="vectors")
        for start in range(0, len(block), self.batch_size):
            chunk = block[start : start + self.batch_size]
            first = self._ntotal
            rows = [{_ID: first + i, _VECTOR: row} for i, row in enumerate(chunk)]
            self._call("insert", partial(self._client.insert, self.collection, rows))
            self._ntotal += len(chunk)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``k`` nearest neighbours: ``(plain L2 distances, ids)``, padded with inf / -1."""
        k = check_k(k)
        check_searchable(self._ntotal, self.kind)
        if k > _MAX_TOPK:
            raise VectorIndexError(f"Milvus returns at most {_MAX_TOPK} neighbours per query; got k={k}.")
        q = as_matrix(queries, self.dim, what="queries")
        ef = max(self.ef_search, 2 * k)
        hits = self._call(
            "search",
            lambda: self._client.search(
                self.collection,
                data=q,
                limit=k,
                search_params={"metric_type": "L2", "params": {"ef": ef}},
                output_fields=[_ID],
            ),
        )
        return _hits_to_arrays(hits, k)

    def save(self, directory: Path) -> None:
        """Flush, then write ``index.json`` pointing at the collection (uri relative when inside)."""
        directory = Path(directory)
        self._call("flush", lambda: self._client.flush(self.collection))
        params = self.params | {"uri": _portable_uri(self.uri, directory)}
        write_manifest(directory, IndexManifest(self.kind, self.dim, self._ntotal, params))
        logger.info(
            "saved Milvus pointer (%s, %r, %d vectors) to %s",
            self.uri,
            self.collection,
            self._ntotal,
            directory,
        )

    @classmethod
    def load(cls, directory: Path, **overrides: Any) -> MilvusIndex:
        """Reconnect to the collection ``index.json`` points at; ``overrides`` (e.g. ``token``) win."""
        directory = Path(directory)
        manifest = read_manifest(directory, expect_kind=cls.kind)
        params = dict(manifest.params)
        uri = str(params.pop("uri"))
        if _is_local(uri) and not Path(uri).is_absolute():  # index.json's local uri is relative to it
            uri = str(directory / uri)
        params |= overrides
        uri = str(params.pop("uri", uri))  # an overriding uri is taken as given (relative to the cwd)
        index = cls(uri, dim=manifest.dim, **params)
        if index.ntotal != manifest.ntotal:
            index.close()
            raise IndexDirError(
                f"Milvus collection {index.collection!r} at {uri} holds {index.ntotal} vectors, but "
                f"{directory}/index.json says {manifest.ntotal}; it changed after saving. Rebuild the index."
            )
        return index

    def close(self) -> None:
        """Close the client (Milvus Lite stops its local server when no client uses the file)."""
        self._client.close()

    def release_local_server(self) -> None:
        """Close, and stop this process's Milvus Lite server for the ``.db`` file (it holds a file lock).

        For a caller that owns the file (an index build about to rename its directory); other open
        clients of the same file stop working. Nothing happens for a server uri.
        """
        self.close()
        if not _is_local(self.uri):
            return
        try:
            from milvus_lite.server_manager import server_manager_instance
        except ImportError:  # an older milvus-lite without a server manager
            return
        server_manager_instance.release_server(self.uri)

    def __enter__(self) -> MilvusIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _hits_to_arrays(hits: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(hits)
    sq = np.full((n, k), np.inf, dtype=np.float64)
    ids = np.full((n, k), -1, dtype=np.int64)
    for row, row_hits in enumerate(hits):
        for col, hit in enumerate(row_hits):
            sq[row, col] = hit["distance"]
            ids[row, col] = hit["id"]
    with np.errstate(invalid="ignore"):
        distances = np.sqrt(np.maximum(sq, 0.0))
    return pad_results(distances, ids, k)


def _portable_uri(uri: str, directory: Path) -> str:
    if not _is_local(uri):
        return uri
    try:
        return str(Path(uri).relative_to(directory.resolve()))
    except ValueError:
        return uri
