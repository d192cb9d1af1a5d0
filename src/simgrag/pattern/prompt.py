"""Chat messages for question → pattern, fixed part first so llama.cpp's prefix cache reuses it.

Layout (SimGRAG Table 17, adapted for a small model)::

    system     rules + the KG's relation names + the examples file's instructions   ┐ fixed: identical
    user/asst  n_static_shots example question → JSON pairs                          ┘ for every question
    user/asst  n_dynamic_shots examples most similar to the question                 ┐ variable
    user       the question                                                          ┘

Dynamic shots are the examples (after the static ones) with the highest token Jaccard similarity to the
question, computed on *template words* only: words that occur in the examples' questions once their
entities are removed. That masks the question's entity without knowing it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simgrag.llm.base import ChatMessage
from simgrag.pattern.examples import Example, ExampleSet
from simgrag.pattern.validate import MAX_TRIPLES

__all__ = ["PromptBuilder", "pattern_json_schema", "question_tokens"]

_WORD = re.compile(r"[a-z0-9]+")
_BRACKETED = re.compile(r"\[[^\]]*\]")

_RULES = """\
Turn the question into a knowledge-graph pattern: the triples [head, relation, tail] that the answer \
must satisfy.
Rules:
1. Copy the entity named in the question exactly as written, as a node.
2. Every other node is unknown: write "UNKNOWN <type> <n>", e.g. "UNKNOWN movie 1", "UNKNOWN director 1".
3. One triple per relation the question mentions, chained through shared nodes, ending at the node \
asked for. Add no other triples.
4. Answer with JSON only: {"triples": [["head", "relation", "tail"], ...]}"""

_DIVIDED_RULE = (
    '4. Answer with JSON only: {"divided": ["one phrase per triple", ...], '
    '"triples": [["head", "relation", "tail"], ...]}')


def pattern_json_schema(*, with_divided: bool = False, max_triples: int = MAX_TRIPLES) -> dict[str, Any]:
    """JSON schema of the answer, for constrained decoding (``llm.complete(json_schema=…)``)."""
    triple = {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}
    props: dict[str, Any] = {}
    if with_divided:
        props["divided"] = {"type": "array", "items": {"type": "string"}}
    props["triples"] = {"type": "array", "items": triple, "minItems": 1, "maxItems": max_triples}
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def question_tokens(text: str) -> list[str]:
    """Lower-case word tokens; a ``[bracketed]`` entity is dropped."""
    return _WORD.findall(_BRACKETED.sub(" ", text.lower()))


def _masked_tokens(example: Example) -> tuple[str, ...]:
    """The example question's word tokens in order, its entities' words left out."""
    entity_words = {w for text in example.known_texts() for w in question_tokens(text)}
    return tuple(w for w in question_tokens(example.question) if w not in entity_words)


@dataclass(frozen=True)
class PromptBuilder:
    """Builds the messages for one question from an :class:`ExampleSet`."""

    examples: ExampleSet
    n_static_shots: int = 6
    n_dynamic_shots: int = 2
    with_divided: bool = False
    _masked: tuple[frozenset[str], ...] = field(init=False, repr=False, compare=False)
    _wordings: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    _vocab: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        wordings = tuple(_masked_tokens(e) for e in self.examples.examples)
        masked = tuple(frozenset(w) for w in wordings)
        object.__setattr__(self, "_wordings", wordings)
        object.__setattr__(self, "_masked", masked)
        object.__setattr__(self, "_vocab", frozenset().union(*masked))

    @property
    def static_examples(self) -> tuple[Example, ...]:
        return self.examples.examples[: self.n_static_shots]

    def system_text(self) -> str:
        rules = _RULES if not self.with_divided else _RULES.rsplit("\n", 1)[0] + "\n" + _DIVIDED_RULE
        parts = [rules]
        if self.examples.relations:
            parts.append("Relations of this knowledge graph (use these words): "
                         + "; ".join(self.examples.relations) + ".")
        if self.examples.instructions:
            parts.append(self.examples.instructions)
        return "\n".join(parts)

    def fixed_messages(self) -> list[ChatMessage]:
        """The part shared by every question (system + static shots); its last message is marked
        ``cache_after`` (a backend may keep the prompt state there for every later question)."""
        messages = [ChatMessage("system", self.system_text())]
        for example in self.static_examples:
            messages.extend(self._shot(example))
        messages[-1] = ChatMessage(messages[-1].role, messages[-1].content, cache_after=True)
        return messages

    def dynamic_examples(self, question: str, shot_scores: Sequence[float] | None = None) -> list[Example]:
        """The ``n_dynamic_shots`` non-static examples most similar to ``question`` (best last).

        ``shot_scores`` (one per example, in the examples' order) are added to the word similarity: e.g.
        how well each example's structure fits the question (:class:`~simgrag.grounding.shots.ShotRanker`)."""
        if self.n_dynamic_shots <= 0:
            return []
        ranked = self.ranked(question, shot_scores, start=self.n_static_shots)[: self.n_dynamic_shots]
        return [self.examples.examples[i] for i in reversed(ranked)]  # the most similar right before the question

    def ranked(self, question: str, shot_scores: Sequence[float] | None = None, *, start: int = 0) -> list[int]:
        """Indices of the examples from ``start`` on, most similar to ``question`` first (word similarity
        plus ``shot_scores``; ties by order)."""
        words = set(question_tokens(question)) & self._vocab
        scored: list[tuple[float, int]] = []
        for i in range(start, len(self.examples.examples)):
            other = self._masked[i]
            union = words | other
            extra = float(shot_scores[i]) if shot_scores is not None and i < len(shot_scores) else 0.0
            scored.append(((len(words & other) / len(union) if union else 0.0) + extra, i))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [i for _, i in scored]

    def worded_like(self, words: Iterable[str]) -> list[int]:
        """Indices of the examples worded exactly as ``words`` (a question's words outside its entity
        names, in order): the same words in the same order, the example's own entity names left out
        ("the movies directed by X were written by who" is not "the movies written by X were directed
        by who")."""
        wanted = tuple(words)
        return [i for i, wording in enumerate(self._wordings) if wording and wording == wanted]

    def messages(self, question: str, shot_scores: Sequence[float] | None = None) -> list[ChatMessage]:
        """All messages for ``question``: fixed part, dynamic shots, then the question."""
        messages = self.fixed_messages()
        for example in self.dynamic_examples(question, shot_scores):
            messages.extend(self._shot(example))
        messages.append(ChatMessage("user", " ".join(question.split())))
        return messages

    def repair_messages(self, question: str, bad_output: str, error: str,
                        shot_scores: Sequence[float] | None = None) -> list[ChatMessage]:
        """The first attempt's messages plus its output and the error, asking for a corrected answer."""
        messages = self.messages(question, shot_scores)
        messages.append(ChatMessage("assistant", bad_output))
        messages.append(ChatMessage(
            "user",
            f"That answer is not usable: {error}\nWrite the corrected JSON for the question "
            f"{' '.join(question.split())!r}, following the rules.",
        ))
        return messages

    def _shot(self, example: Example) -> Sequence[ChatMessage]:
        answer = _compact(example.output(with_divided=self.with_divided))
        return (ChatMessage("user", example.question), ChatMessage("assistant", answer))

    def schema(self) -> dict[str, Any]:
        return pattern_json_schema(with_divided=self.with_divided)

    def render_shot_answer(self, triples: Sequence[Sequence[str]]) -> str:
        """Compact JSON as the shots show it (useful for fakes and tests)."""
        return _compact({"triples": [list(t) for t in triples]})


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
