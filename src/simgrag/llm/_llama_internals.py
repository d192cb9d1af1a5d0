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
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = [
    "PRIVATE_NAMES",
    "TESTED_VERSIONS",
    "decode_greedy",
    "decode_logits",
    "drop_cache_from",
    "held_tokens",
    "is_end_of_generation",
    "last_logits",
    "load_sequence_state",
    "route_native_logs",
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
    ("llama_cpp", "llama_log_set"), ("llama_cpp", "llama_log_callback"),
    ("llama_cpp._internals", "suppress_stdout_stderr"), ("llama_cpp.llama", "suppress_stdout_stderr"),
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
    return [int(t) for t in _decode(llama, tokens, n_past, n_vocab).argmax(axis=1)]


def decode_logits(llama: Llama, tokens: Sequence[int], n_past: int, n_vocab: int) -> np.ndarray:
    """Evaluate ``tokens`` at positions ``n_past…`` in one batch (at most the context's batch size) with
    logits for each, keep the token history in step, and return the logits (one row per token, a copy)."""
    return np.array(_decode(llama, tokens, n_past, n_vocab))


def _decode(llama: Llama, tokens: Sequence[int], n_past: int, n_vocab: int) -> np.ndarray:
    """:func:`decode_logits` without the copy: a view of llama.cpp's buffer, valid until the next decode."""
    llama._batch.set_batch(batch=list(tokens), n_past=n_past, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.input_ids[n_past:n_past + len(tokens)] = tokens
    llama.n_tokens = n_past + len(tokens)
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(tokens) * n_vocab,))
    return logits.reshape(len(tokens), n_vocab)


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


_NATIVE_LOG = logging.getLogger("simgrag.llm.llama_cpp")
#: ggml_log_level (ggml.h: 1 debug, 2 info, 3 warn, 4 error, 5 continue the previous line; llama-cpp-python's
#: own comment has the older order) → logging level: its warnings are about the GGUF file ("control-looking
#: token … probably a bug in the model", on every load of the default model) and stay at DEBUG like the rest;
#: its errors come back as exceptions too, so they are WARNING here
_LOG_LEVELS = {4: logging.WARNING}
_routed: list[Any] = []  # the installed ctypes callback (kept alive) once routed
_pending: list[str] = []  # a log line llama.cpp sends in pieces (level 5: continue the previous one)
_pending_level: list[int] = [logging.DEBUG]


def route_native_logs() -> None:
    """Send llama.cpp's log lines to the ``simgrag.llm.llama_cpp`` logger (errors at WARNING, the rest at
    DEBUG) instead of stderr, and stop llama-cpp-python from pointing the process's
    stdout and stderr at /dev/null while it loads a model: it does that process-wide, so every other
    thread's output (an answer being printed, a server's log lines) was lost meanwhile. Idempotent."""
    if _routed:
        return
    try:
        import llama_cpp
        import llama_cpp._internals as internals
        import llama_cpp.llama as llama_module

        log_set, callback_type = llama_cpp.llama_log_set, llama_cpp.llama_log_callback
    except (ImportError, AttributeError) as exc:  # another build or a stand-in: its defaults stay
        logging.getLogger(__name__).debug("llama.cpp's logs not routed: %s", exc)
        return

    @callback_type  # type: ignore[misc]
    def to_logging(level: int, text: bytes, _user_data: Any) -> None:
        if level != 5:
            _flush_pending()
            _pending_level[0] = _LOG_LEVELS.get(level, logging.DEBUG)
        _pending.append(text.decode("utf-8", errors="replace"))
        if _pending[-1].endswith("\n"):
            _flush_pending()

    log_set(to_logging, ctypes.c_void_p(0))
    internals.suppress_stdout_stderr = _NoRedirect  # type: ignore[misc,assignment]
    llama_module.suppress_stdout_stderr = _NoRedirect  # type: ignore[misc,assignment]
    _routed.append(to_logging)


def _flush_pending() -> None:
    line = "".join(_pending).rstrip()
    _pending.clear()
    if line:
        _NATIVE_LOG.log(_pending_level[0], "%s", line)


class _NoRedirect:
    """Stands in for llama-cpp-python's ``suppress_stdout_stderr``: leaves the file descriptors alone."""

    def __init__(self, disable: bool = True) -> None:
        self.disable = disable

    def __enter__(self) -> _NoRedirect:
        return self

    def __exit__(self, *_: object) -> None:
        return None
