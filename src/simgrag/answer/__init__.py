"""Any retriever's context → answers and verdicts (SimGRAG §4.4): the answerer, the prompts, extraction.

:class:`Answerer` reads a context with the right prompt and returns an :class:`Answer` (or a
:class:`Verdict`); :func:`answer_question` answers from matched subgraphs, :func:`read_context` from
another retriever's context, :func:`verify_context` checks a claim against any context;
:func:`verbalize_evidence` writes subgraphs as ``graph [i]: (h, r, t), …`` lines.
"""

from simgrag.answer.answerer import ANSWER_MODES, ANSWER_STYLES, Answerer
from simgrag.answer.extract import extract_entities
from simgrag.answer.qa import NOT_FOUND, Answer, answer_candidates, answer_question, asked_node
from simgrag.answer.reader import read_context
from simgrag.answer.verbalize import verbalize_evidence
from simgrag.answer.verify import Verdict, parse_verdict, verify_claim, verify_context

__all__ = [
    "ANSWER_MODES",
    "ANSWER_STYLES",
    "NOT_FOUND",
    "Answer",
    "Answerer",
    "Verdict",
    "answer_candidates",
    "answer_question",
    "asked_node",
    "extract_entities",
    "parse_verdict",
    "read_context",
    "verbalize_evidence",
    "verify_claim",
    "verify_context",
]
