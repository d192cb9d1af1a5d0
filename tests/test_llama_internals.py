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
    import llama_cpp.llama as llama_module
    from llama_cpp import _internals

    init_source = inspect.getsource(llama_cpp.Llama.__init__)
    places = {"Llama": llama_cpp.Llama, "LlamaContext": _internals.LlamaContext, "LlamaBatch": _internals.LlamaBatch,
              "LlamaModel": _internals.LlamaModel, "llama_cpp": llama_cpp, "llama_cpp._internals": _internals,
              "llama_cpp.llama": llama_module}
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


def test_native_logs_go_to_logging_and_loading_leaves_stdout_alone(tmp_path: Path) -> None:
    """A model load in a background thread (serve's start-up) must not silence the main thread: llama-cpp-python
    points fds 1/2 at /dev/null while it loads; once routed, llama.cpp's lines reach ``logging`` instead."""
    import subprocess
    import sys

    pytest.importorskip("llama_cpp")
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format='LOG %(name)s %(message)s')\n"
        "from simgrag.llm._llama_internals import route_native_logs\n"
        "import llama_cpp\n"
        "route_native_logs(); route_native_logs()\n"
        "from llama_cpp import _internals\n"
        "with _internals.suppress_stdout_stderr(disable=False):\n"
        "    print('printed while llama-cpp-python silences a load', flush=True)\n"
        "llama_cpp.llama_backend_init()\n"
        "try:\n"
        "    llama_cpp.Llama(model_path=sys.argv[1], verbose=False)\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc, flush=True)\n"
    )
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    run = subprocess.run([sys.executable, "-c", script, str(bad)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "printed while llama-cpp-python silences a load" in run.stdout
    assert "refused:" in run.stdout
    assert "LOG simgrag.llm.llama_cpp" in run.stdout  # llama.cpp's own complaint about the file, via logging
    assert run.stderr == ""  # nothing written around logging
