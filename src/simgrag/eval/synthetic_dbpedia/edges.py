"""Relation edges, chunk by chunk, as numpy arrays.

For the entities of one chunk (a contiguous id range):

1. out-degrees are ``1 + floor(X)``, X log-normal, capped; the log-normal's location is solved so
   the mean out-degree is exactly the one asked for (DBpedia as used by FactKG: 42.9M / 9.9M ≈ 4.33);
2. each edge's relation is drawn among the relations whose domain is the head's class or an
   ancestor, weighted by popularity (earlier in ``relations.txt`` within a domain, deeper domains
   more specific and so preferred);
3. the tail is drawn from the relation's range class (a contiguous id range, see
   :mod:`~simgrag.eval.synthetic_dbpedia.layout`) by *popularity rank* ``floor(n * u**skew)`` mapped
   through a fixed per-class permutation: a few entities of each class (the "United States" of
   countries) get a large share of the in-links, so total degree is heavy-tailed; or, for a literal
   relation, a date, year or number is drawn.

Every chunk has its own random stream, so chunks are reproducible one by one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simgrag.errors import ConfigError
from simgrag.eval.synthetic_dbpedia.layout import Layout
from simgrag.eval.synthetic_dbpedia.names import CHUNK, class_segments
from simgrag.eval.synthetic_dbpedia.schema import RelationSpec, Schema

__all__ = ["EdgeChunk", "EdgeModel", "lognormal_location"]

_PRIME = 2_654_435_761  # multiplier of the popularity permutation (prime, larger than any class)


@dataclass(frozen=True)
class EdgeChunk:
    """Edges of one chunk: entity edges (``tails >= 0``) and literal edges (``tails == -1``).

    ``literals`` holds the lexical values of the literal edges, in row order.
    """

    heads: np.ndarray
    rels: np.ndarray
    tails: np.ndarray
    literals: list[str]

    def __len__(self) -> int:
        return len(self.heads)


def lognormal_location(mean_degree: float, sigma: float, max_degree: int) -> float:
    """The ``mu`` for which ``min(1 + floor(lognormal(mu, sigma)), max_degree)`` has mean ``mean_degree``."""
    if not 1.0 < mean_degree < max_degree:
        raise ConfigError(f"mean degree must be between 1 and {max_degree}; got {mean_degree}")
    log_k = [math.log(k) for k in range(1, max_degree)]
    scale = sigma * math.sqrt(2)

    def mean(mu: float) -> float:  # 1 + sum_k P(X >= k)
        return 1.0 + sum(0.5 * math.erfc((lk - mu) / scale) for lk in log_k)

    lo, hi = -10.0, math.log(max_degree)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean(mid) < mean_degree else (lo, mid)
    return (lo + hi) / 2


class EdgeModel:
    """Samples the edges of the KG (see module docstring)."""

    def __init__(self, schema: Schema, layout: Layout, seed: int, *, mean_degree: float = 4.33,
                 degree_sigma: float = 1.1, max_degree: int = 5000, tail_skew: float = 2.5) -> None:
        self.schema, self.layout, self.seed = schema, layout, seed
        self.mu = lognormal_location(mean_degree, degree_sigma, max_degree)
        self.sigma, self.max_degree, self.tail_skew = degree_sigma, max_degree, tail_skew
        rels = schema.relations
        self.range_class = np.array([r.range for r in rels], dtype=np.int64)
        self.is_literal = self.range_class < 0
        self.offsets = np.random.default_rng([seed, 3]).integers(0, 1 << 31, size=schema.num_classes)
        self._tables = self._relation_tables()

    def _relation_tables(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per class: the relations that apply to it and their cumulative probabilities."""
        schema = self.schema
        by_domain: dict[int, list[int]] = {}
        for i, rel in enumerate(schema.relations):
            by_domain.setdefault(rel.domain, []).append(i)
        weight = np.zeros(len(schema.relations))
        for domain, ids in by_domain.items():
            boost = 1.0 + schema.classes[domain].depth
            weight[ids] = boost / np.arange(1, len(ids) + 1)
        self.weight = weight
        tables: list[tuple[np.ndarray, np.ndarray]] = []
        for c in range(schema.num_classes):
            found = [i for a in schema.ancestors(c) for i in by_domain.get(a, [])]
            if not found:
                raise ConfigError(f"class {schema.classes[c].name} has no relation; ask for more relations")
            cum = np.cumsum(weight[found])
            tables.append((np.array(found, dtype=np.int32), cum / cum[-1]))
        return tables

    def degrees(self, count: int, rng: np.random.Generator) -> np.ndarray:
        x = rng.lognormal(self.mu, self.sigma, size=count)
        return np.minimum(1 + np.floor(x), self.max_degree).astype(np.int64)

    def popular(self, c: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` entities of class ``c`` (or a subclass), popular ones more often."""
        start, end = self.layout.subtree(c)
        n = end - start
        rank = np.minimum(np.floor(n * rng.random(count) ** self.tail_skew).astype(np.int64), n - 1)
        return start + (rank * _PRIME + int(self.offsets[c])) % n

    def chunks(self, *, start_chunk: int = 0) -> Iterator[EdgeChunk]:
        """Every chunk's edges, in id order."""
        n = self.layout.num_entities
        for k in range(start_chunk, (n + CHUNK - 1) // CHUNK):
            yield self.chunk(k)

    def chunk(self, k: int) -> EdgeChunk:
        rng = np.random.default_rng([self.seed, 4, k])
        start, end = k * CHUNK, min(self.layout.num_entities, (k + 1) * CHUNK)
        deg = self.degrees(end - start, rng)
        heads = np.repeat(np.arange(start, end, dtype=np.int64), deg)
        rels = np.empty(len(heads), dtype=np.int32)
        edge_start = np.concatenate([[0], np.cumsum(deg)])
        for c, s, e in class_segments(self.layout, start, end):
            a, b = edge_start[s - start], edge_start[e - start]
            ids, cum = self._tables[c]
            rels[a:b] = ids[np.minimum(np.searchsorted(cum, rng.random(b - a)), len(ids) - 1)]
        return self.edges(heads, rels, rng)

    def edges(self, heads: np.ndarray, rels: np.ndarray, rng: np.random.Generator) -> EdgeChunk:
        """Tails (and literal values) for given heads and relations; literal edges go last."""
        literal = self.is_literal[rels]
        ent_h, ent_r = heads[~literal], rels[~literal]
        tails = np.empty(len(ent_h), dtype=np.int64)
        ranges = self.range_class[ent_r]
        order = np.argsort(ranges, kind="stable")
        bounds = np.searchsorted(ranges[order], np.unique(ranges), side="right")
        lo = 0
        for c, hi in zip(np.unique(ranges).tolist(), bounds.tolist(), strict=True):
            tails[order[lo:hi]] = self.popular(c, hi - lo, rng)
            lo = hi
        lit_h, lit_r = heads[literal], rels[literal]
        values = self.literal_values(lit_r, rng)
        return EdgeChunk(np.concatenate([ent_h, lit_h]), np.concatenate([ent_r, lit_r]),
                         np.concatenate([tails, np.full(len(lit_h), -1, dtype=np.int64)]), values)

    def literal_values(self, rels: np.ndarray, rng: np.random.Generator) -> list[str]:
        out: list[str] = [""] * len(rels)
        for r in np.unique(rels).tolist():
            rows = np.flatnonzero(rels == r)
            for row, value in zip(rows.tolist(), _literals(self.schema.relations[r], len(rows), rng), strict=True):
                out[row] = value
        return out


def _years(count: int, rng: np.random.Generator, bounds: tuple[float, float] | None) -> np.ndarray:
    if bounds is not None:
        return rng.integers(int(bounds[0]), int(bounds[1]) + 1, size=count)
    return (2023 - np.floor(223 * rng.random(count) ** 1.6)).astype(np.int64)  # 1800..2023, recent ones more


def _literals(rel: RelationSpec, count: int, rng: np.random.Generator) -> list[str]:
    kind, bounds = rel.literal, rel.bounds
    if kind == "year":
        return [str(y) for y in _years(count, rng, bounds).tolist()]
    if kind == "date":
        ymd = zip(_years(count, rng, bounds).tolist(), rng.integers(1, 13, count).tolist(),
                  rng.integers(1, 29, count).tolist(), strict=True)
        return [f"{y:04d}-{m:02d}-{d:02d}" for y, m, d in ymd]
    if kind == "count":
        return [str(v) for v in np.floor(rng.lognormal(7.0, 2.0, count)).astype(np.int64).tolist()]
    if kind == "number":
        if bounds is not None:
            return [str(v) for v in rng.integers(int(bounds[0]), int(bounds[1]) + 1, count).tolist()]
        return [str(v) for v in np.minimum(1 + np.floor(rng.lognormal(1.5, 1.0, count)), 9999).astype(int).tolist()]
    values = rng.uniform(bounds[0], bounds[1], count) if bounds is not None else rng.lognormal(3.0, 1.5, count)
    return [f"{v:.2f}" for v in values.tolist()]
