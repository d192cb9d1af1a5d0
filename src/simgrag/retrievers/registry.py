"""The retriever registry: names for the CLI, config and benchmarks.

===============  ============  ================================================================
name             needs         retriever
===============  ============  ================================================================
``simgrag``      engine        pattern graph (LLM) → top-k similar subgraphs (SimGRAG)
``kaping``       index         top-k one-hop triples by similarity (KAPING)
``pcst``         index         prize-collecting Steiner tree over the 2-hop neighbourhood (G-Retriever)
``triplets``     index         top-k 2-hop triples by similarity (OKGQA)
``paths``        index         best-first path search from the topic entities (OKGQA)
``none``         nothing       no context: the LLM alone
``subgraphrag``  index, model  trained triple scorer (SubgraphRAG), :mod:`simgrag.retrievers.subgraphrag`
``gsr``          index, model  relation-chain decoding (GSR), :mod:`simgrag.retrievers.gsr`
===============  ============  ================================================================

``subgraphrag`` and ``gsr`` need torch and a trained model, so their modules are imported only when
asked for. Such a module provides ``create_retriever(*, index, engine, **options)``, or else a class
(``SubgraphRAGRetriever`` / ``GSRRetriever``) built as ``cls(index, **options)``.

``simgrag`` takes ``engine=`` (a :class:`~simgrag.pipeline.SimGRAG`), or ``index=`` plus ``llm=``
(and any other :class:`~simgrag.pipeline.SimGRAG` keyword) to build one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simgrag.errors import ConfigError
from simgrag.index.directory import IndexDir
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import Retriever

__all__ = ["RetrieverEntry", "list_retrievers", "resolve_retriever"]


@dataclass(frozen=True)
class RetrieverEntry:
    """One registry line, for ``simgrag ls``: ``style`` is the reader style it is read with by default."""

    name: str
    needs: str
    style: str
    description: str


_ENTRIES = (
    RetrieverEntry("simgrag", "engine", "subgraphrag", "pattern graph (LLM) -> top-k similar subgraphs (SimGRAG)"),
    RetrieverEntry("kaping", "index", "kaping", "top-k one-hop triples by similarity to the question (KAPING)"),
    RetrieverEntry("pcst", "index", "subgraphrag", "prize-collecting Steiner tree over the 2-hop neighbourhood "
                   "(G-Retriever)"),
    RetrieverEntry("triplets", "index", "subgraphrag", "top-k 2-hop triples by similarity (OKGQA triplets)"),
    RetrieverEntry("paths", "index", "paths", "best-first search of paths from the topic entities (OKGQA paths)"),
    RetrieverEntry("none", "nothing", "none", "no context: the LLM alone"),
    RetrieverEntry("subgraphrag", "index, model", "subgraphrag", "trained triple scorer (SubgraphRAG); needs torch"),
    RetrieverEntry("gsr", "index, model", "subgraphrag", "relation-chain decoding (GSR); needs torch"),
)

_LAZY = {"subgraphrag": ("simgrag.retrievers.subgraphrag", "SubgraphRAGRetriever"),
         "gsr": ("simgrag.retrievers.gsr", "GSRRetriever")}


def list_retrievers() -> list[RetrieverEntry]:
    """Every registered retriever, in the table's order."""
    return list(_ENTRIES)


def default_style(name: str) -> str:
    """The reader style retriever ``name`` is read with unless told otherwise."""
    return next((e.style for e in _ENTRIES if e.name == name), "subgraphrag")


def _need_index(name: str, index: IndexDir | None, engine: SimGRAG | None) -> IndexDir:
    if index is not None:
        return index
    if engine is not None:
        return engine.index
    raise ConfigError(f"The {name!r} retriever needs index= (an opened IndexDir) or engine=.")


def _simgrag(index: IndexDir | None, engine: SimGRAG | None, **options: Any) -> Retriever:
    from simgrag.retrievers.simgrag_adapter import SimGRAGRetriever

    if engine is None:
        if index is None or "llm" not in options:
            raise ConfigError("The 'simgrag' retriever needs engine= (a SimGRAG), or index= with llm=.")
        engine = SimGRAG(index, **options)
    elif options:
        raise ConfigError(f"The 'simgrag' retriever takes no options besides engine=; got {sorted(options)}.")
    return SimGRAGRetriever(engine)


def _builtin(name: str) -> Callable[..., Retriever]:
    from simgrag.retrievers.kaping import KapingRetriever
    from simgrag.retrievers.paths import PathRetriever, TripletRetriever
    from simgrag.retrievers.pcst import PCSTRetriever

    classes: dict[str, Callable[..., Retriever]] = {
        "kaping": KapingRetriever, "pcst": PCSTRetriever, "triplets": TripletRetriever, "paths": PathRetriever}
    return classes[name]


def _lazy(name: str, index: IndexDir | None, engine: SimGRAG | None, **options: Any) -> Retriever:
    module_name, class_name = _LAZY[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name not in (module_name, "torch"):
            raise
        missing = "torch (pip install torch)" if exc.name == "torch" else f"the module {module_name}"
        raise ConfigError(f"The {name!r} retriever is not available: {missing} cannot be imported.") from exc
    factory = getattr(module, "create_retriever", None)
    cls = getattr(module, class_name, None)
    if not callable(factory) and cls is None:
        raise ConfigError(f"{module_name} defines neither create_retriever() nor {class_name}.")
    try:
        if callable(factory):
            made: Retriever = factory(index=index, engine=engine, **options)
            return made
        built: Retriever = cls(_need_index(name, index, engine), **options)  # type: ignore[misc]
        return built
    except TypeError as exc:
        raise ConfigError(f"Bad options for the {name!r} retriever (a trained one needs model=DIR): {exc}") from exc


def resolve_retriever(name: str | Retriever, *, index: IndexDir | None = None, engine: SimGRAG | None = None,
                      **options: Any) -> Retriever:
    """The retriever called ``name`` (see the module table), built with ``options``; an instance is
    returned as it is. Unknown names and missing inputs raise :class:`~simgrag.errors.ConfigError`."""
    if not isinstance(name, str):
        return name
    key = name.strip().lower()
    if key == "simgrag":
        return _simgrag(index, engine, **options)
    if key == "none":
        from simgrag.retrievers.none import NoRetriever

        return NoRetriever()
    if key in _LAZY:
        return _lazy(key, index, engine, **options)
    if key in ("kaping", "pcst", "triplets", "paths"):
        try:
            return _builtin(key)(_need_index(key, index, engine), **options)
        except TypeError as exc:
            raise ConfigError(f"Bad options for the {key!r} retriever: {exc}") from exc
    known = ", ".join(e.name for e in _ENTRIES)
    raise ConfigError(f"Unknown retriever {name!r}; known: {known}.")
