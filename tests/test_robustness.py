"""Issue 6: derived index directories, the perturbed-KG benchmark and the abstention study (toy KG, fakes)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simgrag import cli
from simgrag.cli import bench as cli_bench
from simgrag.errors import ConfigError, IndexDirError
from simgrag.eval.abstention import classify_reply, reduced_store, run_abstention, supporting_edges
from simgrag.eval.answerable import chain_targets
from simgrag.eval.runner import QAItem
from simgrag.index.derive import derive_index_dir, is_derived_from
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.kg.store import KGStore
from simgrag.llm.base import ChatMessage
from simgrag.perturb.methods import perturb
from simgrag.perturb.robustness import PerturbSpec, parse_perturb_specs, perturbed_index, run_robustness
from simgrag.pipeline import SimGRAG
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.llm import FakeLLM
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def toy(tmp_path: Path) -> IndexDir:
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text("directed_by: [director of, film director]\nstarred_actors: [actor in]\n", encoding="utf-8")
    return build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "toy.idx", embedder=HashEmbedder(dim=32),
                           relation_aliases=aliases)


def _triples(store: KGStore) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}


# ------------------------------------------------------------------------------------------ derive
def test_derive_reuses_entity_vectors_and_relation_aliases(toy: IndexDir, tmp_path: Path) -> None:
    result = perturb(toy.store, "ed", 0.3, seed=1)
    new = result.to_store()
    derived = derive_index_dir(toy, new, tmp_path / "ed.idx", derivation={"perturbation": result.summary()})
    assert derived.store.num_triples == toy.store.num_triples - result.num_changed == new.num_triples
    assert _triples(derived.store) == {t.as_tuple() for t in result.triples()}
    assert list(derived.store.entities) == list(toy.store.entities)  # isolated entities kept too
    np.testing.assert_array_equal(derived.entity_vectors, toy.entity_vectors)
    same_inode = os.stat(derived.path / "entity_vectors.npy").st_ino == os.stat(toy.path / "entity_vectors.npy").st_ino
    reused = derived.manifest["derived_from"]["reused"]
    assert reused["entity_vectors"] == ("hard-linked" if same_inode else "copied")
    assert reused["relation_index"] == "copied"
    assert derived.relation_texts == toy.relation_texts and "director of" in derived.relation_texts
    info = derived.manifest["derived_from"]
    assert info["kg_content_hash"] == toy.manifest["kg"]["content_hash"]
    assert info["perturbation"]["method"] == "ed" and info["perturbation"]["changed"] == result.num_changed
    assert derived.manifest["kg"]["content_hash"] == new.content_hash() != toy.manifest["kg"]["content_hash"]
    assert is_derived_from(derived, toy.manifest["kg"]["content_hash"])
    assert not is_derived_from(toy, toy.manifest["kg"]["content_hash"])
    # the entity search still works on the derived index: the vectors line up with the entity ids
    hits = derived.entity_index.search(derived.embedder.encode(["James Cameron"]), 1)
    assert derived.store.entities[int(np.asarray(hits[1])[0][0])] == "James Cameron"
    assert not list(tmp_path.glob(".ed.idx*"))  # no leftover work directory


def test_derive_rejects_another_entity_list(toy: IndexDir, tmp_path: Path) -> None:
    reordered = KGStore.from_triples(reversed(TOY_TRIPLES))  # same names, other ids
    assert set(reordered.entities) == set(toy.store.entities)
    with pytest.raises(IndexDirError, match="entity table differs"):
        derive_index_dir(toy, reordered, tmp_path / "bad.idx")
    smaller = KGStore.from_triples(TOY_TRIPLES[:5])
    with pytest.raises(IndexDirError, match="entities instead of"):
        derive_index_dir(toy, smaller, tmp_path / "bad.idx")
    assert not (tmp_path / "bad.idx").exists()


def test_derive_reembeds_a_changed_relation_table_keeping_aliases(toy: IndexDir, tmp_path: Path) -> None:
    base = toy.store
    keep = ("directed_by", "release_year")
    rel_ids = [base.relations.id_of(r) for r in keep]
    mask = np.isin(np.asarray(base.rels), rel_ids)
    remap = {old: new for new, old in enumerate(rel_ids)}
    store = KGStore.from_ids(base.entities, list(keep), np.asarray(base.heads)[mask],
                             np.array([remap[int(r)] for r in np.asarray(base.rels)[mask]]),
                             np.asarray(base.tails)[mask])
    derived = derive_index_dir(toy, store, tmp_path / "fewer.idx")
    assert derived.manifest["derived_from"]["reused"]["relation_index"] == "re-embedded"
    assert sorted(derived.relation_texts) == sorted(["directed by", "director of", "film director", "release year"])
    owners = {t: list(store.relations)[int(o)] for t, o in zip(derived.relation_texts, derived.relation_owner,
                                                               strict=True)}
    assert owners["film director"] == "directed_by"
    reopened = open_index_dir(tmp_path / "fewer.idx", embedder=HashEmbedder(dim=32))
    assert reopened.relation_index.ntotal == 4


# ------------------------------------------------------------------------------------------ perturb bench
def _reader(messages: list[ChatMessage]) -> str:
    """Answers a 'who directed M' question with the director the prompt's facts give, else not available."""
    prompt = "\n".join(m.content for m in messages)
    movie = prompt.rsplit("who directed ", 1)[-1].split()[0].strip("?")
    if "Triples:" not in prompt and "Question:" not in prompt:  # SimGRAG's pattern call
        return json.dumps({"triples": [[movie, "directed by", "UNKNOWN director 1"]]})
    found = re.search(rf"\({re.escape(movie)}, directed_by, ([^)]+)\)", prompt)
    return f"ans: {found.group(1)}" if found else "ans: not available"


