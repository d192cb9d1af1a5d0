"""Bounded retries with exponential backoff for transient LLM-server failures (5xx, 429, dropped links)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from simgrag.errors import TransientLLMError

__all__ = ["RetryPolicy", "TransientLLMError", "call_with_retries"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` retries after the first try, waiting ``base_delay * 2**n`` (capped at
    ``max_delay``, with up to 10 % jitter) before retry ``n``."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based); a server hint wins, capped."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_delay))
        wait = min(self.base_delay * (2**retry), self.max_delay)
        return wait * (1.0 + 0.1 * random.random())


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str = "LLM call",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn``; on :class:`TransientLLMError` wait and try again, at most ``policy.max_retries``
    times, then raise the error's ``final``. Other exceptions propagate at once."""
    retry = 0
    while True:
        try:
            return fn()
        except TransientLLMError as exc:
            if retry >= policy.max_retries:
                raise exc.final from exc
            wait = policy.delay(retry, exc.retry_after)
            logger.warning(
                "%s failed (%s); retry %d/%d in %.2f s", what, exc, retry + 1, policy.max_retries, wait
            )
            sleep(wait)
            retry += 1
