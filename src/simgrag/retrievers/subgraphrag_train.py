"""Training SubgraphRAG's triple scorer (Eq. 2–3 of the paper) on question/answer pairs.

For each example: the topic entities (given names, looked up exactly), the candidates around them
(:func:`~simgrag.retrievers.subgraphrag.candidate_triples`), and the positives — candidates on a
shortest undirected path from a topic to a gold answer, found by BFS on the KG
(:func:`~simgrag.retrievers.neighborhood.shortest_path_triples`). An example without a positive
teaches nothing and is skipped (counted in ``training["skipped"]``). Paths may be up to
``max_path_hops`` (3) long while candidates reach ``hops`` (2) hops: for an answer three hops away
the positives are the first two hops of its shortest paths, which is what the candidates can hold.

To keep memory and time small on a CPU, each *training* question keeps its positives, every candidate
touching a topic entity (the hard negatives: same entity, other relation) and a seeded random sample
of the other candidates, ``train_negatives`` negatives in all; validation questions keep every
candidate, so recall@K is measured as at retrieval time. The loss is binary cross-entropy over the
kept triples of a batch of questions. Per epoch the training loss and, on the validation split,
the loss, the recall@K of the shortest-path triples and the recall@K of the answers are logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import DatasetError
from simgrag.index.directory import IndexDir
from simgrag.progress import progress_on
from simgrag.retrievers._torch import nn, torch
from simgrag.retrievers.linking import EntityLinker
from simgrag.retrievers.neighborhood import shortest_path_triples
from simgrag.retrievers.subgraphrag import (
    Featurizer,
    SubgraphRAGConfig,
    SubgraphRAGModel,
    candidate_triples,
)
from simgrag.retrievers.training import QAExample, as_examples, split_examples

__all__ = ["PreparedQuestion", "SubgraphRAGTrainer", "train_subgraphrag"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedQuestion:
    """One question ready for the MLP: its vector, (kept) candidates, labels and answer ids."""

    question: str
    qvec: np.ndarray
    heads: np.ndarray
    rels: np.ndarray
    tails: np.ndarray
    dde: np.ndarray
    labels: np.ndarray
    answers: np.ndarray


def _sample_negatives(labels: np.ndarray, touching: np.ndarray, negatives: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Mask of ≤ ``negatives`` negatives: those touching a topic first, then random others."""
    hard = np.flatnonzero(touching & ~labels)
    other = np.flatnonzero(~touching & ~labels)
    if len(hard) >= negatives:
        chosen = rng.choice(hard, size=negatives, replace=False)
    else:
        chosen = np.concatenate([hard, rng.choice(other, size=min(negatives - len(hard), len(other)),
                                                  replace=False)])
    mask = np.zeros(len(labels), dtype=bool)
    mask[chosen.astype(np.int64)] = True
    return mask


