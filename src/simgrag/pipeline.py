"""The facade: one object that owns an index directory, a retriever, an LLM and the answerer.

``ask`` and ``verify`` always run *retrieve → answer → one result*, whatever the retriever: SimGRAG's
own (pattern graph → top-k similar subgraphs, the default) or any other of the registry (KAPING,
SubgraphRAG, …, :mod:`simgrag.retrievers.registry`), read by the one answerer
(:mod:`simgrag.answer.answerer`).

>>> engine = SimGRAG("movies.idx")                                   # doctest: +SKIP
>>> engine.retrieve([["UNKNOWN director 1", "directed", "Inception"]]).evidence[0].triples()  # doctest: +SKIP
>>> engine.ask("who directed Inception").answer                       # doctest: +SKIP
>>> SimGRAG("movies.idx", retriever="kaping").ask("who directed Inception")   # doctest: +SKIP
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgrag.answer.answerer import Answerer
from simgrag.answer.calibration import Calibration, resolve_calibration
from simgrag.answer.mode_fit import read_answer_mode
from simgrag.answer.refute import ClaimCheck, check_claim, exactly_supported
from simgrag.embed.base import Embedder
from simgrag.errors import ConfigError, SimGRAGError
from simgrag.grounding.lexicon import Lexicon
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.index.update import Batch, UpdateResult, update_index_dir
from simgrag.kg.sources import KGSource
from simgrag.kg.store import KGStore
from simgrag.llm.base import LLM, LoadsWeights
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.match.search import compile_root_bounds
from simgrag.pattern.graph import Pattern
from simgrag.pattern.validate import validate_question
from simgrag.retrievers.base import (
    AdjustableRetriever,
    ClaimRetriever,
    PatternRetriever,
    RetrievedContext,
    Retriever,
)
from simgrag.retrievers.registry import RetrieverSpec, accepted_options, check_retriever_options, resolve_retriever

if TYPE_CHECKING:
    from simgrag.answer.qa import Answer
    from simgrag.answer.verify import Verdict
    from simgrag.pattern.examples import ExampleSet
    from simgrag.pattern.generate import PatternResult

logger = logging.getLogger(__name__)

__all__ = [
    "AskResult",
    "SimGRAG",
    "VerifyResult",
    "build_index",
    "builtin_aliases_path",
    "sample_index",
    "sample_kg_path",
    "update_index",
]


def _pattern_fields(pattern: PatternResult | None) -> dict[str, Any]:
    if pattern is None:
        return {"pattern": [], "pattern_attempts": 0, "pattern_kg_repairs": []}
    return {"pattern": [list(t) for t in pattern.pattern.triples()], "pattern_attempts": pattern.attempts,
            "pattern_kg_repairs": list(pattern.kg_repairs)}


class _Views:
    """What both results show of their context."""

    context: RetrievedContext
    timings: dict[str, float]

    @property
    def retriever(self) -> str:
        """The name of the retriever that found the context."""
        return self.context.retriever

    @property
    def pattern(self) -> PatternResult | None:
        """The pattern graph the retriever matched (``None`` for a retriever that writes none)."""
        return self.context.pattern

    @property
    def evidence(self) -> Retrieval | None:
        """The matched subgraphs (``None`` for a retriever that returns none)."""
        return self.context.subgraphs

    def _common(self) -> dict[str, Any]:
        return {"retriever": self.retriever, **_pattern_fields(self.pattern), "timings": self.timings,
                "context": self.context.to_dict(subgraphs=False)}


@dataclass(frozen=True)
class AskResult(_Views):
    """A question's answer, the context it was read from (with SimGRAG's pattern and subgraphs) and
    per-stage timings (seconds)."""

    question: str
    context: RetrievedContext
    answer: Answer
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, **self._common(), **self.answer.to_dict()}


@dataclass(frozen=True)
class VerifyResult(_Views):
    """A claim's verdict, the context it was checked against and per-stage timings (seconds)."""

    claim: str
    context: RetrievedContext
    verdict: Verdict
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def evidence(self) -> Retrieval | None:
        """The subgraphs the verdict rests on: those of the claim's pattern, or, for a claim refuted by the
        KG's facts or checked against what the KG holds on its entity, those of that search."""
        return self.verdict.evidence if self.verdict.evidence is not None else self.context.subgraphs

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, **self._common(), **self.verdict.to_dict()}


