"""Write src/simgrag/data/examples/metaqa.yaml from MetaQA DEV questions (deterministic).

For every question type (gold chain) of each hop, the phrasing templates (the question with its
[topic] masked) are found and the first dev question of each is taken: by default every template
(518 over the three hops; MetaQA's test questions use the same templates), so that the dynamic shot
most similar to a question is almost always one of its own phrasing. Its pattern follows
the gold chain: the topic entity, then typed unknowns (``UNKNOWN director 1``), one triple per hop,
each written movie-first with the KG's relation name in words (``directed by``, ``starred actors``).
The first examples in the file (a hand-picked order of question types over all hops) are the prompt's
static shots; the rest are candidates for dynamic shots.

    python benchmarks/make_metaqa_examples.py --metaqa-dir ../shared/data/MetaQA
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import re
from collections import Counter, defaultdict
from pathlib import Path

from simgrag.eval.metaqa import CHAIN_RELATIONS, MetaQAQuestion, load_metaqa
from simgrag.pattern.examples import load_examples

logger = logging.getLogger("make_metaqa_examples")

OUT = Path(__file__).resolve().parents[1] / "src" / "simgrag" / "data" / "examples" / "metaqa.yaml"
RELATIONS = ["directed by", "written by", "starred actors", "release year", "in language",
             "has tags", "has genre", "has imdb votes", "has imdb rating"]
TYPE_WORDS = {"tags": "tag", "imdbvotes": "imdb votes", "imdbrating": "imdb rating"}
#: question types whose first example forms the static shots, in prompt order (all hops mixed)
STATIC_ORDER = [
    "movie_to_director", "actor_to_movie_to_year", "movie_to_actor_to_movie_to_genre",
    "writer_to_movie", "movie_to_writer_to_movie", "movie_to_director_to_movie_to_language",
    "movie_to_tags", "director_to_movie_to_actor", "movie_to_writer_to_movie_to_year",
    "tag_to_movie", "writer_to_movie_to_genre", "movie_to_actor_to_movie_to_director",
]
INSTRUCTIONS = ("Movies are linked to their directors, writers, actors, release year, language, tags, "
                "genre, imdb votes and imdb rating; write every triple movie first.")


def chain_triples(topic: str, chain: str) -> list[list[str]]:
    """The pattern of a gold chain: topic → typed unknowns, movie-first triples."""
    types = chain.split("_to_")
    counts: Counter[str] = Counter()
    names = [topic]
    for kind in types[1:]:
        counts[kind] += 1
        names.append(f"UNKNOWN {TYPE_WORDS.get(kind, kind)} {counts[kind]}")
    triples = []
    for (a, b), (na, nb) in zip(itertools.pairwise(types), itertools.pairwise(names), strict=True):
        other = b if a == "movie" else a
        relation = CHAIN_RELATIONS[other].replace("_", " ")
        triples.append([na, relation, nb] if a == "movie" else [nb, relation, na])
    return triples


def template(q: MetaQAQuestion) -> str:
    return re.sub(re.escape(q.topic), "{e}", q.question, count=1)


def pick(questions: list[MetaQAQuestion], per_type: int) -> dict[str, list[MetaQAQuestion]]:
    """Per chain: the first question of each of its ``per_type`` most frequent templates (0: all)."""
    by_chain: dict[str, list[MetaQAQuestion]] = defaultdict(list)
    for q in questions:
        by_chain[q.chain].append(q)
    chosen: dict[str, list[MetaQAQuestion]] = {}
    for chain, qs in by_chain.items():
        counts = Counter(template(q) for q in qs)
        top = sorted(counts, key=lambda t: (-counts[t], t))[: per_type or None]
        chosen[chain] = [next(q for q in qs if template(q) == t) for t in top]
    return chosen


def ordered(chosen: dict[str, list[MetaQAQuestion]], frequency: Counter[str]) -> list[MetaQAQuestion]:
    static = [chosen[c][0] for c in STATIC_ORDER if c in chosen]
    rest = [q for c in sorted(chosen, key=lambda c: (len(c.split("_to_")), -frequency[c], c))
            for q in chosen[c] if q not in static]
    return static + rest


def render(examples: list[MetaQAQuestion]) -> str:
    lines = [
        "# Few-shot examples for MetaQA (generated from DEV by benchmarks/make_metaqa_examples.py).",
        f"# One DEV question per phrasing template. The first {len(STATIC_ORDER)} are hand-ordered question types:",
        "# the prompt's static shots (its cached prefix) are the first n_static_shots of them (6 by default);",
        "# the others are candidates for the dynamic shots chosen per question.",
        "name: metaqa",
        "relations:",
        *(f"  - {r}" for r in RELATIONS),
        f"instructions: {json.dumps(INSTRUCTIONS)}",
        "examples:",
    ]
    for q in examples:
        lines.append(f"  - question: {json.dumps(q.question, ensure_ascii=False)}")
        lines.append("    triples:")
        lines.extend(f"      - {json.dumps(t, ensure_ascii=False)}" for t in chain_triples(q.topic, q.chain))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--per-type", type=int, nargs=3, default=[0, 0, 0], metavar=("H1", "H2", "H3"),
                        help="templates per question type for 1/2/3-hop, most frequent first; 0 = all (default)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    chosen: dict[str, list[MetaQAQuestion]] = {}
    frequency: Counter[str] = Counter()
    for hop, per_type in zip((1, 2, 3), args.per_type, strict=True):
        questions = load_metaqa(args.metaqa_dir, hop, "dev")
        frequency.update(q.chain for q in questions)
        chosen.update(pick(questions, per_type))
    examples = ordered(chosen, frequency)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(examples), encoding="utf-8")
    loaded = load_examples(args.out)  # validates every example
    logger.info("wrote %d examples (%d question types) to %s", len(loaded), len(chosen), args.out)


if __name__ == "__main__":
    main()
