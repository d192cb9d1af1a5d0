"""Answer and context metrics for comparing retrievers (SubgraphRAG §4.2 and App. C). Pure functions.

Normalization (:func:`normalize_answer`, SubgraphRAG's, from SQuAD's evaluation): lower-case, drop
punctuation, drop the articles *a*, *an*, *the*, collapse whitespace. Two answers *match* when their
normalized forms are equal, or when the gold one occurs as whole words inside the predicted one
(``2014 (2014 World Series)`` matches ``2014``, ``Jim Cameron`` does not match ``James Cameron``).

Per question:

- :func:`hits_at_1`: the first predicted answer matches a gold answer.
- :func:`hit`: some gold answer occurs (normalized, as whole words) in the reply text: SubgraphRAG's
  *Hit*, which is what most KGQA papers report as "Hits@1" (their footnote 2).
- :func:`f1_score`: precision/recall/F1 of the predicted answers after a *greedy one-to-one
  matching*: each prediction, in order, takes the first still-unmatched gold answer it matches.
  Macro-F1 is its mean over questions (:func:`mean`).
- :func:`score_h_sample`: SubgraphRAG App. C's truth-grounding score, our reading of it:

  * the question's answers are in the KG: each predicted answer scores +1 if correct, −1 if not;
    no answer scores 0;
  * they are not: no answer scores +1; each predicted answer scores −1 if it names an entity of the
    retrieved context (grounded but wrong), −1.5 if not (hallucinated);
  * the sample's value is the total divided by the number of answers ``a_i`` (1 when there is none),
    so it lies in [−1.5, 1].

  :func:`score_h` averages the samples and min-max normalizes that range to [0, 100]:
  ``100 · (x + 1.5) / 2.5``. (App. C says "min-max normalization with min = 0 and max = 100"; mapping
  the score's own range onto 0–100 is the reading that reproduces the paper's values: a method with
  ~75 % correct answers and few refusals gets ≈ 80, as SubgraphRAG's 81.35 on WebQSP.)
- :func:`answer_recall`: the fraction of gold answers among the retrieved context's entities
  (:meth:`~simgrag.retrievers.base.RetrievedContext.entities`), normalized.
- :func:`context_size`: the context's triples and tokens. Tokens are those of the triples written as
  the reader writes them, ``(head, relation, tail)`` one per line, counted with ``count_tokens``
  (e.g. the LLM's tokenizer) or estimated by :func:`simgrag.answer.reader.approx_tokens`
  (characters / 3.5).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Collection, Iterable, Sequence

from simgrag.answer.reader import approx_tokens
from simgrag.answer.verbalize import format_triple
from simgrag.retrievers.base import RetrievedContext

__all__ = [
    "answer_recall",
    "answers_match",
    "context_size",
    "f1_score",
    "hit",
    "hits_at_1",
    "mean",
    "normalize_answer",
    "score_h",
    "score_h_sample",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans(dict.fromkeys(string.punctuation, " "))
SCORE_H_MIN, SCORE_H_MAX = -1.5, 1.0


def normalize_answer(text: str) -> str:
    """Lower-case, punctuation and articles removed, whitespace collapsed."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _contains(text: str, part: str) -> bool:
    """``part`` occurs in ``text`` as whole words (both already normalized)."""
    return bool(part) and f" {part} " in f" {text} "


def answers_match(predicted: str, gold: str) -> bool:
    """Equal after normalization, or the gold answer's words occur inside the predicted answer."""
    p, g = normalize_answer(predicted), normalize_answer(gold)
    return bool(g) and (p == g or _contains(p, g))


def hits_at_1(predicted: Sequence[str], gold: Iterable[str]) -> float:
    """1.0 when the first predicted answer matches a gold answer."""
    return float(bool(predicted) and any(answers_match(predicted[0], g) for g in gold))


def hit(text: str, gold: Iterable[str]) -> float:
    """1.0 when some gold answer occurs in the reply ``text`` (normalized, whole words)."""
    said = normalize_answer(text)
    return float(any(_contains(said, normalize_answer(g)) for g in gold))


def _greedy_matches(predicted: Sequence[str], gold: Sequence[str]) -> int:
    unmatched = list(dict.fromkeys(gold))
    count = 0
    for answer in dict.fromkeys(predicted):
        found = next((g for g in unmatched if answers_match(answer, g)), None)
        if found is not None:
            unmatched.remove(found)
            count += 1
    return count


def f1_score(predicted: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    """(precision, recall, F1) after greedy one-to-one matching; all 0 when either side is empty."""
    preds, golds = list(dict.fromkeys(predicted)), list(dict.fromkeys(gold))
    if not preds or not golds:
        return 0.0, 0.0, 0.0
    matched = _greedy_matches(preds, golds)
    precision, recall = matched / len(preds), matched / len(golds)
    f1 = 0.0 if matched == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def score_h_sample(predicted: Sequence[str], gold: Sequence[str], *, answerable: bool,
                   context_entities: Collection[str] = ()) -> float:
    """One sample's truth-grounding value in [−1.5, 1] (see the module docstring)."""
    preds = list(dict.fromkeys(predicted))
    if not preds:
        return 0.0 if answerable else 1.0
    if answerable:
        total = sum(1.0 if any(answers_match(p, g) for g in gold) else -1.0 for p in preds)
    else:
        grounded = {normalize_answer(e) for e in context_entities}
        total = sum(-1.0 if normalize_answer(p) in grounded else -1.5 for p in preds)
    return total / len(preds)


def score_h(samples: Iterable[float]) -> float:
    """Mean of :func:`score_h_sample` values, min-max normalized from [−1.5, 1] to [0, 100]."""
    values = list(samples)
    if not values:
        return float("nan")
    return 100.0 * (sum(values) / len(values) - SCORE_H_MIN) / (SCORE_H_MAX - SCORE_H_MIN)


def answer_recall(context_entities: Collection[str], gold: Sequence[str]) -> float:
    """Fraction of (distinct, normalized) gold answers among the context's entities; 0 without gold."""
    golds = {normalize_answer(g) for g in gold} - {""}
    if not golds:
        return 0.0
    have = {normalize_answer(e) for e in context_entities}
    return len(golds & have) / len(golds)


def context_size(context: RetrievedContext, count_tokens: Callable[[str], int] | None = None) -> dict[str, int]:
    """``{"triples": …, "tokens": …}`` of the context as the reader writes it."""
    text = "\n".join(format_triple(t) for t in context.triples)
    counter = count_tokens or approx_tokens
    return {"triples": len(context.triples), "tokens": counter(text) if text else 0}


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean ignoring NaN; NaN when nothing is left (Macro-F1 = mean of per-question F1)."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")
