"""Does the KG answer the question? Evidence features, calibrated thresholds, the abstention rule.

:func:`evidence_features` reads the best matched subgraph of a retrieval: the largest distance of a
*named* pattern node to the entity it is bound to when their names differ (``named``; 0 when every
name matches up to case, punctuation and articles), the largest distance
of a pattern relation to the KG relation matched (``relation``) and how much further that is than the
nearest KG relation to the phrase (``relation_excess``; 0 when every edge got its nearest relation),
the best GSD (``gsd``), the size of the answer set (``answers``) and how many of the pattern stage's
notes (``kg_repairs``) say that a named entity *has no edge* of the relation the question asked for
(``missing``): the KG judge then rebinds the relation to one the entity has, or leaves it unresolved —
on a KG that lacks the asked fact, the question was bent to what the KG holds, though the bent pattern
may match exactly; and how many triples of the pattern the question has no words for (``unworded``: the
judge's ``unsupported`` triples, carried by :attr:`~simgrag.pattern.generate.PatternResult.unworded`): a
1-hop question whose fact is gone comes back as a longer pattern the KG still holds — "who directed
Titanic" as the analogy "the directors of the films sharing actors with Titanic", two ``starred actors``
triples nobody asked for. (The judge's *stray* relations are not counted: a relation chosen by a type word,
"the actors of the director John Hindman", reads as stray though the pattern is right.)

A :class:`Calibration` holds one threshold per feature (``None``: not used) and the substitution
threshold: a named node bound further than ``substitution`` to an entity of another name is a
*substitution*, said out loud ("nearest match for 'Doom': Doomsday"). The rule (:meth:`Calibration.decide`)
abstains when any feature is above its threshold; the answer then says "not found in the KG" with the
nearest evidence. Thresholds are fitted on DEV questions (:mod:`simgrag.eval.calibrate`: answerable
questions against the same questions with their gold-chain triples removed from the KG).

Where a calibration comes from (:func:`resolve_calibration`): an explicit file or object; else
``calibration.json`` in the index directory; else the one fitted on the KG's own validation questions and
kept in the index manifest (``calibration``: :mod:`simgrag.eval.fit_abstention`); else the bundled one
fitted for the index's embedder on MetaQA DEV (``simgrag/data/calibration/``) — **only for a KG whose
relations are all among those it was fitted on** (``info["relations"]``: MetaQA's movie KB and cuts of it);
else none (no abstention,
substitutions still said at distance > 0). Thresholds fitted on one KG's distances do not travel: on a
genealogy KG and on WorldCup2014 the MetaQA thresholds answered 22–60 % of answerable questions "not found"
(shared/measurements/held-out-2026-12-01.md).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError
from simgrag.match.answers import Substitution, names_match, substitutions
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern

__all__ = ["COUNT_FEATURES", "DETAILS", "FEATURES", "MANIFEST_KEY", "Calibration", "EvidenceFeatures",
           "bundled_calibration", "evidence_features", "fitted_for", "load_calibration", "missing_edges",
           "resolve_calibration", "save_calibration", "split_details"]

logger = logging.getLogger(__name__)

FEATURES = ("named", "relation", "relation_excess", "gsd", "answers", "missing", "unworded")
#: the features that count things (integer thresholds); the others are distances
COUNT_FEATURES = ("answers", "missing", "unworded")
#: a pattern-stage note saying a named entity lacks the asked relation ("'Heat' has no 'directed by' edge")
_MISSING_EDGE = re.compile(r"\bhas no (['\"]).+?\1 edge\b")
#: … that the judge bridged by a hop the question words or the examples' (else the KG's) types take (bridges.py)
_BRIDGED = re.compile(r"\bedge in the KG, its (['\"]).+?\1 neighbours do \((the question words|the examples'|the KG's)")
CALIBRATION_FILE = "calibration.json"
#: the index manifest's section for a calibration fitted on that KG (:mod:`simgrag.eval.fit_abstention`)
MANIFEST_KEY = "calibration"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class EvidenceFeatures:
    """What the best match says about how well the KG fits the pattern (module docstring)."""

    named: float
    relation: float
    relation_excess: float
    gsd: float
    answers: int
    missing: int = 0
    unworded: int = 0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


#: what each feature above its threshold means, in plain words (the numbers go after :data:`DETAILS`)
PLAIN: dict[str, str] = {
    "named": "the KG has no entity close enough to a name in the question",
    "relation": "the KG has no relation close enough to one the question asks about",
    "relation_excess": "the match follows a KG relation much further from the question's words than the nearest one",
    "gsd": "even the best match in the KG is far from what the question asks",
    "answers": "the match gives too many answers to be the one asked for",
    "missing": "a named entity has no edge of the relation the question asks about",
    "unworded": "the pattern needed triples the question has no words for",
}
#: where a reason's numbers begin: the plain sentence first, the details after it (``split_details``)
DETAILS = "\ndetails: "


def split_details(reason: str) -> tuple[str, str | None]:
    """A reason's plain sentence and its details (the numbers behind it), ``None`` without any."""
    plain, sep, details = reason.partition(DETAILS)
    return plain, details if sep else None


