"""The deterministic embedder of the tests (it lives in :mod:`simgrag.embed.hashing`, where the
registry's ``hash`` spec finds it)."""

from __future__ import annotations

from simgrag.embed.hashing import HashEmbedder

__all__ = ["HashEmbedder"]
