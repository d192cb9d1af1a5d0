"""The package layout keeps the data flow: a stage imports only from stages to its left, and every
top-level module or package of ``simgrag`` has its place in that order (``testing`` last: the fakes may
use anything, nothing in the library may use them)."""

from __future__ import annotations

import ast
from pathlib import Path

import simgrag

SRC = Path(simgrag.__file__).parent
# utilities ← kg ← embed ← index ← llm ← pattern ← match ← grounding ← retrievers ← answer ← bootstrap ← pipeline
# ← eval ← perturb ← serve ← cli
ORDER = ["errors", "config", "_lazy", "_options", "fileio", "fetch", "progress", "registry", "kg", "embed", "index",
         "llm", "pattern", "match", "grounding", "retrievers", "answer", "bootstrap", "pipeline", "eval", "perturb",
         "serve", "cli", "testing"]
PACKAGE_ROOT = {"__init__", "py.typed", "data"}


def _stage(module_path: Path) -> str:
    rel = module_path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simgrag."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("simgrag."))
    return found


def test_every_top_level_module_has_a_stage() -> None:
    names = {p.name.removesuffix(".py") for p in SRC.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert names - PACKAGE_ROOT == set(ORDER), "add new top-level modules to ORDER (and to docs/architecture/)"


def test_stages_only_import_from_their_left() -> None:
    bad = []
    for path in SRC.rglob("*.py"):
        stage = _stage(path)
        if stage == "__init__":
            continue
        for dep in _imports(path) - {stage}:
            if ORDER.index(dep) > ORDER.index(stage):
                bad.append(f"{path.relative_to(SRC)} imports simgrag.{dep}")
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


def test_layout_check_covers_testing() -> None:
    testing = [p for p in SRC.rglob("*.py") if _stage(p) == "testing"]
    assert testing and all(_stage(p) in ORDER for p in testing)
    users = [p for p in SRC.rglob("*.py") if _stage(p) != "testing" and "testing" in _imports(p)]
    assert not users, f"library modules import simgrag.testing: {users}"


def test_public_all_resolves() -> None:
    for name in simgrag.__all__:
        assert hasattr(simgrag, name), name
