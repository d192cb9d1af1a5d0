"""Lazy package exports: a name is imported from its module on first access, then kept."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "load_export"]


def load_export(package: str, exports: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """The body of a package's ``__getattr__``: import ``name`` from ``exports[name]`` into ``namespace``."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def lazy_exports(package: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose ``exports`` are imported on first use::

        __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
    """

    def get(name: str) -> Any:
        return load_export(package, exports, namespace, name)

    def listing() -> list[str]:
        return sorted(namespace.get("__all__", exports))

    return get, listing
