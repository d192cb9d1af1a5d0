"""Claim + retrieved subgraphs → verdict (SimGRAG §4.4, Table 20, adapted for a small model).

Messages, fixed part first (prefix-cache friendly)::

    system     rules (supported only if some graph fully supports the claim), reply format  ┐ fixed
    user/asst  three tiny worked examples                                                  ┘
    user       evidence (graph [i]: (h, r, t), …) then the claim                             variable

The reply is one line ``verdict: Supported`` / ``verdict: Refuted`` (or, with ``use_json_schema``,
``{"verdict": "Supported"}`` under constrained decoding). :func:`parse_verdict` reads either, and
falls back to the last verdict word in free text (``supported``, ``refuted``, ``true``, ``false``…).
A reply with no verdict at all gives the label ``Not enough evidence`` (``label_binary``: Refuted).

:func:`verify_claim` checks a claim against matched subgraphs; :func:`verify_context` against any
retriever's context with the same prompt: subgraphs as ``graph [i]`` lines, paths (OKGQA's
``paths``) one ``graph [i]`` each, any other context a flat list of triples, one per line (the
compact form), most relevant first. An empty context gives "Not enough evidence" without calling the
LLM, as an unmatched pattern does.

A claim's pattern that the KG does not hold exactly is also checked with one end of each triple left
free (:mod:`simgrag.answer.refute`, a :class:`~simgrag.answer.refute.ClaimCheck`): a fact of a
functional relation that contradicts it gives "Refuted" with that fact, without the LLM; where the
claim's own pattern matched nothing, what the KG holds on the claim's entity and relation is the
evidence the LLM reads. "Not enough evidence" then means the KG holds nothing on the claim's entities
and relations.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from simgrag.answer._common import abstain_reason, call_llm
from simgrag.answer.calibration import DETAILS
from simgrag.answer.refute import ClaimCheck, Contradiction
from simgrag.answer.verbalize import Triples, format_triple, verbalize_evidence, verbalize_graphs, within_chars
from simgrag.llm.base import LLM, ChatMessage
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.base import RetrievedContext

__all__ = [
    "VERDICT_SCHEMA", "VERIFY_SHOTS", "VERIFY_SYSTEM", "Label", "Verdict", "context_evidence", "parse_verdict",
    "refuted", "unknown_entity", "verify_claim", "verify_context", "verify_messages",
]

logger = logging.getLogger(__name__)

Label = Literal["Supported", "Refuted", "Not enough evidence"]
SUPPORTED: Label = "Supported"
REFUTED: Label = "Refuted"
NOT_ENOUGH: Label = "Not enough evidence"

_RULES = """\
Check the claim using only the evidence graphs from a knowledge graph.
Rules:
1. If some graph fully supports the claim, the verdict is Supported; otherwise it is Refuted.
2. A claim like "A has a wife" is supported by any spouse of A, whatever the name.
"""
_LINE_FORMAT = "3. Reply with one line only: verdict: Supported  or  verdict: Refuted"
_JSON_FORMAT = '3. Reply with JSON only: {"verdict": "Supported"} or {"verdict": "Refuted"}'
VERIFY_SYSTEM = _RULES + _LINE_FORMAT

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": [SUPPORTED, REFUTED]}},
    "required": ["verdict"],
    "additionalProperties": False,
}

# (claim, graphs, verdict): tiny and fixed.
VERIFY_SHOTS: tuple[tuple[str, tuple[Triples, ...], Label], ...] = (
    ("Christopher Nolan directed Inception.",
     ((("Inception", "director", "Christopher Nolan"),),),
     SUPPORTED),
    ("Ben Hecht was born in Paris.",
     ((("Ben Hecht", "birthPlace", "New York City"),), (("Ben Hecht", "deathPlace", "New York City"),)),
     REFUTED),
    ("Anne Monson has a husband.",
     ((("Anne Monson", "spouse", "George Monson"),),),
     SUPPORTED),
)

_WORDS: tuple[tuple[str, Label], ...] = (
    (r"not\s+enough(?:\s+\w+)?|insufficient|nei|unknown|unverifiable", NOT_ENOUGH),
    (r"not\s+supported|unsupported|refuted|refutes?|false|incorrect|no", REFUTED),
    (r"supported|supports?|true|correct|yes", SUPPORTED),
)
_VALUE = [(re.compile(rf"^(?:{words})\b", re.IGNORECASE), label) for words, label in _WORDS]
# Free text: "no"/"yes"/"unknown" are too common in reasoning to count as a verdict there.
_FREE = re.compile(
    r"\b(?:(?P<nei>not\s+enough\s+(?:evidence|information|info))|"
    r"(?P<ref>not\s+supported|unsupported|refuted|refutes?|false|incorrect)|"
    r"(?P<sup>supported|supports?|true|correct))\b",
    re.IGNORECASE,
)
_VERDICT_LINE = re.compile(r"\b(?:verdict|label|answer)\s*\**\s*[:=]\**\s*[\"'`*]*([A-Za-z][A-Za-z ]*)",
                           re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Verdict:
    """The verdict on one claim. ``label``: Supported, Refuted or Not enough evidence; ``evidence``:
    the matched subgraphs it was checked against (``None`` for a context without subgraphs);
    ``evidence_items``: the graphs, paths or triples shown to the LLM."""

    label: Label
    text: str
    evidence: Retrieval | None
    abstained: bool
    reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    evidence_items: int = 0
    contradictions: tuple[Contradiction, ...] = ()  # KG facts that rule the claim out (simgrag.answer.refute)

    @property
    def llm_used(self) -> bool:
        """Whether an LLM gave the label (not for "not found" nor a refutation by the KG's facts)."""
        return not self.abstained and not self.contradictions

    @property
    def label_binary(self) -> Literal["Supported", "Refuted"]:
        """Supported or Refuted; "Not enough evidence" counts as Refuted (as FactKG scores it)."""
        return "Supported" if self.label == SUPPORTED else "Refuted"

    @property
    def supported(self) -> bool:
        return self.label == SUPPORTED

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the evidence through :meth:`Retrieval.to_dict`)."""
        return {
            "label": self.label, "label_binary": self.label_binary, "text": self.text,
            "abstained": self.abstained, "reason": self.reason, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "latency_s": self.latency_s, "cached": self.cached,
            "evidence_items": self.evidence_items, "llm_used": self.llm_used,
            "contradictions": [c.to_dict() for c in self.contradictions],
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }


def _label_of_value(value: str) -> Label | None:
    value = value.strip().strip("\"'`*.").strip()
    return next((label for pattern, label in _VALUE if pattern.match(value)), None)


def _json_verdict(text: str) -> Label | None:
    for block in reversed(_JSON_OBJECT.findall(text)):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            value = next((data[k] for k in ("verdict", "label", "answer") if k in data), None)
            if isinstance(value, bool):
                return SUPPORTED if value else REFUTED
            if isinstance(value, str) and (label := _label_of_value(value)) is not None:
                return label
    return None


def _free_text_verdict(text: str) -> Label | None:
    found = list(_FREE.finditer(text))
    if not found:
        return None
    last = found[-1]
    return NOT_ENOUGH if last.group("nei") else REFUTED if last.group("ref") else SUPPORTED


def parse_verdict(text: str) -> Label | None:
    """The verdict in an LLM reply: a JSON ``verdict``, else the last ``verdict:`` line, else the
    last verdict word in the text; ``None`` when there is none."""
    label = _json_verdict(text)
    if label is not None:
        return label
    for match in reversed(list(_VERDICT_LINE.finditer(text))):
        label = _label_of_value(match.group(1))
        if label is not None:
            return label
    return _free_text_verdict(text)


def _user_turn(claim: str, evidence_text: str) -> str:
    return f"evidence:\n{evidence_text}\nclaim: {claim.strip()}"


def _reply(label: Label, use_json_schema: bool) -> str:
    return json.dumps({"verdict": label}) if use_json_schema else f"verdict: {label}"


def verify_messages(claim: str, evidence_text: str, *, compact: bool = False,
                    use_json_schema: bool = False) -> list[ChatMessage]:
    """The chat messages: fixed system + examples, then the evidence and the claim."""
    system = _RULES + (_JSON_FORMAT if use_json_schema else _LINE_FORMAT)
    messages = [ChatMessage("system", system)]
    for shot_claim, graphs, label in VERIFY_SHOTS:
        shot_evidence = verbalize_graphs(graphs, compact=compact)
        messages.append(ChatMessage("user", _user_turn(shot_claim, shot_evidence)))
        messages.append(ChatMessage("assistant", _reply(label, use_json_schema)))
    messages.append(ChatMessage("user", _user_turn(claim, evidence_text)))
    return messages


def verify_claim(
    llm: LLM,
    claim: str,
    pattern: Pattern,
    retrieval: Retrieval,
    *,
    abstain_gsd: float | None = None,
    max_tokens: int = 32,
    compact: bool = False,
    use_json_schema: bool = False,
) -> Verdict:
    """Verify ``claim`` against the subgraphs in ``retrieval`` (retrieved for ``pattern``, which is
    taken for symmetry with :func:`~simgrag.answer.qa.answer_question` and logged, not prompted).

    Without evidence, or when the best GSD is above ``abstain_gsd``, the label is "Not enough
    evidence" and the LLM is not called. An unreadable reply also gives "Not enough evidence" (with
    ``abstained=False`` and a reason saying so). LLM failures propagate as ``LLMError``.
    """
    logger.debug("verifying %r with pattern %s", claim, pattern.triples())
    reason = abstain_reason(retrieval, abstain_gsd)
    evidence_text = "" if reason else within_chars(verbalize_evidence(retrieval.evidence, compact=compact))
    return _verdict(llm, claim, evidence_text, len(retrieval.evidence), retrieval, reason, task="verify",
                    max_tokens=max_tokens, compact=compact, use_json_schema=use_json_schema)


def context_evidence(context: RetrievedContext, *, max_triples: int = 100) -> tuple[str, int]:
    """The evidence block of a context without subgraphs (see the module docstring) and how many
    paths or triples it holds (at most ``max_triples``; the block within
    :data:`~simgrag.answer.verbalize.MAX_EVIDENCE_CHARS`, the best first); ``("", 0)`` for an empty context."""
    if context.paths:
        paths = [[t.as_tuple() for t in path] for path in context.paths[:max_triples]]
        return within_chars(verbalize_graphs(paths)), len(paths)
    triples = [t.as_tuple() for t in context.triples[:max_triples]]
    return within_chars(verbalize_graphs([triples], compact=True)), len(triples)


def verify_context(llm: LLM, claim: str, context: RetrievedContext, *, abstain_gsd: float | None = None,
                   max_triples: int = 100, max_tokens: int = 32, use_json_schema: bool = False,
                   check: ClaimCheck | None = None) -> Verdict:
    """Verify ``claim`` against any retriever's ``context`` (retrieved for the claim) with the same
    prompt: its subgraphs when it has them (:func:`verify_claim`, ``abstain_gsd`` applies), else its
    paths or triples (the worked examples in the evidence's own form: graphs for paths, else the
    compact list). ``check``: the claim's pattern searched with one end free (module docstring)."""
    if context.subgraphs is not None and context.pattern is not None:
        if check is not None and check.contradictions:
            return refuted(claim, check)
        retrieval = context.subgraphs
        if not retrieval.evidence and check is not None and check.related is not None:
            retrieval = check.related  # what the KG holds on the claim's entity and relation
        verdict = verify_claim(llm, claim, context.pattern.pattern, retrieval, abstain_gsd=abstain_gsd,
                               max_tokens=max_tokens, use_json_schema=use_json_schema)
        if verdict.abstained and not retrieval.evidence and check is not None:
            return replace(verdict, reason="the KG holds nothing on the claim's entities with its relations")
        return verdict
    evidence_text, items = context_evidence(context, max_triples=max_triples)
    reason = None if items else f"the {context.retriever} retriever found no triples"
    return _verdict(llm, claim, evidence_text, items, None, reason, task=f"verify ({context.retriever})",
                    max_tokens=max_tokens, compact=not context.paths, use_json_schema=use_json_schema)


