"""Issue 15's reproductions, one by one: each input path ends in a typed SimGRAGError or a correct result."""

from __future__ import annotations

import ast
import json
import math
import shutil
from pathlib import Path

import pytest

import simgrag
from simgrag.errors import ConfigError, IndexDirError, PatternError, PatternParseError, SimGRAGError
from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.llm.base import LLMResponse
from simgrag.match.limits import DEFAULT_DEADLINE_S
from simgrag.match.retrieve import RetrievalSettings
from simgrag.pattern.parse import parse_pattern_text
from simgrag.pattern.validate import validate_triples
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import write_toy_kg

EMBEDDER = HashEmbedder(dim=32)
SRC = Path(simgrag.__file__).parent


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hardening")
    build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=EMBEDDER)
    return root / "toy.idx"


def test_no_assert_for_control_flow_in_library_code() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        if "testing" in path.relative_to(SRC).parts:
            continue  # simgrag.testing holds test helpers
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found


def test_the_truncated_non_ascii_output_is_a_parse_error_not_an_assertion() -> None:
    text = 'Here is the paéttern: {"triples" [["Hea", "starred actor'
    with pytest.raises(PatternParseError) as info:
        parse_pattern_text(text)
    assert info.value.text == text
    with pytest.raises(PatternParseError):  # a bare non-ASCII word is not JSON: an error, not a crash
        parse_pattern_text("{'triples': [('Amélie', 'directed by', 'UNKNOWN director 1')], 'ok': Vrai}")
    parsed = parse_pattern_text("Voilà où: {'triples': [('Amélie', 'directed by', 'UNKNOWN director 1')]}")
    assert parsed.triples == [["Amélie", "directed by", "UNKNOWN director 1"]] and parsed.repaired


def test_deep_nesting_and_huge_outputs_are_typed() -> None:
    for text in ("[" * 100_000, "x" * 60_000, '{"triples": ' + "[" * 3000 + '"a"'):
        with pytest.raises(PatternParseError):
            parse_pattern_text(text)


def test_whitespace_variants_of_one_name_are_one_node() -> None:
    with pytest.raises(PatternError, match="head and tail are the same node"):
        validate_triples([["william  talbot", "children", "william talbot"]])
    with pytest.raises(PatternError, match="same node"):
        validate_triples([["a\tb ", "r", " a b"]])


def test_lone_surrogates_are_refused_as_pattern_errors(toy: Path) -> None:
    with pytest.raises(PatternError, match="lone surrogate"):
        validate_triples([["\ud800x", "directed by", "UNKNOWN director 1"]])
    parsed = parse_pattern_text('{"triples": [["\\ud800x", "directed by", "UNKNOWN director 1"]]}')
    with pytest.raises(PatternError, match="lone surrogate"):
        validate_triples(parsed.triples)
    engine = SimGRAG(toy, llm=FakeLLM([]), embedder=EMBEDDER, claim_examples=None)
    with pytest.raises(PatternError, match="lone surrogate"):
        engine.retrieve([["\ud800x", "directed by", "UNKNOWN director 1"]])
    with pytest.raises(PatternError, match="lone surrogate"):
        engine.ask("who directed \udc00?")  # refused before any LLM call
    assert not engine.llm.calls  # type: ignore[attr-defined]


def test_llm_text_with_lone_surrogates_is_made_valid() -> None:
    assert LLMResponse("a\ud800b").text == "a\ufffdb"
    assert LLMResponse("Amélie 🎬").text == "Amélie 🎬"


@pytest.mark.parametrize("bad", [{"k": 10**11}, {"k": 1e11}, {"k": 2.5}, {"k": True}, {"k": 0}, {"k_n": -1},
                                 {"k_r": 1.5}, {"k_t": 0}, {"deadline_s": math.nan}, {"deadline_s": 0},
                                 {"deadline_s": -1.0}, {"deadline_s": "soon"}, {"algorithm": "fast"},
                                 {"max_steps": 0}, {"max_steps": 2.5}, {"max_steps": True}, {"max_steps": "many"}])
