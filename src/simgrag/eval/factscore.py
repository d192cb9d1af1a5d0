"""A KG-grounded FActScore (OKGQA §3.3 in spirit; Min et al., 2023): split an answer into atomic
claims with the LLM, check each claim against the KG, score the supported fraction.

FActScore checks atomic facts against Wikipedia; here the knowledge source is the KG and the checker
is SimGRAG's fact verification (``SimGRAG.verify``: claim → pattern → subgraphs → verdict), or any
callable that maps a claim to a verdict. A claim counts as supported only with the label
``Supported``; ``Refuted`` and ``Not enough evidence`` (and a claim whose check failed, e.g. no
valid pattern) count against it.

Splitting (:func:`split_claims`): one prompt with two worked examples asks for one claim per line or
``none``. :func:`parse_claims` reads the lines (never ``eval``): list markers (``1.``, ``2)``, ``-``,
``*``, ``•``, ``Claim 3:``) and quotes are dropped, a preamble line ending in ``:`` is skipped, lines
without two words of text are rejected (and kept in ``rejected``), duplicates (case and spacing
aside) are dropped, and at most ``max_claims`` are kept. A non-empty reply that gives no claim and
does not say ``none`` is *unparseable* and reported as such.

Scores: an answer with claims scores ``supported / claims``; an answer with no claims has no score
(``None``), and :func:`summarize_scores` counts it apart instead of as 1.0 or 0.0. The aggregate is
the mean over answers with claims.

The benchmark over retrievers and QA items is :func:`simgrag.eval.factscore_bench.run_factscore_bench`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from simgrag.answer._common import call_llm
from simgrag.errors import SimGRAGError
from simgrag.eval import metrics as m
from simgrag.llm.base import LLM, ChatMessage
from simgrag.pipeline import VerifyResult

__all__ = [
    "CLAIM_SHOTS", "CLAIM_SYSTEM", "MAX_CLAIMS", "ClaimSplit", "ClaimVerdict", "FactScore", "check_claims",
    "claim_messages", "factscore", "parse_claims", "split_claims", "summarize_scores",
]

logger = logging.getLogger(__name__)

MAX_CLAIMS = 8

CLAIM_SYSTEM = """\
Break the answer into independent atomic facts. Each fact is one short sentence that states a single \
relation between named things, with every pronoun replaced by the name it stands for. Leave out \
opinions, hedges and statements that something is unknown. Reply with one fact per line and nothing \
else. If the answer states no facts, reply: none"""

#: (question, answer, reply): tiny and fixed
CLAIM_SHOTS: tuple[tuple[str, str, str], ...] = (
    ("who acted in Heat?",
     "Heat starred Al Pacino and Robert De Niro. It was directed by Michael Mann and released in 1995.",
     "Al Pacino starred in Heat.\nRobert De Niro starred in Heat.\nHeat was directed by Michael Mann.\n"
     "Heat was released in 1995."),
    ("who wrote Memento?",
     "The facts do not say who wrote Memento.",
     "none"),
)


def _user_turn(question: str | None, answer: str) -> str:
    return (f"Question: {question.strip()}\n" if question else "") + f"Answer: {answer.strip()}"


def claim_messages(answer: str, question: str | None = None) -> list[ChatMessage]:
    """The splitting prompt: fixed system + examples, then the (question and) answer."""
    messages = [ChatMessage("system", CLAIM_SYSTEM)]
    for shot_question, shot_answer, reply in CLAIM_SHOTS:
        messages += [ChatMessage("user", _user_turn(shot_question, shot_answer)), ChatMessage("assistant", reply)]
    messages.append(ChatMessage("user", _user_turn(question, answer)))
    return messages


@dataclass(frozen=True)
class ClaimSplit:
    """The atomic claims read from one splitting reply, and what was left out of it."""

    reply: str
    claims: tuple[str, ...]
    rejected: tuple[str, ...] = ()
    duplicates: int = 0
    truncated: int = 0
    said_none: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    @property
    def unparseable(self) -> bool:
        """A non-empty reply with no claim that does not say ``none``."""
        return not self.claims and not self.said_none and bool(self.reply.strip())

    def to_dict(self) -> dict[str, Any]:
        return {"reply": self.reply, "claims": list(self.claims), "rejected": list(self.rejected),
                "duplicates": self.duplicates, "truncated": self.truncated, "said_none": self.said_none,
                "unparseable": self.unparseable, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "latency_s": self.latency_s}


_MARKER = re.compile(r"^(?:[-*•·>]+|\(?\d+[.):]|(?:claim|fact)\s*\d*\s*[.):-])\s*", re.IGNORECASE)
_NONE = {"none", "no facts", "no claims", "no atomic facts", "n/a"}
_WORD = re.compile(r"[^\W\d_]+")


def _clean_line(line: str) -> str:
    text = line.strip()
    while (stripped := _MARKER.sub("", text, count=1).strip()) != text:
        text = stripped
    return text.strip("*_`\"' \t").strip()


def _claim_key(claim: str) -> str:
    return re.sub(r"\s+", " ", claim).strip().rstrip(".").lower()


def parse_claims(reply: str, *, max_claims: int = MAX_CLAIMS) -> ClaimSplit:
    """Claims of a splitting reply, one per line (see the module docstring)."""
    claims: dict[str, str] = {}
    rejected: list[str] = []
    duplicates = truncated = 0
    said_none = False
    for line in reply.splitlines():
        text = _clean_line(line)
        if not text or (text.endswith(":") and not claims):  # blank, or a preamble "Here are the facts:"
            continue
        if _claim_key(text) in _NONE:
            said_none = True
        elif len(_WORD.findall(text)) < 2 or text[0] in "{[<":
            rejected.append(line.strip())
        elif _claim_key(text) in claims:
            duplicates += 1
        elif len(claims) >= max_claims:
            truncated += 1
        else:
            claims[_claim_key(text)] = text
    return ClaimSplit(reply, tuple(claims.values()), tuple(rejected), duplicates, truncated,
                      said_none and not claims)


def split_claims(llm: LLM, answer: str, *, question: str | None = None, max_claims: int = MAX_CLAIMS,
                 max_tokens: int = 256) -> ClaimSplit:
    """Ask ``llm`` to split ``answer`` into atomic claims and parse its reply. An empty answer gives
    no claims without an LLM call. LLM failures propagate as :class:`~simgrag.errors.LLMError`."""
    if not answer.strip():
        return ClaimSplit("", ())
    t0 = time.perf_counter()
    response = call_llm(llm, claim_messages(answer, question), task="split claims", max_tokens=max_tokens)
    split = parse_claims(response.text, max_claims=max_claims)
    if split.unparseable:
        logger.warning("no claims in the splitting reply %r", response.text[:200])
    return ClaimSplit(split.reply, split.claims, split.rejected, split.duplicates, split.truncated,
                      split.said_none, response.prompt_tokens, response.completion_tokens,
                      response.latency_s or time.perf_counter() - t0)


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim's check: the label, the checker's reply and reason, the pattern it searched with and
    the best evidence subgraph's triples (when the checker reports them); ``error`` when it failed."""

    claim: str
    label: str
    reason: str = ""
    reply: str = ""
    pattern: tuple[tuple[str, str, str], ...] = ()
    evidence: tuple[tuple[str, str, str], ...] = ()
    error: str | None = None
    latency_s: float = 0.0

    @property
    def supported(self) -> bool:
        return self.label == "Supported"

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "label": self.label, "supported": self.supported, "reason": self.reason,
                "reply": self.reply, "pattern": [list(t) for t in self.pattern],
                "evidence": [list(t) for t in self.evidence], "error": self.error, "latency_s": self.latency_s}


