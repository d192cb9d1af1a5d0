"""The HTTP service with the scripted fake LLM on the toy KG: every endpoint, the error bodies, the
API key, body limits, the bounded LLM queue, deadlines, readiness and access logs."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from simgrag.errors import ConfigError, LLMConnectionError
from simgrag.llm.base import ChatMessage, CompletionRequest, LLMResponse
from simgrag.pipeline import SimGRAG
from simgrag.serve import LLMQueue, ServeSettings, create_app
from simgrag.serve.queue import DeadlineExceededError, QueueFullError, QueueTimeoutError
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import TOY_TRIPLES

PATTERNS = {
    "who directed Titanic?": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "Titanic was directed by James Cameron.": [["Titanic", "directed by", "James Cameron"]],
}


def scripted(messages: list[ChatMessage]) -> str:
    """Pattern prompts get the pattern of their question; answer prompts an answer; verify a verdict."""
    question = messages[-1].content
    if "knowledge-graph pattern" in messages[0].content:
        for text, triples in PATTERNS.items():
            if text in question:
                return json.dumps({"triples": triples})
        return "I cannot do that"
    if "Supported" in messages[0].content:
        return "Supported"
    return "answer: James Cameron"


def make_engine(toy_dir: Path, llm: FakeLLM | None = None) -> SimGRAG:
    # the scripted LLM answers the pattern prompt: no analogies (they would skip that call)
    return SimGRAG(toy_dir, llm=llm or FakeLLM(scripted), claim_examples=None, pattern_options={"analogy": False})


@pytest.fixture
def client_for(toy_dir: Path) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(engine: SimGRAG | Callable[[], SimGRAG] | None = None, wait: bool = True,
             **settings: object) -> TestClient:
        app = create_app(engine or make_engine(toy_dir), ServeSettings(**settings))  # type: ignore[arg-type]
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        if wait:
            wait_ready(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def wait_ready(client: TestClient, timeout_s: float = 30.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = client.get("/v1/health")
        if response.json()["status"] != "loading":
            return dict(response.json())
        time.sleep(0.02)
    raise AssertionError("the app never became ready")


def test_health_and_kg_stats(client_for: Callable[..., TestClient]) -> None:
    client = client_for()
    health = client.get("/v1/health")
    assert health.status_code == 200
    assert health.json()["ready"] is True and health.json()["llm"] == "fake:scripted"
    stats = client.get("/v1/kg/stats").json()
    assert stats["triples"] == len(TOY_TRIPLES) and stats["relations"] == 5
    assert stats["relation_counts"]["directed_by"] == sum(r == "directed_by" for _, r, _ in TOY_TRIPLES)
    assert stats["dim"] == 64


def test_retrieve_returns_matches_with_distances(client_for: Callable[..., TestClient]) -> None:
    client = client_for()
    response = client.post("/v1/retrieve", json={"pattern": [["Titanic", "directed by", "UNKNOWN director 1"]],
                                                  "k": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["matches"]) == 2 and body["complete"] is True
    best = body["matches"][0]
    assert best["edges"][0]["triple"] == ["Titanic", "directed_by", "James Cameron"]
    assert {n["pattern_node"]: n["entity"] for n in best["nodes"]}["UNKNOWN director 1"] == "James Cameron"
    assert best["gsd"] <= body["matches"][1]["gsd"]


@pytest.mark.parametrize("payload", [
    {"pattern": [["Titanic", "directed by"]]},                       # a triple of two
    {"pattern": []},                                                  # no triple
    {"pattern": [["Titanic", "directed by", "X"]], "k": 0},           # k out of range
    {"pattern": [["Titanic", "directed by", "X"]], "surprise": 1},    # unknown field
    {"question": "x" * 3000},                                         # wrong endpoint body
])
def test_invalid_requests_are_422(client_for: Callable[..., TestClient], payload: dict[str, object]) -> None:
    assert client_for().post("/v1/retrieve", json=payload).status_code == 422


def test_ask_and_verify(client_for: Callable[..., TestClient]) -> None:
    client = client_for()
    ask = client.post("/v1/ask", json={"question": "who directed Titanic?", "k": 2})
    assert ask.status_code == 200, ask.text
    body = ask.json()
    assert body["short_answer"] == "James Cameron" and body["entities"] == ["James Cameron"]
    assert body["pattern"] == [["Titanic", "directed by", "UNKNOWN director 1"]]
    assert len(body["evidence"]["matches"]) == 2 and body["asked_node"] == "UNKNOWN director 1"
    assert {"pattern_s", "graph_s", "answer_s", "total_s"} <= set(body["timings"])
    # the honest labels reach the JSON: read from the KG (no LLM), an exact match the pattern reads in full
    assert body["llm_used"] is False and body["exact_match"] is True and body["pattern_reading"]["whole"] is True
    verify = client.post("/v1/verify", json={"claim": "Titanic was directed by James Cameron."})
    assert verify.status_code == 200, verify.text
    assert verify.json()["label"] == "Supported" and verify.json()["evidence"]["matches"]
    assert verify.json()["contradictions"] == []


def test_unusable_pattern_is_422_with_the_llm_text(client_for: Callable[..., TestClient]) -> None:
    response = client_for().post("/v1/ask", json={"question": "something the fake cannot parse"})
    assert response.status_code == 422
    assert response.json()["error"] == "pattern" and "I cannot do that" in response.json()["detail"]


def test_llm_backend_failure_is_502(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    llm = FakeLLM([LLMConnectionError("cannot reach http://127.0.0.1:9/v1")])
    response = client_for(make_engine(toy_dir, llm)).post("/v1/ask", json={"question": "who directed Titanic?"})
    assert response.status_code == 502 and "cannot reach" in response.json()["detail"]


def test_api_key(client_for: Callable[..., TestClient]) -> None:
    client = client_for(api_key="s3cret")
    pattern = {"pattern": [["Titanic", "directed by", "UNKNOWN director 1"]]}
    assert client.get("/v1/health").status_code == 200  # health stays public
    assert client.post("/v1/retrieve", json=pattern).status_code == 401
    assert client.post("/v1/retrieve", json=pattern, headers={"X-API-Key": "wrong"}).status_code == 401
    assert client.post("/v1/retrieve", json=pattern, headers={"X-API-Key": "s3cret"}).status_code == 200
    assert client.get("/v1/kg/stats", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_body_limit(client_for: Callable[..., TestClient]) -> None:
    client = client_for(max_body_bytes=300)
    big = {"question": "who directed Titanic? " + "please " * 100}
    response = client.post("/v1/ask", json=big)
    assert response.status_code == 413 and response.json()["error"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the streamed size is counted
        yield b'{"question": "'
        for _ in range(50):
            yield b"abcdefghij"
        yield b'"}'

    streamed = client.post("/v1/ask", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413


def slow_llm(release: threading.Event) -> FakeLLM:
    def answer(messages: list[ChatMessage]) -> str:
        release.wait(10)
        return scripted(messages)

    return FakeLLM(answer)


ASK = {"question": "who directed Titanic?"}


def _llm_queue(client: TestClient) -> dict[str, int]:
    return dict(client.get("/v1/health").json()["llm_queue"])


def _ask_until(pool: ThreadPoolExecutor, client: TestClient, state: str) -> Future[Any]:
    """An /v1/ask sent from ``pool``, returned once the LLM queue counts one request ``state`` (running,
    waiting)."""
    future = pool.submit(client.post, "/v1/ask", json=ASK)
    _wait_until(lambda: _llm_queue(client)[state] == 1)
    return future


@pytest.fixture
def blocked_client(toy_dir: Path, client_for: Callable[..., TestClient]
                   ) -> Callable[..., tuple[TestClient, threading.Event]]:
    """``blocked_client(**settings)``: a client whose LLM answers only once the returned event is set."""
    def make(**settings: object) -> tuple[TestClient, threading.Event]:
        release = threading.Event()
        return client_for(make_engine(toy_dir, slow_llm(release)), **settings), release

    return make


def test_full_llm_queue_answers_429_and_retrieval_still_works(
        blocked_client: Callable[..., tuple[TestClient, threading.Event]]) -> None:
    client, release = blocked_client(max_waiting=1)
    with ThreadPoolExecutor(3) as pool:
        first = _ask_until(pool, client, "running")
        second = _ask_until(pool, client, "waiting")
        third = client.post("/v1/ask", json=ASK)
        assert third.status_code == 429 and third.headers["Retry-After"]
        # retrieval does not wait behind the LLM
        pattern = {"pattern": [["Titanic", "directed by", "UNKNOWN director 1"]]}
        assert client.post("/v1/retrieve", json=pattern).status_code == 200
        release.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
    assert client.get("/v1/health").json()["llm_queue"]["rejected"] == 1


def test_deadline_while_running_is_504_and_while_queued_503(
        blocked_client: Callable[..., tuple[TestClient, threading.Event]]) -> None:
    client, release = blocked_client(timeout_s=0.5)
    with ThreadPoolExecutor(2) as pool:
        running = _ask_until(pool, client, "running")
        queued = client.post("/v1/ask", json=ASK)
        assert queued.status_code == 503 and queued.json()["error"] == "queue_timeout"
        assert running.result().status_code == 504
    release.set()
    _wait_until(lambda: _llm_queue(client)["running"] == 0)


def test_not_ready_then_ready(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    gate = threading.Event()

    def slow_build() -> SimGRAG:
        gate.wait(10)
        return make_engine(toy_dir)

    client = client_for(slow_build, wait=False)
    loading = client.get("/v1/health")
    assert loading.status_code == 503 and loading.json()["status"] == "loading"
    not_ready = client.post("/v1/ask", json={"question": "who directed Titanic?"})
    assert not_ready.status_code == 503 and not_ready.json()["error"] == "not_ready"
    gate.set()
    assert wait_ready(client)["status"] == "ready"


class GatedLoadLLM(FakeLLM):
    """An in-process model whose weights load until ``gate`` opens; a call meanwhile waits for the load
    (llama.cpp's backend takes one lock for both)."""

    def __init__(self) -> None:
        super().__init__(scripted)
        self.gate = threading.Event()
        self.loads = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            self.gate.wait(10)
            self.loads += 1

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        with self._lock:
            return super()._complete(request)


def test_ready_before_the_llm_loads_and_llm_questions_wait_for_it(client_for: Callable[..., TestClient],
                                                                 toy_dir: Path) -> None:
    """The server says ready once the index and embedder are warm; the in-process LLM loads after that
    (``llm_status``). A question that needs it meanwhile is answered once it has loaded, not refused."""
    llm = GatedLoadLLM()
    client = client_for(make_engine(toy_dir, llm), wait=False)
    health = wait_ready(client)
    assert health["status"] == "ready" and health["llm_status"] in ("pending", "loading")
    assert client.get("/v1/health").status_code == 200
    answered: list[object] = []
    asking = threading.Thread(target=lambda: answered.append(
        client.post("/v1/ask", json={"question": "who directed Titanic?"})))
    asking.start()
    asking.join(0.5)
    assert asking.is_alive() and not answered  # waits for the model, not refused
    llm.gate.set()
    asking.join(30)
    response = answered[0]
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    assert response.json()["short_answer"] == "James Cameron"  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while client.get("/v1/health").json()["llm_status"] != "ready" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.get("/v1/health").json()["llm_status"] == "ready" and llm.loads == 1


def test_failed_start_is_reported(client_for: Callable[..., TestClient], tmp_path: Path) -> None:
    client = client_for(lambda: SimGRAG(tmp_path / "missing.idx", llm=None), wait=False)
    health = wait_ready(client)
    assert health["status"] == "failed" and "missing.idx" in str(health["error"])
    assert client.get("/v1/health").status_code == 503


def test_access_log_and_request_id(client_for: Callable[..., TestClient], caplog: pytest.LogCaptureFixture) -> None:
    client = client_for()
    with caplog.at_level(logging.INFO, logger="simgrag.access"):
        response = client.get("/v1/kg/stats", headers={"X-Request-ID": "abc123"})
    assert response.headers["X-Request-ID"] == "abc123"
    records = [json.loads(r.getMessage()) for r in caplog.records if r.name == "simgrag.access"]
    expected = {"request_id": "abc123", "path": "/v1/kg/stats", "status": 200, "method": "GET"}
    assert expected.items() <= records[-1].items()
    assert records[-1]["duration_ms"] >= 0


def test_page_openapi_and_vendored_graph_library(client_for: Callable[..., TestClient]) -> None:
    client = client_for()
    page = client.get("/")
    assert page.status_code == 200 and "cytoscape.min.js" in page.text and 'data-testid="evidence"' in page.text
    library = client.get("/static/vendor/cytoscape.min.js")
    assert library.status_code == 200 and len(library.content) > 100_000
    assert client.get("/static/app.js").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/ask", "/v1/verify", "/v1/retrieve", "/v1/health", "/v1/kg/stats"} <= set(paths)


# -- the queue on its own ------------------------------------------------------------------------


def test_llm_queue_limits_and_timeouts() -> None:
    async def scenario() -> None:
        queue = LLMQueue(max_waiting=1)
        gate = threading.Event()
        first = asyncio.ensure_future(queue.run(lambda: gate.wait(5) and "first", 5))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(queue.run(lambda: "second", 5))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFullError):
            await queue.run(lambda: "third", 5)
        gate.set()
        assert await first == "first" and await second == "second"
        gate.clear()
        blocker = asyncio.ensure_future(queue.run(lambda: gate.wait(5), 5))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueTimeoutError):  # waited behind the blocker for its whole deadline
            await queue.run(lambda: "never", 0.1)
        gate.set()
        await blocker
        with pytest.raises(DeadlineExceededError):  # started, but slower than its deadline
            await queue.run(lambda: time.sleep(0.3), 0.05)
        assert queue.stats()["rejected"] == 1 and queue.stats()["timed_out"] == 2
        await asyncio.sleep(0.4)
        assert queue.stats()["running"] == 0 and queue.stats()["waiting"] == 0
        queue.close()

    asyncio.run(scenario())


