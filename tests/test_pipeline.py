"""The facade end to end with a scripted LLM: question → pattern → subgraphs → answer / verdict."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import ConfigError, PatternError
from simgrag.index.directory import build_index_dir
from simgrag.llm.base import LLM, ChatMessage, LLMResponse
from simgrag.llm.counting import CountingLLM
from simgrag.llm.registry import resolve_llm
from simgrag.match.retrieve import RetrievalSettings
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.kaping import KapingRetriever
from simgrag.testing import FakeLLM, HashEmbedder

PATTERN = json.dumps({"triples": [["Titanic", "directed by", "UNKNOWN director 1"]]})


#: these tests script the LLM's pattern call: no analogies (they would skip it)
NO_ANALOGY = {"analogy": False}


def test_ask_answers_from_evidence(toy_dir: Path) -> None:
    llm = FakeLLM([PATTERN, "answer: James Cameron"])
    engine = SimGRAG(toy_dir, llm=llm, answer_mode="llm", pattern_options=NO_ANALOGY)
    result = engine.ask("who directed Titanic?")
    assert result.answer.short_answer == "James Cameron"
    assert result.answer.entities == ("James Cameron",)
    assert result.pattern.pattern.triples() == [("Titanic", "directed by", "UNKNOWN director 1")]
    assert {"pattern_s", "embed_s", "vector_s", "graph_s", "answer_s", "total_s"} <= set(result.timings)
    assert len(llm.calls) == 2
    assert "James Cameron" in llm.calls[1].prompt  # the evidence reached the answer prompt
    payload = result.to_dict()
    assert payload["evidence"]["matches"][0]["edges"][0]["triple"] == ["Titanic", "directed_by", "James Cameron"]


class PlainLLM:
    """A user's own model: no simgrag base class, only ``name`` and a ``complete`` of the protocol's shape."""

    name = "mine:plain"

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, Any]] = []

    def complete(self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, stop: Sequence[str] | None = None) -> LLMResponse:
        self.seen.append((messages[-1].content, json_schema))
        return LLMResponse(self.answers.pop(0))


def test_a_plain_llm_class_works_through_the_facade_and_the_wrappers(toy_dir: Path, tmp_path: Path) -> None:
    plain = PlainLLM([PATTERN, "answer: James Cameron"])
    assert isinstance(plain, LLM)
    cached = resolve_llm(plain, cache=tmp_path / "calls.sqlite3")
    counted = CountingLLM(cached)
    result = SimGRAG(toy_dir, llm=counted, answer_mode="llm", pattern_options=NO_ANALOGY).ask("who directed Titanic?")
    assert result.answer.short_answer == "James Cameron"
    assert counted.calls == 2 and len(plain.seen) == 2 and "Titanic" in plain.seen[0][0]
    again = CountingLLM(resolve_llm(PlainLLM([]), cache=tmp_path / "calls.sqlite3"))
    cached_again = SimGRAG(toy_dir, llm=again, answer_mode="llm", pattern_options=NO_ANALOGY)
    assert cached_again.ask("who directed Titanic?").answer.short_answer \
        == "James Cameron"  # both calls answered from the cache file, keyed the same way


def test_ask_repairs_bad_pattern_once_then_fails_typed(toy_dir: Path) -> None:
    ok = SimGRAG(toy_dir, llm=FakeLLM(["here you go: nonsense", PATTERN, "answer: James Cameron"]), answer_mode="llm",
                 pattern_options=NO_ANALOGY)
    assert ok.ask("who directed Titanic?").pattern.attempts == 2
    bad = SimGRAG(toy_dir, llm=FakeLLM(["nonsense", "still nonsense"]), pattern_options=NO_ANALOGY)
    with pytest.raises(PatternError) as info:
        bad.ask("who directed Titanic?")
    assert "nonsense" in str(info.value)


def test_abstains_without_llm_call_when_evidence_is_too_far(toy_dir: Path) -> None:
    pattern = json.dumps({"triples": [["Zzyzx Qwerty", "fought", "UNKNOWN thing 1"]]})
    llm = FakeLLM([pattern, pattern])
    engine = SimGRAG(toy_dir, llm=llm, abstain_gsd=0.05)
    result = engine.ask("who fought Zzyzx Qwerty?")
    assert result.answer.abstained
    # the pattern call and the KG judge's one revision, no answer call
    assert len(llm.calls) == 2 and "That answer is not usable" in llm.calls[1].prompt


def test_verify_supported_and_refuted(toy_dir: Path) -> None:
    claim_pattern = json.dumps({"triples": [["Titanic", "directed by", "James Cameron"]]})
    engine = SimGRAG(toy_dir, llm=FakeLLM([claim_pattern, "verdict: Supported", claim_pattern,
                                           "verdict: Refuted"]))
    first = engine.verify("Titanic was directed by James Cameron")
    assert first.verdict.label == "Supported"
    assert first.verdict.evidence.evidence[0].edges[0].triple.as_tuple() == ("Titanic", "directed_by", "James Cameron")
    assert engine.verify("Titanic was directed by James Cameron").verdict.label_binary == "Refuted"


def test_retrieval_only_engine_explains_missing_llm(toy_dir: Path) -> None:
    engine = SimGRAG(toy_dir, llm=None)
    assert engine.retrieve([["UNKNOWN director 1", "directed by", "Avatar"]]).evidence
    with pytest.raises(ConfigError, match="retrieval only"):
        engine.ask("who directed Avatar?")


def test_cli_ask_reports_errors_cleanly(toy_dir: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["ask", str(toy_dir), "who directed Avatar?", "--llm", "nosuchbackend"])
    assert result.exit_code == 2
    assert "nosuchbackend" in result.output


def test_auto_answer_mode_skips_llm_on_exact_match_only(toy_dir: Path) -> None:
    llm = FakeLLM([PATTERN])  # "directed by" is the readable name of directed_by: an exact match
    engine = SimGRAG(toy_dir, llm=llm, answer_mode="auto", pattern_options=NO_ANALOGY)
    result = engine.ask("who directed Titanic?")
    assert result.answer.entities == ("James Cameron",)
    assert result.answer.reason.startswith("exact match")
    assert len(llm.calls) == 1
    made_by = json.dumps({"triples": [["Titanic", "made by", "UNKNOWN person 1"]]})
    fuzzy = FakeLLM([made_by, made_by, "answer: James Cameron"])
    result = SimGRAG(toy_dir, llm=fuzzy, answer_mode="auto", pattern_options=NO_ANALOGY).ask("who made Titanic?")
    assert len(fuzzy.calls) == 3  # not exact (the judge asked for one revision, the same came back): the LLM answers
    assert fuzzy.calls[2].prompt != fuzzy.calls[1].prompt and result.answer.entities == ("James Cameron",)
    with pytest.raises(ConfigError, match="answer_mode"):
        SimGRAG(toy_dir, llm=llm, answer_mode="guess")


def test_one_answer_path_for_every_retriever(toy_dir: Path) -> None:
    """A name, a class or an instance: retrieve → the one answerer → the same result type."""
    for spec in ("kaping", KapingRetriever):
        llm = FakeLLM(lambda messages: "ans: James Cameron")
        result = SimGRAG(toy_dir, llm=llm, retriever=spec).ask("who directed Titanic?")
        assert result.retriever == "kaping" and result.answer.entities == ("James Cameron",)
        assert result.pattern is None and result.evidence is None and result.answer.style == "kaping"
        assert {"link_s", "rank_s", "retrieve_s", "answer_s", "total_s"} <= set(result.timings)
        assert result.to_dict()["context"]["topic"]["names"] == ["Titanic"]
    engine = SimGRAG(toy_dir, llm=FakeLLM(lambda messages: "ans: James Cameron"))
    instance = KapingRetriever(engine.index, k=2)
    built = SimGRAG(engine.index, llm=FakeLLM(lambda m: "ans: James Cameron"), retriever=instance)
    result = built.ask("who directed Titanic?")
    assert len(result.context.triples) == 2


def test_options_another_retriever_cannot_use_are_refused(toy_dir: Path) -> None:
    with pytest.raises(ConfigError, match="The 'kaping' retriever takes no option 'examples'"):
        SimGRAG(toy_dir, retriever="kaping", examples="my.yaml")
    with pytest.raises(ConfigError, match="takes no option 'retrieval'"):
        SimGRAG(toy_dir, retriever="paths", retrieval=RetrievalSettings(k=5))
    engine = SimGRAG(toy_dir, llm=FakeLLM(lambda m: "ans: x"), retriever="kaping")
    with pytest.raises(ConfigError, match="cannot change per call"):
        engine.ask("who directed Titanic?", k=2)
    with pytest.raises(ConfigError, match="abstain_gsd"):
        SimGRAG(toy_dir, llm=FakeLLM(lambda m: "ans: x"), retriever="kaping", abstain_gsd=0.1).ask("q")


def test_per_call_k_and_variants_share_the_llm(toy_dir: Path) -> None:
    pattern = json.dumps({"triples": [["UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio"]]})
    llm = FakeLLM([pattern, pattern])
    engine = SimGRAG(toy_dir, llm=llm)
    assert len(engine.ask("which movies did Leonardo DiCaprio star in", k=1).evidence.evidence) == 1  # type: ignore[union-attr]
    assert len(engine.ask("which movies did Leonardo DiCaprio star in").evidence.evidence) == 3  # type: ignore[union-attr]
    other = engine.variant(retriever="kaping")
    assert other.llm is engine.llm and other.index is engine.index and other.retriever.name == "kaping"


def test_verify_with_another_retriever_uses_the_same_prompt(toy_dir: Path) -> None:
    llm = FakeLLM(["verdict: Supported"])
    result = SimGRAG(toy_dir, llm=llm, retriever="kaping").verify("Titanic was directed by James Cameron")
    assert result.verdict.label == "Supported" and result.retriever == "kaping" and result.evidence is None
    assert "(Titanic, directed_by, James Cameron)" in llm.calls[0].prompt


def test_examples_come_from_the_index(tmp_path: Path) -> None:
    kb = tmp_path / "people.txt"
    kb.write_text("Ada|born_in|London\nAlan|born_in|London\n", encoding="utf-8")
    build_index_dir(kb, tmp_path / "people.idx", embedder=HashEmbedder(dim=32))
    engine = SimGRAG(tmp_path / "people.idx", llm=FakeLLM([]))
    with pytest.raises(ConfigError, match="No few-shot examples for this KG") as info:
        engine.ask("where was Ada born?")
    assert "born_in" in str(info.value) and "examples=FILE" in str(info.value)
    assert "--examples FILE" in info.value.for_cli()  # the command line names its flag


class SilencingLoadLLM(FakeLLM):
    """An in-process model whose ``load`` silences the process's stdout while it runs, as llama.cpp's
    does (verbose=False): whatever is printed meanwhile is lost."""

    def __init__(self, responses: list[str], *, load_s: float) -> None:
        super().__init__(responses)
        self.load_s = load_s
        self.loads = 0

    def load(self) -> None:
        import io
        import sys

        self.loads += 1
        saved, sys.stdout = sys.stdout, io.StringIO()
        try:
            time.sleep(self.load_s)
        finally:
            sys.stdout = saved


def test_a_one_shot_warmup_leaves_the_model_to_its_first_call(toy_dir: Path) -> None:
    """``warmup(wait=False)`` (the CLI's one-shot question) must not load an in-process model in the
    background: its load silences stdout, and an answer that needs no LLM call would print into it."""
    llm = SilencingLoadLLM([], load_s=0.2)
    engine = SimGRAG(toy_dir, llm=llm)
    engine.warmup(wait=False)
    engine.finish_warmup()
    assert llm.loads == 0
    assert engine.warmup(wait=True)["llm_s"] >= 0.2  # a server's warm-up loads it, in the foreground
    assert llm.loads == 1


def test_warmup_compiles_the_per_root_bound_for_the_store_and_for_restricted_graphs(toy_dir: Path) -> None:
    """The warm-up's small search does not need the per-root bound; the warm-up compiles it anyway, for the
    store's arrays and a restricted graph's, so a first large search does not pay the compilation."""
    from simgrag.match import _kernel

    engine = SimGRAG(toy_dir, llm=FakeLLM([]))
    engine.warmup(wait=True, load_llm=False)
    store = engine.index.store
    graphs = {tuple(str(t) for t in sig[:3]) for sig in _kernel.root_bounds.signatures}  # indptr, adj_nbr, adj_rel
    readonly = ("readonly " if not store.indptr.flags.writeable else "") + "array(int64, 1d, C)"
    assert any(g[0] == readonly for g in graphs)  # the store's (memory-mapped: read-only)
    assert ("array(int64, 1d, C)", "array(int32, 1d, C)", "array(int32, 1d, C)") in graphs  # a restricted graph's
