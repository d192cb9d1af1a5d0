"""The documentation a user reads: the README's walk-through runs as written, the pages stay short, the
version is the one released, the results page can be re-run, and every error class has a fix on the
troubleshooting page. (`make docs`, which `make test` runs, builds the site with links checked.)"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
#: the README sections whose every snippet is run on the sample KG (the set-up section's `make demo` /
#: `make test` are what CI itself runs; `simgrag demo` has its own test in test_e2e_real.py)
TESTED_SECTIONS = ("Your own KG, step by step",)
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def readme_snippets(sections: tuple[str, ...] = TESTED_SECTIONS) -> list[tuple[str, str]]:
    """(language, code) of every fenced block in the README sections named."""
    text = README.read_text(encoding="utf-8")
    out: list[tuple[str, str]] = []
    for title in sections:
        match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        assert match, f"README has no section '## {title}'"
        out += [(lang, code) for lang, code in _FENCE.findall(match.group(1))]
    return out


def shell_commands(code: str) -> list[str]:
    """The commands of a shell snippet, comments after `#` dropped (none of ours quote a `#`)."""
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def pyproject_version() -> str:
    """``[project] version`` of pyproject.toml (read by pattern: tomllib is not in Python 3.10)."""
    match = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert match, "pyproject.toml has no version line"
    return match.group(1)


def test_readme_and_benchmarks_stay_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200
    assert len(BENCHMARKS.read_text(encoding="utf-8").splitlines()) <= 600


def test_readme_keeps_the_two_setup_commands_and_a_runnable_walkthrough() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    snippets = readme_snippets()
    assert {lang for lang, _ in snippets} == {"bash", "python"}
    commands = [c for lang, code in snippets if lang == "bash" for c in shell_commands(code)]
    assert [c.split()[1] for c in commands if c.startswith("simgrag ")] == ["index", "ask", "serve"]


def test_version_option_prints_the_pyproject_version() -> None:
    out = subprocess.run([sys.executable, "-m", "simgrag.cli", "--version"], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == f"simgrag {pyproject_version()}"


def test_changelog_has_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## Unreleased" in text
    assert f"## {pyproject_version()} - " in text


def test_troubleshooting_names_every_error_class() -> None:
    import simgrag.errors

    page = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [name for name in simgrag.errors.__all__ if not re.search(rf"\b{name}\b", page)]
    assert not missing, f"docs/troubleshooting.md says nothing about {missing}"


def test_cli_reference_covers_every_command() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import cli_reference
    finally:
        sys.path.pop(0)
    import typer

    from simgrag.cli import app

    text = cli_reference.cli_reference_markdown()
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="simgrag")
    for name in root.list_commands(ctx):  # type: ignore[attr-defined]
        assert f"`simgrag {name}`" in text
    assert "| `--output`" not in text or "`-o`, `--output`" in text  # every spelling of an option is listed


def test_run_all_names_only_scripts_and_commands_that_exist() -> None:
    out = subprocess.run(["bash", str(ROOT / "benchmarks" / "run_all.sh"), "--dry-run", "all"], capture_output=True,
                         text=True, check=True, timeout=60, cwd=ROOT).stdout
    commands = [line[2:] for line in out.splitlines() if line.startswith("+ ")]
    assert len(commands) > 40
    for script in set(re.findall(r"benchmarks/(\w+\.py)", out)):
        assert (ROOT / "benchmarks" / script).is_file(), script
    import typer

    from simgrag.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="simgrag")
    known = set(root.list_commands(ctx))  # type: ignore[attr-defined]
    used = set(re.findall(r"simgrag (?:-m simgrag\.cli )?([a-z][a-z0-9-]+)", out)) - {"cli"}
    assert used <= known, used - known


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.llm
def test_readme_walkthrough_runs_on_the_sample_kg(tmp_path: Path, embedded_model: Path) -> None:
    """Every command and the Python snippet of the README's walk-through, as written, in a fresh directory; the
    only change: `simgrag serve` gets a free `--port` and is stopped once `/v1/health` says ready."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    outputs = []
    for lang, code in readme_snippets():
        if lang == "python":
            run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert run.returncode == 0, run.stderr[-3000:]
            outputs.append(run.stdout)
            continue
        for command in shell_commands(code):
            if command.startswith("simgrag serve"):
                _serve_until_ready(command, tmp_path, env)
                continue
            run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=900)
            assert run.returncode == 0, f"{command}\n{run.stderr[-3000:]}"
            outputs.append(run.stdout)
    assert (tmp_path / "kg.idx" / "manifest.json").is_file()
    assert sum("Christopher Nolan" in out for out in outputs) >= 2, outputs  # `ask` and the Python snippet


def _serve_until_ready(command: str, cwd: Path, env: dict[str, str]) -> None:
    port = _free_port()
    proc = subprocess.Popen(["bash", "-c", f"exec {command} --port {port}"], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{command} exited: {proc.stderr.read()[-3000:] if proc.stderr else ''}"
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5)
                if health.status_code == 200:
                    assert health.json()["status"] == "ready"
                    page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                    assert page.status_code == 200
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        pytest.fail(f"{command} was not ready within 300 s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
