"""CLI commands run for real: the real engine factories of ``ask``, ``verify``, ``bench qa``, ``bench claims``
and ``demo``, plus ``ls``, ``index`` and ``check``, against a scripted OpenAI-compatible chat server on
loopback (the real HTTP client) and indexes built by the CLI itself (hash embedder; the demo uses the
bundled sample KG with the real MiniLM embedder)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

PATTERNS = {
    "who directed titanic": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "who directed inception": [["Inception", "directed by", "UNKNOWN director 1"]],
    "titanic was directed by james cameron": [["Titanic", "directed by", "James Cameron"]],
}
ANSWERS = {"directed titanic": "James Cameron", "directed inception": "Christopher Nolan"}


def reply_for(messages: list[dict[str, str]]) -> str:
    """The scripted model: a pattern for the questions it knows, a verdict, or an answer."""
    system, last = messages[0]["content"], messages[-1]["content"].lower()
    if "knowledge-graph pattern" in system:
        for text, triples in PATTERNS.items():
            if text in last:
                return json.dumps({"triples": triples})
        facts = re.findall(r"\b(inception|titanic|memento|avatar|juno)\b", last)
        if facts:  # a generated claim about a film: one fact with an unknown
            return json.dumps({"triples": [[facts[0].title(), "related to", "UNKNOWN thing 1"]]})
        return "no idea"
    if "Supported" in system:
        return "verdict: Supported"
    film = next((f for f in ANSWERS if f in last), None)
    return f"answer: {ANSWERS[film]}" if film else "answer: not found"


class ChatServer:
    """``POST /v1/chat/completions`` answered by :func:`reply_for`; counts calls."""

    def __init__(self) -> None:
        self.calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                server.calls += 1
                text = reply_for(body.get("messages", []))
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model", "m"),
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    result = CliRunner().invoke(app, ["index", str(write_toy_kg(root / "toy.txt")), "-o", str(root / "toy.idx"),
                                      "--embedder", "hash:64"])
    assert result.exit_code == 0, result.output
    assert "Indexed 17 triples" in result.output
    return root / "toy.idx"


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def llm_args(chat: ChatServer) -> list[str]:
    return ["--llm", "openai:scripted", "--base-url", chat.url, "--api-key", "k"]


def test_ls_lists_every_registry() -> None:
    result = run("ls")
    assert result.exit_code == 0, result.output
    for name in ("minilm", "hash", "exact", "faiss-hnsw", "faiss-ivfpq", "milvus", "llamacpp", "openai", "ollama"):
        assert name in result.output, name


def test_check_passes_on_a_fresh_index_and_fails_on_a_damaged_one(toy_index: Path, tmp_path: Path) -> None:
    from simgrag.testing.corrupt import copy_index

    assert run("check", str(toy_index)).exit_code == 0
    damaged = tmp_path / "damaged.idx"
    copy_index(toy_index, damaged, "relation_owner.npy")
    (damaged / "relation_owner.npy").write_bytes((damaged / "relation_owner.npy").read_bytes()[:-1] + b"\x07")
    result = run("check", str(damaged), "--json")
    assert result.exit_code == 2
    report = json.loads(result.output)
    assert not report["ok"] and any("relation_owner.npy" in p for p in report["problems"])


def test_ask_and_verify_through_the_real_engine_factory(toy_index: Path, chat: ChatServer) -> None:
    ask = run("ask", str(toy_index), "who directed Titanic?", *llm_args(chat), "--json")
    assert ask.exit_code == 0, ask.output
    body = json.loads(ask.output)
    assert body["entities"] == ["James Cameron"] and body["evidence"]["complete"] is True
    assert body["evidence"]["deadline_s"] == 10.0  # the default deadline, reported
    verify = run("verify", str(toy_index), "Titanic was directed by James Cameron.", *llm_args(chat), "--json",
                 "--deadline", "2.5")
    assert verify.exit_code == 0, verify.output
    body = json.loads(verify.output)
    assert body["label"] == "Supported" and body["evidence"]["deadline_s"] == 2.5
    bad = run("ask", str(toy_index), "who directed Titanic?", *llm_args(chat), "--deadline", "nan")
    assert bad.exit_code == 2 and "deadline_s" in bad.output


def test_bench_qa(toy_index: Path, chat: ChatServer, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"question": "who directed Titanic?", "answers": ["James Cameron"]},
        {"question": "who directed Inception?", "answers": ["Christopher Nolan"]},
        {"question": "something unknown", "answers": ["x"]},
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "qa.jsonl"
    result = run("bench", "qa", "--index", str(toy_index), "--questions", str(questions), "-o", str(out),
                 *llm_args(chat), "--llm-cache", "none")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and [r["hit"] for r in rows] == [True, True, False]
    assert rows[2]["stage"] == "pattern"


def _tiny_metaqa(root: Path) -> Path:
    """A MetaQA-shaped folder around the toy KG: kb.txt and a few dev questions per hop."""
    root.mkdir(parents=True)
    (root / "kb.txt").write_text("".join("|".join(t) + "\n" for t in TOY_TRIPLES), encoding="utf-8")
    lines = {1: ["who directed [Titanic]\tJames Cameron", "who directed [Inception]\tChristopher Nolan"],
             2: ["who acted in the films directed by [James Cameron]\tLeonardo DiCaprio|Kate Winslet"],
             3: ["when were the films starred by [Ellen Page] directed by [x] released\t2010"]}
    chains = {1: "movie_to_director", 2: "director_to_movie_to_actor", 3: "actor_to_movie_to_director_to_movie"}
    for hop, qs in lines.items():
        (root / f"{hop}-hop" / "vanilla").mkdir(parents=True)
        (root / f"{hop}-hop" / "vanilla" / "qa_dev.txt").write_text("\n".join(qs) + "\n", encoding="utf-8")
        (root / f"{hop}-hop" / "qa_dev_qtype.txt").write_text("\n".join([chains[hop]] * len(qs)) + "\n",
                                                               encoding="utf-8")
    return root


def test_bench_claims(toy_index: Path, chat: ChatServer, tmp_path: Path) -> None:
    metaqa = _tiny_metaqa(tmp_path / "MetaQA")
    out = tmp_path / "claims.jsonl"
    result = run("bench", "claims", "--metaqa-dir", str(metaqa), "--index", str(toy_index), "-o", str(out),
                 "--n", "10", *llm_args(chat), "--llm-cache", "none")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    claims = [json.loads(line) for line in out.with_suffix(".claims.jsonl").read_text().splitlines()]
    assert len(rows) == len(claims) >= 4
    assert {c["label"] for c in claims} == {"Supported", "Refuted"}
    assert "accuracy" in result.output.lower()


@pytest.mark.slow
def test_demo_builds_the_sample_index_and_answers(chat: ChatServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMGRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_BASE_URL", chat.url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    result = run("demo", "Who directed Inception?", "--llm", "openai:scripted", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.output[result.output.index("{"):])
    assert body["entities"] == ["Christopher Nolan"]
    assert list((tmp_path / "cache").glob("sample-*.idx/manifest.json"))
