"""Training the GSR relation-chain generator (Huang et al., 2024, §4.2): indexing data + retrieval data.

- **Indexing data** (task ``[Index]``): pseudo-questions that teach how each directed relation is
  asked about. The paper has GPT-4 write ten templates per relation; we use fixed generic templates
  over the relation's readable name (``directed_by`` → "directed by"), e.g. "what is the directed by
  of {e}" (forward) and "what has directed by {e}" (inverse), with ``{e}`` an entity sampled from a
  triple of that relation, and two-hop compositions ("what is the release year of the things with
  directed by {e}") along random two-edge walks in the KG.
- **Retrieval data** (task ``[Retrieval]``): the training questions with their gold relation chain
  (e.g. MetaQA's ``movie_to_director_to_movie`` → ``directed_by, directed_by``). Directions are read
  off the KG: of all 2ⁿ ways to walk the chain from the topic, the one whose end set holds the most
  gold answers wins (ties: forward first); a question that no direction answers is skipped. Examples
  without a chain are skipped too (GSR's shortest-path weak supervision is not implemented).

Loss: token cross-entropy with teacher forcing. Per epoch: the training loss and, on the validation
split of the retrieval data, the accuracy of the constrained beam search's first chain and the share
of questions whose first chain reaches a gold answer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag.errors import DatasetError
from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.store import KGStore
from simgrag.progress import progress_on
from simgrag.retrievers._torch import nn, torch
from simgrag.retrievers.gsr import (
    BOS,
    EOS,
    INDEX_TASK,
    PAD,
    RETRIEVAL_TASK,
    GSRConfig,
    GSRModel,
    RelationVocab,
    constrained_beam_search,
    follow,
    walk_chain,
)
from simgrag.retrievers.linking import EntityLinker
from simgrag.retrievers.neighborhood import adjacency_of
from simgrag.retrievers.training import QAExample, as_examples, split_examples

__all__ = ["ChainExample", "GSRTrainer", "directed_chain", "indexing_data", "train_gsr"]

logger = logging.getLogger(__name__)

_FORWARD = ("what is the {r} of {e}", "{e} {r} what", "what is {e} {r}", "tell me the {r} of {e}",
            "which entity is the {r} of {e}")
_INVERSE = ("what has {r} {e}", "which entities are {r} {e}", "what is {r} {e}", "find the things with {r} {e}",
            "{e} is the {r} of what")


@dataclass(frozen=True)
class ChainExample:
    """A text, its topic entities, the target chain tokens, the task and (retrieval data) the answers."""

    text: str
    topics: tuple[str, ...]
    topic_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    task: int
    answers: tuple[int, ...] = ()


def _phrase(store: KGStore, token: int, inner: str) -> str:
    rel, inverse = RelationVocab.split(token)
    text = relation_text(store.relations[rel])
    return f"the things with {text} {inner}" if inverse else f"the {text} of {inner}"


def indexing_data(store: KGStore, *, per_direction: int = 10, compositions: int = 200,
                  seed: int = 0) -> list[ChainExample]:
    """Template pseudo-questions per directed relation plus two-hop compositions (module docstring)."""
    rng = random.Random(seed)
    out: list[ChainExample] = []
    by_relation = np.argsort(np.asarray(store.rels), kind="stable")
    bounds = np.searchsorted(np.asarray(store.rels)[by_relation], np.arange(store.num_relations + 1))
    for rel in range(store.num_relations):
        rows = by_relation[bounds[rel]:bounds[rel + 1]]
        if not len(rows):
            continue
        for inverse, templates in ((False, _FORWARD), (True, _INVERSE)):
            for j in range(per_direction):
                tid = int(rows[rng.randrange(len(rows))])
                ent = int(store.tails[tid] if inverse else store.heads[tid])
                name = store.entities[ent]
                text = templates[j % len(templates)].format(r=relation_text(store.relations[rel]), e=name)
                out.append(ChainExample(text, (name,), (ent,), (RelationVocab.token(rel, inverse),), INDEX_TASK))
    for _ in range(compositions if store.num_triples else 0):
        example = _composition(store, rng)
        if example is not None:
            out.append(example)
    return out


def _composition(store: KGStore, rng: random.Random) -> ChainExample | None:
    tid = rng.randrange(store.num_triples)
    inverse = rng.random() < 0.5
    start = int(store.tails[tid] if inverse else store.heads[tid])
    middle = int(store.heads[tid] if inverse else store.tails[tid])
    first = RelationVocab.token(int(store.rels[tid]), inverse)
    _, _, rels, tids = adjacency_of(store, np.array([middle]))
    options = [i for i in range(len(tids)) if int(tids[i]) != tid]
    if not options:
        return None
    i = rng.choice(options)
    second = RelationVocab.token(int(rels[i]), int(store.heads[int(tids[i])]) != middle)
    name = store.entities[start]
    lead = "what are " if RelationVocab.split(second)[1] else "what is "
    text = lead + _phrase(store, second, _phrase(store, first, name))
    return ChainExample(text, (name,), (start,), (first, second), INDEX_TASK)


def directed_chain(store: KGStore, topic_ids: Sequence[int], answer_ids: Sequence[int], relations: Sequence[int],
                   *, max_frontier: int = 20000) -> tuple[int, ...] | None:
    """The directed tokens for an undirected relation chain: the direction per hop whose walk from the
    topics ends on the most answers (forward first on ties); ``None`` if none reaches an answer."""
    answers = np.asarray(sorted(set(answer_ids)), dtype=np.int64)
    best: tuple[int, tuple[int, ...] | None] = (0, None)

    def search(frontier: np.ndarray, hop: int, tokens: tuple[int, ...]) -> None:
        nonlocal best
        if hop == len(relations):
            hits = int(np.isin(answers, frontier).sum())
            if hits > best[0]:
                best = (hits, tokens)
            return
        for inverse in (False, True):
            token = RelationVocab.token(relations[hop], inverse)
            nxt, _ = follow(store, frontier, token, max_frontier=max_frontier)
            if len(nxt):
                search(nxt, hop + 1, (*tokens, token))

    if relations and len(answers):
        search(np.unique(np.asarray(topic_ids, dtype=np.int64)), 0, ())
    return best[1]


class GSRTrainer:
    """Builds the training data and trains a :class:`GSRModel` (see module docstring)."""

    def __init__(self, index: IndexDir, *, config: GSRConfig | None = None, seed: int = 0,
                 show_progress: bool | None = None) -> None:
        self.index = index
        self.config = config or GSRConfig()
        self.seed = seed
        self.show_progress = show_progress
        self.linker = EntityLinker(index)
        self.history: list[dict[str, Any]] = []
        self.skipped = 0

    def _quiet(self, n: int) -> bool:
        return not progress_on(self.show_progress)

    def retrieval_data(self, examples: Iterable[Any]) -> list[ChainExample]:
        """Training questions with their directed gold chains (module docstring)."""
        store = self.index.store
        relation_ids = {name: i for i, name in enumerate(store.relations)}
        items = as_examples(examples)
        out: list[ChainExample] = []
        for ex in tqdm(items, desc="GSR: chains", unit="q", disable=self._quiet(len(items))):
            chain = self._example(ex, relation_ids)
            if chain is None:
                self.skipped += 1
            else:
                out.append(chain)
        return out

    def _example(self, ex: QAExample, relation_ids: dict[str, int]) -> ChainExample | None:
        store = self.index.store
        if not ex.topics or not ex.chain or len(ex.chain) > self.config.max_hops:
            return None
        if any(r not in relation_ids for r in ex.chain):
            raise DatasetError(f"chain {ex.chain} of {ex.question!r} names a relation the KG does not have")
        linked = self.linker.link(ex.question, topic_entities=ex.topics)
        topics = tuple(i for i, d in zip(linked.ids, linked.distances, strict=True) if d == 0.0)
        answers = tuple(sorted({i for a in ex.answers if (i := store.entities.id_of(a)) is not None}))
        tokens = directed_chain(store, topics, answers, [relation_ids[r] for r in ex.chain]) if topics else None
        if tokens is None:
            return None
        names = tuple(store.entities[i] for i in topics)
        return ChainExample(ex.question, names, topics, tokens, RETRIEVAL_TASK, answers)

    def _tensors(self, model: GSRModel, data: Sequence[ChainExample]) -> tuple[torch.Tensor, ...]:
        qvecs = model.question_vectors(self.index, [d.text for d in data], [d.topics for d in data],
                                       show_progress=not self._quiet(len(data)))
        steps = self.config.max_hops + 1
        inputs = np.full((len(data), steps), PAD, dtype=np.int64)
        targets = np.full((len(data), steps), PAD, dtype=np.int64)
        for row, d in enumerate(data):
            inputs[row, : len(d.tokens) + 1] = (BOS, *d.tokens)
            targets[row, : len(d.tokens) + 1] = (*d.tokens, EOS)
        return (torch.from_numpy(qvecs), torch.tensor([d.task for d in data], dtype=torch.long),
                torch.from_numpy(inputs), torch.from_numpy(targets))

    def evaluate(self, model: GSRModel, data: Sequence[ChainExample], *, beam_size: int = 5) -> dict[str, float]:
        """Top-1 chain accuracy and the share of questions whose top chain reaches a gold answer."""
        if not data:
            return {}
        qvecs = model.question_vectors(self.index, [d.text for d in data], [d.topics for d in data])
        exact, reached = 0, 0
        for d, qvec in zip(data, qvecs, strict=True):
            chains = constrained_beam_search(model.net, qvec, self.index.store, model.vocab, d.topic_ids,
                                             beam_size=beam_size, max_hops=model.config.max_hops)
            if chains:
                exact += chains[0].tokens == d.tokens
                ends = walk_chain(self.index.store, d.topic_ids, chains[0].tokens).ends
                reached += bool(np.isin(np.asarray(d.answers, dtype=np.int64), ends).any())
        return {"chain_accuracy": exact / len(data), "answer_hit": reached / len(data), "questions": float(len(data))}

    def fit(self, examples: Iterable[Any], *, epochs: int = 20, lr: float = 2e-3, batch_size: int = 64,
            val_fraction: float = 0.1, per_direction: int = 10, compositions: int = 200,
            model: GSRModel | None = None, description: str = "") -> GSRModel:
        """Train (a new model unless ``model`` is given) on indexing + retrieval data; return it."""
        t0 = time.perf_counter()
        retrieval = self.retrieval_data(examples)
        train_retrieval, val = split_examples(retrieval, val_fraction, self.seed)
        index_data = indexing_data(self.index.store, per_direction=per_direction, compositions=compositions,
                                   seed=self.seed)
        train = train_retrieval + index_data
        if not train:
            raise DatasetError("no training data for GSR: no example with a chain that reaches its answers")
        model = model or GSRModel.create(self.index, self.config, seed=self.seed)
        logger.info("GSR: %d retrieval (%d skipped) + %d indexing examples, %d validation, %d epochs",
                    len(train_retrieval), self.skipped, len(index_data), len(val), epochs)
        tensors = self._tensors(model, train)
        optimizer = torch.optim.Adam(model.net.parameters(), lr=lr)
        generator = torch.Generator().manual_seed(self.seed)
        for epoch in range(1, epochs + 1):
            loss = self._epoch(model, tensors, optimizer, generator, batch_size, epoch, epochs)
            record: dict[str, Any] = {"epoch": epoch, "train_loss": loss}
            record.update({f"val_{k}": v for k, v in self.evaluate(model, val).items()})
            self.history.append(record)
            logger.info("GSR epoch %d/%d: %s", epoch, epochs,
                        ", ".join(f"{k}={v:.4f}" for k, v in record.items() if k != "epoch"))
        model.net.eval()
        model.training = {
            "description": description, "retrieval_examples": len(retrieval), "skipped": self.skipped,
            "train_retrieval": len(train_retrieval), "indexing_examples": len(index_data), "val_questions": len(val),
            "epochs": epochs, "lr": lr, "batch_size": batch_size, "per_direction": per_direction,
            "compositions": compositions, "seed": self.seed, "seconds": round(time.perf_counter() - t0, 1),
            "history": self.history}
        model.metrics = dict(self.history[-1]) if self.history else {}
        return model

    def _epoch(self, model: GSRModel, tensors: tuple[torch.Tensor, ...], optimizer: torch.optim.Optimizer,
               generator: torch.Generator, batch_size: int, epoch: int, epochs: int) -> float:
        qvecs, tasks, inputs, targets = tensors
        model.net.train()
        order = torch.randperm(len(qvecs), generator=generator)
        total, seen = 0.0, 0
        bar = tqdm(range(0, len(order), batch_size), desc=f"GSR epoch {epoch}/{epochs}", unit="batch",
                   disable=self._quiet(len(order)))
        for start in bar:
            idx = order[start:start + batch_size]
            logits = model.net(qvecs[idx], tasks[idx], inputs[idx])
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[idx].reshape(-1),
                                               ignore_index=PAD)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
            seen += len(idx)
            bar.set_postfix(loss=f"{total / seen:.4f}")
        return total / max(seen, 1)


def train_gsr(index: IndexDir, examples: Iterable[Any], *, epochs: int = 20, config: GSRConfig | None = None,
              seed: int = 0, show_progress: bool | None = None, **fit_options: Any) -> GSRModel:
    """Train a GSR chain generator on ``examples`` (see :meth:`GSRTrainer.fit` for the options)."""
    trainer = GSRTrainer(index, config=config, seed=seed, show_progress=show_progress)
    return trainer.fit(examples, epochs=epochs, **fit_options)
