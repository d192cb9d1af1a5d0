"""How fast can this CPU embed a KG's entity names with the bundled MiniLM? (issue 18: index build)

Prints, for the names of a KG file (``head|relation|tail`` or tab-separated lines):

- the names' token count (with [CLS]/[SEP], no padding) and the FLOPs of MiniLM-L6's matrix products
  for them: the part of the build no implementation can skip;
- this machine's float32 matrix-multiply rate (torch, all threads), hence the **floor**: the seconds
  those products take at that rate, before attention, padding, GELU and layer norms;
- measured names/s of the bundled encoder (:class:`simgrag.embed.bert.MiniBert`) on a seeded sample,
  in float32, in bfloat16 autocast where the CPU has it natively, and with int8 dynamic-quantized linear
  layers (torch's ``quantize_dynamic``: weights per tensor, activations per batch), with the int8 and
  bf16 vectors' cosine to float32's (min / mean): how much a lower precision would cost the index.

    python benchmarks/embed_floor.py ../shared/data/MetaQA/kb.txt --sample 6000
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.embed.bert import MiniBert, native_bfloat16
from simgrag.embed.sentence_transformers import _bundled_model_path
from simgrag.kg.readers import iter_triples

logger = logging.getLogger("embed_floor")


def entity_names(path: Path) -> list[str]:
    names: set[str] = set()
    for triple in iter_triples(path):
        names.add(triple.head)
        names.add(triple.tail)
    return sorted(names)


def matmul_flops_per_token(bert: MiniBert) -> float:
    """Multiply-adds ×2 of one token through every linear layer (Q, K, V, output, FFN in and out)."""
    inner = int(bert.w["encoder.layer.0.intermediate.dense.weight"].shape[0])
    return float(bert.layers * (4 * bert.dim * bert.dim + 2 * bert.dim * inner) * 2)


def sgemm_rate(rows: int = 2048, dim: int = 384, inner: int = 1536, rounds: int = 40) -> float:
    """float32 GFLOP/s of a MiniLM-shaped matrix product on all of torch's threads."""
    import torch

    a, b = torch.randn(rows, dim), torch.randn(inner, dim)
    for _ in range(3):
        torch.nn.functional.linear(a, b)
    start = time.perf_counter()
    for _ in range(rounds):
        torch.nn.functional.linear(a, b)
    return rounds * 2 * rows * dim * inner / (time.perf_counter() - start) / 1e9


def timed(encode: Callable[[list[str]], np.ndarray], names: list[str], batch: int) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    parts = [encode(names[i:i + batch]) for i in range(0, len(names), batch)]
    return np.vstack(parts), time.perf_counter() - start


def int8_linear(bert: MiniBert) -> Callable[[Any, str], Any]:
    """A ``_linear`` replacement running torch's dynamic int8 linear layers on ``bert``'s weights."""
    import torch

    layers: dict[str, torch.nn.Module] = {}
    for key, weight in bert.w.items():
        if key.endswith(".weight") and weight.dim() == 2 and not key.startswith("embeddings."):
            name = key[: -len(".weight")]
            layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
            layer.weight.data, layer.bias.data = weight.clone(), bert.w[name + ".bias"].clone()
            layers[name.replace(".", "/")] = layer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(
            torch.nn.ModuleDict(layers), {torch.nn.Linear}, dtype=torch.qint8)
    return lambda x, name: quantized[name.replace(".", "/")](x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kg", type=Path, help="KG file (head|relation|tail per line)")
    parser.add_argument("--sample", type=int, default=6000, help="names timed per precision (seeded)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    import torch

    bert = MiniBert(_bundled_model_path())
    names = entity_names(args.kg)
    tokenizer = bert.tokenizer
    tokenizer.no_padding()
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(names))
    tokenizer.enable_padding(pad_id=0)
    flops = tokens * matmul_flops_per_token(bert)
    rate = sgemm_rate()
    logger.info("%d names, %d tokens (%.2f per name); linear layers %.0f GFLOP", len(names), tokens,
                tokens / len(names), flops / 1e9)
    logger.info("float32 matrix products on %d threads: %.1f GFLOP/s -> floor %.1f s for every name",
                torch.get_num_threads(), rate, flops / 1e9 / rate)

    rng = np.random.default_rng(args.seed)
    sample = sorted((names[i] for i in rng.choice(len(names), min(args.sample, len(names)), replace=False)), key=len)
    reference, float32_s = timed(bert.encode, sample, args.batch)
    logger.info("float32: %.0f names/s -> %.1f s for every name", len(sample) / float32_s,
                len(names) * float32_s / len(sample))
    arms: list[tuple[str, Callable[[list[str]], np.ndarray]]] = []
    if native_bfloat16():
        arms.append(("bfloat16", lambda texts: bert.encode(texts, bfloat16=True)))
    else:
        logger.info("bfloat16: not native on this CPU (AVX512-BF16 / AMX), not timed")
    arms.append(("int8", bert.encode))
    plain_linear = bert._linear
    for label, encode in arms:
        if label == "int8":
            bert._linear = int8_linear(bert)  # type: ignore[method-assign,assignment]
        try:
            vectors, seconds = timed(encode, sample, args.batch)
        finally:
            bert._linear = plain_linear  # type: ignore[method-assign,assignment]
        cosine = (vectors * reference).sum(axis=1)
        logger.info("%s: %.0f names/s (%.2fx float32) -> %.1f s for every name; cosine to float32 "
                    "min %.4f mean %.4f", label, len(sample) / seconds, float32_s / seconds,
                    len(names) * seconds / len(sample), cosine.min(), cosine.mean())

if __name__ == "__main__":
    main()
