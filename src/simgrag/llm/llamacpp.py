"""The embedded local model: a GGUF file run in-process by llama-cpp-python.

A :class:`llama_cpp.Llama` is loaded lazily and reused, so llama.cpp keeps the KV cache of the
longest common prefix of consecutive prompts: put the fixed part of a prompt first and only the
changing tail is evaluated again. By default there is **one** context: each :class:`llama_cpp.Llama`
is a whole model instance — measured with the default model on 2 cores, 1.87 GB of RSS each (1.06 GB
of mapped weights counted again per instance, 0.6 GB of weights repacked for the CPU kernels, the KV
cache and compute buffers) — while switching the one context between the pattern prompt and the answer
prompt costs a load of the other prompt's saved prefix state from the KV store below (milliseconds).
With ``max_contexts`` > 1 prompts are routed to one context per *system message* (least recently used
dropped first), which only pays when the KV store is off (on 2 CPU cores a 500-token prefix costs ~15 s
to re-evaluate). Calls are serialized with a lock (llama.cpp contexts are not thread-safe).

Prompt prefixes are also kept *across* calls and processes: the prompt is split before its final user
message (for the pattern prompt: rules, static and dynamic shots), and the KV state after that prefix
is saved to a :class:`~simgrag.llm.kv_store.KVStateStore` on disk. A later call whose prefix is not in
the live context loads the state instead of evaluating the prefix again (a 600-token prefix: ~20 s of
evaluation against ~10 ms of loading). The chat template of the GGUF is applied here, with
llama-cpp-python's own Jinja formatter, so that the prefix's tokens are known exactly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simgrag.config import cache_dir
from simgrag.errors import ConfigError, LLMError, LLMResponseError, ModelError
from simgrag.llm._llama_internals import (
    decode_greedy,
    decode_logits,
    drop_cache_from,
    held_tokens,
    is_end_of_generation,
    last_logits,
    load_sequence_state,
    route_native_logs,
    save_sequence_state,
    token_text,
)
from simgrag.llm.base import BaseLLM, ChatMessage, CompletionRequest, LLMResponse, log_response
from simgrag.llm.batch_costs import BatchCostFile, BatchCosts, cpu_identity, measure_batch_costs
from simgrag.llm.kv_store import DEFAULT_MAX_BYTES, KVStateStore
from simgrag.llm.lookup_decoding import CHEAP_BATCH_SIZES, DecodeResult, lookup_decode
from simgrag.llm.models import DEFAULT_MODEL, pull_default_model

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

__all__ = ["LlamaCppLLM", "llama_cpp_available"]

logger = logging.getLogger(__name__)

#: prefixes shorter than this are evaluated, not saved (a state file costs ~28 KB per token)
MIN_SAVED_PREFIX_TOKENS = 64

_INSTALL_HINT = (
    "llama-cpp-python is not installed; install it with pip install 'simgrag[llamacpp]' "
    '(on CPUs where a native build crashes: CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON" pip install llama-cpp-python)'
)


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python can be imported."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


class LlamaCppLLM(BaseLLM):
    """A GGUF chat model run in-process; ``model_path=None`` means the default model (pulled on
    first use, see :func:`simgrag.llm.models.pull_default_model`).

    ``kv_cache_dir`` is where prompt-prefix KV states are kept (default ``<cache dir>/llama-kv``,
    trimmed to ``kv_cache_max_bytes``); ``kv_cache=False`` turns that off. Besides a prompt's whole
    prefix, the state at the message boundary where a prompt parts from the previous one in its context
    (the end of the fixed few-shot part, when only the dynamic shots differ) is saved once, so that a new
    process asking a new question loads the fixed part and evaluates only what follows it.
    ``prefix_stats`` counts, per call, whether the prefix was already in the live context, loaded from
    disk (whole, or ``partial``: up to a saved boundary) or evaluated.

    ``lookup_decoding`` (on by default) decodes greedy calls (temperature 0, no JSON schema) with
    prompt-lookup drafts (:mod:`simgrag.llm.lookup_decoding`): the same output in fewer model steps, each
    draft as long as pays on this machine's measured batch costs (:mod:`simgrag.llm.batch_costs`: measured
    on the first load on a machine, kept in ``batch_costs_file``). ``batch_sizes`` fills drafts up to those
    sizes instead (no measuring).
    ``decode_stats`` counts the tokens generated and the batches it took, and sums the seconds spent
    making the context hold the prompt's prefix (``prefix_s``), evaluating the rest of the prompt
    (``prompt_tokens``, ``prompt_s``) and decoding (``decode_s``).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
        max_contexts: int | None = None,
        kv_cache: bool = True,
        kv_cache_dir: str | os.PathLike[str] | None = None,
        kv_cache_max_bytes: int = DEFAULT_MAX_BYTES,
        lookup_decoding: bool = True,
        batch_sizes: Sequence[int] | None = None,
        batch_costs_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser() if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.seed = seed
        self.verbose = verbose
        stem = self.model_path.stem if self.model_path is not None else Path(DEFAULT_MODEL.filename).stem
        self.name = f"llamacpp:{stem}"
        self.load_time_s: float | None = None
        # one model instance by default (module docstring); two without the KV store, so that the pattern and
        # the answer prompts keep their prefixes
        self.max_contexts = max(1, max_contexts if max_contexts is not None else (1 if kv_cache else 2))
        self._contexts: OrderedDict[str, Llama] = OrderedDict()
        self._spare: Llama | None = None  # loaded by load(), not yet given to a prompt
        self._lock = threading.Lock()
        self._formatters: tuple[Jinja2ChatFormatter, Jinja2ChatFormatter] | None = None
        self._kv_store: KVStateStore | None = None
        if kv_cache:
            directory = kv_cache_dir if kv_cache_dir is not None else cache_dir() / "llama-kv"
            self._kv_store = KVStateStore(directory, max_bytes=kv_cache_max_bytes)
        self.prefix_stats = {"in_context": 0, "loaded": 0, "partial": 0, "evaluated": 0}
        self.lookup_decoding = lookup_decoding
        self.batch_sizes: tuple[int, ...] | None = tuple(sorted({1, *batch_sizes})) if batch_sizes else None
        self.batch_costs: BatchCosts | None = None  # measured (or read) on the first load, unless batch_sizes
        self._batch_cost_file = BatchCostFile(
            batch_costs_file if batch_costs_file is not None else cache_dir() / "llama-batch-costs.json")
        self.decode_stats: dict[str, float] = {"tokens": 0, "steps": 0, "prefix_s": 0.0, "prompt_tokens": 0,
                                               "prompt_s": 0.0, "decode_s": 0.0}

    def __repr__(self) -> str:
        where = str(self.model_path) if self.model_path is not None else "<default model>"
        return f"LlamaCppLLM({where!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    #: JSON-schema grammars slow decoding ~40 % here (see :class:`~simgrag.llm.base.SlowSchemaDecoding`)
    schema_decoding_slow = True

    def load(self) -> None:
        """Load the model now rather than on the first call. The context made here is kept aside and
        becomes the first prompt's context, whatever its system message: the model is loaded once."""
        with self._lock:
            if not self._contexts and self._spare is None:
                self._spare = self._load()

    def close(self) -> None:
        """Free every context (the model is loaded again on the next call)."""
        with self._lock:
            while self._contexts:
                _, llama = self._contexts.popitem()
                llama.close()
            if self._spare is not None:
                self._spare.close()
                self._spare = None

    def _complete(self, request: CompletionRequest) -> LLMResponse:
        """One chat completion; with ``json_schema`` decoding is constrained by a grammar."""
        chat = [{"role": m.role, "content": m.content} for m in request.messages]
        logger.debug("%s prompt: %s", self.name, chat)
        stop = list(request.stop or ())
        with self._lock:
            llama = self._ensure_loaded(_context_key(request.messages) if self.max_contexts > 1 else "")
            start = time.perf_counter()
            prompt, prefix_len, boundaries = self._tokenize_chat(llama, chat)
            self._check_window(prompt)
            request = replace(request, max_tokens=min(request.max_tokens, self.n_ctx - len(prompt)))
            hinted = [b for b, m in zip(boundaries, request.messages, strict=False) if m.cache_after]
            self._reuse_prefix(llama, prompt[:prefix_len], boundaries, hinted)
            self.decode_stats["prefix_s"] += time.perf_counter() - start
            kwargs: dict[str, Any] = {
                "max_tokens": request.max_tokens, "temperature": request.temperature,
                "seed": self.seed if request.seed is None else request.seed,
                "stop": [*self._stop_strings(llama), *stop],
            }
            if request.json_schema is not None:
                kwargs["grammar"] = _grammar(request.json_schema)
            if self.lookup_decoding and request.temperature == 0.0 and request.json_schema is None:
                result = self._greedy(llama, prompt, request.max_tokens, stop)
            else:
                result = self._create(llama, prompt, kwargs)
            latency = time.perf_counter() - start
        response = _to_response(result, latency, self.name, constrained=request.json_schema is not None)
        log_response(logger, self.name, response)
        return response

    #: :class:`~simgrag.llm.base.SamplesText`: llama.cpp's sampler takes a seed per call
    can_sample_text = True

    def sample(self, messages: Sequence[ChatMessage], seeds: Sequence[int], *, temperature: float,
               max_tokens: int = 256) -> list[LLMResponse]:
        """One reply to ``messages`` per seed, sampled at ``temperature`` (:class:`~simgrag.llm.base.SamplesText`):
        the prompt is evaluated once (its state reused), each reply decoded with its own seed."""
        if not temperature > 0:  # NaN too
            raise ConfigError(f"sampling needs a temperature above 0, got {temperature!r}")
        bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**32]
        if bad:  # llama.cpp's seeds are 32-bit; its -1 means "random", which no cache could keep
            raise ConfigError(f"sampling seeds must be integers in [0, 2**32), got {bad[:3]!r}")
        return [self._complete(CompletionRequest(tuple(messages), None, max_tokens, float(temperature), None, seed))
                for seed in seeds]

    #: :class:`~simgrag.llm.base.ScoresText`: the log-likelihood of a text is read off the model's logits
    can_score_text = True

    def score_continuations(self, prefix: str, items: Sequence[tuple[str, str]]) -> list[float]:
        """Per ``(condition, scored)``: the summed log-probability of ``scored``'s tokens after ``prefix +
        condition`` (plain text, no chat template; :class:`~simgrag.llm.base.ScoresText`). The ``prefix`` is
        evaluated once (and its state kept in the KV store); each item evaluates only its own tokens."""
        if not items:
            return []
        with self._lock:
            llama = self._ensure_loaded("score" if self.max_contexts > 1 else "")
            start = time.perf_counter()
            head = _tokens(llama, prefix)
            self._reuse_prefix(llama, head)
            try:
                scores = [_continuation_logprob(llama, head, _tokens(llama, condition), _tokens(llama, scored))
                          for condition, scored in items]
            except RuntimeError as exc:  # llama_decode failed
                llama.reset()
                raise LLMError(f"{self.name} failed scoring text: {exc}") from exc
            logger.debug("%s scored %d texts in %.2f s", self.name, len(items), time.perf_counter() - start)
        return scores

    def score_replies(self, messages: Sequence[ChatMessage], replies: Sequence[str]) -> list[float]:
        """Per reply: the summed log-probability of its tokens as the assistant's answer to ``messages`` (the
        GGUF's chat template applied, the generation prompt added; :class:`~simgrag.llm.base.ScoresText`) — the
        model's own (*direct*) evidence for an output it might have written. It runs in the context
        :meth:`complete` uses for these messages, so right after their completion the prompt is there already;
        otherwise its fixed part comes from the KV store like a completion's."""
        if not replies:
            return []
        chat = [{"role": m.role, "content": m.content} for m in messages]
        if not chat:
            raise LLMError(f"{self.name}: scoring a reply needs a prompt (no messages were given)")
        with self._lock:
            llama = self._ensure_loaded(_context_key(messages) if self.max_contexts > 1 else "")
            start = time.perf_counter()
            head, prefix_len, boundaries = self._tokenize_chat(llama, chat)
            self._check_window(head)
            hinted = [b for b, m in zip(boundaries, messages, strict=False) if m.cache_after]
            self._reuse_prefix(llama, head[:prefix_len], boundaries, hinted)
            try:
                scores = [_continuation_logprob(llama, head, [], _tokens(llama, reply)) for reply in replies]
            except RuntimeError as exc:  # llama_decode failed
                llama.reset()
                raise LLMError(f"{self.name} failed scoring replies: {exc}") from exc
            logger.debug("%s scored %d replies in %.2f s", self.name, len(replies), time.perf_counter() - start)
        return scores

    # -- internals --------------------------------------------------------------------------------

    def _check_window(self, prompt: Sequence[int]) -> None:
        """An :class:`LLMError` for a prompt the context cannot hold (llama.cpp would fail mid-decode with
        "llama_decode returned 1")."""
        if len(prompt) >= self.n_ctx:
            raise LLMError(f"{self.name}: the prompt has {len(prompt)} tokens, more than its context window of "
                           f"{self.n_ctx} (a longer n_ctx or a shorter prompt may help)")

    def _create(self, llama: Llama, prompt: list[int], kwargs: dict[str, Any]) -> Any:
        try:
            return llama.create_completion(prompt=prompt, **kwargs)
        except ValueError as exc:  # e.g. "Requested tokens (…) exceed context window of …"
            msg = f"{self.name} failed: {exc} (a longer n_ctx or a shorter prompt may help)"
            raise LLMError(msg) from exc
        except RuntimeError as exc:
            raise LLMError(f"{self.name} failed: {exc}") from exc

    def _greedy(self, llama: Llama, prompt: list[int], max_tokens: int, stop: list[str]) -> dict[str, Any]:
        """Greedy decoding with prompt-lookup drafts, answering like ``create_completion``."""
        try:
            decoded = _greedy_decode(llama, prompt, max_tokens, stop, self.decode_stats, self._draft_policy())
        except RuntimeError as exc:  # llama_decode failed
            llama.reset()
            raise LLMError(f"{self.name} failed: {exc}") from exc
        self.decode_stats["tokens"] += len(decoded.tokens)
        self.decode_stats["steps"] += decoded.steps
        text, cut = _cut_at_stop(_detokenize(llama, decoded.tokens), stop)
        return {"choices": [{"text": text, "finish_reason": "stop" if cut else decoded.finish_reason}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(decoded.tokens)}}

    def _tokenize_chat(self, llama: Llama, chat: list[dict[str, str]]) -> tuple[list[int], int, list[int]]:
        """The prompt's tokens (chat template applied), the length of its reusable prefix (the tokens
        before the final user message, or 0 when they do not tokenize as a prefix) and, per message
        before the final one, the token offset of its end (0 where it does not tokenize as a prefix)."""
        with_prompt, _ = self._chat_formatters(llama)
        text = with_prompt(messages=chat).prompt  # type: ignore[arg-type]
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if len(chat) < 2 or chat[-1]["role"] != "user":
            return tokens, 0, []
        offsets = [self._prefix_tokens(llama, chat[:i], text, tokens) or 0 for i in range(1, len(chat))]
        if offsets[-1] == 0:
            return tokens, 0, []
        return tokens, offsets[-1], offsets[:-1]

    def _prefix_tokens(self, llama: Llama, messages: list[dict[str, str]], text: str,
                       tokens: list[int]) -> int | None:
        """How many of ``tokens`` (the whole prompt, ``text``) are the rendering of ``messages``, or
        ``None`` when that rendering does not tokenize as a prefix of the prompt."""
        head = self._chat_formatters(llama)[1](messages=messages).prompt  # type: ignore[arg-type]
        if not text.startswith(head):
            return None
        head_tokens = llama.tokenize(head.encode("utf-8"), add_bos=False, special=True)
        return len(head_tokens) if tokens[: len(head_tokens)] == head_tokens else None

    def _chat_formatters(self, llama: Llama) -> tuple[Jinja2ChatFormatter, Jinja2ChatFormatter]:
        """The GGUF's chat template, rendering with and without the assistant generation prompt."""
        if self._formatters is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise ModelError(f"{self.name} has no chat template in its GGUF metadata")
            eos, bos = self._stop_strings(llama)[0], token_text(llama, llama.token_bos())
            self._formatters = (
                Jinja2ChatFormatter(template, eos, bos, add_generation_prompt=True),
                Jinja2ChatFormatter(template, eos, bos, add_generation_prompt=False),
            )
        return self._formatters

    @staticmethod
    def _stop_strings(llama: Llama) -> list[str]:
        return [token_text(llama, llama.token_eos())]

    def _reuse_prefix(self, llama: Llama, prefix: list[int], boundaries: Sequence[int] = (),
                      hinted: Sequence[int] = ()) -> None:
        """Make the context hold ``prefix``: already there, loaded from the KV store, or evaluated
        (and then saved) after what the context shares with it or the longest saved state at one of
        the message ``boundaries``; the states at the ``hinted`` boundaries (messages marked
        ``cache_after``) and at the boundary where the prefix parts from the previous prompt are saved
        too (class docstring). Errors from llama.cpp's state API turn the store off, not the call."""
        if self._kv_store is None or len(prefix) < MIN_SAVED_PREFIX_TOKENS:
            return
        held = _common_prefix(held_tokens(llama), prefix)
        if held >= len(prefix):
            self.prefix_stats["in_context"] += 1
            return
        if not self._kv_store.namespace:  # the model's identity, fixed once the model is loaded
            self._kv_store = self._kv_store.with_namespace(self._model_identity())
        store = self._kv_store
        try:
            state = store.get(prefix)
            if state is not None and load_sequence_state(llama, prefix, state):
                self.prefix_stats["loaded"] += 1
                return
            held = self._resume_at_boundary(llama, store, prefix, boundaries, hinted, held)
            llama.n_tokens = held  # keep what the context already holds, evaluate the rest
            llama.eval(prefix[held:])
            store.put(prefix, save_sequence_state(llama))
            self.prefix_stats["evaluated"] += 1
        except (AttributeError, RuntimeError, OSError) as exc:
            logger.warning("prompt-prefix KV cache turned off: %s", exc)
            self._kv_store = None
            llama.reset()

    def _resume_at_boundary(self, llama: Llama, store: KVStateStore, prefix: list[int], boundaries: Sequence[int],
                            hinted: Sequence[int], held: int) -> int:
        """Where to go on evaluating ``prefix``: the longest saved boundary state beyond what the context
        holds (loaded), else what it holds. Then the states the store lacks are saved, in order: at each
        hinted boundary (evaluated up to it first) and at the last boundary within what the context
        shares with the prefix (the part consecutive prompts share). Returns the tokens now held."""
        usable = [b for b in boundaries if MIN_SAVED_PREFIX_TOKENS <= b < len(prefix)]
        for b in sorted((b for b in usable if b > held), reverse=True):
            state = store.get(prefix[:b])
            if state is not None and load_sequence_state(llama, prefix[:b], state):
                self.prefix_stats["partial"] += 1
                held = b
                break
        shared = [b] if (b := max((x for x in usable if x <= held), default=0)) else []
        for b in sorted({*(h for h in hinted if h in usable), *shared}):
            if store.contains(prefix[:b]):
                continue
            if b > held:
                llama.n_tokens = held
                llama.eval(prefix[held:b])
            else:
                drop_cache_from(llama, b)
            held = b
            store.put(prefix[:b], save_sequence_state(llama))
        return held

    def _model_identity(self) -> str:
        import llama_cpp

        if self.model_path is None:
            model = DEFAULT_MODEL.sha256
        else:
            stat = self.model_path.stat()
            model = f"{self.model_path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        return f"{model}|llama_cpp {llama_cpp.__version__}|n_ctx {self.n_ctx}"

    def _ensure_loaded(self, key: str) -> Llama:
        if key in self._contexts:
            self._contexts.move_to_end(key)
            return self._contexts[key]
        if len(self._contexts) >= self.max_contexts:
            _, oldest = self._contexts.popitem(last=False)
            oldest.close()
        llama, self._spare = (self._spare, None) if self._spare is not None else (self._load(), None)
        self._contexts[key] = llama
        return llama

    def _load(self) -> Llama:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise LLMError(_INSTALL_HINT) from exc
        path = self._resolve_path()
        logger.info("loading %s (n_ctx=%d, n_threads=%d)", path, self.n_ctx, self.n_threads)
        if not self.verbose:  # llama.cpp's lines to logging; no process-wide silencing while loading
            route_native_logs()
        start = time.perf_counter()
        try:
            llama = Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=self.verbose,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp cannot load {path}: {exc}; is it a valid GGUF file?") from exc
        self.load_time_s = time.perf_counter() - start
        logger.info("%s loaded in %.2f s (%d contexts)", self.name, self.load_time_s, len(self._contexts) + 1)
        if self.lookup_decoding and self.batch_sizes is None and self.batch_costs is None:
            self.batch_costs = self._measured_batch_costs(llama)
        return llama

    def _draft_policy(self) -> dict[str, Any]:
        """How lookup drafts are sized: filled up to the given ``batch_sizes``, else by the measured costs."""
        if self.batch_sizes is not None or self.batch_costs is None:
            return {"batch_sizes": self.batch_sizes or CHEAP_BATCH_SIZES}
        return {"draft_length": self.batch_costs.draft_length}

    def _measured_batch_costs(self, llama: Llama) -> BatchCosts:
        """This machine's batch costs for the model: read from the cost file, else measured on the fresh
        context ``llama`` (left empty again) and saved."""
        key = f"{self._model_identity()}|n_threads {self.n_threads}|{cpu_identity()}"
        costs = self._batch_cost_file.get(key)
        if costs is not None:
            return costs
        start = time.perf_counter()
        costs = measure_batch_costs(_batch_timer(llama))
        llama.reset()
        drop_cache_from(llama, 0)
        logger.info("%s: measured batch costs in %.1f s: %s", self.name, time.perf_counter() - start,
                    {n: round(s * 1000) for n, s in costs.seconds.items()})
        self._batch_cost_file.put(key, costs)
        return costs

    def _resolve_path(self) -> Path:
        if self.model_path is None:
            return pull_default_model()
        if not self.model_path.is_file():
            raise ModelError(
                f"model file {self.model_path} does not exist; check the path in 'llamacpp:<path>'"
            )
        return self.model_path


