"""LLM protocol and backends: embedded llama.cpp, OpenAI-compatible servers, Ollama; call cache."""

from simgrag.llm.base import LLM, ChatMessage, LLMResponse
from simgrag.llm.cache import CachedLLM
from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.llm.models import default_model_path, pull_default_model
from simgrag.llm.ollama import OllamaLLM
from simgrag.llm.openai_compat import OpenAICompatLLM
from simgrag.llm.registry import LLMS, list_llms, resolve_llm

__all__ = [
    "LLM",
    "LLMS",
    "CachedLLM",
    "ChatMessage",
    "LLMResponse",
    "LlamaCppLLM",
    "OllamaLLM",
    "OpenAICompatLLM",
    "default_model_path",
    "list_llms",
    "pull_default_model",
    "resolve_llm",
]
