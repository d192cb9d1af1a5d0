"""Does the pattern read the whole question? Told apart from "the KG holds the pattern exactly".

An exact match says the KG holds the *pattern*; the answer is the question's only if the pattern asks
what the question asks. Asked "In which city is the office of the Data Team?", a pattern that stops at
the office is held exactly by the KG and answers with the office. :func:`read_pattern` compares the
question's words with the pattern, without an LLM and without rules about any one KG:

- **unread words**: the question's content words (not a stopword, not inside a named node's name) that
  no label of the pattern accounts for — its node names and type hints ("movies" for
  ``UNKNOWN movie 1``), its relation texts and the KG relations its best match follows (their names
  and aliases) — by a shared stem, or by the index's embedder (within :data:`LABEL_DISTANCE` of a
  label, within :data:`RELATION_DISTANCE` of a followed relation). A word of joining ("share",
  "common", "together") is read by an unknown node that two triples meet at.
- **hops**: the question's relation words (within :data:`RELATION_WORD_DISTANCE` of a KG relation, and
  not a type word of the pattern) name more distinct KG relations than the pattern has triples.

Either one makes the reading uncertain; the answer then says so in plain words instead of "exact match".
Conservative on purpose: a word the pattern may have read in a way this cannot see is reported too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simgrag.grounding.english import JOIN_WORDS, STEM_ENDINGS, STOPWORDS
from simgrag.grounding.lexicon import Lexicon
from simgrag.grounding.question import normalize_name, read_question
from simgrag.match.retrieve import Retrieval
from simgrag.pattern.graph import Pattern, singular

__all__ = ["PatternReading", "read_pattern"]

#: a word this close to a label of the pattern (L2 between unit vectors: cosine ≥ 0.72) is read by it …
LABEL_DISTANCE = 0.75
#: … or this close to a KG relation the best match follows (any of its texts: name, aliases)
RELATION_DISTANCE = 0.9
#: a word this close to some KG relation is a relation word of the question (MiniLM: "acted" 0.52 from
#: ``starred_actors``, "released" 0.61 from ``release_year``; "films" 0.69 from ``has_genre``, not one)
RELATION_WORD_DISTANCE = 0.65
#: two words share a stem from this many letters on (one the other's start, give or take 3 letters)
STEM_LETTERS = 4


@dataclass(frozen=True)
class PatternReading:
    """How much of the question the pattern reads (module docstring)."""

    unread: tuple[str, ...] = ()
    relation_words: tuple[str, ...] = ()
    relations_named: int = 0
    edges: int = 0

    @property
    def missing_hops(self) -> int:
        """How many more relations the question names than the pattern has triples."""
        return max(0, self.relations_named - self.edges)

    @property
    def whole(self) -> bool:
        """Every content word read and no hop missing."""
        return not self.unread and self.missing_hops == 0

    def uncertainty(self) -> str:
        """What is uncertain, in plain words ("" when nothing is)."""
        parts = []
        if self.unread:
            words = ", ".join(f"'{w}'" for w in self.unread)
            parts.append(f"the pattern does not account for the question's word{'s' if len(self.unread) > 1 else ''} "
                         f"{words}")
        if self.missing_hops:
            said = ", ".join(f"'{w}'" for w in self.relation_words)
            parts.append(f"the question names {self.relations_named} relations ({said}) and the pattern follows "
                         f"{self.edges}: a hop may be missing")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"whole": self.whole, "unread_words": list(self.unread), "relation_words": list(self.relation_words),
                "missing_hops": self.missing_hops, "uncertainty": self.uncertainty()}


def _same_stem(word: str, other: str) -> bool:
    """Whether two words share a stem: equal in the singular, one the other's start give or take 3 letters, or
    the same first :data:`STEM_LETTERS` letters or more followed by an ending of
    :data:`~simgrag.grounding.english.STEM_ENDINGS` in each ("leads" / "leader", "plays" / "player")."""
    if word == other or singular(word) == singular(other):
        return True
    if (len(word) >= STEM_LETTERS and len(other) >= STEM_LETTERS and abs(len(word) - len(other)) <= 3
            and (word.startswith(other) or other.startswith(word))):
        return True
    shared = next((i for i, (a, b) in enumerate(zip(word, other, strict=False)) if a != b), min(len(word), len(other)))
    return shared >= STEM_LETTERS and word[shared:] in STEM_ENDINGS and other[shared:] in STEM_ENDINGS


def _words(text: str) -> list[str]:
    return [w for w in (normalize_name(x) for x in text.replace("_", " ").replace("-", " ").split()) if w]


def _content_words(question: str, pattern: Pattern, retrieval: Retrieval | None) -> list[str]:
    """The question's words outside the named nodes' names (and the names they were bound to)."""
    reading = read_question(question, lambda _: None)
    covered = [False] * len(reading.words)
    names = [n.text for n in pattern.nodes if not n.unknown]
    if retrieval is not None and retrieval.evidence:
        names += [b.entity for b in retrieval.evidence[0].nodes if not b.unknown]
    for name in names:
        span = reading.span_of(name)
        if span is not None:
            covered[span[0]:span[1]] = [True] * (span[1] - span[0])
    clean = reading.clean_words()
    return list(dict.fromkeys(w for i, w in enumerate(clean) if not covered[i] and w and w not in STOPWORDS
                              and any(c.isalnum() for c in w)))


def _has_join(pattern: Pattern) -> bool:
    degrees = pattern.degrees()
    return any(node.unknown and degrees[i] >= 2 for i, node in enumerate(pattern.nodes))


def read_pattern(question: str, pattern: Pattern, retrieval: Retrieval | None,
                 lexicon: Lexicon | None = None) -> PatternReading:
    """How much of ``question`` ``pattern`` reads (module docstring); ``lexicon``: the index's words and
    relations (without one, shared stems only)."""
    words = _content_words(question, pattern, retrieval)
    types = [n.type_hint.lower() for n in pattern.nodes if n.unknown and n.type_hint]
    relations = [e.relation for e in pattern.edges if not e.unknown]
    labels = types + relations + [n.text for n in pattern.nodes if not n.unknown]
    followed: list[str] = []
    if retrieval is not None and retrieval.evidence:
        followed = list(dict.fromkeys(e.triple.relation for e in retrieval.evidence[0].edges))
    label_words = {w for text in [*labels, *followed] for w in _words(text)}
    read = [any(_same_stem(w, x) for x in label_words) or (w in JOIN_WORDS and _has_join(pattern)) for w in words]
    is_type = [any(_same_stem(w, t) for t in types) for w in words]
    named: dict[int, str] = {}
    if lexicon is not None and words:
        store = lexicon.store
        ids = {name: i for i, name in enumerate(store.relations)}
        distances = lexicon.relation_distances(words)
        vectors = lexicon.embed(list(words) + [singular(w) for w in words])
        if labels:
            to_labels = _distances(vectors, lexicon.embed(labels)).min(axis=1)
            near_label = np.minimum(to_labels[:len(words)], to_labels[len(words):]) <= LABEL_DISTANCE
        else:
            near_label = np.zeros(len(words), dtype=bool)
        if types:
            to_types = _distances(vectors, lexicon.embed(types)).min(axis=1)
            is_type = [t or bool(min(to_types[i], to_types[len(words) + i]) <= LABEL_DISTANCE)
                       for i, t in enumerate(is_type)]
        own = [ids[r] for r in followed if r in ids]
        for i, row in enumerate(distances):
            along = bool(own) and float(row[own].min()) <= RELATION_DISTANCE
            read[i] = read[i] or bool(near_label[i]) or along
            best = int(np.argmin(row))
            if float(row[best]) <= RELATION_WORD_DISTANCE and not is_type[i]:
                named.setdefault(best, words[i])
    unread = tuple(w for w, ok in zip(words, read, strict=True) if not ok)
    return PatternReading(unread, tuple(named.values()), len(named), len(pattern.edges))


def _distances(vectors: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return np.asarray(np.linalg.norm(vectors[:, None, :] - targets[None, :, :], axis=2))

