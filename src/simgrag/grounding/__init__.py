"""The pattern stage with the KG in the loop (issue 14): the LLM writes a pattern, the question and the
KG judge it, small edits or one LLM revision fix what is wrong.

==================  ============================================================================
``question``        the question read without an LLM: entity mentions, relation phrases, focus word
``lexicon``         what the KG, its embedder and the examples say about words (names, relations, types)
``judge``           problems, unsupported triples, focus and KG fit of one candidate pattern
``edits``           candidate patterns derived by small shape edits; ``anchors``: the dropped entity
``stage``           :class:`GroundedPatterns`: generate → judge → edit → (revise) → choose
==================  ============================================================================
"""

from simgrag.grounding.judge import Candidate, Judgement, PatternJudge
from simgrag.grounding.lexicon import Lexicon
from simgrag.grounding.question import QuestionReading, read_question
from simgrag.grounding.stage import GroundedPatterns, GroundingReport, best_candidate, candidate_edits

__all__ = ["Candidate", "GroundedPatterns", "GroundingReport", "Judgement", "Lexicon", "PatternJudge",
           "QuestionReading", "best_candidate", "candidate_edits", "read_question"]
