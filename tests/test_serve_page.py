"""The evidence page read as a person reads it, in real Chromium at 1280 and 1920 px: graphs laid out left
to right with every label drawn at 11 px or more and none over a node, a list answer shown once (grouped
under the entity that links it), the stages shown before the answer. The bundled sample movie KG with the
hash embedder and a scripted LLM that takes its time (so that the stages can be seen). Screenshots go to
``$SIMGRAG_ARTIFACTS_DIR`` (default ``runs/screenshots/``, git-ignored)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from simgrag.index.directory import build_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pipeline import SimGRAG, sample_kg_path
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from test_serve_live import artifacts_dir, run_browser, serving

PATTERNS = {
    "which movies share actors with heat?": [["Heat", "starred_actors", "UNKNOWN actor 1"],
                                             ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"]],
    "who directed the movies that share actors with heat?": [
        ["Heat", "starred_actors", "UNKNOWN actor 1"], ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
        ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]],
    "heat was directed by michael mann.": [["Heat", "directed_by", "Michael Mann"]],
}
PAUSE_S = 0.4  # each LLM call: long enough for a stage to be on screen


def slow_scripted(messages: list[ChatMessage]) -> str:
    time.sleep(PAUSE_S)
    if "knowledge-graph pattern" in messages[0].content:
        text = messages[-1].content.lower()
        found = [triples for question, triples in PATTERNS.items() if question in text]
        return json.dumps({"triples": found[0]}) if found else "no"
    if "Supported" in messages[0].content:
        return "verdict: Supported"
    return "answer: Michael Mann"


@pytest.fixture(scope="module")
def sample_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("sample")
    build_index_dir(sample_kg_path(), root / "sample.idx", embedder=HashEmbedder(dim=64))
    engine = SimGRAG(root / "sample.idx", llm=FakeLLM(slow_scripted), claim_examples=None, ground_patterns=False,
                     pattern_options={"analogy": False}, calibration="off")
    with serving(engine) as url:
        yield url


def check_drawings(report: dict[str, object]) -> None:
    """What the browser test measured: labels >= 11 px and over no node, at every width."""
    for visit in report["viewports"]:  # type: ignore[attr-defined]
        for graph in visit["graphs"]:
            assert graph["minNodeLabelPx"] >= 11 and (graph["minEdgeLabelPx"] or 11) >= 11, graph
            assert not graph["overlaps"] and not graph["clipped"] and not graph["scrolls"], graph


def test_a_list_answer_is_shown_once_grouped_by_what_links_it(sample_server: str, tmp_path: Path) -> None:
    shots = artifacts_dir(tmp_path)
    report = run_browser(sample_server, "Which movies share actors with Heat?", ["Heat"],
                         shots / "list-answer-sample.png", "--viewports=1280,1920", "--expect-list-once",
                         "--expect-via=Robert De Niro", "--k=2")
    check_drawings(report)
    once = report["once"]
    assert once["chips"] == once["names"] > 100 and once["headline"] == f"{once['names']} movies"  # type: ignore[index]
    assert not report["llmRan"] and "LLM:" not in str(report["detail"]) and "no LLM call" in str(report["detail"])
    assert report["stages"][:3] == ["question", "pattern", "search"]  # type: ignore[index]
    wide = report["viewports"][1]  # type: ignore[index]
    assert wide["width"] == 1920 and wide["mainWidth"] > 1800
    assert (shots / "list-answer-sample-1920.png").stat().st_size > 10_000


def test_a_chain_reads_left_to_right_in_every_graph(sample_server: str, tmp_path: Path) -> None:
    """Heat → its actors → their movies → those movies' directors: x grows along the chain in the pattern
    and in every subgraph alike."""
    report = run_browser(sample_server, "Who directed the movies that share actors with Heat?",
                         ["Heat", "Robert De Niro"], artifacts_dir(tmp_path) / "chain-sample.png",
                         "--viewports=1280,1920", "--k=3")
    check_drawings(report)
    chain = ["Heat", "UNKNOWN actor 1", "UNKNOWN movie 1", "UNKNOWN director 1"]
    for visit in report["viewports"]:  # type: ignore[attr-defined]
        whole = [g for g in visit["graphs"] if {node for node, _ in g["nodeX"]} == set(chain)]
        assert [g["name"] for g in whole] == ["pattern", "evidence #1", "evidence #2", "evidence #3"]
        for graph in whole:
            x = {node: at for node, at in graph["nodeX"]}
            assert [x[node] for node in chain] == sorted(x[node] for node in chain), graph


def test_a_claim_reads_left_to_right_and_says_which_stage_runs(sample_server: str, tmp_path: Path) -> None:
    report = run_browser(sample_server, "Heat was directed by Michael Mann.", ["Heat"],
                         artifacts_dir(tmp_path) / "verify-sample.png", "--verify")
    check_drawings(report)
    assert report["answer"] == "Supported" and report["llmRan"]
    assert report["stages"] == ["claim", "pattern", "search", "verify"]
    assert report.get("progressShot") and "checking the claim" in str(report["progressText"])
