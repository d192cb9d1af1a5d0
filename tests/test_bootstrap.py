"""Examples and aliases for a KG that has none (issue 14): sampling, the retrieval check, the alias margin,
the YAML files, resuming, attaching to an index and the commands — with the scripted FakeLLM and the
HashEmbedder on a small geography KG whose answers can be checked by hand."""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import hypothesis
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simgrag.bootstrap import (
    SHAPES,
    AliasesSettings,
    ExamplesSettings,
    bootstrap_aliases,
    bootstrap_examples,
    install_aliases,
    install_examples,
    sample_subgraphs,
)
from simgrag.bootstrap.aliases import filter_phrases
from simgrag.bootstrap.examples import BOOTSTRAP_SHAPES
from simgrag.bootstrap.files import progress_path
from simgrag.bootstrap.prompts import read_kind, read_phrases, read_questions, respell, screen_question
from simgrag.cli import _common, app
from simgrag.errors import ConfigError, IndexDirError, LLMConnectionError
from simgrag.index.directory import IndexDir, build_index_dir, load_aliases, open_index_dir, relation_text
from simgrag.kg.store import KGStore
from simgrag.kg.twins import twin_relations
from simgrag.llm.base import ChatMessage
from simgrag.pattern.copies import merge_unknown_copies
from simgrag.pattern.examples import load_examples
from simgrag.pattern.graph import Pattern
from simgrag.retrievers.simgrag import index_examples
from simgrag.testing import FakeLLM, HashEmbedder

COUNTRIES = {  # country: capital, continent, currency, languages
    "France": ("Paris", "Europe", "Euro", ["French"]),
    "Germany": ("Berlin", "Europe", "Euro", ["German"]),
    "Spain": ("Madrid", "Europe", "Euro", ["Spanish"]),
    "Switzerland": ("Bern", "Europe", "Swiss Franc", ["German", "French", "Italian"]),
    "Italy": ("Rome", "Europe", "Euro", ["Italian"]),
    "Japan": ("Tokyo", "Asia", "Yen", ["Japanese"]),
    "Peru": ("Lima", "South America", "Sol", ["Spanish", "Quechua"]),
    "Chile": ("Santiago", "South America", "Chilean Peso", ["Spanish"]),
}
BORDERS = [("France", "Germany"), ("France", "Spain"), ("France", "Switzerland"), ("France", "Italy"),
           ("Germany", "Switzerland"), ("Italy", "Switzerland"), ("Peru", "Chile")]
CITIES = {"Lyon": "France", "Marseille": "France", "Hamburg": "Germany", "Munich": "Germany", "Seville": "Spain",
          "Zurich": "Switzerland", "Milan": "Italy", "Osaka": "Japan", "Cusco": "Peru", "Valparaiso": "Chile"}
KINDS = {"capital": ("country", "city"), "continent": ("country", "continent"), "currency": ("country", "currency"),
         "official language": ("country", "language"), "borders": ("country", "country"),
         "located in": ("city", "country")}


KIND_OF = {**dict.fromkeys(COUNTRIES, "country"), **dict.fromkeys(CITIES, "city"),
           **{v[0]: "city" for v in COUNTRIES.values()}, **{v[1]: "continent" for v in COUNTRIES.values()},
           **{v[2]: "currency" for v in COUNTRIES.values()},
           **{lang: "language" for v in COUNTRIES.values() for lang in v[3]}}


def geo_triples() -> list[tuple[str, str, str]]:
    triples = []
    for country, (capital, continent, currency, languages) in COUNTRIES.items():
        triples += [(country, "capital", capital), (country, "continent", continent), (country, "currency", currency)]
        triples += [(country, "official language", lang) for lang in languages]
    triples += [(a, "borders", b) for a, b in BORDERS]
    triples += [(city, "located in", country) for city, country in CITIES.items()]
    return triples


