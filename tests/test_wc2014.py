"""WorldCup2014 loader, gold patterns and examples file (simgrag.eval.wc2014) on small files written
here; one test checks the gold patterns against the real data (``$SIMGRAG_WC2014_DIR`` or
``../shared/data/WC2014``), skipped when it is absent."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from simgrag.errors import DatasetError
from simgrag.eval.runner import QAItem
from simgrag.eval.wc2014 import (
    RELATION_KINDS,
    WC_FILES,
    WCQuestion,
    gold_triples,
    load_wc2014,
    qa_items,
    write_examples,
)
from simgrag.pattern.examples import load_examples
from simgrag.pattern.graph import is_unknown

WC2014 = Path(os.environ.get("SIMGRAG_WC2014_DIR", Path(__file__).resolve().parents[2] / "shared/data/WC2014"))

FACTS = ("Alan_PULIDO#plays_in_club#Tigres_UANL///Alan_PULIDO#plays_position#Forward///Alan_PULIDO#is_aged#23"
         "///Tigres_UANL#is_in_country#Mexico")

P1 = [
    ("which football club does Alan_PULIDO play for ?", "Tigres_UANL",
     "Alan_PULIDO#plays_in_club#Tigres_UANL#<end>#Tigres_UANL", "Tigres_UANL/"),
    ("what position does Alan_PULIDO play ?", "Forward", "Alan_PULIDO#plays_position#Forward#<end>#Forward",
     "Forward/"),
    ("what is the age of Alan_PULIDO ?", "23", "Alan_PULIDO#is_aged#23#<end>#23", "23/"),
    ("who plays for Tigres_UANL ?", "Alan_PULIDO", "Tigres_UANL#plays_in_club_inverse#Alan_PULIDO#<end>#Alan_PULIDO",
     "Alan_PULIDO/Carlos_SALCIDO/"),
    ("who plays for Tigres_UANL ?", "Carlos_SALCIDO",
     "Tigres_UANL#plays_in_club_inverse#Carlos_SALCIDO#<end>#Carlos_SALCIDO", "Alan_PULIDO/Carlos_SALCIDO/"),
    ("where is Tigres_UANL ?", "Mexico", "Tigres_UANL#is_in_country#Mexico#<end>#Mexico", "Mexico/"),
]
P2 = [
    ("where is the football club that Alan_PULIDO plays for ?", "Mexico",
     "Alan_PULIDO#plays_in_club#Tigres_UANL#is_in_country#Mexico", "Mexico/"),
    ("name a soccer club that has a player from Mexico ?", "Tigres_UANL",
     "Mexico#plays_for_country_inverse#Alan_PULIDO#plays_in_club#Tigres_UANL", "Club_America/Tigres_UANL/"),
]
CONJ = [
    ("name a player who plays at Forward position at the club Tigres_UANL ?", "Alan_PULIDO",
     "Forward#plays_position_inverse#Alan_PULIDO#<end>#Alan_PULIDO*"
     "Tigres_UANL#plays_in_club_inverse#Alan_PULIDO#<end>#Alan_PULIDO", "Alan_PULIDO/", "Forward/Tigres_UANL"),
    ("which player in Tigres_UANL is from Mexico ?", "Alan_PULIDO",
     "Tigres_UANL#plays_in_club_inverse#Alan_PULIDO#<end>#Alan_PULIDO*"
     "Mexico#plays_for_country_inverse#Alan_PULIDO#<end>#Alan_PULIDO", "Carlos_SALCIDO/Alan_PULIDO/",
     "Tigres_UANL/Mexico"),
]


def _lines(rows: Sequence[tuple[str, ...]]) -> str:
    return "".join("\t".join([*row[:4], FACTS, *row[4:]]) + "\n" for row in rows)


def _write(folder: Path, p1: Sequence[tuple[str, ...]] = P1, p2: Sequence[tuple[str, ...]] = P2,
           conj: Sequence[tuple[str, ...]] = CONJ) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for group, rows in (("1-hop", p1), ("2-hop", p2), ("conj", conj)):
        (folder / WC_FILES[group]).write_text(_lines(rows), encoding="utf-8")
    return folder


@pytest.fixture
def wc_dir(tmp_path: Path) -> Path:
    return _write(tmp_path / "wc")


def _one(wc_dir: Path, group: str, question: str) -> WCQuestion:
    return next(q for q in load_wc2014(wc_dir, group) if q.question == question)


def test_parses_every_group(wc_dir: Path) -> None:
    first = load_wc2014(wc_dir, "1-hop")[0]
    assert first == WCQuestion("which football club does Alan_PULIDO play for ?", ("Tigres_UANL",), "1-hop",
                               "Alan_PULIDO#plays_in_club#Tigres_UANL#<end>#Tigres_UANL", ("Alan_PULIDO",), 1)
    two = load_wc2014(wc_dir, "2-hop")[1]
    assert two.topics == ("Mexico",) and two.line == 2
    conj = load_wc2014(wc_dir, "conj")
    assert [q.topics for q in conj] == [("Forward", "Tigres_UANL"), ("Tigres_UANL", "Mexico")]
    assert all(q.group == "conj" for q in conj)


def test_gold_answers_are_the_answer_set_and_the_answer(wc_dir: Path) -> None:
    club = _one(wc_dir, "2-hop", "name a soccer club that has a player from Mexico ?")
    assert set(club.answers) == {"Club_America", "Tigres_UANL"} and len(club.answers) == 2
    rows = [("what position does X play ?", "Forward", "X#plays_position#Forward#<end>#Forward", "Goalkeeper/")]
    only = load_wc2014(_write(wc_dir.parent / "other", p1=rows), "1-hop")[0]
    assert set(only.answers) == {"Forward", "Goalkeeper"}  # the answer column joins the set


def test_duplicate_questions_keep_the_first(wc_dir: Path) -> None:
    questions = load_wc2014(wc_dir, "1-hop")
    texts = [q.question for q in questions]
    assert len(texts) == len(set(texts)) == len(P1) - 1
    who = _one(wc_dir, "1-hop", "who plays for Tigres_UANL ?")
    assert who.line == 4 and "Alan_PULIDO" in who.path


def test_sample_is_seeded_distinct_and_in_file_order(tmp_path: Path) -> None:
    rows = [(f"how old is P{i} ?", str(20 + i % 5), f"P{i}#is_aged#{20 + i % 5}#<end>#{20 + i % 5}",
             f"{20 + i % 5}/") for i in range(40)]
    rows += rows[:10]  # duplicates at the end: never sampled twice
    folder = _write(tmp_path / "wc", p1=rows)
    a = load_wc2014(folder, "1-hop", sample=15, seed=3)
    assert a == load_wc2014(folder, "1-hop", sample=15, seed=3)
    assert len({q.question for q in a}) == 15
    assert [q.line for q in a] == sorted(q.line for q in a)
    assert a != load_wc2014(folder, "1-hop", sample=15, seed=4)
    assert len(load_wc2014(folder, "1-hop", sample=None, seed=0)) == 40
    assert len(load_wc2014(folder, "1-hop", sample=0, seed=0)) == 40
    assert len(load_wc2014(folder, "1-hop", sample=500, seed=0)) == 40


@pytest.mark.parametrize(("row", "reason"), [
    (("q ?", "A", "X#r#A"), "columns"),
    (("q ?", "A", "X#plays_in_club", "A/"), "bad path"),
    (("q ?", "B", "X#plays_in_club#A#<end>#A", "A/"), "not the path's end"),
    (("q ?", "A", "X#plays_in_club#M#is_in_country#A", "A/"), "1 hop"),
])
def test_a_malformed_line_names_file_and_line(tmp_path: Path, row: tuple[str, ...], reason: str) -> None:
    folder = tmp_path / "wc"
    _write(folder)
    bad = _lines(P1[:2]) + ("\t".join(row) if len(row) < 4 else _lines([row]))
    (folder / WC_FILES["1-hop"]).write_text(bad, encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"WC-P1\.txt:3: .*{reason}"):
        load_wc2014(folder, "1-hop")


def test_conj_topics_must_match_the_paths(tmp_path: Path) -> None:
    question, answer, path, answers, _ = CONJ[0]
    folder = _write(tmp_path / "wc", conj=[(question, answer, path, answers, "Forward/Mexico")])
    with pytest.raises(DatasetError, match=r"WC-C\.txt:1: the topics"):
        load_wc2014(folder, "conj")


def test_missing_folder_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"WC-P2\.txt"):
        load_wc2014(tmp_path, "2-hop")


def test_gold_triples_of_each_shape(wc_dir: Path) -> None:
    assert gold_triples(_one(wc_dir, "1-hop", "which football club does Alan_PULIDO play for ?")) == [
        ("Alan_PULIDO", "plays_in_club", "UNKNOWN club 1")]
    assert gold_triples(_one(wc_dir, "1-hop", "who plays for Tigres_UANL ?")) == [
        ("UNKNOWN player 1", "plays_in_club", "Tigres_UANL")]
    assert gold_triples(_one(wc_dir, "1-hop", "what is the age of Alan_PULIDO ?")) == [
        ("Alan_PULIDO", "is_aged", "UNKNOWN age 1")]
    assert gold_triples(_one(wc_dir, "2-hop", "where is the football club that Alan_PULIDO plays for ?")) == [
        ("Alan_PULIDO", "plays_in_club", "UNKNOWN club 1"), ("UNKNOWN club 1", "is_in_country", "UNKNOWN country 1")]
    assert gold_triples(_one(wc_dir, "2-hop", "name a soccer club that has a player from Mexico ?")) == [
        ("UNKNOWN player 1", "plays_for_country", "Mexico"), ("UNKNOWN player 1", "plays_in_club", "UNKNOWN club 1")]
    conj = load_wc2014(wc_dir, "conj")
    assert gold_triples(conj[0]) == [("UNKNOWN player 1", "plays_position", "Forward"),
                                     ("UNKNOWN player 1", "plays_in_club", "Tigres_UANL")]
    assert gold_triples(conj[1]) == [("UNKNOWN player 1", "plays_in_club", "Tigres_UANL"),
                                     ("UNKNOWN player 1", "plays_for_country", "Mexico")]


def test_qa_items(wc_dir: Path) -> None:
    items = qa_items(load_wc2014(wc_dir, "conj"))
    assert items[0] == QAItem("name a player who plays at Forward position at the club Tigres_UANL ?",
                              ("Alan_PULIDO",), "conj", topic="Forward")


def test_write_examples_keeps_the_evaluation_out(tmp_path: Path) -> None:
    p1 = [(f"how old is P{i} ?", "20", f"P{i}#is_aged#20#<end>#20", "20/") for i in range(6)]
    p1 += [(f"what number does P{i} wear ?", "7", f"P{i}#wears_number#7#<end>#7", "7/") for i in range(6)]
    p1 += [row for row in P1 if "Tigres_UANL ?" in row[0]]
    folder = _write(tmp_path / "wc", p1=p1)
    exclude = {"how old is P0 ?", "how old is P1 ?", "how old is P2 ?", "who plays for Tigres_UANL ?",
               P2[0][0], CONJ[1][0]}
    path = write_examples(folder, tmp_path / "wc.yaml", n_per_group=3, seed=0, exclude=exclude)
    loaded = load_examples(path)
    questions = [e.question for e in loaded.examples]
    assert not set(questions) & exclude
    assert len(questions) == len(set(questions)) == 3 + 1 + 1  # the 2-hop and conj pools hold one each
    assert questions[1:3] == [P2[1][0], CONJ[0][0]]  # interleaved: 1-hop, 2-hop, conj, 1-hop, …
    one_hop = [e for e in loaded.examples if len(e.triples) == 1]
    assert len({e.triples[0][1] for e in one_hop}) == 3  # one per relation chain while chains last
    assert set(loaded.relations) == set(RELATION_KINDS)
    assert not any(r.endswith("_inverse") for e in loaded.examples for t in e.triples for r in (t[1],))
    assert write_examples(folder, tmp_path / "again.yaml", n_per_group=3, seed=0,
                          exclude=exclude).read_text() == path.read_text()


def test_write_examples_refuses_an_empty_pool(wc_dir: Path, tmp_path: Path) -> None:
    every = {q.question for g in WC_FILES for q in load_wc2014(wc_dir, g)}
    with pytest.raises(DatasetError, match="no 1-hop, 2-hop, conj question"):
        write_examples(wc_dir, tmp_path / "x.yaml", seed=0, exclude=every)


# --- the real data -----------------------------------------------------------------------------------------


KG = dict[tuple[str, str], list[tuple[str, str]]]


def _kg(path: Path) -> KG:
    """``(relation, "")`` → every (head, tail); ``(relation, "h:" + head)`` and ``(relation, "t:" + tail)``
    → the pairs with that head or tail."""
    kg: KG = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            head, relation, tail = line.split("\t")
            for key in ("", f"h:{head}", f"t:{tail}"):
                kg[relation, key].append((head, tail))
    return kg


def _solutions(triples: Sequence[tuple[str, str, str]], kg: KG, bound: dict[str, str]) -> Iterator[dict[str, str]]:
    """Every binding of the pattern's unknowns to KG entities (a brute-force join, triple by triple)."""
    if not triples:
        yield bound
        return
    (head, relation, tail), rest = triples[0], triples[1:]
    h, t = (bound.get(n) if is_unknown(n) else n for n in (head, tail))
    for pair_head, pair_tail in kg[relation, f"h:{h}" if h else f"t:{t}" if t else ""]:
        binding = dict(bound)
        if _bind(head, pair_head, binding) and _bind(tail, pair_tail, binding):
            yield from _solutions(rest, kg, binding)


