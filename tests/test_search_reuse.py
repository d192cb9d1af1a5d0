"""A search that ran to the end is handed back for the same pattern and settings, not run again (issue 41, build 4:
the channel's longer readings bind the asked-for node of the pattern the retriever then searches for its evidence)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simgrag.errors import MatchError
from simgrag.index.directory import IndexDir
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.simgrag import SimGRAGRetriever
from simgrag.testing.llm import FakeLLM
from test_channel import _respond, toy  # noqa: F401  (the toy index fixture and its scripted LLM)
from test_kind_prior import EXAMPLE_PATTERNS, _retriever, football  # noqa: F401  (a KG with kinds)

PATTERNS = [
    [["UNKNOWN person 1", "plays for country", "England"]],
    [["UNKNOWN person 1", "plays in club", "UNKNOWN club 1"], ["UNKNOWN club 1", "is in country", "England"]],
    [["Ozil", "plays in club", "UNKNOWN club 1"]],
    [["UNKNOWN club 1", "is in country", "UNKNOWN country 1"]],
]


def _counted(retriever: SubgraphRetriever) -> list[Pattern]:
    """Record every search the retriever really runs."""
    ran: list[Pattern] = []
    search = retriever._search

    def counting(pattern: Pattern, settings: RetrievalSettings) -> Retrieval:
        ran.append(pattern)
        return search(pattern, settings)

    retriever._search = counting  # type: ignore[method-assign]
    return ran


def _matches(found: Retrieval) -> Any:
    data = found.to_dict()
    return data["matches"], data["answer_set"], data["complete"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.lists(st.sampled_from(range(len(PATTERNS))), min_size=1, max_size=12),
       k=st.sampled_from([1, 3]), kinds=st.booleans())
def test_a_reused_search_is_the_search_run_afresh(football: Path, order: list[int], k: int,  # noqa: F811
                                                   kinds: bool) -> None:
    """Whatever order patterns come in, each answer is what a retriever that keeps nothing finds."""
    kept, fresh = _retriever(football), SubgraphRetriever(_retriever(football).index, search_cache_size=0)
    if kinds:
        kept.use_kinds(EXAMPLE_PATTERNS)
        fresh.use_kinds(EXAMPLE_PATTERNS)
    ran = _counted(kept)
    for i in order:
        chosen = RetrievalSettings(k=k)
        assert _matches(kept.retrieve(PATTERNS[i], chosen)) == _matches(fresh.retrieve(PATTERNS[i], chosen))
    assert len(ran) == len(set(order))  # each pattern searched once


def test_settings_kinds_and_the_cache_size_decide_what_is_reused(football: Path) -> None:  # noqa: F811
    retriever = _retriever(football)
    ran = _counted(retriever)
    first = retriever.retrieve(PATTERNS[0])
    again = retriever.retrieve(PATTERNS[0], RetrievalSettings(deadline_s=None, max_steps=10**6))  # limits: same
    assert not first.reused and again.reused and len(ran) == 1
    assert again.timings["graph_s"] == 0.0 and first.timings["graph_s"] > 0  # this call's cost: no search
    from simgrag.cli.kg import format_retrieval
    assert "handed back" in format_retrieval(again) and "handed back" not in format_retrieval(first)
    assert again.deadline_s is None and first.deadline_s is not None  # what this call asked for
    retriever.retrieve(PATTERNS[0], RetrievalSettings(k=1))  # another setting: another search
    assert len(ran) == 2
    retriever.use_kinds(EXAMPLE_PATTERNS)  # the kinds change the search: nothing from before is reused
    retriever.retrieve(PATTERNS[0])
    assert len(ran) == 3
    retriever.use_kinds(EXAMPLE_PATTERNS)  # the same kinds again: kept
    retriever.retrieve(PATTERNS[0])
    assert len(ran) == 3
    # the oldest goes first once the cache is full
    small = SubgraphRetriever(retriever.index, search_cache_size=2)
    ran = _counted(small)
    for i in (0, 1, 2, 0):
        small.retrieve(PATTERNS[i])
    assert len(ran) == 4
    small.retrieve(PATTERNS[2])
    assert len(ran) == 4
    none = SubgraphRetriever(retriever.index, search_cache_size=0)
    ran = _counted(none)
    none.retrieve(PATTERNS[0])
    none.retrieve(PATTERNS[0])
    assert len(ran) == 2
    for bad in (-1, True, 1.5, "8"):
        with pytest.raises(MatchError, match="search_cache_size"):
            SubgraphRetriever(retriever.index, search_cache_size=bad)  # type: ignore[arg-type]


def test_a_search_cut_short_is_not_reused(football: Path) -> None:  # noqa: F811
    retriever = _retriever(football)
    ran = _counted(retriever)
    capped = RetrievalSettings(max_steps=1)
    cut = retriever.retrieve(PATTERNS[1], capped)
    assert not cut.complete
    retriever.retrieve(PATTERNS[1], capped)
    assert len(ran) == 2  # a second try may get further


def test_threads_share_the_kept_searches(football: Path) -> None:  # noqa: F811
    retriever = _retriever(football)
    expected = [_matches(SubgraphRetriever(retriever.index, search_cache_size=0).retrieve(p)) for p in PATTERNS]
    errors: list[BaseException] = []

    def work(offset: int) -> Callable[[], None]:
        def run() -> None:
            try:
                for j in range(40):
                    i = (j + offset) % len(PATTERNS)
                    assert _matches(retriever.retrieve(PATTERNS[i])) == expected[i]
            except BaseException as exc:  # handed to the main thread
                errors.append(exc)
        return run

    threads = [threading.Thread(target=work(n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_the_retriever_searches_the_llms_pattern_once_per_question(toy: IndexDir) -> None:  # noqa: F811
    """The channel's longer readings bind the pattern's asked-for node with a search; where the LLM's pattern stays,
    its evidence is that same search."""
    def own(prefix: str, condition: str, scored: str) -> float:  # every reading less likely than the LLM's own
        return -1.0 if condition.count("[") == 2 else -9.0

    llm = FakeLLM(_respond, scores=own)
    retriever = SimGRAGRetriever(toy, llm, channel=True, channel_readings=("longer",), ground_patterns=False)
    ran = _counted(retriever.subgraphs)
    context = retriever.retrieve("When were the movies Kate Winslet starred in released?")
    assert context.pattern is not None and context.pattern.attempts > 0 and context.pattern.families == ()
    assert len(ran) == 1 and context.subgraphs is not None and context.subgraphs.reused
    assert context.answer_candidates


def test_the_pattern_the_judge_chose_is_not_searched_again(toy: IndexDir) -> None:  # noqa: F811
    """With the pattern stage on, the judge searches each candidate under its step cap; the retriever's search of
    the chosen one is the judge's (the same settings but the caps)."""
    retriever = SimGRAGRetriever(toy, FakeLLM(_respond), ground_patterns=True, channel=False)
    ran = _counted(retriever.subgraphs)
    context = retriever.retrieve("Which movies did Kate Winslet star in?")
    assert context.subgraphs is not None and context.subgraphs.reused
    chosen = tuple(context.pattern.pattern.triples()) if context.pattern is not None else ()
    assert [tuple(p.triples()) for p in ran].count(chosen) == 1  # the judge's search, once
    assert context.subgraphs.deadline_s == retriever.settings.deadline_s  # the retriever's own, not the judge's