def write_geo_kg(path: Path) -> Path:
    path.write_text("\n".join("|".join(t) for t in geo_triples()) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def geo_index(tmp_path: Path) -> IndexDir:
    return build_index_dir(write_geo_kg(tmp_path / "geo.txt"), tmp_path / "geo.idx", embedder=HashEmbedder(dim=64))


class ScriptedBootstrap:
    """Answers the bootstrap's prompts: kinds from :data:`KIND_OF`; per question prompt three questions —
    one right (its pattern is the prompt's), one that does not name the named entity (screened out), one
    whose pattern asks something else (a country's capital outside the gold answers, computed on
    ``store``: it fails the retrieval check); patterns for the questions it wrote; alias phrases from
    ``phrases``, role nouns from ``nouns``. ``fail_on_sample``: the question prompt of that sample (1-based) raises."""

    def __init__(self, store: KGStore | None = None, phrases: dict[str, list[str]] | None = None,
                 fail_on_sample: int | None = None, nouns: dict[str, list[str]] | None = None) -> None:
        self.store = store
        self.patterns: dict[str, list[list[str]]] = {}
        self.right: set[str] = set()
        self.wrong: set[str] = set()
        self.phrases = phrases or {}
        self.nouns = nouns or {}
        self.fail_on_sample = fail_on_sample
        self.samples = 0
        self.described: dict[str, tuple[list[list[str]], str]] = {}
        self.stuck = False  # describe a chain's middle by the words it was given (no step taken)
        self.llm = FakeLLM(self.reply)

    def reply(self, messages: Sequence[ChatMessage]) -> str:
        system, last = messages[0].content, messages[-1].content
        if "You describe knowledge graphs" in system:
            first = last.split("? ", 1)[1].split(";")[0].split("\n")[0].strip()
            return json.dumps({"kind": KIND_OF[first]})
        if "words people use" in system and "Fill in the blank" in last:  # the role-noun prompt: "Y is X's ___"
            tail, head = re.search(r'"([^"]+?) is ([^"]+?)\'s ___"', last).groups()  # type: ignore[union-attr]
            relation = next(r for h, r, t in geo_triples() if (h, t) == (head, tail))
            return json.dumps({"nouns": self.nouns.get(relation, [])})
        if "words people use" in system:
            return json.dumps({"phrases": self.phrases.get(re.search(r'relation "(.+?)"', last).group(1), [])})  # type: ignore[union-attr]
        if "questions that real people type" in system:
            return self.questions(last)
        if "You describe things through their facts" in system:
            return self.describe(last)
        question = re.search(r"for the question '(.+)', following", last) if "not usable" in last else None
        text = question.group(1) if question else last
        return json.dumps({"triples": self.patterns.get(text, [])})

    def node(self, label: str) -> str:
        if label in self.described:
            return self.described[label][1]
        if label.startswith("[answer: "):
            return f"UNKNOWN {label[9:-1]} 9"
        return f"UNKNOWN {label[1:-1]}" if label.startswith("[") else label

    def describe(self, prompt: str) -> str:
        """A chain's middle: remembers the triples the description stands for."""
        (h, r, t), = re.findall(r"^- (.+?) \| (.+?) \| (.+?)$", prompt, flags=re.M)
        anchor = re.search(r'keeping "(.+?)" exactly', prompt).group(1)  # type: ignore[union-attr]
        before = self.described.get(anchor, ([], ""))[0]
        fact = [self.node(h), r, self.node(t)]
        label = self.node(h if h.startswith("[") else t)  # the end being described
        if self.stuck:
            return json.dumps({"description": anchor})
        text = f"the one linked to {anchor}"
        self.described[text] = ([*before, fact], label)
        return json.dumps({"description": text})

    def questions(self, prompt: str) -> str:
        self.samples += 1
        if self.samples == self.fail_on_sample:
            raise LLMConnectionError("the model server went away")
        lines = re.findall(r"^- (.+?) \| (.+?) \| (.+?)$", prompt, flags=re.M)
        said = re.search(r"Each (?:names|contains) (.+?) (?:exactly as written|word for word)", prompt)
        named = re.findall(r'"([^"]+)"', said.group(1))  # type: ignore[union-attr]
        gold = [fact for h, _, t in lines for end in (h, t) for fact in self.described.get(end, ([], ""))[0]]
        gold += [[self.node(h), r, self.node(t)] for h, r, t in lines]
        n = self.samples
        right, vague, wrong = (f"q{n} right: what about {' and '.join(named)}?", f"q{n} vague: what about it?",
                               f"q{n} wrong: tell me about {' and '.join(named)}")
        answers = brute_answers(self.store, gold) if self.store is not None else set()
        other = next(c for c, v in COUNTRIES.items() if v[0] not in answers)
        self.patterns.update({right: gold, vague: gold, wrong: [[other, "capital", "UNKNOWN city 1"]]})
        self.right.add(right)
        self.wrong.add(wrong)
        return json.dumps({"questions": [right, vague, wrong]})


def brute_answers(store: KGStore, triples: Sequence[Sequence[str]]) -> set[str]:
    """Every entity the asked node takes in an injective exact match of the pattern (by enumeration)."""
    facts = {(store.entities[int(h)], store.relations[int(r)], store.entities[int(t)])
             for h, r, t in zip(store.heads, store.rels, store.tails, strict=True)}
    readable = {relation_text(r): r for r in store.relations}
    pattern = Pattern.from_triples(triples)
    unknown = [i for i, node in enumerate(pattern.nodes) if node.unknown]
    named = {node.text for node in pattern.nodes if not node.unknown}
    pool = [e for e in store.entities if e not in named]
    asked = pattern.asked_node()
    found = set()
    for combo in itertools.permutations(pool, len(unknown)):
        value = {i: node.text for i, node in enumerate(pattern.nodes)} | dict(zip(unknown, combo, strict=True))
        if all((value[e.source], readable[e.relation], value[e.target]) in facts for e in pattern.edges):
            found.add(value[asked])  # type: ignore[index]
    return found


# -- sampling ----------------------------------------------------------------------------------------------
def test_samples_have_their_shapes_and_exact_gold_answers(geo_index: IndexDir) -> None:
    store = geo_index.store
    samples = sample_subgraphs(store, SHAPES, 3, seed=1)
    assert [s.shape for s in samples[:6]] == list(SHAPES)  # interleaved: the first of each shape first
    counts = {s.shape: sum(x.shape == s.shape for x in samples) for s in samples}
    forward = counts["3hop_forward"]  # few: a city's country's neighbour's capital, and little more
    assert counts == {**dict.fromkeys(SHAPES, 3), "3hop_forward": forward} and 1 <= forward <= 3
    edges = {"1hop": 1, "2hop": 2, "3hop": 3, "star": 2, "conjunction": 3, "3hop_forward": 3}
    named = {"1hop": 1, "2hop": 1, "3hop": 1, "star": 2, "conjunction": 2, "3hop_forward": 1}
    for sample in samples:
        assert len(sample.edges) == edges[sample.shape] and sum(sample.named) == named[sample.shape]
        if sample.shape == "3hop_forward":  # from the named start, each hop from a triple's head to its tail
            assert sample.named[0] and [(e.head, e.tail) for e in sample.edges] == [(0, 1), (1, 2), (2, 3)]
        assert not sample.named[sample.asked] and sample.answer in sample.answers
        for edge in sample.edges:  # each edge is the KG triple it names, in the KG's orientation
            triple = store.triple(edge.triple_id)
            assert (triple.head, triple.relation, triple.tail) == (
                sample.entities[edge.head], edge.relation, sample.entities[edge.tail])
        triples = sample.pattern_triples(lambda r, role: KINDS[r][role == "tail"])
        pattern = Pattern.from_triples(triples)
        asked = pattern.nodes[pattern.asked_node()]  # type: ignore[index]
        assert asked.unknown and asked.type_hint  # the asked node is the sample's asked slot, typed
        assert set(sample.answers) == brute_answers(store, triples), sample
    assert sample_subgraphs(store, SHAPES, 3, seed=1) == samples  # the seed decides everything
    assert sample_subgraphs(store, SHAPES, 3, seed=2) != samples


def test_forward_chains_come_only_from_a_kg_with_three_hops_in_a_row() -> None:
    # every relation runs from a movie: walked either way there are 3-hop chains, walked forward none
    movies = [(f"Movie {i}", rel, f"{rel} {i % 3}") for i in range(12) for rel in ("directed by", "has genre")]
    store = KGStore.from_triples(movies)
    assert sample_subgraphs(store, ["3hop"], 3, seed=0)
    assert sample_subgraphs(store, ["3hop_forward"], 3, seed=0) == []
    chain = [("Ann", "father", "Bob"), ("Bob", "father", "Carl"), ("Carl", "profession", "Smith"),
             ("Bob", "mother", "Dora")]
    found = sample_subgraphs(KGStore.from_triples(chain), ["3hop_forward"], 3, seed=0)
    assert [s.facts() for s in found] == [[("Ann", "father", "Bob"), ("Bob", "father", "Carl"),
                                           ("Carl", "profession", "Smith")]]  # the walk through Dora stops at two


def test_one_hop_samples_take_the_relations_in_turn(geo_index: IndexDir) -> None:
    samples = sample_subgraphs(geo_index.store, ["1hop"], 6, seed=0)
    assert sorted(s.edges[0].relation for s in samples) == sorted(KINDS)


def test_excluded_entities_are_in_no_sample(geo_index: IndexDir) -> None:
    held_out = {"France", "Germany", "Lima", "Not In The KG"}
    samples = sample_subgraphs(geo_index.store, SHAPES, 4, seed=0, exclude=held_out)
    assert len(samples) >= 10 and not held_out & {e for s in samples for e in s.entities}
    assert any("France" in s.entities for s in sample_subgraphs(geo_index.store, SHAPES, 4, seed=0))


def test_unknown_shapes_and_bad_counts_are_refused(geo_index: IndexDir) -> None:
    with pytest.raises(ConfigError, match="unknown sample shape"):
        sample_subgraphs(geo_index.store, ["4hop"], 2)
    with pytest.raises(ConfigError, match="at least 1"):
        ExamplesSettings(per_shape=0)


# -- reading the LLM -------------------------------------------------------------------------------------
def test_llm_output_is_read_as_data() -> None:
    assert read_questions('Sure! {"questions": ["Who is it?", "who is it?", "List them."]}', 5) == [
        "Who is it?", "List them."]
    assert read_questions('1. "What is the capital of Peru?"\n2. "Tell me Peru\'s capital"', 1) == [
        "What is the capital of Peru?"]
    assert read_questions("- Which currency does Japan use?\n- Japan money?", 3) == [
        "Which currency does Japan use?", "Japan money?"]
    assert read_phrases('{"phrases": ["Capital City", "seat of government", "a b c d e f g h"]}', 8) == [
        "capital city", "seat of government"]
    assert read_kind('{"kind": "Country"}') == "country"
    assert read_kind('{"kind": "__import__(\'os\')"}') is None and read_kind('{"kind": 3}') is None


def test_questions_are_screened_for_the_names_they_must_and_must_not_say(geo_index: IndexDir) -> None:
    sample = next(s for s in sample_subgraphs(geo_index.store, ["2hop"], 8, seed=0)
                  if len(s.named_entities[0]) > 3 and s.answer not in s.named_entities[0])
    name, hidden = sample.named_entities[0], sample.hidden_entities
    assert screen_question(f"What about {name}?", sample) is None
    assert screen_question(f"What about {name.upper()}!", sample) is None  # case and punctuation do not matter
    assert "does not name" in str(screen_question("What about it?", sample))
    assert "should ask about" in str(screen_question(f"What about {name} and {hidden[-1]}?", sample))


def test_questions_are_respelt_as_the_kg_writes_its_names() -> None:
    assert respell("What country uses Somali Shilling?", ["somali_shilling"]) == "What country uses somali_shilling?"
    assert respell("Which country is Saint Barthélemy in?", ["saint_barthelemy"]) == (
        "Which country is saint_barthelemy in?")  # accents and case aside
    assert respell("Is Saint Paul in it?", ["saint-paul"]) == "Is saint-paul in it?"
    assert respell("What about Cuba's capital?", ["cuba"]) == "What about Cuba's capital?"  # named already
    assert respell("Nigeria's neighbours?", ["niger"]) == "Nigeria's neighbours?"  # whole words only
    # the longer name first; the shorter is not found again inside it
    assert respell("Is Guinea near Equatorial Guinea?", ["guinea", "equatorial_guinea"]) == (
        "Is Guinea near equatorial_guinea?")
    assert respell("Name the New-Zealand cities", ["new_zealand", "zealand"]) == "Name the new_zealand cities"


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60), st.lists(st.text(min_size=1, max_size=12).map(str.strip), max_size=3))
@hypothesis.example("¼0:¹", ["1"])  # a name found inside a character that folds to several ("¼" → "1⁄4")
@hypothesis.example(":E", ["È", ":E"])  # a shorter name found inside a longer one the question already spells
def test_respelling_never_fails_and_is_stable(question: str, names: list[str]) -> None:
    """Any text and names (LLM output is data): a string back, and respelling it again changes nothing when
    the names are distinct after folding (two named entities of one sample are)."""
    out = respell(question, names)
    assert isinstance(out, str)
    # distinct as respelling sees them: case, accents and compatibility forms folded ("O" and "Ò" are one name)
    folded = [" ".join(re.split(r"[\s_\-]+", "".join(c for c in unicodedata.normalize("NFKD", n.casefold())
                                                      if not unicodedata.combining(c)))) for n in names]
    if len(set(folded)) == len(folded):
        assert respell(out, names) == out


