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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from simgrag.errors import DeadlineExceededError, QueueFullError, QueueTimeoutError

__all__ = ["BoundedPool", "DeadlineExceededError", "LLMQueue", "QueueFullError", "QueueTimeoutError"]

T = TypeVar("T")


class BoundedPool:
    """Worker threads that take at most ``capacity`` jobs at once (running + waiting); counts the jobs
    refused (``rejected``) and those whose deadline passed (``timed_out``, counted by the subclass)."""

    def __init__(self, workers: int, capacity: int, thread_name_prefix: str) -> None:
        self._capacity = capacity
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
        self._lock = threading.Lock()
        self._pending = 0  # running + waiting
        self.rejected = 0
        self.timed_out = 0

    def _pending_now(self) -> int:
        with self._lock:
            return self._pending

    def _admit(self, full: Callable[[int], str]) -> None:
        """Take one more job, or raise :class:`QueueFullError` with ``full(pending)``."""
        with self._lock:
            if self._pending >= self._capacity:
                self.rejected += 1
                raise QueueFullError(full(self._pending))
            self._pending += 1

    def _submit(self, job: Callable[[], T]) -> Future[T]:
        """Run an admitted job; its place is given back when it ends (or when it cannot start)."""
        try:
            future = self._executor.submit(job)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda _: self._release())
        return future

    def _release(self) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class LLMQueue(BoundedPool):
    """One worker thread and a bounded number of waiting requests."""

    def __init__(self, max_waiting: int = 8) -> None:
        if max_waiting < 0:
            raise ValueError("max_waiting must be >= 0")
        super().__init__(1, max_waiting + 1, "simgrag-llm")
        self.max_waiting = max_waiting

    def stats(self) -> dict[str, int]:
        pending = self._pending_now()
        return {"running": min(pending, 1), "waiting": max(pending - 1, 0), "max_waiting": self.max_waiting,
                "rejected": self.rejected, "timed_out": self.timed_out}

    async def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` on the LLM thread, waiting at most ``timeout_s`` in all."""
        self._admit(lambda pending: f"{pending - 1} requests are already waiting for the LLM "
                                    f"(limit {self.max_waiting}); retry later")
        started = threading.Event()

        def job() -> T:
            started.set()
            return fn()

        future = self._submit(job)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout_s)
        except TimeoutError:
            self.timed_out += 1
            if not started.is_set() and future.cancel():
                raise QueueTimeoutError(f"the LLM was busy for the whole deadline ({timeout_s:.1f} s)") from None
            raise DeadlineExceededError(f"the request took longer than its deadline ({timeout_s:.1f} s); "
                                        "its LLM call finishes in the background") from None
