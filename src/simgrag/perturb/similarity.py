"""How far a perturbed KG 𝒢′ is from 𝒢: ATS, SC2D and SD2 (OKGQA §3.2 and App. A.7, after Raman et
al., 2020). Higher is more similar for all three.

- **ATS** (aggregated triple score), semantic: f_ATS(𝒢, 𝒢′) = (1/|𝒯′|) Σ_{(h,r,t)∈𝒯′} s_𝒢(h, r, t),
  the mean plausibility of 𝒢′'s edges under a scorer trained on 𝒢 (:mod:`simgrag.perturb.scorer`).
  Normalization: none beyond the scorer's own — s_𝒢 is a sigmoid probability, so ATS ∈ [0, 1], and,
  as the paper notes, f_ATS(𝒢, 𝒢) is the scorer's mean on its own training triples, not 1. An empty
  𝒯′ (every edge deleted) gives 0. Entities and relations of 𝒢′ unknown to the scorer score 0.
- **SC2D**, structural: for every relation r, cʳ is the |𝒱|-vector of local clustering coefficients
  cᵢ = 2·Tri(i) / (deg(i)·(deg(i) − 1)) of the subgraph 𝒢ʳ of r's edges, taken as a simple undirected
  graph (direction, repeated pairs and self-loops ignored; cᵢ = 0 when deg(i) < 2). c_o is the mean of
  cʳ over the relations of 𝒢, c_p over those of 𝒢′ (a relation with no edge left no longer counts).
  f_SC2D = 1 − ‖c_o − c_p‖₂ / (‖c_o − c_p‖₂ + 1).
- **SD2**, structural: the same with dʳ, the degree vector of 𝒢ʳ (the number of r-edges at each
  entity, a self-loop counting twice). Since Σ_r dʳ is the whole KG's degree vector, d_o is simply
  deg_𝒢 / |ℛ|: SD2 does not see which relation an edge carries, so relation swapping and relation
  replacement leave it at 1 (unless a relation disappears, which changes |ℛ′|).

Both vectors are indexed by the sorted union of the two KGs' entity names (the order does not change
a Euclidean distance; KGs sharing one entity table, as a :class:`Perturbation` and its original do,
skip the name matching). Clustering coefficients use scipy sparse products over each relation's
subgraph with edges oriented from lower to higher degree, so no hub's neighbourhood is squared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simgrag.errors import ConfigError
from simgrag.kg.store import KGStore
from simgrag.perturb.base import Perturbation, TripleScorer

__all__ = [
    "KGSimilarity",
    "ats",
    "clustering_coefficients",
    "kg_similarity",
    "mean_clustering_vector",
    "mean_degree_vector",
    "sc2d",
    "sd2",
]

KGLike = KGStore | Perturbation
_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class KGSimilarity:
    """ATS (``None`` without a scorer), SC2D and SD2 of 𝒢′ against 𝒢, and ATS of 𝒢 itself for scale."""

    sc2d: float
    sd2: float
    ats: float | None = None
    ats_original: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _arrays(g: KGLike) -> _Arrays:
    return (np.asarray(g.heads, dtype=np.int64), np.asarray(g.rels, dtype=np.int64),
            np.asarray(g.tails, dtype=np.int64))


def _tables(g: KGLike) -> KGStore:
    return g.original if isinstance(g, Perturbation) else g


# ------------------------------------------------------------------------------------------ ATS
def ats(scorer: TripleScorer, g: KGLike, *, trained_on: KGStore | None = None, chunk: int = 65536) -> float:
    """Mean s_𝒢 over the triples of ``g``.

    ``trained_on`` is the store whose ids the scorer knows; when ``g`` uses other tables (a KG read
    back from a file), its triples are mapped to those ids by name first.
    """
    heads, rels, tails = _arrays(g)
    if trained_on is not None and _tables(g).entities is not trained_on.entities:
        heads, rels, tails = _map_ids(_tables(g), trained_on, heads, rels, tails)
    if len(heads) == 0:
        return 0.0
    total = 0.0
    known = (heads >= 0) & (rels >= 0) & (tails >= 0)
    h, r, t = heads[known], rels[known], tails[known]
    for s in range(0, len(h), chunk):
        total += float(np.sum(scorer.score(h[s:s + chunk], r[s:s + chunk], t[s:s + chunk])))
    return total / len(heads)


def _map_ids(src: KGStore, dst: KGStore, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> _Arrays:
    ent = np.array([-1 if (i := dst.entities.id_of(name)) is None else i for name in src.entities], dtype=np.int64)
    rel = np.array([-1 if (i := dst.relations.id_of(name)) is None else i for name in src.relations], dtype=np.int64)
    return ent[heads], rel[rels], ent[tails]


# ------------------------------------------------------------------------------------------ vectors
def clustering_coefficients(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Local clustering coefficients of the simple undirected graph on ``n`` nodes with edges (u, v)."""
    keep = u != v
    a, b = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
    pairs = np.unique(a * n + b)
    a, b = pairs // n, pairs % n
    deg = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    if len(pairs) == 0:
        return np.zeros(n)
    nodes, local = np.unique(np.concatenate([a, b]), return_inverse=True)  # compact ids of touched nodes
    la, lb = local[: len(a)], local[len(a):]
    rank = np.lexsort((nodes, deg[nodes]))  # by degree, then id
    pos = np.empty(len(nodes), dtype=np.int64)
    pos[rank] = np.arange(len(nodes))
    lo, hi = np.where(pos[la] < pos[lb], la, lb), np.where(pos[la] < pos[lb], lb, la)
    m = len(nodes)
    low = _sparse().csr_matrix((np.ones(len(lo)), (lo, hi)), shape=(m, m))  # low → high degree
    # triangle x < y < z (by rank) with edges x→y, x→z, y→z: counted once in each product below
    t_xz = low.multiply(low @ low)  # at (x, z): the y's between
    t_yz = low.multiply(low.T @ low)  # at (y, z): the x's below
    tri = (np.asarray(t_xz.sum(axis=1)).ravel() + np.asarray(t_xz.sum(axis=0)).ravel()
           + np.asarray(t_yz.sum(axis=1)).ravel())
    d = deg[nodes].astype(np.float64)
    coef = np.zeros(n)
    coef[nodes] = np.divide(2.0 * tri, d * (d - 1), out=np.zeros(m), where=d > 1)
    return coef


