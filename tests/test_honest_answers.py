"""Complete and honest answers (issue #17) on the toy KG with the hashing embedder and a scripted LLM:
the answer set in the auto answer mode and in the JSON, substitutions said out loud, calibrated
abstention with the nearest evidence, the calibration fit and where a calibration comes from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simgrag.answer.calibration import (
    NO_ABSTENTION,
    Calibration,
    EvidenceFeatures,
    load_calibration,
    resolve_calibration,
    save_calibration,
)
from simgrag.errors import ConfigError, DatasetError
from simgrag.eval.calibrate import fit_calibration
from simgrag.llm.base import ChatMessage
from simgrag.match.answers import names_match
from simgrag.match.retrieve import RetrievalSettings
from simgrag.pipeline import AskResult, SimGRAG
from simgrag.testing.llm import FakeLLM

PATTERNS = {
    "which films did Christopher Nolan direct": [["UNKNOWN movie 1", "directed by", "Christopher Nolan"]],
    "who directed Titanc": [["Titanc", "directed by", "UNKNOWN director 1"]],
    "who directed Titanic": [["Titanic", "directed by", "UNKNOWN director 1"]],
    "which James Cameron film came out in 2010": [["UNKNOWN movie 1", "directed by", "James Cameron"],
                                                  ["UNKNOWN movie 1", "release year", "2010"]],
}
PROMPTS: list[str] = []


#: the scripted LLM answers the pattern prompt: no analogies (they would skip that call)
NO_ANALOGY = {"analogy": False}


def scripted(messages: list[ChatMessage]) -> str:
    question = messages[-1].content
    if "knowledge-graph pattern" in messages[0].content:
        for text, triples in PATTERNS.items():
            if question.rstrip().endswith(text) or f"question: {text}" in question or question.strip() == text:
                return json.dumps({"triples": triples})
        for text, triples in PATTERNS.items():
            if text in question:
                return json.dumps({"triples": triples})
        return "no"
    PROMPTS.append(question)
    return "answer: James Cameron"


def engine(index: Path, **options: object) -> SimGRAG:
    return SimGRAG(index, llm=FakeLLM(scripted), claim_examples=None, ground_patterns=False,
                   **options)  # type: ignore[arg-type]


def test_auto_mode_answers_with_the_whole_answer_set_not_only_top_k(toy_dir: Path) -> None:
    result = engine(toy_dir, retrieval=RetrievalSettings(k=1)).ask("which films did Christopher Nolan direct")
    assert len(result.evidence.evidence) == 1  # type: ignore[union-attr]
    assert set(result.answer.entities) == {"Inception", "Memento"}  # both, though k = 1
    found = result.evidence.answer_set  # type: ignore[union-attr]
    assert found is not None and found.complete and set(found.names()) == {"Inception", "Memento"}
    data = result.to_dict()
    assert set(data["evidence"]["answer_set"]["names"]) == {"Inception", "Memento"}
    group = data["evidence"]["answer_set"]["groups"][0]
    assert group["relations"] == ["directed_by"] and "{" in group["line"]  # one line for both answers
    assert all(a["triples"] for a in data["evidence"]["answer_set"]["answers"])  # each with its witness
    assert set(result.context.answer_candidates[:2]) == {"Inception", "Memento"}


def test_substitution_is_said_in_text_json_and_prompt(toy_dir: Path) -> None:
    PROMPTS.clear()
    result = engine(toy_dir, calibration="off").ask("who directed Titanc")
    subs = result.answer.substitutions
    assert [(s.pattern_node, s.entity) for s in subs] == [("Titanc", "Titanic")] and subs[0].distance > 0
    assert "nearest match for 'Titanc': Titanic" in result.answer.text
    assert result.answer.entities == ("James Cameron",)  # the note's name is not taken as an answer
    assert result.to_dict()["substitutions"][0]["entity"] == "Titanic"
    assert PROMPTS and "note: nearest match for 'Titanc': Titanic" in PROMPTS[-1]  # the reader is told
    assert not subs[0].kg_has_name and "(the KG has no entity named 'Titanc')" in PROMPTS[-1]


def test_a_substituted_name_the_kg_has_is_not_called_missing(toy_dir: Path) -> None:
    """Both names are in the KG, but no film of James Cameron's came out in 2010: the one the best match does not
    keep is said to be off the pattern's matches, not missing from the KG (the reader and the user are told)."""
    PROMPTS.clear()
    result = engine(toy_dir, calibration="off", answer_mode="llm").ask("which James Cameron film came out in 2010")
    subs = result.answer.substitutions
    assert len(subs) == 1 and subs[0].pattern_node in {"James Cameron", "2010"} and subs[0].kg_has_name
    said = f"the KG has '{subs[0].pattern_node}', but no match of the question's pattern goes through it"
    assert PROMPTS and said in PROMPTS[-1] and "has no entity named" not in PROMPTS[-1]
    assert result.to_dict()["substitutions"][0]["kg_has_name"] is True