ITEMS = [QAItem("who directed Titanic", ("James Cameron",), "1-hop", "Titanic", "movie_to_director", True),
         QAItem("who directed Avatar", ("James Cameron",), "1-hop", "Avatar", "movie_to_director", True),
         QAItem("who directed Juno", ("Jason Reitman",), "1-hop", "Juno", "movie_to_director", True)]


def test_parse_perturb_specs() -> None:
    specs = parse_perturb_specs(["rs:0.1,0.3", "ED:0.3", "rs:0.3"])
    assert [(s.method, s.level, s.key) for s in specs] == [("rs", 0.1, "rs-0.1"), ("rs", 0.3, "rs-0.3"),
                                                           ("ed", 0.3, "ed-0.3")]
    for bad in ("xx:0.1", "rs", "rs:1.5", "rs:zero", "rs:0"):
        with pytest.raises(ConfigError):
            parse_perturb_specs([bad])


def test_perturb_bench_writes_sub_runs_table_and_curves(toy: IndexDir, tmp_path: Path,
                                                         assert_drawn_png: Callable[[Path], None]) -> None:
    llm = FakeLLM(_reader)
    engine = SimGRAG(toy, llm=llm)
    out, cache = tmp_path / "rob", tmp_path / "cache"
    specs = [PerturbSpec("ed", 0.3), PerturbSpec("ed", 0.6), PerturbSpec("rs", 0.5)]
    names = ["kaping", "none", "simgrag"]
    result = run_robustness(engine, ITEMS, names, specs, out, seed=3, cache=cache, progress=False)
    for sub in ("original", "ed-0.3", "ed-0.6", "rs-0.5"):
        for name in ("kaping.jsonl", "none.jsonl", "simgrag.jsonl", "summary.json", "comparison.md", "done.json"):
            assert (out / sub / name).is_file(), f"{sub}/{name}"
        assert len((out / sub / "kaping.jsonl").read_text().splitlines()) == len(ITEMS)
    assert len(result["rows"]) == 4 * 3
    original = {r["retriever"]: r for r in result["rows"] if r["method"] == "original"}
    assert original["kaping"]["hits1"] == 1.0 and original["kaping"]["sd2"] == 1.0
    for key, level in (("ed-0.3", 0.3), ("ed-0.6", 0.6)):  # kaping answers exactly where the gold edge survived
        store = open_index_dir(result["kgs"][key]["index"], embedder=HashEmbedder(dim=32)).store
        kept = sum((it.topic, "directed_by", it.answers[0]) in _triples(store) for it in ITEMS)
        for name in ("kaping", "simgrag"):  # simgrag: the perturbed index, not the original one, was searched
            row = next(r for r in result["rows"] if (r["method"], r["level"], r["retriever"]) == ("ed", level, name))
            assert row["hits1"] == pytest.approx(kept / len(ITEMS)), name
        assert kept < len(ITEMS) or key != "ed-0.6"  # seed 3 deletes gold edges at 0.6: the curve falls
    assert original["none"]["hits1"] == 0.0 and original["none"]["answer_recall"] == 0.0
    assert original["simgrag"]["hits1"] == 1.0 and original["simgrag"]["errors"] == 0
    kgs = result["kgs"]
    assert kgs["ed-0.3"]["changed"] == round(0.3 * 17) and kgs["ed-0.6"]["changed"] == 10
    assert kgs["ed-0.6"]["sd2"] < kgs["ed-0.3"]["sd2"] < 1.0
    assert kgs["ed-0.3"]["triples"] == 17 - 5
    table = (out / "robustness.md").read_text()
    assert table.count("| kaping |") == 4 and table.count("| simgrag |") == 4
    assert "| ed | 0.6 | kaping | 3 |" in table and "SD2" in table
    for png in ("hits1_vs_level.png", "score_h_vs_level.png"):
        assert_drawn_png(out / png)
    # the perturbed index dirs are cached (keyed by base hash, method, level, seed) and reruns are free
    derived = sorted(p.name for p in (cache / "derived").iterdir())
    assert len(derived) == 3 and all(n.endswith("-s3.idx") for n in derived)
    calls = len(llm.calls)
    mtime = (cache / "derived" / derived[0] / "manifest.json").stat().st_mtime_ns
    again = run_robustness(engine, ITEMS, names, specs, out, seed=3, cache=cache, progress=False)
    assert len(llm.calls) == calls and again["rows"] == result["rows"]
    assert (cache / "derived" / derived[0] / "manifest.json").stat().st_mtime_ns == mtime


