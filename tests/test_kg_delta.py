"""Store deltas (simgrag.kg.delta): after any add/remove batches the store holds exactly the expected
triples, its arrays equal what KGStore.from_ids builds from the same ids, entity ids never move, and
entities, relations, types and IRIs follow the documented rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simgrag.errors import KGError
from simgrag.kg.delta import apply_delta
from simgrag.kg.loader import load_kg
from simgrag.kg.store import KGStore

ENTITIES = [f"e{i}" for i in range(12)]
RELATIONS = ["directed_by", "starred_actors", "written_by", "has_genre"]
ARRAYS = ("heads", "rels", "tails", "indptr", "adj_nbr", "adj_rel", "adj_tid")

triple = st.tuples(st.sampled_from(ENTITIES), st.sampled_from(RELATIONS), st.sampled_from(ENTITIES))


def triples_of(store: KGStore) -> set[tuple[str, str, str]]:
    return {store.triple(i).as_tuple() for i in range(store.num_triples)}


def live_names(store: KGStore) -> set[str]:
    return {store.entities[i] for i in range(store.num_entities) if store.degree(i) > 0}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(triple, min_size=1, max_size=30), st.data())
def test_batches_give_the_expected_store(base_triples: list[tuple[str, str, str]], data: st.DataObject) -> None:
    store = KGStore.from_triples(base_triples)
    current = set(base_triples)
    for _ in range(data.draw(st.integers(1, 4))):
        removed = data.draw(st.lists(st.sampled_from(sorted(current)), max_size=len(current))) if current else []
        removed += data.draw(st.lists(triple, max_size=3))  # some not in the KG
        added = data.draw(st.lists(triple, max_size=8))
        final = (current - set(removed)) | set(added)
        if not final:
            with pytest.raises(KGError, match="remove every triple"):
                apply_delta(store, add=KGStore.from_triples(added) if added else None,
                            remove=KGStore.from_triples(removed) if removed else None)
            continue
        before = [store.entities[i] for i in range(store.num_entities)]
        delta = apply_delta(store, add=KGStore.from_triples(added) if added else None,
                            remove=KGStore.from_triples(removed) if removed else None)
        new = delta.store
        assert triples_of(new) == final
        assert live_names(new) == {x for h, _, t in final for x in (h, t)}
        assert set(new.relations) == {r for _, r, _ in final}  # relations without triples are dropped
        assert [new.entities[i] for i in range(len(before))] == before  # ids never move
        assert delta.first_new_entity == len(before)
        reference = KGStore.from_ids(new.entities, new.relations, new.heads, new.rels, new.tails)
        for name in ARRAYS:  # the linear-time merge builds exactly the sorted arrays and CSR
            assert np.array_equal(getattr(new, name), getattr(reference, name)), name
            assert getattr(new, name).dtype == getattr(reference, name).dtype, name
        report = delta.report
        assert report.triples_removed == len(current & set(removed))
        assert report.not_found == len(set(removed) - current)
        assert report.triples_added == len(final - (current - set(removed)))
        retired = {n for n in before if n in live_names(store)} - live_names(new)
        assert report.entities_retired == len(retired)
        store, current = new, final


def test_retired_entities_keep_their_id_and_come_back() -> None:
    store = KGStore.from_triples([("Inception", "directed_by", "Christopher Nolan"), ("Juno", "directed_by", "Jason")])
    gone = apply_delta(store, remove=KGStore.from_triples([("Inception", "directed_by", "Christopher Nolan")]))
    s = gone.store
    assert gone.report.entities_retired == 2 and s.num_entities == 4
    assert s.entity_id("Inception") is None and s.entities.id_of("Inception") == 0  # kept, but not found
    assert sorted(s.retired_entities().tolist()) == [0, 1]
    back = apply_delta(s, add=KGStore.from_triples([("Inception", "written_by", "Christopher Nolan")]))
    assert back.report.entities_revived == 2 and back.report.entities_added == 0
    assert back.store.entity_id("Inception") == 0 and len(back.store.retired_entities()) == 0
    assert back.store.num_entities == 4 and back.first_new_entity == 4  # nothing to embed
    assert list(back.store.relations) == ["directed_by", "written_by"]


def test_remove_then_add_in_one_call_keeps_the_triple() -> None:
    t = ("Inception", "directed_by", "Christopher Nolan")
    store = KGStore.from_triples([t, ("Juno", "directed_by", "Jason")])
    delta = apply_delta(store, add=KGStore.from_triples([t]), remove=KGStore.from_triples([t]))
    assert triples_of(delta.store) == triples_of(store)
    assert (delta.report.triples_removed, delta.report.triples_added) == (1, 1)


def test_types_follow_their_entities() -> None:
    base = KGStore.from_triples([("Inception", "directed_by", "Nolan"), ("Juno", "directed_by", "Reitman")],
                                entity_types=[("Inception", "film"), ("Juno", "film"), ("Nolan", "person")])
    add = KGStore.from_triples([("Heat", "directed_by", "Mann")], entity_types=[("Heat", "film"), ("Mann", "director")])
    remove = KGStore.from_triples([("Juno", "directed_by", "Reitman"), ("Nolan", "directed_by", "Heat")],
                                  entity_types=[("Nolan", "person")])  # a type fact goes with a triple of its entity
    delta = apply_delta(base, add=add, remove=remove)
    s = delta.store
    assert delta.report.types_changed and delta.report.not_found == 1
    assert s.types is not None and list(s.types) == ["film", "director"]  # person: no live entity has it
    film = s.types.id_of("film")
    assert film is not None
    assert sorted(s.entities[int(v)] for v in s.nodes_of_type(film)) == ["Heat", "Inception"]  # Juno retired
    reference = KGStore.from_triples([("Inception", "directed_by", "Nolan"), ("Heat", "directed_by", "Mann")],
                                     entity_types=[("Inception", "film"), ("Heat", "film"), ("Mann", "director")])
    assert {(s.entities[int(e)], s.types[int(t)]) for e in range(s.num_entities) for t in s.types_of(e)} == {
        (reference.entities[int(e)], reference.types[int(t)])  # type: ignore[index]
        for e in range(reference.num_entities) for t in reference.types_of(e)}


def test_rdf_terms_match_by_iri(tmp_path: Path) -> None:
    ex = "http://ex.org/"
    label = "<http://www.w3.org/2000/01/rdf-schema#label>"
    (tmp_path / "base.nt").write_text(
        f'<{ex}inception> <{ex}director> <{ex}nolan> .\n<{ex}nolan> {label} "Christopher Nolan" .\n', encoding="utf-8")
    (tmp_path / "add.nt").write_text(
        f'<{ex}memento> <{ex}director> <{ex}nolan> .\n'
        f'<{ex}nolan> {label} "C. Nolan" .\n'  # an existing entity keeps its name
        f'<{ex}other> <{ex}director> <{ex}nolan2> .\n<{ex}nolan2> {label} "Christopher Nolan" .\n',
        encoding="utf-8")
    base, _ = load_kg(tmp_path / "base.nt")
    add, _ = load_kg(tmp_path / "add.nt")
    s = apply_delta(base, add=add).store
    nolan = s.entity_id("Christopher Nolan")
    assert nolan is not None and s.iris is not None and s.iris.entity(nolan) == f"{ex}nolan"
    assert s.degree(nolan) == 2  # inception and memento
    assert s.entity_id(f"{ex}nolan2") is not None  # same label, another IRI: named by its IRI
    assert s.iris.relation(0) == f"{ex}director" and s.num_relations == 1
    assert triples_of(s) == {("inception", "director", "Christopher Nolan"),
                             ("memento", "director", "Christopher Nolan"), ("other", "director", f"{ex}nolan2")}