def test_retrieval_settings_refuse_values_no_search_can_honour(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        RetrievalSettings(**bad)  # type: ignore[arg-type]


def test_default_deadline_and_none(toy: Path) -> None:
    assert RetrievalSettings().deadline_s == DEFAULT_DEADLINE_S
    engine = SimGRAG(toy, llm=None, embedder=EMBEDDER)
    result = engine.retrieve([["Titanic", "directed by", "UNKNOWN director 1"]])
    assert result.deadline_s == DEFAULT_DEADLINE_S and result.to_dict()["deadline_s"] == DEFAULT_DEADLINE_S
    free = engine.retrieve([["Titanic", "directed by", "UNKNOWN director 1"]],
                           RetrievalSettings(deadline_s=math.inf))
    assert free.deadline_s is None and free.complete


@pytest.mark.parametrize("pattern", [
    None, "[[a, r, b]]", 42, [], [[]], [["a", "r"]], [[1, 2, 3]], [["a", "r", "x" * 5000]],
    [["UNKNOWN a 1", "r", "UNKNOWN b 2"]] * 13, [["UNKNOWN 1", "UNKNOWN r", "UNKNOWN 2"]],
])
def test_odd_patterns_are_typed_errors(toy: Path, pattern: object) -> None:
    engine = SimGRAG(toy, llm=None, embedder=EMBEDDER)
    with pytest.raises(SimGRAGError):
        engine.retrieve(pattern)  # type: ignore[arg-type]


def test_typed_unknowns_that_match_any_entity_are_searched_with_a_step_cap(toy: Path) -> None:
    from simgrag.match.candidates import CandidateTable, NodeCandidates
    from simgrag.match.limits import UNANCHORED_MAX_STEPS
    from simgrag.match.search import search_subgraphs
    from simgrag.pattern.graph import Pattern
    from simgrag.testing.hostile import hub_kg

    engine = SimGRAG(toy, llm=None, embedder=EMBEDDER)  # the toy KG has no types: "UNKNOWN movie 1" is anything
    small = engine.retrieve([["UNKNOWN movie 1", "directed by", "UNKNOWN director 1"]])
    assert small.complete and small.evidence  # a small KG: done long before the cap
    store = simgrag.KGStore.from_triples(hub_kg())
    chain = Pattern.from_triples([[f"UNKNOWN thing {i}", "r", f"UNKNOWN thing {i + 1}"] for i in range(4)])
    table = CandidateTable.from_relation_pairs([NodeCandidates.anything()] * 5, [None] * 4, store.num_relations)
    capped = search_subgraphs(store, chain, table, k=3, max_steps=UNANCHORED_MAX_STEPS)
    assert not capped.complete and capped.steps < 2 * UNANCHORED_MAX_STEPS


def test_max_steps_bounds_a_search_by_count_not_time(toy: Path) -> None:
    """``max_steps`` stops the graph search after that many steps, best-so-far returned, the same on every run
    (the pattern judge bounds its searches so, a deadline behind it only as a safety net)."""
    from simgrag.grounding.judge import JUDGE_MAX_STEPS, PatternJudge

    engine = SimGRAG(toy, llm=None, embedder=EMBEDDER)
    chain = [["UNKNOWN movie 1", "starred actors", "UNKNOWN actor 1"], ["UNKNOWN movie 2", "starred actors",
                                                                        "UNKNOWN actor 1"]]
    runs = [engine.retrieve(chain, RetrievalSettings(deadline_s=math.inf, max_steps=2)) for _ in range(2)]
    free = engine.retrieve(chain, RetrievalSettings(deadline_s=math.inf))
    assert free.complete and free.steps > 2 and not free.reused  # a search cut short is not kept
    assert all(not r.complete and r.steps <= free.steps for r in runs)
    assert runs[0].to_dict()["matches"] == runs[1].to_dict()["matches"]
    # once a search has run to the end, its exact result is handed back however short the cap
    again = engine.retrieve(chain, RetrievalSettings(deadline_s=math.inf, max_steps=2))
    assert again.complete and again.reused and again.to_dict()["matches"] == free.to_dict()["matches"]
    from simgrag.match.retrieve import SubgraphRetriever

    judge = PatternJudge(SubgraphRetriever(open_index_dir(toy, embedder=EMBEDDER)))
    assert judge.settings.max_steps == JUDGE_MAX_STEPS


# -- build swap ------------------------------------------------------------------------------------


def _crash_between_renames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Build once, then rebuild and crash after the old index moved away, before the new one moved in."""
    from simgrag.index import swap

    kg = write_toy_kg(tmp_path / "toy.txt")
    out = tmp_path / "toy.idx"
    build_index_dir(kg, out, embedder=EMBEDDER)
    real_rename = Path.rename

    def crash_on_second(self: Path, target: Path) -> Path:  # type: ignore[override]
        if self.name.endswith(".building"):
            raise KeyboardInterrupt("power cut between the renames")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        build_index_dir(kg, out, embedder=EMBEDDER, overwrite=True)
    monkeypatch.setattr(Path, "rename", real_rename)
    assert not out.exists() and swap.old_dir(out).exists() and (swap.work_dir(out) / "manifest.json").exists()
    return kg, out


def test_a_crash_between_the_renames_is_finished_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out = _crash_between_renames(tmp_path, monkeypatch)
    opened = open_index_dir(out, embedder=EMBEDDER)  # moves the completed build in
    assert opened.store.num_triples == 17 and not (tmp_path / ".toy.idx.building").exists()


def test_a_crash_between_the_renames_is_not_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simgrag.index import directory

    kg, out = _crash_between_renames(tmp_path, monkeypatch)
    monkeypatch.setattr(directory, "_build_into", lambda *a, **k: pytest.fail("the finished build was redone"))
    rebuilt = build_index_dir(kg, out, embedder=EMBEDDER, overwrite=True)
    assert rebuilt.store.num_triples == 17


def test_an_unfinished_replacement_puts_the_old_index_back(tmp_path: Path) -> None:
    from simgrag.index import swap

    out = tmp_path / "toy.idx"
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), out, embedder=EMBEDDER)
    out.rename(swap.old_dir(out))
    (swap.work_dir(out) / "store").mkdir(parents=True)  # a build that never wrote its manifest
    assert open_index_dir(out, embedder=EMBEDDER).store.num_triples == 17


def test_a_finished_build_with_other_settings_is_not_reused(tmp_path: Path) -> None:
    from simgrag.index import swap

    kg = write_toy_kg(tmp_path / "toy.txt")
    out = tmp_path / "toy.idx"
    build_index_dir(kg, out, embedder=EMBEDDER, index_kind="exact")
    shutil.copytree(out, swap.work_dir(out))  # a finished exact build waiting
    rebuilt = build_index_dir(kg, out, embedder=EMBEDDER, index_kind="faiss-hnsw", overwrite=True)
    assert rebuilt.manifest["entity_index"]["kind"] == "faiss-hnsw"


def test_manifest_records_file_hashes_and_build_key(toy: Path) -> None:
    manifest = json.loads((toy / "manifest.json").read_text())
    assert set(manifest["files"]) >= {"store/heads.npy", "entity_vectors.npy", "relation_owner.npy"}
    assert all(len(v) == 64 for v in manifest["files"].values()) and len(manifest["build_key"]) == 64


def test_missing_manifest_keys_are_index_errors(toy: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.idx"
    shutil.copytree(toy, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    for key in ("kg", "embedder", "entity_index"):
        broken = {k: v for k, v in manifest.items() if k != key}
        (copy / "manifest.json").write_text(json.dumps(broken))
        with pytest.raises(IndexDirError, match=repr(key)):
            open_index_dir(copy, embedder=EMBEDDER)
    (copy / "manifest.json").write_text("[1, 2]")
    with pytest.raises(IndexDirError, match="not an object"):
        open_index_dir(copy, embedder=EMBEDDER)


# -- the compiled search never reads outside the store ---------------------------------------------


@pytest.mark.parametrize("damage", ["nbr", "rel", "tid", "indptr", "root"])
def test_the_kernel_stops_on_ids_outside_the_store(damage: str) -> None:
    """A store damaged after its checks (in memory) or a candidate id past the KG: a typed error, never a
    read out of bounds."""
    from simgrag.match.candidates import CandidateTable, NodeCandidates
    from simgrag.match.search import search_subgraphs
    from simgrag.pattern.graph import Pattern
    from simgrag.testing.toy import TOY_TRIPLES

    store = simgrag.KGStore.from_triples(TOY_TRIPLES)
    titanic = store.entities.id_of("Titanic")
    if damage == "nbr":
        store.adj_nbr = store.adj_nbr.copy()
        store.adj_nbr[store.indptr[titanic]] = 10**6
    elif damage == "rel":
        store.adj_rel = store.adj_rel.copy()
        store.adj_rel[store.indptr[titanic]] = -3
    elif damage == "tid":
        store.adj_tid = store.adj_tid.copy()
        store.adj_tid[store.indptr[titanic]] = 10**7
    elif damage == "indptr":
        store.indptr = store.indptr.copy()
        store.indptr[titanic + 1] = 10**9
    root = 10**6 if damage == "root" else titanic
    pattern = Pattern.from_triples([["Titanic", "UNKNOWN r", "UNKNOWN x 1"],
                                    ["UNKNOWN x 1", "UNKNOWN r", "UNKNOWN y 2"]])
    table = CandidateTable.from_relation_pairs([NodeCandidates.from_pairs([root], [0.0]), NodeCandidates.anything(),
                                                NodeCandidates.anything()], [None, None], store.num_relations)
    with pytest.raises(IndexDirError, match="corrupt"):
        search_subgraphs(store, pattern, table, k=3)