def test_only_a_name_the_kg_has_as_written_counts_as_had() -> None:
    """``kg_has_name`` needs the named node's nearest KG entity at distance 0 (its own name), not merely close: a
    misspelt name bound elsewhere is still one the KG lacks."""
    from simgrag.match.answers import substitutions
    from simgrag.match.retrieve import NodeBinding
    from simgrag.pattern.graph import Pattern

    pattern = Pattern.from_triples([["Titanc", "directed by", "UNKNOWN director 1"]])
    bound = [NodeBinding("Titanc", "Avatar", 3, 0.6, False), NodeBinding("UNKNOWN director 1", "X", 4, 0.0, True)]
    assert [s.kg_has_name for s in substitutions(pattern, bound, 0.1, (0.0, 0.0))] == [True]
    assert [s.kg_has_name for s in substitutions(pattern, bound, 0.1, (0.05, 0.0))] == [False]  # Titanic is near
    assert [s.kg_has_name for s in substitutions(pattern, bound, 0.1)] == [False]  # no floors: none is said had
    assert "has no entity named 'Titanc'" in substitutions(pattern, bound, 0.1)[0].why()


def test_exact_names_are_no_substitution(toy_dir: Path) -> None:
    result = engine(toy_dir).ask("who directed Titanic")
    assert result.answer.substitutions == () and result.answer.entities == ("James Cameron",)
    assert result.evidence.evidence[0].nodes[0].distance == 0.0  # type: ignore[union-attr]
    assert names_match("the Matrix", "The Matrix!") and not names_match("Doom", "Doomsday")


def test_calibrated_abstention_says_not_found_with_the_nearest_evidence(toy_dir: Path) -> None:
    strict = Calibration(named=0.01)
    result = engine(toy_dir, calibration=strict).ask("who directed Titanc")
    answer = result.answer
    assert answer.abstained and answer.entities == () and answer.short_answer is None
    assert answer.text.startswith("not found in the KG")
    assert "nearest match for 'Titanc': Titanic" in answer.text
    assert "(Titanic, directed_by, James Cameron)" in answer.text
    assert "named" in answer.reason and answer.features is not None and answer.features.named > 0.01
    # the same question on the exact name is answered: the rule reads the evidence, not the question
    assert not engine(toy_dir, calibration=strict).ask("who directed Titanic").answer.abstained


def test_calibration_resolution_index_file_bundled_and_off(toy_dir: Path, tmp_path: Path) -> None:
    assert resolve_calibration("off", toy_dir, "hash-64") is NO_ABSTENTION
    assert resolve_calibration("auto", toy_dir, "hash-64") is NO_ABSTENTION  # nothing for this embedder
    bundled = resolve_calibration("auto", None, "sentence-transformers/all-MiniLM-L6-v2")
    assert bundled.info.get("fitted_on") == "MetaQA dev" and bundled.info.get("patterns") == "llm"
    assert any(getattr(bundled, name) is not None for name in ("named", "relation", "relation_excess", "gsd"))
    path = save_calibration(Calibration(named=0.5, gsd=1.0, info={"note": "t"}), tmp_path / "c.json")
    assert load_calibration(path).named == 0.5 and load_calibration(path).gsd == 1.0
    (toy_dir / "calibration.json").write_text(path.read_text())
    try:
        assert engine(toy_dir).answerer.calibration.named == 0.5  # type: ignore[union-attr]
    finally:
        (toy_dir / "calibration.json").unlink()
    (tmp_path / "bad.json").write_text('{"named": 1, "bogus": 2}')
    with pytest.raises(ConfigError, match="bogus"):
        load_calibration(tmp_path / "bad.json")
    for hostile in ('{"unworded": Infinity}', '{"missing": -Infinity}', '{"unworded": NaN}', '{"answers": "many"}'):
        (tmp_path / "bad.json").write_text(hostile)  # Python's json reads Infinity / NaN: a count cannot be either
        with pytest.raises(ConfigError, match="bad threshold"):
            load_calibration(tmp_path / "bad.json")


