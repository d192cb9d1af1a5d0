"""The service for real: a uvicorn server on loopback driven by headless Chromium (Playwright), and
a ``simgrag serve`` process with the embedded model and the bundled sample KG.

The browser test needs Debian's Chromium (``/usr/bin/chromium`` or ``$CHROMIUM_PATH``) and
``web/node_modules`` (``make web-deps``); the server-process test needs the embedded model. Each
skips with the reason when its part is missing, except that with ``SIMGRAG_REQUIRE_BROWSER=1`` (set
by ``.ci/run``) a browser test that cannot run fails. Screenshots go to ``$SIMGRAG_ARTIFACTS_DIR``
(default: ``runs/screenshots/``, git-ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from simgrag.answer.calibration import Calibration
from simgrag.index.directory import build_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.llm.llamacpp import llama_cpp_available
from simgrag.pipeline import SimGRAG
from simgrag.serve import ServeSettings, create_app
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.loopback import free_port, stop_process, uvicorn_in_thread
from simgrag.testing.toy import write_toy_kg
from test_serve_api import scripted

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")



def artifacts_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$SIMGRAG_ARTIFACTS_DIR`` (or ``$SIMGRAG_ARTIFACTS``), else ``runs/screenshots/``
    (git-ignored), kept after the run as CI artifacts."""
    chosen = os.environ.get("SIMGRAG_ARTIFACTS_DIR") or os.environ.get("SIMGRAG_ARTIFACTS")
    where = Path(chosen or ROOT / "runs" / "screenshots").resolve()
    where.mkdir(parents=True, exist_ok=True)
    return where


@contextlib.contextmanager
def serving(engine: SimGRAG) -> Iterator[str]:
    """``engine`` behind the app, served by uvicorn on loopback in a thread."""
    with uvicorn_in_thread(create_app(engine, ServeSettings())) as url:
        yield url


@pytest.fixture
def toy_server(tmp_path: Path) -> Iterator[str]:
    """The app over the toy KG and the scripted LLM, served by uvicorn in a thread."""
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    with serving(SimGRAG(tmp_path / "toy.idx", llm=FakeLLM(scripted), claim_examples=None)) as url:
        yield url


HONEST = {"which films did Christopher Nolan direct?": [["UNKNOWN movie 1", "directed by", "Christopher Nolan"]],
          "who directed Titanc?": [["Titanc", "directed by", "UNKNOWN director 1"]]}


def honest_scripted(messages: list[ChatMessage]) -> str:
    """Patterns of the honest-answer questions; the reader answers James Cameron."""
    if "knowledge-graph pattern" in messages[0].content:
        found = [triples for text, triples in HONEST.items() if text in messages[-1].content]
        return json.dumps({"triples": found[0]}) if found else "no"
    return "answer: James Cameron"


