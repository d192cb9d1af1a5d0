"""A disk cache of LLM calls: one small SQLite file, safe to share between processes.

A call is keyed by the sha256 of (backend name with model, messages, json schema, max_tokens,
temperature, stop). Only deterministic calls (temperature 0) are cached unless ``cache_sampled``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from simgrag.errors import ConfigError, LLMError
from simgrag.llm.base import (
    LLM,
    BaseLLM,
    ChatMessage,
    CompletionRequest,
    LLMResponse,
    LoadsWeights,
    samples_text,
    schema_by_default,
    scores_text,
)
from simgrag.llm.models import cache_dir

__all__ = ["CachedLLM", "call_key", "default_cache_path"]

logger = logging.getLogger(__name__)

_KEY_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_calls (
    key TEXT PRIMARY KEY,
    llm TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path(cache: str | os.PathLike[str] | None = None) -> Path:
    """``<simgrag cache dir>/llm_cache.sqlite3``."""
    return cache_dir(cache) / "llm_cache.sqlite3"


def call_key(
    llm_name: str,
    messages: Sequence[ChatMessage],
    *,
    json_schema: Mapping[str, Any] | None,
    max_tokens: int,
    temperature: float,
    stop: Sequence[str] | None,
) -> str:
    """The cache key of one call: sha256 of its canonical JSON form."""
    record = {
        "v": _KEY_VERSION,
        "llm": llm_name,
        "messages": [[m.role, m.content] for m in messages],
        "json_schema": json_schema,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "stop": list(stop) if stop else None,
    }
    return _record_key(record)


def _record_key(record: Mapping[str, Any]) -> str:
    """sha256 of ``record``'s canonical JSON form (a call's, or a scoring's)."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_INIT_ATTEMPTS = 8


