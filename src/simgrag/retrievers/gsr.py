"""GSR-style generative subgraph retrieval (Huang et al., 2024, §4): a small model writes the relation
chain that leads from the topic entity to the answers; the chain, walked in the KG, is the subgraph.

- **Subgraph ids** (§4.1): every relation is one token, in each direction: ``directed_by`` walks
  head → tail (film → director), ``~directed_by`` tail → head (director → films). Vocabulary:
  ``<pad> <bos> <eos>`` then ``r, ~r`` for each KG relation, so token = 3 + 2 × relation id + inverse.
- **Model** (ours; the paper fine-tunes T5): trained from scratch on a CPU. The question — with the
  topic entity's name replaced by ``[entity]`` (``mask_topic``), so the model learns the wording, not
  the names — is embedded by the index's sentence embedder (frozen); a learned task vector
  (``[Retrieval]`` or ``[Index]``, the paper's prefix tokens, §4.2) joins it, and a tanh layer makes
  the initial state of a one-layer GRU decoder whose input at each step is the previous token's
  embedding next to the same conditioning vector. Chains have 1 … ``max_hops`` (3) relations.
- **Inference** (§4.3): beam search constrained to chains executable from the topic entities: at each
  step only tokens with an edge out of the current frontier (in that direction) and, after a first
  relation, ``<eos>`` may follow; scores are the model's log-probabilities (not renormalised over the
  allowed tokens). The top ``num_chains`` chains are walked: their end entities become
  ``answer_candidates`` (topic entities excluded), the triples on topic → end paths ``triples``.

Frontiers larger than ``max_frontier`` nodes keep an evenly spaced sample (documented cap, so a chain
through a hub such as a language stays cheap). Training: :mod:`simgrag.retrievers.gsr_train`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.errors import ModelError
from simgrag.index.directory import IndexDir
from simgrag.kg.store import KGStore, Triple
from simgrag.retrievers._torch import nn, torch
from simgrag.retrievers.base import RetrievedContext, TopicEntities
from simgrag.retrievers.linking import EntityLinker, TopicRetriever
from simgrag.retrievers.neighborhood import adjacency_of
from simgrag.retrievers.training import kg_fingerprint, read_model_dir, write_model_dir

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "ChainWalk",
    "DecodedChain",
    "GSRConfig",
    "GSRModel",
    "GSRNet",
    "GSRRetriever",
    "RelationVocab",
    "allowed_tokens",
    "constrained_beam_search",
    "follow",
    "mask_topic",
    "walk_chain",
]

KIND = "gsr"
PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")
RETRIEVAL_TASK, INDEX_TASK = 0, 1
MASK = "[entity]"
DEFAULT_MAX_FRONTIER = 2000


@dataclass(frozen=True)
class GSRConfig:
    """Hyper-parameters, saved in the model manifest."""

    hidden: int = 256
    token_dim: int = 64
    dropout: float = 0.1
    max_hops: int = 3
    mask_topic: bool = True


class RelationVocab:
    """Relation tokens in both directions plus the specials (module docstring)."""

    def __init__(self, relations: Sequence[str]) -> None:
        self.relations = tuple(relations)
        self._ids = {name: i for i, name in enumerate(self.relations)}

    def __len__(self) -> int:
        return len(SPECIALS) + 2 * len(self.relations)

    @staticmethod
    def token(relation_id: int, inverse: bool = False) -> int:
        return len(SPECIALS) + 2 * int(relation_id) + int(inverse)

    @staticmethod
    def split(token: int) -> tuple[int, bool]:
        """``(relation id, inverse)`` of a relation token."""
        rel, inverse = divmod(int(token) - len(SPECIALS), 2)
        return rel, bool(inverse)

    def name(self, token: int) -> str:
        if token < len(SPECIALS):
            return SPECIALS[token]
        rel, inverse = self.split(token)
        return ("~" if inverse else "") + self.relations[rel]

    def parse(self, name: str) -> int:
        inverse = name.startswith("~")
        rel = self._ids.get(name[1:] if inverse else name)
        if rel is None:
            raise KeyError(f"unknown relation token {name!r}")
        return self.token(rel, inverse)


def mask_topic(text: str, names: Sequence[str]) -> str:
    """``text`` with each topic name (case-insensitive, whole words) replaced by ``[entity]``."""
    for name in sorted(names, key=len, reverse=True):
        if name.strip():
            text = re.sub(rf"(?<!\w){re.escape(name.strip())}(?!\w)", MASK, text, flags=re.IGNORECASE)
    return text


# ---------------------------------------------------------------------- walking chains in the KG
def _cap(nodes: np.ndarray, max_frontier: int) -> np.ndarray:
    if len(nodes) <= max_frontier:
        return nodes
    return nodes[np.linspace(0, len(nodes) - 1, max_frontier).astype(np.int64)]


def _directed(store: KGStore, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(source, target, token, triple id)`` of every edge out of ``frontier`` in either direction."""
    src, nbr, rel, tid = adjacency_of(store, frontier)
    fwd = np.asarray(store.heads[tid]) == src  # source is the head: walk the relation forwards
    bwd = np.asarray(store.tails[tid]) == src  # source is the tail: walk it backwards (~r); both for a loop
    tok = RelationVocab.token(0) + 2 * rel
    return (np.concatenate([src[fwd], src[bwd]]), np.concatenate([nbr[fwd], nbr[bwd]]),
            np.concatenate([tok[fwd], tok[bwd] + 1]), np.concatenate([tid[fwd], tid[bwd]]))


