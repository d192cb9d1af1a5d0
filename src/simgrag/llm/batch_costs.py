"""How long a prompt-lookup draft should be on this machine: batch costs measured once, remembered.

A lookup-decoding step (:mod:`simgrag.llm.lookup_decoding`) evaluates the pending token plus ``L``
drafted tokens in one batch; it pays when the drafted tokens accepted are worth more than what the batch
costs beyond a single-token step. What a batch costs depends on the CPU's matrix kernels (Qwen2.5-1.5B
Q4_K_M, 2 threads, ~650 tokens of context)::

    batch of n tokens                     n = 1    2       4       8       16      32
    AVX-512 + VNNI build (2026-11-22)         63 ms   -       109 ms  193 ms  225 ms  378 ms
    AVX2-only EPYC (2026-11-27)               57 ms   90 ms   161 ms  408 ms  491 ms  907 ms

So each step sends the draft length ``L`` with the most expected tokens per second: a drafted token is
accepted, given the ones before it were, with probability :data:`P_AGREED` while the two latest earlier
occurrences of the text agree on it and :data:`P_BEYOND` past that; ``L = 0`` (a plain step) when
nothing beats one token per single-step cost. Replayed on 60 recorded pattern calls with each machine's
costs (``benchmarks/draft_replay.py``, BENCHMARKS §10): AVX2 105 s of decoding against 134 s plain and
149 s with the former fill-up-to-cheap-sizes drafts; AVX-512 77 s, as with those drafts.

The costs are measured on the first load of a model on a machine (~1–3 s) and kept in a small JSON file
keyed by model, llama.cpp version, thread count and CPU, so later processes read them. Deleting the file
measures again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simgrag.fileio import write_bytes_atomic

__all__ = [
    "PROBE_SIZES",
    "P_AGREED",
    "P_BEYOND",
    "BatchCostFile",
    "BatchCosts",
    "cpu_identity",
    "measure_batch_costs",
]

logger = logging.getLogger(__name__)

#: batch sizes timed (costs between them are interpolated, beyond the largest extrapolated)
PROBE_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
#: chance a drafted token is accepted, given the ones before it were, where the two latest earlier
#: occurrences agree on it (69–89 % of the tokens of such drafts of 3–15 tokens were accepted in the replay,
#: as a 0.95 chance per token predicts) …
P_AGREED = 0.95
#: … and past that agreement (or with a single earlier occurrence)
P_BEYOND = 0.3
#: the longest draft considered
MAX_DRAFT = 47
#: the file's entries kept at most (one per model × machine × thread count)
_MAX_ENTRIES = 64


@dataclass(frozen=True)
class BatchCosts:
    """Seconds to evaluate a batch of ``n`` tokens (with logits for each), per measured ``n``; ``n = 1``
    is required."""

    seconds: Mapping[int, float]
    _per_size: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if 1 not in self.seconds or not self.seconds[1] > 0:
            raise ValueError(f"batch costs need a positive one-token cost, got {dict(self.seconds)}")
        object.__setattr__(self, "_per_size", tuple(self._interpolated(n) for n in range(MAX_DRAFT + 2)))

    def cost(self, n: int) -> float:
        """Seconds for a batch of ``n`` tokens: measured, interpolated between measured sizes, or extrapolated
        from the two largest."""
        return self._per_size[n] if 0 <= n < len(self._per_size) else self._interpolated(n)

    def draft_length(self, available: int, agreed: int) -> int:
        """How many of ``available`` drafted tokens to send, the first ``agreed`` of them agreed on: the
        length with the most expected tokens (the pending one included) per second of its batch."""
        best_length, best_rate = 0, 1.0 / self.cost(1)
        chance = expected = 1.0
        for length in range(1, min(available, MAX_DRAFT) + 1):
            chance *= P_AGREED if length <= agreed else P_BEYOND
            expected += chance
            rate = expected / self.cost(length + 1)
            if rate > best_rate:
                best_length, best_rate = length, rate
        return best_length

    def _interpolated(self, n: int) -> float:
        sizes = sorted(self.seconds)
        if n <= 1:
            return self.seconds[1] * max(n, 0)
        if n in self.seconds:
            return self.seconds[n]
        below = max(s for s in sizes if s < n)
        above = min((s for s in sizes if s > n), default=None)
        if above is None:  # beyond the largest: the last measured slope, or proportional with one size
            if len(sizes) == 1:
                return self.seconds[1] * n
            prev = sizes[-2]
            slope = max((self.seconds[below] - self.seconds[prev]) / (below - prev), 0.0)
            return self.seconds[below] + slope * (n - below)
        share = (n - below) / (above - below)
        return self.seconds[below] + share * (self.seconds[above] - self.seconds[below])

    def to_json(self) -> dict[str, float]:
        return {str(n): s for n, s in sorted(self.seconds.items())}

    @classmethod
    def from_json(cls, value: object) -> BatchCosts | None:
        """The costs in ``value`` (as :meth:`to_json` wrote them), or ``None`` when it is not that."""
        if not isinstance(value, dict):
            return None
        try:
            seconds = {int(k): float(v) for k, v in value.items()}
            if any(n < 1 or not s > 0 for n, s in seconds.items()):
                return None
            return cls(seconds)
        except (TypeError, ValueError):
            return None


def measure_batch_costs(evaluate: Callable[[int], float], sizes: Sequence[int] = PROBE_SIZES,
                        rounds: int = 1) -> BatchCosts:
    """Time ``evaluate(n)`` (evaluates a batch of ``n`` tokens, returns the seconds it took) ``rounds``
    times per size, keeping the fastest; one untimed call first (the first batch of a context is slower)."""
    evaluate(1)
    return BatchCosts({size: min(evaluate(size) for _ in range(max(1, rounds))) for size in sorted({1, *sizes})})


def cpu_identity() -> str:
    """The CPU's model name and feature flags (Linux ``/proc/cpuinfo``; elsewhere the platform's name)."""
    import platform

    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
             for line in text.splitlines() if ":" in line}
    flags = hashlib.sha256(lines.get("flags", lines.get("Features", "")).encode()).hexdigest()[:12]
    return f"{lines.get('model name', platform.machine())} flags:{flags}"


class BatchCostFile:
    """The measured costs, one JSON object per key, written atomically; an unreadable file counts as empty."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()

    def __repr__(self) -> str:
        return f"BatchCostFile({str(self.path)!r})"

    def get(self, key: str) -> BatchCosts | None:
        return BatchCosts.from_json(self._read().get(key))

    def put(self, key: str, costs: BatchCosts) -> None:
        entries = self._read()
        entries.pop(key, None)
        entries[key] = costs.to_json()
        kept = dict(list(entries.items())[-_MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(self.path, json.dumps(kept, indent=1).encode("utf-8"))
        except OSError as exc:  # a read-only cache must not fail the LLM call
            logger.warning("cannot save the batch costs to %s: %s", self.path, exc)

    def _read(self) -> dict[str, object]:
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(value, dict):
                return value
        return {}
