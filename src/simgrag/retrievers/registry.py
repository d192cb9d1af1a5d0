"""The retriever registry: names for the CLI, config and benchmarks.

===============  ==================  ================================================================
name             needs               retriever
===============  ==================  ================================================================
``simgrag``      index, LLM          pattern graph (LLM) → top-k similar subgraphs (SimGRAG)
``kaping``       index               top-k one-hop triples by similarity (KAPING)
``pcst``         index, ``[bench]``  prize-collecting Steiner tree over the 2-hop neighbourhood (G-Retriever)
``triplets``     index               top-k 2-hop triples by similarity (OKGQA)
``paths``        index               best-first path search from the topic entities (OKGQA)
``none``         nothing             no context: the LLM alone
``subgraphrag``  index, model        trained triple scorer (SubgraphRAG), :mod:`simgrag.retrievers.subgraphrag`
``gsr``          index, model        relation-chain decoding (GSR), :mod:`simgrag.retrievers.gsr`
===============  ==================  ================================================================

Every retriever is a class built as ``cls(index, **options)``, plus ``llm=`` when its constructor
takes one (SimGRAG writes patterns with it). Options it does not take are refused with a
:class:`~simgrag.errors.ConfigError` naming the ones it does (:func:`check_retriever_options`).
Modules are imported only when a retriever is built, so ``torch`` and ``pcst_fast`` are not imported
by listing them. ``info["style"]`` is the reader style the answerer reads a retriever's context with
unless told otherwise (:mod:`simgrag.answer.answerer`); ``info["per_call"]`` names the settings it can
change for one call (:class:`~simgrag.retrievers.base.AdjustableRetriever`), e.g. a request's ``k``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from simgrag.errors import ConfigError
from simgrag.index.directory import IndexDir
from simgrag.llm.base import LLM
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.registry import Entry, Registry, check_options
from simgrag.retrievers.base import Retriever

__all__ = ["RETRIEVERS", "RetrieverSpec", "accepted_options", "check_retriever_options", "default_style",
           "list_retrievers", "per_call_settings", "resolve_retriever"]

RetrieverSpec = str | type | Retriever
LLMSource = LLM | Callable[[], LLM] | None
#: what a caller shares with the retrievers it builds (not options): an LLM, a subgraph search
_SHARED = ("llm", "subgraphs")


def _entry(name: str, target: str, style: str, needs: str, description: str, per_call: str = "",
           **more: Any) -> Entry:
    return Entry(name, f"simgrag.retrievers.{target}", name, description,
                 info={"style": style, "needs": needs, "per_call": per_call}, **more)


RETRIEVERS = Registry("retriever", "--retriever", "Retrievers", [
    _entry("simgrag", "simgrag:SimGRAGRetriever", "simgrag", "index, LLM",
           "pattern graph (LLM) -> top-k similar subgraphs (SimGRAG)", per_call="k deadline_s"),
    _entry("kaping", "kaping:KapingRetriever", "kaping", "index",
           "top-k one-hop triples by similarity to the question (KAPING)"),
    _entry("pcst", "pcst:PCSTRetriever", "subgraphrag", "index",
           "prize-collecting Steiner tree over the 2-hop neighbourhood (G-Retriever)", extra="bench",
           requires=("pcst_fast",)),
    _entry("triplets", "paths:TripletRetriever", "subgraphrag", "index",
           "top-k 2-hop triples by similarity (OKGQA triplets)"),
    _entry("paths", "paths:PathRetriever", "paths", "index",
           "best-first search of paths from the topic entities (OKGQA paths)"),
    _entry("none", "none:NoRetriever", "none", "nothing", "no context: the LLM alone"),
    _entry("subgraphrag", "subgraphrag:SubgraphRAGRetriever", "subgraphrag", "index, model",
           "trained triple scorer (SubgraphRAG); model=DIR", requires=("torch",)),
    _entry("gsr", "gsr:GSRRetriever", "subgraphrag", "index, model",
           "relation-chain decoding (GSR); model=DIR", requires=("torch",)),
])


def list_retrievers() -> list[Entry]:
    """Every registered retriever, in the table's order."""
    return RETRIEVERS.entries()


def default_style(name: str) -> str | None:
    """The reader style retriever ``name`` is read with unless told otherwise (``None``: not registered)."""
    return RETRIEVERS.get(name).info.get("style") if name in RETRIEVERS else None


def per_call_settings(name: str) -> list[str]:
    """The settings retriever ``name`` can change for one call (``k``, ``deadline_s``)."""
    return RETRIEVERS.get(name).info.get("per_call", "").split()


def _factory(spec: str | type) -> tuple[str, Callable[..., Retriever]]:
    if isinstance(spec, str):
        entry = RETRIEVERS.get(spec)
        return entry.name, entry.load()
    return spec.__name__, spec


def _needs_index(factory: Callable[..., Any]) -> bool:
    try:
        first = next(iter(inspect.signature(factory).parameters.values()), None)
    except (TypeError, ValueError):
        return True
    return first is not None and first.default is inspect.Parameter.empty


def _takes(factory: Callable[..., Any], parameter: str) -> bool:
    try:
        return parameter in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def accepted_options(spec: RetrieverSpec, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``options`` that retriever ``spec`` takes (none for an instance)."""
    if not isinstance(spec, (str, type)):
        return {}
    _, factory = _factory(spec)
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in options.items() if k in parameters and k not in _SHARED}


def check_retriever_options(spec: RetrieverSpec, options: Mapping[str, Any]) -> None:
    """Refuse ``options`` the retriever ``spec`` does not take (an instance takes none), before building it."""
    if not isinstance(spec, (str, type)):
        if options:
            raise ConfigError(f"The retriever {spec.name!r} is already built; it takes no options "
                              f"(got {', '.join(sorted(options))}).")
        return
    name, factory = _factory(spec)
    check_options(f"The {name!r} retriever", factory, options, given_by_caller=("index", *_SHARED),
                  hint=" (a trained model directory: --retriever-model NAME=DIR)")


def resolve_retriever(spec: RetrieverSpec, *, index: IndexDir | None = None, llm: LLMSource = None,
                      subgraphs: SubgraphRetriever | None = None, **options: Any) -> Retriever:
    """The retriever ``spec`` (a registered name, a class, or an instance returned as it is) over
    ``index``, built with ``options``. What a caller shares goes to constructors that take it: ``llm``
    (or a function giving it, called only then) and ``subgraphs`` (a subgraph search with its caches).
    Unknown names, options it does not take and missing dependencies raise :class:`ConfigError`."""
    check_retriever_options(spec, options)
    if not isinstance(spec, (str, type)):
        return spec
    name, factory = _factory(spec)
    if index is None and _needs_index(factory):
        raise ConfigError(f"The {name!r} retriever needs index= (an opened IndexDir).")
    kwargs = dict(options)
    if _takes(factory, "llm"):
        kwargs["llm"] = llm() if callable(llm) and not isinstance(llm, LLM) else llm
    if subgraphs is not None and _takes(factory, "subgraphs"):
        kwargs["subgraphs"] = subgraphs
    return factory(index, **kwargs)
