"""The real local model: embedded through llama-cpp-python, and behind a real llama.cpp
OpenAI-compatible server on loopback (``python -m llama_cpp.server``).

Skipped, with the reason, when llama-cpp-python (or its server extra) is missing or the model cannot
be obtained. The server tests run in file order; the client-timeout test comes last because the
server keeps generating after the client has gone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from simgrag.errors import ConfigError, LLMConnectionError, LLMError, LLMTimeoutError
from simgrag.llm.base import ChatMessage
from simgrag.llm.batch_costs import PROBE_SIZES, BatchCosts
from simgrag.llm.llamacpp import LlamaCppLLM, llama_cpp_available
from simgrag.llm.lookup_decoding import CHEAP_BATCH_SIZES
from simgrag.llm.openai_compat import OpenAICompatLLM
from simgrag.testing.loopback import free_port

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(
        not llama_cpp_available(),
        reason="llama-cpp-python is not installed (pip install 'simgrag[llamacpp]')",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
    "required": ["country", "capital"],
}
ASK = [
    ChatMessage("system", "You answer with JSON only."),
    ChatMessage("user", "What is the capital of France? Give the country and its capital."),
]
SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


@pytest.fixture(scope="session")
def local_llm(embedded_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppLLM]:
    llm = LlamaCppLLM(embedded_model, n_ctx=2048, kv_cache_dir=tmp_path_factory.mktemp("llama-kv"))
    yield llm
    llm.close()


def test_a_prompt_longer_than_the_context_is_a_clear_error_and_the_model_still_answers(
        local_llm: LlamaCppLLM) -> None:
    long = [ChatMessage("user", "Repeat nothing. " + "Tove Norcott-Stavely; " * 800)]
    with pytest.raises(LLMError, match=r"the prompt has \d+ tokens, more than its context window of 2048"):
        local_llm.complete(long, max_tokens=8)
    # a prompt that fits but leaves less room than max_tokens asks for: the answer is cut to the window, no failure
    near = [ChatMessage("user", "Say OK. " + "Tove Norcott-Stavely; " * 180)]
    assert local_llm.complete(near, max_tokens=4000).text is not None
    assert "Paris" in local_llm.complete(ASK, max_tokens=40).text


def test_embedded_model_json_schema(local_llm: LlamaCppLLM) -> None:
    r = local_llm.complete(ASK, json_schema=SCHEMA, max_tokens=60)
    data = json.loads(r.text)
    assert set(data) >= {"country", "capital"} and "paris" in data["capital"].lower()
    assert r.prompt_tokens > 10 and 0 < r.completion_tokens <= 60 and not r.cached
    assert local_llm.name == f"llamacpp:{Path(local_llm.model_path or '').stem}"


def test_embedded_model_reuses_prompt_prefix(local_llm: LlamaCppLLM) -> None:
    """The cached prefix survives a call with another system prompt: the one context (a whole model instance,
    ~1.9 GB) is switched back by loading the prefix's saved state, not by evaluating it again."""
    facts = " ".join(f"Fact {i}: the film number {i} was directed by person number {i}." for i in range(25))
    prefix = [ChatMessage("system", "You answer questions about films. " + facts)]
    cold = local_llm.complete([*prefix, ChatMessage("user", "Who directed film 3?")], max_tokens=1)
    local_llm.complete([ChatMessage("system", "You are another task."),
                        ChatMessage("user", "Something else entirely.")], max_tokens=1)
    before = dict(local_llm.prefix_stats)
    warm = local_llm.complete([*prefix, ChatMessage("user", "Who directed film 7?")], max_tokens=1)
    assert cold.prompt_tokens > 300 and warm.prompt_tokens > 300
    # counted, not timed (a busy machine makes any latency ratio flaky): the warm call loaded its prefix
    # from the KV store into the one context, it did not evaluate it again
    assert local_llm.max_contexts == 1 and len(local_llm._contexts) == 1
    assert local_llm.prefix_stats["loaded"] == before["loaded"] + 1, local_llm.prefix_stats
    assert local_llm.prefix_stats["evaluated"] == before["evaluated"], local_llm.prefix_stats


