"""MetaQA patterns written from a question's gold relation chain, without an LLM.

For a test or dev question, :func:`gold_pattern` writes the pattern an LLM should write: a path from
the topic entity through typed unknown nodes (``UNKNOWN director 1``), one edge per hop, movie first,
with a natural relation phrase picked at random per edge (seeded) from :data:`PHRASES` — "directed",
"acted in", "screenwriter of", …. Used by the retrieval benchmark (``benchmarks/retrieval_metaqa.py``)
and, on DEV, by the abstention calibration (:mod:`simgrag.eval.calibrate`).
"""

from __future__ import annotations

import random

from simgrag.eval.metaqa import MetaQAQuestion, chain_relations
from simgrag.pattern.graph import Pattern

__all__ = ["PHRASES", "answer_node_text", "gold_pattern"]

#: natural phrases for each MetaQA relation (what an LLM writes)
PHRASES = {
    "directed_by": ["directed", "director of", "directed by"],
    "written_by": ["written by", "wrote", "writer of", "screenwriter of"],
    "starred_actors": ["acted in", "starred in", "actor in", "starring"],
    "release_year": ["release year", "released in", "year of release"],
    "in_language": ["language", "in language", "spoken language"],
    "has_genre": ["genre", "has genre"],
    "has_tags": ["tagged", "has tag", "about"],
    "has_imdb_votes": ["imdb votes"],
    "has_imdb_rating": ["imdb rating"],
}


def _types(q: MetaQAQuestion) -> list[str]:
    return [t.rstrip("s") if t == "tags" else t for t in q.chain.split("_to_")]


def answer_node_text(q: MetaQAQuestion) -> str:
    """The pattern text of the asked-for node: the last unknown of the chain."""
    types = _types(q)
    return f"UNKNOWN {types[-1]} {len(types) - 1}"


def gold_pattern(q: MetaQAQuestion, rng: random.Random, *, exact_relations: bool = False) -> Pattern:
    """The question's chain as a pattern (module docstring); ``rng`` picks the phrases, or with
    ``exact_relations`` each edge is the KG relation's own name (``directed_by``)."""
    types = _types(q)
    names = [q.topic] + [f"UNKNOWN {t} {i}" for i, t in enumerate(types[1:], start=1)]
    triples = []
    for i, rel in enumerate(chain_relations(q.chain)):
        a, b = names[i], names[i + 1]
        head, tail = (a, b) if types[i] == "movie" else (b, a)
        triples.append([head, rel if exact_relations else rng.choice(PHRASES[rel]), tail])
    return Pattern.from_triples(triples)
