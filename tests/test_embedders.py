"""Embedders: the hash fake, the shared batching/cache base, the registry, the HTTP adapters against a
local canned server, and (slow) the real bundled MiniLM model."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from simgrag.embed import BatchedEmbedder, Embedder, list_embedders, resolve_embedder
from simgrag.embed.ollama import OllamaEmbedder
from simgrag.embed.openai_compat import OpenAICompatEmbedder
from simgrag.errors import ConfigError, EmbedderError
from simgrag.testing.embedders import HashEmbedder

CANNED = HashEmbedder(dim=8)  # the fake server answers with these vectors


def l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b))


# --- HashEmbedder ------------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_and_unit() -> None:
    texts = ["directed by", "director", "release year", ""]
    a, b = HashEmbedder(32).encode(texts), HashEmbedder(32).encode(texts)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (4, 32) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:3], axis=1), 1.0, rtol=1e-6)
    assert not a[3].any()  # no features, zero vector
    assert isinstance(HashEmbedder(), Embedder)


def test_hash_embedder_puts_similar_strings_near() -> None:
    v = HashEmbedder(64).encode(["directed by", "director", "release year"])
    assert l2(v[0], v[1]) < l2(v[0], v[2])


def test_hash_embedder_rejects_a_bare_string() -> None:
    with pytest.raises(EmbedderError, match="wrap it"):
        HashEmbedder().encode("director")


# --- the shared base: batching, order, cache, checks -------------------------------------------


class CountingEmbedder(BatchedEmbedder):
    """Vectors from HashEmbedder, scaled by 3 (so normalisation shows); records every batch."""

    def __init__(self, dim: int | None = 8, *, width: int = 8, **kwargs: Any) -> None:
        super().__init__(dim=dim, **kwargs)
        self.name = "counting"
        self.width = width
        self.batches: list[list[str]] = []

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        self.batches.append(texts)
        return 3.0 * HashEmbedder(self.width).encode(texts)

    def _detect_dim(self) -> int:
        return self.width


def test_batches_keep_input_order_and_normalise() -> None:
    emb = CountingEmbedder()
    texts = [f"text number {'x' * (i % 7)} {i}" for i in range(200)]
    out = emb.encode(texts, batch_size=16)
    np.testing.assert_allclose(out, HashEmbedder(8).encode(texts), atol=1e-6)
    assert out.dtype == np.float32
    assert len(emb.batches) == 13 and max(len(b) for b in emb.batches) == 16


def test_batches_group_texts_of_one_model_length() -> None:
    """Batches are cut from the texts sorted by the length of their ``_model_inputs`` (tokens where the
    embedder tokenizes): texts of equal model length share a batch whatever their characters; the output
    keeps input order."""

    class WordCounting(CountingEmbedder):
        def _model_inputs(self, texts: list[str]) -> list[str | tuple[int, ...]]:
            return [(*range(len(t.split())), i) for i, t in enumerate(texts)]  # distinct, one id a word

    emb = WordCounting()
    # one word or three, each of 1 to 16 characters more: a character sort mixes them
    texts = [("a b " if i % 2 else "") + "w" * (i // 2 % 16 + 1) + f"{i}" for i in range(64)]
    out = emb.encode_bulk(texts, batch_size=32)
    np.testing.assert_allclose(out, HashEmbedder(8).encode(texts), atol=1e-6)
    assert [sorted({len(t.split()) for t in b}) for b in emb.batches] == [[3], [1]]
    assert sum(map(len, emb.batches)) == len(texts)
    plain = CountingEmbedder()
    plain.encode_bulk(texts, batch_size=32)
    assert any(len({len(t.split()) for t in b}) > 1 for b in plain.batches)  # characters: mixed


def test_texts_the_model_reads_alike_are_encoded_once() -> None:
    """Texts with equal model inputs (an uncased tokenizer's "Drama" and "drama") are encoded once and
    share the vector; every text keeps its row, in input order, and distinct inputs are all encoded."""

    class Uncased(CountingEmbedder):
        def _model_inputs(self, texts: list[str]) -> list[str | tuple[int, ...]]:
            return [t.lower() for t in texts]

    emb = Uncased()
    texts = [f"Name {i % 30}" if i % 3 else f"name {i % 30}" for i in range(90)]
    out = emb.encode_bulk(texts, batch_size=8)
    encoded = [t for b in emb.batches for t in b]
    assert len(encoded) == len({t.lower() for t in texts}) == 30
    by_input = {t.lower(): v for t, v in zip(texts, out, strict=True)}
    np.testing.assert_array_equal(out, np.stack([by_input[t.lower()] for t in texts]))
    first = {t.lower(): t for t in reversed(texts)}  # the first text with each input is the one encoded
    assert sorted(encoded) == sorted(first.values())
    np.testing.assert_allclose(out, HashEmbedder(8).encode([first[t.lower()] for t in texts]), atol=1e-6)


def test_query_cache_makes_repeats_free_and_skips_bulk() -> None:
    emb = CountingEmbedder()
    first = emb.encode(["directed by", "starred actors", "directed by"])
    assert emb.batches == [["starred actors", "directed by"]]  # deduplicated, longest first
    again = emb.encode(["starred actors", "directed by"])
    np.testing.assert_array_equal(again, first[[1, 0]])
    assert len(emb.batches) == 1 and emb.cache.hits >= 2
    emb.encode([f"entity {i}" for i in range(100)])  # bulk: bypasses the cache
    assert len(emb.cache) == 2


def test_bulk_encoding_batches_like_encode_without_the_query_cache() -> None:
    emb = CountingEmbedder()
    texts = ["directed by", "starred actors"]
    np.testing.assert_allclose(emb.encode_bulk(texts, batch_size=1), emb.encode(texts), atol=1e-6)
    assert [len(b) for b in emb.batches] == [1, 1, 2]  # bulk batches as asked; encode's call went via the cache
    assert emb.cache.hits == 0 and len(emb.cache) == 2  # bulk neither read nor filled it
    assert emb.encode_bulk([]).shape == (0, 8)
    with pytest.raises(EmbedderError, match="batch_size"):
        emb.encode_bulk(texts, batch_size=0)
    with pytest.raises(EmbedderError, match="not one string"):
        emb.encode_bulk("Heat")


def test_encode_bulk_falls_back_to_encode_for_plain_embedders() -> None:
    from simgrag.embed import BulkEncoder, encode_bulk

    class Plain:
        name, dim = "plain", 8

        def encode(self, texts: Any, *, batch_size: int = 64, show_progress: bool | None = None) -> np.ndarray:
            return HashEmbedder(8).encode(texts)

    assert not isinstance(Plain(), BulkEncoder) and isinstance(CountingEmbedder(), BulkEncoder)
    np.testing.assert_array_equal(encode_bulk(Plain(), ["a", "b"]), HashEmbedder(8).encode(["a", "b"]))


def test_bulk_precision_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from simgrag.embed.sentence_transformers import BULK_PRECISION_ENV, SentenceTransformerEmbedder

    with pytest.raises(EmbedderError, match="bulk_precision must be one of auto, float32, bfloat16; got 'half'"):
        SentenceTransformerEmbedder(bulk_precision="half")
    monkeypatch.setenv(BULK_PRECISION_ENV, "fp8")
    with pytest.raises(EmbedderError, match=r"\$SIMGRAG_BULK_PRECISION must be one of .*'fp8'"):
        SentenceTransformerEmbedder()
    monkeypatch.setenv(BULK_PRECISION_ENV, "Float32")
    assert not SentenceTransformerEmbedder().bulk_bfloat16
    monkeypatch.setenv(BULK_PRECISION_ENV, "bfloat16")
    assert SentenceTransformerEmbedder().bulk_bfloat16
    assert not SentenceTransformerEmbedder(library=True).bulk_bfloat16  # the library path has no bf16 switch


def test_dim_is_detected_lazily_and_checked() -> None:
    assert CountingEmbedder(dim=None, width=12).dim == 12
    with pytest.raises(EmbedderError, match="dim is 8"):
        CountingEmbedder(dim=8, width=12).encode(["x"])
    assert CountingEmbedder().encode([]).shape == (0, 8)


def test_progress_bar_only_when_asked_or_long(capsys: pytest.CaptureFixture[str]) -> None:
    emb = CountingEmbedder(cache_size=0)
    emb.encode(["a", "b"], show_progress=True)
    assert "Embedding (counting)" in capsys.readouterr().err
    emb.encode([f"t{i}" for i in range(50)])
    assert capsys.readouterr().err == ""


# --- registry ----------------------------------------------------------------------------------


def test_registry_resolves_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    minilm = resolve_embedder("minilm")
    assert (minilm.name, minilm.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    assert minilm._model is None  # type: ignore[attr-defined]  # lazy: nothing loaded yet
    assert resolve_embedder("st:all-MiniLM-L6-v2").name == minilm.name
    monkeypatch.setenv("SIMGRAG_EMBED_BASE_URL", "http://embed.local:9999/")
    ollama = resolve_embedder("ollama:nomic-embed-text")
    assert isinstance(ollama, OllamaEmbedder) and ollama.base_url == "http://embed.local:9999"
    assert ollama.dim == 768
    openai = resolve_embedder("openai:my-model", base_url="http://127.0.0.1:8080")
    assert isinstance(openai, OpenAICompatEmbedder) and openai.base_url == "http://127.0.0.1:8080/v1"
    hashed = resolve_embedder("hash:16")
    assert hashed.dim == 16 and resolve_embedder(hashed) is hashed
    assert {e.name for e in list_embedders()} >= {"minilm", "sentence-transformers", "ollama", "openai"}


def test_registry_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"Unknown embedder 'word2vec'.*minilm.*ollama:<model>"):
        resolve_embedder("word2vec")
    with pytest.raises(ConfigError, match="integer"):
        resolve_embedder("hash:wide")


# --- HTTP adapters against a local canned server -----------------------------------------------


@dataclass
class FakeServer:
    url: str
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)


def _answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    model = body.get("model", "")
    if model == "missing":
        return 404, {"error": f"model '{model}' not found, try pulling it first"}
    if model == "locked":
        return 401, {"error": {"message": "Incorrect API key provided"}}
    if model == "slow":
        time.sleep(1.0)
    vectors = CANNED.encode(body["input"]).tolist()
    if path == "/api/embed":
        return 200, {"model": model, "embeddings": vectors}
    if path == "/v1/embeddings":  # items deliberately out of order: the client must sort by index
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "model": model, "data": data[::-1]}
    return 404, {"error": f"no route {path}"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    state = FakeServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append((self.path, dict(self.headers), body))
            status, payload = _answer(self.path, body)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def dead_url() -> str:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_ollama_encodes_in_batches(server: FakeServer) -> None:
    server.requests.clear()
    emb = OllamaEmbedder("nomic-embed-text", base_url=server.url, dim=8)
    texts = ["directed by", "release year", "starred actors", "written by", "director"]
    out = emb.encode(texts, batch_size=2, show_progress=False)
    np.testing.assert_allclose(out, CANNED.encode(texts), atol=1e-6)
    assert [path for path, _, _ in server.requests] == ["/api/embed"] * 3
    assert server.requests[0][2]["model"] == "nomic-embed-text"


def test_ollama_probes_unknown_dim_and_maps_errors(server: FakeServer, dead_url: str) -> None:
    assert OllamaEmbedder("some-new-model", base_url=server.url).dim == 8
    with pytest.raises(EmbedderError, match="ollama pull missing"):
        OllamaEmbedder("missing", base_url=server.url).encode(["x"])
    with pytest.raises(EmbedderError, match=r"Cannot reach Ollama.*ollama serve"):
        OllamaEmbedder("nomic-embed-text", base_url=dead_url).encode(["x"])
    with pytest.raises(EmbedderError, match="did not answer in time"):
        OllamaEmbedder("slow", base_url=server.url, timeout=0.2, dim=8).encode(["x"])


def test_openai_compat_encodes_sorted_with_auth(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.requests.clear()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    emb = OpenAICompatEmbedder("tiny", base_url=server.url, cache_size=0)  # bare host:port → /v1 added
    texts = ["directed by", "release year", "starred actors"]
    np.testing.assert_allclose(emb.encode(texts), CANNED.encode(texts), atol=1e-6)
    path, headers, body = server.requests[-1]
    assert path == "/v1/embeddings" and body["input"] == sorted(texts, key=len, reverse=True)
    assert headers["Authorization"] == "Bearer sk-from-env"
    OpenAICompatEmbedder("tiny", base_url=server.url + "/v1", api_key="sk-arg").encode(["x"])
    assert server.requests[-1][1]["Authorization"] == "Bearer sk-arg"
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAICompatEmbedder("tiny", base_url=server.url).encode(["y"])
    assert "Authorization" not in server.requests[-1][1]


def test_openai_compat_maps_errors(server: FakeServer, dead_url: str) -> None:
    with pytest.raises(EmbedderError, match=r"HTTP 401.*OPENAI_API_KEY"):
        OpenAICompatEmbedder("locked", base_url=server.url).encode(["x"])
    with pytest.raises(EmbedderError, match=r"HTTP 404.*model name 'missing'"):
        OpenAICompatEmbedder("missing", base_url=server.url).encode(["x"])
    with pytest.raises(EmbedderError, match="Cannot reach"):
        OpenAICompatEmbedder("tiny", base_url=dead_url).encode(["x"])


# --- the real bundled model --------------------------------------------------------------------


@pytest.mark.slow
def test_minilm_encodes_unit_vectors_with_sensible_neighbours() -> None:
    emb = resolve_embedder("minilm")
    vectors = emb.encode(["directed by", "director", "release year"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert l2(vectors[0], vectors[1]) < l2(vectors[0], vectors[2])
    start = time.perf_counter()
    cached = emb.encode(["release year", "directed by"])
    assert time.perf_counter() - start < 0.005  # repeated relation phrases are free
    np.testing.assert_array_equal(cached, vectors[[2, 0]])
    bulk = emb.encode(["directed by"] + [f"movie {i}" for i in range(80)], batch_size=32)
    np.testing.assert_allclose(bulk[0], vectors[0], atol=1e-5)  # batching does not change vectors


@pytest.mark.slow
def test_minilm_without_the_library_gives_the_librarys_vectors() -> None:
    """The bundled model runs on embed/bert.py (fast start); its vectors are sentence-transformers'."""
    pytest.importorskip("sentence_transformers")
    from simgrag.embed.bert import MiniBert
    from simgrag.embed.sentence_transformers import SentenceTransformerEmbedder

    texts = ["Inception", "UNKNOWN director 1", "directed by", "Ünïcödé — “quotes”", "", "word " * 400,
             *[f"The Movie Number {i}" for i in range(40)]]
    fast, library = SentenceTransformerEmbedder(), SentenceTransformerEmbedder(library=True)
    got, want = fast.encode(texts, batch_size=16), library.encode(texts, batch_size=16)
    assert isinstance(fast.model, MiniBert) and not isinstance(library.model, MiniBert)
    assert fast.name == library.name  # indexes built either way open with either
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow
def test_minilm_batches_by_token_count() -> None:
    """Our own BERT tells the batcher token counts (special tokens and truncation included), so names of
    few characters but many tokens do not pad a batch of short ones; the vectors do not change."""
    from simgrag.embed.bert import MiniBert
    from simgrag.embed.sentence_transformers import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(bulk_precision="float32")
    texts = ["Heat", "Ünïcödé", "", "word " * 400, "Łódź–Kraków", *[f"The Movie Number {i}" for i in range(40)]]
    model = emb.model
    assert isinstance(model, MiniBert)
    lengths = [len(ids) for ids in emb._model_inputs(texts)]
    assert lengths == [len(model.tokenizer.encode(t).ids) for t in texts] != [len(t) for t in texts]
    assert emb._model_inputs(["Drama", "drama", "Dráma"]) == [emb._model_inputs(["drama"])[0]] * 3  # uncased
    assert lengths[2] == 2 and lengths[3] == max(lengths)  # [CLS] [SEP]; truncated, still the longest
    one_by_one = np.vstack([emb.encode_bulk([t]) for t in texts])
    np.testing.assert_allclose(emb.encode_bulk(texts, batch_size=8), one_by_one, atol=1e-5)


@pytest.mark.slow
def test_minilm_bulk_bfloat16_stays_near_float32() -> None:
    """Index builds embed entity names in bfloat16 where the CPU has it: near float32, never the query path."""
    from simgrag.embed.sentence_transformers import SentenceTransformerEmbedder

    texts = ["Inception", "The Dark Knight Rises", "Ünïcödé — “quotes”", "", *[f"Movie {i}" for i in range(60)]]
    fast = SentenceTransformerEmbedder(bulk_precision="bfloat16")
    exact = SentenceTransformerEmbedder(bulk_precision="float32")
    reference = exact.encode(texts, batch_size=16)
    np.testing.assert_array_equal(exact.encode_bulk(texts, batch_size=16), reference)
    bulk = fast.encode_bulk(texts, batch_size=16)
    assert bulk.dtype == np.float32 and bulk.shape == reference.shape
    np.testing.assert_allclose(np.linalg.norm(bulk, axis=1), 1.0, rtol=1e-5)
    cosines = (bulk * reference).sum(axis=1)
    assert cosines.min() > 0.999 and not np.array_equal(bulk, reference)
    np.testing.assert_allclose(fast.encode(texts, batch_size=16), reference, atol=1e-5)  # queries: float32
