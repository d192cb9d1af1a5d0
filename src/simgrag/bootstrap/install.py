"""Attach an examples or aliases file to a finished index: its defaults from then on.

``simgrag examples install`` / ``simgrag aliases install`` and the ``--install`` of the bootstrap
commands end here. An examples file is read first (:func:`~simgrag.pattern.examples.load_examples`: a
bad file fails now, not at the first question) and copied into the index
(:func:`~simgrag.index.attach.attach_file`); an aliases file is checked against the KG's relations and
its texts embedded into the relation index (:func:`~simgrag.index.relations.refresh_relation_aliases`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simgrag.index.attach import attach_file
from simgrag.index.directory import IndexDir
from simgrag.index.relations import refresh_relation_aliases
from simgrag.pattern.examples import load_examples

__all__ = ["install_aliases", "install_examples"]


def install_examples(index: str | Path, examples: str | Path, *, claims: bool = False,
                     info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Attach the examples file ``examples`` to the index directory ``index`` (as its claim examples with
    ``claims``); the manifest's record of it."""
    parsed = load_examples(examples)
    record = {"examples": len(parsed), **dict(info or {})}
    return attach_file(index, "claim_examples" if claims else "examples", Path(examples), info=record)


def install_aliases(index: str | Path | IndexDir, aliases: str | Path,
                    info: Mapping[str, Any] | None = None) -> IndexDir:
    """Embed the relation aliases of ``aliases`` into ``index`` and attach the file; the index reopened."""
    return refresh_relation_aliases(index, aliases, info=info)
