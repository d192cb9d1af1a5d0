"""simgrag: question answering and fact verification grounded in any knowledge graph (SimGRAG).

The data flow, one stage per sub-package: ``kg`` → ``embed`` → ``index`` → ``pattern`` → ``match``
→ ``answer``; :class:`SimGRAG` (in :mod:`simgrag.pipeline`) is the facade and :mod:`simgrag.cli`
the command line. Names below are imported lazily, so ``import simgrag`` stays cheap.
"""

from __future__ import annotations

from simgrag._lazy import lazy_exports

try:  # the installed distribution's version (pyproject.toml), one place to bump
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("simgrag")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

_EXPORTS = {
    "SimGRAG": "simgrag.pipeline",
    "AskResult": "simgrag.pipeline",
    "VerifyResult": "simgrag.pipeline",
    "build_index": "simgrag.pipeline",
    "sample_index": "simgrag.pipeline",
    "open_index_dir": "simgrag.index.directory",
    "update_index": "simgrag.pipeline",
    "RetrievalSettings": "simgrag.match.retrieve",
    "SubgraphRetriever": "simgrag.match.retrieve",
    "Retrieval": "simgrag.match.retrieve",
    "Evidence": "simgrag.match.retrieve",
    "search_subgraphs": "simgrag.match.search",
    "Pattern": "simgrag.pattern.graph",
    "KGStore": "simgrag.kg.store",
    "Triple": "simgrag.kg.store",
    "load_kg": "simgrag.kg.loader",
    "resolve_llm": "simgrag.llm.registry",
    "resolve_embedder": "simgrag.embed.registry",
    "SimGRAGError": "simgrag.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