# -- the examples bootstrap --------------------------------------------------------------------------------
def test_bootstrap_keeps_only_questions_whose_pattern_finds_the_answer(geo_index: IndexDir, tmp_path: Path) -> None:
    script = ScriptedBootstrap(geo_index.store)
    settings = ExamplesSettings(per_shape=2, questions_per_sample=3, seed=0)
    report = bootstrap_examples(geo_index, script.llm, tmp_path / "ex.yaml", settings)
    assert report.complete and report.samples == 10 and report.questions == 30
    # a right question is lost only when the pattern stage's copy merge (simgrag.pattern.copies) rewrites its
    # correct pattern: "countries sharing a currency with the country whose capital is Rome" has two
    # country nodes, the second's triples a subset of the first's
    merged = {q for q in script.right if merge_unknown_copies(script.patterns[q])[1]}
    assert report.kept == 10 - len(merged) and len(merged) <= 1
    assert report.rejected == {"does not name": 10, "wrong answer": 10 + len(merged)}
    assert report.llm_calls == len(script.llm.calls) <= settings.max_llm_calls(len(KINDS))
    loaded = load_examples(tmp_path / "ex.yaml")  # the file is the format every command reads
    assert {e.question for e in loaded.examples} == script.right - merged
    assert list(loaded.relations) == [relation_text(r) for r in geo_index.store.relations]
    assert "capital (country → city)" in str(loaded.instructions)
    records = [json.loads(line) for line in progress_path(tmp_path / "ex.yaml").read_text().splitlines()[1:]]
    by_question = {q["question"]: r for r in records if r["kind"] == "sample" for q in r["questions"]}
    for example in loaded.examples:  # the sample's own pattern, not the LLM's: KG relation names, typed unknowns
        record = by_question[example.question]
        assert [list(t) for t in example.triples] == record["triples"]
        assert all(t[1] in KINDS for t in example.triples)
        assert set(record["sample"]["answers"]) == brute_answers(geo_index.store, example.triples)
    assert [by_question[e.question]["shape"] for e in loaded.examples[:5]] == list(BOOTSTRAP_SHAPES)  # static
    rejected = {q["question"]: q["why"] for r in records if r["kind"] == "sample" for q in r["questions"]
                if not q["kept"]}
    assert all(rejected[q].startswith("its pattern found") for q in script.wrong)
    for record in (r for r in records if r["kind"] == "sample"):  # a chain's middle was described hop by hop
        assert len(record["described"]) == {"2hop": 1, "3hop": 2}.get(record["shape"], 0)
    asked = [c.messages[-1].content for c in script.llm.calls if "questions that real people" in c.prompt]
    samples = [r["sample"] for r in records if r["kind"] == "sample"]
    for prompt, sample in zip(asked, samples, strict=True):  # the unknowns' names are not shown, only their kinds
        hidden = [e for e, named in zip(sample["entities"], sample["named"], strict=True) if not named]
        assert hidden and not [e for e in hidden if re.search(rf"\b{re.escape(e)}\b", prompt)], prompt
        assert "[answer: " in prompt
        assert prompt.count("\n- ") == (1 if sample["shape"] in ("2hop", "3hop") else len(sample["edges"]))
    last_pattern_prompt = next(c.prompt for c in reversed(script.llm.calls) if "Turn the question" in c.prompt)
    assert sum(q in last_pattern_prompt for q in script.right) >= 6  # accepted questions became the shots
    assert "Pride and Prejudice" not in last_pattern_prompt  # … instead of the generic seed


