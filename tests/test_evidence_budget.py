"""The evidence a prompt carries is bounded: a chain of unknown nodes over a large family binds dozens of names to
each node, and the embedded model's context (4,096 tokens) must still hold the question and the answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.answer.verbalize import MAX_EVIDENCE_CHARS, verbalize_retrieval
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.match.retrieve import Retrieval, SubgraphRetriever
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

CHAIN = [["UNKNOWN person 1", "children", "UNKNOWN person 2"], ["UNKNOWN person 2", "children", "UNKNOWN person 3"],
         ["UNKNOWN person 3", "nationality", "UNKNOWN country 1"]]


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    root = tmp_path_factory.mktemp("family")
    rows = []
    for p in range(60):  # 60 parents, 3 children each, 2 grandchildren each: long hyphenated names
        parent = f"Parent{p} Quarrie-Wolstanholme-Ashgrove"
        for c in range(3):
            child = f"Child{p}x{c} Lathom-Delacourt-Pennarth"
            rows.append(f"{parent}|children|{child}")
            for g in range(2):
                grandchild = f"Grandchild{p}x{c}x{g} Tredgold-Vantreight-Moncrieff"
                rows.append(f"{child}|children|{grandchild}")
                rows.append(f"{grandchild}|nationality|Country{(p + c + g) % 7}")
    (root / "family.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    build_index_dir(root / "family.txt", root / "family.idx", embedder=HashEmbedder(dim=64))
    return open_index_dir(root / "family.idx", embedder=HashEmbedder(dim=64))


def test_a_huge_answer_set_is_written_within_the_evidence_budget(family: IndexDir) -> None:
    retrieval = SubgraphRetriever(family).retrieve(CHAIN)
    unbounded = verbalize_retrieval(retrieval, max_chars=None)
    assert len(unbounded) > MAX_EVIDENCE_CHARS  # the case this guards against
    text = verbalize_retrieval(retrieval)
    assert len(text) <= MAX_EVIDENCE_CHARS and text.startswith("graph [1]: ")
    assert "more" in text  # the names left out are counted, not silently dropped
    # a tiny budget still gives a well-formed start, then a cut
    short = verbalize_retrieval(retrieval, max_chars=80)
    assert len(short) <= 80 and short.startswith("graph [1]: ") and short.endswith(" …")


def test_the_answer_prompt_stays_within_the_budget(family: IndexDir) -> None:
    prompts: list[str] = []

    def respond(messages: Sequence[ChatMessage]) -> str:
        if "knowledge-graph pattern" in messages[0].content:
            return json.dumps({"triples": CHAIN})
        prompts.append(messages[-1].content)
        return "answer: Country1"

    engine = SimGRAG(family, llm=FakeLLM(respond), calibration="off", answer_mode="llm",
                     retriever_options={"ground_patterns": False, "channel": False,
                                        "examples": _examples(family.path.parent)})
    result = engine.ask("What are the nationalities of the grandchildren of anyone?")
    assert prompts and all(len(p) < MAX_EVIDENCE_CHARS + 2000 for p in prompts)
    assert result.answer.text


def _examples(root: Path) -> Path:
    path = root / "examples.yaml"
    path.write_text("relations: [children, nationality]\nexamples:\n  - question: who are the children of X\n"
                    "    triples: [[X, children, UNKNOWN person 1]]\n", encoding="utf-8")
    return path


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(min_value=0, max_value=20000))
def test_any_budget_is_kept(budget: int) -> None:
    retrieval = _RETRIEVAL[0]
    text = verbalize_retrieval(retrieval, max_chars=budget)
    assert len(text) <= budget
    if budget >= len("graph [1]: ") + 2:
        assert text.startswith("graph [1]: ")


_RETRIEVAL: list[Retrieval] = []  # filled by the fixture below (hypothesis tests take no function-scoped fixtures)


@pytest.fixture(autouse=True, scope="module")
def _retrieval(family: IndexDir) -> None:
    _RETRIEVAL[:] = [SubgraphRetriever(family).retrieve(CHAIN)]


def test_a_claims_evidence_from_any_retriever_stays_within_the_budget() -> None:
    """verify: 100 three-hop paths of long names (a path retriever's context) would be ~30,000 characters, past the
    embedded model's context; the block keeps the best paths first, whole, within the budget."""
    from simgrag.answer.verify import context_evidence
    from simgrag.kg.store import Triple
    from simgrag.retrievers.base import RetrievedContext

    def path(i: int) -> tuple[Triple, ...]:
        names = [f"Person{i}x{k} Quarrie-Wolstanholme-Ashgrove-Delacourt" for k in range(4)]
        return tuple(Triple(names[k], "children", names[k + 1]) for k in range(3))

    paths = tuple(path(i) for i in range(100))
    context = RetrievedContext("paths", "a claim", tuple(t for p in paths for t in p), paths=paths)
    text, items = context_evidence(context)
    assert items == 100 and len(text) <= MAX_EVIDENCE_CHARS
    assert "Person0x0 " in text and "Person99x0 " not in text and not text.endswith(" …")  # whole lines, best first
    flat = RetrievedContext("triples", "a claim", tuple(t for p in paths for t in p))
    text, items = context_evidence(flat)
    assert items == 100 and len(text) <= MAX_EVIDENCE_CHARS and "Person0x0 " in text