class SubgraphRAGTrainer:
    """Prepares examples and trains a :class:`SubgraphRAGModel` (see module docstring)."""

    def __init__(self, index: IndexDir, *, config: SubgraphRAGConfig | None = None, seed: int = 0,
                 show_progress: bool | None = None) -> None:
        self.index = index
        self.config = config or SubgraphRAGConfig()
        self.seed = seed
        self.show_progress = show_progress
        self.featurizer = Featurizer(index)
        self.linker = EntityLinker(index)
        self.history: list[dict[str, Any]] = []
        self.skipped = 0

    # ------------------------------------------------------------------ data
    def prepare(self, examples: Iterable[Any], *, negatives: int | None = None) -> list[PreparedQuestion]:
        """Featurise ``examples`` (:func:`as_example` forms); ``negatives=None`` keeps every candidate."""
        items = as_examples(examples)
        rng = np.random.default_rng(self.seed)
        qvecs = self.featurizer.questions([ex.question for ex in items], show_progress=self.show_progress)
        out: list[PreparedQuestion] = []
        bar = tqdm(zip(items, qvecs, strict=True), total=len(items), desc="SubgraphRAG: preparing",
                   unit="q", disable=self._quiet(len(items)))
        for ex, qvec in bar:
            prepared = self._prepare_one(ex, qvec, negatives, rng)
            if prepared is None:
                self.skipped += 1
            else:
                out.append(prepared)
        return out

    def _quiet(self, n: int) -> bool:
        return not progress_on(self.show_progress)

    def _topic_ids(self, ex: QAExample) -> list[int]:
        if not ex.topics:
            return list(self.linker.link(ex.question).ids)
        linked = self.linker.link(ex.question, topic_entities=ex.topics)
        return [i for i, d in zip(linked.ids, linked.distances, strict=True) if d == 0.0]

    def _prepare_one(self, ex: QAExample, qvec: np.ndarray, negatives: int | None,
                     rng: np.random.Generator) -> PreparedQuestion | None:
        store = self.index.store
        topics = self._topic_ids(ex)
        answers = np.array(sorted({i for a in ex.answers if (i := store.entities.id_of(a)) is not None}),
                           dtype=np.int64)
        if not topics or not len(answers):
            return None
        cands = candidate_triples(store, topics, self.config)
        positives = shortest_path_triples(store, topics, answers, max_hops=self.config.max_path_hops)
        labels = np.isin(cands.tids, positives)
        if not labels.any():
            return None
        if negatives is not None:
            keep = labels | _sample_negatives(labels, np.isin(cands.heads, topics) | np.isin(cands.tails, topics),
                                              negatives, rng)
            cands, labels = cands.subset(keep), labels[keep]
        return PreparedQuestion(ex.question, qvec, cands.heads, cands.rels, cands.tails, cands.dde,
                                labels.astype(np.float32), answers)

    def _rows(self, batch: Sequence[PreparedQuestion]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = np.concatenate([self.featurizer.rows(p.qvec, p.heads, p.rels, p.tails, p.dde) for p in batch])
        labels = np.concatenate([p.labels for p in batch])
        return torch.from_numpy(np.ascontiguousarray(rows)), torch.from_numpy(labels)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, model: SubgraphRAGModel, prepared: Sequence[PreparedQuestion], *, k: int = 100,
                 ) -> dict[str, float]:
        """Mean BCE loss, shortest-path-triple recall@k and answer recall@k over ``prepared``."""
        if not prepared:
            return {}
        losses, triple_recall, answer_recall = [], [], []
        for p in prepared:
            logits = model.logits(self.featurizer.rows(p.qvec, p.heads, p.rels, p.tails, p.dde))
            loss = nn.functional.binary_cross_entropy_with_logits(torch.from_numpy(logits),
                                                                 torch.from_numpy(p.labels))
            losses.append(float(loss))
            top = np.argsort(-logits, kind="stable")[:k]
            triple_recall.append(float(p.labels[top].sum() / max(p.labels.sum(), 1.0)))
            found = np.union1d(p.heads[top], p.tails[top])
            answer_recall.append(float(np.isin(p.answers, found).mean()))
        return {"loss": float(np.mean(losses)), f"recall@{k}": float(np.mean(triple_recall)),
                f"answer_recall@{k}": float(np.mean(answer_recall)), "questions": float(len(prepared))}

    # ------------------------------------------------------------------ training
    def fit(self, examples: Iterable[Any], *, epochs: int = 5, lr: float = 1e-3, batch_questions: int = 16,
            train_negatives: int = 256, val_fraction: float = 0.1, eval_k: int = 100,
            model: SubgraphRAGModel | None = None, description: str = "") -> SubgraphRAGModel:
        """Train (a new model unless ``model`` is given) and return it with its training record."""
        t0 = time.perf_counter()
        items = as_examples(examples)
        train_items, val_items = split_examples(items, val_fraction, self.seed)
        train = self.prepare(train_items, negatives=train_negatives)
        val = self.prepare(val_items)
        if not train:
            raise DatasetError("no usable training example: no topic/answer in the KG, or no shortest path "
                             "between them within the candidates")
        model = model or SubgraphRAGModel.create(self.index, self.config, seed=self.seed)
        logger.info("SubgraphRAG: %d training / %d validation questions (%d skipped), %d epochs",
                    len(train), len(val), self.skipped, epochs)
        optimizer = torch.optim.Adam(model.net.parameters(), lr=lr)
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        for epoch in range(1, epochs + 1):
            train_loss = self._epoch(model, train, optimizer, rng, batch_questions, epoch, epochs)
            record: dict[str, Any] = {"epoch": epoch, "train_loss": train_loss}
            record.update({f"val_{k}": v for k, v in self.evaluate(model, val, k=eval_k).items()})
            self.history.append(record)
            logger.info("SubgraphRAG epoch %d/%d: %s", epoch, epochs,
                        ", ".join(f"{k}={v:.4f}" for k, v in record.items() if k != "epoch"))
        model.net.eval()
        model.training = {
            "description": description, "examples": len(items), "train_questions": len(train),
            "val_questions": len(val), "skipped": self.skipped, "epochs": epochs, "lr": lr,
            "batch_questions": batch_questions, "train_negatives": train_negatives, "seed": self.seed,
            "seconds": round(time.perf_counter() - t0, 1), "history": self.history}
        model.metrics = dict(self.history[-1]) if self.history else {}
        return model

    def _epoch(self, model: SubgraphRAGModel, train: Sequence[PreparedQuestion], optimizer: torch.optim.Optimizer,
               rng: np.random.Generator, batch_questions: int, epoch: int, epochs: int) -> float:
        model.net.train()
        order = rng.permutation(len(train))
        batches = [order[i:i + batch_questions] for i in range(0, len(order), batch_questions)]
        total, seen = 0.0, 0
        bar = tqdm(batches, desc=f"SubgraphRAG epoch {epoch}/{epochs}", unit="batch",
                   disable=self._quiet(len(train)))
        for batch in bar:
            x, y = self._rows([train[i] for i in batch])
            loss = nn.functional.binary_cross_entropy_with_logits(model.net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            seen += len(batch)
            bar.set_postfix(loss=f"{total / seen:.4f}")
        return total / max(seen, 1)


def train_subgraphrag(index: IndexDir, examples: Iterable[Any], *, epochs: int = 5,
                      config: SubgraphRAGConfig | None = None, seed: int = 0, show_progress: bool | None = None,
                      **fit_options: Any) -> SubgraphRAGModel:
    """Train a SubgraphRAG scorer on ``examples`` (see :meth:`SubgraphRAGTrainer.fit` for the options)."""
    trainer = SubgraphRAGTrainer(index, config=config, seed=seed, show_progress=show_progress)
    return trainer.fit(examples, epochs=epochs, **fit_options)