class Respelt(ScriptedBootstrap):
    """Writes the right question's names another way ("Swiss-Fránc"): the bootstrap must spell them as the KG."""

    def questions(self, prompt: str) -> str:
        written = json.loads(super().questions(prompt))["questions"]
        said = re.search(r"Each (?:names|contains) (.+?) (?:exactly as written|word for word)", prompt)
        right = written[0]
        for name in re.findall(r'"([^"]+)"', said.group(1)):  # type: ignore[union-attr]
            if name in KIND_OF:  # an entity, not a chain's description
                right = right.replace(name, name.replace(" ", "-").replace("e", "é"))
        return json.dumps({"questions": [right, *written[1:]]})


def test_a_kg_that_stores_each_fact_twice_is_sampled_listed_and_typed_once(tmp_path: Path) -> None:
    triples = geo_triples() + [(t, f"{r} inverse", h) for h, r, t in geo_triples()]
    (tmp_path / "twins.txt").write_text("\n".join("|".join(t) for t in triples) + "\n", encoding="utf-8")
    index = build_index_dir(tmp_path / "twins.txt", tmp_path / "twins.idx", embedder=HashEmbedder(dim=64))
    twins = twin_relations(index.store)
    assert twins == {f"{r} inverse": r for r in KINDS}
    samples = sample_subgraphs(index.store, BOOTSTRAP_SHAPES, 3, seed=1, skip_relations=twins)
    assert len(samples) == 15 and {e.relation for s in samples for e in s.edges} <= set(KINDS)
    for sample in samples:  # the gold answers are still every answer the KG holds
        assert set(sample.answers) == brute_answers(index.store, sample.pattern_triples(
            lambda r, role: KINDS[r][role == "tail"]))
    script = Respelt(index.store)
    report = bootstrap_examples(index, script.llm, tmp_path / "ex.yaml",
                                ExamplesSettings(per_shape=2, questions_per_sample=3, seed=0))
    loaded = load_examples(tmp_path / "ex.yaml")
    assert list(loaded.relations) == list(KINDS)  # the twins are not listed …
    assert "turned round (capital inverse for capital, …)" in str(loaded.instructions)
    kind_prompts = [c for c in script.llm.calls if "You describe knowledge graphs" in c.messages[0].content]
    assert len(kind_prompts) == 2 * len(KINDS)  # … nor typed
    assert all(t[1] in KINDS for e in loaded.examples for t in e.triples)
    records = [json.loads(line) for line in progress_path(tmp_path / "ex.yaml").read_text().splitlines()]
    assert records[0]["settings"]["twins_skipped"] == sorted(twins)
    respelt = [q for r in records[1:] if r["kind"] == "sample" for q in r["questions"] if "written" in q]
    assert respelt and all(q["question"] in script.right and q["written"] != q["question"] for q in respelt)
    assert report.kept and {e.question for e in loaded.examples} <= script.right  # kept as the KG spells them