#: the note of an LLM revision, which describes the pattern the LLM wrote first (judge.Judgement.describe)
_REVISED = "revised by the LLM after:"
_MISSING_EDGE_AT = re.compile(r"(['\"])(?P<entity>.+?)\1 has no (['\"])(?P<relation>.+?)\3 edge\b")
#: "the question has no words for the triple ['UNKNOWN country 1', 'has capital', 'Mandalay']"
_UNWORDED_TRIPLE = re.compile(r"no words for the triple \[(['\"])(.*?)\1, (['\"])(.*?)\3, (['\"])(.*?)\5\]")


def _relation_key(text: str) -> str:
    return " ".join(text.replace("_", " ").lower().split())


def _unworded_misses(note: str) -> int:
    """Missing edges an LLM revision note gives for triples the question had no words for: the first
    pattern's own inventions ("which currency is used in Mandalay?" first written with ``[country 1, has
    capital, Mandalay]``), not a fact the question asked for and the KG lacks."""
    if not note.startswith(_REVISED):
        return 0
    unworded = {(_relation_key(m.group(4)), end) for m in _UNWORDED_TRIPLE.finditer(note)
                for end in (m.group(2), m.group(6))}
    return sum(1 for m in _MISSING_EDGE_AT.finditer(note)
               if (_relation_key(m.group("relation")), m.group("entity")) in unworded)


def missing_edges(notes: Sequence[str]) -> int:
    """How many pattern-stage notes say a named entity has no edge of the asked relation — not counting
    the missing hops the judge bridged through a relation the question words, or that the types take (the
    examples', else the KG's): "'Guadalajara' has no 'capital' edge in the KG, its 'located in' neighbours
    do (the question words 'located in')" is the capital of the country Guadalajara is in, which the KG
    holds. Any other bridge is counted: on a KG without the director of *A Sunday in the Country*, "which
    person directed A Sunday in the Country" bridged through its release year to other movies is a
    question bent to what the KG holds (the abstention bench: 1-hop abstention 57.5 % with such bridges
    counted, 47.5 % without). Nor does an LLM revision's note count a missing edge of a triple the
    question had no words for (:func:`_unworded_misses`)."""
    return sum(1 for note in notes if _MISSING_EDGE.search(note) and not _BRIDGED.search(note)
               and len(_MISSING_EDGE_AT.findall(note)) > _unworded_misses(note))


def evidence_features(pattern: Pattern, retrieval: Retrieval, repairs: Sequence[str] = (),
                      unworded: int = 0) -> EvidenceFeatures | None:
    """The features of ``retrieval``'s best subgraph (``repairs``: the pattern stage's ``kg_repairs``
    notes; ``unworded``: its :attr:`~simgrag.pattern.generate.PatternResult.unworded`); ``None`` when
    nothing matched."""
    if not retrieval.evidence:
        return None
    best = min(retrieval.evidence, key=lambda ev: (ev.gsd, ev.rank))
    known = {n.text for n in pattern.nodes if not n.unknown}
    named = max((b.distance for b in best.nodes
                 if b.pattern_node in known and not names_match(b.pattern_node, b.entity)), default=0.0)
    floors = retrieval.edge_floor or (0.0,) * len(best.edges)
    rel = [(e.distance, e.distance - floor) for e, p, floor in zip(best.edges, pattern.edges, floors, strict=True)
           if not p.unknown]
    answers = len(retrieval.answer_set) if retrieval.answer_set is not None else 0
    return EvidenceFeatures(float(named), float(max((d for d, _ in rel), default=0.0)),
                            float(max((x for _, x in rel), default=0.0)), float(best.gsd), answers,
                            missing_edges(repairs), unworded)


