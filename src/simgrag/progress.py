"""The one rule for progress bars: on when the ``simgrag`` logger shows INFO messages, off below.

Every long loop (reading a KG, embedding entities, training, a benchmark) asks :func:`progress_on`;
an explicit ``show=True``/``False`` from the caller wins. The command line logs at INFO unless
``--quiet`` (:mod:`simgrag.cli._common`), so its bars are on; a library caller who has not configured
logging (Python's default level is WARNING) sees none.
"""

from __future__ import annotations

import logging

__all__ = ["progress_on"]

_LOGGER = logging.getLogger("simgrag")


def progress_on(show: bool | None = None) -> bool:
    """``show`` when given, else whether the ``simgrag`` logger is enabled for INFO."""
    return _LOGGER.isEnabledFor(logging.INFO) if show is None else bool(show)