class CachedLLM(BaseLLM):
    """Wraps an :class:`LLM`; answers repeated calls from an SQLite file with ``cached=True``.

    ``name`` is the wrapped model's, so results stay comparable. ``hits`` and ``misses`` count
    this instance's lookups.
    """

    def __init__(
        self, llm: LLM, path: str | os.PathLike[str] | None = None, *, cache_sampled: bool = False
    ) -> None:
        self.llm = llm
        self.name = llm.name
        self.path = Path(path) if path is not None else default_cache_path()
        self.cache_sampled = cache_sampled
        self.hits = 0
        self.misses = 0
        self._init_db()

    def __repr__(self) -> str:
        return f"CachedLLM({self.llm!r}, path={str(self.path)!r})"

    def load(self) -> None:
        """Load the wrapped model now, if it is one that loads (an in-process model)."""
        if isinstance(self.llm, LoadsWeights):
            self.llm.load()

    @property
    def schema_decoding_slow(self) -> bool:
        """The wrapped model's (see :class:`~simgrag.llm.base.SlowSchemaDecoding`)."""
        return not schema_by_default(self.llm)

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        """The cached answer when there is one, else the wrapped model's (then stored)."""
        if request.temperature != 0 and not self.cache_sampled:
            return request.send(self.llm)
        start = time.perf_counter()
        key = call_key(self.name, request.messages, json_schema=request.json_schema,
                       max_tokens=request.max_tokens, temperature=request.temperature, stop=request.stop)
        hit = self._get(key)
        if hit is not None:
            self.hits += 1
            logger.info("%s: cache hit %s…", self.name, key[:12])
            return LLMResponse(
                text=hit.text, prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens,
                latency_s=time.perf_counter() - start, cached=True,
            )
        self.misses += 1
        response = request.send(self.llm)
        self._put(key, response)
        return response

    @property
    def can_sample_text(self) -> bool:
        """Whether the wrapped model samples replies by seed (:class:`~simgrag.llm.base.SamplesText`)."""
        return samples_text(self.llm)

    def sample(self, messages: Sequence[ChatMessage], seeds: Sequence[int], *, temperature: float,
               max_tokens: int = 256) -> list[LLMResponse]:
        """The wrapped model's seeded samples (:class:`~simgrag.llm.base.SamplesText`), cached one record per seed
        (kept whatever ``cache_sampled`` says: a seed's reply is one the model gives, and keeping it fixes the
        samples between runs); the seeds not cached go to the model in one call. An :class:`~simgrag.errors.LLMError`
        when it cannot sample by seed."""
        if not samples_text(self.llm):
            raise LLMError(f"{self.name} cannot sample replies by seed (only the embedded llama.cpp model can)")
        keys = [_record_key({"v": _KEY_VERSION, "llm": self.name, "messages": [[m.role, m.content] for m in messages],
                             "max_tokens": max_tokens, "temperature": float(temperature), "seed": int(seed)})
                for seed in seeds]
        found: list[LLMResponse | None] = [self._get(key) for key in keys]
        missing = [i for i, hit in enumerate(found) if hit is None]
        self.hits += len(keys) - len(missing)
        if missing:
            self.misses += len(missing)
            fresh = self.llm.sample(messages, [seeds[i] for i in missing],  # type: ignore[attr-defined]
                                    temperature=temperature, max_tokens=max_tokens)
            if len(fresh) != len(missing):
                raise LLMError(f"{self.name} gave {len(fresh)} samples for {len(missing)} seeds")
            for i, response in zip(missing, fresh, strict=True):
                found[i] = response
                self._put(keys[i], response)
        return [replace(r, cached=i not in missing) for i, r in enumerate(found) if r is not None]

    @property
    def can_score_text(self) -> bool:
        """Whether the wrapped model scores text (:class:`~simgrag.llm.base.ScoresText`)."""
        return scores_text(self.llm)

    def score_continuations(self, prefix: str, items: Sequence[tuple[str, str]]) -> list[float]:
        """The wrapped model's scores (:class:`~simgrag.llm.base.ScoresText`), cached like calls, one record per
        item (the same reading scored beside others is not scored again); the items not cached go to the model
        in one call. An :class:`~simgrag.errors.LLMError` when it cannot score text."""
        if not scores_text(self.llm):
            raise LLMError(f"{self.name} cannot score text (only the embedded llama.cpp model can)")
        keys = [_record_key({"v": _KEY_VERSION, "llm": self.name, "score": prefix, "item": list(item)})
                for item in items]
        return self._scored(keys, lambda missing: self.llm.score_continuations(  # type: ignore[attr-defined]
            prefix, [items[i] for i in missing]))

    def score_replies(self, messages: Sequence[ChatMessage], replies: Sequence[str]) -> list[float]:
        """The wrapped model's reply scores (:class:`~simgrag.llm.base.ScoresText`), cached one record per reply
        like :meth:`score_continuations`."""
        if not scores_text(self.llm):
            raise LLMError(f"{self.name} cannot score text (only the embedded llama.cpp model can)")
        chat = [[m.role, m.content] for m in messages]
        keys = [_record_key({"v": _KEY_VERSION, "llm": self.name, "reply_to": chat, "reply": reply})
                for reply in replies]
        return self._scored(keys, lambda missing: self.llm.score_replies(  # type: ignore[attr-defined]
            messages, [replies[i] for i in missing]))

    def _scored(self, keys: Sequence[str], score: Callable[[list[int]], Sequence[float]]) -> list[float]:
        """The cached score per key; those missing come from one ``score(indices)`` call and are stored."""
        scores: list[float | None] = [self._cached_score(key) for key in keys]
        missing = [i for i, value in enumerate(scores) if value is None]
        self.hits += len(keys) - len(missing)
        if missing:
            self.misses += len(missing)
            start = time.perf_counter()
            fresh = list(score(missing))
            if len(fresh) != len(missing):
                raise LLMError(f"{self.name} gave {len(fresh)} scores for {len(missing)} texts")
            latency = (time.perf_counter() - start) / len(missing)
            for i, value in zip(missing, fresh, strict=True):
                scores[i] = float(value)
                self._put(keys[i], LLMResponse(text=json.dumps(float(value)), latency_s=latency))
        return [float(value) for value in scores if value is not None]

    def _cached_score(self, key: str) -> float | None:
        """A cached score, ``None`` when there is none or it does not read as a finite number (computed again)."""
        hit = self._get(key)
        if hit is None:
            return None
        try:
            score = json.loads(hit.text)
        except ValueError:
            return None
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return None
        return float(score)

    def clear(self) -> int:
        """Delete every cached call (of all models) in this file; returns how many there were."""
        with self._connect() as db:
            return db.execute("DELETE FROM llm_calls").rowcount

    def __len__(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0])

    # -- storage ----------------------------------------------------------------------------------

    def _init_db(self) -> None:
        # Switching to WAL needs an exclusive lock, and SQLite answers "database is locked" at
        # once (no busy wait) when several processes or threads open a new file together, so the
        # set-up is retried with backoff before it counts as a real failure.
        delay = 0.02
        for attempt in range(_INIT_ATTEMPTS):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self._connect() as db:
                    if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                        db.execute("PRAGMA journal_mode=WAL")
                    db.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == _INIT_ATTEMPTS - 1:
                    raise self._unusable(exc) from exc
                time.sleep(delay)
                delay *= 2
            except (OSError, sqlite3.Error) as exc:
                raise self._unusable(exc) from exc

    def _unusable(self, exc: BaseException) -> ConfigError:
        return ConfigError(
            f"cannot use {self.path} as the LLM call cache ({exc}); pass another cache path "
            f"or disable the cache"
        )

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # One short-lived connection per operation: no sharing across threads, and SQLite's own
        # locking (with a generous busy timeout) serializes writers from several processes.
        db = sqlite3.connect(self.path, timeout=30.0)
        try:
            with db:  # commit or roll back
                yield db
        finally:
            db.close()

    def _get(self, key: str) -> LLMResponse | None:
        try:
            with self._connect() as db:
                row = db.execute(
                    "SELECT text, prompt_tokens, completion_tokens, latency_s FROM llm_calls WHERE key = ?",
                    (key,),
                ).fetchone()
        except sqlite3.Error as exc:
            logger.warning("LLM cache %s unreadable (%s); calling the model", self.path, exc)
            return None
        if row is None:
            return None
        return LLMResponse(text=row[0], prompt_tokens=row[1], completion_tokens=row[2], latency_s=row[3])

    def _put(self, key: str, response: LLMResponse) -> None:
        row = (key, self.name, response.text, response.prompt_tokens, response.completion_tokens,
               response.latency_s, time.time())
        try:
            with self._connect() as db:
                db.execute("INSERT OR REPLACE INTO llm_calls VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        except sqlite3.Error as exc:
            logger.warning("could not write to the LLM cache %s (%s)", self.path, exc)
