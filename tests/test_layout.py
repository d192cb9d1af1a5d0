"""The package layout keeps the data flow: a stage imports only from stages to its left."""

from __future__ import annotations

import ast
from pathlib import Path

import simgrag

SRC = Path(simgrag.__file__).parent
# kg ← embed ← index ← pattern ← match ← answer ← pipeline ← eval | serve | cli
ORDER = ["errors", "config", "kg", "embed", "index", "llm", "pattern", "match", "answer", "pipeline",
         "retrievers", "eval", "perturb", "serve", "cli"]
FREE = {"errors", "config", "testing", "__init__"}


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


def test_stages_only_import_from_their_left() -> None:
    bad = []
    for path in SRC.rglob("*.py"):
        stage = _stage(path)
        if stage in FREE or stage not in ORDER:
            continue
        for dep in _imports(path) - FREE - {stage}:
            if dep in ORDER and ORDER.index(dep) > ORDER.index(stage):
                bad.append(f"{path.relative_to(SRC)} imports simgrag.{dep}")
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


def test_public_all_resolves() -> None:
    for name in simgrag.__all__:
        assert hasattr(simgrag, name), name
