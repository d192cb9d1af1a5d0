"""The facade: one object that owns an index directory, an LLM and the settings of each stage.

>>> engine = SimGRAG("movies.idx")                                   # doctest: +SKIP
>>> engine.retrieve([["UNKNOWN director 1", "directed", "Inception"]]).evidence[0].triples()  # doctest: +SKIP
>>> engine.ask("who directed Inception").answer                       # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgrag.embed.base import Embedder
from simgrag.errors import DatasetError
from simgrag.index.directory import IndexDir, build_index_dir, open_index_dir
from simgrag.kg.sources import KGSource
from simgrag.kg.store import KGStore
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern

if TYPE_CHECKING:
    from simgrag.answer.qa import Answer
    from simgrag.answer.verify import Verdict
    from simgrag.llm.base import LLM
    from simgrag.match.grounding import GroundedPatterns
    from simgrag.pattern.examples import ExampleSet
    from simgrag.pattern.generate import PatternGenerator, PatternResult

__all__ = [
    "AskResult",
    "SimGRAG",
    "VerifyResult",
    "build_index",
    "builtin_aliases_path",
    "metaqa_index",
    "sample_index",
    "sample_kg_path",
]


@dataclass(frozen=True)
class AskResult:
    """A question's answer with the pattern the LLM wrote and per-stage timings (seconds)."""

    question: str
    pattern: PatternResult
    answer: Answer
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "pattern": [list(t) for t in self.pattern.pattern.triples()],
                "pattern_attempts": self.pattern.attempts, "pattern_kg_repairs": list(self.pattern.kg_repairs),
                "timings": self.timings,
                **self.answer.to_dict()}


@dataclass(frozen=True)
class VerifyResult:
    """A claim's verdict with the pattern and per-stage timings (seconds)."""

    claim: str
    pattern: PatternResult
    verdict: Verdict
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "pattern": [list(t) for t in self.pattern.pattern.triples()],
                "pattern_attempts": self.pattern.attempts, "pattern_kg_repairs": list(self.pattern.kg_repairs),
                "timings": self.timings,
                **self.verdict.to_dict()}


def build_index(kg_path: str | Path | KGStore | KGSource, out_dir: str | Path, **options: Any) -> IndexDir:
    """Build an index directory from a KG file, store or source (see
    :func:`~simgrag.index.directory.build_index_dir`)."""
    return build_index_dir(kg_path, out_dir, **options)


