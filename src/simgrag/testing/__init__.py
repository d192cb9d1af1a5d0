"""Fakes shipped as API, for your tests too: a scripted :class:`FakeLLM`, the deterministic
:class:`HashEmbedder`, a toy movie KG whose answers can be checked by hand, a generated KG with
template questions, a brute-force oracle for the subgraph search, and loopback-server helpers.

>>> from simgrag.testing import FakeLLM, HashEmbedder, write_toy_kg   # doctest: +SKIP

Names are imported lazily (the oracle pulls in the compiled search).
"""

from __future__ import annotations

from simgrag._lazy import lazy_exports

_EXPORTS = {
    "FakeCall": "simgrag.testing.llm",
    "FakeLLM": "simgrag.testing.llm",
    "FakeLLMExhaustedError": "simgrag.testing.llm",
    "HashEmbedder": "simgrag.testing.embedders",
    "TOY_TRIPLES": "simgrag.testing.toy",
    "write_toy_kg": "simgrag.testing.toy",
    "QUESTION_TEMPLATES": "simgrag.testing.synthetic",
    "synthetic_movie_kg": "simgrag.testing.synthetic",
    "synthetic_questions": "simgrag.testing.synthetic",
    "brute_force_top_k": "simgrag.testing.brute_force",
    "free_port": "simgrag.testing.loopback",
    "stop_process": "simgrag.testing.loopback",
    "uvicorn_in_thread": "simgrag.testing.loopback",
    "run_in_threads": "simgrag.testing.threads",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
