"""The search's kind prior (simgrag.match.kinds): a typed unknown node pays a distance for an entity the examples'
patterns put only among other kinds; its switch in the retriever and in the per-KG fit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.errors import ConfigError
from simgrag.eval.fit_grounding import Outcome, _kind_prior_check
from simgrag.eval.runner import QAItem
from simgrag.grounding.fit import GroundingFit, store_fit
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.kg.store import KGStore
from simgrag.match.candidates import CandidateTable
from simgrag.match.kinds import KIND_PENALTY, UNTYPED, example_uses, kind_of, node_kinds
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.match.search import search_subgraphs
from simgrag.pattern.examples import ExampleSet, load_examples
from simgrag.retrievers.simgrag import SimGRAGRetriever
from simgrag.testing.brute_force import brute_force_top_k
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from test_match_property import draw_pattern
from test_search_oracle import hub_kg

# a WorldCup-like KG: people play for countries and in clubs, clubs are in countries; Haiti is named by no example
FOOTBALL = [("Rooney", "plays_for_country", "England"), ("Rooney", "plays_in_club", "ManUtd"),
            ("Ozil", "plays_for_country", "Germany"), ("Ozil", "plays_in_club", "Arsenal"),
            ("ManUtd", "is_in_country", "England"), ("Arsenal", "is_in_country", "England"),
            ("Watford", "is_in_country", "England"), ("Kane", "plays_for_country", "England"),
            ("Kane", "plays_in_club", "Watford"), ("Haiti", "borders", "England")]
EXAMPLES = """\
name: football
examples:
  - question: Who plays for Germany?
    triples:
      - [UNKNOWN person 1, plays for country, Germany]
  - question: Which clubs are in England?
    triples:
      - [UNKNOWN club 1, is in country, England]
  - question: Which club does Ozil play in?
    triples:
      - [Ozil, plays in club, UNKNOWN club 1]
