"""matplotlib for the benchmark plots, a ``simgrag[bench]`` dependency: imported only when a plot is
drawn, with the Agg backend (no display), and a clear error when it is not installed."""

from __future__ import annotations

import os
from typing import Any

from simgrag.errors import ConfigError

__all__ = ["pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend; :class:`ConfigError` without matplotlib."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("Plots need matplotlib: pip install 'simgrag[bench]'.") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
