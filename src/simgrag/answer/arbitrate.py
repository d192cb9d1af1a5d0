"""The answer mode ``"check"``: the exact-binding shortcut, checked by the LLM reading the same subgraphs.

The shortcut (``"auto"``) answers with the bindings of the pattern's *last* unknown node; it trusts the
pattern's shape. The LLM reading the subgraphs (``"llm"``, the paper) reads the question, but a small model
reads multi-hop graphs poorly. Measured on WorldCup2014 (100 questions per file): the shortcut 82 / 99 on 1 /
2 hops — its 1-hop misses are one hop too many, "which club does X play for?" written club → country and
answered with the country; the LLM reading 99 / 91 — right on those, wrong on 8 2-hop questions it read the
club of.

``"check"`` runs both, and where they disagree on an entity the matched subgraphs bind to *another* unknown
node of the pattern, the LLM gets the two concrete candidates, each with its node's type, and picks one — a
choice between two answers is easier for a small model than reading a graph. It is asked twice, the candidates
in both orders, and the reading replaces the shortcut only when both answers pick it:

    Question: where is the football club that Jorge_FUCILE plays for ?
    A. Portugal (country)
    B. FC_Porto (club)

Whether ``check`` runs on a KG is fitted like the other modes (:mod:`simgrag.answer.mode_fit`): only where it
answers more validation questions and no group fewer than the shortcut.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

from simgrag.answer._common import call_llm
from simgrag.answer.qa import Answer
from simgrag.llm.base import LLM, ChatMessage
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern, type_hint

__all__ = ["CHOICE_SHOTS", "CHOICE_SYSTEM", "checked_answer", "choice_messages", "other_node"]

logger = logging.getLogger(__name__)

CHOICE_SYSTEM = ("You pick which of two candidates answers a question. Both were found in a knowledge graph; "
                 "the word in brackets says what each one is. Pick the one of the kind the question asks for. "
                 "Reply with the letter only: A or B.")

#: (question, A, B, reply): invented names; the asked kind once first, once second, once a place for "where"
CHOICE_SHOTS: tuple[tuple[str, str, str, str], ...] = (
    ("In which city was the author of The Quiet Orchard born?", "Tomas Varga (author)", "Lisbon (city)", "B"),
    ("Which band is the singer Mara Quill a member of?", "The Lanterns (band)", "Ireland (country)", "A"),
    ("Where is the company that makes the Falcon 7 phone based?", "Norvex (company)", "Finland (country)", "B"),
)

_LETTER = re.compile(r"\b([AB])\b")


def other_node(pattern: Pattern, retrieval: Retrieval, entity: str, asked: int) -> int | None:
    """The unknown pattern node (not ``asked``) that the best subgraphs bind to ``entity``, if any."""
    for evidence in retrieval.evidence:
        for i, node in enumerate(pattern.nodes):
            if i == asked or not node.unknown:
                continue
            bound = evidence.binding(node.text)
            if bound is not None and bound.entity == entity:
                return i
    return None


def choice_messages(question: str, first: str, second: str) -> list[ChatMessage]:
    """The prompt: the system rule, the fixed shots, then the question with candidates ``first`` (A) and
    ``second`` (B), each already written ``name (kind)``."""
    messages = [ChatMessage("system", CHOICE_SYSTEM)]
    for q, a, b, reply in CHOICE_SHOTS:
        messages += [ChatMessage("user", _turn(q, a, b)), ChatMessage("assistant", reply)]
    return [*messages, ChatMessage("user", _turn(question, first, second))]


def _turn(question: str, first: str, second: str) -> str:
    return f"Question: {question.strip()}\nA. {first}\nB. {second}"


def _kind(pattern: Pattern, node: int) -> str:
    return type_hint(pattern.nodes[node].text) or "entity"


def checked_answer(llm: LLM, question: str, pattern: Pattern, retrieval: Retrieval, direct: Answer,
                   read: Answer) -> Answer:
    """``direct`` (the shortcut's answer) or ``read`` (the LLM's reading of the same subgraphs), as the module
    docstring says; the LLM is asked to choose only when ``read`` names another unknown node's entity."""
    asked = pattern.asked_node()
    other = read.short_answer
    if asked is None or other is None or direct.short_answer is None or other in direct.entities:
        return _with_cost(direct, read)
    node = other_node(pattern, retrieval, other, asked)
    if node is None:  # the reading names nothing the pattern's other nodes hold: keep the shortcut
        return _with_cost(direct, read)
    mine = f"{direct.short_answer} ({_kind(pattern, asked)})"
    theirs = f"{other} ({_kind(pattern, node)})"
    # asked twice, the candidates in both orders: the reading wins only when both answers pick it (a small
    # model tends to pick one position whatever the candidates)
    votes, prompt_tokens, completion_tokens = [], read.prompt_tokens, read.completion_tokens
    for first, second, reading_letter in ((mine, theirs, "B"), (theirs, mine, "A")):
        response = call_llm(llm, choice_messages(question, first, second), task="answer check", max_tokens=4)
        found = _LETTER.search(response.text.strip().upper())
        votes.append(found is not None and found.group(1) == reading_letter)
        prompt_tokens += response.prompt_tokens
        completion_tokens += response.completion_tokens
        if not votes[-1]:
            break
    picked = read if all(votes) else direct
    logger.info("answer check for %r: %s or %s -> %s", question, mine, theirs, picked.short_answer)
    why = (f"checked by the LLM: the question asks for the {_kind(pattern, node)} ({other}), not the "
           f"{_kind(pattern, asked)}" if picked is read else direct.reason)
    return replace(_with_cost(picked, read), reason=why, prompt_tokens=prompt_tokens,
                   completion_tokens=completion_tokens)


def _with_cost(answer: Answer, read: Answer) -> Answer:
    """``answer`` carrying the reading's LLM cost (the reading call was made either way)."""
    return replace(answer, prompt_tokens=read.prompt_tokens, completion_tokens=read.completion_tokens, llm_used=True)
