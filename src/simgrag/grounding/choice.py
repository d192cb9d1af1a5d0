"""The LLM chooses between readings the KG cannot tell apart (the ``llm_choice`` family).

A small model copies its nearest shot: "which football club does X play for?" comes back as ``[X, plays in
club, club 1], [club 1, is in country, country 1]`` when a shot asks where the club is. The KG holds both
that pattern and the one without its last hop exactly, so the KG cannot choose, and a word rule that did
choose (a judge reading "plays" as ``plays_position``) broke other KGs. Here the strongest model present
decides: the chosen pattern and each rival the KG also holds closely — the chosen pattern with one unknown
leaf dropped (:func:`~simgrag.grounding.edits.drop_leaf`), judged without a problem — are shown to the
LLM as small graphs with the answer marked, in an order fixed by the question's hash (no position favoured
across questions), and it answers with a letter. One short call, only for questions with such rivals; a
reply that names no option keeps the chosen pattern.

Whether this helps is a property of the KG and the LLM: it is a family like the edits, fitted per KG
(:mod:`~simgrag.grounding.fit`), and off on an index without a fit unless ``--grounding`` asks for
every family.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence

from simgrag.errors import LLMError
from simgrag.grounding.edits import drop_leaf
from simgrag.grounding.judge import GOOD_GSD, Judgement, PatternJudge, triple_set
from simgrag.grounding.question import QuestionReading
from simgrag.llm.base import LLM, ChatMessage
from simgrag.pattern.graph import is_unknown

__all__ = ["choice_messages", "choose", "read_choice", "rivals"]

logger = logging.getLogger(__name__)

LETTERS = "ABCDEF"
#: readings shown at most (the chosen one and its rivals)
MAX_OPTIONS = len(LETTERS)
_LETTER = re.compile(r"\b([A-F])\b")

SYSTEM = ("You check how a question was read into a small knowledge-graph pattern. Each reading lists its "
          "facts; ?names are unknowns and the one marked ANSWER is what the reading returns. Pick the reading "
          "that asks exactly what the question asks: no fact the question does not ask for, none missing. "
          "Reply with its letter only.")


def _node(text: str, asked: str | None) -> str:
    if not is_unknown(text):
        return text
    shown = "?" + " ".join(text.split()[1:])
    return f"{shown} (ANSWER)" if text == asked else shown


def render(judgement: Judgement) -> str:
    """A candidate as one line of facts, its answer node marked."""
    asked = judgement.asked
    return "; ".join(f"{_node(h, asked)} -- {r.replace('_', ' ')} -- {_node(t, asked)}"
                     for h, r, t in judgement.candidate.triples)


def choice_messages(question: str, options: Sequence[Judgement]) -> list[ChatMessage]:
    lines = [f"Question: {question}", *(f"{LETTERS[i]}) {render(j)}" for i, j in enumerate(options)),
             "Letter:"]
    return [ChatMessage("system", SYSTEM), ChatMessage("user", "\n".join(lines))]


def read_choice(text: str, n: int) -> int | None:
    """The option a reply names (its first letter among the ``n`` shown), ``None`` when it names none."""
    found = _LETTER.search(text.strip().upper()[:40])
    if found is None:
        return None
    index = LETTERS.index(found.group(1))
    return index if index < n else None


def rivals(judge: PatternJudge, reading: QuestionReading, chosen: Judgement) -> list[Judgement]:
    """Readings the KG holds as closely as ``chosen``: it with one unknown leaf dropped, judged with no
    problem, a match and a GSD within :data:`~simgrag.grounding.judge.GOOD_GSD`."""
    if chosen.pattern is None or chosen.problems or len(chosen.candidate.triples) < 2:
        return []
    mine = triple_set(chosen.candidate.triples)
    found = judge.judge_all(reading, [c for c in drop_leaf(chosen.candidate) if triple_set(c.triples) != mine])
    return [j for j in found if not j.problems and j.retrieval is not None and j.retrieval.evidence
            and j.gsd <= GOOD_GSD][: MAX_OPTIONS - 1]


def _order(question: str, n: int) -> list[int]:
    """The options' display order, fixed by the question (the same every run, no slot favoured overall)."""
    seed = int.from_bytes(hashlib.blake2b(question.encode("utf-8", "replace"), digest_size=4).digest(), "big")
    return sorted(range(n), key=lambda i: (i * 2654435761 + seed) % 4294967291)


def choose(llm: LLM, question: str, chosen: Judgement, others: Sequence[Judgement]) -> tuple[Judgement, bool]:
    """The reading the LLM picks among ``chosen`` and ``others`` (``chosen`` when it names none or fails),
    and whether a call was made."""
    if not others:
        return chosen, False
    pool = [chosen, *others]
    order = _order(question, len(pool))
    shown = [pool[i] for i in order]
    try:
        reply = llm.complete(choice_messages(question, shown), max_tokens=3, temperature=0.0)
    except LLMError as exc:
        logger.info("the LLM's choice for %r failed: %s", question, str(exc).splitlines()[0])
        return chosen, True
    picked = read_choice(reply.text, len(shown))
    if picked is None:
        logger.info("the LLM's choice for %r named no option: %r", question, reply.text[:80])
        return chosen, True
    return shown[picked], True
