"""``"stream": true`` on /v1/ask and /v1/verify (NDJSON stage events, then the result), and the prompt
prefixes warmed at start-up, with the scripted fake LLM on the toy KG."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from simgrag.llm.base import ChatMessage, CompletionRequest, LLMResponse
from simgrag.pipeline import SimGRAG
from simgrag.serve import ServeSettings, create_app
from simgrag.serve.warm import prompt_families, warm_prompts
from simgrag.testing.llm import FakeLLM
from test_serve_api import ASK, make_engine, scripted, slow_llm, wait_ready


@pytest.fixture
def client_for(toy_dir: Path) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(engine: SimGRAG | None = None, **settings: Any) -> TestClient:
        client = TestClient(create_app(engine or make_engine(toy_dir), ServeSettings(**settings)))
        client.__enter__()
        clients.append(client)
        wait_ready(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def events_of(client: TestClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", path, json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in response.iter_lines() if line.strip()]


def test_ask_streams_its_stages_then_the_same_body(client_for: Callable[..., TestClient]) -> None:
    client = client_for()
    events = events_of(client, "/v1/ask", ASK)
    stages = [e["stage"] for e in events if e["event"] == "stage"]
    assert stages == ["question", "pattern", "search", "answer"]
    assert [e["event"] for e in events][-1] == "result" and len(events) == len(stages) + 1
    elapsed = [e["elapsed_s"] for e in events]
    assert elapsed == sorted(elapsed) and all(isinstance(e["label"], str) and e["label"] for e in events[:-1])
    plain = client.post("/v1/ask", json=ASK).json()  # the non-streaming body, unchanged
    streamed = events[-1]["result"]
    assert streamed["short_answer"] == plain["short_answer"] == "James Cameron"
    assert set(streamed) == set(plain) and streamed["pattern"] == plain["pattern"]


def test_verify_streams_the_claim_stages(client_for: Callable[..., TestClient]) -> None:
    events = events_of(client_for(), "/v1/verify", {"claim": "Titanic was directed by James Cameron."})
    assert [e.get("stage") for e in events[:-1]] == ["claim", "pattern", "search", "verify"]
    assert events[-1]["event"] == "result" and events[-1]["result"]["label"] == "Supported"


def test_another_retriever_streams_retrieve_not_pattern(client_for: Callable[..., TestClient]) -> None:
    events = events_of(client_for(), "/v1/ask", {**ASK, "retriever": "kaping"})
    assert [e.get("stage") for e in events[:-1]] == ["question", "retrieve", "answer"]
    assert events[-1]["result"]["retriever"] == "kaping"


def test_a_failure_after_the_start_is_the_last_event(client_for: Callable[..., TestClient]) -> None:
    """No pattern from the LLM: 422 without streaming; streamed, an error event with that status."""
    client = client_for()
    body = {"question": "what is the meaning of life?"}
    assert client.post("/v1/ask", json=body).status_code == 422
    events = events_of(client, "/v1/ask", body)
    assert events[-1]["event"] == "error" and events[-1]["status"] == 422
    assert events[-1]["error"]["error"] == "pattern" and events[0]["stage"] == "question"


def test_failures_before_the_start_keep_their_status(client_for: Callable[..., TestClient]) -> None:
    client = client_for(api_key="s3cret-key-for-tests")
    assert client.post("/v1/ask", json={**ASK, "stream": True}).status_code == 401
    headers = {"X-API-Key": "s3cret-key-for-tests"}
    unknown = client.post("/v1/ask", json={**ASK, "stream": True, "retriever": "nope"}, headers=headers)
    assert unknown.status_code == 400 and unknown.json()["error"] == "retriever"


def test_a_full_queue_refuses_a_stream_with_429(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    release = threading.Event()
    client = client_for(make_engine(toy_dir, slow_llm(release)), max_waiting=0)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(client.post, "/v1/ask", json=ASK)
        deadline = time.monotonic() + 10
        while client.get("/v1/health").json()["llm_queue"]["running"] != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = client.post("/v1/ask", json={**ASK, "stream": True})
        assert refused.status_code == 429 and refused.json()["error"] == "queue_full"
        release.set()
        assert running.result().status_code == 200


def test_stages_arrive_while_the_llm_works(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    """The pattern stage is on the wire before the LLM has answered: streamed, not buffered."""
    release = threading.Event()
    client = client_for(make_engine(toy_dir, slow_llm(release)))
    seen: list[dict[str, Any]] = []
    with client.stream("POST", "/v1/ask", json={**ASK, "stream": True}) as response:
        for line in response.iter_lines():
            if not line.strip():
                continue
            seen.append(json.loads(line))
            if seen[-1].get("stage") == "pattern":
                assert not release.is_set()
                release.set()  # only now may the LLM write the pattern
    assert [e.get("stage") for e in seen[:2]] == ["question", "pattern"] and seen[-1]["event"] == "result"


class LoadingLLM(FakeLLM):
    """An in-process model (it has ``load``): the server warms its prompt prefixes."""

    def __init__(self) -> None:
        super().__init__(scripted)
        self.prompts: list[list[ChatMessage]] = []

    def load(self) -> None:
        pass

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        self.prompts.append(list(request.messages))
        return super()._complete(request)


def test_every_prompt_family_is_warmed_at_start(toy_dir: Path, client_for: Callable[..., TestClient]) -> None:
    llm = LoadingLLM()
    engine = make_engine(toy_dir, llm)
    families = prompt_families(engine)
    assert set(families) == {"pattern", "claim pattern", "answer", "verify"}
    client = client_for(engine)
    deadline = time.monotonic() + 10
    while len(llm.prompts) < len(families) and time.monotonic() < deadline:
        time.sleep(0.01)
    systems = {prompt[0].content for prompt in llm.prompts}
    assert systems == {family()[0].content for family in families.values()}
    assert client.post("/v1/ask", json=ASK).json()["short_answer"] == "James Cameron"


def test_a_remote_llm_is_not_warmed(toy_dir: Path) -> None:
    llm = FakeLLM(scripted)  # no load(): not in-process
    assert warm_prompts(make_engine(toy_dir, llm)) == {} and not llm.calls
