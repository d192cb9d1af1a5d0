"""Raw llama.cpp throughput of the embedded model on this machine: prompt evaluation (64 and 256
tokens) and decoding (32 tokens), 2 threads. Compares builds (e.g. AVX2 vs AVX-512) when run in each.

    python benchmarks/llama_throughput.py
"""

from __future__ import annotations

import os
import time

from llama_cpp import Llama

from simgrag.llm.models import pull_default_model


def main() -> None:
    threads = os.cpu_count() or 1
    llm = Llama(model_path=str(pull_default_model()), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                verbose=False)
    tokens = llm.tokenize(("The quick brown fox jumps over the lazy dog. " * 40).encode())[:256]
    for n in (64, 256):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens[:n])
        print(f"prompt {n} tokens: {n / (time.perf_counter() - start):.1f} tokens/s")
    start = time.perf_counter()
    for _ in range(32):
        llm.eval([llm.sample()])
    print(f"decode 32 tokens: {32 / (time.perf_counter() - start):.1f} tokens/s")


if __name__ == "__main__":
    main()