@dataclass(frozen=True)
class Calibration:
    """Thresholds of the abstention rule and of substitutions (module docstring); ``info``: how and on
    what they were fitted."""

    substitution: float = 0.0
    named: float | None = None
    relation: float | None = None
    relation_excess: float | None = None
    gsd: float | None = None
    answers: int | None = None
    missing: int | None = None
    unworded: int | None = None
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def decide(self, features: EvidenceFeatures | None) -> str | None:
        """Why the KG does not answer (abstain), or ``None`` when it does: a plain sentence, then the
        numbers after :data:`DETAILS` (:func:`split_details`)."""
        if features is None:
            return "no subgraph matched the pattern"
        for name in FEATURES:
            limit = getattr(self, name)
            value = getattr(features, name)
            if limit is not None and value > limit:
                return f"{PLAIN[name]}{DETAILS}{name} {value:.3g} is above the calibrated threshold {limit:.3g}"
        return None

    def substitutions(self, pattern: Pattern, retrieval: Retrieval) -> tuple[Substitution, ...]:
        """The named nodes of the best subgraph bound to an entity of another name."""
        if not retrieval.evidence:
            return ()
        best = min(retrieval.evidence, key=lambda ev: (ev.gsd, ev.rank))
        return substitutions(pattern, best.nodes, self.substitution, retrieval.node_floor)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "calibration") -> Calibration:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"format_version"})
        if unknown or data.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
            raise ConfigError(f"{where}: not a simgrag calibration (format {data.get('format_version')!r}, "
                              f"unknown keys {unknown}); fit one with `simgrag bench calibrate`.")
        try:
            values = {k: data[k] for k in known if k in data}
            for name in ("substitution", *FEATURES):
                if values.get(name) is not None:
                    values[name] = int(values[name]) if name in COUNT_FEATURES else float(values[name])
            return cls(**values)
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int(Infinity)
            raise ConfigError(f"{where}: bad threshold ({exc})") from exc


#: no abstention; a named node bound to an entity of another name is still said out loud
NO_ABSTENTION = Calibration(info={"source": "none"})


def load_calibration(path: str | Path) -> Calibration:
    """A calibration file written by :func:`save_calibration`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the calibration {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a calibration is a JSON object")
    found = Calibration.from_dict(data, str(path))
    return Calibration(**{**{f.name: getattr(found, f.name) for f in fields(found)},
                          "info": {**found.info, "path": str(path)}})


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(calibration.to_dict(), indent=2) + "\n", encoding="utf-8")
    return out


def _bundled_name(embedder: str) -> str:
    return embedder.replace("/", "__").replace(":", "_") + ".json"


def bundled_calibration(embedder: str) -> Calibration | None:
    """The calibration shipped for ``embedder`` (its manifest name), fitted on MetaQA DEV; ``None`` if none."""
    ref = resources.files("simgrag.data").joinpath("calibration").joinpath(_bundled_name(embedder))
    if not ref.is_file():
        return None
    with resources.as_file(ref) as path:
        return load_calibration(path)


def fitted_for(calibration: Calibration, relations: Collection[str] | None) -> bool:
    """Whether ``calibration`` was fitted on a KG with these relations: every one of ``relations`` is
    among the relations it records (``info["relations"]``). One that records none is taken as fitted for
    any KG (a file the user gave or fitted on this index); ``relations=None`` (unknown) likewise."""
    fitted = calibration.info.get("relations")
    if relations is None or not isinstance(fitted, list):
        return True
    return set(relations) <= {str(r) for r in fitted}


def resolve_calibration(spec: str | Path | Calibration | None, index_path: Path | None,
                        embedder: str | None, relations: Collection[str] | None = None,
                        manifest: Mapping[str, Any] | None = None) -> Calibration:
    """The calibration to use (module docstring): ``spec`` ``"auto"`` looks beside the index, then in its
    ``manifest`` (fitted on the KG's own validation questions: ``simgrag grounding fit``), then the bundled
    one for ``embedder`` when it was fitted on these ``relations`` (the index's KG relation names;
    :func:`fitted_for`); ``"off"`` / ``None`` turns abstention off; a path loads that file."""
    if isinstance(spec, Calibration):
        return spec
    if spec is None or spec == "off":
        return NO_ABSTENTION
    if spec != "auto":
        return load_calibration(spec)
    if index_path is not None and (index_path / CALIBRATION_FILE).is_file():
        return load_calibration(index_path / CALIBRATION_FILE)
    if manifest is not None and MANIFEST_KEY in manifest:
        if not isinstance(manifest[MANIFEST_KEY], dict):
            raise ConfigError(f"the index manifest's {MANIFEST_KEY!r} is not a calibration object; fit it again")
        return Calibration.from_dict(manifest[MANIFEST_KEY], f"manifest {MANIFEST_KEY!r}")
    bundled = bundled_calibration(embedder) if embedder else None
    if bundled is not None and fitted_for(bundled, relations):
        return bundled
    if bundled is not None:
        logger.info("the bundled calibration was fitted on %s, not on this KG's relations: abstention on evidence "
                    "is off (fit one on this KG: `simgrag grounding fit`)", bundled.info.get("fitted_on"))
        return NO_ABSTENTION
    logger.info("no calibration for this index (embedder %s): abstention on evidence is off", embedder)
    return NO_ABSTENTION
