"""A chain of one relation the LLM wrote long enough to be cut as a runaway ("X's neighbours" walked on and on) is
offered to the channel at the lengths the cut did not keep: "the mother of the mother of the mother of X", written
with one ``mother`` hop too many, was answered with X's mother (issue 41, genealogy 3-hop)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.grounding.channel import CHANNEL, DEFAULT_READINGS, runaway_readings
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.llm.base import ChatMessage
from simgrag.pattern.copies import RUNAWAY_LINKS, cut_runaway_chains, runaway_cuts
from simgrag.pattern.examples import parse_examples
from simgrag.pattern.generate import PatternGenerator
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.retrievers.simgrag import SimGRAGRetriever
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM

# four generations of mothers, each with a religion
MOTHERS = ["Ada", "Bea", "Cleo", "Dot", "Eve"]
KG = [*((c, "mother", m) for c, m in zip(MOTHERS, MOTHERS[1:], strict=False)),
      *((p, "religion", f"Faith {i}") for i, p in enumerate(MOTHERS))]
EXAMPLES = """\
name: mothers
examples:
  - question: Who is the mother of Bea?
    triples:
      - [Bea, mother, UNKNOWN person 1]
  - question: What is the religion of Cleo?
    triples:
      - [Cleo, religion, UNKNOWN religion 1]
"""


def _chain(links: int, leaf: bool = False) -> list[list[str]]:
    nodes = ["Ada", *(f"UNKNOWN person {i}" for i in range(1, links + 1))]
    out = [[a, "mother", b] for a, b in zip(nodes, nodes[1:], strict=False)]
    return out + ([[nodes[-1], "religion", "UNKNOWN religion 1"]] if leaf else [])


@pytest.fixture(scope="module")
def mothers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mothers")
    (root / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in KG), encoding="utf-8")
    (root / "examples.yaml").write_text(EXAMPLES, encoding="utf-8")
    build_index_dir(root / "kg.tsv", root / "kg.idx", embedder=HashEmbedder(dim=64), show_progress=False,
                    examples=root / "examples.yaml")
    return root


def test_runaway_cuts_offer_every_length_the_cut_did_not_keep_and_keep_the_chains_end() -> None:
    written = _chain(RUNAWAY_LINKS, leaf=True)
    assert cut_runaway_chains(written)[0] == [written[0]]  # the generator keeps one link (and loses the leaf)
    cuts = runaway_cuts(written)
    assert [links for _, links in cuts] == list(range(2, RUNAWAY_LINKS + 1))
    two, _ = cuts[0]
    assert two == [*_chain(2), ["UNKNOWN person 2", "religion", "UNKNOWN religion 1"]]  # the end's leaf stays
    assert cuts[-1][0] == written  # the chain as written
    assert runaway_cuts(_chain(RUNAWAY_LINKS - 1)) == []  # no runaway: nothing to offer
    assert runaway_cuts([["a", "b"]]) == []  # not triples: nothing (the validation reports them)
    loop = [*_chain(RUNAWAY_LINKS - 1), [f"UNKNOWN person {RUNAWAY_LINKS - 1}", "mother", "UNKNOWN person 1"]]
    assert runaway_cuts(loop) == []  # a cycle back to its first node is no chain to keep


@settings(max_examples=100, deadline=None)
@given(st.integers(RUNAWAY_LINKS, 12), st.booleans(),
       st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["gender", "religion"])), max_size=3))
def test_every_runaway_length_is_connected_asks_and_keeps_its_links(links: int, leaf: bool,
                                                                    hanging: list[tuple[int, str]]) -> None:
    written = _chain(links, leaf) + [[f"UNKNOWN person {i}" if i else "Ada", rel, f"UNKNOWN hanging {rel} {n + 10}"]
                                     for n, (i, rel) in enumerate(hanging) if i <= links]
    for contracted, kept in runaway_cuts(written):
        pattern = Pattern.from_triples(contracted)
        assert pattern.is_connected() and any(is_unknown(n.text) for n in pattern.nodes)
        assert sum(t[1] == "mother" for t in contracted) == kept
        assert len(contracted) <= len(written) and all(t in written or t[1] != "mother" for t in contracted)
        assert ("UNKNOWN religion 1" in {t[2] for t in contracted}) == leaf  # what hangs on the end stays


def test_runaway_readings_are_contracted_readings_shortest_first() -> None:
    lengths = [(Pattern.from_triples(c), k) for c, k in runaway_cuts(_chain(6))]
    readings = runaway_readings(lengths, limit=3)
    assert [r.links for r in readings] == [(2, 6), (3, 6), (4, 6)]
    assert all(r.kind == "contracted" for r in readings) and "kept 2 links" in readings[0].why()
    assert runaway_readings([]) == []


def test_the_generator_gives_the_lengths_only_for_its_own_cut() -> None:
    generator = PatternGenerator(FakeLLM(["{}"]), parse_examples(EXAMPLES))
    reply = json.dumps({"triples": _chain(4)})
    cut = Pattern.from_triples(_chain(1))
    assert [links for _, links in generator.runaway_lengths(reply, cut)] == [2, 3, 4]
    assert generator.runaway_lengths(reply, Pattern.from_triples(_chain(2))) == []  # a stage changed it since
    assert generator.runaway_lengths("not json at all {", cut) == []


def test_the_channel_takes_the_length_the_question_says(mothers: Path) -> None:
    assert "contracted" in DEFAULT_READINGS

    def respond(messages: Sequence[ChatMessage]) -> str:
        return json.dumps({"triples": _chain(4)})  # one mother too many: cut to one by the generator

    def three_is_likeliest(prefix: str, condition: str, scored: str) -> float:
        return -1.0 if condition.count(", mother,") == 3 else -5.0

    index = open_index_dir(mothers / "kg.idx", embedder=HashEmbedder(dim=64))
    question = "Who is the mother of the mother of the mother of Ada?"
    retriever = SimGRAGRetriever(index, FakeLLM(respond, scores=three_is_likeliest),
                                 examples=parse_examples(EXAMPLES), ground_patterns=False, channel=True,
                                 channel_readings=["contracted"])
    context = retriever.retrieve(question)
    assert context.pattern is not None and context.pattern.families == (CHANNEL,)
    assert context.pattern.pattern.triples() == [tuple(t) for t in _chain(3)]
    assert "kept 3 links" in context.pattern.kg_repairs[-1] and context.answer_candidates[:1] == ("Dot",)
    # with no scorer that prefers it, the cut stays (the channel can only add)
    flat = SimGRAGRetriever(index, FakeLLM(respond, scores=lambda *_: -1.0), examples=parse_examples(EXAMPLES),
                            ground_patterns=False, channel=True, channel_readings=["contracted"])
    kept = flat.retrieve(question)
    assert kept.pattern is not None and kept.pattern.pattern.triples() == [tuple(t) for t in _chain(1)]
