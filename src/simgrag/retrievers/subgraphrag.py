"""SubgraphRAG (Li et al., ICLR 2025, §3.1): a small MLP scores every triple near the topic entities;
the top-K triples are the retrieved subgraph.

Per question:

1. Topic entities: the given names, or linked by :class:`EntityLinker` (``topic.source`` says which).
2. Candidates: the triples within ``hops`` (2) hops of the topic entities, at most
   ``max_candidates`` (3000), shared fairly between nodes when a hub would exceed it
   (:func:`~simgrag.retrievers.neighborhood.neighborhood_triples`).
3. Directional Distance Encoding (DDE) on the candidate subgraph: ``s⁰`` one-hot (topic, not topic);
   ``sˡ⁺¹(e)`` the mean of ``sˡ`` over the heads of triples *into* e; the reverse rounds ``sʳ'ˡ⁺¹(e)``
   the mean over the tails of triples *out of* e (``sʳ'⁰ = s⁰``); a node without such triples gets 0.
   Per node ``[s⁰ ‖ s¹ ‖ s² ‖ sʳ'¹ ‖ sʳ'²]`` (10 numbers with two rounds); per triple ``[s_h ‖ s_t]``.
4. Score: MLP on ``[z_q ‖ z_h ‖ z_r ‖ z_t ‖ DDE]`` → one logit; ``z`` are the index embedder's vectors
   (entity vectors from the index, relation vectors of their readable names, the question encoded).

Training (Eq. 2–3, :mod:`simgrag.retrievers.subgraphrag_train`): binary cross-entropy; positives are
the candidates on shortest undirected paths topic → answer (BFS on the KG), negatives the others.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import ModelError
from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.store import KGStore
from simgrag.retrievers._torch import nn, torch
from simgrag.retrievers.base import RetrievedContext, TopicEntities
from simgrag.retrievers.linking import EntityLinker, TopicRetriever
from simgrag.retrievers.neighborhood import neighborhood_triples
from simgrag.retrievers.training import kg_fingerprint, read_model_dir, write_model_dir

__all__ = [
    "Candidates",
    "Featurizer",
    "SubgraphRAGConfig",
    "SubgraphRAGModel",
    "SubgraphRAGNet",
    "SubgraphRAGRetriever",
    "candidate_triples",
    "directional_distance_encoding",
]

KIND = "subgraphrag"


@dataclass(frozen=True)
class SubgraphRAGConfig:
    """Hyper-parameters, saved in the model manifest. ``max_path_hops``: how far apart topic and answer
    may be for a shortest path to count as supervision."""

    hidden: int = 256
    dropout: float = 0.1
    dde_rounds: int = 2
    hops: int = 2
    max_candidates: int = 3000
    max_path_hops: int = 3

    @property
    def dde_dim(self) -> int:
        """Width of a triple's DDE: 2 one-hot columns × (1 + 2 × rounds) per node, for head and tail."""
        return 2 * 2 * (1 + 2 * self.dde_rounds)


def directional_distance_encoding(heads: np.ndarray, tails: np.ndarray, is_topic: np.ndarray,
                                  rounds: int = 2) -> np.ndarray:
    """Per-node DDE ``[s⁰ ‖ s¹…sᴸ ‖ sʳ'¹…sʳ'ᴸ]`` (module docstring) on the graph of the triples
    ``heads[i] → tails[i]`` over local node ids ``0 … len(is_topic) - 1``; float32 (n, 2 + 4L)."""
    n = len(is_topic)
    topic = np.asarray(is_topic, dtype=bool)
    s0 = np.stack([topic, ~topic], axis=1).astype(np.float64)
    heads = np.asarray(heads, dtype=np.int64)
    tails = np.asarray(tails, dtype=np.int64)

    def propagate(src: np.ndarray, dst: np.ndarray, s: np.ndarray) -> np.ndarray:
        count = np.bincount(dst, minlength=n).astype(np.float64)
        sums = np.stack([np.bincount(dst, weights=s[src, c], minlength=n) for c in range(2)], axis=1)
        return sums / np.maximum(count, 1.0)[:, None]

    out = [s0]
    forward, backward = s0, s0
    for _ in range(rounds):
        forward = propagate(heads, tails, forward)
        out.append(forward)
    for _ in range(rounds):
        backward = propagate(tails, heads, backward)
        out.append(backward)
    return np.concatenate(out, axis=1).astype(np.float32)


@dataclass(frozen=True)
class Candidates:
    """The candidate triples of one question: ids, their (head, relation, tail) ids and their DDE."""

    tids: np.ndarray
    heads: np.ndarray
    rels: np.ndarray
    tails: np.ndarray
    dde: np.ndarray
    capped: bool = False

    def __len__(self) -> int:
        return len(self.tids)

    def subset(self, mask: np.ndarray) -> Candidates:
        return Candidates(self.tids[mask], self.heads[mask], self.rels[mask], self.tails[mask], self.dde[mask],
                          self.capped)


def candidate_triples(store: KGStore, topic_ids: Sequence[int], config: SubgraphRAGConfig) -> Candidates:
    """Candidates within ``config.hops`` of the topics, with the DDE of each triple's head and tail."""
    tids, capped = neighborhood_triples(store, topic_ids, hops=config.hops, max_triples=config.max_candidates)
    heads = np.asarray(store.heads[tids], dtype=np.int64)
    rels = np.asarray(store.rels[tids], dtype=np.int64)
    tails = np.asarray(store.tails[tids], dtype=np.int64)
    nodes, local = np.unique(np.concatenate([heads, tails]), return_inverse=True)
    lh, lt = local[: len(tids)], local[len(tids):]
    node_dde = directional_distance_encoding(lh, lt, np.isin(nodes, np.asarray(topic_ids)), config.dde_rounds)
    dde = np.concatenate([node_dde[lh], node_dde[lt]], axis=1) if len(tids) else np.zeros(
        (0, config.dde_dim), dtype=np.float32)
    return Candidates(tids, heads, rels, tails, dde, capped)


