"""The OpenAI-compatible chat endpoint driven by the official ``openai`` client against a real
uvicorn server on loopback: plain and streaming replies with the evidence attached, claims, the
models list, and the server's API key, LLM queue and body limit applied to chat too."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("pyoxigraph")
pytest.importorskip("openai")

import openai
import uvicorn

from simgrag.pipeline import SimGRAG
from simgrag.serve import ServeSettings, create_app
from simgrag.testing.llm import FakeLLM
from simgrag.testing.loopback import free_port, uvicorn_in_thread
from simgrag.testing.rdf import entity_iri, relation_iri
from test_serve_api import scripted, slow_llm

KEY = "chat-test-key"
QUESTION = [{"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Hi! Ask me about movies."},
            {"role": "user", "content": "who directed Titanic?"}]


@pytest.fixture
def serve(toy_rdf_index: Path) -> Iterator[Callable[..., str]]:
    """Start the app under uvicorn on 127.0.0.1 (in a thread); returns the base URL."""
    with contextlib.ExitStack() as servers:

        def start(llm: FakeLLM | None = None, **settings: object) -> str:
            engine = SimGRAG(toy_rdf_index, llm=llm or FakeLLM(scripted), claim_examples=None)
            app = create_app(engine, ServeSettings(api_key=KEY, **settings))  # type: ignore[arg-type]
            url = servers.enter_context(uvicorn_in_thread(app))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/v1/health").status_code == 200:
                        return url
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
            raise AssertionError("the server did not become ready")

        yield start


def client(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_plain_reply_with_evidence(serve: Callable[..., str]) -> None:
    reply = client(serve()).chat.completions.create(model="simgrag", messages=QUESTION)  # type: ignore[arg-type]
    content = reply.choices[0].message.content or ""
    assert reply.choices[0].finish_reason == "stop" and reply.model == "simgrag"
    assert content.startswith("James Cameron\n\nEvidence from the knowledge graph:\n1. (Titanic, directed_by, "
                              "James Cameron)")
    assert f"<{entity_iri('Titanic')}> <{relation_iri('directed_by')}> <{entity_iri('James Cameron')}>" in content
    extra = reply.model_extra or {}
    result = extra["simgrag"]
    assert result["question"] == "who directed Titanic?"  # the last user turn
    assert result["pattern"] == [["Titanic", "directed by", "UNKNOWN director 1"]]
    best = result["evidence"]["matches"][0]
    assert best["edges"][0]["triple"] == ["Titanic", "directed_by", "James Cameron"]
    assert best["edges"][0]["iris"][1] == relation_iri("directed_by")
    assert reply.usage is not None and reply.usage.total_tokens >= 0


def test_streaming_reply(serve: Callable[..., str]) -> None:
    url = serve()
    plain = client(url).chat.completions.create(model="simgrag", messages=QUESTION)  # type: ignore[arg-type]
    stream = client(url).chat.completions.create(model="simgrag", messages=QUESTION, stream=True)  # type: ignore[arg-type]
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == plain.choices[0].message.content
    assert len(chunks) > 3  # role, the lines of the answer and evidence, the final chunk
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert (last.model_extra or {})["simgrag"]["evidence"]["matches"][0]["edges"][0]["triple"][2] == "James Cameron"


def test_claims_models_and_options(serve: Callable[..., str]) -> None:
    chat = client(serve())
    verdict = chat.chat.completions.create(
        model="simgrag-verify", messages=[{"role": "user", "content": "Titanic was directed by James Cameron."}])
    assert (verdict.choices[0].message.content or "").startswith("Supported")
    assert (verdict.model_extra or {})["simgrag"]["label"] == "Supported"
    bare = chat.chat.completions.create(model="simgrag", messages=QUESTION, temperature=0.2, max_tokens=50,  # type: ignore[arg-type]
                                        extra_body={"evidence": False, "k": 1})
    assert bare.choices[0].message.content == "James Cameron"
    assert len((bare.model_extra or {})["simgrag"]["evidence"]["matches"]) == 1
    assert {m.id for m in chat.models.list()} == {"simgrag", "simgrag-verify"}
    with pytest.raises(openai.NotFoundError, match="unknown model 'gpt-4o'"):
        chat.chat.completions.create(model="gpt-4o", messages=QUESTION)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="no user message"):
        chat.chat.completions.create(model="simgrag", messages=[{"role": "system", "content": "hi"}])


def test_api_key_queue_and_body_limit(serve: Callable[..., str]) -> None:
    release = threading.Event()
    url = serve(slow_llm(release), max_waiting=0)
    with pytest.raises(openai.AuthenticationError):
        client(url, key="wrong").chat.completions.create(model="simgrag", messages=QUESTION)  # type: ignore[arg-type]
    chat = client(url)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(chat.chat.completions.create, model="simgrag", messages=QUESTION)
        deadline = time.monotonic() + 10
        while httpx.get(url + "/v1/health").json()["llm_queue"]["running"] != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(openai.RateLimitError):  # the LLM is busy and no request may wait
            chat.chat.completions.create(model="simgrag", messages=QUESTION)  # type: ignore[arg-type]
        release.set()
        assert (first.result().choices[0].message.content or "").startswith("James Cameron")
    huge = [{"role": "user", "content": "x" * (70 * 1024)}]
    with pytest.raises(openai.APIStatusError) as caught:
        chat.chat.completions.create(model="simgrag", messages=huge)  # type: ignore[arg-type]
    assert caught.value.status_code == 413


def test_the_page_links_the_iris(toy_rdf_index: Path, tmp_path: Path) -> None:
    """Headless Chromium on the evidence page of an RDF KG: entities and relations link to their IRIs."""
    from test_serve_live import artifacts_dir, run_browser

    engine = SimGRAG(toy_rdf_index, llm=FakeLLM(scripted), claim_examples=None)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine, ServeSettings()), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        report = run_browser(f"http://127.0.0.1:{port}", "who directed Titanic?", ["Titanic", "James Cameron"],
                             artifacts_dir(tmp_path) / "evidence-page-rdf-iris.png")
    finally:
        server.should_exit = True
        thread.join(10)
    links = {tuple(link) for link in report["iriLinks"]}  # type: ignore[attr-defined]
    assert ("James Cameron", entity_iri("James Cameron")) in links  # the mapping table
    assert ("directed_by", relation_iri("directed_by")) in links  # the triples table
    assert ("Titanic", entity_iri("Titanic")) in links