def test_embedded_model_scores_text_and_the_kept_prefix_does_not_change_a_score(local_llm: LlamaCppLLM) -> None:
    paris, tokyo = local_llm.score_continuations("The capital of France is", [("", " Paris."), ("", " Tokyo.")])
    assert paris > tokyo + 3 and paris < 0
    local_llm.complete(ASK, max_tokens=5)  # the context now holds another prompt
    (again,) = local_llm.score_continuations("The capital of France is", [("", " Paris.")])
    (split,) = local_llm.score_continuations("The capital", [(" of France is", " Paris.")])
    assert again == pytest.approx(paris, abs=0.05) and split == pytest.approx(paris, abs=0.05)
    assert local_llm.score_continuations("x", []) == []


def test_embedded_model_scores_replies_after_its_chat_template(local_llm: LlamaCppLLM) -> None:
    """The direct score: log P(reply | the chat prompt as ``complete`` sends it); the same after another call."""
    chat = [ChatMessage("user", "What is the capital of France? Answer with the city's name only.")]
    paris, tokyo = local_llm.score_replies(chat, ["Paris", "Tokyo"])
    assert paris > tokyo + 3 and paris < 0
    written = local_llm.complete(chat, max_tokens=4, temperature=0.0).text
    assert written.strip().startswith("Paris")
    (again,) = local_llm.score_replies(chat, ["Paris"])
    assert again == pytest.approx(paris, abs=0.05)
    assert local_llm.score_replies(chat, []) == []


def test_embedded_model_samples_one_reply_per_seed(local_llm: LlamaCppLLM) -> None:
    """Sampled readings: one reply per seed; near temperature 0 every seed gives the greedy reply. (The same seed
    need not give the same text after the prompt was evaluated another way — a reused prefix rounds differently —
    so the call cache is what keeps samples fixed between runs.)"""
    chat = [ChatMessage("user", "Name one colour. One word.")]
    samples = local_llm.sample(chat, [1, 2, 3, 4], temperature=1.2, max_tokens=6)
    assert len(samples) == 4 and all(r.text.strip() and r.completion_tokens > 0 for r in samples)
    greedy = local_llm.complete(chat, max_tokens=6, temperature=0.0).text
    cold = local_llm.sample(chat, [5, 6], temperature=0.01, max_tokens=6)
    assert [r.text for r in cold] == [greedy, greedy]
    for temperature in (0.0, float("nan")):
        with pytest.raises(ConfigError, match="temperature above 0"):
            local_llm.sample(chat, [1], temperature=temperature)
    for seed in (-1, 2**32, 1.5, True):
        with pytest.raises(ConfigError, match="seeds must be integers"):
            local_llm.sample(chat, [seed], temperature=0.8)  # type: ignore[list-item]


def test_the_channel_prefers_the_pattern_the_question_asks_with_the_real_model(local_llm: LlamaCppLLM) -> None:
    """The mistake the channel choice is for: a one-hop question written with a copied second hop."""
    from simgrag.grounding.channel import channel_prompt
    from simgrag.pattern.examples import parse_examples

    examples = parse_examples("""
relations: [directed_by, release_year]
examples:
  - question: when were the movies directed by Jason Reitman released ?
    triples: [[UNKNOWN movie 1, directed_by, Jason Reitman], [UNKNOWN movie 1, release_year, UNKNOWN year 1]]
  - question: what year was Memento released ?
    triples: [[Memento, release_year, UNKNOWN year 1]]
  - question: who directed Titanic ?
    triples: [[Titanic, directed_by, UNKNOWN person 1]]
""").examples
    one = "Triples: [UNKNOWN movie 1, directed_by, Ridley Scott]\nANSWER: UNKNOWN movie 1\nQuestion:"
    two = ("Triples: [UNKNOWN movie 1, directed_by, Ridley Scott]; [UNKNOWN movie 1, release_year, UNKNOWN year 1]"
           "\nANSWER: UNKNOWN year 1\nQuestion:")
    asked_one = " which movies did Ridley Scott direct ?\n"
    asked_two = " when were the movies directed by Ridley Scott released ?\n"
    scores = local_llm.score_continuations(channel_prompt(examples), [(one, asked_one), (two, asked_one),
                                                                      (one, asked_two), (two, asked_two)])
    assert scores[0] > scores[1] and scores[3] > scores[2]


