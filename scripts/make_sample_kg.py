"""Cut the small sample KG bundled with simgrag (src/simgrag/data/sample/movies.txt) from MetaQA's kb.txt.

The sample is every triple of a few well-known seed movies, plus the triples (tags excluded) of the
other movies of their directors, writers and actors. Deterministic: run it again, get the same file.

    python scripts/make_sample_kg.py --metaqa-dir ../shared/data/MetaQA
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

SEEDS = [
    "Inception", "The Matrix", "Forrest Gump", "Titanic", "The Dark Knight", "Pulp Fiction",
    "Fight Club", "The Godfather", "Interstellar", "Memento", "Toy Story", "Avatar", "Jurassic Park",
    "Gladiator", "The Departed", "Casablanca", "Alien", "Heat", "Amélie", "Spirited Away",
]
PEOPLE = {"directed_by", "written_by", "starred_actors"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "src/simgrag/data/sample/movies.txt")
    args = parser.parse_args()
    by_movie: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    movies_of: dict[str, set[str]] = defaultdict(set)
    for line in (args.metaqa_dir / "kb.txt").read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|")
        by_movie[h].append((h, r, t))
        if r in PEOPLE:
            movies_of[t].add(h)
    keep: set[tuple[str, str, str]] = set()
    for movie in SEEDS:
        keep.update(by_movie[movie])
        for _, r, person in by_movie[movie]:
            if r not in PEOPLE:
                continue
            for other in sorted(movies_of[person]):
                keep.update(t for t in by_movie[other] if t[1] != "has_tags")
    lines = sorted("|".join(t) for t in keep)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Sample movie KG for simgrag's first run: a cut of MetaQA's KB (Zhang et al. 2018, Creative Commons).\n"
              "# Made by scripts/make_sample_kg.py. Format: head|relation|tail\n")
    args.out.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} triples -> {args.out}")


if __name__ == "__main__":
    main()
