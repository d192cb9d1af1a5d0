"""Concurrency in tests: run one function on several threads at once and fail with what they raised."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["run_in_threads"]


def run_in_threads(work: Callable[[int], object], n: int) -> None:
    """``work(0)`` … ``work(n - 1)``, each on its own thread, all started before any is joined. Raises
    ``AssertionError`` (a failed test) naming every exception the threads raised."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # collected: reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError(f"{len(errors)} of {n} threads failed: {errors!r}") from errors[0]
