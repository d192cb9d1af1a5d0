"""Question → pattern graph with an LLM (SimGRAG §4.1): prompt, parse, validate, one repair retry."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from simgrag._options import key_values
from simgrag.errors import ConfigError, PatternError, PatternParseError
from simgrag.llm.base import LLM, ChatMessage, LLMResponse, schema_by_default
from simgrag.pattern.copies import cut_runaway_chains, drop_repeated_pieces, drop_self_loops, merge_unknown_copies
from simgrag.pattern.examples import ExampleSet, builtin_examples
from simgrag.pattern.graph import Pattern
from simgrag.pattern.parse import ParsedOutput, parse_pattern_text
from simgrag.pattern.prompt import PromptBuilder
from simgrag.pattern.validate import MAX_TRIPLES, validate_triples

__all__ = [
    "DEFAULT_DYNAMIC_SHOTS", "DEFAULT_STATIC_SHOTS", "PatternGenerator", "PatternResult", "parse_pattern_options",
]

logger = logging.getLogger(__name__)

DEFAULT_STATIC_SHOTS = 6
DEFAULT_DYNAMIC_SHOTS = 2


@dataclass(frozen=True)
class PatternResult:
    """A validated pattern and how it was obtained."""

    pattern: Pattern
    raw_text: str
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    repaired: bool  # the text needed a parse repair, or a second LLM call was made
    divided: tuple[str, ...] | None = None
    kg_repairs: tuple[str, ...] = ()  # changes made afterwards with the KG's help (simgrag.grounding.repair)
    #: triples of the chosen pattern the question has no words for (the KG judge's ``unsupported``,
    #: :mod:`simgrag.grounding.judge`); 0 when no judge ran
    unworded: int = 0
    #: the grounding families that made the chosen pattern (edits by name, ``analogy``, ``revision``;
    #: :mod:`simgrag.grounding.registry`); empty for the LLM's own pattern
    families: tuple[str, ...] = ()
    #: how much likelier (nats) the question was under the reading the channel choice took
    #: (:mod:`simgrag.grounding.channel`); ``None`` when it took none
    channel_gap: float | None = None
    #: the kind of that reading (:data:`~simgrag.grounding.channel.KNOWN_READINGS`); ``None`` when it took none
    channel_reading: str | None = None


class PatternGenerator:
    """Turns questions into validated :class:`Pattern` graphs with one repair retry.

    ``examples`` is an :class:`ExampleSet` (see :func:`~simgrag.pattern.examples.load_examples`) or
    the name of a built-in one. With ``use_json_schema`` the LLM is asked for schema-constrained output
    (default: yes, except for the embedded llama.cpp model, where it costs ~40 % of decoding speed).
    The dynamic shots are the examples nearest the question by words; a pattern stage that knows the KG chooses
    them by structure too and tries the examples' own patterns first (its options: ``shot_selection`` and
    ``analogy`` of :class:`~simgrag.grounding.stage.GroundedPatterns`).
    """

    def __init__(
        self,
        llm: LLM,
        examples: ExampleSet | str = "metaqa",
        *,
        n_static_shots: int = DEFAULT_STATIC_SHOTS,
        n_dynamic_shots: int = DEFAULT_DYNAMIC_SHOTS,
        with_divided: bool = False,
        max_tokens: int = 200,
        use_json_schema: bool | None = None,
        require_connected: bool = False,
        max_triples: int = MAX_TRIPLES,
        max_attempts: int = 2,
    ) -> None:
        if isinstance(examples, str):
            examples = builtin_examples(examples)
        self.llm = llm
        self.prompt = PromptBuilder(examples, n_static_shots=n_static_shots,
                                    n_dynamic_shots=n_dynamic_shots, with_divided=with_divided)
        self.max_tokens = max_tokens
        self.use_json_schema = schema_by_default(llm) if use_json_schema is None else use_json_schema
        self.require_connected = require_connected
        self.max_triples = max_triples
        self.max_attempts = max(1, max_attempts)
        self._variants: dict[int, PromptBuilder] = {}  # n_dynamic_shots → the prompt of :meth:`variant`

    def generate(self, question: str, shot_scores: Sequence[float] | None = None) -> PatternResult:
        """The pattern for ``question``; raises :class:`PatternParseError` / :class:`PatternError`.
        ``shot_scores``: added to the dynamic shots' similarity (:meth:`PromptBuilder.dynamic_examples`)."""
        if not question or not question.strip():
            raise PatternError("The question is empty")
        return self._run(question, self.prompt.messages(question, shot_scores), shot_scores)

    def sample(self, question: str, seeds: Sequence[int], temperature: float) -> list[Pattern]:
        """Patterns the LLM samples for ``question`` at ``temperature``, one per seed (the prompt :meth:`generate`
        sends without shot scores; the LLM must sample by seed, :class:`~simgrag.llm.base.SamplesText`). A sample
        that does not read as a pattern is left out (logged): samples are alternatives, not the answer."""
        if not question or not question.strip():
            raise PatternError("The question is empty")
        replies = self.llm.sample(self.prompt.messages(question), seeds,  # type: ignore[attr-defined]
                                  temperature=temperature, max_tokens=self.max_tokens)
        out = []
        for reply in replies:
            try:
                out.append(self._read(reply.text)[1])
            except PatternError as exc:
                logger.info("a sampled pattern for %r does not read: %s", question, _first_line(exc))
        return out

    def variant(self, question: str, n_dynamic_shots: int) -> Pattern | None:
        """The pattern the LLM writes greedily for ``question`` under the same prompt with ``n_dynamic_shots``
        dynamic shots instead of its own number (chosen by words): a second opinion from more of the examples.
        ``None`` when the reply does not read as a pattern (logged) — a variant is an alternative, not the answer —
        or when the examples hold no more shots than the prompt already shows (the same prompt, the same reply)."""
        if not question or not question.strip():
            raise PatternError("The question is empty")
        prompt = self.prompt
        pool = len(prompt.examples.examples) - len(prompt.static_examples)
        if min(n_dynamic_shots, pool) <= min(prompt.n_dynamic_shots, pool):
            return None
        builder = self._variants.get(n_dynamic_shots)
        if builder is None:
            builder = self._variants[n_dynamic_shots] = replace(prompt, n_dynamic_shots=n_dynamic_shots)
        reply = self._call(builder.messages(question))
        try:
            return self._read(reply.text)[1]
        except PatternError as exc:
            logger.info("the variant pattern for %r does not read: %s", question, _first_line(exc))
            return None

    def revise(self, question: str, previous: str, reason: str,
               shot_scores: Sequence[float] | None = None) -> PatternResult:
        """A second pattern for ``question``, the LLM told what was wrong with its ``previous`` output
        (e.g. by the KG judge: "the triples are not connected"); raises like :meth:`generate`."""
        if not question or not question.strip():
            raise PatternError("The question is empty")
        return self._run(question, self.prompt.repair_messages(question, previous, reason, shot_scores), shot_scores)

    def _run(self, question: str, messages: list[ChatMessage],
             shot_scores: Sequence[float] | None = None) -> PatternResult:
        start = time.perf_counter()
        prompt_tokens = completion_tokens = 0
        error: PatternError | None = None
        for attempt in range(1, self.max_attempts + 1):
            response = self._call(messages)
            prompt_tokens += response.prompt_tokens
            completion_tokens += response.completion_tokens
            try:
                parsed, pattern = self._read(response.text)
            except PatternError as exc:
                error = exc
                logger.info("pattern attempt %d failed for %r: %s", attempt, question, _first_line(exc))
                messages = self.prompt.repair_messages(question, response.text, _first_line(exc), shot_scores)
                continue
            return PatternResult(
                pattern=pattern, raw_text=response.text, attempts=attempt,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - start, repaired=parsed.repaired or attempt > 1,
                divided=tuple(parsed.divided) if parsed.divided is not None else None,
            )
        if error is None:  # max_attempts >= 1, so a failed attempt set it; this guards the type only
            raise PatternError("no pattern attempt was made")
        raise _final_error(error, self.max_attempts, response.text)

    def _call(self, messages: list[ChatMessage]) -> LLMResponse:
        schema = self.prompt.schema() if self.use_json_schema else None
        response = self.llm.complete(messages, json_schema=schema, max_tokens=self.max_tokens,
                                     temperature=0.0)
        logger.debug("pattern LLM output: %s", response.text)
        return response

    def _read(self, text: str) -> tuple[ParsedOutput, Pattern]:
        parsed = parse_pattern_text(text)
        triples, _ = drop_self_loops(parsed.triples)  # [UNKNOWN country 2, capital, UNKNOWN country 2]
        triples, _ = merge_unknown_copies(triples)  # "UNKNOWN country 1" … "10", one by one
        triples, _ = cut_runaway_chains(triples)  # [X, borders, country 1], [country 1, borders, country 2], …
        triples, _ = drop_repeated_pieces(triples)  # [country 1, capital, city 1], [country 2, capital, city 2], …
        pattern = validate_triples(triples, require_connected=self.require_connected,
                                   max_triples=self.max_triples)
        return parsed, pattern