def build_index(kg_path: str | Path | KGStore | KGSource, out_dir: str | Path, **options: Any) -> IndexDir:
    """Build an index directory from a KG file, store or source (see
    :func:`~simgrag.index.directory.build_index_dir`); an ``examples`` file is checked before the build
    and becomes the index's default examples."""
    if options.get("examples") is not None:
        from simgrag.pattern.examples import load_examples

        load_examples(options["examples"])  # a bad file fails now, not at the first question
    return build_index_dir(kg_path, out_dir, **options)


def update_index(index_dir: str | Path, *, add: Batch = None, remove: Batch = None, **options: Any) -> UpdateResult:
    """Add and remove triples in an index directory without a rebuild, atomically (see
    :func:`~simgrag.index.update.update_index_dir`); open it again to search the new version."""
    return update_index_dir(index_dir, add=add, remove=remove, **options)


def _timings(context: RetrievedContext, answer_s: float, total_s: float) -> dict[str, float]:
    timings = {k: v for k, v in context.timings.items() if k != "total_s"}
    timings["retrieve_s"] = context.timings.get("total_s", timings.get("retrieve_s", 0.0))
    return {**timings, "answer_s": answer_s, "total_s": total_s}


class SimGRAG:
    """Question answering and fact verification over an index directory; retrieval alone without an LLM.

    Grouped by stage, all keyword-only:

    - ``index``: an index directory path or an opened :class:`IndexDir` (``embedder``: another
      embedder object for it).
    - ``retriever``: a registered name (``"simgrag"``, ``"kaping"``, …), a retriever class (built as
      ``cls(index, **retriever_options)``, with ``llm=`` when it takes one) or an instance.
      ``retriever_options``: its constructor options (refused when it does not take them).
    - SimGRAG's retriever: ``retrieval`` (:class:`RetrievalSettings`), ``examples`` /
      ``claim_examples`` (few-shot files or sets; default: the index's,
      :func:`~simgrag.retrievers.simgrag.index_examples`), ``pattern_options``, ``repair_roles``,
      ``ground_patterns`` (judge the LLM's pattern with the question and the KG; on by default).
      Shorthands for ``retriever_options`` of the ``simgrag`` retriever; refused with another one.
    - ``llm``: ``"llamacpp"``, ``"openai:gpt-4o-mini"``, ``"ollama:llama3.1:8b"``, an LLM instance, or
      ``None`` for retrieval only; ``llm_options``: :func:`~simgrag.llm.registry.resolve_llm` keywords
      (``base_url``, ``api_key``, ``cache``: off unless given).
    - the answerer: ``answer_mode`` (``"auto"``: from the bindings on an exact match, else the LLM;
      ``"llm"``: always the LLM; ``None``: the mode fitted for the index's KG,
      :mod:`simgrag.answer.mode_fit`, else ``"auto"``), ``abstain_gsd`` (retrievers with subgraphs
      only), ``reader_style`` and ``reader_options`` (``max_triples``, ``max_prompt_tokens``), see
      :mod:`simgrag.answer.answerer`.

    :meth:`retrieve` (pattern → subgraphs) needs no LLM whatever the retriever.
    """

    def __init__(
        self,
        index: str | Path | IndexDir,
        *,
        retriever: RetrieverSpec = "simgrag",
        retriever_options: Mapping[str, Any] | None = None,
        llm: str | LLM | None = "llamacpp",
        llm_options: Mapping[str, Any] | None = None,
        embedder: str | Embedder | None = None,
        retrieval: RetrievalSettings | None = None,
        examples: str | Path | ExampleSet | None = None,
        claim_examples: str | Path | ExampleSet | None = None,
        pattern_options: Mapping[str, Any] | None = None,
        repair_roles: bool | None = None,
        ground_patterns: bool | None = None,
        answer_mode: str | None = None,
        abstain_gsd: float | None = None,
        reader_style: str | None = None,
        reader_options: Mapping[str, Any] | None = None,
        calibration: str | Path | Calibration | None = "auto",
    ) -> None:
        self.index = index if isinstance(index, IndexDir) else open_index_dir(index, embedder=embedder)
        self.subgraphs = SubgraphRetriever(self.index)
        self.retrieval = retrieval or RetrievalSettings()
        shorthands = {"retrieval": retrieval, "examples": examples, "claim_examples": claim_examples,
                      "pattern_options": pattern_options, "repair_roles": repair_roles,
                      "ground_patterns": ground_patterns}
        options = {**{k: v for k, v in shorthands.items() if v is not None}, **dict(retriever_options or {})}
        check_retriever_options(retriever, options)
        self._retriever_spec = retriever
        self._retriever_options = options
        self._retriever: Retriever | None = None if isinstance(retriever, (str, type)) else retriever
        self._llm_spec = llm
        self._llm_options = dict(llm_options or {})
        self._llm: LLM | None = None
        found = resolve_calibration(calibration, self.index.path,
                                    self.index.manifest.get("embedder", {}).get("name"),
                                    relations=self.index.store.relations, manifest=self.index.manifest)
        mode = answer_mode or fitted_answer_mode(self.index.manifest)
        self.answerer = Answerer(mode, abstain_gsd, reader_style, **dict(reader_options or {}),
                                 calibration=found, lexicon=Lexicon(self.subgraphs))
        self._warmup_error: SimGRAGError | None = None
        self._warmup_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ components
    @property
    def llm(self) -> LLM:
        """The LLM, resolved on first use."""
        if self._llm is None:
            from simgrag.llm.registry import resolve_llm

            if self._llm_spec is None:
                raise ConfigError("This SimGRAG was created with llm=None: retrieval only. Pass llm='llamacpp' "
                                  "(or openai:/ollama:) to answer questions.")
            self._llm = resolve_llm(self._llm_spec, **self._llm_options)
        return self._llm

    @property
    def llm_name(self) -> str | None:
        """The LLM's name (its spec until it is resolved); ``None`` for retrieval only."""
        if self._llm is not None:
            return self._llm.name
        if self._llm_spec is None or isinstance(self._llm_spec, str):
            return self._llm_spec
        return self._llm_spec.name

    @property
    def retriever_name(self) -> str:
        """The retriever's name, without building it (building may need the LLM)."""
        spec = self._retriever if self._retriever is not None else self._retriever_spec
        if isinstance(spec, str):
            from simgrag.retrievers.registry import RETRIEVERS

            return RETRIEVERS.get(spec).name if spec in RETRIEVERS else spec
        return str(getattr(spec, "name", getattr(spec, "__name__", type(spec).__name__)))

    @property
    def retriever(self) -> Retriever:
        """The retriever, built on first use (SimGRAG's shares this engine's subgraph search)."""
        if self._retriever is None:
            built = resolve_retriever(self._retriever_spec, index=self.index, llm=lambda: self.llm,
                                      subgraphs=self.subgraphs, **self._retriever_options)
            if self.answerer.abstain_gsd is not None and not isinstance(built, PatternRetriever):
                raise ConfigError(f"abstain_gsd needs a retriever that matches subgraphs with a GSD (simgrag); "
                                  f"{built.name!r} returns none.")
            self._retriever = built
        return self._retriever

    def with_retriever(self, retriever: Retriever) -> SimGRAG:
        """A shallow copy of this engine that asks ``retriever`` instead (e.g. one wrapping this engine's own, to
        observe its stages); everything else — LLM, index, answerer, caches — is shared."""
        view = copy.copy(self)
        view._retriever = retriever
        return view

    def variant(self, *, index: IndexDir | None = None, retriever: RetrieverSpec | None = None,
                retriever_options: Mapping[str, Any] | None = None, **answerer: Any) -> SimGRAG:
        """Another engine sharing this one's LLM (loaded once): over another ``index`` and/or with another
        ``retriever`` (its ``retriever_options``; this engine's retriever options that it also takes carry
        over) and/or other answerer settings (``answer_mode``, ``abstain_gsd``, ``reader_style``,
        ``reader_options``, ``calibration``: this engine's carries over, also to another index)."""
        spec = self._retriever_spec if retriever is None else retriever
        if not isinstance(spec, (str, type)) and index is not None:
            raise ConfigError("A retriever instance is bound to its index; name it (or give its class) to run "
                              "it over another index.")
        options = {**accepted_options(spec, self._retriever_options), **dict(retriever_options or {})}
        settings: dict[str, Any] = {"answer_mode": self.answerer.mode, "abstain_gsd": self.answerer.abstain_gsd,
                    "reader_style": self.answerer.style,
                    "reader_options": {"max_triples": self.answerer.max_triples,
                                       "max_prompt_tokens": self.answerer.max_prompt_tokens},
                    "calibration": self.answerer.calibration}
        settings.update(answerer)
        return SimGRAG(index or self.index, retriever=spec, retriever_options=options,
                       llm=None if self._llm_spec is None else self.llm, **settings)

    # ------------------------------------------------------------------ work
    def retrieve(self, pattern: Pattern | Sequence[Sequence[str]],
                 settings: RetrievalSettings | None = None) -> Retrieval:
        """Top-k subgraphs for a pattern (SimGRAG §4.2, §5); no LLM."""
        return self.subgraphs.retrieve(pattern, settings or self.retrieval)

    def warmup(self, *, wait: bool = True, load_llm: bool = True) -> dict[str, float]:
        """Load the embedder, the compiled search, the LLM (if any) and the retriever now, not on the
        first query; seconds per part.

        The embedder and the search warm up in a background thread while this thread loads the LLM and
        builds the retriever. ``wait=False`` returns without waiting for that thread (its parts are
        then missing from the result) and leaves an in-process LLM to load on its first call: a one-shot
        question goes on at once, and its pattern may need no LLM call at all (an analogy or an example
        the KG confirms). Loading it beside the question's work saved at most the pattern stage's
        ~0.7 s before the first call on 2 cores, and cost a question that needs no call the whole load
        (3–4 s) on 2 cores. Call :meth:`finish_warmup` before writing output (until 2026-11-27 a llama.cpp
        load also silenced the process's stdout, :func:`~simgrag.llm._llama_internals.route_native_logs`).
        ``load_llm=False`` leaves the model to :meth:`load_llm` (a server says it is ready first: questions
        that need no LLM call are answered while the model loads; the others wait for it).
        """
        timings: dict[str, float] = {}
        in_process = self._llm_spec is not None and isinstance(self.llm, LoadsWeights)
        background = threading.Thread(target=self._warm_retrieval, args=(timings,), name="simgrag-warmup",
                                      daemon=True)
        self._warmup_thread = background
        background.start()
        if self._llm_spec is not None:
            t = time.perf_counter()
            if in_process and wait and load_llm:  # llama.cpp loads its weights now
                self.load_llm()
            timings["llm_s"] = time.perf_counter() - t
        t = time.perf_counter()
        try:
            _ = self.retriever
        except ConfigError:
            if self._llm_spec is not None:
                raise
            logger.info("retrieval only: the %r retriever needs an LLM and is not built", self.retriever_name)
        timings["retriever_s"] = time.perf_counter() - t
        if wait:
            background.join()
            if self._warmup_error is not None:
                raise self._warmup_error
        return dict(timings)

    def load_llm(self) -> float:
        """Load an in-process LLM's weights now (no-op for a remote one); the seconds it took. A call that
        needs the model meanwhile waits for the load (the backend's lock)."""
        t = time.perf_counter()
        if self._llm_spec is not None and isinstance(self.llm, LoadsWeights):
            self.llm.load()
        return time.perf_counter() - t

    def finish_warmup(self) -> None:
        """Wait for the background part of a ``warmup(wait=False)``; its errors are kept for the first
        real query. Call it before writing output: nothing the warm-up does then writes meanwhile."""
        if self._warmup_thread is not None:
            self._warmup_thread.join()
            self._warmup_thread = None

    def _warm_retrieval(self, timings: dict[str, float]) -> None:
        """Embed one text and run one search (loads the model, the compiled kernel); errors are kept for
        :meth:`warmup` and come back on the first real query anyway."""
        try:
            t = time.perf_counter()
            self.index.embedder.encode(["warm up"], show_progress=False)
            timings["embedder_s"] = time.perf_counter() - t
            t = time.perf_counter()
            from simgrag.pattern.graph import MAX_TEXT_CHARS, is_unknown

            store = self.index.store
            names = (store.entities[i] for i in range(min(1000, store.num_entities)))
            name = next((n for n in names if len(n) <= MAX_TEXT_CHARS and n.strip() and not is_unknown(n)), None)
            if name is not None:  # a name that anchors a pattern (not "UNKNOWN 1", not 5,000 characters)
                self.subgraphs.retrieve([[name, "UNKNOWN relation 1", "UNKNOWN thing 1"]], RetrievalSettings(k=1))
            compile_root_bounds(store)  # what a large search adds to the small one above
            timings["search_s"] = time.perf_counter() - t
        except SimGRAGError as exc:
            self._warmup_error = exc

    def _for_call(self, k: int | None, deadline_s: float | None) -> Retriever:
        retriever = self.retriever
        if k is None and deadline_s is None:
            return retriever
        if not isinstance(retriever, AdjustableRetriever):
            if k is not None:
                raise ConfigError(f"The {retriever.name!r} retriever's k is set when it is built "
                                  "(retriever_options={'k': …}); it cannot change per call.")
            return retriever  # a deadline bounds a search; this retriever has none to bound
        changes: dict[str, Any] = {"k": k} if k is not None else {}
        if deadline_s is not None and "deadline_s" in retriever.adjustable:
            changes["deadline_s"] = deadline_s
        return retriever.adjusted(**changes) if changes else retriever

    def ask(self, question: str, *, topic_entities: Sequence[str] | None = None, k: int | None = None,
            deadline_s: float | None = None) -> AskResult:
        """Answer a question from the KG: retrieve (SimGRAG: pattern (LLM) → top-k subgraphs) → answer.

        ``topic_entities``: entity names the caller knows the question is about (retrievers that link
        entities use them); ``k``: how many subgraphs (or triples) to retrieve, for retrievers that can
        change it per call; ``deadline_s``: bounds the subgraph search (best-so-far after it). Raises
        :class:`~simgrag.errors.PatternError` when the LLM cannot produce a valid pattern after one
        repair, and :class:`~simgrag.errors.LLMError` when the LLM backend fails.
        """
        validate_question(question)  # a string of valid Unicode, not empty, not huge: before any model sees it
        t0 = time.perf_counter()
        context = self._for_call(k, deadline_s).retrieve(question, topic_entities=topic_entities)
        t = time.perf_counter()
        answer = self.answerer.answer(lambda: self.llm, context)
        end = time.perf_counter()
        return AskResult(question, context, answer, _timings(context, end - t, end - t0))

    def verify(self, claim: str, *, k: int | None = None, deadline_s: float | None = None) -> VerifyResult:
        """Fact verification: Supported / Refuted (or Not enough evidence) with the evidence. SimGRAG
        writes the claim's pattern with its claim examples; another retriever retrieves for the claim's
        text."""
        validate_question(claim, "claim")
        t0 = time.perf_counter()
        retriever = self._for_call(k, deadline_s)
        context = (retriever.retrieve_claim(claim) if isinstance(retriever, ClaimRetriever)
                   else retriever.retrieve(claim))
        t = time.perf_counter()
        check = self._check_claim(context)
        refute_s = time.perf_counter() - t
        t = time.perf_counter()
        verdict = self.answerer.verify(lambda: self.llm, claim, context, check)
        end = time.perf_counter()
        timings = _timings(context, end - t, end - t0)
        if check is not None:
            timings = {**{k: v for k, v in timings.items() if k not in ("answer_s", "total_s")}, "refute_s": refute_s,
                       "answer_s": timings["answer_s"], "total_s": timings["total_s"]}
        return VerifyResult(claim, context, verdict, timings)

    def _check_claim(self, context: RetrievedContext) -> ClaimCheck | None:
        """The claim's pattern searched with one end of each triple free (:mod:`simgrag.answer.refute`),
        unless the KG holds the pattern exactly; ``None`` for a context without a pattern."""
        if context.pattern is None or context.subgraphs is None:
            return None
        if exactly_supported(context.pattern.pattern, context.subgraphs):
            return None
        return check_claim(self.subgraphs, context.pattern.pattern, self.retrieval)


