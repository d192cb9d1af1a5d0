"""Static embedders: a text's vector is the mean of its tokens' vectors, looked up in a matrix.

No transformer runs, so encoding is a tokenizer call and a numpy gather: tens of thousands of
names per second on two cores, where MiniLM does hundreds. That is what embedding a 10M-entity KG
(FactKG's DBpedia) on one machine needs; the price is context (word order barely matters).

Sources, all offline:

- ``wordllama`` (default): WordLlama's ``l2_supercat`` token embeddings (256-d, Matryoshka: the
  first 64/128 dimensions work on their own), shipped *inside* the ``wordllama`` wheel on PyPI
  (MIT licence). Its files are read directly; the package is not imported (it configures root
  logging on import) and nothing is downloaded.
- a directory in the Model2Vec layout: ``model.safetensors`` (one ``(vocab, dim)`` tensor) and
  ``tokenizer.json`` (a Hugging Face ``tokenizers`` file).

Registry spec: ``static`` (= ``static:wordllama``), ``static:wordllama:128`` (first 128 dims),
``static:/path/to/model-dir``.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.embed.batched import BatchedEmbedder
from simgrag.errors import ConfigError, EmbedderError

__all__ = ["WORDLLAMA", "StaticEmbedder", "StaticSource", "static_source"]

logger = logging.getLogger(__name__)

WORDLLAMA = "wordllama"
_WORDLLAMA_DIMS = (64, 128, 256)
_MIN_BATCH = 4096  # a tokenizer call has a fixed cost; static models want big batches


@dataclass(frozen=True)
class StaticSource:
    """Where a static model's files are, and what it is called in index manifests."""

    name: str
    weights: Path
    tokenizer: Path
    tensor: str | None  # tensor name in the safetensors file; None: the only one
    dim: int | None  # known full width, else read from the file


def _wordllama_source() -> StaticSource:
    spec = importlib.util.find_spec(WORDLLAMA)  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError("The static embedder needs the WordLlama weights: pip install wordllama "
                            "(or pip install 'simgrag[scale]'); they ship inside the wheel, nothing is downloaded.")
    root = Path(next(iter(spec.submodule_search_locations)))
    source = StaticSource("static/wordllama-l2-supercat", root / "weights" / "l2_supercat_256.safetensors",
                          root / "tokenizers" / "l2_supercat_tokenizer_config.json", "embedding.weight", 256)
    missing = [p for p in (source.weights, source.tokenizer) if not p.is_file()]
    if missing:
        raise EmbedderError(f"The wordllama package at {root} lacks {missing[0].name}; reinstall it "
                            "(pip install --force-reinstall wordllama).")
    return source


def static_source(ref: str | Path) -> StaticSource:
    """The source for ``"wordllama"`` or a Model2Vec-style directory."""
    text = str(ref).strip()
    if text in ("", WORDLLAMA):
        return _wordllama_source()
    root = Path(text).expanduser()
    if not root.is_dir():
        raise ConfigError(f"Static embedder source {text!r} is neither 'wordllama' nor a model directory.")
    weights, tokenizer = root / "model.safetensors", root / "tokenizer.json"
    if not (weights.is_file() and tokenizer.is_file()):
        raise EmbedderError(f"{root} needs model.safetensors and tokenizer.json (the Model2Vec layout).")
    return StaticSource(f"static/{root.resolve().name}", weights, tokenizer, None, None)


class StaticEmbedder(BatchedEmbedder):
    """Mean-pooled static token embeddings (see module docstring); loaded on the first ``encode``.

    ``dim`` keeps the first ``dim`` columns (WordLlama: 64, 128 or 256); the name records it.
    """

    def __init__(self, source: str | Path = WORDLLAMA, *, dim: int | None = None, normalize: bool = True,
                 cache_size: int = 4096) -> None:
        self.source = static_source(source)
        if dim is not None and self.source.dim is not None and not 0 < dim <= self.source.dim:
            raise ConfigError(f"{self.source.name} has {self.source.dim} dimensions; cannot keep {dim}.")
        width = dim or self.source.dim
        super().__init__(dim=width, normalize=normalize, cache_size=cache_size)
        self.keep = dim
        self.name = f"{self.source.name}-{width}" if width is not None else self.source.name
        self._matrix: np.ndarray | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StaticEmbedder({self.name!r})"

    def _load(self) -> tuple[np.ndarray, Any]:
        with self._lock:
            if self._matrix is None:
                start = time.perf_counter()
                self._matrix, self._tokenizer = _read(self.source, self.keep)
                logger.info("loaded %s (%d tokens × %d) in %.2f s", self.name, *self._matrix.shape,
                            time.perf_counter() - start)
        return self._matrix, self._tokenizer

    def _detect_dim(self) -> int:
        return int(self._load()[0].shape[1])

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool | None = None) -> np.ndarray:
        """As :meth:`BatchedEmbedder.encode`, with batches of at least 4,096 texts (cheap here)."""
        return super().encode(texts, batch_size=max(batch_size, _MIN_BATCH), show_progress=show_progress)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        matrix, tokenizer = self._load()
        try:
            ids = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
        except Exception as exc:  # the Rust tokenizer raises plain Exceptions
            raise EmbedderError(f"{self.name} could not tokenize {len(texts)} texts: {exc}") from exc
        return mean_pool(matrix, ids)


def mean_pool(matrix: np.ndarray, token_ids: list[list[int]]) -> np.ndarray:
    """Row ``i``: the mean of ``matrix[token_ids[i]]`` (zeros for no tokens), grouped by length."""
    lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
    out = np.zeros((len(token_ids), matrix.shape[1]), dtype=np.float32)
    last = matrix.shape[0] - 1
    for length in np.unique(lengths).tolist():
        if length == 0:
            continue
        rows = np.flatnonzero(lengths == length)
        ids = np.clip(np.array([token_ids[i] for i in rows.tolist()], dtype=np.int64), 0, last)
        out[rows] = matrix[ids].mean(axis=1)
    return out


def _read(source: StaticSource, keep: int | None) -> tuple[np.ndarray, Any]:
    try:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderError("The static embedder needs safetensors and tokenizers: "
                            "pip install 'simgrag[scale]'") from exc
    try:
        tensors = load_file(str(source.weights))
        tokenizer = Tokenizer.from_file(str(source.tokenizer))
        tokenizer.no_padding()  # a name's tokens only: padding would be averaged in
        tokenizer.no_truncation()
    except Exception as exc:  # safetensors / tokenizers raise their own types
        raise EmbedderError(f"Cannot read {source.name} from {source.weights.parent}: {exc}") from exc
    key = source.tensor or (next(iter(tensors)) if len(tensors) == 1 else "embeddings")
    if key not in tensors:
        raise EmbedderError(f"{source.weights} has no tensor {key!r} (found {sorted(tensors)}).")
    matrix = np.asarray(tensors[key], dtype=np.float32)
    if keep is not None:
        matrix = matrix[:, :keep]
    return np.ascontiguousarray(matrix), tokenizer
