"""A toy movie KG whose answers can be checked by hand, for unit tests and examples."""

from __future__ import annotations

from pathlib import Path

__all__ = ["TOY_TRIPLES", "write_toy_kg"]

TOY_TRIPLES: tuple[tuple[str, str, str], ...] = (
    ("Inception", "directed_by", "Christopher Nolan"),
    ("Inception", "written_by", "Christopher Nolan"),
    ("Inception", "starred_actors", "Leonardo DiCaprio"),
    ("Inception", "starred_actors", "Ellen Page"),
    ("Inception", "release_year", "2010"),
    ("Memento", "directed_by", "Christopher Nolan"),
    ("Memento", "starred_actors", "Guy Pearce"),
    ("Memento", "release_year", "2000"),
    ("Titanic", "directed_by", "James Cameron"),
    ("Titanic", "starred_actors", "Leonardo DiCaprio"),
    ("Titanic", "starred_actors", "Kate Winslet"),
    ("Titanic", "release_year", "1997"),
    ("Avatar", "directed_by", "James Cameron"),
    ("Avatar", "release_year", "2009"),
    ("Juno", "starred_actors", "Ellen Page"),
    ("Juno", "directed_by", "Jason Reitman"),
    ("Juno", "in_language", "English"),
)


def write_toy_kg(path: str | Path) -> Path:
    """Write :data:`TOY_TRIPLES` as a ``head|relation|tail`` file and return its path."""
    path = Path(path)
    path.write_text("\n".join("|".join(t) for t in TOY_TRIPLES) + "\n", encoding="utf-8")
    return path
