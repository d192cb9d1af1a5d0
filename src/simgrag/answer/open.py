"""Open-ended answers: question (+ evidence) → a short paragraph (OKGQA §3.1's open setting).

OKGQA asks for long-form answers so that FActScore-style metrics can count their atomic facts
(:mod:`simgrag.eval.factscore`). The closed prompts of :mod:`simgrag.answer.qa` and
:mod:`simgrag.answer.reader` ask for entity lists; this one asks for 2–4 sentences.

Messages, fixed part first (prefix-cache friendly)::

    system     rules: answer in 2–4 sentences, only from the facts (or: from what you know)  ┐ fixed
    user/asst  one worked example in the movie domain                                      ┘
    user       facts (one ``(h, r, t)`` per line) then the question                          variable

``evidence=None`` means no retrieval at all (the LLM-only baseline): the model answers from its own
knowledge. An empty evidence string means the retriever found nothing: the model is told so and
asked to say that the facts do not answer the question.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from simgrag.answer._common import call_llm
from simgrag.answer.verbalize import format_triple
from simgrag.llm.base import LLM, ChatMessage

__all__ = ["OPEN_GROUNDED_SYSTEM", "OPEN_KNOWLEDGE_SYSTEM", "OpenAnswer", "open_answer", "open_messages"]

OPEN_GROUNDED_SYSTEM = """\
Answer the question in a short paragraph of 2 to 4 sentences, using only the facts below, which come \
from a knowledge graph. Name the entities exactly as the facts write them and state how they answer \
the question. If the facts do not answer the question, say so in one sentence."""

OPEN_KNOWLEDGE_SYSTEM = """\
Answer the question in a short paragraph of 2 to 4 sentences. Name the entities that answer it and \
state how they answer the question."""

_SHOT_FACTS = (("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino"),
               ("Heat", "starred_actors", "Robert De Niro"), ("Heat", "release_year", "1995"))
_SHOT_QUESTION = "who acted in Heat?"
_SHOT_REPLY = ("Heat starred Al Pacino and Robert De Niro. The film was directed by Michael Mann and "
               "released in 1995.")

NOTHING_RETRIEVED = "(nothing retrieved)"


@dataclass(frozen=True)
class OpenAnswer:
    """A paragraph answer with the LLM call's token counts and latency."""

    question: str
    text: str
    grounded: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "text": self.text, "grounded": self.grounded,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "latency_s": self.latency_s, "cached": self.cached}


def open_messages(question: str, evidence: str | None) -> list[ChatMessage]:
    """The prompt: grounded on ``evidence`` (fact lines; ``""`` when nothing was retrieved), or
    from the model's own knowledge when ``evidence`` is ``None``."""
    if evidence is None:
        return [ChatMessage("system", OPEN_KNOWLEDGE_SYSTEM),
                ChatMessage("user", f"Question: {_SHOT_QUESTION}"),
                ChatMessage("assistant", _SHOT_REPLY),
                ChatMessage("user", f"Question: {question.strip()}")]
    shot = "\n".join(format_triple(t) for t in _SHOT_FACTS)
    return [ChatMessage("system", OPEN_GROUNDED_SYSTEM),
            ChatMessage("user", f"Facts:\n{shot}\n\nQuestion: {_SHOT_QUESTION}"),
            ChatMessage("assistant", _SHOT_REPLY),
            ChatMessage("user", f"Facts:\n{evidence.strip() or NOTHING_RETRIEVED}\n\nQuestion: {question.strip()}")]


def open_answer(llm: LLM, question: str, evidence: str | None, *, max_tokens: int = 200) -> OpenAnswer:
    """Ask ``llm`` for a paragraph answer (see :func:`open_messages`). LLM failures propagate as
    :class:`~simgrag.errors.LLMError`."""
    t0 = time.perf_counter()
    response = call_llm(llm, open_messages(question, evidence), task="open answer", max_tokens=max_tokens)
    return OpenAnswer(question, response.text.strip(), evidence is not None, response.prompt_tokens,
                      response.completion_tokens, response.latency_s or time.perf_counter() - t0, response.cached)
