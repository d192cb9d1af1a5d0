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
from simgrag.index.lexical import NameTokenIndex, word_hashes
from simgrag.kg.names import NameTable
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
    assert list(word_hashes("Lang lang LANG")) == list(word_hashes("lang"))


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


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcAB é-,.", min_size=0, max_size=14), min_size=1, max_size=30, unique=True),
       st.text(alphabet="abcAB é-,.", max_size=14))
def test_lookup_equals_a_plain_python_reading(names: list[str], query: str) -> None:
    """Oracle: words are runs of letters/digits/non-ASCII, ASCII lower-cased, ≥ 3 UTF-8 bytes."""
    def words(text: str) -> set[str]:
        runs, run = [], ""
        for ch in text + " ":
            if ch.isascii() and not ch.isalnum():
                runs.append(run)
                run = ""
            else:
                run += ch.lower() if ch.isascii() else ch
        return {r for r in runs if len(r.encode("utf-8")) >= 3}

    table = NameTable.from_names(names)
    index = NameTokenIndex.build(table)
    qw = words(query)
    holders = {w: {n for n in names if w in words(n)} for w in qw}
    expected = {n for w, ns in holders.items() if len(ns) <= 2 for n in ns}
    expected |= {n for n in names if sum(n in ns for w, ns in holders.items() if len(ns) <= 5) >= 2}
    assert _names(index, table, query, max_postings=2, max_shared=5) == expected


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


def test_name_words_bring_back_what_the_approximate_index_missed(people: IndexDir) -> None:
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


def test_an_exact_index_is_left_alone(people: IndexDir, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = SubgraphRetriever(people)
    monkeypatch.setattr(retriever, "name_words", lambda: pytest.fail("exact indexes miss nothing"))
    pattern = Pattern.from_triples([("Alexander Lang", "born in", "UNKNOWN city 1")])
    assert len(retriever.candidates(pattern, RetrievalSettings(k_n=4)).nodes[0].ids) == 4


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