def _first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0]


def _final_error(error: PatternError, attempts: int, text: str) -> PatternError:
    note = f" (after {attempts} attempt{'s' if attempts > 1 else ''})"
    if isinstance(error, PatternParseError):
        return PatternParseError(_first_line(error) + note, error.text)
    shown = text if len(text) <= 500 else text[:500] + "…"
    return PatternError(f"{error}{note}\n  LLM output was: {shown!r}")


def parse_pattern_options(pairs: Sequence[str], stage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``["n_dynamic_shots=1", "shot_selection=words"]`` (the CLI's ``--pattern-option``) → keywords of
    :class:`PatternGenerator` — and of the pattern stage around it, whose options and defaults are ``stage``
    (:data:`simgrag.grounding.stage.STAGE_OPTIONS`) — each VALUE read as JSON when it parses (``1``, ``false``),
    else as text. Raises :class:`~simgrag.errors.ConfigError` naming a malformed pair or a key neither takes."""
    known = {name: param.default for name, param in inspect.signature(PatternGenerator.__init__).parameters.items()
             if param.kind is inspect.Parameter.KEYWORD_ONLY}
    known.update(stage or {})
    options: dict[str, Any] = {}
    for key, text in key_values(pairs, flag="--pattern-option", allowed=known, where="the pattern stage"):
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        default = known[key]
        if default is not None and type(value) is not type(default):  # bool is no int here, nor "2" an int
            raise ConfigError(f"--pattern-option {key} takes {type(default).__name__} values (default "
                              f"{json.dumps(default)}), got {text!r}")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ConfigError(f"--pattern-option {key} must not be negative, got {value}")
        options[key] = value
    return options

