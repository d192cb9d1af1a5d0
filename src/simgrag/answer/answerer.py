"""The one answerer: any retriever's context → an :class:`~simgrag.answer.qa.Answer` or a
:class:`~simgrag.answer.verify.Verdict`.

Which prompt reads a context (its *style*): the one asked for (``style=``), else SimGRAG's subgraph
prompt (``"simgrag"``, :mod:`simgrag.answer.qa`) for a context that carries matched subgraphs, else
the style the retriever registry gives its retriever (KAPING's own prompt, the paths prompt, …,
:mod:`simgrag.answer.reader`), else ``"subgraphrag"``.

Answer modes (SimGRAG's subgraph prompt only): ``"llm"`` always asks the LLM to answer from the
subgraphs (the paper); ``"auto"`` answers straight from the bindings of the asked-for node when the
best subgraph matches the pattern exactly (GSD ≈ 0) and asks the LLM otherwise; ``"check"`` does both on an exact
match and lets the LLM choose where they name entities of different pattern nodes
(:mod:`simgrag.answer.arbitrate`). A context without
subgraphs has no exact match, so ``"auto"`` asks the LLM for it too. ``abstain_gsd`` answers
"not found" without the LLM when even the best subgraph is further than that; a context with
subgraphs but none matched is "not found" in any case.

Verification uses SimGRAG's verification prompt whatever the retriever
(:func:`~simgrag.answer.verify.verify_context`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simgrag.answer._common import abstain_reason, call_llm
from simgrag.answer.arbitrate import checked_answer
from simgrag.answer.calibration import NO_ABSTENTION, Calibration, evidence_features
from simgrag.answer.extract import extract_entities
from simgrag.answer.qa import Answer, answer_from_bindings, answer_question, not_found, qa_messages
from simgrag.answer.reader import READER_STYLES, context_names, read_context
from simgrag.answer.reading import PatternReading, read_pattern
from simgrag.answer.refute import ClaimCheck
from simgrag.answer.verify import Verdict, context_evidence, refuted, unknown_entity, verify_context
from simgrag.errors import ConfigError
from simgrag.grounding.lexicon import Lexicon
from simgrag.llm.base import LLM
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.base import RetrievedContext
from simgrag.retrievers.registry import default_style

__all__ = ["ANSWER_MODES", "ANSWER_STYLES", "Answerer", "LLMSource"]

ANSWER_MODES: tuple[str, ...] = ("auto", "llm", "check")
ANSWER_STYLES: tuple[str, ...] = ("simgrag", *READER_STYLES)
LLMSource = LLM | Callable[[], LLM]


def _llm(source: LLMSource) -> LLM:
    return source if isinstance(source, LLM) else source()


@dataclass(frozen=True)
class Answerer:
    """How contexts are read (module docstring). ``max_triples`` / ``max_prompt_tokens`` cap the
    context the shared reader's styles put into a prompt (a subgraph prompt holds the k subgraphs).
    ``calibration``: the abstention and substitution thresholds (``None``: no abstention on the
    evidence; substitutions are still said). ``lexicon``: the index's words and relations, for telling
    whether a pattern reads the whole question (:mod:`simgrag.answer.reading`; shared stems only
    without it)."""

    mode: str = "auto"
    abstain_gsd: float | None = None
    style: str | None = None
    max_triples: int = 100
    max_prompt_tokens: int = 1500
    calibration: Calibration | None = None
    lexicon: Lexicon | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ANSWER_MODES:
            raise ConfigError(f"answer_mode must be one of {', '.join(ANSWER_MODES)}; got {self.mode!r}")
        if self.style is not None and self.style not in ANSWER_STYLES:
            raise ConfigError(f"Unknown reader style {self.style!r}; choose one of {', '.join(ANSWER_STYLES)}.")

    def style_for(self, context: RetrievedContext) -> str:
        """The style that reads ``context`` (module docstring)."""
        if self.style is not None:
            return self.style
        if context.subgraphs is not None:
            return "simgrag"
        return default_style(context.retriever) or "subgraphrag"

    def answer(self, llm: LLMSource, context: RetrievedContext) -> Answer:
        """The answer to the context's question; ``llm`` (or a function giving it) is asked only when
        needed. LLM failures propagate as :class:`~simgrag.errors.LLMError`."""
        style = self.style_for(context)
        if style != "simgrag":
            return read_context(_llm(llm), context, style=style, max_triples=self.max_triples,
                                max_prompt_tokens=self.max_prompt_tokens)
        if context.subgraphs is None or context.pattern is None:
            return self._flat_simgrag(_llm(llm), context)
        pattern, retrieval = context.pattern.pattern, context.subgraphs
        calibration = self.calibration or NO_ABSTENTION
        features = evidence_features(pattern, retrieval, context.pattern.kg_repairs, context.pattern.unworded)
        subs = calibration.substitutions(pattern, retrieval)
        reason = abstain_reason(retrieval, self.abstain_gsd) or calibration.decide(features)
        if reason is not None:
            return not_found(context.question, pattern, retrieval, reason, subs, features)
        reading = self.reading(context.question, pattern, retrieval)
        direct = None
        if self.mode in ("auto", "check"):
            direct = answer_from_bindings(context.question, pattern, retrieval, substitutions=subs, features=features,
                                          reading=reading)
            if direct is not None and self.mode == "auto":
                return direct
        read = answer_question(_llm(llm), context.question, pattern, retrieval, abstain_gsd=self.abstain_gsd,
                               substitutions=subs, features=features, reading=reading)
        if direct is None:
            return read
        return checked_answer(_llm(llm), context.question, pattern, retrieval, direct, read)

    def reading(self, question: str, pattern: Pattern, retrieval: Retrieval) -> PatternReading:
        """How much of ``question`` the pattern reads (:func:`~simgrag.answer.reading.read_pattern`)."""
        return read_pattern(question, pattern, retrieval, self.lexicon)

    def _flat_simgrag(self, llm: LLM, context: RetrievedContext) -> Answer:
        """SimGRAG's answer prompt over a context without subgraphs (its paths or triples as evidence)."""
        evidence, items = context_evidence(context, max_triples=self.max_triples)
        response = call_llm(llm, qa_messages(context.question, evidence, compact=not context.paths),
                            task=f"answer ({context.retriever})", max_tokens=64)
        text = response.text.strip()
        entities = tuple(extract_entities(text, context_names(context)))
        return Answer(text, entities, context.answer_candidates, entities[0] if entities else None,
                      reason="answered from the evidence", prompt_tokens=response.prompt_tokens,
                      completion_tokens=response.completion_tokens, latency_s=response.latency_s,
                      cached=response.cached, context_items=items)

    def _unknown_entity(self, claim: str, context: RetrievedContext) -> Verdict | None:
        """"Not enough evidence" for a claim about an entity the KG does not have: a named node of its pattern
        whose *nearest* KG entity is further than the KG's fitted ``named`` threshold (the one its questions'
        "not found" uses; none without a calibration for this KG). Checked before refutation: the nearest
        entity's facts say nothing about one the KG lacks. (A named node merely bound elsewhere in the best
        match — "City Hall was released in 1985", the KG holding 1996 — is not one: 1985 is in the KG.)"""
        calibration = self.calibration
        if (calibration is None or calibration.named is None or context.subgraphs is None
                or context.pattern is None):
            return None
        pattern, retrieval = context.pattern.pattern, context.subgraphs
        floors = retrieval.node_floor
        far = [(node.text, floors[i]) for i, node in enumerate(pattern.nodes)
               if not node.unknown and i < len(floors) and floors[i] > calibration.named]
        if not far:
            return None
        said = "; ".join(f"no entity named '{text}'" for text, _ in far)
        return unknown_entity(claim, retrieval, said, max(d for _, d in far), calibration.named)

    def verify(self, llm: LLMSource, claim: str, context: RetrievedContext, check: ClaimCheck | None = None) -> Verdict:
        """The verdict on ``claim`` over ``context`` (retrieved for the claim); ``check``: its pattern searched
        with one end free (:mod:`simgrag.answer.refute`). The LLM is resolved only when it is asked."""
        unknown = self._unknown_entity(claim, context)
        if unknown is not None:
            return unknown
        if check is not None and check.contradictions and context.subgraphs is not None:
            return refuted(claim, check)
        return verify_context(_llm(llm), claim, context, abstain_gsd=self.abstain_gsd,
                              max_triples=self.max_triples, check=check)
