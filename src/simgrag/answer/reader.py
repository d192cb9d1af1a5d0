"""The shared reader of the other retrievers' contexts: context + question → LLM → answer entities.

It returns the one :class:`~simgrag.answer.qa.Answer` type; :mod:`simgrag.answer.answerer` decides
which style reads a context (SimGRAG's own subgraph prompt is :mod:`simgrag.answer.qa`). Prompt
styles, one per family of methods:

``"kaping"``
    KAPING's zero-shot prompt (Baek et al., 2023, §3): the retrieved facts listed as
    ``(head, relation, tail)`` under a one-line preamble, then ``Question: …`` and ``Answer:``.
``"subgraphrag"``
    SubgraphRAG's reasoning prompt (Li et al., 2025, Fig. 2 and App. D): a system instruction asking
    for answers as lines prefixed with ``ans:``, one worked example (ours, in the movie domain), then
    ``Triples:`` and ``Question:``. The model reasons, then writes its ``ans:`` lines.
``"paths"``
    The same instruction over reasoning paths (OKGQA §4.1), each written as a chain
    ``Titanic -[directed_by]-> James Cameron <-[directed_by]- Avatar``; a context without paths shows
    each triple as a one-step path.
``"none"``
    The question alone (the LLM-only baseline), still asking for ``ans:`` lines.
``"open"``
    An open-ended answer (OKGQA's setting): a paragraph of 2–4 sentences written from the facts, or,
    for the ``none`` retriever, from the LLM's own knowledge (:func:`simgrag.answer.open.open_messages`).
    Its entities are the context names the paragraph mentions.

Parsing (never ``eval``): every ``ans:`` line is an answer, mapped to the context's entity name it
equals (case-insensitively, also after dropping a trailing ``(…)`` note), else kept as written;
``not available``/``none``/``unknown`` lines mean no answer. A reply without ``ans:`` lines is read
by :func:`simgrag.answer.extract.extract_entities` (the ``answer:`` line, else the context names it
mentions, less those the question mentions when others are named); failing that, the items of its
answer segment or its first line are the answers.

The context is capped: at most ``max_triples`` triples (or paths), and only as many as keep the
prompt within ``max_prompt_tokens`` by :func:`approx_tokens` (or the ``count_tokens`` given).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence

from simgrag.answer._common import call_llm
from simgrag.answer.extract import answer_segment, extract_entities, split_items
from simgrag.answer.open import open_messages
from simgrag.answer.qa import Answer
from simgrag.answer.verbalize import format_triple
from simgrag.errors import ConfigError
from simgrag.kg.store import Triple
from simgrag.llm.base import LLM, ChatMessage
from simgrag.retrievers.base import RetrievedContext

__all__ = [
    "READER_STYLES",
    "approx_tokens",
    "context_names",
    "parse_answers",
    "path_chain",
    "read_context",
    "reader_messages",
]

READER_STYLES: tuple[str, ...] = ("kaping", "subgraphrag", "paths", "none", "open")

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3.5


def approx_tokens(text: str) -> int:
    """Tokens of ``text`` estimated as ``ceil(chars / 3.5)``.

    BPE tokenizers (GPT, Llama 3, Qwen 2.5) average about 4 characters per token on English prose;
    KG names, digits and punctuation split finer, so 3.5 errs on the side of a shorter prompt.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


KAPING_PREAMBLE = "Below are facts from a knowledge graph that may be relevant to the question."

ANS_SYSTEM = ("Based on the {what} retrieved from a knowledge graph, please answer the question. "
              'Please return formatted answers as a list, each prefixed with "ans:".')

NONE_SYSTEM = ('Answer the question. Please return formatted answers as a list, each prefixed with "ans:".')

_SHOT_TRIPLES = (("Heat", "directed_by", "Michael Mann"), ("Collateral", "directed_by", "Michael Mann"),
                 ("Heat", "starred_actors", "Al Pacino"), ("Collateral", "starred_actors", "Tom Cruise"),
                 ("Heat", "release_year", "1995"))
_SHOT_QUESTION = "who acted in the films directed by Michael Mann?"
_SHOT_REPLY = ("To answer the question, we have to find the films directed by Michael Mann, then their actors. "
               "From the triples we can see that Michael Mann directed Heat and Collateral, Al Pacino starred "
               "in Heat and Tom Cruise starred in Collateral. Therefore, the answers are:\nans: Al Pacino\n"
               "ans: Tom Cruise")
