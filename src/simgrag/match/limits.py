"""Bounds on every search: checked settings, a default deadline, and no search without an anchor.

- :data:`DEFAULT_DEADLINE_S`: the graph search of every entry point (Python facade, CLI, HTTP) stops
  after this many seconds unless told otherwise, and returns its best matches so far with
  ``complete=False`` and the lower bound of everything it did not explore. ``deadline_s=None`` (or
  ``inf``) asks for no deadline.
- :func:`check_settings`: ``k``, ``k_n``, ``k_r``, ``k_t`` (and ``max_steps``, when set) are integers in
  range (``k=2.5``, ``1e11``, ``NaN`` or ``True`` are refused with a :class:`~simgrag.errors.ConfigError`
  naming the value, not turned into a ``TypeError`` or ``MemoryError`` deep inside numpy).
- a part of a pattern with no named and no typed node is refused before any search
  (:func:`~simgrag.pattern.validate.validate_pattern`); a part whose typed unknowns still match every
  entity (the KG has no entity types, or ``k_t`` is not set) is searched with at most
  :data:`UNANCHORED_MAX_STEPS` steps (:func:`unanchored_parts` finds them): without a node narrower than
  "any entity" the search would enumerate the KG's paths, so it is capped and says so
  (``complete=False``) when the cap stops it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal

from simgrag.errors import ConfigError
from simgrag.match.candidates import CandidateTable
from simgrag.pattern.graph import Pattern

__all__ = [
    "DEFAULT_DEADLINE_S",
    "MAX_K",
    "MAX_K_CANDIDATES",
    "ORIENTATIONS",
    "UNANCHORED_MAX_STEPS",
    "Orientation",
    "check_settings",
    "deadline_of",
    "unanchored_parts",
]

DEFAULT_DEADLINE_S = 10.0
UNANCHORED_MAX_STEPS = 100_000  # ~0.2 s of search on a hub
MAX_K = 10_000
MAX_K_CANDIDATES = 10_000_000
MAX_STEPS = 10**15


def _count(name: str, value: Any, upper: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if not 1 <= int(value) <= upper:
        raise ConfigError(f"{name} must be between 1 and {upper:,}, got {value!r}")


#: how an answer set treats equal matches that turn pattern edges round (:mod:`simgrag.match.answers`)
Orientation = Literal["follow", "prefer"]
ORIENTATIONS: tuple[Orientation, ...] = ("follow", "prefer")


def check_settings(settings: Any) -> None:
    """Refuse retrieval settings no search can honour (see the module docstring)."""
    _count("k", settings.k, MAX_K)
    _count("k_n", settings.k_n, MAX_K_CANDIDATES)
    _count("k_r", settings.k_r, MAX_K_CANDIDATES)
    _count("k_t", settings.k_t, MAX_K_CANDIDATES, optional=True)
    _count("max_steps", settings.max_steps, MAX_STEPS, optional=True)
    if settings.algorithm not in ("optimized", "naive"):
        raise ConfigError(f"algorithm must be 'optimized' or 'naive', got {settings.algorithm!r}")
    if settings.matching not in ("injective", "typed", "homomorphic"):
        raise ConfigError(f"matching must be 'injective', 'typed' or 'homomorphic', got {settings.matching!r}")
    deadline_of(settings.deadline_s)
    _penalty("kind_penalty", getattr(settings, "kind_penalty", None))
    orientation = getattr(settings, "orientation", "follow")
    if orientation not in ORIENTATIONS:
        raise ConfigError(f"orientation must be {' or '.join(map(repr, ORIENTATIONS))}, got {orientation!r}")


def _penalty(name: str, value: Any) -> None:
    """A distance added to a match: ``None`` (none), or a positive number (``inf``: leave the match out)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)) or float(value) <= 0:
        raise ConfigError(f"{name} must be a positive distance (inf: leave such matches out) or None, got {value!r}")


def deadline_of(value: Any) -> float | None:
    """A deadline in seconds as the search takes it: ``None`` for none (``None`` or ``inf``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise ConfigError(f"deadline_s must be a number of seconds or None, got {value!r}")
    if float(value) <= 0:
        raise ConfigError(f"deadline_s must be positive (None for no deadline), got {value!r}")
    return None if math.isinf(float(value)) else float(value)


def unanchored_parts(pattern: Pattern, table: CandidateTable) -> list[str]:
    """The connected parts of ``pattern`` in which every node may be any entity, as text."""
    triples = pattern.triples()
    return ["[" + ", ".join(str(list(triples[e])) for e in edge_ids) + "]"
            for node_ids, edge_ids in pattern.components() if all(table.nodes[v].unanchored for v in node_ids)]