def test_perturbed_index_is_seeded(toy: IndexDir, tmp_path: Path) -> None:
    a = perturbed_index(toy, PerturbSpec("er", 0.4), seed=5, cache=tmp_path / "c1")
    b = perturbed_index(toy, PerturbSpec("er", 0.4), seed=5, cache=tmp_path / "c2")
    c = perturbed_index(toy, PerturbSpec("er", 0.4), seed=6, cache=tmp_path / "c1")
    assert a.store.content_hash() == b.store.content_hash() != c.store.content_hash()
    assert a.store.num_entities == toy.store.num_entities


# ------------------------------------------------------------------------------------------ abstention
HAND = (("Titanic", "directed_by", "James Cameron"), ("Avatar", "directed_by", "James Cameron"),
        ("Titanic", "written_by", "James Cameron"), ("Titanic", "starred_actors", "Leonardo DiCaprio"),
        ("Titanic", "starred_actors", "Kate Winslet"), ("Inception", "starred_actors", "Leonardo DiCaprio"),
        ("Inception", "directed_by", "Christopher Nolan"), ("Memento", "directed_by", "Christopher Nolan"))


def _removed(store: KGStore, topic: str, chain: str, answers: tuple[str, ...]) -> set[tuple[str, str, str]]:
    return {store.triple(int(t)).as_tuple() for t in supporting_edges(store, topic, chain, answers)}


