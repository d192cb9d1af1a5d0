"""G-Retriever's subgraph retrieval (He et al., 2024, §4.2; OKGQA §4.1 "sub-graph retrieval"):
a Prize-Collecting Steiner Tree over the topic entities' 2-hop neighbourhood.

1. Neighbourhood: the triples within ``hops`` of the topic entities (at most ``max_triples``).
2. Prizes: the ``k_nodes`` entities whose names are most cosine-similar to the question get
   ``k_nodes − rank`` (rank 0 = most similar: ``k, k−1, …, 1``), every other entity 0; likewise the
   ``k_edges`` triples whose verbalization is most similar get ``k_edges − rank``.
3. Costs: every edge costs ``cost_e`` (G-Retriever's default 0.5).
4. Edge prizes the G-Retriever way: an edge whose prize ``p`` does not exceed ``cost_e`` costs
   ``cost_e − p``; one whose prize exceeds it becomes a *virtual node* with prize ``p − cost_e``,
   joined to both of its entities by zero-cost edges, so the tree can take the triple for its prize.
5. Solve with ``pcst_fast`` (Goemans-Williamson, pruning ``"gw"``, one tree). G-Retriever runs it
   unrooted on a graph already centred on the topic; we *root* it at the first topic entity, so the
   returned subgraph always contains the topic, and give further topic entities the top node prize.
6. The triples of the tree (regular edges taken, virtual nodes taken) are the context, most similar
   to the question first. They form one connected subgraph containing the root.

G-Retriever also spreads tied edge prizes and lowers ``cost_e`` below the largest edge prize; with
distinct integer prizes ``≥ 1 > cost_e`` both are no-ops, so they are left out.

``pcst_fast`` 1.0.10 (the ``pcst-fast`` wheel) returns wrong node/edge ids under numpy ≥ 2; the
``pcst-fast2`` fork installs the same module correctly. :func:`pcst_solver` checks the solver on a
small known instance before first use and says how to fix a broken one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from simgrag.errors import ConfigError
from simgrag.index.directory import IndexDir
from simgrag.retrievers._graph import DEFAULT_MAX_TRIPLES, Neighbourhood, TripleEncoder, cosine, k_hop, top_k
from simgrag.retrievers.base import RetrievedContext, TopicEntities
from simgrag.retrievers.linking import EntityLinker, TopicRetriever

__all__ = ["PCSTProblem", "PCSTRetriever", "build_problem", "pcst_solver", "rank_prizes"]

Solver = Callable[..., tuple[np.ndarray, np.ndarray]]


@cache
def pcst_solver() -> Solver:
    """``pcst_fast.pcst_fast``, checked once on an instance with a known answer."""
    try:
        from pcst_fast import pcst_fast
    except ImportError as exc:
        raise ConfigError("The pcst retriever needs pcst_fast: pip install 'simgrag[bench]'") from exc
    edges = np.array([[0, 1], [1, 2], [2, 3], [0, 4]], dtype=np.int64)
    nodes, chosen = pcst_fast(edges, np.array([0, 3, 0, 0, 3.0]), np.ones(4), -1, 1, "gw", 0)
    if sorted(nodes.tolist()) != [0, 1, 4] or sorted(chosen.tolist()) != [0, 3]:
        raise ConfigError("The installed pcst_fast returns wrong results (pcst-fast 1.0.10 with numpy >= 2). "
                          "Replace it: pip uninstall -y pcst-fast && pip install pcst-fast2")
    return pcst_fast  # type: ignore[no-any-return]


def rank_prizes(similarities: np.ndarray, k: int) -> np.ndarray:
    """``k − rank`` for the ``k`` most similar items (``k, k−1, …, 1``), 0 for the rest."""
    prizes = np.zeros(len(similarities), dtype=np.float64)
    best = top_k(similarities, k)
    prizes[best] = k - np.arange(len(best), dtype=np.float64)
    return prizes


@dataclass(frozen=True)
class PCSTProblem:
    """The solver's input: ``edges`` over local node ids (entities ``0..n−1``, then virtual nodes),
    their ``costs``, node ``prizes``; ``edge_triple[i]``/``virtual_triple[j]``: the neighbourhood
    position of the triple behind edge ``i``/virtual node ``n + j``."""

    edges: np.ndarray
    costs: np.ndarray
    prizes: np.ndarray
    num_entities: int
    edge_triple: np.ndarray
    virtual_triple: np.ndarray


def build_problem(heads: np.ndarray, tails: np.ndarray, node_prizes: np.ndarray, edge_prizes: np.ndarray,
                  cost_e: float) -> PCSTProblem:
    """The PCST instance of step 4 of the module docstring; ``heads``/``tails`` are local node ids."""
    n = len(node_prizes)
    virtual = np.flatnonzero(edge_prizes > cost_e)
    plain = np.flatnonzero((edge_prizes <= cost_e) & (heads != tails))  # a costly self-loop never pays
    v_ids = n + np.arange(len(virtual), dtype=np.int64)
    edges = np.concatenate([
        np.stack([heads[plain], tails[plain]], axis=1),
        np.stack([heads[virtual], v_ids], axis=1),
        np.stack([v_ids, tails[virtual]], axis=1),
    ]).astype(np.int64)
    costs = np.concatenate([cost_e - edge_prizes[plain], np.zeros(2 * len(virtual))])
    prizes = np.concatenate([node_prizes, edge_prizes[virtual] - cost_e]).astype(np.float64)
    edge_triple = np.concatenate([plain, virtual, virtual]).astype(np.int64)
    return PCSTProblem(edges, costs.astype(np.float64), prizes, n, edge_triple, virtual.astype(np.int64))


def solve(problem: PCSTProblem, root: int) -> np.ndarray:
    """Neighbourhood positions of the triples in the solver's tree (sorted, unique)."""
    if len(problem.edges) == 0:
        return np.zeros(0, dtype=np.int64)
    nodes, edges = pcst_solver()(problem.edges, problem.prizes, problem.costs, root, 1, "gw", 0)
    nodes = np.asarray(nodes, dtype=np.int64)
    chosen_virtual = problem.virtual_triple[nodes[nodes >= problem.num_entities] - problem.num_entities]
    chosen_edges = problem.edge_triple[np.asarray(edges, dtype=np.int64)]
    return np.unique(np.concatenate([chosen_edges, chosen_virtual]))


