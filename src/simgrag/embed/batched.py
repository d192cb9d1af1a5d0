"""What every concrete embedder shares: batching, a progress bar, a query cache, output checks.

Subclasses implement two methods: :meth:`BatchedEmbedder._encode_batch` (a list of texts to a
``(n, d)`` array) and :meth:`BatchedEmbedder._detect_dim` (called only when the width is not known
up front). Everything else (empty input, each distinct model input encoded once and batches cut from inputs
sorted by length so they pad little — :meth:`_model_inputs`, token ids where the embedder can tokenize
cheaply —, normalisation, float32, the LRU cache for short repeated query strings) lives here once.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import EmbedderError
from simgrag.progress import progress_on

__all__ = ["BatchedEmbedder", "QueryCache"]

logger = logging.getLogger(__name__)

#: what a model reads of one text (:meth:`BatchedEmbedder._model_inputs`): the text, or its token ids
ModelInput: TypeAlias = str | tuple[int, ...]


class QueryCache:
    """A thread-safe LRU of text → vector for short strings seen at query time.

    Only calls with at most ``max_batch`` texts, each at most ``max_chars`` long, use it, so bulk
    index-time encoding neither pays for nor evicts the cache.
    """

    def __init__(self, maxsize: int = 4096, *, max_chars: int = 256, max_batch: int = 64) -> None:
        self.maxsize = maxsize
        self.max_chars = max_chars
        self.max_batch = max_batch
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def accepts(self, texts: Sequence[str]) -> bool:
        return (
            self.maxsize > 0 and len(texts) <= self.max_batch and all(len(t) <= self.max_chars for t in texts)
        )

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._data.get(text)
            if vector is None:
                self.misses += 1
                return None
            self._data.move_to_end(text)
            self.hits += 1
            return vector

    def put(self, text: str, vector: np.ndarray) -> None:
        frozen = np.array(vector, dtype=np.float32, copy=True)
        frozen.flags.writeable = False
        with self._lock:
            self._data[text] = frozen
            self._data.move_to_end(text)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class BatchedEmbedder(ABC):
    """Base of the concrete embedders; satisfies the :class:`~simgrag.embed.base.Embedder` protocol."""

    name: str

    def __init__(self, *, dim: int | None = None, normalize: bool = True, cache_size: int = 4096) -> None:
        self._dim = dim
        self.normalize = normalize
        self.cache = QueryCache(cache_size)

    @property
    def dim(self) -> int:
        """Vector width; found out (model load or one probe request) only if not known up front."""
        if self._dim is None:
            self._dim = int(self._detect_dim())
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        self._dim = int(value)

    @abstractmethod
    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for one batch, one row per text (any float dtype)."""

    @abstractmethod
    def _detect_dim(self) -> int:
        """The vector width, when it was not given."""

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array (unit rows when ``normalize``).

        ``show_progress=None`` shows a tqdm bar at INFO level (:func:`simgrag.progress.show_progress`).
        """
        items = _checked_input(texts, batch_size)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.cache.accepts(items):
            return self._encode_cached(items, batch_size)
        show = progress_on(show_progress)
        return self._encode_all(items, batch_size, show)

    def encode_bulk(
        self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """:meth:`encode` for many texts at once (an index's entity names), through
        :meth:`_encode_bulk_batch`: a subclass may trade the last digits for speed there. No query cache."""
        items = _checked_input(texts, batch_size)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode_all(items, batch_size, progress_on(show_progress), bulk=True)

    def _encode_bulk_batch(self, texts: list[str]) -> np.ndarray:
        """One batch of :meth:`encode_bulk`; the same as :meth:`_encode_batch` unless overridden."""
        return self._encode_batch(texts)

    def _model_inputs(self, texts: list[str]) -> Sequence[ModelInput]:
        """What the model reads of each text. Texts with equal inputs get the same vector, so each input
        is encoded once, and an input's length is what its batch pads to (padding costs as much as a
        token), so batches are cut from inputs sorted by length. The texts themselves here (equal strings,
        lengths in characters); an embedder that tokenizes cheaply gives token ids (MetaQA's 42,718 names
        are 39,659 token sequences for the uncased MiniLM)."""
        return texts

    def _encode_cached(self, texts: list[str], batch_size: int) -> np.ndarray:
        found = {text: vec for text in dict.fromkeys(texts) if (vec := self.cache.get(text)) is not None}
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            fresh = self._encode_all(missing, batch_size, show=False)
            for text, vector in zip(missing, fresh, strict=True):
                self.cache.put(text, vector)
                found[text] = vector
        return np.stack([found[text] for text in texts]).astype(np.float32, copy=False)

    def _encode_all(self, texts: list[str], batch_size: int, show: bool, *, bulk: bool = False) -> np.ndarray:
        start = time.perf_counter()
        encode_batch = self._encode_bulk_batch if bulk else self._encode_batch
        inputs = self._model_inputs(texts) if len(texts) > batch_size else texts
        first: dict[ModelInput, int] = {}  # input -> the first text that has it: the one encoded
        for i, key in enumerate(inputs):
            first.setdefault(key, i)
        order = sorted(first.values(), key=lambda i: -len(inputs[i]))  # similar lengths share a batch
        out: np.ndarray | None = None
        with tqdm(total=len(order), desc=f"Embedding ({self.name})", unit="text", disable=not show) as bar:
            for begin in range(0, len(order), batch_size):
                rows = order[begin : begin + batch_size]
                vectors = self._checked(encode_batch([texts[i] for i in rows]), len(rows))
                if out is None:
                    out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
                out[rows] = vectors
                bar.update(len(rows))
        if out is None:  # texts were given, so some batch ran; this guards the type only
            raise EmbedderError(f"{self.name} encoded no batch of {len(texts)} texts")
        if len(order) < len(texts):  # the texts whose input an earlier text had take its vector
            out = out[[first[key] for key in inputs]]
        logger.debug("%s encoded %d texts (%d distinct inputs) in %.3f s", self.name, len(texts), len(order),
                     time.perf_counter() - start)
        return out

    def _checked(self, vectors: np.ndarray, expected_rows: int) -> np.ndarray:
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != expected_rows:
            raise EmbedderError(
                f"{self.name} returned an array of shape {array.shape} for {expected_rows} texts."
            )
        if self._dim is None:
            self._dim = int(array.shape[1])
        elif array.shape[1] != self._dim:
            raise EmbedderError(
                f"{self.name} returned {array.shape[1]}-d vectors, but dim is {self._dim}; "
                "pass the right dim= (or none) for this model."
            )
        if self.normalize:
            norms = np.linalg.norm(array, axis=1, keepdims=True)
            array = (array / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
        return array


def _checked_input(texts: Sequence[str], batch_size: int) -> list[str]:
    """The texts of an ``encode``/``encode_bulk`` call as a checked list; the batch size checked too."""
    items = _as_text_list(texts)
    if batch_size <= 0:
        raise EmbedderError(f"batch_size must be positive; got {batch_size}.")
    return items


def _as_text_list(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise EmbedderError("encode() takes a sequence of texts, not one string; wrap it: encode([text]).")
    items = list(texts)
    bad = next((t for t in items if not isinstance(t, str)), None)
    if bad is not None:
        raise EmbedderError(f"encode() takes strings only; got {type(bad).__name__}: {bad!r}.")
    for text in items:
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate: tokenizers fail on it with a TypeError
                raise EmbedderError(f"encode() got a text with invalid Unicode (a lone surrogate at character "
                                    f"{exc.start}): {text!r:.200}") from None
    return items