def test_bootstrap_resumes_after_an_error_and_ends_where_a_clean_run_ends(geo_index: IndexDir,
                                                                          tmp_path: Path) -> None:
    settings = ExamplesSettings(per_shape=2, questions_per_sample=3, seed=3)
    clean = tmp_path / "clean.yaml"
    bootstrap_examples(geo_index, ScriptedBootstrap(geo_index.store).llm, clean, settings)
    broken, out = ScriptedBootstrap(geo_index.store, fail_on_sample=6), tmp_path / "ex.yaml"
    with pytest.raises(LLMConnectionError):
        bootstrap_examples(geo_index, broken.llm, out, settings)
    assert len(load_examples(out)) == 5  # what was finished is on disk
    again = ScriptedBootstrap(geo_index.store)
    again.samples = 5  # its questions are numbered like the interrupted run's
    report = bootstrap_examples(geo_index, again.llm, out, settings)
    assert report.complete and report.samples_done == 10 and again.samples == 10  # 5 more samples, not 10
    assert out.read_text() == clean.read_text()
    with pytest.raises(ConfigError, match="--no-resume"):
        bootstrap_examples(geo_index, again.llm, out, ExamplesSettings(per_shape=3, seed=3))
    fresh = bootstrap_examples(geo_index, ScriptedBootstrap(geo_index.store).llm, out, settings, resume=False)
    assert fresh.samples_done == 10 and out.read_text() == clean.read_text()


def test_a_description_that_takes_no_step_falls_back_to_the_whole_chain(geo_index: IndexDir, tmp_path: Path) -> None:
    script = ScriptedBootstrap(geo_index.store)
    script.stuck = True
    settings = ExamplesSettings(per_shape=2, questions_per_sample=3, seed=0, shapes=("2hop",))
    report = bootstrap_examples(geo_index, script.llm, tmp_path / "ex.yaml", settings)
    assert report.kept == 2  # the whole pattern was asked at once, and its right questions kept
    records = [json.loads(line) for line in progress_path(tmp_path / "ex.yaml").read_text().splitlines()[1:]]
    assert [r["described"] for r in records if r["kind"] == "sample"] == [[], []]
    asked = [c.messages[-1].content for c in script.llm.calls if "questions that real people" in c.prompt]
    assert [a.count("\n- ") for a in asked] == [2, 2]


def test_max_llm_calls_stops_resumably(geo_index: IndexDir, tmp_path: Path) -> None:
    settings = ExamplesSettings(per_shape=2, questions_per_sample=3, seed=0, shapes=("1hop",))
    script = ScriptedBootstrap(geo_index.store)
    report = bootstrap_examples(geo_index, script.llm, tmp_path / "ex.yaml", settings, max_llm_calls=2 * len(KINDS) + 1)
    assert not report.complete and report.samples_done == 1 and report.kept == 1
    report = bootstrap_examples(geo_index, script.llm, tmp_path / "ex.yaml", settings)
    assert report.complete and report.kept == 2


def test_a_run_that_keeps_nothing_says_why(geo_index: IndexDir, tmp_path: Path) -> None:
    llm = FakeLLM(lambda m: '{"kind": "country"}' if "kind of thing" in m[-1].content
                  else '{"questions": ["Nothing named here?"]}')
    with pytest.raises(ConfigError, match="does not name") as caught:
        bootstrap_examples(geo_index, llm, tmp_path / "ex.yaml", ExamplesSettings(per_shape=1))
    assert "progress.jsonl lists each question" in str(caught.value)
    assert not (tmp_path / "ex.yaml").exists()