def test_removal_rule_takes_exactly_the_gold_chain_edges() -> None:
    store = KGStore.from_triples(HAND)
    assert _removed(store, "Titanic", "movie_to_director", ("James Cameron",)) == {HAND[0]}  # written_by stays
    assert _removed(store, "James Cameron", "director_to_movie", ("Titanic", "Avatar")) == {HAND[0], HAND[1]}
    assert _removed(store, "Titanic", "movie_to_director_to_movie", ("Avatar",)) == {HAND[0], HAND[1]}
    # 2-hop through actors: Kate Winslet leads to no gold answer, so her edge stays
    assert _removed(store, "Titanic", "movie_to_actor_to_movie", ("Inception",)) == {HAND[3], HAND[5]}
    assert _removed(store, "Titanic", "movie_to_director", ("Steven Spielberg",)) == set()
    assert _removed(store, "Nowhere", "movie_to_director", ("James Cameron",)) == set()
    removed = supporting_edges(store, "Titanic", "movie_to_actor_to_movie", ("Inception",))
    reduced = reduced_store(store, removed)
    assert list(reduced.entities) == list(store.entities) and reduced.num_triples == len(HAND) - 2
    assert chain_targets(reduced, "Titanic", "movie_to_actor_to_movie") == set()
    assert chain_targets(store, "Titanic", "movie_to_actor_to_movie") == {"Inception"}


def test_classify_reply() -> None:
    gold = ("James Cameron",)
    q = "who directed Titanic"
    assert classify_reply([], "ans: not available", gold, question=q) == "abstained"
    assert classify_reply(["Not available"], "Not available.", gold, question=q) == "abstained"
    assert classify_reply(["The facts do not mention the director"], "The facts do not mention the director",
                          gold, question=q) == "abstained"
    assert classify_reply(["Titanic"], "ans: Titanic", gold, question=q) == "abstained"  # echoes the question
    assert classify_reply(["Kate Winslet"], "The triples do not mention who directed it; Kate Winslet starred.",
                          gold, question=q) == "abstained"
    assert classify_reply(["James Cameron"], "ans: James Cameron", gold, question=q) == "gold"
    assert classify_reply(["james cameron"], "James Cameron directed it.", gold, question=q) == "gold"
    assert classify_reply(["Steven Spielberg"], "ans: Steven Spielberg", gold, question=q) == "wrong"
    assert classify_reply(["Steven Spielberg"], "The KG does not say.\nans: Steven Spielberg", gold,
                          question=q) == "wrong"
    assert classify_reply(["None But the Brave"], "ans: None But the Brave", ("x",), question="q") == "wrong"
    assert classify_reply(["James Cameron"], "", gold, abstained=True) == "abstained"
    assert classify_reply([], "", gold, error=True) == "error"
    # a substituted named entity said out loud: flagged, unless the answer is gold anyway
    assert classify_reply(["Steven Spielberg"], "ans: Steven Spielberg", gold, question=q, flagged=True) == "flagged"
    assert classify_reply(["James Cameron"], "ans: James Cameron", gold, question=q, flagged=True) == "gold"


