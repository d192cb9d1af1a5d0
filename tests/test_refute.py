"""Issue 42 part 2: a claim the KG contradicts is "Refuted" with the contradicting fact, for relations the
KG's own statistics find functional; "Not enough evidence" only when the KG holds nothing on the claim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.index.directory import build_index_dir
from simgrag.kg.functional import relation_functionality
from simgrag.pipeline import SimGRAG
from simgrag.testing import FakeLLM, HashEmbedder

NO_ANALOGY = {"analogy": False}


@pytest.fixture(scope="module")
def films_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """25 films with one director and one year each, and three actors each: ``directed_by`` and
    ``release_year`` functional by the counts, ``starred_actors`` not."""
    root = tmp_path_factory.mktemp("films")
    lines = []
    for i in range(25):
        lines += [f"Film {i}|directed_by|Director {i % 7}", f"Film {i}|release_year|{1980 + i}"]
        lines += [f"Film {i}|starred_actors|Actor {(i + k) % 11}" for k in range(3)]
    (root / "films.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index_dir(root / "films.txt", root / "films.idx", embedder=HashEmbedder(dim=64))
    return root / "films.idx"


def _engine(index: Path, pattern: list[list[str]], *replies: str) -> tuple[SimGRAG, FakeLLM]:
    llm = FakeLLM([json.dumps({"triples": pattern}), *replies])
    return SimGRAG(index, llm=llm, ground_patterns=False, pattern_options=NO_ANALOGY), llm


def test_functionality_comes_from_the_kg(films_dir: Path) -> None:
    engine, _ = _engine(films_dir, [["Film 1", "directed by", "Director 1"]])
    store = engine.index.store
    stats = {store.relations[r]: f for r, f in relation_functionality(store).items()}
    assert stats["directed_by"].functional("head") and stats["release_year"].functional("head")
    assert not stats["starred_actors"].functional("head") and not stats["directed_by"].functional("tail")


def test_claim_contradicted_by_a_functional_relation_is_refuted_with_the_fact(films_dir: Path) -> None:
    engine, llm = _engine(films_dir, [["Film 3", "directed by", "Director 5"]])
    result = engine.verify("Film 3 was directed by Director 5")
    verdict = result.verdict
    assert verdict.label == "Refuted" and not verdict.llm_used and len(llm.calls) == 1  # the pattern call only
    assert [c.held.as_tuple() for c in verdict.contradictions] == [("Film 3", "directed_by", "Director 3")]
    assert "the KG holds (Film 3, directed_by, Director 3), not Director 5" in verdict.reason
    payload = result.to_dict()
    assert payload["contradictions"][0]["held"] == ["Film 3", "directed_by", "Director 3"]
    assert payload["evidence"]["matches"], "the contradicting fact is shown as evidence"
    assert "refute_s" in result.timings


def test_supported_claim_is_not_contradicted(films_dir: Path) -> None:
    engine, llm = _engine(films_dir, [["Film 3", "directed by", "Director 3"]], "verdict: Supported")
    verdict = engine.verify("Film 3 was directed by Director 3").verdict
    assert verdict.label == "Supported" and not verdict.contradictions and len(llm.calls) == 2


def test_non_functional_relation_gives_the_llm_what_the_kg_holds(films_dir: Path) -> None:
    engine, llm = _engine(films_dir, [["Film 3", "starred actors", "Actor 9"]], "verdict: Refuted")
    verdict = engine.verify("Film 3 starred Actor 9").verdict
    assert verdict.label == "Refuted" and not verdict.contradictions and verdict.llm_used
    assert "Actor 3" in llm.calls[1].prompt  # Film 3's own actors reached the verification prompt


def test_a_claim_about_an_entity_the_kg_lacks_is_never_refuted_by_another_ones_facts(films_dir: Path) -> None:
    engine, _ = _engine(films_dir, [["Glass Orchard", "directed by", "Zed Q"]], "verdict: Not enough evidence")
    verdict = engine.verify("Glass Orchard was directed by Zed Q").verdict
    assert not verdict.contradictions  # the nearest film's director is not the made-up one's


def test_cli_prints_the_contradicting_fact(films_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = FakeLLM([json.dumps({"triples": [["Film 3", "directed by", "Director 5"]]})])
    monkeypatch.setattr("simgrag.cli._common.llm_for", lambda choice: llm)
    out = CliRunner().invoke(app, ["verify", str(films_dir), "Film 3 was directed by Director 5", "--no-grounding",
                                   "--no-analogy", "--no-learn", "--examples", str(_examples(films_dir))])
    assert out.exit_code == 0, out.output
    assert "Verdict: Refuted" in out.output and "contradicted by: Film 3 --directed_by--> Director 3" in out.output
    assert "LLM reply" not in out.output and "(no LLM call:" in out.output


def _examples(index: Path) -> Path:
    path = index.parent / "examples.yaml"
    path.write_text("examples:\n  - question: Who directed Film 1?\n    triples:\n"
                    "      - [Film 1, directed by, UNKNOWN director 1]\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.llm
def test_real_models_refute_heat_by_steven_spielberg(embedded_model: Path) -> None:
    from simgrag.pipeline import sample_index

    result = SimGRAG(sample_index(), llm="llamacpp", llm_options={"cache": False}).verify(
        "Heat was directed by Steven Spielberg")
    assert result.verdict.label == "Refuted", result.to_dict()
    held = {c.held.as_tuple() for c in result.verdict.contradictions}
    assert ("Heat", "directed_by", "Michael Mann") in held


def test_a_claim_about_an_entity_the_kg_lacks_is_not_enough_evidence_not_refuted(films_dir: Path) -> None:
    from simgrag.answer.calibration import Calibration

    calibration = Calibration(named=0.2)  # the KG's fitted "no entity this close" threshold
    made_up = [["The Glass Orchard", "directed by", "Director 2"]]
    llm = FakeLLM([json.dumps({"triples": made_up})])
    engine = SimGRAG(films_dir, llm=llm, ground_patterns=False, pattern_options=NO_ANALOGY, calibration=calibration)
    result = engine.verify("The Glass Orchard was directed by Director 2")
    assert result.verdict.label == "Not enough evidence"
    assert "no entity named 'The Glass Orchard'" in result.verdict.reason
    assert not result.verdict.contradictions and len(llm.calls) == 1  # the pattern call only: no verdict call
    # a name the KG has, bound elsewhere in the best match, is no unknown entity: refuted by the fact as before
    known = FakeLLM([json.dumps({"triples": [["Film 3", "directed by", "Director 5"]]})])
    engine = SimGRAG(films_dir, llm=known, ground_patterns=False, pattern_options=NO_ANALOGY, calibration=calibration)
    assert engine.verify("Film 3 was directed by Director 5").verdict.label == "Refuted"
    # without a calibration for this KG there is no threshold: the LLM reads the nearest evidence as before
    uncalibrated = FakeLLM([json.dumps({"triples": made_up}), "verdict: Refuted"])
    engine = SimGRAG(films_dir, llm=uncalibrated, ground_patterns=False, pattern_options=NO_ANALOGY, calibration="off")
    assert "no entity named" not in engine.verify("The Glass Orchard was directed by Director 2").verdict.reason
