"""The retrievers a server offers behind /v1/ask and /v1/verify.

Each is a :class:`~simgrag.pipeline.SimGRAG` engine over the loaded index that shares the loaded
engine's LLM (:meth:`~simgrag.pipeline.SimGRAG.variant`), built on first use and kept; every one
answers through the same facade, so every response has the same shape. ``default`` serves requests
that name no retriever (``None``: the loaded engine's own); ``allowed`` are the names a request may
choose (``None``: every registered one); ``options`` are constructor options per name (e.g.
``{"gsr": {"model": "gsr.model"}}``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from simgrag.errors import ConfigError, NotReadyError, RetrieverChoiceError
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.registry import RETRIEVERS

__all__ = ["EnginePool"]


class EnginePool:
    """One engine per offered retriever (module docstring)."""

    def __init__(self, default: str | None = None, allowed: Sequence[str] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.default = None if default is None else RETRIEVERS.get(default).name
        self.allowed = tuple(RETRIEVERS.get(n).name for n in allowed) if allowed else tuple(RETRIEVERS.names())
        self.options = {RETRIEVERS.get(k).name: dict(v) for k, v in (options or {}).items()}
        self._base: SimGRAG | None = None
        self._built: dict[str, SimGRAG] = {}
        self._lock = threading.Lock()

    def attach(self, engine: SimGRAG) -> None:
        """Serve from ``engine`` (loaded and warmed up); the default retriever is built now, so a bad
        one fails the health check rather than the first request."""
        self._base = engine
        own = engine.retriever_name
        if self.default is None:
            self.default = own if own in RETRIEVERS else None
        if own in RETRIEVERS:
            self._built[own] = engine  # built with its own options already
        if self.default is None:
            raise ConfigError(f"the engine's retriever {own!r} is not a registered one; name a default")
        if self.default not in self.allowed:
            self.allowed = (self.default, *self.allowed)
        if engine.llm_name is not None:  # retrieval only (llm=None): retrievers that need an LLM are not built
            self.get(self.default)

    def name_for(self, requested: str | None) -> str:
        """The retriever a request uses: its own ``retriever`` field, else the default."""
        if requested is None or not requested.strip():
            if self.default is None:
                raise NotReadyError("the index and models are still loading; see /v1/health")
            return self.default
        name = requested.strip().lower()
        if name not in self.allowed:
            offered = ", ".join(self.allowed)
            raise RetrieverChoiceError(f"unknown retriever {requested!r}; this server offers: {offered}")
        return name

    def get(self, name: str) -> SimGRAG:
        """The engine of retriever ``name``, built once."""
        if self._base is None:
            raise NotReadyError("the index and models are still loading; see /v1/health")
        with self._lock:
            if name not in self._built:
                try:
                    engine = self._base.variant(retriever=name, retriever_options=self.options.get(name, {}))
                    _ = engine.retriever  # build it now: a missing model is this request's error
                except ConfigError as exc:
                    raise RetrieverChoiceError(f"retriever {name!r} is not available on this server: {exc}") from exc
                self._built[name] = engine
            return self._built[name]