# -- the aliases bootstrap ---------------------------------------------------------------------------------
def test_filter_keeps_phrases_near_their_relation_by_a_margin() -> None:
    vectors = {"capital": np.array([1.0, 0.0]), "currency": np.array([0.0, 1.0]),
               "seat": np.array([0.9, 0.1]), "money": np.array([0.1, 0.9]), "middle": np.array([0.5, 0.5]),
               "almost": np.array([0.52, 0.48]), "far": np.array([-1.0, 0.0]), "twin": np.array([0.9, 0.12])}
    names = ["capital", "currency"]
    owner = np.array([0, 1])
    kept, dropped = filter_phrases({0: ["seat", "middle", "almost", "far"], 1: ["money"]}, names, owner, vectors,
                                   names, margin=0.1, max_distance=1.0)
    assert kept == {0: ["seat"], 1: ["money"]}
    assert {p for p, _ in dropped[0]} == {"middle", "almost", "far"}
    assert "as near to 'currency'" in dict(dropped[0])["almost"] and "> 1" in dict(dropped[0])["far"]
    # each nearest to its own relation, but nearer to each other than to it: both are dropped
    near = {"capital": np.array([1.0, 0, 0]), "currency": np.array([0, 1.0, 0]), "seat": np.array([0.6, 0, 0.8]),
            "twin": np.array([0, 0.6, 0.8])}
    kept, dropped = filter_phrases({0: ["seat"], 1: ["twin"]}, names, owner, near, names, margin=0.01,
                                   max_distance=None)
    assert kept == {} and "'twin' of 'currency'" in dict(dropped[0])["seat"]
    assert "'seat' of 'capital'" in dict(dropped[1])["twin"]
    # a role noun ("Portugal is Spain's ___") needs only to be nearer to its own relation, and is no rival
    # (0.056 nearer to `capital` than to `currency`: under the margin as a paraphrase, kept as a role noun)
    kept, dropped = filter_phrases({0: ["seat", "almost"], 1: ["money"]}, names, owner, vectors, names,
                                   margin=0.1, max_distance=None, role_nouns={0: ["almost"]})
    assert kept == {0: ["seat", "almost"], 1: ["money"]} and not dropped
    # a role noun a little nearer to another relation name is kept when its relation's kept paraphrase is nearer
    flat = {**vectors, "neighbour": np.array([0.0, 0.05]), "next door": np.array([0.45, 0.0])}
    kept, dropped = filter_phrases({0: ["next door", "neighbour"]}, names, owner, flat, names, margin=0.1,
                                   max_distance=None, role_nouns={0: ["neighbour"]})
    assert kept == {0: ["next door", "neighbour"]}, dropped
    kept, _ = filter_phrases({0: ["neighbour"]}, names, owner, flat, names, margin=0.1, max_distance=None,
                             role_nouns={0: ["neighbour"]})
    assert kept == {}  # without the paraphrase it goes
    # a relation's twin (its facts turned round, named alike) is no rival: "seat" is as near to "capital
    # inverse" as to "capital", and kept; "almost" is still too near "currency"
    twins = {**vectors, "capital inverse": np.array([0.95, 0.05])}
    texts, owner3 = ["capital", "currency", "capital inverse"], np.array([0, 1, 2])
    kept, dropped = filter_phrases({0: ["seat", "almost"]}, texts, owner3, twins, texts, margin=0.1,
                                   max_distance=None, twins={2: 0})
    assert kept == {0: ["seat"]} and "as near to 'currency'" in dict(dropped[0])["almost"]
    kept, _ = filter_phrases({0: ["seat"]}, texts, owner3, twins, texts, margin=0.1, max_distance=None)
    assert kept == {}  # without the twins given, "capital inverse" is a rival


def test_alias_prompts_carry_no_kgs_words_and_copied_demo_phrases_are_dropped(geo_index: IndexDir,
                                                                              tmp_path: Path) -> None:
    """A small model copies its worked example: with a movie demo it gave a genealogy KG's spouse "director". The
    demo is about clubs, and a phrase that is one of its own words is not kept (unless the relation says it)."""
    from simgrag.bootstrap.prompts import DEMO_PHRASES, alias_messages, role_messages

    for messages in (alias_messages("spouse", [("Ann", "Bob")], 6), role_messages([("Ann", "Bob")])):
        demo = " ".join(m.content for m in messages[:-1]).lower()
        assert not [w for w in ("movie", "film", "director", "titanic", "country", "capital") if w in demo]
    copied = sorted(DEMO_PHRASES)[:3]
    script = ScriptedBootstrap(geo_index.store, {"capital": [*copied, "capital city"]}, nouns={"capital": ["club"]})
    bootstrap_aliases(geo_index, script.llm, tmp_path / "aliases.yaml", AliasesSettings(margin=0.0))
    table = yaml.safe_load((tmp_path / "aliases.yaml").read_text())
    assert "capital city" in table["capital"] and not set(table["capital"]) & DEMO_PHRASES


def test_aliases_are_asked_once_per_pair_of_twin_relations(tmp_path: Path) -> None:
    triples = geo_triples() + [(t, f"{r} inverse", h) for h, r, t in geo_triples()]
    (tmp_path / "twins.txt").write_text("\n".join("|".join(t) for t in triples) + "\n", encoding="utf-8")
    index = build_index_dir(tmp_path / "twins.txt", tmp_path / "twins.idx", embedder=HashEmbedder(dim=64))
    script = ScriptedBootstrap(index.store, {"capital": ["capital city"], "capital inverse": ["capital of"]})
    report = bootstrap_aliases(index, script.llm, tmp_path / "aliases.yaml", AliasesSettings(margin=0.1))
    assert report.llm_calls == 2 * len(KINDS) and report.relations == 2 * len(KINDS)
    table = yaml.safe_load((tmp_path / "aliases.yaml").read_text())
    assert table["capital"] == ["capital city"] and table["capital inverse"] == []


