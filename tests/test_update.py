"""Live updates of index directories (simgrag.index.update): an updated index retrieves what a
from-scratch build of the same final triples retrieves (property test, hash embedder), every
supported vector index takes appended entities, unsupported ones and bad input fail clearly, the
manifest and `simgrag check` stay right, and `simgrag update` works from the command line."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import IndexDirError, KGError, KGFormatError
from simgrag.index.compact import compact_index_dir
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.index.exact import ExactIndex
from simgrag.index.live import LiveEntityIndex
from simgrag.index.swap import work_dir
from simgrag.index.update import update_index_dir
from simgrag.index.verify import verify_index
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern
from simgrag.testing.threads import run_in_threads
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

Triple3 = tuple[str, str, str]
# one word each, so the hash embedder gives every name its own vector
NAMES = ["inception", "memento", "titanic", "avatar", "juno", "nolan", "cameron", "reitman", "dicaprio", "winslet",
         "pearce", "english", "drama", "thriller"]
RELATIONS = ["directed_by", "starred_actors", "written_by", "has_genre", "in_language"]
NEW_RELATIONS = ["produced_by"]  # only ever added by updates
QUERY_NAMES = [*NAMES, "nolen", "titanik", "winslett", "dramas"]
QUERY_RELATIONS = ["directed by", "starred actors", "written by", "has genre", "produced by", "director", "actor",
                   "UNKNOWN"]
EMBEDDER = "hash:16"  # few buckets: names rarely get orthogonal vectors, so distance ties are rare
TIE = 1e-5  # distances this close count as equal (two layouts of the same vectors round differently)
SMALL = RetrievalSettings(k=3, k_n=3, k_r=8, deadline_s=None)  # k_n below the entity count: retired ones matter
FULL = RetrievalSettings(k=5000, k_n=3, k_r=8, deadline_s=None, answer_tolerance=None)

triple = st.tuples(st.sampled_from(NAMES), st.sampled_from(RELATIONS), st.sampled_from(NAMES))
added_triple = st.tuples(st.sampled_from(NAMES), st.sampled_from(RELATIONS + NEW_RELATIONS), st.sampled_from(NAMES))


def write_kg(path: Path, triples: list[Triple3] | tuple[Triple3, ...]) -> Path:
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples), encoding="utf-8")
    return path


def build(kg: Path, out: Path, kind: str, embedder: str = "hash:64") -> IndexDir:
    return build_index_dir(kg, out, embedder=embedder, index_kind=kind, overwrite=True, show_progress=False)


# ---------------------------------------------------------------------------------------------- updated = rebuilt
def canon(ev: object) -> tuple[object, ...]:
    return (tuple((n.pattern_node, n.entity) for n in ev.nodes),  # type: ignore[attr-defined]
            tuple(e.triple.as_tuple() for e in ev.edges))  # type: ignore[attr-defined]


def ranked(result: Retrieval) -> list[tuple[float, tuple[object, ...]]]:
    return sorted((round(ev.gsd, 9), canon(ev)) for ev in result.evidence)


def boundary_tie(index: IndexDir, pattern: Pattern, k_n: int) -> bool:
    """Whether a known node's k_n-th and next nearest entities are (within float rounding) equally far:
    then any index, a rebuild with the same triples in another order too, may pick either one."""
    texts = [n.text for n in pattern.nodes if not n.unknown]
    if not texts or index.entity_index.ntotal <= k_n:
        return False
    dists, _ = index.entity_index.search(index.embedder.encode(texts), k_n + 1)
    return bool((np.abs(dists[:, k_n - 1] - dists[:, k_n]) < TIE).any())


def assert_same_retrieval(updated: IndexDir, rebuilt: IndexDir, pattern: Pattern) -> bool:
    """Top-k GSDs equal; the matches strictly better than the k-th equal; the k-th's ties drawn from the
    same group; every match (exhaustive) and the answer set equal. False when the pattern was skipped."""
    if boundary_tie(rebuilt, pattern, SMALL.k_n):
        return False
    a_ret, b_ret = SubgraphRetriever(updated), SubgraphRetriever(rebuilt)
    a_all, b_all = a_ret.retrieve(pattern, FULL), b_ret.retrieve(pattern, FULL)
    assert a_all.complete and b_all.complete and len(a_all.evidence) < FULL.k
    assert ranked(a_all) == ranked(b_all)
    a, b = a_ret.retrieve(pattern, SMALL), b_ret.retrieve(pattern, SMALL)
    assert [round(e.gsd, 9) for e in a.evidence] == [round(e.gsd, 9) for e in b.evidence]
    if a.evidence:
        kth = round(a.evidence[-1].gsd, 9)
        assert {canon(e) for e in a.evidence if round(e.gsd, 9) < kth} == {
            canon(e) for e in b.evidence if round(e.gsd, 9) < kth}
        tied = {c for g, c in ranked(a_all) if g == kth}
        assert {canon(e) for e in a.evidence if round(e.gsd, 9) == kth} <= tied
    assert (a.answer_set is None) == (b.answer_set is None)
    if a.answer_set is not None and b.answer_set is not None:
        assert set(a.answer_set.names()) == set(b.answer_set.names())
        assert round(a.answer_set.best_gsd, 9) == round(b.answer_set.best_gsd, 9)
    return True


def draw_pattern(data: st.DataObject) -> Pattern:
    known = st.sampled_from(QUERY_NAMES)
    rel = st.sampled_from(QUERY_RELATIONS)
    shape = data.draw(st.sampled_from(["edge", "edge_known", "path", "star"]))
    a = data.draw(known)
    if shape == "edge":
        triples = [[a, data.draw(rel), "UNKNOWN thing 1"]]
    elif shape == "edge_known":
        triples = [[a, data.draw(rel), data.draw(known.filter(lambda x: x != a))]]
    elif shape == "path":
        triples = [[a, data.draw(rel), "UNKNOWN thing 1"], ["UNKNOWN thing 1", data.draw(rel), "UNKNOWN thing 2"]]
    else:
        triples = [["UNKNOWN thing 1", data.draw(rel), a],
                   ["UNKNOWN thing 1", data.draw(rel), data.draw(known.filter(lambda x: x != a))]]
    return Pattern.from_triples(triples)


@pytest.mark.parametrize("kind", ["exact", "faiss-hnsw"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(base=st.lists(triple, min_size=3, max_size=25), data=st.data())
def test_updated_index_retrieves_what_a_rebuild_retrieves(kind: str, base: list[Triple3],
                                                          data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(write_kg(root / "base.txt", base), root / "kb.idx", kind, EMBEDDER)
        current = set(base)
        for step in range(data.draw(st.integers(1, 4))):
            removed = data.draw(st.lists(st.sampled_from(sorted(current)), max_size=len(current)))
            added = data.draw(st.lists(added_triple, max_size=8))
            if not (current - set(removed)) | set(added):
                continue
            as_files = data.draw(st.booleans())  # files in the KG format, or Python lists
            update_index_dir(root / "kb.idx",
                             add=(write_kg(root / f"add{step}.txt", added) if added else None) if as_files else added,
                             remove=(write_kg(root / f"rm{step}.txt", removed) if removed else None) if as_files
                             else removed, show_progress=False)
            current = (current - set(removed)) | set(added)
        final = sorted(current)
        order = data.draw(st.permutations(final))  # a rebuild from the final triples in any order
        rebuilt = build(write_kg(root / "final.txt", list(order)), root / "rebuilt.idx", kind, EMBEDDER)
        updated = open_index_dir(root / "kb.idx")
        assert verify_index(updated).ok
        assert {updated.store.triple(i).as_tuple() for i in range(updated.store.num_triples)} == set(final)
        assert updated.entity_index.ntotal == rebuilt.entity_index.ntotal == rebuilt.store.num_entities
        assert sorted(updated.relation_texts) == sorted(rebuilt.relation_texts)
        for _ in range(4):
            assert_same_retrieval(updated, rebuilt, draw_pattern(data))


def test_typed_matching_does_not_depend_on_how_an_index_numbered_its_relations(tmp_path: Path) -> None:
    """Found by the property test above: with hash:16, "written by" is as near ``produced_by`` as another relation;
    typed matching took the first by relation id, and an updated index (``produced_by`` added last) numbers its
    relations unlike a rebuild, so the two kept different node pairs apart and retrieved different matches."""
    base = [("inception", "directed_by", "inception"), ("inception", "directed_by", "memento"),
            ("inception", "directed_by", "titanic"), ("inception", "starred_actors", "inception"),
            ("inception", "starred_actors", "memento"), ("inception", "in_language", "inception"),
            ("memento", "directed_by", "inception")]
    build(write_kg(tmp_path / "base.txt", base), tmp_path / "kb.idx", "exact", EMBEDDER)
    update_index_dir(tmp_path / "kb.idx", add=[], remove=[("inception", "directed_by", "inception")],
                     show_progress=False)
    update_index_dir(tmp_path / "kb.idx", add=[("inception", "produced_by", "inception")], remove=[],
                     show_progress=False)
    final = [("inception", "directed_by", "memento"), ("inception", "directed_by", "titanic"),  # the rebuild's order
             ("inception", "produced_by", "inception"), ("inception", "starred_actors", "inception"),
             ("memento", "directed_by", "inception"), ("inception", "in_language", "inception"),
             ("inception", "starred_actors", "memento")]
    rebuilt = build(write_kg(tmp_path / "final.txt", final), tmp_path / "rebuilt.idx", "exact", EMBEDDER)
    updated = open_index_dir(tmp_path / "kb.idx")
    assert updated.relation_texts != rebuilt.relation_texts  # numbered differently
    pattern = Pattern.from_triples([["inception", "written by", "UNKNOWN thing 1"],
                                    ["UNKNOWN thing 1", "has genre", "UNKNOWN thing 2"]])
    assert assert_same_retrieval(updated, rebuilt, pattern)


def test_live_entity_index_is_the_index_of_the_live_vectors() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    full = ExactIndex(16)
    full.add(vectors)
    retired = rng.choice(300, size=120, replace=False)
    live = np.setdiff1d(np.arange(300), retired)
    fresh = ExactIndex(16)
    fresh.add(vectors[live])
    view = LiveEntityIndex(full, retired)
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    for k in (1, 5, 50, 180, 250):
        d, i = view.search(queries, k)
        fd, fi = fresh.search(queries, k)
        assert np.array_equal(i, np.where(fi >= 0, live[np.maximum(fi, 0)], -1))
        assert np.allclose(d, fd)
    assert view.ntotal == 180
    with pytest.raises(Exception, match="read-only"):
        view.add(vectors[:1])


# ---------------------------------------------------------------------------------------------- kinds, files
@pytest.mark.parametrize("kind", ["exact", "faiss-hnsw", "faiss-ivfpq"])
def test_each_supported_kind_takes_new_entities(tmp_path: Path, kind: str) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", kind)
    before = json.loads((tmp_path / "kb.idx" / "manifest.json").read_text())
    result = update_index_dir(tmp_path / "kb.idx", add=[("Dunkirk", "directed_by", "Christopher Nolan"),
                                                        ("Dunkirk", "release_year", "2017")], show_progress=False)
    assert (result.report.triples_added, result.report.entities_added, result.updates) == (2, 2, 1)
    index = open_index_dir(tmp_path / "kb.idx")
    n = before["kg"]["entities"] + 2
    assert index.entity_index.kind == kind and index.entity_index.ntotal == index.store.num_entities == n
    found = SubgraphRetriever(index).retrieve([["Dunkirk", "directed by", "UNKNOWN director 1"]])
    assert found.evidence[0].edges[0].triple.as_tuple() == ("Dunkirk", "directed_by", "Christopher Nolan")
    report = verify_index(tmp_path / "kb.idx")
    assert report.ok, report.problems
    manifest = index.manifest
    assert manifest["kg"]["triples"] == len(TOY_TRIPLES) + 2 and manifest["kg"]["entities"] == n
    assert manifest["kg"]["content_hash"] == index.store.content_hash() != before["kg"]["content_hash"]
    assert manifest["updates"]["count"] == 1 and manifest["updates"]["log"][0]["triples_added"] == 2
    assert manifest["build_key"] != before["build_key"]
    assert not work_dir(tmp_path / "kb.idx").exists()


def test_unchanged_files_are_shared_and_old_readers_keep_working(tmp_path: Path) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact")
    old = open_index_dir(tmp_path / "kb.idx", mmap=True)
    rel_inode = (tmp_path / "kb.idx" / "relation_owner.npy").stat().st_ino
    update_index_dir(tmp_path / "kb.idx", add=[("Heat", "directed_by", "Michael Mann")], show_progress=False)
    assert (tmp_path / "kb.idx" / "relation_owner.npy").stat().st_ino == rel_inode  # a hard link, not a copy
    assert old.store.num_triples == len(TOY_TRIPLES)  # the old version's memory maps still read
    assert SubgraphRetriever(old).retrieve([["Titanic", "directed by", "UNKNOWN director 1"]]).evidence


def test_removals_retire_entities_and_relations(tmp_path: Path) -> None:
    n = build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact").store.num_entities
    juno = [t for t in TOY_TRIPLES if "Juno" in t]
    result = update_index_dir(tmp_path / "kb.idx", remove=juno, show_progress=False)
    assert result.report.entities_retired == 3 and result.report.relations_dropped == 1  # in_language
    index = open_index_dir(tmp_path / "kb.idx")
    assert isinstance(index.entity_index, LiveEntityIndex) and index.entity_index.ntotal == n - 3
    assert index.manifest["kg"]["retired_entities"] == 3 and "in language" not in index.relation_texts
    found = SubgraphRetriever(index).retrieve([["Juno", "directed by", "UNKNOWN director 1"]])
    assert all(e.triple.head != "Juno" for ev in found.evidence for e in ev.edges)
    assert verify_index(index).ok
    update_index_dir(tmp_path / "kb.idx", add=juno, show_progress=False)  # back, same ids, nothing embedded
    again = open_index_dir(tmp_path / "kb.idx")
    assert again.store.num_entities == n and not isinstance(again.entity_index, LiveEntityIndex)


def test_relation_aliases_survive_an_update(tmp_path: Path) -> None:
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text("directed_by: [film director, who made]\n")
    build_index_dir(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", embedder="hash:64",
                    relation_aliases=aliases, show_progress=False)
    update_index_dir(tmp_path / "kb.idx", add=[("Heat", "produced_by", "Art Linson")], show_progress=False)
    index = open_index_dir(tmp_path / "kb.idx")
    assert {"film director", "who made", "produced by"} <= set(index.relation_texts)


def test_nothing_to_change_writes_no_version(tmp_path: Path) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact")
    mtime = (tmp_path / "kb.idx" / "manifest.json").stat().st_mtime_ns
    result = update_index_dir(tmp_path / "kb.idx", add=list(TOY_TRIPLES[:2]), remove=[("No", "such", "triple")],
                              show_progress=False)
    assert not result.report.changed and result.report.already_present == 2 and result.report.not_found == 1
    assert result.updates == 0 and (tmp_path / "kb.idx" / "manifest.json").stat().st_mtime_ns == mtime


def test_bad_input_is_refused_and_the_index_is_unchanged(tmp_path: Path) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact")
    before = open_index_dir(tmp_path / "kb.idx").manifest["kg"]["content_hash"]
    bad = tmp_path / "bad.txt"
    bad.write_text("Heat|directed_by|Michael Mann\nthis line has no separators\n")
    with pytest.raises(KGFormatError, match=r"bad\.txt:2"):
        update_index_dir(tmp_path / "kb.idx", add=bad, format="pipe", show_progress=False)
    with pytest.raises(KGError, match=r"add\[1\]: expected \(head, relation, tail\)"):
        update_index_dir(tmp_path / "kb.idx", add=[("a", "b", "c"), ("only", "two")], show_progress=False)
    with pytest.raises(KGError, match="remove every triple"):
        update_index_dir(tmp_path / "kb.idx", remove=list(TOY_TRIPLES), show_progress=False)
    with pytest.raises(IndexDirError, match="embedder"):
        update_index_dir(tmp_path / "kb.idx", add=[("Heat", "directed_by", "Mann")], embedder="hash:32",
                         show_progress=False)
    assert open_index_dir(tmp_path / "kb.idx").manifest["kg"]["content_hash"] == before
    assert "updates" not in open_index_dir(tmp_path / "kb.idx").manifest


def test_a_corrupt_store_is_not_carried_into_a_new_version(tmp_path: Path) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact")
    tails = tmp_path / "kb.idx" / "store" / "tails.npy"
    arr = np.load(tails)
    arr[0] = arr[1] if arr[0] != arr[1] else arr[2]
    os.unlink(tails)
    np.save(tails, arr)
    with pytest.raises((KGError, IndexDirError), match=r"content hash|does not join|adjacency"):
        update_index_dir(tmp_path / "kb.idx", add=[("Heat", "directed_by", "Mann")], show_progress=False)


def test_milvus_indexes_are_refused(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "milvus")
    with pytest.raises(IndexDirError, match="exact, faiss-hnsw, faiss-ivfpq, not 'milvus'"):
        update_index_dir(tmp_path / "kb.idx", add=[("Heat", "directed_by", "Mann")], show_progress=False)


def test_concurrent_updates_take_turns(tmp_path: Path) -> None:
    build(write_toy_kg(tmp_path / "toy.txt"), tmp_path / "kb.idx", "exact")
    run_in_threads(lambda i: update_index_dir(tmp_path / "kb.idx", add=[(f"Film {i}", "directed_by", f"Person {i}")],
                                              show_progress=False), 4)
    index = open_index_dir(tmp_path / "kb.idx")
    assert index.manifest["updates"]["count"] == 4 and index.store.num_triples == len(TOY_TRIPLES) + 4
    assert verify_index(index).ok


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_update(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(write_toy_kg(tmp_path / "toy.txt")), "-o", str(tmp_path / "kb.idx"),
                               "--embedder", "hash:64", "-q"]).exit_code == 0
    write_kg(tmp_path / "add.txt", [("Dunkirk", "directed_by", "Christopher Nolan")])
    write_kg(tmp_path / "add2.txt", [("Heat", "directed_by", "Michael Mann")])
    write_kg(tmp_path / "rm.txt", [("Avatar", "release_year", "2009")])
    result = runner.invoke(app, ["update", str(tmp_path / "kb.idx"), "--add", str(tmp_path / "add.txt"),
                                 "--add", str(tmp_path / "add2.txt"), "--remove", str(tmp_path / "rm.txt"), "-q"])
    assert result.exit_code == 0, result.output
    assert "update 1" in result.output and "+2 triples" in result.output and "-1 (0 not found)" in result.output
    result = runner.invoke(app, ["update", str(tmp_path / "kb.idx"), "--remove", str(tmp_path / "rm.txt"),
                                 "--json", "-q"])
    assert result.exit_code == 0 and json.loads(result.output)["not_found"] == 1
    assert runner.invoke(app, ["check", str(tmp_path / "kb.idx")]).exit_code == 0
    (tmp_path / "bad.txt").write_text("A|b|c\nbroken line\n")
    result = runner.invoke(app, ["update", str(tmp_path / "kb.idx"), "--add", str(tmp_path / "bad.txt"),
                                 "--format", "pipe", "-q"])
    assert result.exit_code == 2 and "bad.txt:2" in result.output
    result = runner.invoke(app, ["update", str(tmp_path / "kb.idx"), "-q"])
    assert result.exit_code == 2 and "--add FILE" in result.output
    result = runner.invoke(app, ["retrieve", str(tmp_path / "kb.idx"), "--pattern",
                                 '[["Heat", "directed by", "UNKNOWN director 1"]]', "-q"])
    assert result.exit_code == 0 and "Michael Mann" in result.output


# ---------------------------------------------------------------------------------------------- compaction
@pytest.mark.parametrize("kind", ["exact", "faiss-hnsw", "faiss-ivfpq"])
def test_compaction_drops_retired_entities_and_keeps_retrieval(tmp_path: Path, kind: str) -> None:
    base = [("inception", "directed_by", "nolan"), ("memento", "directed_by", "nolan"),
            ("titanic", "directed_by", "cameron"), ("avatar", "directed_by", "cameron"),
            ("juno", "directed_by", "reitman"), ("juno", "starred_actors", "page"),
            ("inception", "starred_actors", "page"), ("titanic", "starred_actors", "dicaprio")]
    build(write_kg(tmp_path / "kb.txt", base), tmp_path / "kb.idx", kind, EMBEDDER)
    removed = [t for t in base if "juno" in t or "titanic" in t]
    update_index_dir(tmp_path / "kb.idx", remove=removed, show_progress=False)
    result = compact_index_dir(tmp_path / "kb.idx", show_progress=False)
    assert result.report.entities_dropped == 4 and result.updates == 2  # juno, reitman, titanic, dicaprio
    index = open_index_dir(tmp_path / "kb.idx")
    assert index.store.num_entities == 6 and len(index.store.retired_entities()) == 0
    assert not isinstance(index.entity_index, LiveEntityIndex) and index.entity_index.ntotal == 6
    assert verify_index(index).ok
    final = [t for t in base if t not in removed]
    rebuilt = build(write_kg(tmp_path / "final.txt", final), tmp_path / "rebuilt.idx", kind, EMBEDDER)
    if kind != "faiss-ivfpq":  # IVF-PQ is approximate on both sides
        for triples in ([["nolen", "directed by", "UNKNOWN movie 1"]], [["UNKNOWN movie 1", "actor", "page"]],
                        [["inception", "director", "UNKNOWN person 1"], ["UNKNOWN movie 2", "director",
                                                                         "UNKNOWN person 1"]]):
            assert_same_retrieval(index, rebuilt, Pattern.from_triples(triples))
    assert not compact_index_dir(tmp_path / "kb.idx", show_progress=False).report.changed  # nothing left
    update_index_dir(tmp_path / "kb.idx", add=[("juno", "directed_by", "reitman")], show_progress=False)
    assert open_index_dir(tmp_path / "kb.idx").store.entity_id("juno") == 6  # a new id after compaction


def test_cli_compact(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(write_toy_kg(tmp_path / "toy.txt")), "-o", str(tmp_path / "kb.idx"),
                               "--embedder", "hash:64", "-q"]).exit_code == 0
    write_kg(tmp_path / "rm.txt", [t for t in TOY_TRIPLES if "Juno" in t])
    result = runner.invoke(app, ["update", str(tmp_path / "kb.idx"), "--remove", str(tmp_path / "rm.txt"),
                                 "--compact", "-q"])
    assert result.exit_code == 0, result.output
    assert "3 retired" in result.output and "3 retired entities dropped" in result.output
    assert runner.invoke(app, ["check", str(tmp_path / "kb.idx")]).exit_code == 0