def _row(full: dict[str, float], removed: dict[str, float], gold_full: bool = True,
         gold_removed: bool = False) -> dict[str, object]:
    base = {"named": 0.0, "relation": 0.0, "relation_excess": 0.0, "gsd": 0.0, "answers": 1}

    def seen(f: dict[str, float], gold: bool) -> dict[str, object]:
        return {"features": {**base, **f}, "gold": gold,
                "named": [{"node": "X", "entity": "Y", "distance": f.get("named", 0.0),
                           "same_name": f.get("named", 0.0) == 0.0}]}

    return {"group": "1-hop", "question": str(np.random.default_rng().random()), "full": seen(full, gold_full),
            "removed": seen(removed, gold_removed)}


def test_fit_abstains_on_removed_within_the_answerable_budget() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(200):  # answerable: exact names; removed: a substituted name or a worse relation
        rows.append(_row({"relation": float(rng.uniform(0, 0.2))},
                         {"named": float(rng.uniform(0.3, 0.9))} if rng.random() < 0.7
                         else {"relation": float(rng.uniform(0.25, 0.8))}))
    rows.append(_row({"named": 0.5}, {"named": 0.6}))  # one answerable right answer through a renamed node
    fitted = fit_calibration(rows, alpha=0.01)
    assert fitted.named is not None and fitted.relation is not None
    assert 0.15 <= fitted.relation <= 0.25 and fitted.named < 0.3  # 2 right answers (alpha) may be cut
    assert fitted.info["removed"]["abstain"] > 0.95 and fitted.info["full"]["abstain"] <= 0.01
    assert fitted.decide(EvidenceFeatures(0.0, 0.1, 0.0, 0.1, 3)) is None
    assert "named" in (fitted.decide(EvidenceFeatures(0.7, 0.0, 0.0, 0.7, 1)) or "")
    assert fitted.decide(None) == "no subgraph matched the pattern"
    assert fitted.substitution >= 0.0
    tight = fit_calibration(rows, alpha=0.0)  # no budget: the renamed right answer keeps named open above 0.5
    assert tight.named is None or tight.named >= 0.5
    with pytest.raises(DatasetError):
        fit_calibration([])


