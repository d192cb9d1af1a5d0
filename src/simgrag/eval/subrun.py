"""Sub-runs of a retriever comparison on other KGs: the engine over another index, the retrievers by
name, and a comparison that is skipped when its folder already holds it (``done.json``).

Used by the robustness benchmark (:mod:`simgrag.perturb.robustness`, perturbed KGs) and the abstention
study (:mod:`simgrag.eval.abstention`, a KG with the answers' triples removed).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError
from simgrag.eval.compare import run_retriever_comparison
from simgrag.eval.runner import QAItem
from simgrag.fileio import write_bytes_atomic
from simgrag.index.directory import IndexDir
from simgrag.match.retrieve import SubgraphRetriever
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import Retriever
from simgrag.retrievers.registry import resolve_retriever

__all__ = ["build_retrievers", "engine_for_index", "parse_model_dirs", "run_sub_comparison"]

logger = logging.getLogger(__name__)


def parse_model_dirs(specs: Sequence[str]) -> dict[str, str]:
    """``["subgraphrag=DIR", …]`` (``--retriever-model``) → ``{name: DIR}``."""
    dirs: dict[str, str] = {}
    for spec in specs:
        name, sep, directory = spec.partition("=")
        if not sep or not directory:
            raise ConfigError(f"--retriever-model expects NAME=DIR, got {spec!r}")
        dirs[name.strip().lower()] = directory
    return dirs


def engine_for_index(engine: SimGRAG, index: IndexDir) -> SimGRAG:
    """``engine`` over another index: its LLM, pattern generator and settings shared (none depends on the KG)."""
    if index is engine.index:
        return engine
    other = copy.copy(engine)
    other.index = index
    other.retriever = SubgraphRetriever(index)
    return other


def build_retrievers(engine: SimGRAG, names: Sequence[str],
                     model_dirs: Mapping[str, str] | None = None) -> dict[str, Retriever]:
    """Retrievers by name over ``engine``'s index (``model_dirs``: trained models by retriever name)."""
    dirs = dict(model_dirs or {})
    return {name: resolve_retriever(name, index=engine.index, engine=engine,
                                    **({"model": dirs[name]} if name in dirs else {}))
            for name in names}


def _items_digest(items: Sequence[QAItem]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(json.dumps([item.group, item.question, list(item.answers)]).encode("utf-8"))
    return digest.hexdigest()


def run_sub_comparison(engine: SimGRAG, names: Sequence[str], items: Sequence[QAItem], out_dir: Path, *,
                       model_dirs: Mapping[str, str] | None = None, reader_options: Mapping[str, Any] | None = None,
                       progress: bool | None = None) -> dict[str, Any]:
    """One comparison into ``out_dir``, skipped when its ``done.json`` says it ran these retrievers on
    these questions already (then its ``summary.json`` is returned)."""
    marker = out_dir / "done.json"
    want = {"retrievers": list(names), "questions": len(items), "items_sha256": _items_digest(items)}
    if marker.is_file() and (out_dir / "summary.json").is_file():
        try:
            if json.loads(marker.read_text(encoding="utf-8")) == want:
                logger.info("%s: complete, skipped", out_dir)
                summary: dict[str, Any] = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
                return summary
        except ValueError:
            pass
    retrievers = build_retrievers(engine, names, model_dirs)
    summary = run_retriever_comparison(retrievers, engine.llm, items, out_dir, reader_options=reader_options,
                                       progress=progress)
    write_bytes_atomic(marker, (json.dumps(want, indent=2) + "\n").encode("utf-8"))
    return json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))  # NaN already as null
