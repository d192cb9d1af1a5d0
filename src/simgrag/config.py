"""Settings read from the environment, in one place.

=====================  ==========================================================
variable               meaning
=====================  ==========================================================
``SIMGRAG_CACHE_DIR``  models, the sample index and the LLM call cache (default ``~/.cache/simgrag``)
``SIMGRAG_METAQA_DIR`` the MetaQA folder used by benchmarks and data-dependent tests
``SIMGRAG_MILVUS_TOKEN`` token for a Milvus server (``user:password`` or an API key); never written to disk
=====================  ==========================================================
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "metaqa_dir", "milvus_token"]


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The simgrag cache directory: ``override``, else ``$SIMGRAG_CACHE_DIR``, else ``~/.cache/simgrag``."""
    if override is not None:
        return Path(override).expanduser()
    env = os.environ.get("SIMGRAG_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "simgrag"


def metaqa_dir() -> Path | None:
    """``$SIMGRAG_METAQA_DIR``, else ``../shared/data/MetaQA`` beside the working directory or beside
    the source checkout, if present."""
    env = os.environ.get("SIMGRAG_METAQA_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path.cwd().parent / "shared" / "data" / "MetaQA")
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data" / "MetaQA")
    return next((p for p in candidates if (p / "kb.txt").is_file()), None)


def milvus_token() -> str:
    """``$SIMGRAG_MILVUS_TOKEN`` (empty when unset): credentials stay out of index manifests."""
    return os.environ.get("SIMGRAG_MILVUS_TOKEN", "")
