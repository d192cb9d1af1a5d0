"""Name words (index/lexical.py): entities found by the words of their names join a named node's
candidates where an approximate vector index missed them, at their exact embedding distances."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simgrag.index.directory import IndexDir, build_index_dir
from simgrag.index.lexical import NameTokenIndex, _fnv, query_words
from simgrag.kg.names import NameTable
from simgrag.match import retrieve as retrieve_module
from simgrag.match.retrieve import RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern
from simgrag.testing import HashEmbedder


def _names(index: NameTokenIndex, table: NameTable, text: str, **kw: Any) -> set[str]:
    return {table[int(i)] for i in index.lookup(text, **kw)}


def test_words_are_case_blind_and_short_words_ignored() -> None:
    table = NameTable.from_names(["Alexander Lang (fictional character)", "Heat", "The Heat", "Lang", "of a",
                                  "Café Müller"])
    index = NameTokenIndex.build(table)
    assert _names(index, table, "alexander LANG") == {"Alexander Lang (fictional character)", "Lang"}
    assert _names(index, table, "HEAT, the") == {"Heat", "The Heat"}
    assert _names(index, table, "café") == {"Café Müller"}  # non-ASCII bytes are word characters
    assert _names(index, table, "of a") == set()  # words under 3 bytes
    assert _names(index, table, "") == set() and _names(index, table, "zzz") == set()
    assert _names(index, table, "\ud800 heat") == {"Heat", "The Heat"}  # a lone surrogate (JSON allows it)
    assert _names(index, table, "x" * 100_000 + " \x00 Café") == {"Café Müller"}
    assert list(_stored_words("Lang lang LANG")) == list(_stored_words("lang"))


def test_a_common_word_alone_adds_nothing_but_two_together_do() -> None:
    first = [f"Alexander {s}" for s in ("Bell", "Gray", "Hart", "Kent")]
    last = [f"{f} Lang" for f in ("Anna", "Boris", "Clara", "Dmitri")]
    table = NameTable.from_names([*first, *last, "Alexander Lang", "Alexander Max Lang", "Zebulon"])
    index = NameTokenIndex.build(table)
    assert _names(index, table, "Lang, Alexander", max_postings=2) == {"Alexander Lang", "Alexander Max Lang"}
    assert _names(index, table, "Alexander", max_postings=2) == set()  # one common word narrows nothing
    assert _names(index, table, "Alexander Zebulon", max_postings=2) == {"Zebulon"}  # a rare word alone does
    assert _names(index, table, "Lang Alexander", max_postings=2, max_shared=4) == set()  # both too common
    found = index.lookup("Lang Alexander", max_postings=2, limit=1)
    assert len(found) == 1 and table[int(found[0])] in {"Alexander Lang", "Alexander Max Lang"}


def test_typos_and_initials() -> None:
    table = NameTable.from_names(["Ledburg (town 30)", "Rudham Gallery (museum)", "Tate Gallery", "Dalton science",
                                  "Hartwald", "Caroline Underwood", "Tom Underwood", "Faith"])
    index = NameTokenIndex.build(table)
    assert _names(index, table, "Ldburg") == {"Ledburg (town 30)"}  # a byte dropped
    assert _names(index, table, "dalton sciehce") == {"Dalton science"}  # replaced
    assert _names(index, table, "east hatrwald") == {"Hartwald"}  # swapped
    assert _names(index, table, "faiith") == {"Faith"}  # inserted
    common = {"max_postings": 1}
    assert _names(index, table, "C. Underwood", **common) == {"Caroline Underwood"}  # the initial is a word
    assert _names(index, table, "r. gallery", **common) == {"Rudham Gallery (museum)"}
    assert _names(index, table, "gallery", **common) == set()
    assert _names(index, table, "Led") == set()  # too short to correct, and no name has "led"


_ALPHABET = "abcAB é-,."


def _oracle(names: list[str], query: str, max_postings: int, max_shared: int) -> set[str] | None:
    """A plain-Python reading of the lookup's contract (``None``: over the correction cap)."""
    def words(text: str) -> list[bytes]:
        out, run = [], b""
        for ch in text + " ":
            if ch.isascii() and not ch.isalnum():
                out.append(run)
                run = b""
            else:
                run += (ch.lower() if ch.isascii() else ch).encode("utf-8")
        return [w for w in out if w]

    def dels(w: bytes) -> set[bytes]:
        return {w[:i] + w[i + 1:] for i in range(len(w))}

    held = {n: {w for w in words(n) if len(w) >= 3} for n in names}
    vocab = set().union(*held.values())
    groups, initials = [], set()
    for w in dict.fromkeys(words(query)):
        if len(w) == 1 and w.isalpha():
            initials.add(w)
            continue
        if len(w) < 3:
            continue
        if w in vocab:
            alts = {w}
        elif 5 <= len(w) <= 32:
            alts = (dels(w) & vocab) | {v for v in vocab if 5 <= len(v) <= 32 and (w in dels(v) or dels(v) & dels(w))}
            if len(alts) > 16:
                return None
        else:
            alts = set()
        if not alts or sum(sum(a in h for h in held.values()) for a in alts) > max_shared:
            continue
        groups.append({n for n, h in held.items() if h & alts})
    pool = set().union(*groups) if groups else set()
    found = set()
    for n in pool:
        shared = sum(n in g for g in groups) + sum(any(w[:1] == i for w in words(n)) for i in initials)
        if shared >= 2 or any(n in g and len(g) <= max_postings for g in groups):
            found.add(n)
    return found


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(alphabet=_ALPHABET, min_size=0, max_size=14), min_size=1, max_size=30, unique=True),
       st.text(alphabet=_ALPHABET, max_size=14))
