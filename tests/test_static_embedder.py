"""The static (token-lookup) embedder: pooling, the Model2Vec directory layout, WordLlama from its wheel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simgrag.embed import Embedder, list_embedders, resolve_embedder
from simgrag.embed.static import StaticEmbedder, mean_pool
from simgrag.errors import ConfigError, EmbedderError

HAS_WORDLLAMA = importlib.util.find_spec("wordllama") is not None
needs_wordllama = pytest.mark.skipif(not HAS_WORDLLAMA, reason="pip install 'simgrag[scale]' (wordllama)")


def test_mean_pool_groups_by_length_and_keeps_order() -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(4, 3)
    pooled = mean_pool(matrix, [[1], [0, 2], [], [3, 3, 1], [9]])  # 9: out of range, clipped to the last row
    np.testing.assert_allclose(pooled[0], matrix[1])
    np.testing.assert_allclose(pooled[1], (matrix[0] + matrix[2]) / 2)
    assert not pooled[2].any()
    np.testing.assert_allclose(pooled[3], (2 * matrix[3] + matrix[1]) / 3)
    np.testing.assert_allclose(pooled[4], matrix[3])


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A tiny Model2Vec-style model: five words, 4-d vectors."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "ashford": 1, "university": 2, "river": 3, "john": 4}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.Lowercase()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    vectors = np.eye(5, 4, dtype=np.float32) + 0.1
    safetensors_numpy.save_file({"embeddings": vectors}, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_model2vec_directory(model_dir: Path) -> None:
    emb = resolve_embedder(f"static:{model_dir}")
    assert isinstance(emb, Embedder) and emb.name == f"static/{model_dir.name}"
    vecs = emb.encode(["Ashford University", "ashford", "River", "John Ashford"])
    assert vecs.shape == (4, 4) and emb.dim == 4
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    assert float(vecs[0] @ vecs[1]) > float(vecs[2] @ vecs[1])
    small = StaticEmbedder(model_dir, dim=2)
    assert small.name.endswith("-2") and small.encode(["river"]).shape == (1, 2)


def test_bad_sources_say_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither"):
        StaticEmbedder(tmp_path / "nowhere")
    with pytest.raises(EmbedderError, match=r"model\.safetensors"):
        StaticEmbedder(tmp_path)


@needs_wordllama
def test_wordllama_from_its_wheel_finds_noisy_names() -> None:
    emb = resolve_embedder("static")
    assert (emb.name, emb.dim) == ("static/wordllama-l2-supercat-256", 256)
    names = ["Ashford University", "Marina Hardy", "Battle of Kelbury", "The Silent Harbour", "Lake Ravenmere"]
    corpus = emb.encode(names)
    queries = emb.encode(["Univ. of Ashford", "marina hardy", "battle of kelbury", "Silent Harbor", "Ravenmere lake"])
    assert (np.argmax(queries @ corpus.T, axis=1) == np.arange(5)).all()
    np.testing.assert_allclose(np.linalg.norm(corpus, axis=1), 1.0, rtol=1e-5)
    narrow = resolve_embedder("static:wordllama:64")
    assert (narrow.name, narrow.dim) == ("static/wordllama-l2-supercat-64", 64)
    assert narrow.encode(names).shape == (5, 64)
    with pytest.raises(ConfigError):
        StaticEmbedder(dim=512)


def test_registry_lists_static() -> None:
    assert "static" in {e.name for e in list_embedders()}
