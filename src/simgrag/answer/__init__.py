"""Retrieved subgraphs → answers and verdicts (SimGRAG §4.4): verbalization, prompts, extraction.

:func:`answer_question` answers a question (or abstains) and :func:`verify_claim` checks a claim;
:func:`verbalize_evidence` writes subgraphs as ``graph [i]: (h, r, t), …`` lines.
"""

from simgrag.answer.extract import extract_entities
from simgrag.answer.qa import NOT_FOUND, Answer, answer_candidates, answer_question, asked_node
from simgrag.answer.verbalize import verbalize_evidence
from simgrag.answer.verify import Verdict, parse_verdict, verify_claim

__all__ = [
    "NOT_FOUND",
    "Answer",
    "Verdict",
    "answer_candidates",
    "answer_question",
    "asked_node",
    "extract_entities",
    "parse_verdict",
    "verbalize_evidence",
    "verify_claim",
]
