"""MetaQA (vanilla) questions, and a structural check of a pattern against a question's gold chain.

Files, in the original layout under ``metaqa_dir``::

    {1,2,3}-hop/vanilla/qa_{dev,test}.txt     question with [topic]<TAB>answer|answer
    {1,2,3}-hop/qa_{dev,test}_qtype.txt        gold chain per line, e.g. movie_to_director_to_movie

:func:`pattern_fits_chain` tells whether the LLM's pattern has the right *structure* for the gold
chain (a path from the topic entity to an unknown node, one edge per hop, each edge of the right
relation kind), so that errors can be attributed to the pattern stage.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from simgrag.errors import DatasetError
from simgrag.eval.chains import pattern_fits_relations
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.pattern.graph import Pattern

__all__ = [
    "CHAIN_RELATIONS",
    "MetaQAQuestion",
    "chain_relations",
    "load_metaqa",
    "metaqa_index",
    "pattern_fits_chain",
    "relation_kinds",
]

_TOPIC = re.compile(r"\[([^\]]+)\]")

#: the KB relation each non-movie entity type of a chain is linked to movies by
CHAIN_RELATIONS = {
    "director": "directed_by",
    "writer": "written_by",
    "actor": "starred_actors",
    "year": "release_year",
    "language": "in_language",
    "tags": "has_tags",
    "tag": "has_tags",
    "genre": "has_genre",
    "imdbvotes": "has_imdb_votes",
    "imdbrating": "has_imdb_rating",
}

#: keyword stems → KB relation (lenient on wording)
_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("direct", "directed_by"),
    ("writ", "written_by"), ("wrote", "written_by"), ("author", "written_by"), ("script", "written_by"),
    ("screenplay", "written_by"), ("penned", "written_by"),
    ("star", "starred_actors"), ("act", "starred_actors"), ("cast", "starred_actors"),
    ("appear", "starred_actors"), ("perform", "starred_actors"),
    ("year", "release_year"), ("release", "release_year"), ("date", "release_year"),
    ("languag", "in_language"), ("spoken", "in_language"),
    ("tag", "has_tags"), ("describ", "has_tags"), ("keyword", "has_tags"), ("topic", "has_tags"),
    ("genre", "has_genre"), ("kind", "has_genre"), ("category", "has_genre"),
    ("vote", "has_imdb_votes"), ("popular", "has_imdb_votes"),
    ("rating", "has_imdb_rating"), ("rated", "has_imdb_rating"), ("rate", "has_imdb_rating"),
    ("score", "has_imdb_rating"),
)


@dataclass(frozen=True)
class MetaQAQuestion:
    question: str  # without the [brackets]
    topic: str
    answers: tuple[str, ...]
    chain: str  # e.g. "movie_to_director_to_movie"

    @property
    def hops(self) -> int:
        return len(chain_relations(self.chain))


def load_metaqa(metaqa_dir: str | Path, hop: int, split: str) -> list[MetaQAQuestion]:
    """Questions of one hop count (1, 2, 3) and split (``dev``/``test``/``train``)."""
    if hop not in (1, 2, 3):
        raise DatasetError(f"MetaQA hop must be 1, 2 or 3, got {hop}")
    root = Path(metaqa_dir)
    qa_path = root / f"{hop}-hop" / "vanilla" / f"qa_{split}.txt"
    chain_path = root / f"{hop}-hop" / f"qa_{split}_qtype.txt"
    for path in (qa_path, chain_path):
        if not path.is_file():
            raise DatasetError(
                f"MetaQA file {path} not found; --metaqa-dir must point at the MetaQA folder holding "
                "1-hop/ 2-hop/ 3-hop/ (https://github.com/yuyuz/MetaQA)")
    qa_lines = qa_path.read_text(encoding="utf-8").splitlines()
    chains = chain_path.read_text(encoding="utf-8").splitlines()
    if len(qa_lines) != len(chains):
        raise DatasetError(f"{qa_path} has {len(qa_lines)} lines but {chain_path} has {len(chains)}")
    return [_parse_line(line, chain.strip(), qa_path, i + 1)
            for i, (line, chain) in enumerate(zip(qa_lines, chains, strict=True))]


def _parse_line(line: str, chain: str, path: Path, lineno: int) -> MetaQAQuestion:
    text, sep, answers = line.rstrip("\n").partition("\t")
    match = _TOPIC.search(text)
    if not sep or match is None:
        raise DatasetError(f"{path}:{lineno}: expected 'question with [topic]<TAB>answers', got {line!r}")
    question = " ".join((text[: match.start()] + match.group(1) + text[match.end():]).split())
    return MetaQAQuestion(question, match.group(1).strip(),
                          tuple(a for a in answers.split("|") if a), chain)


def chain_relations(chain: str) -> list[str]:
    """``movie_to_director_to_movie`` → ``["directed_by", "directed_by"]``."""
    types = chain.split("_to_")
    out = []
    for a, b in itertools.pairwise(types):
        other = b if a == "movie" else a
        if other not in CHAIN_RELATIONS:
            raise DatasetError(f"Unknown MetaQA chain step {a}_to_{b} in {chain!r}")
        out.append(CHAIN_RELATIONS[other])
    return out


def relation_kinds(text: str) -> set[str]:
    """The KB relations a relation phrase (or a node's type hint) can mean, by keyword."""
    low = text.lower()
    return {rel for stem, rel in _KEYWORDS if stem in low}


def pattern_fits_chain(pattern: Pattern, topic: str, chain: str) -> tuple[bool, str]:
    """Does ``pattern`` have the gold chain's structure? Returns ``(ok, reason)``; see
    :func:`~simgrag.eval.chains.pattern_fits_relations` (relations read by keywords; a type hint may also
    name a MetaQA entity kind, ``director``, …)."""
    return pattern_fits_relations(pattern, topic, chain_relations(chain), relation_kinds, _hint_kinds)


def _hint_kinds(hint: str) -> set[str]:
    return relation_kinds(hint) | ({CHAIN_RELATIONS[hint]} if hint in CHAIN_RELATIONS else set())


def metaqa_index(metaqa_dir: str | Path, *, cache: str | Path | None = None, embedder: str = "minilm") -> IndexDir:
    """The index of MetaQA's kb.txt with the bundled MetaQA relation aliases, built once into the cache
    (keyed by the contents of kb.txt and of the aliases file, so a copy of the same data reuses it and
    new aliases build a new one)."""
    from simgrag.config import cache_dir
    from simgrag.pipeline import builtin_aliases_path, content_stamp

    kb = Path(metaqa_dir) / "kb.txt"
    if not kb.is_file():
        raise DatasetError(f"{kb}: not found (give the MetaQA folder that holds kb.txt)")
    aliases = builtin_aliases_path("metaqa")
    path = cache_dir(cache) / f"metaqa-{embedder.replace(':', '-')}-{content_stamp(kb, aliases)}.idx"
    if (path / "manifest.json").exists():
        return open_index_dir(path)
    return build_index_dir(kb, path, embedder=embedder, relation_aliases=aliases, overwrite=True)