def fitted_answer_mode(manifest: Mapping[str, Any]) -> str:
    """The answer mode fitted for an index's KG (:mod:`simgrag.answer.mode_fit`), ``"auto"`` without one."""
    fit = read_answer_mode(manifest)
    return fit.mode if fit is not None else "auto"


def sample_kg_path() -> Path:
    """The small movie KG bundled with simgrag (a cut of MetaQA's KB)."""
    from importlib.resources import files

    return Path(str(files("simgrag") / "data" / "sample" / "movies.txt"))


def builtin_aliases_path(name: str = "metaqa") -> Path:
    """A relation-aliases file shipped with simgrag (``src/simgrag/data/aliases/<name>.yaml``)."""
    from importlib.resources import files

    return Path(str(files("simgrag") / "data" / "aliases" / f"{name}.yaml"))


def sample_index(*, cache: str | Path | None = None, embedder: str = "minilm") -> IndexDir:
    """The index of the bundled sample KG, built into the cache directory on first use."""
    from simgrag.config import cache_dir

    aliases = builtin_aliases_path("metaqa")
    stamp = content_stamp(sample_kg_path(), aliases)  # a new release's sample KG or aliases: a new index
    path = cache_dir(cache) / f"sample-{embedder.replace(':', '-')}-{stamp}.idx"
    if (path / "manifest.json").exists():
        return open_index_dir(path)
    return build_index_dir(sample_kg_path(), path, embedder=embedder, relation_aliases=aliases, overwrite=True)


def content_stamp(*paths: Path) -> str:
    """A short hash of the files' contents (cache keys: copies of the same data share an entry)."""
    digest = hashlib.blake2b(digest_size=8)
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()
