"""A bounded queue in front of the LLM.

The embedded llama.cpp model is not thread-safe and serves one request at a time, so LLM-bound
requests (ask, verify) run on one worker thread. At most ``max_waiting`` requests wait behind the
running one; the next gets :class:`QueueFullError` (HTTP 429). A request whose deadline passes while
it waits is taken off the queue (:class:`QueueTimeoutError`, HTTP 503); one whose deadline passes
while it runs gets :class:`DeadlineExceededError` (HTTP 504), and its work finishes in the
background (a llama.cpp call cannot be interrupted) before the next request starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from simgrag.errors import DeadlineExceededError, QueueFullError, QueueTimeoutError

__all__ = ["DeadlineExceededError", "LLMQueue", "QueueFullError", "QueueTimeoutError"]

T = TypeVar("T")


class LLMQueue:
    """One worker thread and a bounded number of waiting requests."""

    def __init__(self, max_waiting: int = 8) -> None:
        if max_waiting < 0:
            raise ValueError("max_waiting must be >= 0")
        self.max_waiting = max_waiting
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simgrag-llm")
        self._lock = threading.Lock()
        self._pending = 0  # running + waiting
        self.rejected = 0
        self.timed_out = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            pending = self._pending
        return {"running": min(pending, 1), "waiting": max(pending - 1, 0), "max_waiting": self.max_waiting,
                "rejected": self.rejected, "timed_out": self.timed_out}

    async def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` on the LLM thread, waiting at most ``timeout_s`` in all."""
        with self._lock:
            if self._pending > self.max_waiting:
                self.rejected += 1
                raise QueueFullError(f"{self._pending - 1} requests are already waiting for the LLM "
                                     f"(limit {self.max_waiting}); retry later")
            self._pending += 1
        started = threading.Event()

        def job() -> T:
            started.set()
            return fn()

        try:
            future = self._executor.submit(job)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda _: self._release())
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout_s)
        except TimeoutError:
            self.timed_out += 1
            if not started.is_set() and future.cancel():
                raise QueueTimeoutError(f"the LLM was busy for the whole deadline ({timeout_s:.1f} s)") from None
            raise DeadlineExceededError(f"the request took longer than its deadline ({timeout_s:.1f} s); "
                                        "its LLM call finishes in the background") from None

    def _release(self) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
