"""The embedded local model: a GGUF file run in-process by llama-cpp-python.

A :class:`llama_cpp.Llama` is loaded lazily and reused, so llama.cpp keeps the KV cache of the
longest common prefix of consecutive prompts: put the fixed part of a prompt first and only the
changing tail is evaluated again. Prompts are routed to one context per *system message* (at most
``max_contexts``, least recently used dropped first): the pattern prompt and the answer prompt each
keep their own cached prefix instead of evicting each other on every question (on 2 CPU cores a
500-token prefix costs ~15 s to re-evaluate). The weights are memory-mapped, so extra contexts
share them and cost only their KV cache. Calls are serialized with a lock (llama.cpp contexts are
not thread-safe).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgrag.errors import LLMError, LLMResponseError, ModelError
from simgrag.llm.base import ChatMessage, LLMResponse
from simgrag.llm.models import DEFAULT_MODEL, pull_default_model

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["LlamaCppLLM", "llama_cpp_available"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "llama-cpp-python is not installed; install it with pip install 'simgrag[llamacpp]' "
    '(on CPUs where a native build crashes: CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON" pip install llama-cpp-python)'
)


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python can be imported."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


class LlamaCppLLM:
    """A GGUF chat model run in-process; ``model_path=None`` means the default model (pulled on
    first use, see :func:`simgrag.llm.models.pull_default_model`)."""

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
        max_contexts: int = 4,
    ) -> None:
        self.model_path = Path(model_path).expanduser() if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.seed = seed
        self.verbose = verbose
        stem = self.model_path.stem if self.model_path is not None else Path(DEFAULT_MODEL.filename).stem
        self.name = f"llamacpp:{stem}"
        self.load_time_s: float | None = None
        self.max_contexts = max(1, max_contexts)
        self._contexts: OrderedDict[str, Llama] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = str(self.model_path) if self.model_path is not None else "<default model>"
        return f"LlamaCppLLM({where!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    def load(self) -> None:
        """Load the model now rather than on the first call."""
        with self._lock:
            self._ensure_loaded("")

    def close(self) -> None:
        """Free every context (the model is loaded again on the next call)."""
        with self._lock:
            while self._contexts:
                _, llama = self._contexts.popitem()
                llama.close()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> LLMResponse:
        """One chat completion; with ``json_schema`` decoding is constrained by a grammar."""
        chat = [{"role": m.role, "content": m.content} for m in messages]
        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": self.seed}
        if stop:
            kwargs["stop"] = list(stop)
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": dict(json_schema)}
        logger.debug("%s prompt: %s", self.name, chat)
        with self._lock:
            llama = self._ensure_loaded(_context_key(messages))
            start = time.perf_counter()
            result = self._create(llama, chat, kwargs)
            latency = time.perf_counter() - start
        response = _to_response(result, latency, self.name, constrained=json_schema is not None)
        logger.info(
            "%s: %d prompt + %d completion tokens in %.2f s",
            self.name, response.prompt_tokens, response.completion_tokens, latency,
        )
        logger.debug("%s output: %s", self.name, response.text)
        return response

    # -- internals --------------------------------------------------------------------------------

    def _create(self, llama: Llama, chat: list[dict[str, str]], kwargs: dict[str, Any]) -> Any:
        try:
            return llama.create_chat_completion(messages=chat, **kwargs)  # type: ignore[arg-type]
        except ValueError as exc:  # e.g. "Requested tokens (…) exceed context window of …"
            msg = f"{self.name} failed: {exc} (a longer n_ctx or a shorter prompt may help)"
            raise LLMError(msg) from exc
        except RuntimeError as exc:
            raise LLMError(f"{self.name} failed: {exc}") from exc

    def _ensure_loaded(self, key: str) -> Llama:
        if key in self._contexts:
            self._contexts.move_to_end(key)
            return self._contexts[key]
        if len(self._contexts) >= self.max_contexts:
            _, oldest = self._contexts.popitem(last=False)
            oldest.close()
        llama = self._load()
        self._contexts[key] = llama
        return llama

    def _load(self) -> Llama:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise LLMError(_INSTALL_HINT) from exc
        path = self._resolve_path()
        logger.info("loading %s (n_ctx=%d, n_threads=%d)", path, self.n_ctx, self.n_threads)
        start = time.perf_counter()
        try:
            llama = Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=self.verbose,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp cannot load {path}: {exc}; is it a valid GGUF file?") from exc
        self.load_time_s = time.perf_counter() - start
        logger.info("%s loaded in %.2f s (%d contexts)", self.name, self.load_time_s, len(self._contexts) + 1)
        return llama

    def _resolve_path(self) -> Path:
        if self.model_path is None:
            return pull_default_model()
        if not self.model_path.is_file():
            raise ModelError(
                f"model file {self.model_path} does not exist; check the path in 'llamacpp:<path>'"
            )
        return self.model_path


def _context_key(messages: Sequence[ChatMessage]) -> str:
    """Prompts with the same system message share a context (and its cached prefix)."""
    if messages and messages[0].role == "system":
        return hashlib.sha256(messages[0].content.encode("utf-8")).hexdigest()[:16]
    return ""


def _to_response(result: Any, latency: float, name: str, *, constrained: bool) -> LLMResponse:
    try:
        choice = result["choices"][0]
        text = choice["message"]["content"] or ""
        usage = result.get("usage") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMResponseError(f"{name} returned an unexpected result: {str(result)[:300]}") from exc
    if choice.get("finish_reason") == "length":
        # cut-off JSON is unusable: worth a warning; plain text cut at max_tokens is often intended
        level = logging.WARNING if constrained else logging.DEBUG
        logger.log(level, "%s stopped at max_tokens; the output may be cut short", name)
    return LLMResponse(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
    )
