"""The facade: one object that owns an index directory, an LLM and the settings of each stage.

>>> engine = SimGRAG("movies.idx")                                   # doctest: +SKIP
>>> engine.retrieve([["UNKNOWN director 1", "directed", "Inception"]]).evidence[0].triples()  # doctest: +SKIP
>>> engine.ask("who directed Inception").answer                       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgrag.embed.base import Embedder
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern

if TYPE_CHECKING:
    from simgrag.llm.base import LLM

__all__ = ["SimGRAG", "build_index"]


def build_index(kg_path: str | Path, out_dir: str | Path, **options: Any) -> IndexDir:
    """Build an index directory (see :func:`simgrag.index.directory.build_index_dir`)."""
    return build_index_dir(kg_path, out_dir, **options)


class SimGRAG:
    """Retrieval over an index directory; with an LLM, also question answering and verification.

    ``index``: an index directory path or an opened :class:`IndexDir`. ``llm``: a spec such as
    ``"llamacpp"``, ``"openai:gpt-4o-mini"``, ``"ollama:llama3.1:8b"``, an LLM instance, or ``None``
    for retrieval only. ``retrieval``: default :class:`RetrievalSettings`.
    """

    def __init__(
        self,
        index: str | Path | IndexDir,
        *,
        llm: str | LLM | None = "llamacpp",
        embedder: str | Embedder | None = None,
        retrieval: RetrievalSettings | None = None,
        llm_options: dict[str, Any] | None = None,
    ) -> None:
        self.index = index if isinstance(index, IndexDir) else open_index_dir(index, embedder=embedder)
        self.retriever = SubgraphRetriever(self.index)
        self.retrieval = retrieval or RetrievalSettings()
        self._llm_spec = llm
        self._llm_options = dict(llm_options or {})
        self._llm: LLM | None = None

    @property
    def llm(self) -> LLM:
        """The LLM, resolved on first use."""
        if self._llm is None:
            from simgrag.errors import ConfigError
            from simgrag.llm.registry import resolve_llm

            if self._llm_spec is None:
                raise ConfigError("This SimGRAG was created with llm=None: retrieval only. Pass llm='llamacpp' "
                                  "(or openai:/ollama:) to answer questions.")
            self._llm = resolve_llm(self._llm_spec, **self._llm_options)
        return self._llm

    def retrieve(self, pattern: Pattern | Sequence[Sequence[str]],
                 settings: RetrievalSettings | None = None) -> Retrieval:
        """Top-k subgraphs for a pattern (SimGRAG §4.2, §5)."""
        return self.retriever.retrieve(pattern, settings or self.retrieval)
