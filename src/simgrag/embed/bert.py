"""A small BERT encoder in plain torch, for the bundled all-MiniLM-L6-v2: fast to start.

sentence-transformers imports transformers and much else: 4-5 s of a fresh process here before the
first query can be embedded (torch alone: ~1.5 s). The bundled model is a 6-layer BERT with mean
pooling and unit-length output, so this module runs it directly from its ``model.safetensors``,
``config.json`` and ``tokenizer.json`` (the ``tokenizers`` library, as sentence-transformers does):
the same weights and the same arithmetic in float32, so the vectors are the library's up to float
rounding (``tests/test_embedders.py`` compares them) and indexes built either way stay valid.

Used by :class:`~simgrag.embed.sentence_transformers.SentenceTransformerEmbedder` for the bundled
default model; any other sentence-transformers model goes through the library.

``encode(texts, bfloat16=True)`` runs the matrix products in bfloat16 (torch autocast): 2.35x the
names per second on this project's 2-core machine (AMX), vectors within cosine 0.9999 of float32's.
It is used for an index's entity names only, and only on a CPU that multiplies bfloat16 natively
(:func:`native_bfloat16`); elsewhere autocast would emulate it, slower than float32.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import EmbedderError

__all__ = ["MiniBert", "is_plain_bert", "native_bfloat16"]

_MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length of the bundled model


def is_plain_bert(model_dir: Path) -> bool:
    """Whether ``model_dir`` is a sentence-transformers BERT this module runs: BERT weights in
    safetensors, a fast tokenizer, mean pooling, then normalisation."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    return (config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and pooling.get("pooling_mode_mean_tokens") is True
            and not any(v for k, v in pooling.items()
                        if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens")
            and kinds == ["Transformer", "Pooling", "Normalize"]
            and (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file())


@functools.cache
def native_bfloat16() -> bool:
    """Whether torch multiplies bfloat16 natively on this CPU (AVX512-BF16 or AMX tiles); probed once."""
    try:
        import torch

        cpu: Any = torch.cpu
        return bool(cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
    except (ImportError, AttributeError, RuntimeError):  # older torch, or probes missing on this build
        return False


class MiniBert:
    """``encode(texts)`` → mean-pooled, unit-length float32 vectors, as sentence-transformers gives."""

    def __init__(self, model_dir: Path, device: str = "cpu") -> None:
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        self.torch = torch
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.dim = int(config["hidden_size"])
        weights = load_file(str(model_dir / "model.safetensors"))
        self.w: dict[str, Any] = {k: v.to(device) for k, v in weights.items()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        limit = min(_MAX_TOKENS, int(config["max_position_embeddings"]))
        self.tokenizer.enable_truncation(limit)
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))
        self.device = device
        needed = ("embeddings.word_embeddings.weight", f"encoder.layer.{self.layers - 1}.output.dense.weight")
        missing = [k for k in needed if k not in self.w]
        if missing:
            raise EmbedderError(f"{model_dir}/model.safetensors lacks {missing[0]}: not a BERT checkpoint")

    def token_ids(self, texts: list[str]) -> list[tuple[int, ...]]:
        """Each text's token ids as :meth:`encode` reads them (special tokens and truncation included,
        padding left out): equal ids, equal vectors."""
        return [tuple(e.ids[: sum(e.attention_mask)]) for e in self.tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str], *, bfloat16: bool = False) -> np.ndarray:
        """Unit vectors of ``texts``; ``bfloat16``: matrix products in bfloat16 (see the module doc)."""
        torch = self.torch
        encodings = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long, device=self.device)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.float32, device=self.device)
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long, device=self.device)
        autocast = torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16, enabled=bfloat16)
        with torch.inference_mode(), autocast:
            hidden = self._forward(ids, types, mask).float()
            weights = mask.unsqueeze(-1)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2.0, dim=1)
        return pooled.cpu().numpy().astype(np.float32, copy=False)

    def _forward(self, ids: Any, types: Any, mask: Any) -> Any:
        torch, w, f = self.torch, self.w, self.torch.nn.functional
        positions = torch.arange(ids.shape[1], device=self.device).unsqueeze(0)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = self._norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            x = self._norm(x + self._attention(x, bias, p), p + "attention.output.LayerNorm")
            inner = f.gelu(self._linear(x, p + "intermediate.dense"))
            x = self._norm(x + self._linear(inner, p + "output.dense"), p + "output.LayerNorm")
        return x

    def _attention(self, x: Any, bias: Any, p: Any) -> Any:
        b, n, _ = x.shape
        d = self.dim // self.heads

        def split(name: str) -> Any:
            return self._linear(x, p + f"attention.self.{name}").view(b, n, self.heads, d).transpose(1, 2)

        scores = split("query") @ split("key").transpose(-1, -2) / math.sqrt(d) + bias
        context = (scores.softmax(-1) @ split("value")).transpose(1, 2).reshape(b, n, self.dim)
        return self._linear(context, p + "attention.output.dense")

    def _linear(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def _norm(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.layer_norm(x, (self.dim,), self.w[name + ".weight"], self.w[name + ".bias"],
                                                   self.eps)