def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition never held")
        time.sleep(0.02)


# -- other retrievers behind /v1/ask and /v1/verify ----------------------------------------------


def judged(messages: list[ChatMessage]) -> str:
    """``scripted``, but the verdict follows the evidence: Supported iff it holds Titanic's director
    and the claim names him."""
    if "Supported" not in messages[0].content:
        return scripted(messages)
    evidence, _, claim = messages[-1].content.partition("\nclaim: ")
    supported = "(Titanic, directed_by, James Cameron)" in evidence and "James Cameron" in claim
    return "verdict: Supported" if supported else "verdict: Refuted"


def test_serve_with_kaping_answers_ask_and_verify(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    llm = FakeLLM(judged)
    client = client_for(make_engine(toy_dir, llm), retriever="kaping")
    health = client.get("/v1/health").json()
    assert health["retriever"] == "kaping" and {"simgrag", "kaping", "paths"} <= set(health["retrievers"])
    ask = client.post("/v1/ask", json={"question": "who directed Titanic?"})
    assert ask.status_code == 200, ask.text
    body = ask.json()
    assert body["retriever"] == "kaping" and body["entities"] == ["James Cameron"] and body["pattern"] == []
    assert body["evidence"] is None and body["style"] == "kaping"  # no subgraphs: the page draws the context
    assert body["context"]["topic"]["names"] == ["Titanic"]
    assert ["Titanic", "directed_by", "James Cameron"] in body["context"]["triples"]
    assert len(body["context"]["scores"]) == len(body["context"]["triples"])
    assert {"link_s", "retrieve_s", "answer_s", "total_s"} <= set(body["timings"])
    assert health["per_request"]["kaping"] == [] and health["per_request"]["simgrag"] == ["k"]
    refused = client.post("/v1/ask", json={"question": "who directed Titanic?", "k": 2})
    assert refused.status_code == 400 and "cannot change per call" in refused.json()["detail"]
    for claim, label in (("Titanic was directed by James Cameron.", "Supported"),
                         ("Titanic was directed by Christopher Nolan.", "Refuted")):
        verify = client.post("/v1/verify", json={"claim": claim})
        assert verify.status_code == 200, verify.text
        assert verify.json()["label"] == label and verify.json()["retriever"] == "kaping"
        assert "(Titanic, directed_by, James Cameron)" in llm.calls[-1].messages[-1].content
        assert "answer_s" in verify.json()["timings"] and verify.json()["evidence_items"] > 0


def test_request_chooses_its_retriever_built_once(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    client = client_for()  # default: simgrag
    default = client.post("/v1/ask", json={"question": "who directed Titanic?"}).json()
    assert default["retriever"] == "simgrag" and default["pattern"]
    pool = client.app.state.engines  # type: ignore[attr-defined]
    assert "kaping" not in pool._built
    for _ in range(2):
        chosen = client.post("/v1/ask", json={"question": "who directed Titanic?", "retriever": "KAPING"})
        assert chosen.status_code == 200 and chosen.json()["retriever"] == "kaping"
        built = pool._built["kaping"]
    assert pool._built["kaping"] is built
    verify = client.post("/v1/verify", json={"claim": "Titanic was directed by James Cameron.", "retriever": "simgrag"})
    assert verify.json()["retriever"] == "simgrag" and verify.json()["evidence"]["matches"]


@pytest.mark.parametrize("name", ["triplets", "pcst", "paths", "none"])
def test_other_retrievers_fit_the_response_schema(client_for: Callable[..., TestClient], name: str) -> None:
    client = client_for()
    ask = client.post("/v1/ask", json={"question": "who directed Titanic?", "retriever": name})
    assert ask.status_code == 200, ask.text
    assert ask.json()["evidence"] is None and ask.json()["retriever"] == name
    if name == "none":
        assert ask.json()["context"]["triples"] == []
    else:
        assert ["Titanic", "directed_by", "James Cameron"] in ask.json()["context"]["triples"]
    verify = client.post("/v1/verify", json={"claim": "Titanic was directed by James Cameron.", "retriever": name})
    assert verify.status_code == 200, verify.text
    assert verify.json()["label"] == ("Not enough evidence" if name == "none" else "Supported")


def test_unknown_or_unavailable_retriever_is_400(client_for: Callable[..., TestClient]) -> None:
    client = client_for(retrievers=("simgrag", "kaping"))
    unknown = client.post("/v1/ask", json={"question": "who directed Titanic?", "retriever": "nosuch"})
    assert unknown.status_code == 400 and unknown.json()["error"] == "retriever"
    assert "unknown retriever 'nosuch'" in unknown.json()["detail"] and "simgrag, kaping" in unknown.json()["detail"]
    not_offered = client.post("/v1/verify", json={"claim": "x", "retriever": "pcst"})
    assert not_offered.status_code == 400 and "this server offers" in not_offered.json()["detail"]
    unavailable = client_for().post("/v1/ask", json={"question": "q", "retriever": "gsr"})  # no trained model
    assert unavailable.status_code == 400 and "not available on this server" in unavailable.json()["detail"]


def test_unknown_default_retriever_fails_at_creation(toy_dir: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown retriever"):
        create_app(make_engine(toy_dir), ServeSettings(retriever="nosuch"))


def test_cli_serve_passes_the_retriever(toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from typer.testing import CliRunner

    from simgrag import cli

    served: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    result = CliRunner().invoke(cli.app, ["serve", str(toy_dir), "--retriever", "gsr", "--retriever-model",
                                          "gsr=m.dir"])
    assert result.exit_code == 0, result.output
    pool = served[0].state.engines  # type: ignore[attr-defined]
    assert pool.default == "gsr" and pool.options["gsr"] == {"model": "m.dir"}
    refused = CliRunner().invoke(cli.app, ["serve", str(toy_dir), "--retriever", "kaping", "--examples", "x.yaml"])
    assert refused.exit_code == 2 and "takes no option 'examples'" in refused.output
    bad = CliRunner().invoke(cli.app, ["serve", str(toy_dir), "--retriever", "nosuch"])
    assert bad.exit_code == 2 and "Unknown retriever" in bad.output


def test_cli_serve_passes_pattern_options_and_refuses_bad_ones_before_serving(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` takes `--pattern-option`, `--no-grounding` and `--no-analogy` like `ask`; a bad key is refused
    before the server starts (the engine is built later, in the start-up thread)."""
    uvicorn = pytest.importorskip("uvicorn")
    from typer.testing import CliRunner

    from simgrag import cli, serve
    from simgrag.cli import qa

    builds: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    monkeypatch.setattr(serve, "create_app", lambda build, settings: builds.append(build))
    engine_kwargs: list[dict[str, object]] = []
    monkeypatch.setattr(qa, "make_engine", lambda *args, **kwargs: engine_kwargs.append(kwargs))
    ok = CliRunner().invoke(cli.app, ["serve", str(toy_dir), "--pattern-option", "n_dynamic_shots=1",
                                      "--no-analogy", "--no-grounding"])
    assert ok.exit_code == 0, ok.output
    builds[0]()  # type: ignore[operator]
    assert engine_kwargs[0]["pattern_option"] == ["n_dynamic_shots=1"]
    assert engine_kwargs[0]["analogy"] is False and engine_kwargs[0]["grounding"] is False
    builds.clear()
    bad = CliRunner().invoke(cli.app, ["serve", str(toy_dir), "--pattern-option", "nshots=1"])
    assert bad.exit_code != 0 and "does not apply to the pattern stage" in bad.output and not builds
    assert "Traceback" not in bad.output
