"""Which prompt-lookup draft lengths pay for themselves on this machine: measured once, remembered.

A lookup-decoding step (:mod:`simgrag.llm.lookup_decoding`) evaluates the pending token plus ``d``
drafted tokens in one batch. It pays when the drafted tokens that are accepted are worth more than the
batch costs beyond a single-token step. How much a batch costs depends on the CPU's matrix kernels:

batch of n tokens (Qwen2.5-1.5B Q4_K_M, 2 threads)   n = 1    4        8        16
AVX-512 + VNNI build (2026-11-22)                   63 ms    118 ms   212 ms   251 ms
AVX2-only EPYC (2026-11-27)                         58 ms    179 ms   360 ms   476 ms

On pattern calls ~40 % of the drafted tokens are accepted (BENCHMARKS §10), so a batch size is *cheap*
when each token beyond the first costs at most :data:`MAX_MARGINAL_SHARE` of a single-token step. On the
AVX-512 machine 4 and 16 are cheap (8 is borderline) and drafts are filled up to them; on the AVX2 machine
none is, and plain greedy decoding is ~25 % faster than drafting there.

The costs are measured on the first load of a model on a machine (~1–3 s: each probe size twice, the
cheapest kept; probing stops after two sizes in a row that are not cheap) and kept in a small JSON file
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
from dataclasses import dataclass
from pathlib import Path

from simgrag.fileio import write_bytes_atomic

__all__ = ["MAX_MARGINAL_SHARE", "PROBE_SIZES", "BatchCostFile", "BatchCosts", "cpu_identity", "measure_batch_costs"]

logger = logging.getLogger(__name__)

#: batch sizes probed (the sizes lookup drafts are filled up to)
PROBE_SIZES: tuple[int, ...] = (1, 4, 8, 16, 32, 48)
#: a batch size is cheap when each token beyond the first costs at most this share of a one-token step
MAX_MARGINAL_SHARE = 0.3
#: the file's entries kept at most (one per model × machine × thread count)
_MAX_ENTRIES = 64


@dataclass(frozen=True)
class BatchCosts:
    """Seconds to evaluate a batch of ``n`` tokens (with logits for each), per ``n``; ``n = 1`` is required."""

    seconds: Mapping[int, float]

    def __post_init__(self) -> None:
        if 1 not in self.seconds or self.seconds[1] <= 0:
            raise ValueError(f"batch costs need a positive one-token cost, got {dict(self.seconds)}")

    def is_cheap(self, size: int) -> bool:
        """Whether a batch of ``size`` costs at most a single step plus :data:`MAX_MARGINAL_SHARE` of one
        per extra token (size 1 always is)."""
        if size == 1:
            return True
        one = self.seconds[1]
        cost = self.seconds.get(size)
        return cost is not None and (cost - one) <= MAX_MARGINAL_SHARE * one * (size - 1)

    def cheap_sizes(self) -> tuple[int, ...]:
        """The measured sizes that are cheap, ascending; ``(1,)`` means drafting never pays (plain decoding)."""
        return tuple(n for n in sorted(self.seconds) if self.is_cheap(n))

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
                        rounds: int = 2) -> BatchCosts:
    """Time ``evaluate(n)`` (evaluates a batch of ``n`` tokens, returns the seconds it took) ``rounds``
    times per size, ascending, keeping the fastest; stops after two sizes in a row that are not cheap
    (larger ones are then assumed not to be either)."""
    seconds: dict[int, float] = {}
    misses = 0
    for size in sorted({1, *sizes}):
        seconds[size] = min(evaluate(size) for _ in range(max(1, rounds)))
        misses = 0 if BatchCosts(seconds).is_cheap(size) else misses + 1
        if misses >= 2:
            break
    return BatchCosts(seconds)


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
