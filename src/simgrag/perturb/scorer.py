"""A triple plausibility scorer s_𝒢 trained on the original KG, for ``rr`` and ATS (OKGQA §3.2, App. A.7).

OKGQA takes s_𝒢 from Li et al. (2016), a bilinear triple classifier with a sigmoid output. Here it is
**DistMult** (Yang et al., 2015), the bilinear model with a diagonal relation matrix:

    s_𝒢(h, r, t) = σ(⟨e_h, w_r, e_t⟩) = σ(Σᵢ e_h,ᵢ · w_r,ᵢ · e_t,ᵢ) ∈ [0, 1]

trained as a binary classifier with negative sampling: each training triple is paired with
``negatives`` corrupted ones whose head, relation or tail (chosen uniformly) is replaced by a uniform
random id; a corruption that is itself a triple of 𝒢 is left out of the loss. The loss is the mean
logistic loss of the positives plus that of the negatives, plus ``l2`` times the mean squared norm of
the embeddings in the batch. Corrupting relations teaches the model which relations fit an entity
pair, which is what relation replacement asks of it. DistMult is symmetric in h and t (a known
limitation; it does not matter for the relation and tail changes made here).

Training uses torch on the CPU (seeded: a torch Generator for the initial embeddings, a numpy
Generator for batches and negatives; sparse embedding gradients with SparseAdam), with a tqdm bar
over epochs; scoring and loading need numpy only. A scorer directory holds::

    embeddings.npz   entity and relation embeddings (float32)
    manifest.json    kind, format version, config, the KG's content hash and counts, the loss per
                     epoch, training seconds and sha256 of embeddings.npz (written last, atomically)
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from simgrag import __version__
from simgrag.errors import ConfigError, ModelError
from simgrag.fileio import atomic_path, write_bytes_atomic
from simgrag.kg.store import KGStore
from simgrag.perturb.base import TripleSet
from simgrag.progress import progress_on

__all__ = ["DistMultScorer", "ScorerConfig", "train_scorer"]

logger = logging.getLogger(__name__)

KIND = "distmult"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
EMBEDDINGS = "embeddings.npz"


@dataclass(frozen=True)
class ScorerConfig:
    """Hyper-parameters, saved in the manifest. Training runs ``epochs`` epochs, or more when that
    makes fewer than ``min_steps`` optimizer steps (a small KG has few batches per epoch)."""

    dim: int = 64
    epochs: int = 10
    batch_size: int = 2048
    lr: float = 0.02
    negatives: int = 4
    l2: float = 1e-4
    min_steps: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.dim, self.epochs, self.batch_size, self.negatives) < 1 or self.lr <= 0 or self.l2 < 0 or (
                self.min_steps < 0):
            raise ConfigError(f"invalid scorer config {self}: sizes must be ≥ 1, lr > 0, l2 ≥ 0.")


def kg_fingerprint(store: KGStore) -> dict[str, Any]:
    return {"content_hash": store.content_hash(), "entities": store.num_entities,
            "relations": store.num_relations, "triples": store.num_triples}


class DistMultScorer:
    """s_𝒢(h, r, t) = σ(⟨e_h, w_r, e_t⟩) over the ids of the store it was trained on."""

    def __init__(self, entity_emb: np.ndarray, relation_emb: np.ndarray, *, config: ScorerConfig,
                 kg: dict[str, Any], history: list[float] | None = None, seconds: float = 0.0) -> None:
        self.entity_emb = np.ascontiguousarray(entity_emb, dtype=np.float32)
        self.relation_emb = np.ascontiguousarray(relation_emb, dtype=np.float32)
        self.config = config
        self.kg = dict(kg)
        self.history = list(history or [])
        self.seconds = seconds

    def logits(self, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray, *, chunk: int = 65536) -> np.ndarray:
        """⟨e_h, w_r, e_t⟩ per triple (float32), computed in chunks."""
        h, r, t = (np.asarray(a, dtype=np.int64).ravel() for a in (heads, rels, tails))
        out = np.empty(len(h), dtype=np.float32)
        for s in range(0, len(h), chunk):
            sl = slice(s, s + chunk)
            out[sl] = np.einsum("ij,ij,ij->i", self.entity_emb[h[sl]], self.relation_emb[r[sl]],
                                self.entity_emb[t[sl]])
        return out

    def score(self, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """σ(logit) ∈ [0, 1] per triple."""
        z = self.logits(heads, rels, tails).astype(np.float64)
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))  # σ without overflow warnings

    def check_store(self, store: KGStore) -> None:
        """Raise :class:`ModelError` unless ``store`` is the KG this scorer was trained on."""
        here = store.content_hash()
        if here != self.kg.get("content_hash"):
            raise ModelError(f"the triple scorer was trained on another KG (content hash "
                             f"{str(self.kg.get('content_hash'))[:12]}…, {self.kg.get('triples')} triples), not on "
                             f"this one ({here[:12]}…, {store.num_triples} triples); train it on this KG.")

    # -------------------------------------------------------------------------------- persistence
    def save(self, directory: str | Path) -> Path:
        """Write ``embeddings.npz`` then ``manifest.json`` into ``directory`` (created if needed)."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, entity=self.entity_emb, relation=self.relation_emb)
        data = buffer.getvalue()
        write_bytes_atomic(root / EMBEDDINGS, data)
        manifest = {
            "kind": KIND, "format_version": FORMAT_VERSION, "simgrag_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "config": asdict(self.config),
            "kg": self.kg, "history": self.history, "train_seconds": round(self.seconds, 3),
            "embeddings_sha256": hashlib.sha256(data).hexdigest(),
        }
        with atomic_path(root / MANIFEST) as tmp:
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return root

    @classmethod
    def load(cls, directory: str | Path, *, store: KGStore | None = None) -> DistMultScorer:
        """Read a scorer directory; with ``store``, also check it was trained on that KG."""
        root = Path(directory)
        manifest = _read_manifest(root)
        path = root / EMBEDDINGS
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelError(f"cannot read {path}: {exc}; train the scorer again.") from exc
        if hashlib.sha256(data).hexdigest() != manifest.get("embeddings_sha256"):
            raise ModelError(f"{path} does not match {root / MANIFEST} (an interrupted save?); train it again.")
        with np.load(io.BytesIO(data)) as arrays:
            entity, relation = arrays["entity"], arrays["relation"]
        try:
            config = ScorerConfig(**manifest["config"])
        except (TypeError, KeyError) as exc:
            raise ModelError(f"{root / MANIFEST} has an unreadable config ({exc}); train the scorer again.") from exc
        scorer = cls(entity, relation, config=config, kg=manifest.get("kg", {}), history=manifest.get("history"),
                     seconds=float(manifest.get("train_seconds", 0.0)))
        if store is not None:
            scorer.check_store(store)
        return scorer

    @staticmethod
    def exists(directory: str | Path) -> bool:
        return (Path(directory) / MANIFEST).is_file()


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise ModelError(f"{root} is not a triple-scorer directory: {MANIFEST} is missing.")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelError(f"{path} is corrupt ({exc}); train the scorer again.") from exc
    if manifest.get("kind") != KIND or manifest.get("format_version") != FORMAT_VERSION:
        raise ModelError(f"{root} holds a {manifest.get('kind')!r} model of format {manifest.get('format_version')}, "
                         f"not a {KIND!r} scorer of format {FORMAT_VERSION}; train the scorer again.")
    return manifest


