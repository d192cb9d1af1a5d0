"""Question + retrieved subgraphs → answer (SimGRAG §4.4, Table 19, adapted for a small model).

Messages, fixed part first so llama.cpp's prefix cache reuses it across questions::

    system     rules (use only the evidence, copy names, one line "answer: a | b")  ┐ fixed
    user/asst  three tiny worked examples                                          ┘
    user       evidence (graph [i]: (h, r, t), …) then the question                  variable

Besides the LLM's text, an :class:`Answer` carries ``candidates``: the KG entities bound to the
*asked-for* pattern node, best GSD first (:mod:`simgrag.retrievers.bindings`). :class:`Answer` is the
one answer type of simgrag: the shared reader of the other retrievers' contexts
(:mod:`simgrag.answer.reader`) returns it too.

Honesty (:mod:`simgrag.answer.calibration`): the evidence is written with its answer set (every answer
as good as the best match); a named node bound to an entity of another name is said out loud — in the
prompt ("note: nearest match for 'Doom': Doomsday"), in the answer's text and ``substitutions``; when
the calibrated rule finds that the KG does not answer the question, :func:`not_found` says "not found
in the KG" with the nearest evidence, without the LLM.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from simgrag.answer._common import abstain_reason, call_llm
from simgrag.answer.calibration import EvidenceFeatures, split_details
from simgrag.answer.extract import answer_segment, extract_entities
from simgrag.answer.reading import PatternReading
from simgrag.answer.verbalize import (
    Triples,
    format_triple,
    retrieval_entities,
    verbalize_graphs,
    verbalize_retrieval,
)
from simgrag.llm.base import LLM, ChatMessage
from simgrag.match.answers import Substitution
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.bindings import EXACT_GSD, answer_candidates, asked_node, asked_text, exact_bindings

__all__ = [
    "EXACT_GSD", "NOT_FOUND", "QA_SHOTS", "QA_SYSTEM", "Answer", "answer_candidates", "answer_from_bindings",
    "answer_question", "asked_node", "exact_bindings", "not_found", "qa_messages",
]

logger = logging.getLogger(__name__)

NOT_FOUND = "not found in the KG"

QA_SYSTEM = """\
Answer the question using only the evidence graphs from a knowledge graph.
Rules:
1. Copy entity names exactly as they are written in the evidence.
2. A graph fits only if its relations match the question. Answer from every graph that fits.
3. Reply with one line only: answer: name1 | name2
4. If no graph answers the question, reply: answer: none"""

# (question, graphs, answer line): tiny, fixed, and in the exact format the real turn uses.
QA_SHOTS: tuple[tuple[str, tuple[Triples, ...], str], ...] = (
    ("who directed Inception?",
     ((("Inception", "directed_by", "Christopher Nolan"),),),
     "answer: Christopher Nolan"),
    ("who wrote films that share actors with the film Anastasia?",
     ((("Anastasia", "starred_actors", "Ingrid Bergman"), ("Spellbound", "starred_actors", "Ingrid Bergman"),
       ("Spellbound", "written_by", "Ben Hecht")),
      (("Anastasia", "starred_actors", "John Cusack"), ("Floundering", "starred_actors", "John Cusack"),
       ("Floundering", "written_by", "Peter McCarthy"))),
     "answer: Ben Hecht | Peter McCarthy"),
    ("what genre is Heat?",
     ((("Heat", "has_genre", "Crime"),), (("Heat", "release_year", "1995"),)),
     "answer: Crime"),
)


@dataclass(frozen=True)
class Answer:
    """The answer to one question, whatever retrieved its context.

    ``text``: the LLM's reply (or :data:`NOT_FOUND` when abstaining). ``entities``: the context's
    entity names the reply gives, in its order. ``candidates``: the retriever's own answer candidates
    (SimGRAG: the entities bound to the asked-for node, best GSD first). ``short_answer``: the first
    entity, else the first candidate (``None`` when abstaining). ``evidence``: the matched subgraphs it
    was answered from (``None`` for a context without subgraphs). ``asked_node``: the pattern node
    taken as the one asked for. ``style``: the prompt it was read with (:mod:`simgrag.answer.answerer`);
    ``context_items`` / ``context_tokens`` / ``prompt_tokens_estimate``: how much context went into
    the prompt (the shared reader's styles). ``substitutions``: named nodes bound to an entity of another
    name (said in ``text`` too); ``features``: the evidence features the abstention rule read.
    ``reading``: how much of the question the pattern reads (:mod:`simgrag.answer.reading`);
    ``llm_used``: whether an LLM wrote ``text`` (not for an answer from the bindings, nor "not found").
    """

    text: str
    entities: tuple[str, ...]
    candidates: tuple[str, ...] = ()
    short_answer: str | None = None
    evidence: Retrieval | None = None
    abstained: bool = False
    reason: str = ""
    asked_node: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    style: str = "simgrag"
    context_items: int = 0
    context_tokens: int = 0
    prompt_tokens_estimate: int = 0
    substitutions: tuple[Substitution, ...] = ()
    features: EvidenceFeatures | None = None
    reading: PatternReading | None = None
    llm_used: bool = True

    @property
    def exact(self) -> bool:
        """Answered from exact matches of a pattern that reads the whole question
        (:mod:`simgrag.answer.reading`): what "exact match" means in its ``reason``."""
        return (not self.llm_used and not self.abstained and self.evidence is not None
                and self.reading is not None and self.reading.whole)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the evidence through :meth:`Retrieval.to_dict`, ``None`` without subgraphs)."""
        return {
            "text": self.text, "entities": list(self.entities), "candidates": list(self.candidates),
            "short_answer": self.short_answer, "abstained": self.abstained,
            "reason": split_details(self.reason)[0], "reason_details": split_details(self.reason)[1],
            "asked_node": self.asked_node, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "latency_s": self.latency_s, "cached": self.cached,
            "style": self.style, "context_items": self.context_items, "context_tokens": self.context_tokens,
            "prompt_tokens_estimate": self.prompt_tokens_estimate,
            "substitutions": [sub.to_dict() for sub in self.substitutions],
            "evidence_features": None if self.features is None else self.features.to_dict(),
            "llm_used": self.llm_used, "exact_match": self.exact,
            "pattern_reading": None if self.reading is None else self.reading.to_dict(),
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }


def _user_turn(question: str, evidence_text: str, notes: tuple[str, ...] = ()) -> str:
    said = "".join(f"note: {note}\n" for note in notes)
    return f"evidence:\n{evidence_text}\n{said}question: {question.strip()}"


def _notes(substitutions: tuple[Substitution, ...]) -> tuple[str, ...]:
    return tuple(f"{sub.text()} ({sub.why()})" for sub in substitutions)


def _said(text: str, substitutions: tuple[Substitution, ...]) -> str:
    """``text`` with the substitutions said first, one line each."""
    return "".join(sub.text() + "\n" for sub in substitutions) + text


def qa_messages(question: str, evidence_text: str, *, compact: bool = False,
                notes: tuple[str, ...] = ()) -> list[ChatMessage]:
    """The chat messages: fixed system + examples, then the evidence, any notes and the question."""
    messages = [ChatMessage("system", QA_SYSTEM)]
    for shot_question, graphs, reply in QA_SHOTS:
        shot_evidence = verbalize_graphs(graphs, compact=compact)
        messages.append(ChatMessage("user", _user_turn(shot_question, shot_evidence)))
        messages.append(ChatMessage("assistant", reply))
    messages.append(ChatMessage("user", _user_turn(question, evidence_text, notes)))
    return messages


def _known_entities(pattern: Pattern, retrieval: Retrieval) -> set[str]:
    known = {n.text for n in pattern.nodes if not n.unknown}
    return {b.entity for ev in retrieval.evidence for b in ev.nodes if b.pattern_node in known}


def _rank_entities(text: str, pattern: Pattern, retrieval: Retrieval) -> tuple[str, ...]:
    """Entities named in ``text``; in a reply without an answer line, the question's own entities
    are dropped when other ones were named (they are mentioned while rambling, not answered)."""
    found = extract_entities(text, retrieval_entities(retrieval))
    if answer_segment(text) is None:
        known = _known_entities(pattern, retrieval)
        others = [e for e in found if e not in known]
        found = others or found
    return tuple(found)


def answer_question(
    llm: LLM,
    question: str,
    pattern: Pattern,
    retrieval: Retrieval,
    *,
    max_tokens: int = 64,
    abstain_gsd: float | None = None,
    compact: bool = False,
    substitutions: tuple[Substitution, ...] = (),
    features: EvidenceFeatures | None = None,
    reading: PatternReading | None = None,
) -> Answer:
    """Answer ``question`` from the subgraphs in ``retrieval`` (retrieved for ``pattern``) and its
    answer set.

    Abstains with :data:`NOT_FOUND`, without calling the LLM, when nothing was retrieved or the best
    GSD is above ``abstain_gsd`` (``None``: never on GSD). ``compact`` lists distinct triples
    without graph labels. ``substitutions`` are told to the LLM and said in the answer's text.
    LLM failures propagate as :class:`simgrag.errors.LLMError`.
    """
    t0 = time.perf_counter()
    asked = asked_text(pattern)
    candidates = answer_candidates(pattern, retrieval)
    reason = abstain_reason(retrieval, abstain_gsd)
    if reason is not None:
        return not_found(question, pattern, retrieval, reason, substitutions, features, started=t0)
    evidence_text = verbalize_retrieval(retrieval, compact=compact)
    response = call_llm(llm, qa_messages(question, evidence_text, compact=compact, notes=_notes(substitutions)),
                        task="answer", max_tokens=max_tokens)
    text = response.text.strip()
    entities = _rank_entities(text, pattern, retrieval)
    short: str | None = entities[0] if entities else None
    why = "answered from the evidence"
    if short is None:
        short = candidates[0] if candidates else None
        why = "the reply names no evidence entity; short answer from the best-GSD binding"
    return Answer(_said(text, substitutions), entities, candidates, short, retrieval, False, why, asked,
                  response.prompt_tokens, response.completion_tokens, time.perf_counter() - t0, response.cached,
                  substitutions=substitutions, features=features, reading=reading)


def answer_from_bindings(question: str, pattern: Pattern, retrieval: Retrieval, *,
                         substitutions: tuple[Substitution, ...] = (),
                         features: EvidenceFeatures | None = None,
                         reading: PatternReading | None = None) -> Answer | None:
    """The answer without an LLM call when the KG holds exact matches of the pattern (``None`` if not).

    With an exact match the bindings of the asked-for node — the whole answer set, every match as good
    as the best — *are* the answer; asking the LLM would only add latency and a chance to pick a name
    from a graph that does not fit, or to list only some of the answers. The reason says "exact match"
    only when ``reading`` finds that the pattern reads the whole question; otherwise it says what is
    uncertain (:mod:`simgrag.answer.reading`).
    """
    t0 = time.perf_counter()
    entities = exact_bindings(pattern, retrieval)
    if not entities:
        return None
    asked = asked_text(pattern)
    logger.info("answering %r from %d exact subgraph bindings (no LLM call)", question, len(entities))
    if reading is not None and not reading.whole:
        why = ("answered from the subgraph bindings: the KG holds the pattern exactly, but the pattern may not ask "
               "what the question asks (" + reading.uncertainty() + ")")
    else:
        why = "exact match in the KG: answered from the subgraph bindings"
    return Answer(_said("answer: " + " | ".join(entities), substitutions), entities,
                  answer_candidates(pattern, retrieval), entities[0], retrieval, False, why, asked,
                  latency_s=time.perf_counter() - t0, substitutions=substitutions, features=features,
                  reading=reading, llm_used=False)


def not_found(question: str, pattern: Pattern, retrieval: Retrieval, reason: str,
              substitutions: tuple[Substitution, ...] = (), features: EvidenceFeatures | None = None, *,
              started: float | None = None) -> Answer:
    """"Not found in the KG", with the nearest evidence: what the best subgraph binds instead (the
    substitutions) and its triples; no LLM call."""
    t0 = time.perf_counter() if started is None else started
    logger.info("abstaining on %r: %s", question, reason)
    parts = [NOT_FOUND, *(sub.text() for sub in substitutions)]
    if retrieval.evidence:
        best = min(retrieval.evidence, key=lambda ev: (ev.gsd, ev.rank))
        parts.append("nearest evidence: " + ", ".join(format_triple(t) for t in best.triples()))
    return Answer("; ".join(parts), (), answer_candidates(pattern, retrieval), None, retrieval, True, reason,
                  asked_text(pattern), latency_s=time.perf_counter() - t0, substitutions=substitutions,
                  features=features, llm_used=False)