def test_run_calibration_on_dev_fits_and_the_engine_applies_it(toy_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole fit on a MetaQA-shaped DEV split over the toy KG (gold patterns, no LLM): the rows of
    both KGs, a calibration that abstains on the removed KG and not on the full one, and an engine
    that applies it."""
    from simgrag.eval.calibrate import run_calibration

    monkeypatch.setenv("SIMGRAG_CACHE_DIR", str(tmp_path / "cache"))
    metaqa = tmp_path / "MetaQA"
    (metaqa / "1-hop" / "vanilla").mkdir(parents=True)
    questions = [("who directed [Titanic]", "James Cameron"), ("who directed [Juno]", "Jason Reitman"),
                 ("who directed [Memento]", "Christopher Nolan"), ("who directed [Avatar]", "James Cameron")]
    (metaqa / "1-hop" / "vanilla" / "qa_dev.txt").write_text("".join(f"{q}\t{a}\n" for q, a in questions))
    (metaqa / "1-hop" / "qa_dev_qtype.txt").write_text("movie_to_director\n" * len(questions))
    base = SimGRAG(toy_dir, llm=None)
    fitted = run_calibration(base, metaqa, tmp_path / "calib", hops=(1,), sample=4, patterns="gold", alpha=0.0,
                             progress=False)
    rows = [json.loads(line) for line in (tmp_path / "calib" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["full"]["gold"] for r in rows)
    assert all(not r["removed"]["gold"] for r in rows)  # the removed KG no longer says who directed them
    assert fitted.info["full"]["abstain"] == 0.0 and fitted.info["removed"]["abstain"] == 1.0
    assert "| removed | 100.0 |" in (tmp_path / "calib" / "calibration.md").read_text()
    applied = engine(toy_dir, calibration=tmp_path / "calib" / "calibration.json")
    assert applied.answerer.calibration == fitted
    assert not applied.ask("who directed Titanic").answer.abstained
    with pytest.raises(DatasetError):
        run_calibration(base, metaqa, tmp_path / "x", hops=(1,), sample=4, patterns="mixed")


def test_a_question_bent_to_the_kg_by_the_pattern_stage_counts_as_missing(toy_dir: Path) -> None:
    """The KG judge (grounding, on by default) finds that Titanic has no written_by edge and rebinds or
    leaves it unresolved; its note is what the ``missing`` feature counts, and a calibration with
    ``missing=0`` then abstains instead of answering from the bent pattern."""
    from simgrag.answer.calibration import missing_edges

    def llm(messages: list[ChatMessage]) -> str:
        if "knowledge-graph pattern" in messages[0].content:
            return json.dumps({"triples": [["Titanic", "written by", "UNKNOWN writer 1"]]})
        return "answer: James Cameron"

    grounded = SimGRAG(toy_dir, llm=FakeLLM(llm), claim_examples=None, calibration="off", pattern_options=NO_ANALOGY)
    result = grounded.ask("who wrote Titanic")
    notes = result.context.pattern.kg_repairs  # type: ignore[union-attr]
    assert missing_edges(notes) >= 1, notes
    assert result.answer.features is not None and result.answer.features.missing >= 1
    strict = SimGRAG(toy_dir, llm=FakeLLM(llm), claim_examples=None, calibration=Calibration(missing=0),
                     pattern_options=NO_ANALOGY)
    assert strict.ask("who wrote Titanic").answer.abstained
    assert missing_edges(["unresolved: the question asks for 'films', but the answer node is 'X'"]) == 0
    # a missing hop the judge bridged through a relation the question words is not a missing fact ...
    bridged = ("['Guadalajara', 'capital', 'UNKNOWN city 1'] -> ['Guadalajara', 'located in', 'UNKNOWN country 1'] "
               "+ ['UNKNOWN country 1', 'capital', 'UNKNOWN city 1']: 'Guadalajara' has no 'capital' edge in the "
               "KG, its 'located in' neighbours do")
    assert missing_edges([bridged + " (the question words 'located in')"]) == 0
    assert missing_edges([bridged + " (the examples' country nodes take 'located in')"]) == 0
    # ... one the question does not word is ("Who directed Heat?" through Heat's actors, its director removed)
    assert missing_edges([bridged]) == 1
    # an LLM revision's note describes the pattern the LLM wrote first: a missing edge of a triple the question
    # had no words for was that pattern's invention, not a fact the KG lacks ...
    invented = ("revised by the LLM after: 'Mandalay' has no 'has_capital' edge in the KG; the question has no "
                "words for the triple ['UNKNOWN country 1', 'has capital', 'Mandalay']")
    assert missing_edges([invented]) == 0
    # ... but a worded one still counts, beside an invented one or alone
    asked = "revised by the LLM after: 'Titanic' has no 'written_by' edge in the KG"
    assert missing_edges([asked]) == 1 and missing_edges([asked + invented[len("revised by the LLM after:"):]]) == 1
    assert missing_edges([invented[len("revised by the LLM after: "):]]) == 1  # the final pattern's own note counts


def test_a_question_bent_into_a_longer_pattern_counts_its_unworded_triples(toy_dir: Path) -> None:
    """"who directed Titanic" written as the 3-hop analogy "the directors of the films sharing actors with
    Titanic": the KG holds it exactly, but the question has no words for the two ``starred actors`` triples.
    The pattern stage counts them (``unworded``: the judge's unsupported triples), the
    evidence features carry the count, and a calibration with an ``unworded`` threshold abstains on it
    while the 1-hop pattern of the same question is answered."""
    bent = [["Titanic", "starred actors", "UNKNOWN actor 1"], ["UNKNOWN movie 1", "starred actors", "UNKNOWN actor 1"],
            ["UNKNOWN movie 1", "directed by", "UNKNOWN director 1"]]

    def scripted_as(triples: list[list[str]]) -> FakeLLM:
        def llm(messages: list[ChatMessage]) -> str:
            if "knowledge-graph pattern" in messages[0].content:
                return json.dumps({"triples": triples})
            return "answer: James Cameron"
        return FakeLLM(llm)

    def ask(triples: list[list[str]], calibration: Calibration | str) -> AskResult:
        return SimGRAG(toy_dir, llm=scripted_as(triples), claim_examples=None, calibration=calibration,
                       pattern_options=NO_ANALOGY).ask("who directed Titanic")

    loose = ask(bent, "off")
    found = loose.context.pattern
    assert found is not None and found.pattern.triples() == [tuple(t) for t in bent] and found.unworded >= 2
    assert loose.answer.features is not None and loose.answer.features.unworded == found.unworded
    assert not loose.answer.abstained
    assert Calibration.from_dict({"unworded": 1}).unworded == 1
    assert ask(bent, Calibration(unworded=1)).answer.abstained
    plain = ask([["Titanic", "directed by", "UNKNOWN director 1"]], Calibration(unworded=1))
    assert plain.context.pattern is not None and plain.context.pattern.unworded == 0
    assert not plain.answer.abstained and "James Cameron" in plain.answer.entities