def test_embedded_model_loads_saved_prefix_state(embedded_model: Path, tmp_path: Path) -> None:
    """A new model instance (as in a new process) loads the prefix's KV state from disk instead of
    evaluating it, and answers exactly as the instance that evaluated it."""
    facts = " ".join(f"Fact {i}: the film number {i} was directed by person number {i}." for i in range(12))
    shots = [ChatMessage("system", "Answer with the person only. " + facts),
             ChatMessage("user", "Who directed film 2?"), ChatMessage("assistant", "person number 2")]
    ask = [*shots, ChatMessage("user", "Who directed film 5?")]
    first = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache_dir=tmp_path)
    a = first.complete(ask, max_tokens=8)
    first.close()
    second = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache_dir=tmp_path)
    b = second.complete(ask, max_tokens=8)
    c = second.complete([*ask[:-1], ChatMessage("user", "Who directed film 9?")], max_tokens=8)
    second.close()
    assert first.prefix_stats == {"in_context": 0, "loaded": 0, "partial": 0, "evaluated": 1}
    assert second.prefix_stats == {"in_context": 1, "loaded": 1, "partial": 0, "evaluated": 0}
    assert a.text == b.text and "5" in a.text and "9" in c.text
    assert len(list(tmp_path.glob("*.kv"))) == 1


@pytest.mark.parametrize("hinted", [True, False])
def test_embedded_model_loads_the_shared_part_of_a_new_prefix(embedded_model: Path, tmp_path: Path,
                                                              hinted: bool) -> None:
    """Prompts that share a fixed part and differ in a dynamic shot. The state at the end of the fixed part
    is saved once — at once when its last message is marked ``cache_after``, else when a second prompt parts
    from the first there — and a new instance asking with a shot never seen loads it and evaluates only the
    rest, answering as an instance without any cache does."""
    facts = " ".join(f"Fact {i}: the film number {i} was directed by person number {i}." for i in range(12))
    fixed = [ChatMessage("system", "Answer with the person only. " + facts),
             ChatMessage("user", "Who directed film 2?"), ChatMessage("assistant", "person number 2", hinted)]

    def ask(shot: int, film: int) -> list[ChatMessage]:
        return [*fixed, ChatMessage("user", f"Who directed film {shot}?"),
                ChatMessage("assistant", f"person number {shot}"), ChatMessage("user", f"Who directed film {film}?")]

    first = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache_dir=tmp_path)
    first.complete(ask(3, 5), max_tokens=8)
    assert len(list(tmp_path.glob("*.kv"))) == (2 if hinted else 1)  # the whole prefix (and the fixed part)
    first.complete(ask(4, 6), max_tokens=8)  # parts from the first prompt after `fixed`: that state is kept
    first.close()
    assert len(list(tmp_path.glob("*.kv"))) == 3  # two whole prefixes and the shared part
    second = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache_dir=tmp_path)
    warm = second.complete(ask(8, 9), max_tokens=8)
    second.close()
    assert second.prefix_stats == {"in_context": 0, "loaded": 0, "partial": 1, "evaluated": 1}
    cold = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache=False)
    assert cold.complete(ask(8, 9), max_tokens=8).text == warm.text and "9" in warm.text
    cold.close()


def test_embedded_model_lookup_decoding_matches_plain_greedy(embedded_model: Path, tmp_path: Path) -> None:
    """Prompt-lookup decoding writes what llama.cpp's own greedy sampling writes, in fewer model steps,
    and honours stop strings and max_tokens."""
    shot = '{"triples":[["Heat","directed by","UNKNOWN director 1"],["UNKNOWN movie 1","directed by",' \
           '"UNKNOWN director 1"]]}'
    ask = [ChatMessage("system", "Write the JSON pattern of the question, as in the example."),
           ChatMessage("user", "the director of Heat also directed which movies"),
           ChatMessage("assistant", shot),
           ChatMessage("user", "the director of Alien also directed which movies")]
    plain = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache=False, lookup_decoding=False)
    # drafts filled up to the fixed sizes whatever they cost on this machine (the measured default may
    # decode plainly: tested below)
    lookup = LlamaCppLLM(embedded_model, n_ctx=1024, kv_cache=False, batch_sizes=CHEAP_BATCH_SIZES)
    try:
        a, b = plain.complete(ask, max_tokens=60), lookup.complete(ask, max_tokens=60)
        assert a.text == b.text and '"Alien"' in b.text
        assert a.completion_tokens == b.completion_tokens
        assert lookup.decode_stats["tokens"] == b.completion_tokens
        assert lookup.decode_stats["steps"] < b.completion_tokens / 2, lookup.decode_stats
        cut = lookup.complete(ask, max_tokens=60, stop=["directed by"])
        assert cut.text == b.text[: b.text.index("directed by")]
        short = lookup.complete(ask, max_tokens=5)
        assert short.completion_tokens == 5 and b.text.startswith(short.text)
    finally:
        plain.close()
        lookup.close()