def _bind(node: str, value: str, binding: dict[str, str]) -> bool:
    if not is_unknown(node):
        return node == value
    return binding.setdefault(node, value) == value


def _answer_node(triples: Sequence[tuple[str, str, str]]) -> str:
    """The unknown the question asks for: the one the last triple holds and no other does, else the only one."""
    nodes = [n for t in triples for n in (t[0], t[2]) if is_unknown(n)]
    last = [n for n in (triples[-1][0], triples[-1][2]) if is_unknown(n)]
    return next((n for n in last if nodes.count(n) == 1), last[0])


@pytest.mark.skipif(not (WC2014 / "WC2014.txt").is_file(),
                    reason="WorldCup2014 data not found (set SIMGRAG_WC2014_DIR)")
@pytest.mark.parametrize("group", list(WC_FILES))
def test_real_gold_patterns_reach_the_gold_answers(group: str) -> None:
    kg = _kg(WC2014 / "WC2014.txt")
    assert {r.removesuffix("_inverse") for r, _ in kg} == set(RELATION_KINDS)
    questions = load_wc2014(WC2014, group, sample=200, seed=0)
    assert len(questions) == 200
    for q in questions:
        triples = gold_triples(q)
        assert all(t[1] in RELATION_KINDS for t in triples)
        assert all(not is_unknown(t) for t in q.topics)
        answer = _answer_node(triples)
        reached = {s[answer] for s in _solutions(triples, kg, {})}
        assert reached & set(q.answers), (q, triples, sorted(reached)[:5])
        assert reached == set(q.answers), (q, triples)  # on WC2014 the pattern's answers are the answer set