"""
EXAMPLE_PATTERNS = [[["UNKNOWN person 1", "plays for country", "Germany"]],
                    [["UNKNOWN club 1", "is in country", "England"]],
                    [["Ozil", "plays in club", "UNKNOWN club 1"]]]


@pytest.fixture(scope="module")
def football(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("football")
    (root / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in FOOTBALL), encoding="utf-8")
    build_index_dir(root / "kg.tsv", root / "kg.idx", embedder=HashEmbedder(dim=64), show_progress=False)
    (root / "examples.yaml").write_text(EXAMPLES, encoding="utf-8")
    return root


def _retriever(root: Path) -> SubgraphRetriever:
    return SubgraphRetriever(open_index_dir(root / "kg.idx", embedder=HashEmbedder(dim=64)))


def _names(retriever: SubgraphRetriever, ids: np.ndarray) -> set[str]:
    return {retriever.store.entities[int(i)] for i in ids}


def test_kinds_are_the_examples_typed_unknowns_at_relation_ends(football: Path) -> None:
    retriever = _retriever(football)
    rel = {name: i for i, name in enumerate(retriever.store.relations)}
    uses = example_uses([*EXAMPLE_PATTERNS, [["not", "a pattern"]], [["Ozil", "plays in club", "UNKNOWN 1"]]],
                        retriever.nearest_relation)
    # the unparsable pattern is skipped; the untyped unknown gives nothing; named nodes give nothing
    assert uses == {("person", rel["plays_for_country"], "head"), ("club", rel["is_in_country"], "head"),
                    ("club", rel["plays_in_club"], "tail")}
    kinds = node_kinds(retriever.store, uses)
    assert kinds.kinds == ("club", "person")
    assert _names(retriever, kinds.members["person"]) == {"Rooney", "Ozil", "Kane"}
    assert _names(retriever, kinds.members["club"]) == {"ManUtd", "Arsenal", "Watford"}
    # contrary to "person": the clubs; countries and Haiti are of no kind the examples give, so never contrary
    assert _names(retriever, kinds.contrary("Persons")) == {"ManUtd", "Arsenal", "Watford"}
    assert len(kinds.contrary("stadium")) == 0 and kind_of(" Countries ") == "country"


def test_a_node_typed_entity_is_of_no_kind(football: Path) -> None:
    """Learning types a relation end whose kind it could not tell ``UNKNOWN entity 1`` (its fallback), and edits and
    readings name the hops they add so: such a node makes no kind, and one in the LLM's pattern is never penalised
    (the DBpedia-shaped KG's "What language family is X's language related to?" had matched a wrong X for it)."""
    retriever = _retriever(football)
    fallback = [["Ozil", "plays for country", "UNKNOWN entity 1"]]
    uses = example_uses([*EXAMPLE_PATTERNS, fallback, [["UNKNOWN Entities 2", "is in country", "England"]]],
                        retriever.nearest_relation)
    assert {kind for kind, _, _ in uses} == {"person", "club"}
    kinds = node_kinds(retriever.store, uses)
    assert UNTYPED not in kinds.members and kinds.candidates("entity", 1.0) is None
    retriever.use_kinds([*EXAMPLE_PATTERNS, fallback])
    found = retriever.retrieve([["UNKNOWN entity 1", "is in country", "England"]], RetrievalSettings(kind_penalty=2.0))
    assert found.evidence[0].gsd < 1.0 and found.evidence[0].nodes[0].entity in {"ManUtd", "Arsenal", "Watford"}


def test_candidates_penalise_only_the_entities_of_other_kinds(football: Path) -> None:
    retriever = _retriever(football)
    kinds = node_kinds(retriever.store, example_uses(EXAMPLE_PATTERNS, retriever.nearest_relation))
    found = kinds.candidates("person", 0.7)
    assert found is not None and found.prior and found.unanchored and not found.any_entity
    assert len(found.ids) == retriever.store.num_entities
    penalised = {retriever.store.entities[int(i)] for i, d in zip(found.ids, found.dists, strict=True) if d > 0}
    assert penalised == {"ManUtd", "Arsenal", "Watford"} and set(found.dists.tolist()) == {0.0, 0.7}
    assert kinds.candidates("person", 0.7) is found  # kept per (kind, penalty)
    hard = kinds.candidates("person", math.inf)
    assert hard is not None and _names(retriever, hard.ids).isdisjoint({"ManUtd", "Arsenal", "Watford"})
    assert kinds.candidates("stadium", 0.7) is None  # a kind no example uses: any entity, as before
    only = node_kinds(retriever.store, [("person", 0, "head")])  # nothing of another kind: no prior
    assert only.candidates("person", 1.0) is None


def test_the_search_honours_the_llm_kind_over_an_exact_match_of_another(football: Path) -> None:
    """ "Who is from England?" written with the clubs' relation: the clubs in England match it exactly, but the LLM
    asked for people; with the prior the people of England come first."""
    retriever = _retriever(football)
    pattern = [["UNKNOWN person 1", "is in country", "England"]]
    strong = RetrievalSettings(kind_penalty=2.0)  # above any relation distance: the hash embedder's are ~1.4

    def first(settings: RetrievalSettings) -> str:
        found = retriever.retrieve(pattern, settings)
        return found.evidence[0].nodes[0].entity

    assert first(strong) in {"ManUtd", "Arsenal", "Watford"}  # no examples given yet: no prior
    retriever.use_kinds(EXAMPLE_PATTERNS)
    assert first(strong) in {"Rooney", "Kane"}
    assert first(RetrievalSettings(kind_penalty=None)) in {"ManUtd", "Arsenal", "Watford"}  # the paper's search
    assert first(RetrievalSettings(kind_penalty=math.inf)) in {"Rooney", "Kane"}
    # a named node or an untyped unknown is not touched
    found = retriever.retrieve([["UNKNOWN 1", "is in country", "England"]], strong)
    assert found.evidence[0].nodes[0].entity in {"ManUtd", "Arsenal", "Watford"}
    retriever.use_kinds([])  # none: the prior is gone
    assert retriever.kinds() is None and first(strong) in {"ManUtd", "Arsenal", "Watford"}


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), True, "1.0"])
def test_a_kind_penalty_that_is_no_positive_distance_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigError, match="kind_penalty"):
        RetrievalSettings(kind_penalty=bad)
    assert RetrievalSettings(kind_penalty=math.inf).kind_penalty == math.inf
    assert RetrievalSettings().kind_penalty == KIND_PENALTY


@st.composite
def prior_case(draw: st.DrawFn) -> tuple[KGStore, Any, CandidateTable]:
    """A pattern on a hub KG whose unknown nodes get kind priors from random uses, at random penalties."""
    store = draw(hub_kg())
    shape = draw(st.sampled_from([[(0, 1)], [(0, 1), (1, 2)], [(0, 1), (0, 2)], [(0, 1), (1, 2), (2, 0)]]))
    pattern, table = draw_pattern(draw, store, shape, st.sampled_from([0.0, 0.25, 0.5, 0.1]), unknown_relations=3)
    uses = draw(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, store.num_relations - 1),
                                   st.sampled_from(["head", "tail"])), min_size=1, max_size=4))
    kinds = node_kinds(store, uses)
    nodes = list(table.nodes)
    for i, node in enumerate(nodes):
        if node.any_entity:
            prior = kinds.candidates(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from([0.3, 1.0, math.inf])))
            nodes[i] = prior if prior is not None else node
    return store, pattern, CandidateTable(tuple(nodes), table.rel_dists)


@settings(max_examples=150, deadline=None)
@given(prior_case(), st.integers(1, 4), st.booleans())
def test_the_search_with_kind_priors_is_exact_top_k(data: tuple[KGStore, Any, CandidateTable], k: int,
                                                    injective: bool) -> None:
    store, pattern, table = data
    result = search_subgraphs(store, pattern, table, k=k, injective=injective)
    want = brute_force_top_k(store, pattern, table, k, injective=injective)
    assert result.complete
    assert [m.gsd for m in result.matches] == pytest.approx([m.gsd for m in want])


def _items() -> list[QAItem]:
    return [QAItem(f"q{i}", ("a",), group) for i, group in enumerate(["1hop"] * 4 + ["2hop"] * 4)]


