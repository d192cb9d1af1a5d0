"""Lazy package exports: a name is imported from its module on first access, then kept."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["load_export"]


def load_export(package: str, exports: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """The body of a package's ``__getattr__``: import ``name`` from ``exports[name]`` into ``namespace``."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
