"""Pattern → evidence: embed the pattern, find candidates by vector search, run the exact search.

:class:`SubgraphRetriever` turns a :class:`~simgrag.pattern.graph.Pattern` into a
:class:`Retrieval`: the top-k matched subgraphs as readable :class:`Evidence` (pattern node → KG
entity, pattern edge → KG triple in the KG's orientation, every distance) with per-stage timings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np

from simgrag.errors import MatchError, VectorIndexError
from simgrag.index.base import StoredVectors
from simgrag.index.directory import IndexDir, relation_text
from simgrag.index.lexical import NameTokenIndex
from simgrag.kg.store import Triple
from simgrag.match.answers import ANSWER_TOLERANCE, AnswerSet, answer_set, followed, oriented_first
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.kinds import KIND_PENALTY, KIND_PRIOR_MAX_ENTITIES, NodeKinds, kinds_of_examples
from simgrag.match.limits import (
    DEFAULT_DEADLINE_S,
    UNANCHORED_MAX_STEPS,
    Orientation,
    check_settings,
    deadline_of,
    unanchored_parts,
)
from simgrag.match.search import WITHIN_CAP, Distinct, Match, MatchSet, search_subgraphs, typed_pairs
from simgrag.pattern.graph import Pattern
from simgrag.pattern.validate import validate_pattern

__all__ = ["EdgeBinding", "Evidence", "Matching", "NodeBinding", "Retrieval", "RetrievalSettings", "SubgraphRetriever",
           "distinct_of"]

#: how pattern nodes may share entities (RetrievalSettings.matching)
Matching = Literal["injective", "typed", "homomorphic"]
MATCHINGS: tuple[str, ...] = ("injective", "typed", "homomorphic")

EXACT_NAME_MAX_ENTITIES = 2_000_000
#: name words (RetrievalSettings.name_words) are looked up only for KGs with more entities than this: on
#: MetaQA (43K names, HNSW recall@16 0.99) they cost 0.3 ms per query and changed no answer; at 10M
#: (IVF-PQ) they took planted Hits@1 from 0.71 to 0.89 (BENCHMARKS §10; the crossover is not measured)
NAME_WORDS_MIN_ENTITIES = 100_000
#: ... and this many of a node's nearest name-word candidates join however far they embed (a typo'd
#: "J. faiith" for *Jarburg faith*: the rest of the pattern singles it out; BENCHMARKS §13)
NAME_WORDS_KEPT = 16
JSON_ANSWERS = 200  # answers listed with their witness triples in JSON (every name is listed)
#: complete searches a retriever keeps to hand back for the same pattern and settings
#: (:meth:`SubgraphRetriever.retrieve`)
SEARCH_CACHE_SIZE = 64

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrievalSettings:
    """k: subgraphs returned; k_n / k_r / k_t: candidates per node / relation / type (App. C.1);
    deadline_s: seconds of graph search before the best matches so far are returned (``None``: no
    deadline); ``max_steps``: the same counted in search steps (``None``: no count) — a bound that, unlike
    seconds, does not depend on how busy the machine is (the pattern judge's searches use both). Invalid
    values raise :class:`~simgrag.errors.ConfigError` (see :mod:`simgrag.match.limits`).

    ``name_words``: a named node's candidates also include the entities whose names share its rare words
    (:mod:`simgrag.index.lexical`), at their embedding distances, where they are nearer than the vector
    index's ``k_n``-th — what an approximate index (IVF-PQ at millions of entities) overlooks — and the
    ``NAME_WORDS_KEPT`` nearest of them in any case (a typo'd name may embed far from its entity); not
    with an exact index, nor for KGs of up to ``NAME_WORDS_MIN_ENTITIES``.

    ``answer_tolerance``: also collect the answer set, every match whose GSD is within this of the best
    (:mod:`simgrag.match.answers`; ``None``: top-k only), at most ``answer_cap`` matches.

    ``matching``: ``"typed"`` (the default: nodes of one kind take distinct entities — a chain does not
    come back to the film it started from — while nodes of different kinds may share one, e.g. a
    writer who also directed; named nodes stay apart and the asked node is never an entity the
    question names: :func:`~simgrag.match.search.typed_pairs`), ``"injective"`` (all pattern nodes
    distinct: subgraph isomorphism, the paper's §4.2) or ``"homomorphic"`` (no constraint). On MetaQA's
    gold-structure patterns typed matching took 3-hop Hits@1 from 96.0 to 98.0 and answer recall from
    89.7 to 92.9 % (BENCHMARKS.md §9).

    ``orientation``: among the matches as good as the best, ``"follow"`` keeps in the answer set and the evidence only
    those that turn no more pattern edges round than the least-turned of them ("Calla's mother" written ``(Calla,
    mother, ?)`` is not answered with the children whose mother Calla is); ``"prefer"`` keeps the others after them
    (:mod:`simgrag.match.answers`). The search itself ignores direction either way (§4.2).

    ``kind_penalty``: a typed unknown node (``UNKNOWN person 1``) pays this distance for an entity the examples'
    patterns say is of another kind (:mod:`simgrag.match.kinds`; only where the retriever was given examples,
    :meth:`SubgraphRetriever.use_kinds`, and the KG has no entity types searched by ``k_t``); ``None``: no prior,
    every entity at 0 as in the paper."""

    k: int = 3
    k_n: int = 16
    k_r: int = 16
    k_t: int | None = None
    matching: Matching = "typed"
    algorithm: Literal["optimized", "naive"] = "optimized"
    deadline_s: float | None = DEFAULT_DEADLINE_S
    exact_names: bool = True
    name_words: bool = True
    answer_tolerance: float | None = ANSWER_TOLERANCE
    answer_cap: int = WITHIN_CAP
    max_steps: int | None = None
    kind_penalty: float | None = KIND_PENALTY
    orientation: Orientation = "follow"

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class NodeBinding:
    pattern_node: str
    entity: str
    entity_id: int
    distance: float
    unknown: bool
    iri: str | None = None  # the entity's IRI when the KG came from RDF


@dataclass(frozen=True)
class EdgeBinding:
    pattern_triple: tuple[str, str, str]
    triple: Triple
    triple_id: int
    distance: float
    iris: tuple[str | None, str | None, str | None] | None = None  # (head, relation, tail) IRIs, RDF KGs


@dataclass(frozen=True)
class Evidence:
    """One retrieved subgraph."""

    rank: int
    gsd: float
    nodes: tuple[NodeBinding, ...]
    edges: tuple[EdgeBinding, ...]

    def triples(self) -> list[Triple]:
        return [e.triple for e in self.edges]

    def binding(self, pattern_node: str) -> NodeBinding | None:
        return next((n for n in self.nodes if n.pattern_node == pattern_node), None)


@dataclass(frozen=True)
class Retrieval:
    pattern: Pattern
    evidence: tuple[Evidence, ...]
    complete: bool
    lower_bound: float
    timings: dict[str, float]
    algorithm: str
    combination: str
    candidate_counts: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    deadline_s: float | None = None  # the search's deadline (``complete`` is False when it was hit)
    answer_set: AnswerSet | None = None  # every answer as good as the best match (settings.answer_tolerance)
    node_floor: tuple[float, ...] = ()  # per pattern node, its nearest candidate's distance
    edge_floor: tuple[float, ...] = ()  # per pattern edge, its nearest candidate relation's distance
    reused: bool = False  # handed back from an earlier complete search (:meth:`SubgraphRetriever.retrieve`)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": [list(t) for t in self.pattern.triples()],
            "complete": self.complete,
            "reused": self.reused,
            "deadline_s": self.deadline_s,
            "lower_bound": None if np.isinf(self.lower_bound) else self.lower_bound,
            "algorithm": self.algorithm,
            "combination": self.combination,
            "timings": self.timings,
            "candidate_counts": self.candidate_counts,
            "steps": self.steps,
            "matches": [
                {
                    "rank": ev.rank,
                    "gsd": ev.gsd,
                    "nodes": [asdict(n) for n in ev.nodes],
                    "edges": [
                        {"pattern": list(e.pattern_triple), "triple": list(e.triple.as_tuple()),
                         "triple_id": e.triple_id, "distance": e.distance,
                         **({"iris": list(e.iris)} if e.iris is not None else {})}
                        for e in ev.edges
                    ],
                }
                for ev in self.evidence
            ],
            "answer_set": None if self.answer_set is None else self.answer_set.to_dict(max_answers=JSON_ANSWERS),
        }


def relation_query(text: str) -> str:
    """What a pattern's relation is embedded as: a relation written as a name (one word: ``has_capital``,
    ``birthPlace``) in the readable form the index embeds KG relation names in (``has capital``,
    :func:`~simgrag.index.directory.relation_text`), so that the KG's own name lies at distance 0; a
    phrase as written."""
    return relation_text(text) if len(text.split()) == 1 else text


class SubgraphRetriever:
    """SimGRAG's pattern-to-subgraph alignment over an opened index directory.

    ``relation_cache_size``: relation phrases whose nearest KG relations are kept; ``search_cache_size``: complete
    searches kept and handed back for the same pattern and settings (:meth:`retrieve`; 0: every call searches —
    what a benchmark timing the search wants)."""

    def __init__(self, index: IndexDir, *, relation_cache_size: int = 4096,
                 search_cache_size: int = SEARCH_CACHE_SIZE) -> None:
        if isinstance(search_cache_size, bool) or not isinstance(search_cache_size, int) or search_cache_size < 0:
            raise MatchError(f"search_cache_size must be a whole number >= 0, got {search_cache_size!r}")
        self.index = index
        self.store = index.store
        # whole searches repeat within a question (the channel's longer readings bind the asked-for node of the
        # pattern that is then searched for its evidence; the grounding fit runs each pattern in several
        # configurations): (pattern triples, settings but their limits, kind generation, KG size) → Retrieval
        self._searches: OrderedDict[tuple[Any, ...], Retrieval] = OrderedDict()
        self._search_cache_size = search_cache_size
        self._searches_lock = threading.Lock()
        self._kind_generation = 0
        # relation phrases repeat across queries: (text, k_r) → (relation ids, distances)
        self._relation_cache: OrderedDict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._relation_cache_size = relation_cache_size
        self._relation_lock = threading.Lock()
        self._name_words: NameTokenIndex | None = None
        self._name_words_lock = threading.Lock()
        self._kind_patterns: tuple[tuple[tuple[str, ...], ...], ...] = ()
        self._kinds: NodeKinds | None = None
        self._kinds_lock = threading.Lock()

    # ------------------------------------------------------------------ kinds
    def use_kinds(self, patterns: Iterable[Sequence[Sequence[str]]]) -> None:
        """Read the kinds of typed unknown nodes off these example patterns (:mod:`simgrag.match.kinds`; replaces
        any given before; none: no kind prior). Computed on the first search that needs them."""
        given = tuple(tuple(tuple(str(x) for x in t) for t in triples) for triples in patterns)
        with self._kinds_lock:
            if given != self._kind_patterns:
                self._kind_patterns, self._kinds = given, None
                self._kind_generation += 1  # searches made with the kinds before are not reused

    def kinds(self) -> NodeKinds | None:
        """The kinds of the example patterns given (:meth:`use_kinds`), or ``None``: none given, no typed unknown
        node in them, or a KG of more than :data:`~simgrag.match.kinds.KIND_PRIOR_MAX_ENTITIES` entities."""
        with self._kinds_lock:
            if self._kinds is None and self._kind_patterns and self.store.num_entities <= KIND_PRIOR_MAX_ENTITIES:
                self._kinds = kinds_of_examples(self.store, self._kind_patterns, self.nearest_relation)
                if self._kinds is None:
                    self._kind_patterns = ()  # nothing to learn from them: not read again
            return self._kinds

    # ------------------------------------------------------------------ candidates
    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.index.embedder.dim), dtype=np.float32)
        return self.index.embedder.encode(list(texts), show_progress=False)

    def name_words(self) -> NameTokenIndex:
        """The words of the KG's entity names (built on first use: ~1 s per million names)."""
        with self._name_words_lock:
            if self._name_words is None or self._name_words.num_names != self.store.num_entities:
                t0 = time.perf_counter()
                self._name_words = NameTokenIndex.build(self.store.entities)
                logger.info("name words of %d entities indexed in %.2f s (%.0f MB)", self.store.num_entities,
                            time.perf_counter() - t0, self._name_words.nbytes / 1e6)
            return self._name_words

    def _node_candidates(self, text: str, vector: np.ndarray, dists: np.ndarray, ids: np.ndarray,
                         settings: RetrievalSettings) -> NodeCandidates:
        ids, dists = ids[ids >= 0], dists[ids >= 0]
        if (settings.name_words and len(ids) and self.index.entity_index.kind != "exact"  # exact: nothing to add
                and self.store.num_entities > NAME_WORDS_MIN_ENTITIES):
            ids, dists = self._with_name_words(text, vector, ids, dists, settings.k_n)
        ids_list, dist_list = list(ids), list(dists)
        if settings.exact_names and self.store.num_entities <= EXACT_NAME_MAX_ENTITIES:
            exact = self.store.entity_id(text)
            if exact is not None:  # the entity named exactly so is an exact match: distance 0
                ids_list.append(exact)
                dist_list.append(0.0)
        if any(i >= self.store.num_entities for i in ids_list) or not np.isfinite(dist_list).all():
            raise VectorIndexError(f"The entity index answered {text!r} with ids outside the KG or NaN distances: "
                                   "it is corrupt; run `simgrag check INDEX_DIR` and rebuild the index")
        return NodeCandidates.from_pairs(ids_list, dist_list)

    def _with_name_words(self, text: str, vector: np.ndarray, ids: np.ndarray, dists: np.ndarray,
                         k_n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k_n`` nearest of the vector index's candidates and the name-word ones (which enter nearer
        than the vector index's last when it returned ``k_n``), and besides them the
        :data:`NAME_WORDS_KEPT` nearest name-word candidates, however far: a name that shares a rare word
        or two words with the text ("J. faiith" and *Jarburg faith*) may embed far from a typo'd text,
        and the rest of the pattern can still single it out (at its true distance)."""
        extra = self.name_words().lookup(text)
        extra = extra[(extra < len(self.index.entity_vectors)) & ~np.isin(extra, ids)]
        indptr = self.store.indptr
        extra = extra[indptr[extra + 1] > indptr[extra]]  # retired entities (live updates) have no triples
        if len(extra) == 0:
            return ids, dists
        rows = _entity_rows(self.index, extra)
        near = np.linalg.norm(rows - vector[None, :].astype(np.float32), axis=1).astype(np.float64)
        keep = near < float(dists.max()) if len(ids) >= k_n else np.ones(len(near), dtype=bool)
        merged_ids = np.concatenate([ids, extra[keep]])
        merged = np.concatenate([dists.astype(np.float64), near[keep]])
        order = np.lexsort((merged_ids, merged))[: max(k_n, len(ids))]
        merged_ids, merged = merged_ids[order], merged[order]
        nearest = np.lexsort((extra, near))[:NAME_WORDS_KEPT]  # in however far, unless the k_n cut kept it
        nearest = nearest[~np.isin(extra[nearest], merged_ids)]
        return np.concatenate([merged_ids, extra[nearest]]), np.concatenate([merged, near[nearest]])

    def _relation_candidates(self, vectors: np.ndarray, k_r: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query vector: the k_r nearest relations (a relation's distance: its nearest text)."""
        ri = self.index.relation_index
        dists, rows = ri.search(vectors, ri.ntotal)
        out = []
        for d_row, r_row in zip(dists, rows, strict=True):
            best = np.full(self.store.num_relations, np.inf)
            valid = r_row >= 0
            np.minimum.at(best, self.index.relation_owner[r_row[valid]], d_row[valid].astype(np.float64))
            order = np.argsort(best, kind="stable")[:k_r]
            order = order[np.isfinite(best[order])]
            out.append((order, best[order]))
        return out

    def nearest_relation(self, text: str) -> int | None:
        """The KG relation whose texts (name and aliases) are closest to the phrase ``text``."""
        query = relation_query(text)
        found = self._cached_relation_candidates([query], self._embed([query]), 1)[0][0]
        return int(found[0]) if len(found) else None

    def _cached_relation_candidates(self, texts: Sequence[str], vectors: np.ndarray,
                                    k_r: int) -> list[tuple[np.ndarray, np.ndarray]]:
        with self._relation_lock:  # the HTTP service retrieves from several threads
            known = {i: self._relation_cache.get((t, k_r)) for i, t in enumerate(texts)}
        missing = [i for i, found in known.items() if found is None]
        if missing:
            computed = self._relation_candidates(vectors[missing], k_r)
            with self._relation_lock:
                for i, found in zip(missing, computed, strict=True):
                    known[i] = self._relation_cache[(texts[i], k_r)] = found
                while len(self._relation_cache) > self._relation_cache_size:
                    self._relation_cache.popitem(last=False)
        return [known[i] for i in range(len(texts))]  # type: ignore[misc]

    def _typed_candidates(self, vector: np.ndarray, k_t: int) -> NodeCandidates:
        if self.index.type_index is None or self.index.type_owner is None:
            return NodeCandidates.anything()  # only called when the index has types
        dists, rows = self.index.type_index.search(vector[None, :], self.index.type_index.ntotal)
        best: dict[int, float] = {}
        for d, row in zip(dists[0], rows[0], strict=True):
            if row >= 0:
                t = int(self.index.type_owner[row])
                best[t] = min(best.get(t, np.inf), float(d))
        chosen = sorted(best.items(), key=lambda kv: (kv[1], kv[0]))[:k_t]
        if not chosen:
            return NodeCandidates.anything()
        return NodeCandidates.from_groups([(self.store.nodes_of_type(t), d) for t, d in chosen],
                                          self.store.num_entities)

    def candidates(self, pattern: Pattern, settings: RetrievalSettings,
                   timings: dict[str, float] | None = None) -> CandidateTable:
        """The filtering step (§5.1) for ``pattern``; fills ``timings`` (embed_s, vector_s)."""
        timings = {} if timings is None else timings
        use_types = settings.k_t is not None and self.index.type_index is not None
        known_nodes = [i for i, n in enumerate(pattern.nodes) if not n.unknown]
        typed_nodes = [i for i, n in enumerate(pattern.nodes) if n.unknown and n.type_hint and use_types]
        known_edges = [j for j, e in enumerate(pattern.edges) if not e.unknown]
        relations = [relation_query(pattern.edges[j].relation) for j in known_edges]
        texts = ([pattern.nodes[i].text for i in known_nodes] + relations
                 + [pattern.nodes[i].type_hint or "" for i in typed_nodes])
        t0 = time.perf_counter()
        vectors = self._embed(texts)
        t1 = time.perf_counter()
        nodes: list[NodeCandidates] = [NodeCandidates.anything() for _ in pattern.nodes]
        if known_nodes:
            k_n = min(settings.k_n, self.index.entity_index.ntotal)
            dists, ids = self.index.entity_index.search(vectors[: len(known_nodes)], k_n)
            for row, i in enumerate(known_nodes):
                nodes[i] = self._node_candidates(pattern.nodes[i].text, vectors[row], dists[row], ids[row],
                                                 settings)
        rel_vecs = vectors[len(known_nodes): len(known_nodes) + len(known_edges)]
        rel_found = self._cached_relation_candidates(relations, rel_vecs, settings.k_r)
        rels: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(pattern.edges)
        for j, found in zip(known_edges, rel_found, strict=True):
            rels[j] = found
        for row, i in enumerate(typed_nodes, start=len(known_nodes) + len(known_edges)):
            nodes[i] = self._typed_candidates(vectors[row], int(settings.k_t or 0))
        if settings.kind_penalty is not None and not use_types:
            self._kind_prior(pattern, nodes, settings.kind_penalty)
        timings["embed_s"] = t1 - t0
        timings["vector_s"] = time.perf_counter() - t1
        return CandidateTable.from_relation_pairs(nodes, rels, self.store.num_relations)

    def _kind_prior(self, pattern: Pattern, nodes: list[NodeCandidates], penalty: float) -> None:
        """Each typed unknown node's candidates with the kind prior (:mod:`simgrag.match.kinds`), in place."""
        typed = [i for i, n in enumerate(pattern.nodes) if n.unknown and n.type_hint and nodes[i].any_entity]
        kinds = self.kinds() if typed else None
        if kinds is None:
            return
        for i in typed:
            prior = kinds.candidates(str(pattern.nodes[i].type_hint), penalty)
            if prior is not None:
                nodes[i] = prior

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, pattern: Pattern | Sequence[Sequence[str]],
                 settings: RetrievalSettings | None = None) -> Retrieval:
        """Top-k subgraphs for ``pattern`` (a Pattern or a list of [head, relation, tail]).

        A search that ran to the end is exact, so it is kept (the last ``search_cache_size``) and handed back for the
        same pattern and settings — whatever their deadline or step cap, which only cut a search short — without
        searching again, marked ``reused``, with this call's timings (no search: only the look-up's ``total_s``). One
        cut short is never reused: a second try may get further."""
        settings = settings or RetrievalSettings()
        if not isinstance(settings, RetrievalSettings):
            raise MatchError(f"settings must be a RetrievalSettings, got {type(settings).__name__}")
        check_settings(settings)  # again: replace() on a frozen dataclass runs __post_init__, setattr does not
        if not isinstance(pattern, Pattern):
            pattern = Pattern.from_triples(pattern)
        validate_pattern(pattern)
        t0 = time.perf_counter()
        key = self._search_key(pattern, settings)
        with self._searches_lock:
            found = self._searches.get(key)
            if found is not None:
                self._searches.move_to_end(key)
        if found is not None:
            spent = {name: 0.0 for name in found.timings}
            spent["total_s"] = time.perf_counter() - t0
            return replace(found, pattern=pattern, timings=spent, deadline_s=deadline_of(settings.deadline_s),
                           reused=True)
        retrieval = self._search(pattern, settings)
        if retrieval.complete and self._search_cache_size:
            with self._searches_lock:
                self._searches[key] = retrieval
                while len(self._searches) > self._search_cache_size:
                    self._searches.popitem(last=False)
        return retrieval

    def _search_key(self, pattern: Pattern, settings: RetrievalSettings) -> tuple[Any, ...]:
        """What a search's result depends on: the pattern as written (its nodes' type words too), the settings but
        the limits that only cut it short, the kinds in use, and the KG's size (an index that grew in place)."""
        limits = replace(settings, deadline_s=None, max_steps=None)
        size = (self.store.num_entities, self.store.num_triples)
        return (tuple(pattern.triples()), limits, self._kind_generation, size)

    def _search(self, pattern: Pattern, settings: RetrievalSettings) -> Retrieval:
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        table = self.candidates(pattern, settings, timings)
        loose = unanchored_parts(pattern, table)
        if loose:
            logger.info("%s: no node narrower than 'any entity' (the KG has no entity types, or k_t is not set); "
                        "searched with at most %d steps", "; ".join(loose), UNANCHORED_MAX_STEPS)
        limit = deadline_of(settings.deadline_s)
        deadline = None if limit is None else max(0.0, limit - (time.perf_counter() - t0))
        caps = [cap for cap in (UNANCHORED_MAX_STEPS if loose else None, settings.max_steps) if cap is not None]
        steps_cap = min(caps) if caps else None
        t1 = time.perf_counter()
        within = settings.answer_tolerance if pattern.asked_node() is not None else None
        result = search_subgraphs(self.store, pattern, table, k=settings.k,
                                  injective=distinct_of(settings, pattern, table),
                                  algorithm=settings.algorithm, deadline_s=deadline,
                                  max_steps=steps_cap, within=within, within_cap=settings.answer_cap)
        timings["graph_s"] = time.perf_counter() - t1
        order = followed if settings.orientation == "follow" else oriented_first
        found = answers = None
        if result.within is not None:
            found = order(self.store, pattern, result.within)
            answers = answer_set(self.store, pattern, found, turned_out=len(result.within) - len(found))
        timings["answers_s"] = time.perf_counter() - t1 - timings["graph_s"]
        timings["total_s"] = time.perf_counter() - t0
        counts = {n.text: c.count(self.store.num_entities) for n, c in zip(pattern.nodes, table.nodes, strict=True)}
        if not result.complete:
            why = f"its deadline of {limit} s"
            if steps_cap is not None and result.steps >= steps_cap:
                why = (f"its cap of {steps_cap:,} steps for parts without a named node" if loose
                       and steps_cap == UNANCHORED_MAX_STEPS else f"its max_steps of {steps_cap:,}")
            logger.warning("the graph search stopped at %s after %d steps: best matches so far, any better one "
                           "has GSD >= %.4f", why, result.steps, result.lower_bound)
        return Retrieval(pattern, self._evidence(pattern, _best_first(result.matches, found, settings.k)),
                         result.complete, result.lower_bound,
                         timings, result.algorithm, result.combination, counts, result.steps, limit, answers,
                         tuple(c.min_dist() for c in table.nodes),
                         tuple(table.rel_min(e) for e in range(len(pattern.edges))))

    def _evidence(self, pattern: Pattern, matches: Sequence[Match]) -> tuple[Evidence, ...]:
        return tuple(self.evidence_of(pattern, m, rank) for rank, m in enumerate(matches, start=1))

    def evidence_of(self, pattern: Pattern, match: Match, rank: int = 1) -> Evidence:
        ents, iris = self.store.entities, self.store.iris
        nodes = tuple(
            NodeBinding(p.text, ents[v], v, d, p.unknown, iris.entity(v) if iris is not None else None)
            for p, v, d in zip(pattern.nodes, match.nodes, match.node_dists, strict=True)
        )
        triples = pattern.triples()
        edges = tuple(
            EdgeBinding(triples[j], self.store.triple(t), t, d, self._triple_iris(t))
            for j, (t, d) in enumerate(zip(match.triples, match.edge_dists, strict=True))
        )
        return Evidence(rank, match.gsd, nodes, edges)

    def _triple_iris(self, tid: int) -> tuple[str | None, str | None, str | None] | None:
        iris = self.store.iris
        if iris is None:
            return None
        return (iris.entity(int(self.store.heads[tid])), iris.relation(int(self.store.rels[tid])),
                iris.entity(int(self.store.tails[tid])))


def _best_first(matches: Sequence[Match], found: MatchSet | None, k: int) -> tuple[Match, ...]:
    """The top-k ``matches`` with those as good as the best taken from ``found`` in its order
    (:func:`~simgrag.match.answers.oriented_first`: the ones following the pattern's edge directions
    first; :func:`~simgrag.match.answers.followed` leaves the others out), so the evidence leads with the
    subgraph the answer set leads with and shows no match the answer set dropped."""
    if found is None or not len(found):
        return tuple(matches)
    band = int(np.count_nonzero(found.as_good_as_best(ANSWER_TOLERANCE)))  # ``found``'s first rows
    lead = [found.match(i) for i in range(min(k, band))]
    cut = found.best + ANSWER_TOLERANCE
    return tuple([*lead, *(m for m in matches if m.gsd > cut)][:k])


def distinct_of(settings: RetrievalSettings, pattern: Pattern, table: CandidateTable) -> Distinct:
    """The search's ``injective`` argument for ``settings.matching`` on ``pattern``; typed matching reads
    an edge's relation as its nearest candidate relation (``table``), so paraphrases agree."""
    if settings.matching == "typed":
        keys: list[object] = [edge.relation.lower() if edge.unknown or not np.isfinite(table.rel_dists[e]).any()
                               else _nearest_relations(table.rel_dists[e]) for e, edge in enumerate(pattern.edges)]
        return typed_pairs(pattern, keys)
    return settings.matching == "injective"


#: candidate relations this close to an edge's nearest count as equally near (two layouts of the same vectors round
#: differently)
RELATION_TIE = 1e-5


def _nearest_relations(dists: np.ndarray) -> frozenset[int]:
    """The KG relations nearest an edge's text: all of them where several tie, so the key does not depend on the
    order in which the index numbered its relations (an updated index and a rebuild number them differently)."""
    best = float(np.min(dists))
    return frozenset(int(r) for r in np.flatnonzero(dists <= best + RELATION_TIE))


def _entity_rows(index: IndexDir, ids: np.ndarray) -> np.ndarray:
    """The embeddings of entities ``ids`` (ascending): from the entity index's in-memory copy when it
    keeps one (IVF-PQ's 8-bit re-ranking codes: no reads of the vectors file), else the vectors file."""
    entity_index = getattr(index.entity_index, "inner", index.entity_index)  # a LiveEntityIndex wraps one
    if isinstance(entity_index, StoredVectors) and entity_index.holds_vectors:
        return entity_index.vectors_of(ids)
    return np.asarray(index.entity_vectors[ids], dtype=np.float32)
