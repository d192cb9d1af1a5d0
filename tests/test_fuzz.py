"""Seeded fuzzing of every input path (about 10^4 cases per run, a few seconds): LLM text through the
parser, odd values as patterns, mutated KG files through the readers, hostile bodies through the HTTP
API with an LLM that answers fuzzed text. Nothing may end in anything but a result or a typed error.
``benchmarks/fuzz.py`` runs 10^5+ of the same."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from simgrag.testing.fuzz import fuzz_http, fuzz_kg_files, fuzz_parser, fuzz_patterns, llm_output


def test_fuzz_parser_outputs_only_typed_errors() -> None:
    tally = fuzz_parser(5000, seed=1)
    assert tally.untyped_count == 0, tally.untyped[:3]
    assert tally.outcomes["ok"] > 500 and tally.outcomes["PatternParseError"] > 500  # both paths exercised


def test_fuzz_patterns_only_typed_errors() -> None:
    tally = fuzz_patterns(4000, seed=2)
    assert tally.untyped_count == 0, tally.untyped[:3]
    assert tally.outcomes["ok"] > 100 and tally.outcomes["PatternError"] > 1000


def test_fuzz_kg_readers_only_typed_errors(tmp_path: Path) -> None:
    tally, lines = fuzz_kg_files(800, tmp_path, seed=3)
    assert tally.untyped_count == 0, tally.untyped[:3]
    assert tally.outcomes["ok"] > 100 and lines > 2000


def test_fuzz_http_api_answers_json_never_500(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from simgrag.index.directory import build_index_dir
    from simgrag.pipeline import SimGRAG
    from simgrag.serve import ServeSettings, create_app
    from simgrag.testing.embedders import HashEmbedder
    from simgrag.testing.llm import FakeLLM
    from simgrag.testing.toy import write_toy_kg

    embedder = HashEmbedder(dim=32)
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=embedder)
    rng = random.Random(4)
    llm = FakeLLM(lambda messages: llm_output(rng) if rng.random() < 0.8 else json.dumps({"triples": [
        ["Titanic", "directed by", "UNKNOWN director 1"]]}))
    engine = SimGRAG(tmp_path / "toy.idx", llm=llm, embedder=embedder, claim_examples=None)
    with TestClient(create_app(engine, ServeSettings()), raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 30
        while client.get("/v1/health").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.02)
        tally = fuzz_http(client, 600, seed=5)
    assert tally.untyped_count == 0, tally.untyped[:3]
    assert tally.outcomes["http_200"] > 20 and tally.outcomes["http_422_invalid_request"] > 100