@pytest.mark.parametrize("calibration", ["off", "strict"])
def test_browser_shows_a_substitution_an_abstention_and_the_answer_set(calibration: str, tmp_path: Path) -> None:
    """A misspelt title is bound to the nearest entity: said out loud on the page (no abstention), or,
    with a calibration that abstains on it, "Not found in the KG" with the nearest evidence; a list
    question shows its whole answer set although k = 1."""
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=64))
    chosen = Calibration(named=0.01) if calibration == "strict" else "off"
    engine = SimGRAG(tmp_path / "toy.idx", llm=FakeLLM(honest_scripted), claim_examples=None, ground_patterns=False,
                     calibration=chosen)
    shots = artifacts_dir(tmp_path)
    with serving(engine) as url:
        if calibration == "off":
            said = run_browser(url, "who directed Titanc?", ["Titanic", "James Cameron"],
                               shots / "substitution-page-toy.png", "--expect-substitution=nearest match for "
                               "'Titanc': Titanic")
            assert said["answer"] == "James Cameron" and not said["abstained"]
            listed = run_browser(url, "which films did Christopher Nolan direct?", ["Christopher Nolan"],
                                 shots / "answer-set-page-toy.png", "--expect-answer-set=2", "--k=1")
            assert sorted(listed["answerSet"]["chips"]) == ["Inception", "Memento"]  # type: ignore[index]
            assert len(listed["graphs"]) == 1  # type: ignore[arg-type]
        else:
            report = run_browser(url, "who directed Titanc?", ["Titanic", "James Cameron"],
                                 shots / "abstention-page-toy.png", "--expect-abstained",
                                 "--expect-substitution=nearest match for 'Titanc': Titanic")
            assert report["abstained"] and "(Titanic, directed_by, James Cameron)" in str(report["detail"])


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or ``None`` when it can."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; or set CHROMIUM_PATH)"
    if not (WEB / "node_modules" / "playwright-core").is_dir() or shutil.which("node") is None:
        return "playwright-core is not installed: run `make web-deps` (npm ci in web/)"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, except where the browser test is required (CI: ``SIMGRAG_REQUIRE_BROWSER=1``): fail there."""
    if os.environ.get("SIMGRAG_REQUIRE_BROWSER") == "1":
        pytest.fail(f"the browser test is required here (SIMGRAG_REQUIRE_BROWSER=1) but cannot run: {reason}")
    pytest.skip(reason)


def run_browser(url: str, question: str, expected: list[str], screenshot: Path,
                *extra: str) -> dict[str, object]:
    missing = browser_missing()
    if missing is not None:
        skip_or_fail(missing)
    proc = subprocess.run(["node", str(WEB / "browser_test.mjs"), url, question, ",".join(expected),
                           str(screenshot), *extra], capture_output=True, text=True, timeout=300, cwd=WEB)
    try:
        report: dict[str, object] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"browser test printed no report:\n{proc.stdout}\n{proc.stderr}") from None
    assert proc.returncode == 0 and report["ok"], report
    return report


def test_browser_asks_and_draws_the_evidence(toy_server: str, tmp_path: Path) -> None:
    screenshot = artifacts_dir(tmp_path) / "evidence-page-toy.png"
    report = run_browser(toy_server, "who directed Titanic?", ["Titanic", "James Cameron"], screenshot)
    assert report["answer"] == "James Cameron"
    assert report["patternNodes"] == ["Titanic", "UNKNOWN director 1"]
    assert screenshot.stat().st_size > 10_000


def test_browser_verifies_a_claim(toy_server: str, tmp_path: Path) -> None:
    screenshot = artifacts_dir(tmp_path) / "verify-page-toy.png"
    report = run_browser(toy_server, "Titanic was directed by James Cameron.", ["Titanic", "James Cameron"],
                         screenshot, "--verify")
    assert report["answer"] == "Supported"


def test_browser_draws_another_retrievers_evidence(toy_server: str, tmp_path: Path) -> None:
    screenshot = artifacts_dir(tmp_path) / "evidence-page-kaping.png"
    report = run_browser(toy_server, "who directed Titanic?", ["Titanic", "James Cameron"], screenshot,
                         "--retriever=kaping")
    assert report["answer"] == "James Cameron" and report["patternNodes"] == []
    assert any("directed_by" in label for label in report["graphs"][0]["edgeLabels"])  # type: ignore[index]
    verify = run_browser(toy_server, "Titanic was directed by James Cameron.", ["Titanic", "James Cameron"],
                         artifacts_dir(tmp_path) / "verify-page-kaping.png", "--verify", "--retriever=kaping")
    assert verify["answer"] == "Supported"


# -- `simgrag serve` as a process, with the embedded model -------------------------------------------


@pytest.mark.llm
@pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python is not installed")
def test_serve_process_answers_with_the_embedded_model(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "simgrag.cli", "serve", "--port", str(port), "--timeout", "300"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        status = "starting"
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"{url}/v1/health", timeout=2).json()["status"]
            except httpx.HTTPError:
                status = "starting"
            if status in ("ready", "failed"):
                break
            time.sleep(1)
        assert status == "ready", (tmp_path / "serve.log").read_text()[-3000:]
        stats = httpx.get(f"{url}/v1/kg/stats", timeout=10).json()
        assert stats["entities"] > 1000
        answer = httpx.post(f"{url}/v1/ask", json={"question": "Who directed Inception?"}, timeout=300)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "Christopher Nolan" in body["entities"] or body["short_answer"] == "Christopher Nolan", body
        found = {n["entity"] for m in body["evidence"]["matches"] for n in m["nodes"]}
        assert {"Inception", "Christopher Nolan"} <= found
        if Path(CHROMIUM).exists() and (WEB / "node_modules" / "playwright-core").is_dir():
            screenshot = artifacts_dir(tmp_path) / "evidence-page-embedded-model.png"
            report = run_browser(url, "Who directed Inception?", ["Inception", "Christopher Nolan"], screenshot)
            assert "Christopher Nolan" in str(report["answer"])
    finally:
        stop_process(proc)
        log.close()


def test_a_required_browser_test_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMGRAG_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="required"):
        skip_or_fail("no Chromium here")
    monkeypatch.setenv("SIMGRAG_REQUIRE_BROWSER", "0")
    with pytest.raises(pytest.skip.Exception):
        skip_or_fail("no Chromium here")