def _triples(items: Iterable[Any]) -> tuple[tuple[str, str, str], ...]:
    return tuple((str(t[0]), str(t[1]), str(t[2])) if isinstance(t, (tuple, list)) else t.as_tuple() for t in items)


def _as_claim_verdict(claim: str, result: VerifyResult, latency: float) -> ClaimVerdict:
    """A :class:`ClaimVerdict` from ``SimGRAG.verify``'s result: the evidence is the best subgraph, or
    the first triples of a context without subgraphs."""
    verdict = result.verdict
    pattern_triples = _triples(result.pattern.pattern.triples()) if result.pattern is not None else ()
    if result.evidence is not None and result.evidence.evidence:
        evidence = _triples(min(result.evidence.evidence, key=lambda ev: ev.gsd).triples())
    else:
        evidence = _triples(result.context.triples[:5])
    return ClaimVerdict(claim, str(verdict.label), verdict.reason, verdict.text, pattern_triples, evidence, None,
                        latency)


def check_claims(claims: Sequence[str], verify: Callable[[str], VerifyResult],
                 memo: dict[str, ClaimVerdict] | None = None) -> tuple[ClaimVerdict, ...]:
    """Check each claim with ``verify`` (e.g. ``engine.verify``). A claim whose check raises a
    :class:`~simgrag.errors.SimGRAGError` gets "Not enough evidence" with the error recorded.
    ``memo``: verdicts by claim, shared across answers (checks are deterministic at temperature 0)."""
    out = []
    for claim in claims:
        key = _claim_key(claim)
        if memo is not None and key in memo:
            out.append(memo[key])
            continue
        t0 = time.perf_counter()
        try:
            checked = _as_claim_verdict(claim, verify(claim), time.perf_counter() - t0)
        except SimGRAGError as exc:
            logger.warning("checking %r failed: %s", claim, str(exc).splitlines()[0] if str(exc) else exc)
            checked = ClaimVerdict(claim, "Not enough evidence", "the check failed",
                                   error=f"{type(exc).__name__}: {exc}", latency_s=time.perf_counter() - t0)
        if memo is not None and checked.error is None:
            memo[key] = checked
        out.append(checked)
    return tuple(out)


@dataclass(frozen=True)
class FactScore:
    """An answer's claims and their verdicts; ``score`` is the supported fraction, ``None`` without claims."""

    answer: str
    split: ClaimSplit
    verdicts: tuple[ClaimVerdict, ...] = ()

    @property
    def supported(self) -> int:
        return sum(v.supported for v in self.verdicts)

    @property
    def score(self) -> float | None:
        return self.supported / len(self.verdicts) if self.verdicts else None

    def to_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "score": self.score, "supported": self.supported,
                "claims": len(self.verdicts), "split": self.split.to_dict(),
                "verdicts": [v.to_dict() for v in self.verdicts]}


def factscore(llm: LLM, answer: str, verify: Callable[[str], VerifyResult], *, question: str | None = None,
              max_claims: int = MAX_CLAIMS, memo: dict[str, ClaimVerdict] | None = None) -> FactScore:
    """Split ``answer`` into claims with ``llm`` and check each with ``verify`` (see the module docstring)."""
    split = split_claims(llm, answer, question=question, max_claims=max_claims)
    return FactScore(answer, split, check_claims(split.claims, verify, memo))


def summarize_scores(scores: Iterable[float | None]) -> dict[str, Any]:
    """``factscore``: the mean over answers with claims (NaN when none has any); ``no_claims``: the
    answers without claims, counted apart."""
    values = list(scores)
    scored = [float(s) for s in values if s is not None]
    return {"answers": len(values), "scored": len(scored), "no_claims": len(values) - len(scored),
            "factscore": m.mean(scored)}