_SHOT_PATHS = ("Michael Mann <-[directed_by]- Heat -[starred_actors]-> Al Pacino",
               "Michael Mann <-[directed_by]- Collateral -[starred_actors]-> Tom Cruise",
               "Michael Mann <-[directed_by]- Heat -[release_year]-> 1995")


def path_chain(path: Sequence[Triple]) -> str:
    """A path as a chain from its start: ``A -[r]-> B`` along a triple, ``A <-[r]- B`` against it."""
    if not path:
        return ""
    first = path[0]
    start = first.head
    if len(path) > 1 and first.head in (path[1].head, path[1].tail) and first.tail not in (path[1].head, path[1].tail):
        start = first.tail
    parts, here = [start], start
    for triple in path:
        forward = triple.head == here
        there = triple.tail if forward else triple.head
        parts.append(f"-[{triple.relation}]->" if forward else f"<-[{triple.relation}]-")
        parts.append(there)
        here = there
    return " ".join(parts)


def _context_lines(context: RetrievedContext, style: str) -> list[str]:
    if style == "none":
        return []
    if style == "paths":
        paths = context.paths or tuple((t,) for t in context.triples)
        return list(dict.fromkeys(path_chain(p) for p in paths))
    return [format_triple(t) for t in context.triples]


def _fixed_messages(style: str, question: str, body: str | None) -> list[ChatMessage]:
    if style == "open":  # body None: no retrieval, the LLM answers from its own knowledge
        return open_messages(question, body)
    body = body or "(nothing retrieved)"
    if style == "kaping":
        return [ChatMessage("user", f"{KAPING_PREAMBLE}\n{body}\nQuestion: {question.strip()}\nAnswer:")]
    if style == "none":
        return [ChatMessage("system", NONE_SYSTEM), ChatMessage("user", f"Question:\n{question.strip()}")]
    if style == "paths":
        shot = "\n".join(_SHOT_PATHS)
        return [ChatMessage("system", ANS_SYSTEM.format(what="reasoning paths")),
                ChatMessage("user", f"Paths:\n{shot}\n\nQuestion:\n{_SHOT_QUESTION}"),
                ChatMessage("assistant", _SHOT_REPLY.replace("From the triples", "From the paths")),
                ChatMessage("user", f"Paths:\n{body}\n\nQuestion:\n{question.strip()}")]
    shot = "\n".join(format_triple(t) for t in _SHOT_TRIPLES)
    return [ChatMessage("system", ANS_SYSTEM.format(what="triples")),
            ChatMessage("user", f"Triples:\n{shot}\n\nQuestion:\n{_SHOT_QUESTION}"),
            ChatMessage("assistant", _SHOT_REPLY),
            ChatMessage("user", f"Triples:\n{body}\n\nQuestion:\n{question.strip()}")]


def _count(messages: Sequence[ChatMessage], counter: Callable[[str], int]) -> int:
    return sum(counter(m.content) + 4 for m in messages)  # ~4 tokens of chat markup per message


def reader_messages(context: RetrievedContext, *, style: str = "subgraphrag", max_triples: int = 100,
                    max_prompt_tokens: int = 1500,
                    count_tokens: Callable[[str], int] | None = None) -> tuple[list[ChatMessage], int]:
    """The prompt for ``context`` and how many context lines it holds (see the module docstring)."""
    if style not in READER_STYLES:
        raise ConfigError(f"Unknown reader style {style!r}; choose one of {', '.join(READER_STYLES)}.")
    counter = count_tokens or approx_tokens
    lines = _context_lines(context, style)[:max_triples]
    empty = None if style == "open" and context.retriever == "none" else ""
    budget = max_prompt_tokens - _count(_fixed_messages(style, context.question, empty), counter)
    kept = lines[:_fit(lines, budget, counter)]
    return _fixed_messages(style, context.question, None if empty is None else "\n".join(kept)), len(kept)