def mean_clustering_vector(n: int, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """(1/|ℛ|) Σ_r cʳ over the relations that have edges."""
    total = np.zeros(n)
    present = np.unique(rels)
    order = np.argsort(rels, kind="stable")
    bounds = [*np.searchsorted(rels[order], present, side="left").tolist(), len(rels)]
    for i in range(len(present)):
        rows = order[bounds[i]:bounds[i + 1]]
        total += clustering_coefficients(n, heads[rows], tails[rows])
    return total / max(len(present), 1)


def mean_degree_vector(n: int, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """(1/|ℛ|) Σ_r dʳ = deg / |ℛ| over the relations that have edges."""
    deg = np.bincount(heads, minlength=n) + np.bincount(tails, minlength=n)
    return deg / max(len(np.unique(rels)), 1)


def _aligned(g: KGLike, g2: KGLike) -> tuple[int, _Arrays, _Arrays]:
    """Both KGs' triples over one node index: the shared table, or the sorted union of entity names."""
    t1, t2 = _tables(g), _tables(g2)
    a1, a2 = _arrays(g), _arrays(g2)
    if t1.entities is t2.entities:
        return t1.num_entities, a1, a2
    union = sorted(set(t1.entities) | set(t2.entities))
    index = {name: i for i, name in enumerate(union)}
    m1 = np.array([index[name] for name in t1.entities], dtype=np.int64)
    m2 = np.array([index[name] for name in t2.entities], dtype=np.int64)
    return len(union), (m1[a1[0]], a1[1], m1[a1[2]]), (m2[a2[0]], a2[1], m2[a2[2]])


def _similarity(distance: float) -> float:
    return 1.0 - distance / (distance + 1.0)


def sc2d(g: KGLike, g2: KGLike) -> float:
    """Similarity in clustering-coefficient distribution, 1 − d/(d+1) ∈ (0, 1]."""
    n, a1, a2 = _aligned(g, g2)
    return _similarity(float(np.linalg.norm(mean_clustering_vector(n, *a1) - mean_clustering_vector(n, *a2))))


def sd2(g: KGLike, g2: KGLike) -> float:
    """Similarity in degree distribution, 1 − d/(d+1) ∈ (0, 1]."""
    n, a1, a2 = _aligned(g, g2)
    return _similarity(float(np.linalg.norm(mean_degree_vector(n, *a1) - mean_degree_vector(n, *a2))))


def kg_similarity(g: KGStore, g2: KGLike, *, scorer: TripleScorer | None = None) -> KGSimilarity:
    """SC2D and SD2 of ``g2`` against ``g``, and with a scorer trained on ``g`` also ATS (of both)."""
    if scorer is None:
        return KGSimilarity(sc2d=sc2d(g, g2), sd2=sd2(g, g2))
    return KGSimilarity(sc2d=sc2d(g, g2), sd2=sd2(g, g2), ats=ats(scorer, g2, trained_on=g),
                        ats_original=ats(scorer, g))


def _sparse() -> Any:
    """``scipy.sparse``, a ``simgrag[bench]`` dependency."""
    try:
        import scipy.sparse
    except ImportError as exc:
        raise ConfigError("KG similarity metrics need scipy: pip install 'simgrag[bench]'.") from exc
    return scipy.sparse
