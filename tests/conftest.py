"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import settings

from simgrag.errors import ModelError
from simgrag.index.directory import build_index_dir
from simgrag.llm.llamacpp import llama_cpp_available
from simgrag.llm.models import pull_default_model
from simgrag.testing.embedders import HashEmbedder
from simgrag.testing.rdf import write_rdf
from simgrag.testing.toy import TOY_TRIPLES, write_toy_kg

# Property tests draw new examples on every local run (and keep the failures they find in .hypothesis/); CI
# (.ci/run sets SIMGRAG_HYPOTHESIS_PROFILE=ci) draws a fixed sequence, so a red CI is the change under test, not a
# lucky draw of an old bug. A failure prints its reproduction blob either way.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("SIMGRAG_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def embedded_model() -> Path:
    """The embedded LLM's GGUF file (pulled on first use); the test is skipped when llama-cpp-python is not
    installed or the model cannot be obtained."""
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed (make install builds it)")
    try:
        return pull_default_model(show_progress=False)
    except ModelError as exc:
        pytest.skip(f"embedded model unavailable: {exc}")


def _assert_drawn_png(path: Path) -> None:
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG" and image.width >= 300 and image.height >= 200
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 8, "the image is blank"


@pytest.fixture
def assert_drawn_png() -> Callable[[Path], None]:
    """Checks a real plot: the file decodes as a PNG of reasonable size with more than a few colours drawn."""
    return _assert_drawn_png


@pytest.fixture(scope="module")
def toy_rdf_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy KG as Turtle (so the evidence has IRIs), indexed with the hash embedder."""
    root = tmp_path_factory.mktemp("toy-rdf")
    write_rdf(TOY_TRIPLES, root / "toy.ttl", "turtle")
    build_index_dir(root / "toy.ttl", root / "toy.idx", embedder=HashEmbedder(dim=64), show_progress=False)
    return root / "toy.idx"


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy movie KG indexed with the 64-dimensional hash embedder (one per test module)."""
    root = tmp_path_factory.mktemp("toy")
    build_index_dir(write_toy_kg(root / "toy.txt"), root / "toy.idx", embedder=HashEmbedder(dim=64))
    return root / "toy.idx"


# people have a place of birth and a nationality; a place has no nationality, only the nation it is in (the channel's
# skipped and reasked readings)
PEOPLE = [("Ada", "place_of_birth", "Lindon"), ("Ada", "nationality", "Brennish"), ("Cy", "children", "Bo"),
          ("Bo", "place_of_birth", "Marrow"), ("Bo", "nationality", "Velmaran"), ("Cy", "place_of_birth", "Lindon"),
          ("Cy", "nationality", "Norvish"), ("Lindon", "in_nation", "Brennland")]
PEOPLE_EXAMPLES = """\
name: people
examples:
  - question: What is the nationality of Cy?
    triples:
      - [Cy, nationality, UNKNOWN nationality 1]
  - question: Where was Cy born?
    triples:
      - [Cy, place_of_birth, UNKNOWN place 1]
"""


def small_kg(root: Path, triples: Sequence[tuple[str, str, str]], examples: str) -> Path:
    """``triples`` indexed at ``root / "kg.idx"`` with the 64-dimensional hash embedder and the ``examples`` file
    (``examples.yaml`` beside it); ``root``."""
    (root / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    (root / "examples.yaml").write_text(examples, encoding="utf-8")
    build_index_dir(root / "kg.tsv", root / "kg.idx", embedder=HashEmbedder(dim=64), show_progress=False,
                    examples=root / "examples.yaml")
    return root


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small people KG (:data:`PEOPLE`) indexed with the 64-dimensional hash embedder and two examples
    (``examples.yaml`` beside ``kg.idx``)."""
    return small_kg(tmp_path_factory.mktemp("people"), PEOPLE, PEOPLE_EXAMPLES)