def _fit(lines: Sequence[str], budget: int, counter: Callable[[str], int]) -> int:
    """How many of ``lines`` (one token each for the newline) fit in ``budget`` tokens."""
    used = 0
    for n, line in enumerate(lines):
        used += counter(line) + 1
        if used > budget:
            return n
    return len(lines)


_ANS_LINE = re.compile(r"^[ \t>*_-]*ans[*_ \t]*:[*_ \t]*(.*?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
_NO_ANSWER = {"", "none", "not available", "n/a", "na", "unknown", "no answer", "not found", "not found in the kg"}
_NOTE = re.compile(r"\s*\([^()]*\)\s*$")
_SPACES = re.compile(r"\s+")


def _key(text: str) -> str:
    return _SPACES.sub(" ", text).strip().strip(" .;:,\"'`").lower()


def _to_name(raw: str, by_key: dict[str, str]) -> str | None:
    """The context name ``raw`` stands for, else ``raw`` cleaned; ``None`` for a "no answer" line."""
    value = raw.strip().strip("\"'`").rstrip(".").strip()
    if _key(value) in _NO_ANSWER:
        return None
    for candidate in (value, _NOTE.sub("", value)):
        hit = by_key.get(_key(candidate))
        if hit is not None:
            return hit
    return value


def context_names(context: RetrievedContext) -> list[str]:
    """Entity names of the context in first-seen order (triples, then answer candidates)."""
    names: dict[str, None] = {}
    for triple in context.triples:
        names.setdefault(triple.head, None)
        names.setdefault(triple.tail, None)
    names.update(dict.fromkeys(context.answer_candidates))
    return list(names)


def _mentioned_in(name: str, question: str) -> bool:
    return bool(re.search(r"(?<!\w)" + re.escape(_key(name)) + r"(?!\w)", question.lower()))


def parse_answers(text: str, names: Sequence[str] = (), *, question: str = "") -> tuple[str, ...]:
    """Answer entities of an LLM reply (see the module docstring), ordered and deduplicated.

    In a reply without ``ans:`` or ``answer:`` lines, context names that the ``question`` itself
    mentions are dropped when the reply names others (``The director of Titanic is James Cameron``).
    """
    by_key: dict[str, str] = {}
    for name in names:
        by_key.setdefault(_key(name), name)
    lines = [m.group(1) for m in _ANS_LINE.finditer(text)]
    if lines:
        found = [_to_name(line, by_key) for line in lines]
        return tuple(dict.fromkeys(f for f in found if f))
    named = extract_entities(text, list(names)) if names else []
    if named and question and answer_segment(text) is None:
        named = [n for n in named if not _mentioned_in(n, question)] or named
    if named:
        return tuple(named)
    segment = answer_segment(text)
    if segment is None:
        segment = next((line for line in text.splitlines() if line.strip()), "")
    items = [_to_name(item, by_key) for item in split_items(segment, names)]
    return tuple(dict.fromkeys(i for i in items if i))


def read_context(llm: LLM, context: RetrievedContext, *, style: str = "subgraphrag", max_triples: int = 100,
                 max_prompt_tokens: int = 1500, max_tokens: int = 256,
                 count_tokens: Callable[[str], int] | None = None) -> Answer:
    """Ask ``llm`` the context's question over the (capped) context and parse its answers.

    LLM failures propagate as :class:`~simgrag.errors.LLMError`.
    """
    messages, kept = reader_messages(context, style=style, max_triples=max_triples,
                                     max_prompt_tokens=max_prompt_tokens, count_tokens=count_tokens)
    counter = count_tokens or approx_tokens
    t0 = time.perf_counter()
    response = call_llm(llm, messages, task=f"read ({style}, {kept} context lines)", max_tokens=max_tokens)
    latency = response.latency_s or (time.perf_counter() - t0)
    text = response.text.strip()
    lines = _context_lines(context, style)[:kept]
    names = context_names(context)
    entities = (tuple(extract_entities(text, names)) if style == "open"
                else parse_answers(text, names, question=context.question))
    return Answer(text, entities, context.answer_candidates, entities[0] if entities else None,
                  reason=f"read by the {style!r} reader over {kept} context line(s)",
                  prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                  latency_s=latency, cached=response.cached, style=style, context_items=kept,
                  context_tokens=sum(counter(x) for x in lines), prompt_tokens_estimate=_count(messages, counter))
