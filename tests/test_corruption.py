"""The 32 index corruptions of simgrag.testing.corrupt: each is refused when the index is opened (a
typed error) or served exactly as the intact index would; none crashes or answers differently.
``benchmarks/corrupt_index.py`` runs the same catalogue on a real index, one process per case."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.testing.corrupt import CORRUPTIONS, classify, copy_index, probe, probe_patterns
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.toy import write_toy_kg

EMBEDDER = HashEmbedder(dim=32)


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[list[str]]], dict[str, object]]:
    root = tmp_path_factory.mktemp("corrupt")
    built = build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=EMBEDDER)
    patterns = probe_patterns(built, n=8)
    reference = probe(root / "toy.idx", patterns, embedder=EMBEDDER)
    assert reference["stage"] == "done" and all(reference["answers"]), reference  # type: ignore[arg-type]
    return root / "toy.idx", patterns, reference


def test_there_are_32_corruptions_in_four_groups() -> None:
    assert len(CORRUPTIONS) == 32 and len({c.name for c in CORRUPTIONS}) == 32
    assert {c.group for c in CORRUPTIONS} == {"store", "names", "vectors", "manifest"}


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=[c.name for c in CORRUPTIONS])
def test_corruption_is_refused_or_served_correctly(intact: tuple[Path, list[list[list[str]]], dict[str, object]],
                                                   corruption: object, tmp_path: Path) -> None:
    src, patterns, reference = intact
    damaged = tmp_path / "damaged.idx"
    copy_index(src, damaged, corruption.file)  # type: ignore[attr-defined]
    before = (damaged / corruption.file).read_bytes()  # type: ignore[attr-defined]
    corruption.apply(damaged, random.Random(0))  # type: ignore[attr-defined]
    assert (damaged / corruption.file).read_bytes() != before, "the corruption changed nothing"  # type: ignore[attr-defined]
    assert (src / corruption.file).read_bytes() == before, "the intact index was touched"  # type: ignore[attr-defined]
    result = probe(damaged, patterns, embedder=EMBEDDER)
    outcome = classify(result, reference)
    assert outcome in ("refused", "served"), (outcome, result)


def test_intact_copy_is_served_and_check_passes(intact: tuple[Path, list[list[list[str]]], dict[str, object]],
                                                tmp_path: Path) -> None:
    from simgrag.index.verify import verify_index

    src, patterns, reference = intact
    copy = tmp_path / "copy.idx"
    copy_index(src, copy, "")
    assert classify(probe(copy, patterns, embedder=EMBEDDER), reference) == "served"
    report = verify_index(copy, embedder=EMBEDDER)
    assert report.ok, report.problems
    assert open_index_dir(copy, embedder=EMBEDDER).manifest["files"]
