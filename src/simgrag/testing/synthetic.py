"""A generated movie KG (a few hundred triples) with template questions whose answers and relation
chains are known, for training and testing the trainable retrievers quickly on a CPU.

People come from one pool, so the same person may direct, write and act: the question, not the
topic's type alone, tells which relation is meant. Every question is returned as a plain tuple
``(question, topic, answers, chain)`` with ``chain`` the KG relation names in hop order.
"""

from __future__ import annotations

import random
from collections import defaultdict

__all__ = ["QUESTION_TEMPLATES", "synthetic_movie_kg", "synthetic_questions"]

_LANGUAGES = ("English", "French", "German", "Hindi", "Japanese")
_GENRES = ("Drama", "Comedy", "Thriller", "Western", "Horror", "Musical")

#: (template, chain, direction of each hop: True = head → tail), the topic fills ``{}``
QUESTION_TEMPLATES: tuple[tuple[str, tuple[str, ...], tuple[bool, ...]], ...] = (
    ("who directed {}", ("directed_by",), (True,)),
    ("who wrote the screenplay of {}", ("written_by",), (True,)),
    ("who acted in {}", ("starred_actors",), (True,)),
    ("when was {} released", ("release_year",), (True,)),
    ("what language is {} in", ("in_language",), (True,)),
    ("what genre is {}", ("has_genre",), (True,)),
    ("which films did {} direct", ("directed_by",), (False,)),
    ("which films did {} write", ("written_by",), (False,)),
    ("which films did {} act in", ("starred_actors",), (False,)),
    ("who directed the films that {} acted in", ("starred_actors", "directed_by"), (False, True)),
    ("who acted in the films directed by {}", ("directed_by", "starred_actors"), (False, True)),
    ("which films have the same director as {}", ("directed_by", "directed_by"), (True, False)),
    ("when were the films written by {} released", ("written_by", "release_year"), (False, True)),
    ("what genres are the films directed by {}", ("directed_by", "has_genre"), (False, True)),
)


def synthetic_movie_kg(n_movies: int = 60, n_people: int = 40, seed: int = 0) -> list[tuple[str, str, str]]:
    """``(head, relation, tail)`` triples of ``n_movies`` films; deterministic for a seed."""
    rng = random.Random(seed)
    people = [f"Person {i}" for i in range(n_people)]
    triples: list[tuple[str, str, str]] = []
    for i in range(n_movies):
        film = f"Film {i}"
        triples.append((film, "directed_by", rng.choice(people)))
        triples.append((film, "written_by", rng.choice(people)))
        triples.extend((film, "starred_actors", actor) for actor in rng.sample(people, rng.randint(1, 3)))
        triples.append((film, "release_year", str(1980 + rng.randrange(25))))
        triples.append((film, "in_language", rng.choice(_LANGUAGES)))
        triples.append((film, "has_genre", rng.choice(_GENRES)))
    return triples


def _walk(triples: list[tuple[str, str, str]], topic: str, chain: tuple[str, ...],
          forward: tuple[bool, ...]) -> set[str]:
    out: dict[tuple[str, bool], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for h, r, t in triples:
        out[(r, True)][h].add(t)
        out[(r, False)][t].add(h)
    frontier = {topic}
    for rel, fwd in zip(chain, forward, strict=True):
        frontier = {n for node in frontier for n in out[(rel, fwd)].get(node, ())}
    return frontier - {topic}


def synthetic_questions(triples: list[tuple[str, str, str]], n: int, *, seed: int = 0,
                        max_hops: int = 2) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """``n`` answerable questions ``(question, topic, answers, chain)`` from :data:`QUESTION_TEMPLATES`."""
    rng = random.Random(seed)
    templates = [t for t in QUESTION_TEMPLATES if len(t[1]) <= max_hops]
    films = sorted({h for h, _, _ in triples})
    people = sorted({t for _, r, t in triples if r in ("directed_by", "written_by", "starred_actors")})
    out: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = []
    while len(out) < n:
        template, chain, forward = rng.choice(templates)
        topic = rng.choice(films if forward[0] else people)
        answers = _walk(triples, topic, chain, forward)
        if answers:
            out.append((template.format(topic), topic, tuple(sorted(answers)), chain))
    return out
