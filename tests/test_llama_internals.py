"""llama-cpp-python's private API is used in one module only, and the installed release is one it was
tested with: pyproject's pin, the module's TESTED_VERSIONS and the names it uses must all agree."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import simgrag
from simgrag.llm import _llama_internals as internals

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = {name for _, name in internals.PRIVATE_NAMES if name.startswith("_")}


def _pin() -> str:
    """The version specifier of llama-cpp-python in pyproject's ``llamacpp`` extra."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^llamacpp = \["llama-cpp-python(?:\[[^\]]*\])?([^"]*)"\]', text, re.MULTILINE)
    assert match is not None, "pyproject.toml has no llamacpp extra pinning llama-cpp-python"
    return match.group(1)


def test_pyproject_pins_the_tested_versions() -> None:
    assert _pin() == internals.TESTED_VERSIONS


def test_private_names_are_used_nowhere_else() -> None:
    src = Path(simgrag.__file__).parent
    users = []
    for path in src.rglob("*.py"):
        if path.name == "_llama_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                users.append(f"{path.relative_to(src)}:{node.lineno} .{node.attr}")
    assert users == []


def test_the_installed_release_is_in_the_pin_and_has_every_name() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from packaging.specifiers import SpecifierSet

    assert llama_cpp.__version__ in SpecifierSet(internals.TESTED_VERSIONS), (
        f"llama-cpp-python {llama_cpp.__version__} is not a tested release ({internals.TESTED_VERSIONS}): "
        "check simgrag/llm/_llama_internals.py against it, then widen the pin")
    from llama_cpp import _internals

    init_source = inspect.getsource(llama_cpp.Llama.__init__)
    places = {"Llama": llama_cpp.Llama, "LlamaContext": _internals.LlamaContext, "LlamaBatch": _internals.LlamaBatch,
              "LlamaModel": _internals.LlamaModel, "llama_cpp": llama_cpp}
    missing = []
    for where, name in internals.PRIVATE_NAMES:
        owner = places[where]
        assigned = re.compile(rf"self\.{name}\s*(:[^=\n]*)?=[^=]")  # set in __init__, maybe annotated
        found = hasattr(owner, name) or (inspect.isclass(owner) and bool(
            assigned.search(inspect.getsource(owner.__init__)) or (owner is llama_cpp.Llama and
                                                                   assigned.search(init_source))))
        if not found:
            missing.append(f"{where}.{name}")
    assert missing == []