class SubgraphRAGNet(nn.Module):
    """The MLP ``[z_q ‖ z_h ‖ z_r ‖ z_t ‖ DDE] → logit``."""

    def __init__(self, emb_dim: int, config: SubgraphRAGConfig) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(4 * emb_dim + config.dde_dim, config.hidden), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.hidden, config.hidden), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.mlp(x).squeeze(-1)
        return out


class Featurizer:
    """Builds the MLP's input rows from an index: question, entity and relation vectors plus DDE."""

    def __init__(self, index: IndexDir) -> None:
        self.index = index
        texts = [relation_text(name) for name in index.store.relations]
        self.relation_vectors = np.asarray(index.embedder.encode(texts, show_progress=False), dtype=np.float32)

    def questions(self, texts: Sequence[str], *, show_progress: bool | None = None) -> np.ndarray:
        return np.asarray(self.index.embedder.encode(list(texts), show_progress=show_progress), dtype=np.float32)

    def rows(self, qvec: np.ndarray, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray,
             dde: np.ndarray) -> np.ndarray:
        n = len(heads)
        ids, local = np.unique(np.concatenate([heads, tails]), return_inverse=True)
        ent = np.asarray(self.index.entity_vectors[ids], dtype=np.float32)
        return np.concatenate([np.broadcast_to(qvec, (n, len(qvec))), ent[local[:n]], self.relation_vectors[rels],
                               ent[local[n:]], dde], axis=1)


@dataclass
class SubgraphRAGModel:
    """A SubgraphRAG scorer with what it was trained on; ``save(dir)`` / ``load(dir, index)``."""

    config: SubgraphRAGConfig
    net: SubgraphRAGNet
    embedder: dict[str, Any]
    kg: dict[str, Any]
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, index: IndexDir, config: SubgraphRAGConfig | None = None, *, seed: int = 0) -> SubgraphRAGModel:
        """An untrained model for ``index`` (weights drawn with ``seed``)."""
        config = config or SubgraphRAGConfig()
        torch.manual_seed(seed)
        net = SubgraphRAGNet(index.embedder.dim, config)
        return cls(config, net, {"name": index.embedder.name, "dim": index.embedder.dim}, kg_fingerprint(index))

    def logits(self, rows: np.ndarray) -> np.ndarray:
        """Logits of feature rows, in evaluation mode (deterministic)."""
        self.net.eval()
        with torch.no_grad():
            return self.net(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))).numpy()

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.pt`` and ``manifest.json`` into ``directory`` (atomically, see training.py)."""
        body = {"config": asdict(self.config), "training": self.training, "metrics": self.metrics}
        return write_model_dir(directory, kind=KIND, state_dict=self.net.state_dict(), embedder=self.embedder,
                               kg=self.kg, body=body)

    @classmethod
    def load(cls, directory: str | Path, index: IndexDir) -> SubgraphRAGModel:
        """Load a saved model; fails with :class:`~simgrag.errors.ModelError` if it was trained on another
        KG or with another embedder than ``index``."""
        manifest, state = read_model_dir(directory, kind=KIND, index=index)
        try:
            config = SubgraphRAGConfig(**manifest["config"])
            net = SubgraphRAGNet(index.embedder.dim, config)
            net.load_state_dict(state)
        except (TypeError, KeyError, RuntimeError) as exc:
            raise ModelError(f"{directory}: the weights do not fit the manifest ({exc}); train again.") from exc
        net.eval()
        return cls(config, net, manifest["embedder"], manifest["kg"], manifest.get("training", {}),
                   manifest.get("metrics", {}))




class SubgraphRAGRetriever(TopicRetriever):
    """Scores the candidates of a question with a trained :class:`SubgraphRAGModel`; returns the top-K.

    ``model``: a loaded model or the path of a saved one. ``top_k``: triples returned (the paper's
    default is 100).
    """

    name = "subgraphrag"

    def __init__(self, index: IndexDir, model: SubgraphRAGModel | str | Path, *, top_k: int = 100,
                 linker: EntityLinker | None = None) -> None:
        super().__init__(index, linker)
        self.model = model if isinstance(model, SubgraphRAGModel) else SubgraphRAGModel.load(model, index)
        self.top_k = top_k
        self.featurizer = Featurizer(index)

    def score(self, question: str, topic_ids: Sequence[int]) -> tuple[Candidates, np.ndarray]:
        """Every candidate of ``question`` around ``topic_ids`` with its logit (unsorted)."""
        cands = candidate_triples(self.index.store, topic_ids, self.model.config)
        if not len(cands):
            return cands, np.zeros(0, dtype=np.float32)
        qvec = self.featurizer.questions([question], show_progress=False)[0]
        rows = self.featurizer.rows(qvec, cands.heads, cands.rels, cands.tails, cands.dde)
        return cands, self.model.logits(rows)

    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        t1 = time.perf_counter()
        cands, logits = self.score(question, topic.ids)
        t2 = time.perf_counter()
        order = np.argsort(-logits, kind="stable")[: self.top_k]
        probs = 1.0 / (1.0 + np.exp(-logits[order].astype(np.float64)))
        triples = tuple(self.index.store.triple(int(tid)) for tid in cands.tids[order])
        return RetrievedContext(
            retriever=self.name, question=question, triples=triples, topic=topic,
            scores=tuple(float(p) for p in probs),
            timings={"score_s": t2 - t1},
            info={"candidates": len(cands), "candidates_capped": cands.capped, "top_k": self.top_k})