class _Runner:
    """The two runs :func:`_kind_prior_check` asks for: the outcomes without the prior are given."""

    def __init__(self, without: dict[int, Outcome], options: dict[str, Any] | None = None) -> None:
        self.without, self.options = without, options or {}
        self.asked: list[bool | None] = []

    def run(self, config: Any, which: Any, what: str, until: Any = None, kind_prior: bool | None = None,
            step_kind: str | None = None) -> dict[int, Outcome]:
        self.asked.append(kind_prior)
        return {i: self.without[i] for i in which}


def _outcomes(hits: list[bool]) -> dict[int, Outcome]:
    return {i: Outcome(h) for i, h in enumerate(hits)}


def test_the_fit_turns_the_prior_off_where_a_question_group_loses_to_it() -> None:
    said: list[str] = []
    with_prior = _outcomes([True, True, True, False, True, True, False, False])
    runner = _Runner(_outcomes([True, True, True, True, True, True, False, False]))  # 1-hop lost one to it
    verdict, without = _kind_prior_check(runner, with_prior, _items(), said.append)  # type: ignore[arg-type]
    assert runner.asked == [False] and said
    assert verdict["on"] is False and (verdict["fixed"], verdict["broke"]) == (0, 1)
    assert without is not None and without[3].hit  # the rest of the fit runs without it
    runner = _Runner(_outcomes([True, True, True, False, True, False, False, False]))  # 2-hop gained one
    verdict, _ = _kind_prior_check(runner, with_prior, _items(), said.append)  # type: ignore[arg-type]
    assert verdict["on"] is True and (verdict["fixed"], verdict["broke"]) == (1, 0)
    off = _Runner({}, {"kind_prior": False})  # the caller turned it off: nothing to run
    verdict, without = _kind_prior_check(off, with_prior, _items(), said.append)  # type: ignore[arg-type]
    assert verdict["on"] is False and without is with_prior
    assert off.asked == []


def test_the_fit_switch_round_trips_and_old_fits_keep_the_prior_on() -> None:
    fit = GroundingFit(False, kind_prior=False)
    assert GroundingFit.from_dict(fit.to_dict()) == fit and "kind prior off" in fit.describe()
    old = {k: v for k, v in GroundingFit(False).to_dict().items() if k != "kind_prior"}
    assert GroundingFit.from_dict(old).kind_prior is True
    with pytest.raises(ConfigError, match="kind_prior"):
        GroundingFit.from_dict({**old, "kind_prior": "yes"})


def test_the_retriever_gives_the_search_its_examples_kinds_as_the_fit_says(football: Path, tmp_path: Path) -> None:
    index = open_index_dir(football / "kg.idx", embedder=HashEmbedder(dim=64))
    examples: ExampleSet = load_examples(football / "examples.yaml")
    llm = FakeLLM([])

    def kinds_of(**options: Any) -> tuple[bool, Any]:
        retriever = SimGRAGRetriever(index, llm, examples=examples, channel=False, **options)
        return retriever.kind_prior, retriever.subgraphs.kinds()

    on, kinds = kinds_of()  # no fit: on
    assert on and kinds is not None and kinds.kinds == ("club", "person")
    assert kinds_of(ground_patterns=False) == (False, None)  # --no-grounding: the LLM's pattern, the paper's search
    assert kinds_of(kind_prior=False) == (False, None)
    copy = tmp_path / "kg.idx"
    import shutil

    shutil.copytree(football / "kg.idx", copy)
    store_fit(copy, GroundingFit(False, kind_prior=False))
    fitted = open_index_dir(copy, embedder=HashEmbedder(dim=64))
    assert SimGRAGRetriever(fitted, llm, examples=examples, channel=False).kind_prior is False
    assert SimGRAGRetriever(fitted, llm, examples=examples, channel=False, kind_prior=True).kind_prior is True


WORDS = st.sampled_from(["person", "club", "persons", "Club", "country", "", "  ", "UNKNOWN", "1", "é", "is in country",
                         "plays for country", "England", "Rooney", "x" * 300])
NODES = st.one_of(WORDS, st.builds(lambda w, n: f"UNKNOWN {w} {n}", WORDS, st.integers(0, 3)), st.text(max_size=20))
TRIPLES = st.lists(st.tuples(NODES, WORDS | st.text(max_size=10), NODES), min_size=0, max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(TRIPLES, max_size=4), TRIPLES, st.sampled_from([0.5, 1.0, math.inf, None]))
def test_any_examples_and_pattern_give_a_result_or_a_typed_error(football_search: SubgraphRetriever,
                                                                   examples: list[Any], pattern: list[Any],
                                                                   penalty: float | None) -> None:
    """Example patterns and query patterns are LLM text: whatever they say, the search answers or raises one of the
    library's errors."""
    from simgrag.errors import SimGRAGError

    football_search.use_kinds(examples)
    try:
        found = football_search.retrieve([list(t) for t in pattern], RetrievalSettings(kind_penalty=penalty))
    except SimGRAGError:
        return
    assert all(np.isfinite(e.gsd) for e in found.evidence)


@pytest.fixture(scope="module")
def football_search(football: Path) -> SubgraphRetriever:
    return _retriever(football)
