"""Sub-runs of a retriever comparison on other KGs: one engine per retriever over another index, and
a comparison that is skipped when its folder already holds it (``done.json``).

Used by the robustness benchmark (:mod:`simgrag.perturb.robustness`, perturbed KGs) and the abstention
study (:mod:`simgrag.eval.abstention`, a KG with the answers' triples removed). Every engine is a
:meth:`~simgrag.pipeline.SimGRAG.variant` of the given one: the LLM (loaded once), the few-shot
examples and the answerer settings are shared, the index and the retriever are its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simgrag.eval.compare import run_retriever_comparison
from simgrag.eval.runner import QAItem
from simgrag.fileio import write_bytes_atomic
from simgrag.index.directory import IndexDir
from simgrag.pipeline import SimGRAG

__all__ = ["engines_for", "run_sub_comparison"]

logger = logging.getLogger(__name__)


def engines_for(engine: SimGRAG, names: Sequence[str], model_dirs: Mapping[str, str] | None = None, *,
                index: IndexDir | None = None) -> dict[str, SimGRAG]:
    """One engine per retriever name (``model_dirs``: trained models by retriever name), over ``index``
    (default: ``engine``'s)."""
    dirs = dict(model_dirs or {})
    return {name: engine.variant(index=index, retriever=name,
                                 retriever_options={"model": dirs[name]} if name in dirs else None)
            for name in names}


def _items_digest(items: Sequence[QAItem]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(json.dumps([item.group, item.question, list(item.answers)]).encode("utf-8"))
    return digest.hexdigest()


def run_sub_comparison(engine: SimGRAG, names: Sequence[str], items: Sequence[QAItem], out_dir: Path, *,
                       index: IndexDir | None = None, model_dirs: Mapping[str, str] | None = None,
                       progress: bool | None = None) -> dict[str, Any]:
    """One comparison of the retrievers ``names`` over ``index`` (default: ``engine``'s) into
    ``out_dir``, skipped when its ``done.json`` says it ran these retrievers on these questions already
    (then its ``summary.json`` is returned)."""
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
    engines = engines_for(engine, names, model_dirs, index=index)
    run_retriever_comparison(engines, items, out_dir, progress=progress)
    write_bytes_atomic(marker, (json.dumps(want, indent=2) + "\n").encode("utf-8"))
    return json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))  # NaN already as null
