"""End to end with the REAL embedded models: bundled MiniLM embedder + Qwen2.5-Coder-1.5B (llama.cpp).

This is what `make demo` does, on the sample KG bundled in the package. Skipped (with the reason)
only when llama-cpp-python or the model file is unavailable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.llm]


@pytest.fixture(scope="module")
def engine(embedded_model: Path):  # type: ignore[no-untyped-def]
    from simgrag.pipeline import SimGRAG, sample_index

    return SimGRAG(sample_index(), llm="llamacpp", llm_options={"cache": False})


@pytest.mark.parametrize(
    ("question", "topic", "chain"),
    [
        ("Who directed Inception?", "Inception", "movie_to_director"),
        ("Which movies share a director with Titanic?", "Titanic", "movie_to_director_to_movie"),
        ("In which year was The Matrix released?", "The Matrix", "movie_to_year"),
    ],
)
def test_real_models_answer_from_the_sample_kg(engine, question: str, topic: str, chain: str) -> None:  # type: ignore[no-untyped-def]
    from simgrag.eval.answerable import chain_targets

    gold = chain_targets(engine.index.store, topic, chain)
    assert gold, "the sample KG should answer this question"
    result = engine.ask(question)
    assert result.answer.evidence.evidence, "nothing retrieved"
    assert set(result.answer.entities) & gold or result.answer.short_answer in gold, result.to_dict()
    # the answer is grounded: it appears among the retrieved subgraphs' entities
    retrieved = {n.entity for ev in result.answer.evidence.evidence for n in ev.nodes}
    assert result.answer.short_answer in retrieved


def test_real_models_verify_a_claim(engine) -> None:  # type: ignore[no-untyped-def]
    result = engine.verify("Inception was directed by Christopher Nolan.")
    assert result.verdict.label == "Supported", result.to_dict()
    triples = {e.triple.as_tuple() for ev in result.verdict.evidence.evidence for e in ev.edges}
    assert ("Inception", "directed_by", "Christopher Nolan") in triples


@pytest.mark.parametrize(
    ("question", "topic", "chain"),
    [
        # the README's off-template example: the nearest shot adds a `has genre` triple the question
        # never asked for; the KG judge must drop it (issue 14)
        ("Which movies share actors with Heat?", "Heat", "movie_to_actor_to_movie"),
        ("Tell me the cast of Titanic.", "Titanic", "movie_to_actor"),
    ],
)
def test_real_models_off_template_wording(engine, question: str, topic: str, chain: str) -> None:  # type: ignore[no-untyped-def]
    from simgrag.eval.answerable import chain_targets

    gold = chain_targets(engine.index.store, topic, chain) - {topic}
    result = engine.ask(question)
    relations = {t[1] for t in result.pattern.pattern.triples()}
    assert not {"has genre", "has_genre"} & relations, result.to_dict()
    said = set(result.answer.entities) or {result.answer.short_answer}
    assert said and said <= gold, (said - gold, result.to_dict())


def test_demo_prints_its_answer_in_a_fresh_process(embedded_model: Path) -> None:
    """`simgrag demo` as the README runs it: the answer needs no LLM call (exact match), while the
    model loads in the background with stdout silenced by llama.cpp — the answer must still be printed."""
    import shutil
    import subprocess
    import sys

    exe = shutil.which("simgrag", path=str(Path(sys.executable).parent))
    assert exe is not None, "the simgrag console script should be installed beside the interpreter"
    for _ in range(2):  # the lost output was intermittent: it depended on which thread got there first
        done = subprocess.run([exe, "demo", "Who directed Inception?"], capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        assert "Answer: Christopher Nolan" in done.stdout, (done.stdout, done.stderr)