def test_lookup_equals_a_plain_python_reading(names: list[str], query: str) -> None:
    expected = _oracle(names, query, max_postings=2, max_shared=5)
    if expected is not None:
        table = NameTable.from_names(names)
        assert _names(NameTokenIndex.build(table), table, query, max_postings=2, max_shared=5) == expected


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=40))
def test_query_words_hash_as_the_names_do(text: str) -> None:
    assert sorted({_fnv(w) for w in query_words(text) if len(w) >= 3}) == _stored_words(text).tolist()


def _stored_words(name: str) -> np.ndarray:
    """The word hashes the index stores for a KG holding the one name ``name``."""
    return NameTokenIndex.build(NameTable.from_names([name])).words


# ---------------------------------------------------------------- in the retriever
class _Forgetful:
    """An "approximate" index: the exact one, except that it never returns ``hidden`` (an ANN miss)."""

    def __init__(self, inner: Any, hidden: int) -> None:
        self.inner, self.hidden = inner, hidden
        self.kind, self.dim = "forgetful", inner.dim

    @property
    def ntotal(self) -> int:
        return int(self.inner.ntotal)

    @property
    def params(self) -> dict[str, Any]:
        return {}

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        d, i = self.inner.search(queries, k + 1)
        out_d, out_i = np.full((len(queries), k), np.inf, np.float32), np.full((len(queries), k), -1, np.int64)
        for row in range(len(queries)):
            keep = i[row] != self.hidden
            out_d[row], out_i[row] = d[row][keep][:k], i[row][keep][:k]
        return out_d, out_i


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    rng = random.Random(0)
    firsts = ["Alexander", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo"]
    lasts = ["Lang", "Moreau", "Novak", "Okafor", "Petrov", "Quist", "Rossi", "Sato"]
    names = sorted({f"{rng.choice(firsts)} {rng.choice(lasts)} ({job})" for job in ("chess player", "painter", "pilot")
                    for _ in range(12)})
    lines = [f"{n}|born in|City {i % 5}" for i, n in enumerate(names)]
    kg = tmp_path_factory.mktemp("people") / "kg.txt"
    kg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return build_index_dir(kg, kg.parent / "kg.idx", embedder=HashEmbedder(dim=32))


@pytest.fixture(autouse=True)
def _any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These KGs are small; name words are looked up from 100K entities on."""
    monkeypatch.setattr(retrieve_module, "NAME_WORDS_MIN_ENTITIES", 0)


def test_name_words_bring_back_what_the_approximate_index_missed(people: IndexDir,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieve_module, "NAME_WORDS_KEPT", 0)  # only those nearer than the k_n-th: next test
    store = people.store
    target = next(i for i in range(store.num_entities) if store.entities[i].startswith("Alexander"))
    text = store.entities[target].split(" (")[0]  # "Alexander Lang", not the full name: no exact-name shortcut
    forgetful = dataclasses.replace(people, entity_index=_Forgetful(people.entity_index, target))
    pattern = Pattern.from_triples([(text, "born in", "UNKNOWN city 1")])
    exact = SubgraphRetriever(people).candidates(pattern, RetrievalSettings(k_n=8)).nodes[0]
    assert target in exact.ids  # the exact index has it among the 8 nearest
    off = SubgraphRetriever(forgetful).candidates(pattern, RetrievalSettings(k_n=8, name_words=False)).nodes[0]
    on = SubgraphRetriever(forgetful).candidates(pattern, RetrievalSettings(k_n=8)).nodes[0]
    assert target not in off.ids
    assert target in on.ids and len(on.ids) == len(exact.ids) == 8
    # the same 8 nearest as the exact index, at the same distances
    assert dict(zip(on.ids.tolist(), on.dists.round(5).tolist(), strict=True)) == \
        dict(zip(exact.ids.tolist(), exact.dists.round(5).tolist(), strict=True))


def test_the_nearest_name_word_candidates_join_however_far(people: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    store = people.store
    approximate = dataclasses.replace(people, entity_index=_Forgetful(people.entity_index, -1))  # not "exact"
    pattern = Pattern.from_triples([("Alexander Lang", "born in", "UNKNOWN city 1")])
    exact = SubgraphRetriever(people).candidates(pattern, RetrievalSettings(k_n=store.num_entities)).nodes[0]
    true_distance = dict(zip(exact.ids.tolist(), exact.dists.tolist(), strict=True))
    vector = SubgraphRetriever(approximate).candidates(pattern, RetrievalSettings(k_n=2, name_words=False)).nodes[0]
    # the name-word candidates beyond the vector index's 2 nearest, nearest first
    words = NameTokenIndex.build(store.entities).lookup("Alexander Lang").tolist()
    beyond = sorted((i for i in words if i not in vector.ids), key=lambda i: (true_distance[i], i))
    assert len(beyond) >= 4 and true_distance[beyond[0]] > float(vector.dists.max())  # all farther than both
    for kept in (0, 1, 3):
        monkeypatch.setattr(retrieve_module, "NAME_WORDS_KEPT", kept)
        on = SubgraphRetriever(approximate).candidates(pattern, RetrievalSettings(k_n=2)).nodes[0]
        got = dict(zip(on.ids.tolist(), on.dists.tolist(), strict=True))
        assert set(got) == set(vector.ids.tolist()) | set(beyond[:kept])
        assert all(abs(got[i] - true_distance[i]) < 1e-5 for i in got)  # each at its own embedding distance


class _Farthest(_Forgetful):
    """An "approximate" index that returns the ``k`` *farthest* vectors: every name-word candidate is nearer."""

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        d, i = self.inner.search(queries, self.inner.ntotal)
        return d[:, ::-1][:, :k].copy(), i[:, ::-1][:, :k].copy()


def test_the_nearest_name_word_candidates_stay_when_the_k_n_cut_drops_them(people: IndexDir,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Name-word candidates nearer than the vector index's last enter, and the k_n cut then keeps the k_n
    nearest of all; the NAME_WORDS_KEPT nearest name-word ones are in even when that cut dropped them."""
    store = people.store
    far = dataclasses.replace(people, entity_index=_Farthest(people.entity_index, -1))
    pattern = Pattern.from_triples([("Alexander Lang", "born in", "UNKNOWN city 1")])
    exact = SubgraphRetriever(people).candidates(pattern, RetrievalSettings(k_n=store.num_entities)).nodes[0]
    true_distance = dict(zip(exact.ids.tolist(), exact.dists.tolist(), strict=True))
    words = NameTokenIndex.build(store.entities).lookup("Alexander Lang").tolist()
    vector = SubgraphRetriever(far).candidates(pattern, RetrievalSettings(k_n=2, name_words=False)).nodes[0]
    beyond = sorted((i for i in words if i not in vector.ids), key=lambda i: (true_distance[i], i))
    assert len(beyond) >= 4 and true_distance[beyond[3]] < float(vector.dists.min())  # all nearer: all enter
    monkeypatch.setattr(retrieve_module, "NAME_WORDS_KEPT", 3)
    on = SubgraphRetriever(far).candidates(pattern, RetrievalSettings(k_n=2)).nodes[0]
    assert set(on.ids.tolist()) == set(beyond[:3])  # the cut keeps 2 of them, the third comes back
    assert all(abs(d - true_distance[i]) < 1e-5 for i, d in zip(on.ids.tolist(), on.dists.tolist(), strict=True))


def test_exact_indexes_and_small_kgs_are_left_alone(people: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    pattern = Pattern.from_triples([("Alexander Lang", "born in", "UNKNOWN city 1")])
    exact = SubgraphRetriever(people)
    monkeypatch.setattr(exact, "name_words", lambda: pytest.fail("exact indexes miss nothing"))
    assert len(exact.candidates(pattern, RetrievalSettings(k_n=4)).nodes[0].ids) == 4
    monkeypatch.setattr(retrieve_module, "NAME_WORDS_MIN_ENTITIES", people.store.num_entities)
    small = SubgraphRetriever(dataclasses.replace(people, entity_index=_Forgetful(people.entity_index, 0)))
    monkeypatch.setattr(small, "name_words", lambda: pytest.fail("not looked up for a KG this small"))
    assert len(small.candidates(pattern, RetrievalSettings(k_n=4)).nodes[0].ids) == 4


def test_retired_entities_are_not_brought_back(people: IndexDir, tmp_path: Path) -> None:
    """A name-word entity without triples (retired by a live update) never becomes a candidate."""
    store = people.store
    target = next(i for i in range(store.num_entities) if store.entities[i].startswith("Boris"))
    indptr = np.array(store.indptr).copy()
    lo, hi = indptr[target], indptr[target + 1]
    indptr[target + 1:] -= hi - lo  # the target's adjacency emptied (the rest is not looked at here)
    retired = dataclasses.replace(people, store=_with_indptr(store, indptr),
                                  entity_index=_Forgetful(people.entity_index, target))
    pattern = Pattern.from_triples([(store.entities[target].split(" (")[0], "born in", "UNKNOWN city 1")])
    found = SubgraphRetriever(retired).candidates(pattern, RetrievalSettings(k_n=8)).nodes[0]
    assert target not in found.ids


def _with_indptr(store: Any, indptr: np.ndarray) -> Any:
    clone = object.__new__(type(store))
    clone.__dict__.update(store.__dict__)
    clone.indptr = indptr
    return clone


def test_compile_kernels_runs_every_name_look_up_kernel() -> None:
    from simgrag.index import lexical

    lexical.compile_kernels()
    kernels = (lexical._is_word_byte, lexical._mix, lexical._scan, lexical._locate, lexical._deleted_byte_hashes,
               lexical._initials_held)
    assert all(kernel.signatures for kernel in kernels)  # compiled (or loaded from numba's cache) for real types
