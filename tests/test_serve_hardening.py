"""The HTTP service against hostile clients: auth before body validation, no empty key, redacted
health, JSON error bodies for any input, deadlines from arrival, slow bodies, a connection cap and
concurrent hostile retrieves (the last three against a real uvicorn server on loopback)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from simgrag.errors import ConfigError
from simgrag.index.directory import build_index_dir
from simgrag.match.limits import UNANCHORED_MAX_STEPS
from simgrag.pipeline import SimGRAG
from simgrag.serve import ServeSettings, create_app
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.hostile import hostile_pattern, hub_kg, normal_pattern, unanchored_pattern
from simgrag.testing.llm import FakeLLM
from simgrag.testing.loopback import uvicorn_in_thread

EMBEDDER = HashEmbedder(dim=32)


@pytest.fixture(scope="module")
def hub_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    kb = root / "hub.txt"
    kb.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in hub_kg()), encoding="utf-8")
    build_index_dir(kb, root / "hub.idx", embedder=EMBEDDER)
    return root / "hub.idx"


def engine_for(index: Path, deadline_s: float = 0.3) -> SimGRAG:
    engine = SimGRAG(index, llm=FakeLLM([]), embedder=EMBEDDER, examples="metaqa")  # the LLM is never called
    engine.retrieval = replace(engine.retrieval, deadline_s=deadline_s)
    return engine


def client(index: Path, **settings: object) -> TestClient:
    test_client = TestClient(create_app(engine_for(index), ServeSettings(**settings)),  # type: ignore[arg-type]
                             raise_server_exceptions=False)
    test_client.__enter__()
    deadline = time.monotonic() + 30
    while test_client.get("/v1/health").json()["status"] == "loading" and time.monotonic() < deadline:
        time.sleep(0.02)
    return test_client


def test_key_is_checked_before_the_body(hub_index: Path) -> None:
    c = client(hub_index, api_key="s3cret")
    for body in (b"{not json", b'{"pattern": 5}', json.dumps({"pattern": normal_pattern()}).encode()):
        response = c.post("/v1/retrieve", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 401 and response.json()["error"] == "unauthorized", body
    assert c.post("/v1/retrieve", content=b"{not json", headers={"X-API-Key": "s3cret"}).status_code == 422
    ok = c.post("/v1/retrieve", json={"pattern": normal_pattern()}, headers={"X-API-Key": "s3cret"})
    assert ok.status_code == 200


@pytest.mark.parametrize("key", ["", "   "])
def test_empty_key_is_refused(key: str, hub_index: Path) -> None:
    from typer.testing import CliRunner

    from simgrag.cli import app

    with pytest.raises(ConfigError, match="empty"):
        ServeSettings(api_key=key)
    result = CliRunner().invoke(app, ["serve", str(hub_index), "--auth-key", key, "--llm", "none"])
    assert result.exit_code == 2 and "empty" in result.output


def test_unauthenticated_health_hides_path_and_error_text(tmp_path: Path) -> None:
    missing = tmp_path / "secret-place" / "missing.idx"
    app = create_app(lambda: SimGRAG(missing, llm=None), ServeSettings(api_key="k"))
    with TestClient(app) as c:
        deadline = time.monotonic() + 30
        while c.get("/v1/health").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.02)
        public = c.get("/v1/health").json()
        assert public["status"] == "failed" and str(tmp_path) not in json.dumps(public)
        assert public["error"].startswith("IndexDirError (details in the server log")
        private = c.get("/v1/health", headers={"X-API-Key": "k"}).json()
        assert str(missing) in private["error"]


@pytest.mark.parametrize("body", [
    b'{"pattern": [["e1", "linked to", "UNKNOWN x 1"]], "k": NaN}',
    b'{"pattern": [["e1", "linked to", "UNKNOWN x 1"]], "k": 1e11}',
    b'{"pattern": [["e1", "linked to", "UNKNOWN x 1"]], "k": 2.5}',
    b'{"pattern": [["\\ud800x", "linked to", "UNKNOWN x 1"]]}',
    b'{"question": "\\ud800x"}',
    b'[' * 5000,
    b'{"pattern": [["e1", "linked to", "UNKNOWN x 1"]], "k": Infinity}',
    b"\xff\xfe not utf-8",
])
def test_bad_bodies_get_the_json_error_body(hub_index: Path, body: bytes) -> None:
    c = client(hub_index)
    for path in ("/v1/retrieve", "/v1/ask"):
        response = c.post(path, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code in (400, 422), (path, response.status_code, response.text)
        assert set(response.json()) == {"error", "detail"}
    question = c.post("/v1/ask", content=b'{"question": "\\ud800x"}', headers={"Content-Type": "application/json"})
    assert question.json()["error"] == "invalid_request" and "question" in question.json()["detail"]


def test_unanchored_pattern_is_refused_and_a_hostile_one_stops_at_its_deadline(hub_index: Path) -> None:
    c = client(hub_index)
    refused = c.post("/v1/retrieve", json={"pattern": unanchored_pattern()})
    assert refused.status_code == 422 and "no known entity" in refused.json()["detail"]
    typed = [[f"UNKNOWN thing {i}", "UNKNOWN relation", f"UNKNOWN thing {i + 1}"] for i in range(1, 5)]
    capped = c.post("/v1/retrieve", json={"pattern": typed})  # typed, but the KG has no types: capped
    assert capped.status_code == 200 and capped.json()["complete"] is False
    assert UNANCHORED_MAX_STEPS <= capped.json()["steps"] < 2 * UNANCHORED_MAX_STEPS
    start = time.monotonic()
    hostile = c.post("/v1/retrieve", json={"pattern": hostile_pattern()})
    assert hostile.status_code == 200 and time.monotonic() - start < 5
    body = hostile.json()
    assert body["complete"] is False and body["deadline_s"] == pytest.approx(0.3, abs=0.05)
    assert body["lower_bound"] is not None


def test_retrieval_pool_is_bounded(hub_index: Path) -> None:
    c = client(hub_index, max_retrievals=1, max_retrieval_waiting=0)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(c.post, "/v1/retrieve", json={"pattern": hostile_pattern()})
        time.sleep(0.1)
        second = c.post("/v1/retrieve", json={"pattern": normal_pattern()})
        assert first.result().status_code == 200
    assert second.status_code == 429 and second.json()["error"] == "queue_full"


# -- a real server on loopback ----------------------------------------------------------------------



@contextmanager
def serving(index: Path, settings: ServeSettings, **config: object) -> Iterator[str]:
    with uvicorn_in_thread(create_app(engine_for(index), settings), **config) as url:
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/v1/health").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.05)
        yield url


@pytest.fixture
def live(hub_index: Path) -> Iterator[str]:
    with serving(hub_index, ServeSettings(body_timeout_s=0.5, timeout_s=20.0), limit_concurrency=12,
                 timeout_keep_alive=2) as url:
        yield url


def test_deadline_counts_from_arrival(hub_index: Path) -> None:
    """The time a slow body takes to arrive counts against the request's timeout."""
    body = json.dumps({"pattern": normal_pattern()}).encode()
    head = (b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    with serving(hub_index, ServeSettings(timeout_s=0.3, body_timeout_s=5.0)) as url:
        port = int(url.rsplit(":", 1)[1])
        replies = []
        for pause in (0.0, 0.5):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.settimeout(5)
                sock.sendall(head + body[:5])
                time.sleep(pause)
                sock.sendall(body[5:])
                replies.append(_read_reply(sock))
    assert replies[0].startswith("HTTP/1.1 200")
    assert replies[1].startswith("HTTP/1.1 503") and "queue_timeout" in replies[1]


def _read_reply(sock: socket.socket) -> str:
    """Everything the server sends until it closes the connection or the body is complete."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None)
        if not chunk or (length is not None and len(body) >= length):
            return data.decode()


def _slow_body(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"pattern\"")
    return sock


def test_slow_body_gets_408_and_connections_are_capped(live: str) -> None:
    port = int(live.rsplit(":", 1)[1])
    sock = _slow_body(port)
    sock.settimeout(5)
    start = time.monotonic()
    reply = _read_reply(sock)
    assert reply.startswith("HTTP/1.1 408") and "body_timeout" in reply and time.monotonic() - start < 3
    sock.close()
    held = []
    for _ in range(12):  # limit_concurrency=12: the 12 slow bodies fill the server's connections
        held.append(_slow_body(port))
        time.sleep(0.02)
    try:
        response = httpx.get(f"{live}/v1/health", timeout=5)
        assert response.status_code == 503  # uvicorn refuses a request over the connection cap
    finally:
        for s in held:
            s.close()
    time.sleep(0.3)
    assert httpx.get(f"{live}/v1/health", timeout=5).status_code == 200


def test_normal_retrieves_are_answered_while_hostile_ones_run(live: str) -> None:
    hostile = {"pattern": hostile_pattern()}
    with ThreadPoolExecutor(8) as pool, httpx.Client(timeout=20) as http:
        attacks = [pool.submit(http.post, f"{live}/v1/retrieve", json=hostile) for _ in range(8)]
        time.sleep(0.05)
        latencies = []
        for i in range(1, 4):
            start = time.monotonic()
            response = http.post(f"{live}/v1/retrieve", json={"pattern": normal_pattern(f"e{i}")})
            latencies.append(time.monotonic() - start)
            assert response.status_code == 200 and response.json()["complete"] is True
            assert response.json()["matches"]
        results = [a.result() for a in attacks]
    assert all(r.status_code == 200 and r.json()["complete"] is False for r in results)
    assert max(latencies) < 5.0, latencies