def unknown_entity(claim: str, retrieval: Retrieval, said: str, distance: float, threshold: float) -> Verdict:
    """"Not enough evidence": the claim names an entity the KG does not have (``said``: the nearest match, in
    words), without the LLM."""
    logger.info("claim %r names an entity the KG lacks: %s", claim, said)
    reason = (f"the KG has no entity the claim names ({said})"
              f"{DETAILS}named {distance:.3g} is above this KG's {threshold:.3g}")
    return Verdict(NOT_ENOUGH, f"not found in the KG; {said}", retrieval, True, reason)


def refuted(claim: str, check: ClaimCheck) -> Verdict:
    """"Refuted" by the facts in ``check.contradictions``, without the LLM."""
    t0 = time.perf_counter()
    facts = check.contradictions
    logger.info("claim %r refuted by the KG: %s", claim, "; ".join(c.text() for c in facts))
    text = "refuted by the KG: " + ", ".join(format_triple(c.held.as_tuple()) for c in facts)
    return Verdict(REFUTED, text, check.evidence, False, facts[0].text(), latency_s=time.perf_counter() - t0,
                   evidence_items=len(facts), contradictions=facts)


def _verdict(llm: LLM, claim: str, evidence_text: str, items: int, retrieval: Retrieval | None, reason: str | None,
             *, task: str, max_tokens: int, compact: bool, use_json_schema: bool) -> Verdict:
    """The LLM's verdict on ``evidence_text``, or "Not enough evidence" without a call when ``reason``."""
    t0 = time.perf_counter()
    if reason is not None:
        logger.info("abstaining on claim %r: %s", claim, reason)
        return Verdict(NOT_ENOUGH, "not found in the KG", retrieval, True, reason,
                       latency_s=time.perf_counter() - t0)
    messages = verify_messages(claim, evidence_text, compact=compact, use_json_schema=use_json_schema)
    response = call_llm(llm, messages, task=task, max_tokens=max_tokens,
                        json_schema=VERDICT_SCHEMA if use_json_schema else None)
    text = response.text.strip()
    label = parse_verdict(text)
    why = "verdict read from the reply" if label is not None else "the reply holds no verdict"
    return Verdict(label or NOT_ENOUGH, text, retrieval, False, why, response.prompt_tokens,
                   response.completion_tokens, time.perf_counter() - t0, response.cached, items)
