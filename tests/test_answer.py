"""Answer generation and fact verification with a scripted LLM and hand-built retrievals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from simgrag.answer import NOT_FOUND, answer_candidates, answer_question, asked_node, verify_claim
from simgrag.answer.extract import answer_segment, extract_entities, split_items
from simgrag.answer.qa import QA_SYSTEM, qa_messages
from simgrag.answer.verbalize import evidence_entities, verbalize_evidence
from simgrag.answer.verify import VERDICT_SCHEMA, parse_verdict, verify_messages
from simgrag.errors import LLMTimeoutError
from simgrag.kg.store import Triple
from simgrag.match.retrieve import EdgeBinding, Evidence, NodeBinding, Retrieval
from simgrag.pattern.graph import Pattern
from simgrag.testing.llm import FakeLLM

ANASTASIA = Pattern.from_triples([
    ["Anastasia", "starred_actors", "UNKNOWN actor 1"],
    ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
    ["UNKNOWN movie 1", "written_by", "UNKNOWN writer 1"],
])


def make_evidence(pattern: Pattern, rank: int, gsd: float, binding: Mapping[str, str],
                  flipped: Sequence[int] = ()) -> Evidence:
    """One subgraph: pattern nodes bound to ``binding``; edges in ``flipped`` are reversed in the KG."""
    nodes = tuple(NodeBinding(n.text, binding[n.text], i, 0.0, n.unknown)
                  for i, n in enumerate(pattern.nodes))
    edges = []
    for j, (h, r, t) in enumerate(pattern.triples()):
        head, tail = (binding[t], binding[h]) if j in flipped else (binding[h], binding[t])
        edges.append(EdgeBinding((h, r, t), Triple(head, r, tail), j, 0.0))
    return Evidence(rank, gsd, nodes, tuple(edges))


def make_retrieval(pattern: Pattern, *evidence: Evidence) -> Retrieval:
    return Retrieval(pattern, tuple(evidence), True, 0.0, {}, "optimized", "sum")


def anastasia_retrieval() -> Retrieval:
    keys = ("Anastasia", "UNKNOWN actor 1", "UNKNOWN movie 1", "UNKNOWN writer 1")
    rows = [("Ingrid Bergman", "Spellbound", "Ben Hecht"), ("John Cusack", "Floundering", "Peter McCarthy"),
            ("Ingrid Bergman", "Notorious", "Ben Hecht")]
    return make_retrieval(ANASTASIA, *(
        make_evidence(ANASTASIA, rank, rank / 10, dict(zip(keys, ("Anastasia", *row), strict=True)))
        for rank, row in enumerate(rows, start=1)
    ))


# ---------------------------------------------------------------- verbalization
def test_verbalize_graph_lines_in_kg_orientation() -> None:
    p = Pattern.from_triples([["Inception", "directed_by", "UNKNOWN director 1"]])
    ev = make_evidence(p, 1, 0.0, {"Inception": "Inception", "UNKNOWN director 1": "Christopher Nolan"},
                       flipped=[0])
    assert verbalize_evidence([ev]) == "graph [1]: (Christopher Nolan, directed_by, Inception)"


def test_verbalize_dedups_and_compacts() -> None:
    r = anastasia_retrieval()
    duplicate = r.evidence[0]
    text = verbalize_evidence([*r.evidence, duplicate])
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0] == ("graph [1]: (Anastasia, starred_actors, Ingrid Bergman), "
                        "(Spellbound, starred_actors, Ingrid Bergman), (Spellbound, written_by, Ben Hecht)")
    compact = verbalize_evidence(r.evidence, compact=True).splitlines()
    assert compact.count("(Anastasia, starred_actors, Ingrid Bergman)") == 1
    assert len(compact) == 8 and not any(line.startswith("graph") for line in compact)
    assert verbalize_evidence([]) == ""


def test_evidence_entities_collects_every_name() -> None:
    names = evidence_entities(anastasia_retrieval().evidence)
    assert names[:4] == ["Anastasia", "Ingrid Bergman", "Spellbound", "Ben Hecht"]
    assert {"Peter McCarthy", "Notorious", "John Cusack"} <= set(names)


# ---------------------------------------------------------------- the asked-for node
@pytest.mark.parametrize(
    ("triples", "expected"),
    [
        ([["Inception", "directed_by", "UNKNOWN director 1"]], "UNKNOWN director 1"),
        ([["UNKNOWN person 1", "directed", "Inception"]], "UNKNOWN person 1"),
        ([["Heat", "directed_by", "UNKNOWN director 1"],
          ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]], "UNKNOWN movie 1"),
        ([["Anastasia", "starred_actors", "UNKNOWN actor 1"],
          ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
          ["UNKNOWN movie 1", "written_by", "UNKNOWN writer 1"]], "UNKNOWN writer 1"),
        # star around an unknown centre: no unknown leaf, so the last unknown node
        ([["UNKNOWN movie 1", "directed_by", "Christopher Nolan"],
          ["UNKNOWN movie 1", "starred_actors", "Tom Hardy"],
          ["UNKNOWN movie 1", "has_genre", "Thriller"]], "UNKNOWN movie 1"),
        # star with an unknown leaf: the leaf
        ([["UNKNOWN movie 1", "directed_by", "Christopher Nolan"],
          ["UNKNOWN movie 1", "release_year", "UNKNOWN year 1"]], "UNKNOWN year 1"),
        ([["Heat", "directed_by", "Michael Mann"]], None),
    ],
)
def test_asked_node(triples: list[list[str]], expected: str | None) -> None:
    pattern = Pattern.from_triples(triples)
    index = asked_node(pattern)
    assert (pattern.nodes[index].text if index is not None else None) == expected


def test_candidates_ranked_by_gsd_and_deduplicated() -> None:
    r = anastasia_retrieval()
    shuffled = make_retrieval(ANASTASIA, r.evidence[2], r.evidence[0], r.evidence[1])
    assert answer_candidates(ANASTASIA, shuffled) == ("Ben Hecht", "Peter McCarthy")


# ---------------------------------------------------------------- answer parsing
NAMES = ["Anastasia", "Ben Hecht", "Peter McCarthy", "Pride and Prejudice", "Walker (footballer, born 1940)",
         "Up", "AC/DC"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("answer: Ben Hecht | Peter McCarthy", ["Ben Hecht", "Peter McCarthy"]),
        ("answer: Peter McCarthy, Ben Hecht", ["Peter McCarthy", "Ben Hecht"]),
        ("Answer: 'Ben Hecht' or \"Peter McCarthy\".", ["Ben Hecht", "Peter McCarthy"]),
        ("answer: [\"ben hecht\", \"PETER MCCARTHY\"]", ["Ben Hecht", "Peter McCarthy"]),
        ("answer: Ben Hecht and Peter McCarthy; Ben Hecht", ["Ben Hecht", "Peter McCarthy"]),
        ("answer: - Ben Hecht\n- Peter McCarthy", ["Ben Hecht"]),  # one answer line; the list goes on below
        ("answer:\nBen Hecht", ["Ben Hecht"]),
        ("**Answer:** Ben Hecht", ["Ben Hecht"]),
        ("answer: Pride and Prejudice | Walker (footballer, born 1940)",
         ["Pride and Prejudice", "Walker (footballer, born 1940)"]),
        ("answer: AC/DC", ["AC/DC"]),
        ("answer: the writer is Ben Hecht", ["Ben Hecht"]),
        ("answer: Hecht", ["Ben Hecht"]),
        ("answer: Orson Welles | Ben Hecht", ["Ben Hecht"]),  # not in the evidence: text only
        ("answer: none", []),
        ("According to graphs [1][2], the writer is Ben Hecht or Peter McCarthy.",
         ["Ben Hecht", "Peter McCarthy"]),
        ("The answer is Peter McCarthy.", ["Peter McCarthy"]),
        ("answer: look it up", []),  # short names need their exact case inside longer text
        ("answer: Up", ["Up"]),
        ("", []),
    ],
)
def test_extract_entities(text: str, expected: list[str]) -> None:
    assert extract_entities(text, NAMES) == expected


def test_answer_segment_and_split() -> None:
    assert answer_segment("reasoning...\nanswer: a | b\nanswer: c") == "c"
    assert answer_segment("no marker here") is None
    assert split_items("'x' | [y] , 1. z", []) == ["x", "y", "z"]


# ---------------------------------------------------------------- answer_question
def test_answer_question_parses_the_reply() -> None:
    llm = FakeLLM(["answer: Peter McCarthy | ben hecht | Orson Welles"])
    ans = answer_question(llm, "who wrote films that share actors with Anastasia?", ANASTASIA,
                          anastasia_retrieval())
    assert ans.entities == ("Peter McCarthy", "Ben Hecht")
    assert ans.short_answer == "Peter McCarthy"
    assert ans.candidates == ("Ben Hecht", "Peter McCarthy")
    assert "Orson Welles" in ans.text and not ans.abstained
    assert ans.asked_node == "UNKNOWN writer 1"
    assert ans.prompt_tokens > 0 and ans.completion_tokens == 9
    call = llm.calls[0]
    assert call.temperature == 0 and call.max_tokens == 64
    assert call.messages[-1].content.endswith("question: who wrote films that share actors with Anastasia?")
    assert "graph [2]: (Anastasia, starred_actors, John Cusack)" in call.messages[-1].content
    assert ans.to_dict()["evidence"]["matches"][0]["rank"] == 1


def test_rambling_reply_falls_back_to_names_then_candidates() -> None:
    llm = FakeLLM(["Anastasia starred Ingrid Bergman, who was in Spellbound by Ben Hecht.",
                   "I cannot tell from these graphs."])
    r = anastasia_retrieval()
    first = answer_question(llm, "who wrote films that share actors with Anastasia?", ANASTASIA, r)
    assert first.entities == ("Ingrid Bergman", "Spellbound", "Ben Hecht")  # the question's entity dropped
    second = answer_question(llm, "who wrote films that share actors with Anastasia?", ANASTASIA, r)
    assert second.entities == () and second.short_answer == "Ben Hecht" and not second.abstained


def test_abstains_without_calling_the_llm() -> None:
    llm = FakeLLM([])
    empty = answer_question(llm, "who directed Nothing?", ANASTASIA, make_retrieval(ANASTASIA))
    assert empty.abstained and empty.text == NOT_FOUND and empty.short_answer is None
    far = answer_question(llm, "q?", ANASTASIA, anastasia_retrieval(), abstain_gsd=0.05)
    assert far.abstained and "0.100" in far.reason and far.candidates == ("Ben Hecht", "Peter McCarthy")
    assert llm.calls == []
    near = answer_question(FakeLLM(["answer: Ben Hecht"]), "q?", ANASTASIA, anastasia_retrieval(),
                           abstain_gsd=0.1)
    assert not near.abstained


def test_prompt_prefix_is_identical_across_questions() -> None:
    llm = FakeLLM(["answer: x", "answer: y"])
    question = "who wrote films that share actors with Anastasia?"
    answer_question(llm, question, ANASTASIA, anastasia_retrieval())
    p = Pattern.from_triples([["Inception", "directed_by", "UNKNOWN director 1"]])
    r = make_retrieval(p, make_evidence(p, 1, 0.0, {"Inception": "Inception", "UNKNOWN director 1": "Nolan"}))
    answer_question(llm, "who directed Inception?", p, r)
    first, second = llm.calls[0].messages, llm.calls[1].messages
    assert first[:-1] == second[:-1] and first[-1] != second[-1]
    assert first[0].content == QA_SYSTEM and len(first) == 8
    assert [m.role for m in first] == ["system"] + ["user", "assistant"] * 3 + ["user"]


def test_compact_prompt_uses_compact_examples() -> None:
    messages = qa_messages("q?", "(a, r, b)", compact=True)
    assert not any("graph [" in m.content for m in messages)


def test_llm_errors_propagate() -> None:
    with pytest.raises(LLMTimeoutError):
        answer_question(FakeLLM([LLMTimeoutError("slow")]), "q?", ANASTASIA, anastasia_retrieval())


# ---------------------------------------------------------------- verification
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("verdict: Supported", "Supported"),
        ("verdict: Refuted", "Refuted"),
        ("Verdict: **supported**.", "Supported"),
        ('{"verdict": "Refuted"}', "Refuted"),
        ('{"verdict": true}', "Supported"),
        ("verdict: True", "Supported"),
        ("verdict: False", "Refuted"),
        ("verdict: not supported", "Refuted"),
        ("The graphs say he was the manager, not the leader, so the answer is False.", "Refuted"),
        ("Graph [1] supports the claim.\nverdict: Refuted", "Refuted"),
        ("The evidence is not supported by graph 2 but graph 1 supports it", "Supported"),
        ("verdict: not enough evidence", "Not enough evidence"),
        ("¯\\_(ツ)_/¯ banana", None),
        ("", None),
    ],
)
def test_parse_verdict(text: str, expected: str | None) -> None:
    assert parse_verdict(text) == expected


def _claim_setup() -> tuple[Pattern, Retrieval]:
    p = Pattern.from_triples([["Ben Hecht", "birthPlace", "New York City"]])
    binding = {"Ben Hecht": "Ben Hecht", "New York City": "New York City"}
    r = make_retrieval(p, make_evidence(p, 1, 0.4, binding))
    return p, r


def test_verify_claim_labels() -> None:
    p, r = _claim_setup()
    llm = FakeLLM(["verdict: Supported", "verdict: Refuted", "I like trains"])
    labels = [verify_claim(llm, "Ben Hecht was born in New York City.", p, r) for _ in range(3)]
    assert [v.label for v in labels] == ["Supported", "Refuted", "Not enough evidence"]
    assert [v.label_binary for v in labels] == ["Supported", "Refuted", "Refuted"]
    assert not any(v.abstained for v in labels) and "no verdict" in labels[2].reason
    assert llm.calls[0].messages[-1].content.endswith("claim: Ben Hecht was born in New York City.")
    assert llm.calls[0].json_schema is None
    assert llm.calls[0].messages[:-1] == llm.calls[1].messages[:-1]


def test_verify_abstains_without_calling_the_llm() -> None:
    p, r = _claim_setup()
    llm = FakeLLM([])
    verdicts = [verify_claim(llm, "claim", p, make_retrieval(p)),
                verify_claim(llm, "claim", p, r, abstain_gsd=0.3)]
    for verdict in verdicts:
        assert verdict.abstained and verdict.label == "Not enough evidence"
        assert verdict.label_binary == "Refuted" and not verdict.supported
    assert llm.calls == []
    assert verify_claim(FakeLLM(["verdict: Supported"]), "claim", p, r, abstain_gsd=0.5).supported


def test_verify_with_json_schema() -> None:
    p, r = _claim_setup()
    llm = FakeLLM(['{"verdict": "Supported"}'])
    verdict = verify_claim(llm, "Ben Hecht was born in New York City.", p, r, use_json_schema=True)
    assert verdict.label == "Supported"
    assert llm.calls[0].json_schema == VERDICT_SCHEMA
    assert '{"verdict": "Refuted"}' in [m.content for m in llm.calls[0].messages]
    assert verify_messages("c", "e")[1].content.startswith("evidence:\ngraph [1]: (Inception, director,")


def test_a_name_spelled_with_underscores_in_the_kg_is_found_when_the_llm_writes_spaces() -> None:
    names = ["Fidel_MARTINEZ", "Jaimen_AYOVI", "Club_Tijuana", "Up"]
    assert extract_entities("answer: Fidel Martinez | Jaimen Ayovi", names) == ["Fidel_MARTINEZ", "Jaimen_AYOVI"]
    assert extract_entities("They say Jaimen Ayovi plays at Club Tijuana.", names) == ["Jaimen_AYOVI", "Club_Tijuana"]
    assert extract_entities("answer: Fidel_MARTINEZ", names) == ["Fidel_MARTINEZ"]  # the KG's own spelling still
    assert extract_entities("answer: Fidel Martinezz", names) == []  # not a looser match than before
