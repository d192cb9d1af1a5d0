"""simgrag: question answering and fact verification grounded in any knowledge graph (SimGRAG).

The data flow, one stage per sub-package: ``kg`` → ``embed`` → ``index`` → ``pattern`` → ``match``
→ ``answer``; :mod:`simgrag.pipeline` is the facade and :mod:`simgrag.cli` the command line.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