class PCSTRetriever(TopicRetriever):
    """G-Retriever's PCST subgraph over the topic entities' neighbourhood (see the module docstring).

    Defaults follow G-Retriever's WebQSP setting: top-3 node prizes, top-5 edge prizes, edge cost 0.5.
    """

    name = "pcst"

    def __init__(self, index: IndexDir, *, k_nodes: int = 3, k_edges: int = 5, cost_e: float = 0.5, hops: int = 2,
                 max_triples: int = DEFAULT_MAX_TRIPLES, encoder: TripleEncoder | None = None,
                 linker: EntityLinker | None = None) -> None:
        super().__init__(index, linker)
        self.k_nodes = k_nodes
        self.k_edges = k_edges
        self.cost_e = cost_e
        self.hops = hops
        self.max_triples = max_triples
        self.encoder = encoder or TripleEncoder(index)

    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        """The PCST subgraph's triples, most similar to the question first."""
        t_link = time.perf_counter()
        hood = k_hop(self.index.store, topic.ids, hops=self.hops, max_triples=self.max_triples)
        q = self.encoder.encode_question(question)
        triple_sims = cosine(q, self.encoder.encode_triples(hood.triple_ids))
        problem, local = self._problem(q, hood, triple_sims, topic.ids)
        t_prizes = time.perf_counter()
        picked = solve(problem, local[int(topic.ids[0])])
        picked = picked[np.argsort(-triple_sims[picked], kind="stable")]
        end = time.perf_counter()
        store = self.index.store
        return RetrievedContext(
            retriever=self.name, question=question,
            triples=tuple(store.triple(int(hood.triple_ids[i])) for i in picked), topic=topic,
            scores=tuple(float(triple_sims[i]) for i in picked),
            timings={"prizes_s": t_prizes - t_link, "pcst_s": end - t_prizes},
            info=self._info(hood, problem),
        )

    def _problem(self, q: np.ndarray, hood: Neighbourhood, triple_sims: np.ndarray,
                 topic_ids: Sequence[int]) -> tuple[PCSTProblem, dict[int, int]]:
        store = self.index.store
        local = {int(v): i for i, v in enumerate(hood.nodes)}
        node_sims = cosine(q, np.asarray(self.index.entity_vectors[hood.nodes]))
        node_prizes = rank_prizes(node_sims, self.k_nodes)
        for extra in topic_ids[1:]:
            node_prizes[local[int(extra)]] += self.k_nodes
        tids = hood.triple_ids
        heads = np.array([local[int(h)] for h in store.heads[tids]], dtype=np.int64)
        tails = np.array([local[int(t)] for t in store.tails[tids]], dtype=np.int64)
        edge_prizes = rank_prizes(triple_sims, self.k_edges)
        return build_problem(heads, tails, node_prizes, edge_prizes, self.cost_e), local

    @staticmethod
    def _info(hood: Neighbourhood, problem: PCSTProblem) -> dict[str, Any]:
        return {"candidates": len(hood.triple_ids), "nodes": len(hood.nodes), "truncated": hood.truncated,
                "virtual_nodes": len(problem.virtual_triple)}
