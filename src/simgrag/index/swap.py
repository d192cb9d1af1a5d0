"""Putting a finished index build in place, safely across crashes.

A build writes ``.NAME.building`` beside ``NAME`` and writes its manifest last, so a building
directory with a manifest is complete. Replacing an existing ``NAME`` takes two renames: ``NAME`` →
``.NAME.old``, then ``.NAME.building`` → ``NAME``. A crash between the two leaves no ``NAME``;
:func:`recover_swap` (run by every build and by opening a missing ``NAME``) completes the move with
the finished build, or puts ``.NAME.old`` back when the build was not complete. A finished build is
never thrown away: the next run with the same inputs (:func:`finished_build` gives its key) only
moves it in.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

__all__ = ["MANIFEST", "finished_build", "old_dir", "recover_swap", "replace_dir", "work_dir"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"


def work_dir(out: Path) -> Path:
    """Where the build of ``out`` works: ``.NAME.building`` beside it."""
    return out.parent / f".{out.name}.building"


def old_dir(out: Path) -> Path:
    """Where an index being replaced waits during the swap: ``.NAME.old`` beside it."""
    return out.parent / f".{out.name}.old"


def finished_build(work: Path) -> str | None:
    """The build key of a complete build in ``work`` (its manifest is written last), else ``None``."""
    try:
        manifest = json.loads((work / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    key = manifest.get("build_key") if isinstance(manifest, dict) else None
    return key if isinstance(key, str) else None


def recover_swap(out: Path) -> None:
    """Finish a replacement that a crash interrupted between its two renames (see the module docstring)."""
    out = Path(out)
    if out.exists():
        return
    work, old = work_dir(out), old_dir(out)
    if finished_build(work) is not None:
        logger.warning("%s: finishing an interrupted index replacement (moving the completed build in)", out)
        work.rename(out)
    elif (old / MANIFEST).is_file():
        logger.warning("%s: an index replacement was interrupted before the new build was complete; "
                       "putting the previous index back", out)
        old.rename(out)


def replace_dir(work: Path, out: Path) -> None:
    """Move the finished ``work`` to ``out``; an existing ``out`` goes to ``.NAME.old`` first and is
    deleted once the new one is in place."""
    old = old_dir(out)
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        out.rename(old)
    work.rename(out)
    if old.exists():
        shutil.rmtree(old)
