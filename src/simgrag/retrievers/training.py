"""What the trainable retrievers (SubgraphRAG, GSR) share: training examples and model directories.

A model directory holds two files, each written atomically::

    weights.pt       the torch ``state_dict``
    manifest.json    format version, kind, hyper-parameters, embedder name/dim, the KG's content
                     hash and counts, what the model was trained on, its metrics, sha256 of weights.pt

Weights are written first and the manifest last; the manifest records the weights' checksum, so a
crash between the two writes is detected on load. Loading checks the kind, the format, the embedder
and the KG: a model trained on one KG refuses to score another (entity ids would mean other things).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgrag import __version__
from simgrag.errors import ConfigError, ModelError
from simgrag.fetch import sha256_file
from simgrag.fileio import atomic_path
from simgrag.index.derive import is_derived_from
from simgrag.index.directory import IndexDir
from simgrag.retrievers._torch import torch

__all__ = [
    "MODEL_FORMAT_VERSION",
    "QAExample",
    "as_example",
    "as_examples",
    "kg_fingerprint",
    "read_model_dir",
    "split_examples",
    "write_model_dir",
]

MODEL_FORMAT_VERSION = 1
MANIFEST = "manifest.json"
WEIGHTS = "weights.pt"


@dataclass(frozen=True)
class QAExample:
    """One training question: its topic entity names, gold answer names and, when known, the gold
    relation chain as KG relation names in hop order (direction is worked out from the KG)."""

    question: str
    topics: tuple[str, ...]
    answers: tuple[str, ...]
    chain: tuple[str, ...] = ()


def as_example(item: Any) -> QAExample:
    """A :class:`QAExample` from itself, a ``(question, topic(s), answers[, chain])`` tuple, or any
    object with ``question``/``topic``/``answers`` (and optionally ``chain``) attributes."""
    if isinstance(item, QAExample):
        return item
    if isinstance(item, tuple | list):
        if len(item) not in (3, 4):
            raise ConfigError(f"a training example tuple is (question, topic(s), answers[, chain]); got {item!r}")
        question, topics, answers = item[0], item[1], item[2]
        chain = item[3] if len(item) == 4 else ()
    else:
        try:
            question, topics, answers = item.question, getattr(item, "topics", None) or item.topic, item.answers
        except AttributeError as exc:
            raise ConfigError(f"cannot read a training example from {item!r}: {exc}") from exc
        chain = getattr(item, "chain", ())
    if isinstance(chain, str) and "_to_" in chain:
        raise ConfigError(f"chain {chain!r} looks like a MetaQA question type; give the relation names instead "
                          "(simgrag.eval.metaqa.chain_relations)")
    return QAExample(str(question), _names(topics), _names(answers), _names(chain))


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def as_examples(items: Iterable[Any]) -> list[QAExample]:
    return [as_example(item) for item in items]


def split_examples(items: Sequence[Any], val_fraction: float, seed: int, *, max_val: int = 200,
                   ) -> tuple[list[Any], list[Any]]:
    """A seeded (train, validation) split; validation is ``val_fraction`` of the items, at most
    ``max_val``, and empty when there are fewer than 10 items."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_val = min(max_val, int(len(items) * val_fraction)) if len(items) >= 10 else 0
    val = [items[i] for i in sorted(order[:n_val])]
    train = [items[i] for i in sorted(order[n_val:])]
    return train, val


def kg_fingerprint(index: IndexDir) -> dict[str, Any]:
    store = index.store
    return {"content_hash": store.content_hash(), "entities": store.num_entities,
            "relations": store.num_relations, "triples": store.num_triples}


def write_model_dir(directory: str | Path, *, kind: str, state_dict: Mapping[str, Any], embedder: Mapping[str, Any],
                    kg: Mapping[str, Any], body: Mapping[str, Any]) -> Path:
    """Write ``weights.pt`` then ``manifest.json`` into ``directory``; ``embedder`` (name, dim) and ``kg``
    (:func:`kg_fingerprint`) describe what the model was trained with, ``body`` is merged in."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    weights = root / WEIGHTS
    with atomic_path(weights) as tmp:
        torch.save(dict(state_dict), tmp)
    manifest = {
        "format_version": MODEL_FORMAT_VERSION, "kind": kind, "simgrag_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "embedder": dict(embedder), "kg": dict(kg), "weights_sha256": sha256_file(weights), **body,
    }
    with atomic_path(root / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return root


def read_model_dir(directory: str | Path, *, kind: str, index: IndexDir) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(manifest, state_dict)`` of a model directory, after checking it fits ``index``."""
    root = Path(directory)
    manifest = _read_manifest(root, kind)
    want = manifest["embedder"]
    if (want["name"], want["dim"]) != (index.embedder.name, index.embedder.dim):
        raise ModelError(f"{root} was trained with embedder {want['name']} ({want['dim']}-d) but the index "
                         f"uses {index.embedder.name} ({index.embedder.dim}-d); open the index with the same "
                         "embedder or retrain the model.")
    kg = manifest["kg"]
    here = kg_fingerprint(index)
    # an index derived from the training KG (perturbed / reduced, same entity ids) is read as well
    if kg["content_hash"] != here["content_hash"] and not is_derived_from(index, kg["content_hash"]):
        raise ModelError(
            f"{root} was trained on a different KG (content hash {kg['content_hash'][:12]}…, "
            f"{kg['triples']} triples) than the index {index.path} (content hash {here['content_hash'][:12]}…, "
            f"{here['triples']} triples); retrain it on this index (python benchmarks/train_retrievers.py "
            f"--index-dir {index.path} …).")
    weights = root / WEIGHTS
    if not weights.is_file() or sha256_file(weights) != manifest.get("weights_sha256"):
        raise ModelError(f"{weights} is missing or does not match {root / MANIFEST} (an interrupted save?); "
                         "save or train the model again.")
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ModelError(f"cannot read {weights}: {exc}; save or train the model again.") from exc
    return manifest, state


def _read_manifest(root: Path, kind: str) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise ModelError(f"{root} is not a trained {kind} model directory: {MANIFEST} is missing. "
                         "Train one with: python benchmarks/train_retrievers.py --out-dir DIR …")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelError(f"{path} is corrupt ({exc}); train the model again.") from exc
    if manifest.get("kind") != kind:
        raise ModelError(f"{root} holds a {manifest.get('kind')!r} model, not a {kind!r} one.")
    if manifest.get("format_version") != MODEL_FORMAT_VERSION:
        raise ModelError(f"{root} has model format {manifest.get('format_version')}, this simgrag reads "
                         f"{MODEL_FORMAT_VERSION}; train the model again.")
    return manifest