def test_abstention_study_end_to_end(toy: IndexDir, tmp_path: Path) -> None:
    def reader(messages: list[ChatMessage]) -> str:
        prompt = "\n".join(m.content for m in messages)
        if "Titanic" in prompt.split("Question:")[-1]:
            return "ans: James Cameron"  # from its own knowledge
        if "Avatar" in prompt.split("Question:")[-1]:
            return "ans: not available"
        return "ans: Steven Spielberg"

    items = [QAItem("who directed Titanic", ("James Cameron",), "1-hop", "Titanic", "movie_to_director", True),
             QAItem("who directed Avatar", ("James Cameron",), "1-hop", "Avatar", "movie_to_director", True),
             QAItem("who starred in Juno", ("Ellen Page",), "1-hop", "Juno", "movie_to_actor", True)]
    engine = SimGRAG(toy, llm=FakeLLM(reader))
    out = tmp_path / "abst"
    summary = run_abstention(engine, items, ["kaping", "none"], out, cache=tmp_path / "cache", progress=False,
                             answerable=True)
    assert summary["removed_triples"] == 3 and summary["triples_after"] == 17 - 3
    assert summary["still_answerable"] == 0
    assert summary["gold_adjacent_after"] == 0  # the toy KG has no second edge between these topics and answers
    removed = (out / "removed_triples.tsv").read_text().splitlines()[1:]
    assert sorted(removed) == sorted(["Titanic\tdirected_by\tJames Cameron", "Avatar\tdirected_by\tJames Cameron",
                                      "Juno\tstarred_actors\tEllen Page"])
    for name in ("kaping", "none"):
        s = summary["retrievers"][name]["overall"]
        assert (s["questions"], s["abstained"], s["gold"], s["wrong"], s["error"]) == (3, 1, 1, 1, 0)
    full = summary["answerable"]["kaping"]["overall"]  # the same questions on the full KG
    assert (full["questions"], full["abstained"], full["gold"], full["wrong"]) == (3, 1, 1, 1)
    rows = [json.loads(line) for line in (out / "abstention.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {r["class"] for r in rows if r["question"].endswith("Juno")} == {"wrong"}
    assert sum(1 for r in rows if r.get("kg") == "full") == 6
    kaping = [json.loads(line) for line in (out / "runs" / "kaping.jsonl").read_text().splitlines()]
    titanic = next(r for r in kaping if r["question"].endswith("Titanic"))
    assert ["Titanic", "directed_by", "James Cameron"] not in titanic["context"]["triples"]
    assert titanic["answerable"] is False
    table = (out / "abstention.md").read_text()
    assert "| kaping | answer removed | 3 | 33.3 | 0.0 | 33.3 | 33.3 | 0.0 |" in table
    assert "| kaping | full (answerable) | 3 | 33.3 | 0.0 | 33.3 | 33.3 | 0.0 | – |" in table
    assert "3 supporting triples removed" in table


def test_cli_bench_metaqa_perturb_and_abstain(toy: IndexDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = SimGRAG(toy, llm=FakeLLM(_reader))
    monkeypatch.setattr(cli_bench, "_bench_engine", lambda *a, **k: engine)
    monkeypatch.setenv("SIMGRAG_CACHE_DIR", str(tmp_path / "cache"))
    metaqa = tmp_path / "MetaQA"
    for hop in (1,):
        (metaqa / f"{hop}-hop" / "vanilla").mkdir(parents=True)
        (metaqa / f"{hop}-hop" / "vanilla" / "qa_test.txt").write_text(
            "who directed [Titanic]\tJames Cameron\nwho directed [Juno]\tJason Reitman\n", encoding="utf-8")
        (metaqa / f"{hop}-hop" / "qa_test_qtype.txt").write_text("movie_to_director\nmovie_to_director\n")
    result = CliRunner().invoke(cli.app, ["bench", "metaqa", "--metaqa-dir", str(metaqa), "--hops", "1",
                                          "-o", str(tmp_path / "rob"), "--retriever", "kaping",
                                          "--perturb", "ed:0.5", "--perturb", "rs:0.2", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "| ed | 0.5 | kaping | 2 |" in result.output
    assert {p.name for p in (tmp_path / "rob").iterdir()} >= {"original", "ed-0.5", "rs-0.2", "robustness.md",
                                                              "hits1_vs_level.png", "score_h_vs_level.png"}
    result = CliRunner().invoke(cli.app, ["bench", "abstain", "--metaqa-dir", str(metaqa), "--hops", "1",
                                          "--sample", "5", "--retriever", "kaping", "-o", str(tmp_path / "ab")])
    assert result.exit_code == 0, result.output
    assert "2 supporting triples removed" in result.output and (tmp_path / "ab" / "abstention.md").is_file()
    bad = CliRunner().invoke(cli.app, ["bench", "metaqa", "--metaqa-dir", str(metaqa), "-o", str(tmp_path / "x"),
                                       "--hops", "1", "--perturb", "zz:0.1"])
    assert bad.exit_code == 2 and "--perturb expects METHOD:LEVEL" in bad.output


def test_trained_models_read_an_index_derived_from_their_kg(toy: IndexDir, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from simgrag.errors import ModelError
    from simgrag.retrievers.training import kg_fingerprint, read_model_dir, write_model_dir

    embedder = {"name": toy.embedder.name, "dim": toy.embedder.dim}
    write_model_dir(tmp_path / "m", kind="subgraphrag", state_dict={}, embedder=embedder, kg=kg_fingerprint(toy),
                    body={})
    derived = perturbed_index(toy, PerturbSpec("ed", 0.3), seed=0, cache=tmp_path / "cache")
    manifest, _ = read_model_dir(tmp_path / "m", kind="subgraphrag", index=derived)
    assert manifest["kg"]["content_hash"] == toy.manifest["kg"]["content_hash"]
    other = build_index_dir(write_toy_kg(tmp_path / "t2.txt"), tmp_path / "other.idx", embedder=HashEmbedder(dim=32))
    unrelated = derive_index_dir(other, perturb(other.store, "ed", 0.3, seed=0).to_store(), tmp_path / "u.idx")
    write_model_dir(tmp_path / "m2", kind="subgraphrag", state_dict={}, embedder=embedder,
                    kg={**kg_fingerprint(toy), "content_hash": "0" * 64}, body={})
    with pytest.raises(ModelError, match="trained on a different KG"):
        read_model_dir(tmp_path / "m2", kind="subgraphrag", index=unrelated)



def test_derived_copies_of_one_kg_indexed_two_ways_do_not_evict_each_other(toy: IndexDir, tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    from simgrag.eval.abstention import reduced_index

    other = build_index_dir(write_toy_kg(tmp_path / "toy2.txt"), tmp_path / "toy64.idx", embedder=HashEmbedder(dim=64))
    removed = np.array([0, 1], dtype=np.int64)
    cache = tmp_path / "cache"
    first, second = reduced_index(toy, removed, cache=cache), reduced_index(other, removed, cache=cache)
    assert first.path != second.path and first.embedder.name == "hash-32" and second.embedder.name == "hash-64"
    with caplog.at_level("WARNING"):
        again = reduced_index(toy, removed, cache=cache), reduced_index(other, removed, cache=cache)
    assert [d.path for d in again] == [first.path, second.path] and "rebuilding" not in caplog.text
    assert again[0].store.num_triples == toy.store.num_triples - 2


def test_cli_bench_metaqa_resumes_unless_told_not_to(toy: IndexDir, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    engine = SimGRAG(toy, llm=FakeLLM(_reader))
    asked: list[str] = []
    ask = engine.ask
    monkeypatch.setattr(engine, "ask", lambda question, *a, **k: asked.append(question) or ask(question, *a, **k))
    monkeypatch.setattr(cli_bench, "_bench_engine", lambda *a, **k: engine)
    metaqa = tmp_path / "MetaQA"
    (metaqa / "1-hop" / "vanilla").mkdir(parents=True)
    (metaqa / "1-hop" / "vanilla" / "qa_test.txt").write_text("who directed [Titanic]\tJames Cameron\n",
                                                               encoding="utf-8")
    (metaqa / "1-hop" / "qa_test_qtype.txt").write_text("movie_to_director\n", encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    args = ["bench", "metaqa", "--metaqa-dir", str(metaqa), "--hops", "1", "-o", str(out)]
    first = CliRunner().invoke(cli.app, args)
    assert first.exit_code == 0, first.output
    assert asked == ["who directed Titanic"] and len(out.read_text(encoding="utf-8").splitlines()) == 1
    assert CliRunner().invoke(cli.app, args).exit_code == 0  # resumed: the row is kept, not asked again
    assert len(asked) == 1
    assert CliRunner().invoke(cli.app, [*args, "--no-resume"]).exit_code == 0  # the file starts over
    assert len(asked) == 2 and len(out.read_text(encoding="utf-8").splitlines()) == 1
