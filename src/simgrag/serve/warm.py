"""Prompt prefixes warmed at start-up: the first question (or claim) of a fresh server does not pay them.

An in-process model (llama.cpp) keeps the KV state of each prompt family's fixed part — system text and
static few-shot examples — in its live context and on disk
(:class:`~simgrag.llm.kv_store.KVStateStore`); evaluating one costs ~15–20 s on 2 cores. Each family
is sent once here, with a placeholder for the part that changes and one token to generate: the
question pattern prompt, the claim pattern prompt, the answer prompt and the verify prompt. A remote
LLM is not warmed (its server keeps its own cache, and each call may cost money).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from simgrag.answer.qa import qa_messages
from simgrag.answer.verify import verify_messages
from simgrag.errors import SimGRAGError
from simgrag.llm.base import LLM, ChatMessage, LoadsWeights
from simgrag.pipeline import SimGRAG

__all__ = ["prompt_families", "warm_prompts"]

logger = logging.getLogger(__name__)

_PLACEHOLDER = "warm up"


def prompt_families(engine: SimGRAG) -> dict[str, Callable[[], Sequence[ChatMessage]]]:
    """Each prompt family of ``engine`` as a function giving its messages (the last one a placeholder)."""
    families: dict[str, Callable[[], Sequence[ChatMessage]]] = {}
    retriever = engine.retriever
    for name, attribute in (("pattern", "patterns"), ("claim pattern", "claim_patterns")):
        stage = getattr(retriever, attribute, None)
        prompt = getattr(getattr(stage, "generator", None), "prompt", None)
        if prompt is not None and hasattr(prompt, "fixed_messages"):
            families[name] = partial(_fixed_part, prompt)
    families["answer"] = lambda: qa_messages(_PLACEHOLDER, _PLACEHOLDER)
    families["verify"] = lambda: verify_messages(_PLACEHOLDER, _PLACEHOLDER)
    return families


def _fixed_part(prompt: Any) -> list[ChatMessage]:
    return [*prompt.fixed_messages(), ChatMessage("user", _PLACEHOLDER)]


def warm_prompts(engine: SimGRAG, *, only_in_process: bool = True) -> dict[str, float]:
    """Send every prompt family once (one token generated); seconds per family. A family that fails
    is logged and skipped: the first real call reports the problem."""
    if engine.llm_name is None:
        return {}
    llm: LLM = engine.llm
    if only_in_process and not isinstance(llm, LoadsWeights):
        return {}
    seconds: dict[str, float] = {}
    for name, messages in prompt_families(engine).items():
        t = time.perf_counter()
        try:
            llm.complete(messages(), max_tokens=1, temperature=0.0)
        except SimGRAGError as exc:
            logger.warning("warming the %s prompt failed: %s", name, exc)
            continue
        seconds[name] = time.perf_counter() - t
    logger.info("prompt prefixes warmed: %s", {k: round(v, 2) for k, v in seconds.items()})
    return seconds
