"""Every use of llama-cpp-python's private attributes and low-level C API, in one place.

The KV-state store and prompt-lookup decoding (:mod:`simgrag.llm.llamacpp`) need what the public
:class:`llama_cpp.Llama` API does not give: the context and batch objects (``_ctx``, ``_batch``), the
model (``_model``), the token history (``_input_ids``, ``_requires_eval``) and the sequence-state
functions. These are not a stable API, so pyproject pins llama-cpp-python to the versions tested
(:data:`TESTED_VERSIONS`) and ``tests/test_llama_internals.py`` checks, against the installed version,
that every name used here (:data:`PRIVATE_NAMES`) still exists. Nothing else in simgrag may touch them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = [
    "PRIVATE_NAMES",
    "TESTED_VERSIONS",
    "decode_greedy",
    "drop_cache_from",
    "held_tokens",
    "is_end_of_generation",
    "last_logits",
    "load_sequence_state",
    "save_sequence_state",
    "token_text",
]

#: the llama-cpp-python releases this module was tested with (pyproject's pin must match)
TESTED_VERSIONS = ">=0.3.36,<0.3.37"

#: (where, name) of everything private used below: ``Llama`` instance attributes, ``_internals`` methods,
#: low-level ``llama_cpp`` functions
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("Llama", "_ctx"), ("Llama", "_batch"), ("Llama", "_model"), ("Llama", "_input_ids"),
    ("Llama", "_requires_eval"), ("Llama", "input_ids"), ("Llama", "n_tokens"),
    ("LlamaContext", "ctx"), ("LlamaContext", "decode"), ("LlamaContext", "get_logits"),
    ("LlamaContext", "get_logits_ith"), ("LlamaContext", "kv_cache_seq_rm"),
    ("LlamaBatch", "set_batch"), ("LlamaModel", "vocab"), ("LlamaModel", "token_get_text"),
    ("llama_cpp", "llama_state_seq_get_size"), ("llama_cpp", "llama_state_seq_get_data"),
    ("llama_cpp", "llama_state_seq_set_data"), ("llama_cpp", "llama_vocab_is_eog"),
)


def held_tokens(llama: Llama) -> list[int]:
    """The tokens the context has evaluated, in order."""
    return [int(t) for t in llama._input_ids.tolist()]


def drop_cache_from(llama: Llama, n_past: int) -> None:
    """Forget the KV cells from position ``n_past`` on (every sequence)."""
    llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llama.n_tokens = n_past


def decode_greedy(llama: Llama, tokens: Sequence[int], n_past: int, n_vocab: int) -> list[int]:
    """Evaluate ``tokens`` at positions ``n_past…`` in one batch with logits for each, keep the token
    history in step, and return the argmax token after each position."""
    llama._batch.set_batch(batch=list(tokens), n_past=n_past, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.input_ids[n_past:n_past + len(tokens)] = tokens
    llama.n_tokens = n_past + len(tokens)
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(tokens) * n_vocab,))
    return [int(t) for t in logits.reshape(len(tokens), n_vocab).argmax(axis=1)]


def last_logits(llama: Llama) -> np.ndarray:
    """The logits after the last evaluated token."""
    return np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),))


def is_end_of_generation(llama: Llama, token: int) -> bool:
    """Whether ``token`` ends generation (EOS, EOT, …) for this model."""
    import llama_cpp

    return bool(llama_cpp.llama_vocab_is_eog(llama._model.vocab, token))


def token_text(llama: Llama, token: int) -> str:
    """The text of a (special) token, ``""`` for -1."""
    return llama._model.token_get_text(token) if token != -1 else ""


def save_sequence_state(llama: Llama) -> bytes:
    """llama.cpp's state of sequence 0 (the KV cells of the tokens evaluated so far)."""
    import llama_cpp

    ctx = llama._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
    if written == 0:
        raise RuntimeError("llama_state_seq_get_data wrote nothing")
    return ctypes.string_at(buffer, written)


def load_sequence_state(llama: Llama, tokens: list[int], state: bytes) -> bool:
    """Replace the context's content with a saved state of ``tokens``; False when llama.cpp refuses."""
    import llama_cpp

    llama.reset()
    llama._ctx.kv_cache_seq_rm(-1, 0, -1)
    buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
    if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(state), 0) != len(state):
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        return False
    llama.input_ids[: len(tokens)] = tokens
    llama.n_tokens = len(tokens)
    llama._requires_eval = True  # the logits are not restored: the suffix evaluation refreshes them
    return True