def test_aliases_bootstrap_writes_installable_aliases(geo_index: IndexDir, tmp_path: Path) -> None:
    phrases = {"capital": ["capital city", "capitals", "currency", "France"], "currency": ["currency used", "money"],
               "borders": ["bordering country", "borders with"]}
    script = ScriptedBootstrap(geo_index.store, phrases, nouns={"borders": ["bordering nation", "Germany"]})
    out = tmp_path / "aliases.yaml"
    report = bootstrap_aliases(geo_index, script.llm, out, AliasesSettings(margin=0.1))
    assert report.llm_calls == 2 * len(KINDS) == 2 * report.relations  # paraphrases, then the role noun
    table = yaml.safe_load(out.read_text())
    assert set(table) == set(KINDS)
    assert "capital city" in table["capital"] and "currency" not in table["capital"]  # another relation's own name
    # the role noun ("Germany is France's ___") is kept when it is nearer to its relation than to any other
    # (no margin: such nouns embed far from every relation name); an entity's name is no role noun
    assert "bordering nation" in table["borders"] and "germany" not in out.read_text().lower()
    assert "france" not in table["capital"]  # an example entity is no paraphrase
    assert "dropped: 'currency' (a text of 'currency')" in out.read_text()
    store = geo_index.store
    assert {store.relations[r]: v for r, v in load_aliases(out, store).items()} == table  # the format indexes read
    reopened = install_aliases(geo_index.path, out)
    assert "capital city" in reopened.relation_texts
    assert reopened.manifest["attached"]["relation_aliases"]["file"] == "relation_aliases.yaml"
    assert CliRunner().invoke(app, ["check", str(geo_index.path)]).exit_code == 0
    # the phrase now finds its relation
    from simgrag.match.retrieve import SubgraphRetriever

    assert store.relations[SubgraphRetriever(reopened).nearest_relation("capital city")] == "capital"  # type: ignore[index]


# -- an index knows its own examples ------------------------------------------------------------------------
def _command_names() -> set[str]:
    import typer.main

    def walk(group: object, prefix: str = "") -> list[str]:
        subs = getattr(group, "commands", None)
        if subs:
            return [n for name, sub in subs.items() for n in walk(sub, f"{prefix} {name}".strip())]
        return [prefix]

    return set(walk(typer.main.get_command(app)))


def _named_commands(text: str) -> set[str]:
    return {" ".join(m.split()[1:3]) if m.split()[1] in ("examples", "aliases") else m.split()[1]
            for m in re.findall(r"simgrag [a-z]+(?: [a-z]+)?", text)}


def test_an_index_without_examples_points_to_real_commands(geo_index: IndexDir) -> None:
    with pytest.raises(ConfigError) as caught:
        index_examples(geo_index)
    message = str(caught.value)
    assert "simgrag examples bootstrap" in message and "--bootstrap-examples" in message
    assert _named_commands(message) <= _command_names(), message
    from simgrag.index.attach import install_command

    for kind in ("examples", "claim_examples", "relation_aliases"):
        assert _named_commands(install_command("X", kind)) <= _command_names()