class SimGRAG:
    """Retrieval over an index directory; with an LLM, also question answering and verification.

    ``index``: an index directory path or an opened :class:`IndexDir`. ``llm``: a spec such as
    ``"llamacpp"``, ``"openai:gpt-4o-mini"``, ``"ollama:llama3.1:8b"``, an LLM instance, or ``None``
    for retrieval only. ``retrieval``: default :class:`RetrievalSettings`. ``answer_mode``:
    ``"llm"`` always asks the LLM to answer from the subgraphs (the paper); ``"auto"`` answers
    directly from the subgraph bindings when the KG matches the pattern exactly (GSD ≈ 0) and asks
    the LLM otherwise. ``repair_roles``: fix the LLM's echoed-role patterns with the KG's help before
    retrieval (see :mod:`simgrag.match.repair`); the changes are listed in ``PatternResult.kg_repairs``.
    ``ground_patterns``: judge the LLM's pattern with the question and the KG, edit or revise it when
    something is wrong (:mod:`simgrag.match.grounding`; includes the role repair); the edits are listed
    in ``PatternResult.kg_repairs``.
    """

    def __init__(
        self,
        index: str | Path | IndexDir,
        *,
        llm: str | LLM | None = "llamacpp",
        embedder: str | Embedder | None = None,
        retrieval: RetrievalSettings | None = None,
        llm_options: dict[str, Any] | None = None,
        examples: str | Path | ExampleSet = "metaqa",
        claim_examples: str | Path | ExampleSet | None = "metaqa_claims",
        pattern_options: dict[str, Any] | None = None,
        abstain_gsd: float | None = None,
        answer_mode: str = "llm",
        repair_roles: bool = True,
        ground_patterns: bool = True,
    ) -> None:
        self.index = index if isinstance(index, IndexDir) else open_index_dir(index, embedder=embedder)
        self.retriever = SubgraphRetriever(self.index)
        self.retrieval = retrieval or RetrievalSettings()
        self._llm_spec = llm
        self._llm_options = dict(llm_options or {})
        self._llm: LLM | None = None
        self._examples = examples
        self._pattern_options = dict(pattern_options or {})
        self._patterns: PatternGenerator | None = None
        self._claim_examples = claim_examples
        self._claim_patterns: PatternGenerator | None = None
        self.abstain_gsd = abstain_gsd
        if answer_mode not in ("llm", "auto"):
            from simgrag.errors import ConfigError

            raise ConfigError(f"answer_mode must be 'llm' or 'auto', got {answer_mode!r}")
        self.answer_mode = answer_mode
        self.repair_roles = repair_roles
        self.ground_patterns = ground_patterns
        self._grounded: dict[bool, GroundedPatterns] = {}

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

    @property
    def llm_name(self) -> str | None:
        """The LLM's name (its spec until it is resolved); ``None`` for retrieval only."""
        if self._llm is not None:
            return str(getattr(self._llm, "name", type(self._llm).__name__))
        if self._llm_spec is None or isinstance(self._llm_spec, str):
            return self._llm_spec
        return str(getattr(self._llm_spec, "name", type(self._llm_spec).__name__))

    def retrieve(self, pattern: Pattern | Sequence[Sequence[str]],
                 settings: RetrievalSettings | None = None) -> Retrieval:
        """Top-k subgraphs for a pattern (SimGRAG §4.2, §5)."""
        return self.retriever.retrieve(pattern, settings or self.retrieval)

    def _generator(self, examples: str | Path | ExampleSet) -> PatternGenerator:
        from simgrag.pattern.examples import ExampleSet, load_examples
        from simgrag.pattern.generate import PatternGenerator

        if isinstance(examples, Path) or (isinstance(examples, str) and Path(examples).suffix in
                                           (".yaml", ".yml", ".json")):
            examples = load_examples(examples)
        assert isinstance(examples, (str, ExampleSet))
        return PatternGenerator(self.llm, examples, **self._pattern_options)

    @property
    def patterns(self) -> PatternGenerator:
        """The question → pattern generator (built on first use)."""
        if self._patterns is None:
            self._patterns = self._generator(self._examples)
        return self._patterns

    @property
    def claim_patterns(self) -> PatternGenerator:
        """The claim → pattern generator (claims state facts: their own examples; falls back to
        the question examples when ``claim_examples=None``)."""
        if self._claim_patterns is None:
            self._claim_patterns = (self.patterns if self._claim_examples is None
                                    else self._generator(self._claim_examples))
        return self._claim_patterns

    def warmup(self) -> dict[str, float]:
        """Load the embedder, the compiled search and (if any) the LLM now, not on the first query."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        self.index.embedder.encode(["warm up"], show_progress=False)
        timings["embedder_s"] = time.perf_counter() - t
        t = time.perf_counter()
        name = self.index.store.entities[0]
        self.retriever.retrieve([[name, "UNKNOWN relation 1", "UNKNOWN thing 1"]], RetrievalSettings(k=1))
        timings["search_s"] = time.perf_counter() - t
        if self._llm_spec is not None:
            t = time.perf_counter()
            _ = self.patterns  # resolves the LLM
            load = getattr(self.llm, "load", None)  # an in-process model (llama.cpp) loads its weights now
            if callable(load):
                load()
            timings["llm_s"] = time.perf_counter() - t
        return timings

    def grounded_patterns(self, *, claim: bool = False) -> GroundedPatterns:
        """The pattern stage with the KG as judge (:mod:`simgrag.match.grounding`) for questions or claims."""
        if claim not in self._grounded:
            from simgrag.match.grounding import GroundedPatterns

            generator = self.claim_patterns if claim else self.patterns
            self._grounded[claim] = GroundedPatterns(generator, self.retriever, asks=not claim)
        return self._grounded[claim]

    def _pattern_and_evidence(self, text: str, settings: RetrievalSettings | None,
                              timings: dict[str, float], *, claim: bool = False) -> tuple[PatternResult, Retrieval]:
        t = time.perf_counter()
        if self.ground_patterns:
            generated = self.grounded_patterns(claim=claim).generate(text)
        else:
            generated = (self.claim_patterns if claim else self.patterns).generate(text)
        if self.repair_roles and not self.ground_patterns:
            from simgrag.match.repair import repair_echoed_roles

            fixed, notes = repair_echoed_roles(generated.pattern, self.retriever)
            if notes:
                generated = replace(generated, pattern=fixed, kg_repairs=tuple(notes))
        timings["pattern_s"] = time.perf_counter() - t
        retrieval = self.retrieve(generated.pattern, settings)
        for key in ("embed_s", "vector_s", "graph_s"):
            timings[key] = retrieval.timings.get(key, 0.0)
        return generated, retrieval

    def ask(self, question: str, *, settings: RetrievalSettings | None = None) -> AskResult:
        """Answer a question from the KG: pattern (LLM) → top-k subgraphs → grounded answer (LLM).

        Raises :class:`~simgrag.errors.PatternError` when the LLM cannot produce a valid pattern
        after one repair, and :class:`~simgrag.errors.LLMError` when the LLM backend fails.
        """
        from simgrag.answer.qa import answer_from_bindings, answer_question

        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        generated, retrieval = self._pattern_and_evidence(question, settings, timings)
        t = time.perf_counter()
        answer = answer_from_bindings(question, generated.pattern, retrieval) if self.answer_mode == "auto" else None
        if answer is None:
            answer = answer_question(self.llm, question, generated.pattern, retrieval, abstain_gsd=self.abstain_gsd)
        timings["answer_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t0
        return AskResult(question, generated, answer, timings)

    def verify(self, claim: str, *, settings: RetrievalSettings | None = None) -> VerifyResult:
        """Fact verification: Supported / Refuted (or Not enough evidence) with the evidence."""
        from simgrag.answer.verify import verify_claim

        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        generated, retrieval = self._pattern_and_evidence(claim, settings, timings, claim=True)
        t = time.perf_counter()
        verdict = verify_claim(self.llm, claim, generated.pattern, retrieval, abstain_gsd=self.abstain_gsd)
        timings["answer_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t0
        return VerifyResult(claim, generated, verdict, timings)


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

    path = cache_dir(cache) / f"sample-{embedder.replace(':', '-')}.idx"
    if (path / "manifest.json").exists():
        return open_index_dir(path)
    return build_index_dir(sample_kg_path(), path, embedder=embedder,
                           relation_aliases=builtin_aliases_path("metaqa"), overwrite=True)


def metaqa_index(metaqa_dir: str | Path, *, cache: str | Path | None = None, embedder: str = "minilm") -> IndexDir:
    """The index of MetaQA's kb.txt with the bundled MetaQA relation aliases, built once into the cache."""
    from simgrag.config import cache_dir

    kb = Path(metaqa_dir) / "kb.txt"
    if not kb.is_file():
        raise DatasetError(f"{kb}: not found (give the MetaQA folder that holds kb.txt)")
    stamp = hashlib.blake2b(kb.read_bytes(), digest_size=8).hexdigest()  # content, not mtime: copies reuse it
    path = cache_dir(cache) / f"metaqa-{embedder.replace(':', '-')}-{stamp}.idx"
    if (path / "manifest.json").exists():
        return open_index_dir(path)
    return build_index_dir(kb, path, embedder=embedder, relation_aliases=builtin_aliases_path("metaqa"),
                           overwrite=True)