def allowed_tokens(store: KGStore, frontier: np.ndarray) -> np.ndarray:
    """The relation tokens with at least one edge out of ``frontier``, sorted."""
    return np.unique(_directed(store, frontier)[2])


def follow(store: KGStore, frontier: np.ndarray, token: int, *, max_frontier: int = DEFAULT_MAX_FRONTIER,
           ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The next frontier after walking ``token`` from ``frontier`` (capped), and the edges walked
    ``(source, target, triple id)`` that end in it."""
    src, dst, tok, tid = _directed(store, frontier)
    hit = tok == token
    src, dst, tid = src[hit], dst[hit], tid[hit]
    nxt = _cap(np.unique(dst), max_frontier)
    keep = np.isin(dst, nxt)
    return nxt, (src[keep], dst[keep], tid[keep])


@dataclass(frozen=True)
class ChainWalk:
    """A chain walked from the topics: ``layers[i]`` the nodes after hop i (``layers[0]`` the topics),
    ``edges[i]`` the ``(source, target, triple id)`` of hop i + 1; both pruned to topic → end paths."""

    tokens: tuple[int, ...]
    layers: list[np.ndarray]
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]]

    @property
    def ends(self) -> np.ndarray:
        return self.layers[-1]

    def triple_ids(self) -> np.ndarray:
        """Triple ids hop by hop, each once."""
        tids = np.concatenate([e[2] for e in self.edges]) if self.edges else np.zeros(0, dtype=np.int64)
        _, first = np.unique(tids, return_index=True)
        return tids[np.sort(first)]

    def paths(self, limit: int) -> Iterator[tuple[int, ...]]:
        """Up to ``limit`` topic → end paths, each as its triple ids (depth first)."""
        out: list[dict[int, list[tuple[int, int]]]] = []
        for src, dst, tid in self.edges:
            table: dict[int, list[tuple[int, int]]] = {}
            for s, d, t in zip(src.tolist(), dst.tolist(), tid.tolist(), strict=True):
                table.setdefault(s, []).append((t, d))
            out.append(table)
        count = 0
        stack: list[tuple[int, int, tuple[int, ...]]] = [(int(n), 0, ()) for n in self.layers[0][::-1]]
        while stack and count < limit:
            node, hop, path = stack.pop()
            if hop == len(out):
                count += 1
                yield path
                continue
            stack.extend((d, hop + 1, (*path, t)) for t, d in reversed(out[hop].get(node, [])))


def walk_chain(store: KGStore, topic_ids: Sequence[int], tokens: Sequence[int], *,
               max_frontier: int = DEFAULT_MAX_FRONTIER) -> ChainWalk:
    """Walk ``tokens`` from ``topic_ids``; an unexecutable chain ends in an empty layer."""
    layers = [np.unique(np.asarray(topic_ids, dtype=np.int64))]
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for token in tokens:
        nxt, walked = follow(store, layers[-1], int(token), max_frontier=max_frontier)
        layers.append(nxt)
        edges.append(walked)
    for hop in range(len(edges) - 1, -1, -1):  # keep only what lies on a path to the last layer
        src, dst, tid = edges[hop]
        keep = np.isin(dst, layers[hop + 1])
        edges[hop] = (src[keep], dst[keep], tid[keep])
        layers[hop] = np.intersect1d(layers[hop], src[keep]) if hop else layers[0]
    return ChainWalk(tuple(int(t) for t in tokens), layers, edges)


# ---------------------------------------------------------------------- the model
class GSRNet(nn.Module):
    """Question vector + task → GRU decoder over relation tokens (module docstring)."""

    def __init__(self, emb_dim: int, vocab_size: int, config: GSRConfig) -> None:
        super().__init__()
        self.task = nn.Embedding(2, config.token_dim)
        self.cond = nn.Sequential(nn.Linear(emb_dim + config.token_dim, config.hidden), nn.Tanh())
        self.tokens = nn.Embedding(vocab_size, config.token_dim, padding_idx=PAD)
        self.gru = nn.GRU(config.token_dim + config.hidden, config.hidden, batch_first=True)
        self.drop = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.hidden, vocab_size)

    def forward(self, qvec: torch.Tensor, task: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, steps, vocab)`` for the next token after each input token."""
        cond = self.cond(torch.cat([qvec, self.task(task)], dim=-1))
        steps = inputs.shape[1]
        x = torch.cat([self.tokens(inputs), cond[:, None, :].expand(-1, steps, -1)], dim=-1)
        hidden, _ = self.gru(self.drop(x), cond[None].contiguous())
        logits: torch.Tensor = self.out(self.drop(hidden))
        return logits


@dataclass(frozen=True)
class DecodedChain:
    """One chain from the beam search: tokens, readable names, total log-probability."""

    tokens: tuple[int, ...]
    names: tuple[str, ...]
    logprob: float


def constrained_beam_search(net: GSRNet, qvec: np.ndarray, store: KGStore, vocab: RelationVocab,
                            topic_ids: Sequence[int], *, beam_size: int = 5, max_hops: int = 3,
                            max_frontier: int = DEFAULT_MAX_FRONTIER) -> list[DecodedChain]:
    """The best executable chains (up to ``beam_size``), best first (module docstring)."""
    net.eval()
    start = np.unique(np.asarray(topic_ids, dtype=np.int64))
    live: list[tuple[float, tuple[int, ...], np.ndarray]] = [(0.0, (), start)] if len(start) else []
    done: list[tuple[float, tuple[int, ...]]] = []
    q = torch.from_numpy(np.ascontiguousarray(qvec, dtype=np.float32))[None]
    for step in range(max_hops + 1):
        if not live:
            break
        inputs = torch.tensor([[BOS, *tokens] for _, tokens, _ in live], dtype=torch.long)
        with torch.no_grad():
            logp = torch.log_softmax(net(q.expand(len(live), -1), torch.full((len(live),), RETRIEVAL_TASK),
                                         inputs)[:, -1], dim=-1).numpy()
        options: list[tuple[float, tuple[int, ...], np.ndarray | None]] = []
        for row, (score, tokens, frontier) in enumerate(live):
            if tokens:
                options.append((score + float(logp[row, EOS]), tokens, None))
            if step < max_hops:
                options.extend((score + float(logp[row, tok]), (*tokens, int(tok)), frontier)
                               for tok in allowed_tokens(store, frontier))
        options.sort(key=lambda o: -o[0])
        live = []
        for score, tokens, parent in options[:beam_size]:
            if parent is None:
                done.append((score, tokens))
            else:
                live.append((score, tokens, follow(store, parent, tokens[-1], max_frontier=max_frontier)[0]))
        if len(done) >= beam_size and (not live or live[0][0] <= sorted(s for s, _ in done)[-beam_size]):
            break
    done.sort(key=lambda d: -d[0])
    return [DecodedChain(tokens, tuple(vocab.name(t) for t in tokens), score) for score, tokens in done[:beam_size]]


@dataclass
class GSRModel:
    """A trained relation-chain generator with what it was trained on; ``save(dir)`` / ``load(dir, index)``."""

    config: GSRConfig
    vocab: RelationVocab
    net: GSRNet
    embedder: dict[str, Any]
    kg: dict[str, Any]
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, index: IndexDir, config: GSRConfig | None = None, *, seed: int = 0) -> GSRModel:
        """An untrained model for ``index`` (weights drawn with ``seed``)."""
        config = config or GSRConfig()
        vocab = RelationVocab(list(index.store.relations))
        torch.manual_seed(seed)
        net = GSRNet(index.embedder.dim, len(vocab), config)
        return cls(config, vocab, net, {"name": index.embedder.name, "dim": index.embedder.dim},
                   kg_fingerprint(index))

    def question_vectors(self, index: IndexDir, questions: Sequence[str], topics: Sequence[Sequence[str]],
                         *, show_progress: bool | None = False) -> np.ndarray:
        """Embeddings of the questions as the model reads them (topic names masked when configured)."""
        texts = [mask_topic(q, names) if self.config.mask_topic else q
                 for q, names in zip(questions, topics, strict=True)]
        return np.asarray(index.embedder.encode(texts, show_progress=show_progress), dtype=np.float32)

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.pt`` and ``manifest.json`` into ``directory`` (atomically)."""
        body = {"config": asdict(self.config), "vocab": list(self.vocab.relations), "training": self.training,
                "metrics": self.metrics}
        return write_model_dir(directory, kind=KIND, state_dict=self.net.state_dict(), embedder=self.embedder,
                               kg=self.kg, body=body)

    @classmethod
    def load(cls, directory: str | Path, index: IndexDir) -> GSRModel:
        """Load a saved model; :class:`~simgrag.errors.ModelError` if trained on another KG or embedder."""
        manifest, state = read_model_dir(directory, kind=KIND, index=index)
        vocab = RelationVocab(manifest.get("vocab", []))
        if vocab.relations != tuple(index.store.relations):
            raise ModelError(f"{directory}: the model's relation vocabulary differs from the index's relations; "
                             "train it again on this index.")
        try:
            config = GSRConfig(**manifest["config"])
            net = GSRNet(index.embedder.dim, len(vocab), config)
            net.load_state_dict(state)
        except (TypeError, KeyError, RuntimeError) as exc:
            raise ModelError(f"{directory}: the weights do not fit the manifest ({exc}); train again.") from exc
        net.eval()
        return cls(config, vocab, net, manifest["embedder"], manifest["kg"], manifest.get("training", {}),
                   manifest.get("metrics", {}))


class GSRRetriever(TopicRetriever):
    """Decodes relation chains for a question and walks them from its topic entities.

    ``num_chains`` ≤ ``beam_size`` chains are kept (§4.3); ``max_triples``, ``max_answers`` and
    ``max_paths`` cap what goes into the context.
    """

    name = "gsr"

    def __init__(self, index: IndexDir, model: GSRModel | str | Path, *, beam_size: int = 5, num_chains: int = 3,
                 max_triples: int = 200, max_answers: int = 100, max_paths: int = 50,
                 max_frontier: int = DEFAULT_MAX_FRONTIER, linker: EntityLinker | None = None) -> None:
        super().__init__(index, linker)
        self.model = model if isinstance(model, GSRModel) else GSRModel.load(model, index)
        self.beam_size = beam_size
        self.num_chains = min(num_chains, beam_size)
        self.max_triples = max_triples
        self.max_answers = max_answers
        self.max_paths = max_paths
        self.max_frontier = max_frontier

    def decode(self, question: str, topic_ids: Sequence[int]) -> list[DecodedChain]:
        """The executable chains of ``question`` from ``topic_ids``, best first (up to ``beam_size``)."""
        names = [self.index.store.entities[int(i)] for i in topic_ids]
        qvec = self.model.question_vectors(self.index, [question], [names])[0]
        return constrained_beam_search(self.model.net, qvec, self.index.store, self.model.vocab, topic_ids,
                                       beam_size=self.beam_size, max_hops=self.model.config.max_hops,
                                       max_frontier=self.max_frontier)

    def _retrieve_around(self, question: str, topic: TopicEntities) -> RetrievedContext:
        t1 = time.perf_counter()
        chains = self.decode(question, topic.ids)[: self.num_chains]
        t2 = time.perf_counter()
        store = self.index.store
        triples: dict[int, float] = {}
        answers: dict[int, None] = {}
        paths: list[tuple[Triple, ...]] = []
        info = []
        for chain in chains:
            walk = walk_chain(store, topic.ids, chain.tokens, max_frontier=self.max_frontier)
            prob = float(np.exp(chain.logprob))
            for tid in walk.triple_ids().tolist():
                triples.setdefault(int(tid), prob)
            answers.update(dict.fromkeys(int(e) for e in walk.ends if int(e) not in topic.ids))
            paths.extend(tuple(store.triple(t) for t in p) for p in walk.paths(self.max_paths - len(paths)))
            info.append({"chain": list(chain.names), "logprob": chain.logprob, "ends": len(walk.ends)})
        kept = list(triples.items())[: self.max_triples]
        return RetrievedContext(
            retriever=self.name, question=question, triples=tuple(store.triple(t) for t, _ in kept), topic=topic,
            paths=tuple(paths), answer_candidates=tuple(store.entities[e] for e in list(answers)[: self.max_answers]),
            scores=tuple(p for _, p in kept),
            timings={"decode_s": t2 - t1},
            info={"chains": info})