def test_installed_examples_are_the_index_default_and_checked(geo_index: IndexDir, tmp_path: Path) -> None:
    from simgrag.pipeline import SimGRAG

    own = tmp_path / "mine.yaml"
    own.write_text('examples:\n  - question: "What is the capital of Chile?"\n'
                   '    triples: [["Chile", "capital", "UNKNOWN city 1"]]\n', encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("examples: []\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="non-empty list"):
        install_examples(geo_index.path, bad)
    assert "attached" not in open_index_dir(geo_index.path).manifest
    record = install_examples(geo_index.path, own, info={"bootstrapped": True})
    index = open_index_dir(geo_index.path)
    assert record["examples"] == 1 and index.manifest["attached"]["examples"]["bootstrapped"] is True
    assert index.manifest["files"]["examples.yaml"] == record["sha256"]
    assert index_examples(index) == index.path / "examples.yaml"
    llm = FakeLLM(lambda m: '{"triples": [["Japan", "capital", "UNKNOWN city 1"]]}')
    engine = SimGRAG(index, llm=llm, calibration="off")
    # in the attached example's own wording, the example is the pattern and no LLM call is made
    result = engine.ask("What is the capital of Japan?")
    assert result.answer.short_answer == "Tokyo"
    assert result.pattern is not None and llm.calls == []
    assert "the question's own wording" in result.pattern.kg_repairs[0]
    # in other words, the attached examples are the shots of the LLM call
    result = engine.ask("Which city is Japan's seat of government?")
    assert result.answer.short_answer == "Tokyo"
    assert "What is the capital of Chile?" in llm.calls[0].prompt
    assert CliRunner().invoke(app, ["check", str(index.path)]).exit_code == 0
    (index.path / "examples.yaml").write_text(own.read_text() + "# edited in place\n", encoding="utf-8")
    checked = CliRunner().invoke(app, ["check", str(index.path)])
    assert checked.exit_code == 2 and "examples.yaml" in checked.output
    with pytest.raises(IndexDirError, match="simgrag examples install"):
        index_examples(open_index_dir(index.path))


def test_a_corrupt_attachment_record_is_refused_by_check(geo_index: IndexDir, tmp_path: Path) -> None:
    own = tmp_path / "mine.yaml"
    own.write_text('examples:\n  - question: "capital of Chile?"\n    triples: [["Chile", "capital", "UNKNOWN c 1"]]\n',
                   encoding="utf-8")
    install_examples(geo_index.path, own)
    manifest_path = geo_index.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["attached"]["examples"]["file"] = "../../etc/passwd"
    manifest_path.write_text(json.dumps(manifest))
    checked = CliRunner().invoke(app, ["check", str(geo_index.path)])
    assert checked.exit_code == 2 and "attached.examples" in checked.output


# -- the commands -------------------------------------------------------------------------------------------
def test_examples_bootstrap_command_installs_and_ask_uses_it(geo_index: IndexDir, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    script = ScriptedBootstrap(geo_index.store)
    monkeypatch.setattr(_common, "llm_for", lambda choice: script.llm)
    out, topics = tmp_path / "boot.yaml", tmp_path / "topics.txt"
    topics.write_text("# held out\nPeru\nChile\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["examples", "bootstrap", str(geo_index.path), "-o", str(out), "--install",
                                      "--per-shape", "1", "--shapes", "1hop,star", "--seed", "4",
                                      "--exclude-entities", str(topics)])
    assert result.exit_code == 0, result.output
    assert "Kept 2 of 6 questions from 2 samples" in result.output and "Attached to" in result.output
    manifest = open_index_dir(geo_index.path).manifest
    assert manifest["attached"]["examples"]["bootstrapped"] is True
    assert manifest["attached"]["examples"]["settings"]["exclude"].startswith("2 names")
    assert "Peru" not in out.read_text() and "Chile" not in out.read_text()
    assert (geo_index.path / "examples.yaml").read_bytes() == out.read_bytes()
    kept = load_examples(out).examples[0].question
    script.patterns["Which city is the capital of Peru?"] = [["Peru", "capital", "UNKNOWN city 1"]]
    asked = CliRunner().invoke(app, ["ask", str(geo_index.path), "Which city is the capital of Peru?", "--json",
                                     "--calibration", "off"])
    assert asked.exit_code == 0, asked.output
    assert json.loads(asked.stdout)["short_answer"] == "Lima"
    assert kept in script.llm.calls[-1].prompt  # ask's pattern prompt shows the bootstrapped examples
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Which city is the capital of Peru?", "answers": ["Lima"]}) + "\n")
    calls = len(script.llm.calls)
    bench = CliRunner().invoke(app, ["bench", "qa", "--index", str(geo_index.path), "--questions", str(questions),
                                     "-o", str(tmp_path / "bench.jsonl"), "--calibration", "off"])
    assert bench.exit_code == 0, bench.output
    assert json.loads((tmp_path / "bench.jsonl").read_text().splitlines()[0])["hit"] is True
    assert kept in script.llm.calls[calls].prompt  # … and so does bench's


def test_index_command_bootstraps_aliases_then_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = ScriptedBootstrap(None, {"capital": ["capital city"], "currency": ["money used"]})
    monkeypatch.setattr(_common, "llm_for", lambda choice: script.llm)
    idx = tmp_path / "geo.idx"
    result = CliRunner().invoke(app, ["index", str(write_geo_kg(tmp_path / "geo.txt")), "-o", str(idx), "--embedder",
                                      "hash:64", "--bootstrap-aliases", "--bootstrap-examples"])
    assert result.exit_code == 0, result.output
    attached = open_index_dir(idx).manifest["attached"]
    assert set(attached) == {"examples", "relation_aliases"}
    assert (tmp_path / "geo.idx.aliases.yaml").is_file() and (tmp_path / "geo.idx.examples.yaml").is_file()
    assert "capital city" in open_index_dir(idx).relation_texts
    assert CliRunner().invoke(app, ["check", str(idx)]).exit_code == 0
    both = CliRunner().invoke(app, ["index", str(tmp_path / "geo.txt"), "-o", str(tmp_path / "b.idx"), "--embedder",
                                    "hash:64", "--examples", "x.yaml", "--bootstrap-examples"])
    assert both.exit_code == 2 and "give one of them" in both.output


def test_index_command_attaches_a_given_examples_file(tmp_path: Path) -> None:
    own = tmp_path / "mine.yaml"
    own.write_text('examples:\n  - question: "capital of Chile?"\n    triples: [["Chile", "capital", "UNKNOWN c 1"]]\n',
                   encoding="utf-8")
    idx = tmp_path / "geo.idx"
    result = CliRunner().invoke(app, ["index", str(write_geo_kg(tmp_path / "geo.txt")), "-o", str(idx), "--embedder",
                                      "hash:64", "--examples", str(own), "--no-learn"])
    assert result.exit_code == 0, result.output
    assert index_examples(open_index_dir(idx)) == idx / "examples.yaml"
    installed = CliRunner().invoke(app, ["examples", "install", str(idx), str(tmp_path / "missing.yaml")])
    assert installed.exit_code == 2 and "Cannot read the examples file" in installed.output


# -- the real model ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.llm
def test_real_model_bootstraps_examples(tmp_path: Path, embedded_model: Path) -> None:
    """The embedded llama.cpp model and MiniLM: two one-hop samples over two relations (about ten calls)."""
    from simgrag.llm.registry import resolve_llm

    kg = tmp_path / "geo.txt"
    kg.write_text("\n".join("|".join(t) for t in geo_triples() if t[1] in ("capital", "currency")) + "\n",
                  encoding="utf-8")
    index = build_index_dir(kg, tmp_path / "geo.idx", embedder="minilm")
    settings = ExamplesSettings(shapes=("1hop",), per_shape=2, questions_per_sample=2, seed=0)
    report = bootstrap_examples(index, resolve_llm("llamacpp"), tmp_path / "ex.yaml", settings)
    assert report.complete and report.samples == 2 and report.questions >= 2, report
    assert 2 + 2 <= report.llm_calls <= settings.max_llm_calls(2), report  # kinds, questions, patterns
    assert report.kept >= 1, report.rejected
    loaded = load_examples(tmp_path / "ex.yaml")
    kinds = {json.loads(line)["relation"]: json.loads(line) for line in progress_path(tmp_path / "ex.yaml")
             .read_text().splitlines()[1:] if '"types"' in line}
    assert kinds["capital"]["tail"] != "entity"  # the model named the kind of a capital
    for example in loaded.examples:
        (head, relation, tail), = example.triples
        named = tail if head.startswith("UNKNOWN") else head
        assert relation in ("capital", "currency") and named.lower() in example.question.lower()
        assert set(brute_answers(index.store, example.triples))  # its pattern holds in the KG