def _context_key(messages: Sequence[ChatMessage]) -> str:
    """Prompts with the same system message share a context (and its cached prefix)."""
    if messages and messages[0].role == "system":
        return hashlib.sha256(messages[0].content.encode("utf-8")).hexdigest()[:16]
    return ""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class _LlamaGreedy:
    """:class:`~simgrag.llm.lookup_decoding.GreedyModel` over a llama-cpp-python context (sequence 0),
    keeping its token history in step so later calls reuse the cached prefix."""

    def __init__(self, llama: Llama) -> None:
        self.llama = llama
        self.n_vocab = llama.n_vocab()

    def greedy_next(self, tokens: Sequence[int], n_past: int) -> list[int]:
        return decode_greedy(self.llama, tokens, n_past, self.n_vocab)

    def truncate(self, n_past: int) -> None:
        drop_cache_from(self.llama, n_past)


def _batch_timer(llama: Llama, context_tokens: int = 16) -> Callable[[int], float]:
    """``evaluate(n)``: the seconds one batch of ``n`` tokens takes (logits for each, as lookup decoding
    asks), evaluated after ``context_tokens`` tokens of context on an otherwise empty ``llama``."""
    text = "Turn the question into a knowledge-graph pattern: the triples that the answer must satisfy. "
    tokens = llama.tokenize((text * (context_tokens // 8 + 4)).encode("utf-8"), add_bos=False)
    context, probe = tokens[:context_tokens], tokens[context_tokens:]
    llama.reset()
    drop_cache_from(llama, 0)
    llama.eval(context)
    n_vocab = llama.n_vocab()

    def evaluate(n: int) -> float:
        drop_cache_from(llama, len(context))
        batch = (probe * (n // max(len(probe), 1) + 1))[:n]
        start = time.perf_counter()
        decode_greedy(llama, batch, len(context), n_vocab)
        return time.perf_counter() - start

    return evaluate


def _greedy_decode(llama: Llama, prompt: list[int], max_tokens: int, stop: list[str],
                   stats: dict[str, float], draft_policy: Mapping[str, Any] | None = None) -> DecodeResult:
    """Evaluate what the context lacks of ``prompt`` (at least its last token, for fresh logits), then
    decode greedily with prompt-lookup drafts; ``stats`` gets the seconds and tokens of each part."""
    held = min(_common_prefix(held_tokens(llama), prompt), len(prompt) - 1)
    start = time.perf_counter()
    llama.n_tokens = held
    llama.eval(prompt[held:])  # drops the cache after ``held`` first
    evaluated = time.perf_counter()
    stats["prompt_tokens"] += len(prompt) - held
    stats["prompt_s"] += evaluated - start

    def should_stop(tokens: list[int]) -> bool:
        return _cut_at_stop(_detokenize(llama, tokens), stop)[1]

    result = lookup_decode(
        _LlamaGreedy(llama), prompt, int(last_logits(llama).argmax()), max_tokens=max_tokens,
        is_end=lambda token: is_end_of_generation(llama, token),
        should_stop=should_stop if stop else None, **(draft_policy or {}),
    )
    stats["decode_s"] += time.perf_counter() - evaluated
    llama.n_tokens = result.n_past
    return result


def _tokens(llama: Llama, text: str) -> list[int]:
    """Plain text's tokens (no BOS, special-token text read as text)."""
    return llama.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text else []


def _continuation_logprob(llama: Llama, head: list[int], condition: list[int], scored: list[int]) -> float:
    """log P(``scored`` | ``head + condition``): the context keeps what it shares with ``head + condition``
    (at least the head once evaluated), evaluates the rest but the last token, then ``scored`` in batches with
    logits for each position (the row before a token is its distribution)."""
    if not scored:
        return 0.0
    before = head + condition
    if not before:
        raise LLMError("scoring a text needs some text before it (an empty prefix and condition)")
    held = min(_common_prefix(held_tokens(llama), before), len(before) - 1)
    llama.n_tokens = held
    if held < len(before) - 1:
        llama.eval(before[held:-1])  # drops the cache after ``held`` first
    else:
        drop_cache_from(llama, held)
    n_vocab, n_batch = llama.n_vocab(), max(1, int(llama.n_batch) - 1)
    feed = [before[-1], *scored[:-1]]  # the row after feed[j] is the distribution of scored[j]
    total = 0.0
    for at in range(0, len(feed), n_batch):
        rows = decode_logits(llama, feed[at:at + n_batch], len(before) - 1 + at, n_vocab)
        top = rows.max(axis=1, keepdims=True)
        log_norm = (top[:, 0] + np.log(np.exp(rows - top).sum(axis=1)))
        picked = rows[np.arange(len(rows)), scored[at:at + n_batch]]
        total += float((picked - log_norm).sum())
    return total


def _detokenize(llama: Llama, tokens: list[int]) -> str:
    return llama.detokenize(tokens).decode("utf-8", errors="ignore")


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (excluded), and whether one occurred."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


def _grammar(json_schema: Mapping[str, Any]) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_json_schema(json.dumps(dict(json_schema)), verbose=False)


def _to_response(result: Any, latency: float, name: str, *, constrained: bool) -> LLMResponse:
    try:
        choice = result["choices"][0]
        text = choice["text"] or ""
        usage = result.get("usage") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMResponseError(f"{name} returned an unexpected result: {str(result)[:300]}") from exc
    if choice.get("finish_reason") == "length":
        # cut-off JSON is unusable: worth a warning; plain text cut at max_tokens is often intended
        level = logging.WARNING if constrained else logging.DEBUG
        logger.log(level, "%s stopped at max_tokens; the output may be cut short", name)
    return LLMResponse(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
    )
