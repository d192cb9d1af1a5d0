"""One small registry shape for every pluggable axis: embedders, vector indexes, LLM backends, retrievers.

A :class:`Registry` maps names (and aliases, case-insensitively) to :class:`Entry` lines. An entry's
``target`` builds the component; given as ``"module:attribute"`` it is imported only when used, so
listing a registry (``simgrag ls``) never imports an optional extra. Each axis keeps its own way of
calling the target (:func:`simgrag.embed.registry.resolve_embedder`,
:func:`simgrag.index.registry.make_index`, :func:`simgrag.llm.registry.resolve_llm`,
:func:`simgrag.retrievers.registry.resolve_retriever`); the lookup, the lazy import, the "unknown name"
and "missing extra" errors and the listing are this module's.

>>> colours = Registry("colour", "--colour", [Entry("red", "builtins:str", "red", "a warm colour")])
>>> colours.get("RED").name
'red'
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simgrag.errors import ConfigError

__all__ = ["Entry", "Registry", "check_options"]


@dataclass(frozen=True)
class Entry:
    """One registry line.

    ``usage``: how a spec names it (``ollama:<model>``); ``extra``: the pip extra that provides what
    it needs (``simgrag[milvus]``); ``requires``: top-level modules that must be importable for it
    (checked without importing them); ``info``: facts of the axis (a retriever's reader style).
    """

    name: str
    target: str | Callable[..., Any]
    usage: str
    description: str
    aliases: tuple[str, ...] = ()
    extra: str | None = None
    requires: tuple[str, ...] = ()
    info: Mapping[str, str] = field(default_factory=dict)

    def available(self) -> bool:
        """Whether every module in ``requires`` can be imported (found, not imported)."""
        return all(importlib.util.find_spec(module) is not None for module in self.requires)

    def missing_hint(self) -> str:
        """How to make the entry available: ``pip install 'simgrag[extra]'`` or the modules it lacks."""
        if self.extra:
            return f"pip install 'simgrag[{self.extra}]'"
        return "install " + ", ".join(self.requires)

    def load(self) -> Any:
        """The target object, imported now; a missing dependency is a :class:`ConfigError` saying how
        to install it."""
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attribute = self.target.partition(":")
        if not self.available():
            raise ConfigError(f"{self.name!r} is not available: it needs {', '.join(self.requires)} "
                              f"({self.missing_hint()}).")
        module = importlib.import_module(module_name)
        return getattr(module, attribute)


class Registry:
    """The entries of one axis: ``kind`` names it in messages (``"embedder"``), ``option`` is the CLI
    option that takes its names (``"--embedder"``)."""

    def __init__(self, kind: str, option: str, title: str, entries: Iterable[Entry]) -> None:
        self.kind = kind
        self.option = option
        self.title = title
        self._entries = {entry.name: entry for entry in entries}
        self._names = {alias.lower(): entry.name for entry in self._entries.values()
                       for alias in (entry.name, *entry.aliases)}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._names

    def entries(self) -> list[Entry]:
        """Every entry, in registration order."""
        return list(self._entries.values())

    def names(self) -> list[str]:
        return list(self._entries)

    def get(self, name: str) -> Entry:
        """The entry called ``name`` (or one of its aliases); :class:`ConfigError` listing the valid
        names otherwise."""
        key = self._names.get(name.strip().lower())
        if key is None:
            valid = ", ".join(entry.usage for entry in self._entries.values())
            raise ConfigError(f"Unknown {self.kind} {name!r}; valid: {valid}.")
        return self._entries[key]

    def parse(self, spec: str) -> tuple[Entry, str]:
        """``"prefix:argument"`` → (the entry of ``prefix``, ``"argument"``); the argument may hold
        colons itself (``ollama:llama3.1:8b``) and is ``""`` when absent."""
        prefix, _, argument = spec.strip().partition(":")
        return self.get(prefix), argument.strip()


def check_options(what: str, factory: Callable[..., Any], options: Mapping[str, Any],
                  *, given_by_caller: Iterable[str] = (), hint: str = "") -> None:
    """Refuse ``options`` that ``factory`` does not take, naming the ones it does, and ask for the ones
    it cannot do without.

    ``given_by_caller``: parameters the caller fills itself (an index, an LLM), not options; ``hint``:
    how to give a missing one. A factory with ``**kwargs`` takes anything.
    """
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return
    own = set(given_by_caller) | {"self"}
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    accepted = [name for name, p in parameters.items() if name not in own and p.kind in kinds]
    required = [name for name in accepted if parameters[name].default is inspect.Parameter.empty]
    missing = [name for name in required if name not in options]
    if missing:
        raise ConfigError(f"{what} needs the option {', '.join(repr(m) for m in missing)}{hint}.")
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        listed = ", ".join(accepted) or "none"
        raise ConfigError(f"{what} takes no option {', '.join(repr(u) for u in unknown)} (its options: {listed}).")