def test_the_split_script_keeps_test_validation_and_shots_apart(tmp_path: Path) -> None:
    """benchmarks/wc2014_split.py: the test set is what `bench wc2014` asks; validation is drawn from the rest,
    never a test question or a shot."""
    import json
    import subprocess
    import sys

    p1 = [(f"how old is P{i} ?", "20", f"P{i}#is_aged#20#<end>#20", "20/") for i in range(8)]
    folder = _write(tmp_path / "wc", p1=p1)
    shots = tmp_path / "wc.yaml"
    shots.write_text('examples:\n  - question: "how old is P7 ?"\n    triples: [[P7, is_aged, UNKNOWN age 1]]\n')
    test, val = tmp_path / "test.jsonl", tmp_path / "val.jsonl"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "wc2014_split.py"
    subprocess.run([sys.executable, str(script), "--wc-dir", str(folder), "--examples", str(shots), "--test", str(test),
                    "--validation", str(val), "--sample", "1", "--seed", "0", "--val-per-file", "1"], check=True)
    test_rows = [json.loads(line) for line in test.read_text().splitlines()]
    val_rows = [json.loads(line) for line in val.read_text().splitlines()]
    assert [r["group"] for r in test_rows] == [r["group"] for r in val_rows] == list(WC_FILES)
    assert [r["question"] for r in test_rows] == [q.question for g in WC_FILES
                                                  for q in load_wc2014(folder, g, sample=1, seed=0)]
    asked = {r["question"] for r in test_rows} | {"how old is P7 ?"}
    assert not asked & {r["question"] for r in val_rows}
    assert all(r["answers"] for r in val_rows)
