"""The retrievers of the field on the toy KG (HashEmbedder, FakeLLM): each finds the answer triple,
PCST returns a connected tree around the topic, paths are walks ranked by score, the reader parses."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from simgrag.answer.reader import approx_tokens, parse_answers, path_chain, read_context, reader_messages
from simgrag.errors import ConfigError, PatternError
from simgrag.index.directory import IndexDir, build_index_dir
from simgrag.kg.store import KGStore, Triple
from simgrag.match.retrieve import RetrievalSettings
from simgrag.pattern.generate import PatternResult
from simgrag.pattern.validate import validate_triples
from simgrag.registry import Entry
from simgrag.retrievers import registry
from simgrag.retrievers._graph import k_hop
from simgrag.retrievers.base import (
    AdjustableRetriever,
    ClaimRetriever,
    PatternRetriever,
    PatternStage,
    RetrievedContext,
    Retriever,
)
from simgrag.retrievers.paths import PathRetriever
from simgrag.retrievers.pcst import PCSTRetriever, build_problem, pcst_solver, rank_prizes, solve
from simgrag.retrievers.registry import list_retrievers, resolve_retriever
from simgrag.retrievers.simgrag import LLMPatternStage, SimGRAGRetriever
from simgrag.testing import FakeLLM, HashEmbedder, write_toy_kg

TITANIC = Triple("Titanic", "directed_by", "James Cameron")
PATTERN = json.dumps({"triples": [["Titanic", "directed by", "UNKNOWN director 1"]]})


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    root = tmp_path_factory.mktemp("retrievers")
    return build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))


# ---------------------------------------------------------------- every retriever finds the answer
@pytest.mark.parametrize("name", ["kaping", "triplets", "pcst", "paths"])
@pytest.mark.parametrize("given", [True, False])
def test_finds_the_answer_triple(toy_index: IndexDir, name: str, given: bool) -> None:
    retriever = resolve_retriever(name, index=toy_index)
    assert isinstance(retriever, Retriever)
    context = retriever.retrieve("who directed Titanic?", topic_entities=["Titanic"] if given else None)
    assert TITANIC in context.triples
    assert "James Cameron" in context.entities()
    assert context.topic is not None and context.topic.names == ("Titanic",)
    assert context.topic.source == ("given" if given else "linked")
    assert context.retriever == name and "total_s" in context.timings
    assert len(context.scores) == len(context.triples)
    json.dumps(context.to_dict())


def test_kaping_keeps_the_k_most_similar_one_hop_triples(toy_index: IndexDir) -> None:
    context = resolve_retriever("kaping", index=toy_index, k=2).retrieve("who directed Titanic?")
    assert len(context.triples) == 2 and context.triples[0] == TITANIC
    assert all("Titanic" in (t.head, t.tail) for t in context.triples)  # one hop only
    assert list(context.scores) == sorted(context.scores, reverse=True)


def test_triplets_reach_two_hops(toy_index: IndexDir) -> None:
    context = resolve_retriever("triplets", index=toy_index, k=50).retrieve(
        "which films did the director of Titanic direct?", topic_entities=["Titanic"])
    assert Triple("Avatar", "directed_by", "James Cameron") in context.triples
    assert Triple("Juno", "in_language", "English") not in context.triples  # three hops away


def test_none_returns_an_empty_context(toy_index: IndexDir) -> None:
    context = resolve_retriever("none").retrieve("who directed Titanic?", topic_entities=["Titanic"])
    assert context.triples == () and context.entities() == set() and context.retriever == "none"


# ---------------------------------------------------------------- neighbourhood
def test_k_hop_caps_triples_and_expands_low_degree_first() -> None:
    store = KGStore.from_triples([("hub", "r", f"leaf{i}") for i in range(10)]
                                 + [("a", "r", "hub"), ("a", "s", "b"), ("b", "t", "c"), ("c", "u", "d")])
    a = store.entities.id_of("a")
    assert a is not None
    full = k_hop(store, [a], hops=2, max_triples=100)
    assert len(full.triple_ids) == 13 and not full.truncated  # all but (c, u, d), three hops out
    capped = k_hop(store, [a], hops=2, max_triples=4)
    assert len(capped.triple_ids) == 4 and capped.truncated
    names = {store.triple(int(t)).tail for t in capped.triple_ids}
    assert "c" in names  # b (degree 2) was expanded before the hub (degree 11)
    assert capped.nodes[0] == a


# ---------------------------------------------------------------- PCST
def _connected(triples: tuple[Triple, ...], start: str) -> bool:
    adj: dict[str, set[str]] = {}
    for t in triples:
        adj.setdefault(t.head, set()).add(t.tail)
        adj.setdefault(t.tail, set()).add(t.head)
    seen, todo = {start}, [start]
    while todo:
        for nxt in adj.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen == set(adj) | {start}


@pytest.mark.parametrize("question, topic", [("who directed Titanic?", "Titanic"),
                                             ("who starred in films directed by Christopher Nolan?",
                                              "Christopher Nolan"),
                                             ("what year was Juno released?", "Juno")])
def test_pcst_returns_a_connected_subgraph_with_the_topic(toy_index: IndexDir, question: str, topic: str) -> None:
    context = PCSTRetriever(toy_index, k_nodes=2, k_edges=2, cost_e=0.5).retrieve(question, topic_entities=[topic])
    assert context.triples, "the top edge prize exceeds its cost: at least one triple"
    assert topic in context.entities()
    assert _connected(context.triples, topic)
    assert context.info["virtual_nodes"] == 2


def test_pcst_expensive_edges_leave_only_the_prized_ones(toy_index: IndexDir) -> None:
    context = PCSTRetriever(toy_index, k_nodes=1, k_edges=1, cost_e=0.5).retrieve(
        "who directed Titanic?", topic_entities=["Titanic"])
    assert context.triples == (TITANIC,)


def test_pcst_problem_turns_prized_edges_into_virtual_nodes() -> None:
    heads, tails = np.array([0, 1, 2]), np.array([1, 2, 2])
    problem = build_problem(heads, tails, np.array([1.0, 0.0, 0.0]), np.array([2.0, 0.25, 0.0]), 0.5)
    assert problem.num_entities == 3 and len(problem.prizes) == 4 and problem.prizes[3] == pytest.approx(1.5)
    assert problem.edges.tolist() == [[1, 2], [0, 3], [3, 1]]  # the self-loop without prize is dropped
    assert problem.costs.tolist() == [0.25, 0.0, 0.0]
    assert problem.edge_triple.tolist() == [1, 0, 0] and problem.virtual_triple.tolist() == [0]
    assert solve(problem, root=0).tolist() == [0]


def test_rank_prizes_and_solver_check() -> None:
    assert rank_prizes(np.array([0.1, 0.9, 0.5, 0.7]), 3).tolist() == [0.0, 3.0, 1.0, 2.0]
    solve_pcst = pcst_solver()
    edges = np.array([[0, 1], [1, 2]], dtype=np.int64)
    nodes, chosen = solve_pcst(edges, np.array([5.0, 0, 5]), np.ones(2), -1, 1, "gw", 0)
    assert sorted(nodes.tolist()) == [0, 1, 2] and sorted(chosen.tolist()) == [0, 1]  # 10 of prize for 2 of cost
    nodes, chosen = solve_pcst(edges, np.array([5.0, 0, 0.5]), np.ones(2), -1, 1, "gw", 0)
    assert nodes.tolist() == [0] and chosen.tolist() == []  # the far prize does not pay for two edges


def test_a_wrong_pcst_build_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = types.ModuleType("pcst_fast")
    broken.pcst_fast = lambda *args: (np.array([0]), np.array([], dtype=np.int64))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pcst_fast", broken)
    with pytest.raises(ConfigError, match="wrong results"):
        pcst_solver.__wrapped__()  # past the cache of the checked solver


# ---------------------------------------------------------------- paths
def test_paths_are_scored_walks_from_the_topic(toy_index: IndexDir) -> None:
    retriever = PathRetriever(toy_index, k=8, max_length=2)
    context = retriever.retrieve("who starred in films directed by Christopher Nolan?",
                                 topic_entities=["Christopher Nolan"])
    scores = context.info["path_scores"]
    assert scores == sorted(scores, reverse=True) and len(context.paths) == len(scores) <= 8
    for path in context.paths:
        assert 1 <= len(path) <= 2
        here, visited = "Christopher Nolan", {"Christopher Nolan"}
        for triple in path:
            assert here in (triple.head, triple.tail)
            here = triple.tail if triple.head == here else triple.head
            assert here not in visited
            visited.add(here)
    union = list(dict.fromkeys(t for p in context.paths for t in p))
    assert list(context.triples) == union
    assert any(t.relation == "starred_actors" for t in context.triples)


def test_paths_respect_the_length_limit(toy_index: IndexDir) -> None:
    context = PathRetriever(toy_index, k=20, max_length=1).retrieve("who directed Titanic?")
    assert context.paths and all(len(p) == 1 for p in context.paths)
    assert context.paths[0] == (TITANIC,)


# ---------------------------------------------------------------- SimGRAG as a retriever
def test_simgrag_retriever_carries_pattern_and_subgraphs(toy_index: IndexDir) -> None:
    retriever = SimGRAGRetriever(toy_index, FakeLLM([PATTERN]))
    assert isinstance(retriever, (Retriever, ClaimRetriever, AdjustableRetriever, PatternRetriever))
    context = retriever.retrieve("who directed Titanic?", topic_entities=["Titanic"])
    assert context.triples[0] == TITANIC
    assert context.answer_candidates[0] == "James Cameron"
    assert context.pattern is not None and context.pattern.pattern.triples() == [
        ("Titanic", "directed by", "UNKNOWN director 1")]
    assert context.subgraphs is not None and context.subgraphs.evidence[0].binding("UNKNOWN director 1")
    assert context.info["asked_node"] == "UNKNOWN director 1" and context.info["topic_entities_given"] == ["Titanic"]
    assert context.scores[0] == pytest.approx(-context.info["gsd"][0])
    assert {"pattern_s", "embed_s", "vector_s", "graph_s", "total_s"} <= set(context.timings)
    body = context.to_dict()
    assert body["pattern"] == [["Titanic", "directed by", "UNKNOWN director 1"]] and body["subgraphs"]["matches"]


def test_simgrag_retriever_repairs_echoed_roles_with_the_kg(toy_index: IndexDir) -> None:
    """The KG role repair runs inside the retriever, so every path (ask, bench, serve) gets it."""
    echoed = json.dumps({"triples": [["Leonardo DiCaprio", "starred actors", "UNKNOWN actor 1"],
                                     ["UNKNOWN movie 1", "starred actors", "UNKNOWN actor 1"],
                                     ["UNKNOWN movie 1", "directed by", "UNKNOWN director 1"]]})
    context = SimGRAGRetriever(toy_index, FakeLLM([echoed])).retrieve("who directed movies Leonardo DiCaprio acted in")
    assert context.pattern is not None and context.pattern.kg_repairs
    assert ("UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio") in context.pattern.pattern.triples()
    assert set(context.answer_candidates) == {"Christopher Nolan", "James Cameron"}
    plain = SimGRAGRetriever(toy_index, FakeLLM([echoed]), repair_roles=False, ground_patterns=False).retrieve("q")
    assert plain.pattern is not None and not plain.pattern.kg_repairs


class FixedStage:
    """A pattern stage that needs no LLM: the same pattern for every text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def pattern(self, text: str) -> PatternResult:
        self.texts.append(text)
        pattern = validate_triples([["Titanic", "directed by", "UNKNOWN director 1"]])
        return PatternResult(pattern, "", 1, 0, 0, 0.0, False)


