"""The one exception tree of simgrag.

Every error the library raises on purpose is a :class:`SimGRAGError`; adapters re-raise provider
errors (HTTP, llama.cpp, FAISS, Milvus) inside this tree, so ``except SimGRAGError`` is enough for a
caller. Each message says what went wrong *and* how to fix it::

    SimGRAGError
    ├── ConfigError                 bad setting, unknown registry name (--llm, --index, --embedder)
    ├── KGError                     problems with a knowledge-graph file or store
    │   ├── KGFormatError           malformed lines (``file:line: reason`` for the first problems)
    │   ├── EmptyKGError            no triple could be read
    │   ├── BindingLimitError       a small pattern too loose to enumerate its exact bindings
    │   └── CorruptStoreError       a saved KG store's arrays are inconsistent (names the array)
    ├── IndexDirError               an index directory is missing, incomplete, corrupt or mismatched
    ├── EmbedderError               the embedding model failed or is unavailable
    ├── VectorIndexError            a vector index failed (FAISS, Milvus, exact)
    ├── PatternError                a pattern graph is invalid (names the offending triple)
    │   └── PatternParseError       LLM output could not be turned into a pattern (shows the text)
    ├── MatchError                  the subgraph search was called with inconsistent inputs
    ├── LLMError                    a language-model backend failed
    │   ├── LLMConnectionError      the server cannot be reached
    │   ├── LLMTimeoutError         the call took longer than its timeout
    │   ├── LLMResponseError        the server answered with an error or unusable content
    │   │   └── HTTPStatusLLMError  … with an HTTP error status (``status_code``, ``detail``)
    │   └── TransientLLMError       a failure worth retrying (5xx, 429, a dropped link); carries ``final``
    ├── ModelError                  a model file cannot be obtained or fails its checksum
    ├── DatasetError                a benchmark dataset is missing or malformed
    └── ServiceError                the HTTP service refused or gave up on a request
        ├── NotReadyError           the index and models are still loading, or failed to load (503)
        ├── AuthError               missing or wrong API key (401)
        ├── RetrieverChoiceError    the request named a retriever the server does not offer (400)
        ├── QueueFullError          too many requests already wait for the LLM (429)
        ├── QueueTimeoutError       the deadline passed before the LLM was free (503)
        └── DeadlineExceededError   the deadline passed while the LLM worked (504)

``TransientLLMError`` never reaches a caller of a backend: the retry loop raises its ``final`` error
once no retry is left.

A message that tells how to fix the problem with an option names it as a Python caller writes it
(``skip_bad_lines=True``); the error's ``options`` maps that spelling to the command line's
(``--skip-bad-lines``), and :meth:`SimGRAGError.for_cli` is the message as the command line shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "AuthError",
    "BindingLimitError",
    "ConfigError",
    "CorruptStoreError",
    "DatasetError",
    "DeadlineExceededError",
    "EmbedderError",
    "EmptyKGError",
    "HTTPStatusLLMError",
    "IndexDirError",
    "KGError",
    "KGFormatError",
    "LLMConnectionError",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "MatchError",
    "ModelError",
    "NotReadyError",
    "PatternError",
    "PatternParseError",
    "QueueFullError",
    "QueueTimeoutError",
    "RetrieverChoiceError",
    "ServiceError",
    "SimGRAGError",
    "TransientLLMError",
    "VectorIndexError",
]


class SimGRAGError(Exception):
    """Root of every error simgrag raises on purpose. ``options``: Python spelling → command-line
    spelling of each option the message names (``{"skip_bad_lines=True": "--skip-bad-lines"}``)."""

    def __init__(self, *args: object, options: Mapping[str, str] | None = None) -> None:
        super().__init__(*args)
        self.options = dict(options or {})

    def for_cli(self) -> str:
        """The message with each option in its command-line spelling."""
        text = str(self)
        for keyword, flag in self.options.items():
            text = text.replace(keyword, flag)
        return text


class ConfigError(SimGRAGError):
    """A setting is invalid, or a name does not resolve in its registry."""


class KGError(SimGRAGError):
    """A knowledge-graph file or store cannot be used."""


class KGFormatError(KGError):
    """Malformed lines in a KG file.

    ``problems`` holds ``(path, line_number, reason)`` for (at most the first 20) bad lines;
    ``bad_lines`` counts all of them.
    """

    def __init__(
        self,
        message: str,
        problems: Sequence[tuple[str, int, str]] = (),
        bad_lines: int | None = None,
        *,
        options: Mapping[str, str] | None = None,
    ) -> None:
        self.problems = list(problems)
        self.bad_lines = len(self.problems) if bad_lines is None else bad_lines
        lines = [message] + [f"  {path}:{line}: {reason}" for path, line, reason in self.problems]
        super().__init__("\n".join(lines), options=options)


class EmptyKGError(KGError):
    """No triple could be read from the input."""


class BindingLimitError(KGError):
    """A small pattern has more partial bindings on the KG than the exact enumerator's limit
    (:func:`simgrag.kg.bindings.pattern_bindings`): too loose to enumerate its gold answers."""


class CorruptStoreError(KGError):
    """A saved KG store is damaged: an array has the wrong dtype or shape, an id out of range, an
    adjacency that disagrees with the triples, or a name table that is not valid UTF-8."""


class IndexDirError(SimGRAGError):
    """An index directory is missing, incomplete, corrupt or built with other settings."""


class EmbedderError(SimGRAGError):
    """The embedding model failed or is unavailable."""


class VectorIndexError(SimGRAGError):
    """A vector index failed."""


class PatternError(SimGRAGError):
    """A pattern graph is invalid; the message names the offending triple or text."""


class PatternParseError(PatternError):
    """LLM output could not be parsed into a pattern; ``text`` holds the raw output."""

    def __init__(self, message: str, text: str = "") -> None:
        self.text = text
        shown = text if len(text) <= 500 else text[:500] + "…"
        super().__init__(f"{message}\n  LLM output was: {shown!r}" if text else message)


class MatchError(SimGRAGError):
    """The subgraph search was called with inconsistent inputs."""


class LLMError(SimGRAGError):
    """A language-model backend failed."""


class LLMConnectionError(LLMError):
    """The LLM server cannot be reached (is it running? is --base-url right?)."""


class LLMTimeoutError(LLMError):
    """An LLM call took longer than its timeout."""


class LLMResponseError(LLMError):
    """The LLM server answered with an error or with content that cannot be used."""


class HTTPStatusLLMError(LLMResponseError):
    """The server answered with an HTTP error status (kept in ``status_code``, its text in ``detail``)."""

    def __init__(self, message: str, status_code: int, detail: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.detail = detail


class TransientLLMError(LLMError):
    """A failure worth retrying. ``final`` is the error to raise when no retry is left;
    ``retry_after`` is the server's hint in seconds (``Retry-After``), if any."""

    def __init__(self, final: LLMError, retry_after: float | None = None) -> None:
        super().__init__(str(final))
        self.final = final
        self.retry_after = retry_after


class ModelError(SimGRAGError):
    """A model file cannot be obtained, or it fails its checksum."""


class DatasetError(SimGRAGError):
    """A benchmark dataset is missing or malformed."""


class ServiceError(SimGRAGError):
    """The HTTP service refused a request or gave up on it (each subclass has its own status code)."""


class NotReadyError(ServiceError):
    """The index and models are still loading (see /v1/health), or they failed to load."""


class AuthError(ServiceError):
    """The request carries no API key, or the wrong one (send it as X-API-Key or Authorization: Bearer)."""


class RetrieverChoiceError(ServiceError):
    """The request named a retriever this server does not offer (or cannot build)."""


class QueueFullError(ServiceError):
    """Too many requests are already waiting for the LLM."""


class QueueTimeoutError(ServiceError):
    """The request's deadline passed before the LLM was free."""


class DeadlineExceededError(ServiceError):
    """The request's deadline passed while the LLM worked on it."""
