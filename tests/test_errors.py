"""The one exception tree: every error class lives in simgrag.errors, its docstring draws exactly that
tree, and a bug is not disguised as a data error."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import simgrag
from simgrag import errors
from simgrag.errors import SimGRAGError
from simgrag.kg import loader

SRC = Path(simgrag.__file__).parent


def _drawn_tree() -> dict[str, str | None]:
    """``{class: parent}`` as the module docstring draws it: a class's parent is the nearest class above
    it that starts further left."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^[\s│├└─]*([A-Z]\w*Error)\b", line)
        if match is None:
            continue
        depth = match.start(1)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match.group(1)] = stack[-1][1] if stack else None
        stack.append((depth, match.group(1)))
    return parents


def test_the_docstring_draws_every_class_with_its_parent() -> None:
    classes = {name: cls for name, cls in vars(errors).items()
               if inspect.isclass(cls) and issubclass(cls, SimGRAGError)}
    actual = {name: None if cls is SimGRAGError else cls.__mro__[1].__name__ for name, cls in classes.items()}
    assert _drawn_tree() == actual
    assert sorted(classes) == sorted(errors.__all__)


def _parse(source: str) -> ast.Module:
    """``ast.parse``, once more after CPython 3.11's spurious "AST constructor recursion depth mismatch"
    SystemError (python/cpython#106905), raised when another thread of the test process (a warm-up thread
    importing a module) builds an AST at the same moment."""
    try:
        return ast.parse(source)
    except SystemError:
        return ast.parse(source)


def test_no_error_class_is_defined_outside_errors_py() -> None:
    tree_names = set(errors.__all__)
    outside = []
    for path in SRC.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SRC:
            continue
        for node in ast.walk(_parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                         for b in node.bases}
                if bases & tree_names:
                    outside.append(f"{path.relative_to(SRC)}: {node.name}")
    assert outside == []


def test_a_bug_in_a_reader_is_not_reported_as_a_kg_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = tmp_path / "kb.txt"
    kb.write_text("a|r|b\n", encoding="utf-8")

    def broken(*args: object, **kwargs: object) -> object:
        raise TypeError("a bug")

    monkeypatch.setattr(loader, "iter_facts", broken)
    with pytest.raises(TypeError, match="a bug"):
        loader.load_kg(kb)
