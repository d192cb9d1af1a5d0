"""What the KG, its embedder and the examples file say about words: the judge's vocabulary.

:class:`Lexicon` answers the questions :mod:`simgrag.grounding.judge` asks of a question's
words without an LLM: which KG entity a name is (case-insensitive), which KG relation a phrase reads
as (the distance to the relation's nearest text: its name and aliases), which words name a pattern
node's type ("movies" for ``UNKNOWN movie 1``), and how the examples file uses each node type
(``movie`` is the head of ``starred actors``). Embeddings of words and phrases are cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from functools import cached_property

import numpy as np

from simgrag.grounding.question import QuestionReading, normalize_name, read_question
from simgrag.match.kinds import example_uses
from simgrag.match.retrieve import EXACT_NAME_MAX_ENTITIES, SubgraphRetriever
from simgrag.pattern.graph import Pattern, is_unknown, singular, type_hint

__all__ = ["SUPPORT_DISTANCE", "TYPE_DISTANCE", "Clash", "Lexicon", "Use", "kg_roles", "other_side", "singular"]

#: a phrase supports a relation when it is this close (L2 between unit vectors: cosine ≥ 0.5) …
SUPPORT_DISTANCE = 1.0
#: … and a word this close to a pattern node's type hint names that type (cosine ≥ 0.72)
TYPE_DISTANCE = 0.75


#: entities looked at per (relation, side) when asking what type the KG puts at that end of a relation …
KG_SIDE_SAMPLE = 32
#: … and the share of them that must be of the type
KG_SIDE_SHARE = 0.8

#: (node type, KG relation, the type's side of it: "head" | "tail"): how the examples use a type
Use = tuple[str, int, str]
#: a typed unknown where the examples never put its type: (triple index, node, its side, the type the
#: examples put there, the KG relation linking that type to the node's type, the middle node's side of it)
Clash = tuple[int, str, str, str, int, str]


def kg_roles(retriever: SubgraphRetriever, entity: int) -> dict[int, set[str]]:
    """KG relation id → the sides ("head", "tail") ``entity`` takes in its edges of that relation."""
    store = retriever.store
    _, rels, tids = store.neighbors(entity)
    heads = store.heads[tids] == entity
    roles: dict[int, set[str]] = {}
    for rel, is_head in zip(rels.tolist(), heads.tolist(), strict=True):
        roles.setdefault(int(rel), set()).add("head" if is_head else "tail")
    return roles


def other_side(side: str) -> str:
    """The other end of a relation: ``"head"`` ↔ ``"tail"``."""
    return "tail" if side == "head" else "head"


class Lexicon:
    """Names, phrases and node types of one index (see module doc); thread-safe.

    ``examples``: the triples of the examples file's patterns (for :meth:`schema_misses`).
    """

    def __init__(self, retriever: SubgraphRetriever, *, examples: Sequence[Sequence[Sequence[str]]] = (),
                 support_distance: float = SUPPORT_DISTANCE, type_distance: float = TYPE_DISTANCE,
                 cache_size: int = 4096) -> None:
        self.retriever = retriever
        self.store = retriever.store
        self.support_distance = support_distance
        self.type_distance = type_distance
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._examples = [list(map(tuple, triples)) for triples in examples]
        self._side_kinds: dict[tuple[int, str], tuple[int, dict[str, int]]] = {}

    @cached_property
    def schema(self) -> set[Use]:
        """(type hint, KG relation, side) of every typed unknown in the example patterns: how the
        examples file says a node of each type is used (``movie`` is the head of ``starred actors``)."""
        return example_uses(self._examples, self.retriever.nearest_relation)

    @cached_property
    def types(self) -> tuple[str, ...]:
        """The node types the examples file uses (``movie``, ``actor``, …)."""
        return tuple(sorted({t for t, _, _ in self.schema}))

    def _uses(self, pattern: Pattern) -> list[Use]:
        out = []
        for edge in pattern.edges:
            rel = None if edge.unknown else self.retriever.nearest_relation(edge.relation)
            for node, side in ((pattern.nodes[edge.source], "head"), (pattern.nodes[edge.target], "tail")):
                if rel is not None and node.unknown and node.type_hint:
                    out.append((singular(node.type_hint.lower()), rel, side))
        return out

    def schema_misses(self, pattern: Pattern) -> int:
        """Typed-unknown uses of ``pattern`` the examples never show, for types the examples know."""
        schema = self.schema
        known = {hint for hint, _, _ in schema}
        return sum(1 for use in self._uses(pattern) if use[0] in known and use not in schema)

    def is_of_type(self, entity: int, hint: str) -> bool:
        """Whether the KG gives ``entity`` an edge the examples give nodes of type ``hint`` (``Euro`` is
        the tail of ``currency``, as ``UNKNOWN currency 1`` is in the examples); true for types the
        examples do not use."""
        uses = {(r, s) for t, r, s in self.schema if t == singular(hint.lower())}
        if not uses:
            return True
        roles = kg_roles(self.retriever, entity)
        return any(side in roles.get(rel, set()) for rel, side in uses)

    def is_type_word(self, word: str) -> bool:
        """``word`` is one of the examples' node types or its plural ("movies", "countries")."""
        return self.type_named(word) is not None

    def type_named(self, word: str) -> str | None:
        """The examples' node type ``word`` is, or is the plural of ("countries" → country), or ``None``."""
        return next((hint for hint in self.types if _same_word(word, hint)), None)

    def kinds_of(self, entity: int) -> set[str]:
        """The examples' node types whose uses ``entity`` has in the KG (``{"movie"}`` for a film)."""
        roles = kg_roles(self.retriever, entity)
        return {t for t, rel, side in self.schema if side in roles.get(rel, set())}

    def relation_ends(self, triples: Sequence[Sequence[str]]) -> Iterator[tuple[int, int, str, str]]:
        """(triple index, KG relation, node text, its side) for both ends of every triple whose
        relation reads as a KG relation."""
        for i, (head, relation, tail) in enumerate(triples):
            rel = None if is_unknown(relation) else self.retriever.nearest_relation(relation)
            if rel is not None:
                yield i, rel, head, "head"
                yield i, rel, tail, "tail"

    def type_clashes(self, triples: Sequence[Sequence[str]]) -> list[Clash]:
        """Each typed unknown at an end of a relation where the examples never put its type but put
        another type that a second relation links to it (``[Porto, located in, UNKNOWN currency 1]``:
        ``located in`` ends at a country, and ``currency`` links a country to a currency)."""
        schema = self.schema
        known = {t for t, _, _ in schema}
        clashes: list[Clash] = []
        for i, rel, node, side in self.relation_ends(triples):
            hint = type_hint(node)
            wanted = singular(hint.lower()) if hint else None
            if wanted is None or wanted not in known or (wanted, rel, side) in schema:
                continue
            for fit in sorted({t for t, r, s in schema if r == rel and s == side and t != wanted}):
                clashes += [(i, node, side, fit, r2, s2) for r2, s2 in self.links(fit, wanted) if r2 != rel]
        return clashes

    def links(self, one: str, other: str) -> list[tuple[int, str]]:
        """(KG relation, the side ``one`` takes) for each relation the examples use between a node of type
        ``one`` and one of type ``other`` (``country`` → ``currency``: ``(currency, "head")``). When they use
        none, the relations at which the examples put ``other`` and whose other end the KG fills with
        ``one``s (:meth:`kg_side_is`): a 12-example file asks "On which continent is Chad?" with a named
        country only, but every head of ``continent`` in the KG is a country."""
        schema = self.schema
        found = [(rel, side) for t, rel, side in sorted(schema)
                 if t == one and (other, rel, other_side(side)) in schema]
        if found:
            return found
        return [(rel, other_side(side)) for t, rel, side in sorted(schema)
                if t == other and self.kg_side_is(rel, other_side(side), one)]

    def can_be_at(self, kind: str, rel: int, side: str) -> bool:
        """Whether a ``kind`` node may stand at ``side`` of ``rel``: the examples put one there
        (:attr:`schema`), or the KG's entities there are of that kind (:meth:`kg_side_is`: examples that
        name every city still say what a city is)."""
        return (kind, rel, side) in self.schema or self.kg_side_is(rel, side, kind)

    def kg_side_is(self, rel: int, side: str, kind: str) -> bool:
        """Whether the KG's entities at ``side`` of ``rel`` are ``kind``s by their uses (:meth:`kinds_of`):
        at least :data:`KG_SIDE_SHARE` of the distinct entities there in its first :data:`KG_SIDE_SAMPLE`
        triples (counted once per (relation, side) and kept)."""
        key = (rel, side)
        if key not in self._side_kinds:
            store = self.store
            tids = np.flatnonzero(np.asarray(store.rels) == rel)[:KG_SIDE_SAMPLE]
            ends = np.unique((store.heads if side == "head" else store.tails)[tids]).tolist()
            counts: dict[str, int] = {}
            for entity in ends:
                for t in self.kinds_of(int(entity)):
                    counts[t] = counts.get(t, 0) + 1
            self._side_kinds[key] = (len(ends), counts)
        n, counts = self._side_kinds[key]
        return n > 0 and counts.get(kind, 0) >= KG_SIDE_SHARE * n

    # ------------------------------------------------------------------ the question
    @cached_property
    def _names(self) -> dict[str, int]:
        table: dict[str, int] = {}
        if self.store.num_entities <= EXACT_NAME_MAX_ENTITIES:
            live = np.diff(np.asarray(self.store.indptr)) > 0  # retired entities (live updates) are left out
            for i, name in enumerate(self.store.entities):
                if live[i]:
                    table.setdefault(normalize_name(name), i)
        return table

    def read(self, question: str, common_words: Collection[str] = frozenset()) -> QuestionReading:
        """The question's entity mentions and words (``common_words``: see :func:`read_question`)."""
        return read_question(question, self._names.get, common_words)

    def entity_of(self, text: str) -> int | None:
        """The KG entity a named pattern node stands for: its exact name, else case-insensitive."""
        found = self.store.entity_id(text)
        return found if found is not None else self._names.get(normalize_name(text))

    # ------------------------------------------------------------------ embeddings
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            found = np.asarray(self.retriever.index.embedder.encode(missing, show_progress=False), np.float32)
            with self._lock:
                for text, vector in zip(missing, found, strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > self._cache_size:
                    self._vectors.popitem(last=False)
        with self._lock:
            rows = [self._vectors.get(t) for t in texts]
        if not rows:
            return np.zeros((0, self.retriever.index.embedder.dim), np.float32)
        if any(r is None for r in rows):  # evicted meanwhile by another thread: embed directly
            return np.asarray(self.retriever.index.embedder.encode(list(texts), show_progress=False), np.float32)
        return np.stack(rows)  # type: ignore[arg-type]

    def relation_distances(self, phrases: Sequence[str]) -> np.ndarray:
        """(phrases × KG relations): a relation's distance is that of its nearest text."""
        out = np.full((len(phrases), self.store.num_relations), np.inf)
        if not phrases:
            return out
        index = self.retriever.index
        dists, rows = index.relation_index.search(self.embed(phrases), index.relation_index.ntotal)
        for i in range(len(phrases)):
            valid = rows[i] >= 0
            np.minimum.at(out[i], index.relation_owner[rows[i][valid]], dists[i][valid].astype(np.float64))
        return out

    def relation_phrases(self, phrases: Sequence[str]) -> dict[int, float]:
        """KG relation → distance of the closest phrase whose nearest KG relation it is (within
        ``support_distance``)."""
        found: dict[int, float] = {}
        for row in self.relation_distances(list(phrases)):
            best = int(np.argmin(row))
            if row[best] <= self.support_distance:
                found[best] = min(found.get(best, np.inf), float(row[best]))
        return found

    def type_words(self, words: Sequence[str], candidates: Sequence[int], hints: Sequence[str]) -> dict[int, str]:
        """Word index → the type hint it names (same stem, or the word or its singular within
        ``type_distance``: a plural embeds farther from its type than the singular, "nations" 0.84 from
        "country" with MiniLM, "nation" 0.68)."""
        out: dict[int, str] = {}
        if not hints or not candidates:
            return out
        targets = self.embed(list(hints))
        dist = np.minimum(_distances(self.embed([words[i] for i in candidates]), targets),
                          _distances(self.embed([singular(words[i]) for i in candidates]), targets))
        for i, row in zip(candidates, dist, strict=True):
            same = [h for h in hints if _same_word(words[i], h)]
            best = int(np.argmin(row))
            if same:
                out[i] = same[0]
            elif row[best] <= self.type_distance and not _verb_of(words[i], hints[best]):
                out[i] = hints[best]
        return out


def _verb_of(word: str, hint: str) -> bool:
    """``word`` is the verb ``hint`` names the doer of ("write"/"writer", "direct"/"director",
    "act"/"actor"): it embeds near the type but says what was done — a relation word, not a type word."""
    word, hint = word.lower(), hint.lower()
    return any(hint == w + suffix for w in (word, singular(word)) for suffix in ("r", "er", "or"))


def _same_word(word: str, hint: str) -> bool:
    """``word`` is ``hint`` or its plural ("tags"/"tag", "countries"/"country")."""
    word, hint = word.lower(), hint.lower()
    return word in (hint, hint + "s", hint + "es") or (hint.endswith("y") and word == hint[:-1] + "ies")


def _distances(vectors: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """L2 distances between the rows of ``vectors`` and of ``targets``."""
    return np.asarray(np.linalg.norm(vectors[:, None, :] - targets[None, :, :], axis=2))