# ------------------------------------------------------------------------------------------ training
def train_scorer(store: KGStore, config: ScorerConfig | None = None, *,
                 show_progress: bool | None = None) -> DistMultScorer:
    """Train DistMult on ``store``'s triples (CPU). ``show_progress=None`` shows a bar at INFO level."""
    from simgrag.retrievers._torch import torch

    cfg = config or ScorerConfig()
    start = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    init = torch.Generator().manual_seed(cfg.seed)  # seeded without touching torch's global generator
    ent, rel = (torch.nn.Embedding.from_pretrained(torch.randn(n, cfg.dim, generator=init) * cfg.dim**-0.5,
                                                   freeze=False, sparse=True)
                for n in (store.num_entities, store.num_relations))
    n_ent, n_rel = store.num_entities, store.num_relations
    opt = torch.optim.SparseAdam([ent.weight, rel.weight], lr=cfg.lr)  # touches only the rows in the batch
    triples = TripleSet(store)
    pos = np.stack([np.asarray(a, dtype=np.int64) for a in (store.heads, store.rels, store.tails)], axis=1)
    show = progress_on(show_progress)
    history: list[float] = []
    epochs = max(cfg.epochs, math.ceil(cfg.min_steps / math.ceil(len(pos) / cfg.batch_size)))
    bar = tqdm(range(epochs), desc="Training the triple scorer (DistMult)", unit="epoch", disable=not show)
    for _ in bar:
        order = rng.permutation(len(pos))
        total, batches = 0.0, 0
        for s in range(0, len(order), cfg.batch_size):
            batch = pos[order[s:s + cfg.batch_size]]
            negatives, valid = _negatives(rng, batch, cfg.negatives, n_ent, n_rel, triples)
            total += _step(torch, opt, ent, rel, batch, negatives, valid, cfg.l2)
            batches += 1
        history.append(total / max(batches, 1))
        bar.set_postfix(loss=f"{history[-1]:.4f}", refresh=False)
    seconds = time.perf_counter() - start
    logger.info("trained the triple scorer in %.1fs; loss %.4f → %.4f", seconds, history[0], history[-1])
    return DistMultScorer(ent.weight.detach().numpy(), rel.weight.detach().numpy(), config=cfg,
                          kg=kg_fingerprint(store), history=history, seconds=seconds)


def _negatives(rng: np.random.Generator, batch: np.ndarray, per: int, n_ent: int, n_rel: int,
               triples: TripleSet) -> tuple[np.ndarray, np.ndarray]:
    """``per`` corruptions of each triple (head, relation or tail replaced) and which are not triples of 𝒢."""
    neg = np.repeat(batch, per, axis=0)
    column = rng.integers(3, size=len(neg))
    sizes = np.where(column == 1, n_rel, n_ent)
    neg[np.arange(len(neg)), column] = (rng.random(len(neg)) * sizes).astype(np.int64)
    valid = ~triples.in_original(triples.keys(neg[:, 0], neg[:, 1], neg[:, 2]))
    return neg, valid


def _step(torch: Any, opt: Any, ent: Any, rel: Any, batch: np.ndarray, neg: np.ndarray, valid: np.ndarray,
          l2: float) -> float:
    """One Adam step on the logistic loss of positives and (valid) negatives; returns the loss."""
    fn = torch.nn.functional

    def logits(ids: np.ndarray) -> Any:
        t = torch.from_numpy(ids)
        h, r, o = ent(t[:, 0]), rel(t[:, 1]), ent(t[:, 2])
        return (h * r * o).sum(dim=1), (h.pow(2).sum(1) + r.pow(2).sum(1) + o.pow(2).sum(1)).mean()

    pos_logit, pos_norm = logits(batch)
    neg_logit, _ = logits(neg)
    weight = torch.from_numpy(valid.astype(np.float32))
    pos_loss = fn.softplus(-pos_logit).mean()
    neg_loss = (fn.softplus(neg_logit) * weight).sum() / weight.sum().clamp(min=1.0)
    loss = pos_loss + neg_loss + l2 * pos_norm
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())
