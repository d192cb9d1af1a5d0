"""How one KG's questions are answered from their evidence, fitted on that KG's own validation questions.

The answer modes (:mod:`simgrag.answer.answerer`): ``"auto"`` answers straight from the bindings of the
pattern's asked-for node when the KG matches the pattern exactly, ``"llm"`` always lets the LLM read the
subgraphs (the paper). The shortcut is fast and lists every answer, but it trusts the pattern's *shape*:
when the small model writes one hop too many (WorldCup2014: "which club does X play for?" written as
club → country, copied from a 2-hop shot), the bindings of the last unknown answer the wrong question,
while the LLM reading the same subgraph ("X plays_in_club FC_Barcelona, FC_Barcelona is_in_country
Spain") answers the club. On another KG the shortcut is the better reader (a list answer in full). So the
mode is chosen per KG (:func:`simgrag.eval.fit_grounding.fit_answer_mode`) among ``"auto"``, ``"llm"`` and
``"check"`` (both, the LLM choosing where they disagree: :mod:`simgrag.answer.arbitrate`): another than
``"auto"`` only when it answers more validation questions first-hit and none of a group (hop count, shape)
fewer, else ``"auto"`` (the cheaper).

Stored in the index's manifest under ``answering`` (:func:`store_answer_mode`, atomic), checked when read,
shown by ``simgrag check``; an explicit ``answer_mode=`` (``--answer-mode``) overrides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError
from simgrag.index.attach import section_problem, store_section

__all__ = ["FITTED_MODES", "MANIFEST_KEY", "AnswerModeFit", "check_answer_mode", "read_answer_mode",
           "store_answer_mode"]

#: the manifest section that holds the fitted answer mode
MANIFEST_KEY = "answering"
#: the modes a fit chooses among (``auto`` first: a tie keeps the cheaper shortcut)
FITTED_MODES: tuple[str, ...] = ("auto", "llm", "check")


@dataclass(frozen=True)
class AnswerModeFit:
    """The fitted answer mode of one KG; ``info``: the validation hits of each mode and what they came from."""

    mode: str
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "info": self.info}

    def describe(self) -> str:
        hits = self.info.get("hits") or {}
        shown = ", ".join(f"{k} {v}" for k, v in hits.items())
        n = self.info.get("questions")
        why = {"llm": "the LLM reads the subgraphs",
               "check": "exact bindings checked by the LLM reading the subgraphs"}.get(
                   self.mode, "answers from exact bindings, else the LLM")
        return f"{self.mode} ({why})" + (f" — validation {n} questions: {shown}" if n is not None else "")


def _problem(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return "not an object"
    unknown = sorted(set(data) - {"mode", "info"})
    if unknown:
        return f"unknown keys {unknown}"
    if data.get("mode") not in FITTED_MODES:
        return f"'mode' is {data.get('mode')!r}, not one of {', '.join(FITTED_MODES)}"
    if not isinstance(data.get("info", {}), Mapping):
        return "'info' is not an object"
    return None


def check_answer_mode(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with the manifest's ``answering`` section (``None``: nothing, or no section)."""
    return section_problem(manifest, MANIFEST_KEY, _problem)


def read_answer_mode(manifest: Mapping[str, Any]) -> AnswerModeFit | None:
    """The answer mode fitted for an index's KG, ``None`` when none was; a malformed section is a
    :class:`ConfigError` saying how to mend it."""
    if MANIFEST_KEY not in manifest:
        return None
    data = manifest[MANIFEST_KEY]
    problem = _problem(data)
    if problem is not None:
        raise ConfigError(f"manifest {MANIFEST_KEY!r}: {problem}; fit it again with `simgrag grounding fit` "
                          "or remove it with `simgrag grounding clear`")
    return AnswerModeFit(str(data["mode"]), dict(data.get("info") or {}))


def store_answer_mode(root: str | Path, fit: AnswerModeFit | None) -> None:
    """Record ``fit`` in the index directory ``root``'s manifest (``None`` removes it), atomically."""
    store_section(root, MANIFEST_KEY, None if fit is None else fit.to_dict())