def test_embedded_model_measures_its_batch_costs_once(embedded_model: Path, tmp_path: Path) -> None:
    """The first load on a machine times llama.cpp batches and saves them; a second instance reads the file
    instead; drafts sized by either write what plain greedy decoding writes."""
    costs_file = tmp_path / "costs.json"
    ask = [ChatMessage("system", "Answer with one word."), ChatMessage("user", "Capital of France?")]
    plain = LlamaCppLLM(embedded_model, n_ctx=512, kv_cache=False, lookup_decoding=False)
    first = LlamaCppLLM(embedded_model, n_ctx=512, kv_cache=False, batch_costs_file=costs_file)
    try:
        text = plain.complete(ask, max_tokens=8).text
        assert first.complete(ask, max_tokens=8).text == text
        saved = json.loads(costs_file.read_text())
        assert len(saved) == 1
        ((key, seconds),) = saved.items()
        assert "n_threads" in key and set(seconds) == {str(n) for n in PROBE_SIZES}
        assert all(s > 0 for s in seconds.values()) and first.batch_costs == BatchCosts.from_json(seconds)
    finally:
        plain.close()
        first.close()
    costs_file.write_text(json.dumps({key: {"1": 0.05, "4": 0.06, "16": 0.07}}))  # as if another machine
    second = LlamaCppLLM(embedded_model, n_ctx=512, kv_cache=False, batch_costs_file=costs_file)
    try:
        assert second.complete(ask, max_tokens=8).text == text
        assert second.batch_costs == BatchCosts({1: 0.05, 4: 0.06, 16: 0.07})  # read, not measured
    finally:
        second.close()


# -- a real llama.cpp OpenAI-compatible server --------------------------------------------------------



def _wait_ready(proc: subprocess.Popen[bytes], url: str, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with code {proc.returncode}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server was not ready within {deadline_s:.0f} s")


@pytest.fixture(scope="module")
def server_url(embedded_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python[server] extras missing: {', '.join(missing)}")
    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", str(os.cpu_count() or 1)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, deadline_s=120)
        yield url
    except RuntimeError as exc:
        pytest.fail(f"{exc}; log:\n{log.read_text()[-3000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_server_plain_completion(server_url: str) -> None:
    with OpenAICompatLLM("local", base_url=f"{server_url}/v1", timeout=120) as llm:
        r = llm.complete([ChatMessage("user", "Reply with the single word: hello")], max_tokens=8)
    assert "hello" in r.text.lower()
    assert r.prompt_tokens > 0 and 0 < r.completion_tokens <= 8


def test_server_json_schema_completion(server_url: str) -> None:
    with OpenAICompatLLM("local", base_url=f"{server_url}/v1", timeout=120) as llm:
        r = llm.complete(ASK, json_schema=SCHEMA, max_tokens=60)
    data = json.loads(r.text)
    assert set(data) >= {"country", "capital"} and "paris" in data["capital"].lower()


def test_server_down_is_a_connection_error() -> None:
    llm = OpenAICompatLLM("local", base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMConnectionError, match="is the server running"):
        llm.complete(ASK)


def test_server_too_slow_is_a_timeout(server_url: str) -> None:
    story = [ChatMessage("user", "Write a long story about a lighthouse keeper.")]
    with OpenAICompatLLM("local", base_url=f"{server_url}/v1", timeout=0.05, max_retries=0) as llm:
        start = time.perf_counter()
        with pytest.raises(LLMTimeoutError):
            llm.complete(story, max_tokens=64)
    assert time.perf_counter() - start < 2.0
