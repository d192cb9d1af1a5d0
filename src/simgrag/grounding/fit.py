"""What the pattern stage does on one KG, fitted on that KG's own questions and stored with its index.

The grounding's edits were each read off the misses of a few KGs; on another KG an edit can drop a hop the
question asked for (a genealogy KG asked by synonyms lost 12.5 points to the stage as a whole). So what runs
is decided per KG, on its own validation questions (never shots), with its index's embedder
(:func:`simgrag.eval.fit_grounding.fit_grounding`):

- ``enabled``: the stage at all — off when the LLM's own patterns answer the validation questions at least
  as well (*no harm*);
- ``disabled``: the edit families (:mod:`~simgrag.grounding.registry`, with ``analogy`` and
  ``revision``) that did not raise validation accuracy on this KG;
- ``channel``: the LLM choosing between its pattern and its readings (one hop shorter, or a name the question
  gives put in) by the likelihood of the question (:mod:`~simgrag.grounding.channel`), stage on or off — on
  only where it raised validation accuracy (absent in fits made before it existed: off), with
  ``channel_margin``: how much likelier the question must be under a reading (nats), fitted on the same
  questions, and ``channel_readings``: the kinds of reading the fit offered (a fit made before analogies were
  readings says so by lacking the key: it runs with the two it was fitted with); a longer reading's score always adds
  the LLM's own likelihood of writing it (fits made before that say so in ``channel_direct``, read and ignored);
- ``named_margin``: where the channel is off, its *default* readings
  (:data:`~simgrag.grounding.channel.DEFAULT_READINGS`) still run — a name the question gives put in (a pattern
  that leaves out an entity the question names, as the KG spells it, cannot be what the question asks), a hop the
  LLM copied taken out — at this margin: 0, the model's own preference, unless they broke validation
  questions, then above those changes' gaps; ``None``: off, where a question group lost to them (the key keeps
  its first name: the named readings were the first default ones). Unlike the other switches this one is on
  unless the KG shows harm: on the KGs measured (BENCHMARKS.md "Named readings by default") they never broke a
  question and fixed 16 of the 100 two-hop WorldCup2014 questions with learned examples and 2 of the 40 3-hop
  genealogy ones, which no validation set of learned questions shows;
- ``variant``: whether those default readings include the *variant* (the pattern the LLM writes with more examples
  shown; :func:`~simgrag.grounding.channel.variant_readings`; one more LLM call a question) — off unless a fit
  asked to try it (``simgrag grounding fit --llm-variant``) found that the validation questions it changed fixed
  more than they broke, beyond chance. Opt-in, and a switch of its own: on WorldCup2014's learned index it fixed 13
  test questions and broke none, on the company KG it broke 4 and fixed none (BENCHMARKS.md "Variant readings"),
  and its harm must not take the other default readings with it;
- ``kind_prior``: whether the search gives a typed unknown node (``UNKNOWN person 1``) the kind the examples' patterns
  give it (:mod:`simgrag.match.kinds`): on unless the KG's validation questions lose a question group to it, as the
  LLM's own patterns answer them with and without it (absent in fits made before it: on, as on an unfitted KG).

The fit lives in the index's manifest under ``grounding`` (:func:`store_fit`, atomic), is checked when the
index opens (:func:`check_fit`), shown by ``simgrag check`` and used by ``ask``/``serve``/``bench`` unless
overridden (``--grounding`` runs every family, ``--no-grounding`` none). An index without a fit runs every
family but those that cost an LLM call and must first be shown to help (``llm_choice``): what the stage did
before fits existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError
from simgrag.grounding.channel import DEFAULT_READINGS, KNOWN_READINGS, MARGIN, READINGS, VARIANT
from simgrag.grounding.registry import family_names
from simgrag.index.attach import section_problem, store_section

__all__ = ["FIRST_READINGS", "FIT_FORMAT", "MANIFEST_KEY", "UNFITTED", "GroundingFit", "check_fit", "lost_groups",
           "read_fit", "store_fit"]

#: the manifest section that holds the fit
MANIFEST_KEY = "grounding"
#: what runs on an index without a fit, as ``simgrag check``, ``grounding show`` and ``bench`` say it
UNFITTED = "not fitted (every edit family but llm_choice runs)"
FIT_FORMAT = 1
#: the kinds of reading a fit without ``channel_readings`` was made with
FIRST_READINGS = ("shorter", "named")


@dataclass(frozen=True)
class GroundingFit:
    """The pattern stage's switches for one KG (module docstring); ``info``: what it was fitted on and the
    validation figures behind each switch."""

    enabled: bool = True
    disabled: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict, compare=False)
    channel: bool = False
    channel_margin: float = 0.0
    channel_readings: tuple[str, ...] = READINGS
    named_margin: float | None = MARGIN
    variant: bool = False
    kind_prior: bool = True

    @property
    def default_readings(self) -> tuple[str, ...]:
        """The default readings this fit runs where the channel is off: :data:`~simgrag.grounding.channel.
        DEFAULT_READINGS`, and the variant where the fit turned it on."""
        return (*DEFAULT_READINGS, VARIANT) if self.variant else DEFAULT_READINGS

    def channel_setting(self, scores: bool = True) -> tuple[float, tuple[str, ...]] | None:
        """The channel choice this fit runs: (margin, kinds of reading) — the fitted channel, else the default
        readings alone (given an LLM that ``scores`` text), else ``None``."""
        if self.channel:
            return self.channel_margin, self.channel_readings
        if self.named_margin is not None and scores:
            return self.named_margin, self.default_readings
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FIT_FORMAT, "enabled": self.enabled, "disabled": list(self.disabled),
                "channel": self.channel, "channel_margin": self.channel_margin,
                "channel_readings": list(self.channel_readings), "named_margin": self.named_margin,
                "variant": self.variant, "kind_prior": self.kind_prior, "info": self.info}

    @classmethod
    def from_dict(cls, data: Any, where: str = "grounding fit") -> GroundingFit:
        """Read a fit back; a malformed one is a :class:`ConfigError` naming what is wrong."""
        problem = _problem(data)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}; fit it again with `simgrag grounding fit`")
        return cls(bool(data["enabled"]), tuple(data.get("disabled", ())), dict(data.get("info") or {}),
                   bool(data.get("channel", False)), float(data.get("channel_margin", 0.0)),
                   tuple(data.get("channel_readings", FIRST_READINGS)),
                   None if data.get("named_margin", MARGIN) is None else float(data.get("named_margin", MARGIN)),
                   bool(data.get("variant", False)),  # a fit made before variant readings never checked them
                   bool(data.get("kind_prior", True)))  # nor the kind prior: on, as on an unfitted KG

    def why_off(self) -> str:
        """Why a fitted stage is off: the LLM's own patterns answered as many validation questions, or the stage
        that answered more lost a question group, or its gain was not beyond chance (by learnt sample). ``info`` is
        free-form (a hand-edited manifest): what does not read as numbers gives the first reason."""
        same = "the LLM's own patterns did at least as well on this KG's validation questions"
        try:
            return self._why_off() or same
        except (TypeError, ValueError, AttributeError):
            return same

    def _why_off(self) -> str | None:
        hits = self.info.get("hits") or {}
        floor = hits.get("no_grounding")
        better = [k for k, v in hits.items() if k != "no_grounding" and floor is not None and v > floor]
        if not better:
            return None
        best = max(better, key=lambda k: hits[k])  # the first of equals
        said = f"{best} answered {hits[best]} of the validation questions against the LLM's own patterns' {floor}"
        groups = self.info.get("group_hits") or {}
        lost = lost_groups(groups.get(best) or {}, groups.get("no_grounding") or {})
        if lost:
            return f"{said}, but fewer of {', '.join(lost)}"
        gain = (self.info.get("versus_no_grounding") or {}).get(best)
        if gain is None:
            return f"{said}, not enough to keep it"
        fixed, broke = gain
        return f"{said}, but {int(fixed)} gained against {int(broke)} lost is not beyond chance (sign test)"

    def describe(self) -> str:
        """One line for ``simgrag check`` and logs."""
        unfitted = self.info.get("unfitted")
        if not self.enabled and unfitted:
            head = f"off (not fitted: {unfitted}; the LLM's own patterns until `simgrag grounding fit`)"
        elif not self.enabled:
            head = f"off ({self.why_off()})"
        elif self.disabled:
            head = f"on, without {', '.join(self.disabled)}"
        else:
            head = "on, every family"
        hits = self.info.get("hits") or {}
        shown = ", ".join(f"{k} {v}" for k, v in hits.items()) if isinstance(hits, Mapping) else str(hits)
        if self.channel:
            head += (f"; the channel choice on (margin {self.channel_margin:.2f}; readings "
                     f"{', '.join(self.channel_readings)})")
        elif self.named_margin is not None:
            head += f"; default readings on ({', '.join(self.default_readings)}; margin {self.named_margin:.2f})"
        else:
            head += "; default readings off"
        if not self.kind_prior:
            head += "; kind prior off"
        n, samples = self.info.get("questions"), self.info.get("samples")
        of = f" ({samples} learnt samples, each counted once)" if samples is not None else ""
        return head + (f" — validation {n} questions{of}: {shown}" if n is not None else "")


def lost_groups(candidate: Mapping[str, int], floor: Mapping[str, int]) -> list[str]:
    """The question groups (hop count, shape) in which ``candidate`` hits fewer validation questions than ``floor``
    (each a group → hits mapping), sorted: a stage losing any is not eligible (*no harm* per group)."""
    return sorted(group for group, n in floor.items() if candidate.get(group, 0) < n)


def _problem(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return "not an object"
    if data.get("format_version", FIT_FORMAT) != FIT_FORMAT:
        return f"format {data.get('format_version')!r}, expected {FIT_FORMAT}"
    unknown = sorted(set(data) - {"format_version", "enabled", "disabled", "channel", "channel_margin",
                                  "channel_readings", "named_margin", "channel_direct", "variant", "kind_prior",
                                  "info"})
    if unknown:
        return f"unknown keys {unknown}"
    if not isinstance(data.get("enabled"), bool):
        return "'enabled' is missing or not true/false"
    if not isinstance(data.get("channel", False), bool):
        return "'channel' is not true/false"
    if not isinstance(data.get("channel_direct", False), bool):
        return "'channel_direct' is not true/false"
    if not isinstance(data.get("variant", False), bool):
        return "'variant' is not true/false"
    if not isinstance(data.get("kind_prior", True), bool):
        return "'kind_prior' is not true/false"
    margin = data.get("channel_margin", 0.0)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < float("inf"):
        return "'channel_margin' is not a number ≥ 0"
    named = data.get("named_margin", MARGIN)
    if named is not None and (isinstance(named, bool) or not isinstance(named, (int, float))
                              or not 0 <= named < float("inf")):
        return "'named_margin' is not a number ≥ 0 or null"
    readings = data.get("channel_readings", list(FIRST_READINGS))
    if not isinstance(readings, list) or not all(isinstance(x, str) and x in KNOWN_READINGS for x in readings):
        return f"'channel_readings' is not a list of kinds of reading ({', '.join(KNOWN_READINGS)})"
    disabled = data.get("disabled", [])
    if not isinstance(disabled, list) or not all(isinstance(x, str) for x in disabled):
        return "'disabled' is not a list of family names"
    strange = sorted(set(disabled) - set(family_names()))
    if strange:
        return f"'disabled' names unknown families {strange} (known: {', '.join(family_names())})"
    if not isinstance(data.get("info", {}), Mapping):
        return "'info' is not an object"
    return None


def check_fit(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with the manifest's ``grounding`` section (``None``: nothing, or no section)."""
    return section_problem(manifest, MANIFEST_KEY, _problem)


def read_fit(manifest: Mapping[str, Any]) -> GroundingFit | None:
    """The fit recorded in an index's manifest, ``None`` when it has none."""
    if MANIFEST_KEY not in manifest:
        return None
    return GroundingFit.from_dict(manifest[MANIFEST_KEY], f"manifest {MANIFEST_KEY!r}")


def store_fit(root: str | Path, fit: GroundingFit | None) -> None:
    """Record ``fit`` in the index directory ``root``'s manifest (``None`` removes it), atomically."""
    store_section(root, MANIFEST_KEY, None if fit is None else fit.to_dict())