def test_simgrag_pattern_stage_can_be_swapped(toy_index: IndexDir) -> None:
    questions, claims = FixedStage(), FixedStage()
    retriever = SimGRAGRetriever(toy_index, patterns=questions, claim_patterns=claims)
    assert isinstance(retriever.patterns, PatternStage) and not isinstance(retriever.patterns, LLMPatternStage)
    assert retriever.retrieve("anything").answer_candidates[0] == "James Cameron"
    retriever.retrieve_claim("a claim")
    assert questions.texts == ["anything"] and claims.texts == ["a claim"]
    narrower = retriever.adjusted(k=1, deadline_s=5.0)
    assert narrower.settings == RetrievalSettings(k=1, deadline_s=5.0) and narrower.patterns is retriever.patterns
    with pytest.raises(ConfigError, match="no setting 'bogus'"):
        retriever.adjusted(bogus=1)


def test_simgrag_retriever_raises_pattern_errors(toy_index: IndexDir) -> None:
    with pytest.raises(PatternError):
        resolve_retriever("simgrag", index=toy_index, llm=FakeLLM(["nonsense", "still nonsense"])).retrieve("q?")


# ---------------------------------------------------------------- registry
def test_registry_lists_and_rejects(toy_index: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [e.name for e in list_retrievers()]
    assert names == ["simgrag", "kaping", "pcst", "triplets", "paths", "none", "subgraphrag", "gsr"]
    with pytest.raises(ConfigError, match="Unknown retriever"):
        resolve_retriever("bm25", index=toy_index)
    with pytest.raises(ConfigError, match="needs an LLM"):
        resolve_retriever("simgrag", index=toy_index)
    with pytest.raises(ConfigError, match="needs index"):
        resolve_retriever("kaping")
    with pytest.raises(ConfigError, match="The 'kaping' retriever takes no option 'bogus' \\(its options: k, hops"):
        resolve_retriever("kaping", index=toy_index, bogus=1)
    missing = Entry("gsr", "simgrag.retrievers._no_such_module:GSRRetriever", "gsr", "x",
                    requires=("simgrag_no_such_dependency",))
    monkeypatch.setitem(registry.RETRIEVERS._entries, "gsr", missing)
    with pytest.raises(ConfigError, match="not available"):
        resolve_retriever("gsr", index=toy_index)


def test_registry_builds_lazy_modules(toy_index: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("simgrag_fake_gsr")

    class FakeGSR:
        name = "gsr"

        def __init__(self, index: IndexDir, *, beam: int = 1) -> None:
            self.index, self.beam = index, beam

        def retrieve(self, question: str, *, topic_entities: object = None) -> RetrievedContext:
            return RetrievedContext(self.name, question, ())

    fake.GSRRetriever = FakeGSR  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "simgrag_fake_gsr", fake)
    monkeypatch.setitem(registry.RETRIEVERS._entries, "gsr", Entry("gsr", "simgrag_fake_gsr:GSRRetriever", "gsr", "x"))
    built = resolve_retriever("gsr", index=toy_index, beam=4)
    assert isinstance(built, FakeGSR) and built.beam == 4 and built.index is toy_index
    assert resolve_retriever(built, index=toy_index) is built
    with pytest.raises(ConfigError, match="takes no option 'bogus'"):
        resolve_retriever("gsr", index=toy_index, bogus=1)
    with pytest.raises(ConfigError, match="already built"):
        resolve_retriever(built, index=toy_index, beam=2)


# ---------------------------------------------------------------- reader
def _context(triples: list[tuple[str, str, str]], question: str = "who directed Titanic?") -> RetrievedContext:
    return RetrievedContext("test", question, tuple(Triple(*t) for t in triples))


def test_parse_every_ans_line_and_map_to_context_names() -> None:
    reply = ("To answer the question, we need the director of Titanic. From the triples we can see that "
             "Titanic was directed by James Cameron.\nTherefore, the answers are:\nans: james cameron\n"
             "ans: 1997 (release year)\n- ans: **Kate Winslet**\nans: not available\nans: James Cameron")
    names = ["Titanic", "James Cameron", "1997", "Kate Winslet"]
    assert parse_answers(reply, names) == ("James Cameron", "1997", "Kate Winslet")
    assert parse_answers("ans: Someone Else", names) == ("Someone Else",)
    assert parse_answers("ans: not available") == ()


def test_parse_kaping_style_replies() -> None:
    names = ["Titanic", "James Cameron", "Kate Winslet"]
    said = "The director of Titanic is James Cameron."
    assert parse_answers(said, names, question="who directed Titanic?") == ("James Cameron",)
    assert parse_answers(said, names) == ("Titanic", "James Cameron")
    assert parse_answers("Titanic.", names, question="who directed Titanic?") == ("Titanic",)
    assert parse_answers("James Cameron", names) == ("James Cameron",)
    assert parse_answers("answer: James Cameron | Kate Winslet", names) == ("James Cameron", "Kate Winslet")
    assert parse_answers("Jim Cameron, I think", ()) == ("Jim Cameron", "I think")


def test_read_context_prompts_and_parses() -> None:
    llm = FakeLLM(["From the triples, Titanic was directed by James Cameron.\nans: James Cameron"])
    context = _context([TITANIC.as_tuple(), ("Titanic", "release_year", "1997")])
    reading = read_context(llm, context, style="subgraphrag")
    assert reading.entities == ("James Cameron",) and reading.context_items == 2
    prompt = llm.calls[0].prompt
    assert "(Titanic, directed_by, James Cameron)" in prompt and "who directed Titanic?" in prompt
    assert 'prefixed with "ans:"' in prompt
    assert reading.prompt_tokens > 0 and reading.completion_tokens > 0


@pytest.mark.parametrize("style", ["kaping", "subgraphrag", "paths", "none"])
def test_every_style_builds_a_prompt_with_the_question(style: str) -> None:
    context = _context([TITANIC.as_tuple()])
    messages, kept = reader_messages(context, style=style)
    text = "\n".join(m.content for m in messages)
    assert "who directed Titanic?" in text
    assert (kept == 0) == (style == "none")
    assert ("James Cameron" in messages[-1].content) == (style != "none")
    if style == "kaping":
        assert text.rstrip().endswith("Answer:")
    if style == "paths":
        assert "Titanic -[directed_by]-> James Cameron" in text
    with pytest.raises(ConfigError):
        reader_messages(context, style="chatty")


def test_reader_caps_the_context() -> None:
    many = [(f"Film {i}", "directed_by", f"Director number {i}") for i in range(500)]
    messages, kept = reader_messages(_context(many), style="subgraphrag", max_triples=400, max_prompt_tokens=600)
    assert 0 < kept < 400
    assert sum(approx_tokens(m.content) + 4 for m in messages) <= 600
    _, capped = reader_messages(_context(many), style="kaping", max_triples=10)
    assert capped == 10


def test_path_chain_follows_the_walk() -> None:
    path = (Triple("Memento", "directed_by", "Christopher Nolan"), Triple("Memento", "starred_actors", "Guy Pearce"))
    assert path_chain(path) == "Christopher Nolan <-[directed_by]- Memento -[starred_actors]-> Guy Pearce"
    assert path_chain((TITANIC,)) == "Titanic -[directed_by]-> James Cameron"


def test_read_context_on_a_real_retrieval(toy_index: IndexDir, tmp_path: Path) -> None:
    context = resolve_retriever("paths", index=toy_index).retrieve("who directed Titanic?")
    llm = FakeLLM(["ans: James Cameron"])
    reading = read_context(llm, context, style="paths")
    assert reading.entities == ("James Cameron",)
    assert "Titanic -[directed_by]-> James Cameron" in llm.calls[0].prompt
