"""SimGRAG's own retrieval as a :class:`~simgrag.retrievers.base.Retriever` (SimGRAG §4.1–4.2).

Two stages, each an object:

1. the **pattern stage** (:class:`~simgrag.retrievers.base.PatternStage`, ``retriever.patterns``):
   text → :class:`~simgrag.pattern.generate.PatternResult`. The default,
   :class:`~simgrag.grounding.stage.GroundedPatterns`, has the LLM write the pattern (few-shot prompt,
   parse, validate, one repair retry: :class:`~simgrag.pattern.generate.PatternGenerator`), then judges
   it with the question and the KG, edits it or asks the LLM once more when something is wrong, and
   lists the changes in ``kg_repairs``. With ``ground_patterns=False``, :class:`LLMPatternStage` only
   fixes the echoed-role error (:func:`~simgrag.grounding.repair.repair_echoed_roles`). Claims have their
   own stage (``retriever.claim_patterns``, claim examples). Any other stage plugs in as
   ``SimGRAGRetriever(index, patterns=my_stage)``.
2. the **subgraph search** (:class:`~simgrag.match.retrieve.SubgraphRetriever`): the top-k subgraphs
   with the smallest graph semantic distance, under :class:`~simgrag.match.retrieve.RetrievalSettings`.

The context carries both (``pattern``, ``subgraphs``), so the answerer can read the bindings and
GSDs; its ``triples`` are the union of the subgraphs' triples, best GSD first, each scored ``−GSD``
of the first subgraph that holds it, and its ``answer_candidates`` the bindings of the asked-for node
(:func:`~simgrag.retrievers.bindings.answer_candidates`). SimGRAG finds its entities through the
pattern, so given ``topic_entities`` are not used (``info`` records that they were given).

Few-shot examples: ``examples=`` (a file, an :class:`~simgrag.pattern.examples.ExampleSet` or a
built-in name), else :func:`index_examples` — the examples that come with the index: the file it was
built or bootstrapped with (``simgrag index --examples`` / ``--bootstrap-examples``, ``simgrag examples
install``; recorded in its manifest, :mod:`simgrag.index.attach`), else the bundled MetaQA set for a KG
whose relations are MetaQA's (MetaQA itself, the bundled sample), and for any other KG a
:class:`~simgrag.errors.ConfigError` saying how to get an examples file: MetaQA's movie questions would
teach the LLM the wrong relations. Claims use the index's claim examples, else MetaQA's for MetaQA's
relations, else the question examples.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from simgrag.errors import ConfigError, IndexDirError, SimGRAGError
from simgrag.grounding import GroundedPatterns
from simgrag.grounding.analogy import analog_candidates
from simgrag.grounding.channel import DEFAULT_READINGS, MARGIN, READINGS, ChannelChoice, Triples
from simgrag.grounding.fit import GroundingFit, read_fit
from simgrag.grounding.judge import PatternJudge
from simgrag.grounding.lexicon import kg_roles
from simgrag.grounding.registry import OFF_UNLESS_FITTED, family_names
from simgrag.grounding.repair import repair_echoed_roles
from simgrag.grounding.stage import STAGE_OPTIONS
from simgrag.index.attach import attached_path, attachment_record
from simgrag.index.directory import IndexDir
from simgrag.kg.store import KGStore, Triple
from simgrag.kg.twins import twin_relations
from simgrag.llm.base import LLM, scores_text
from simgrag.match.answers import ANSWER_TOLERANCE
from simgrag.match.kinds import NodeKinds, kind_of, kinds_of_examples
from simgrag.match.retrieve import Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.examples import Example, ExampleSet, load_examples
from simgrag.pattern.generate import PatternGenerator, PatternResult
from simgrag.pattern.graph import Pattern, is_unknown
from simgrag.retrievers.base import PatternStage, RetrievedContext
from simgrag.retrievers.bindings import answer_candidates, asked_text

__all__ = ["METAQA_RELATIONS", "LLMPatternStage", "SimGRAGRetriever", "grounding_fit", "index_examples",
           "needs_examples"]

Examples = str | Path | ExampleSet

logger = logging.getLogger(__name__)

#: the relations of MetaQA's movie KB: a KG using only these gets the bundled MetaQA examples
METAQA_RELATIONS = frozenset({"directed_by", "written_by", "starred_actors", "release_year", "in_language",
                              "has_tags", "has_genre", "has_imdb_votes", "has_imdb_rating"})

_NO_EXAMPLES = ("No few-shot examples for this KG ({why}): learn them from the KG with `simgrag learn {index}` "
                "(minutes; `simgrag ask` does it by itself), draft an editable file with `simgrag examples "
                "bootstrap {index} -o examples.yaml --install` (or `simgrag index … --bootstrap-examples`), or pass "
                "examples=FILE, a YAML or JSON file with the KG's relation names and a few questions "
                "written as pattern triples (see the README, 'Your own KG'). The bundled MetaQA examples are used "
                "only for MetaQA's movie KG.")


def _metaqa_kg(index: IndexDir) -> bool:
    relations = set(index.store.relations)
    return bool(relations) and relations <= METAQA_RELATIONS


def needs_examples(index: IndexDir) -> bool:
    """Whether ``index`` has no few-shot examples of its own: no examples file recorded in its manifest and
    a KG whose relations are not MetaQA's (:func:`index_examples` would refuse it)."""
    return attachment_record(index.manifest, "examples") is None and not _metaqa_kg(index)


def index_examples(index: IndexDir, kind: Literal["questions", "claims"] = "questions") -> str | Path:
    """The examples that come with ``index``: the file recorded in its manifest (built, bootstrapped or
    installed with it), else ``"metaqa"`` (``"metaqa_claims"`` for claims) when every relation of its KG
    is one of MetaQA's; claims fall back to the question examples. Otherwise :class:`ConfigError`.

    This is the one place an index's default examples are decided.
    """
    if kind == "claims":
        own = attached_path(index.path, index.manifest, "claim_examples")
        if own is not None:
            return own
        if _metaqa_kg(index):
            return "metaqa_claims"
    own = attached_path(index.path, index.manifest, "examples")
    if own is not None:
        return own
    if _metaqa_kg(index):
        return "metaqa"
    others = sorted(set(index.store.relations) - METAQA_RELATIONS)
    shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
    raise ConfigError(_NO_EXAMPLES.format(why=f"its relations {shown} are not MetaQA's and the index records no "
                                              "examples file", index=index.path),
                      options={"examples=FILE": "--examples FILE"})


def grounding_fit(index: IndexDir) -> GroundingFit | None:
    """The pattern stage's fit recorded with ``index`` (:mod:`simgrag.grounding.fit`), ``None`` without
    one; a malformed record is an :class:`~simgrag.errors.IndexDirError`."""
    try:
        return read_fit(index.manifest)
    except ConfigError as exc:
        raise IndexDirError(f"{index.path}: {exc}") from exc


def _own_claim_examples(index: IndexDir) -> str | Path | None:
    """Claim examples of their own that come with ``index`` (``None``: its question examples serve)."""
    own = attached_path(index.path, index.manifest, "claim_examples")
    return own if own is not None else ("metaqa_claims" if _metaqa_kg(index) else None)


class _LazyStage:
    """A pattern stage built on first use, once, whichever thread asks first."""

    def __init__(self, build: Callable[[], PatternStage]) -> None:
        self._build = build
        self._stage: PatternStage | None = None
        self._lock = threading.Lock()

    def get(self) -> PatternStage:
        with self._lock:
            if self._stage is None:
                self._stage = self._build()
            return self._stage


def _example_set(examples: Examples) -> ExampleSet | str:
    if isinstance(examples, Path) or (isinstance(examples, str) and Path(examples).suffix in
                                       (".yaml", ".yml", ".json")):
        return load_examples(examples)
    return examples


class LLMPatternStage:
    """The LLM writes the pattern (:class:`PatternGenerator`), then echoed roles are repaired with the
    KG's help when ``subgraphs`` is given (``None``: no repair)."""

    def __init__(self, generator: PatternGenerator, subgraphs: SubgraphRetriever | None = None) -> None:
        self.generator = generator
        self.subgraphs = subgraphs

    def pattern(self, text: str) -> PatternResult:
        generated = self.generator.generate(text)
        if self.subgraphs is None:
            return generated
        fixed, notes = repair_echoed_roles(generated.pattern, self.subgraphs)
        return replace(generated, pattern=fixed, kg_repairs=tuple(notes)) if notes else generated


class SimGRAGRetriever:
    """Pattern graph (LLM) → top-k similar subgraphs, as a :class:`RetrievedContext` (module docstring).

    ``retrieval``: the search settings (``k``, when given, overrides its ``k``); ``examples`` /
    ``claim_examples``: the few-shot examples of the question and the claim pattern prompts (default:
    the index's, :func:`index_examples`; claims fall back to the question examples);
    ``pattern_options``: keywords of :class:`PatternGenerator` and of the grounding stage
    (:data:`~simgrag.grounding.stage.STAGE_OPTIONS`: ``shot_selection``, ``analogy``); ``ground_patterns``: judge
    the LLM's pattern with the question and the KG, edit it or ask the LLM once more when something is wrong
    (:class:`~simgrag.grounding.stage.GroundedPatterns`, which includes the echoed-role repair) —
    ``None`` (default): as the index's fit says (:func:`grounding_fit`; every family without a fit), ``True``:
    every family whatever the fit, ``False``: off; ``grounding_off``: these families off and the others on,
    whatever the fit; ``channel``: the LLM's choice between the pattern and its readings (a hop shorter, a name
    put in, an example's pattern) by the likelihood of the question (:mod:`~simgrag.grounding.channel`) —
    ``None``: as the index's fit says (off without one, with an LLM that cannot score text, and with an LLM other
    than the one it was fitted with) — and where it is off, its *default* readings alone run
    (:data:`~simgrag.grounding.channel.DEFAULT_READINGS`: a name the question gives and the pattern leaves out,
    put in; a hop the LLM copied, taken out; a last hop it left out, added where the model itself would write it
    (the direct score; only for a pattern an LLM call wrote); at the fit's ``named_margin``, else 0; not where the
    fit found harm, nor with an LLM that cannot score text), ``True``/``False``: on/off (``False``: the default readings
    too);
    ``channel_margin``: how much likelier the question must be under a reading (default: the fit's, else 0);
    ``channel_readings``: the kinds of reading it offers (:data:`~simgrag.grounding.channel.READINGS`; default: those
    the fit was made with, else all); ``channel_direct``: deprecated, no effect (a longer reading's score always adds
    the LLM's own likelihood of writing it; no other reading's does);
    ``kind_prior``: the search gives a typed unknown node the kind the question examples' patterns give it
    (:mod:`simgrag.match.kinds`; its weight is the ``kind_penalty`` setting) — ``None``: as ``ground_patterns`` says
    where it is given (``False``, the LLM's own pattern, searches as the paper does), else as the index's fit says
    (on without one); ``True``/``False``: on/off;
    ``repair_roles``: without grounding, repair echoed roles with the KG. ``patterns`` /
    ``claim_patterns`` replace the default pattern stages (then ``llm`` and the example options are not
    needed); ``subgraphs`` shares a search object (and its caches).
    """

    name = "simgrag"
    adjustable = frozenset(f.name for f in fields(RetrievalSettings))

    def __init__(self, index: IndexDir, llm: LLM | None = None, *, k: int | None = None,
                 retrieval: RetrievalSettings | None = None, examples: Examples | None = None,
                 claim_examples: Examples | None = None, pattern_options: Mapping[str, Any] | None = None,
                 repair_roles: bool = True, ground_patterns: bool | None = None, patterns: PatternStage | None = None,
                 claim_patterns: PatternStage | None = None, subgraphs: SubgraphRetriever | None = None,
                 grounding_off: Sequence[str] | None = None, channel: bool | None = None,
                 channel_margin: float | None = None, channel_readings: Sequence[str] | None = None,
                 channel_direct: bool | None = None, kind_prior: bool | None = None) -> None:
        self.index = index
        self.subgraphs = subgraphs or SubgraphRetriever(index)
        settings = retrieval or RetrievalSettings()
        self.settings = settings if k is None else replace(settings, k=k)
        options = dict(pattern_options or {})
        # the grounding stage's own options travel in the same bag; the generator takes the rest
        stage_options = {key: options.pop(key) for key in STAGE_OPTIONS if key in options}

        stored = grounding_fit(index)
        fit = stored if ground_patterns is None and grounding_off is None else None
        if grounding_off is not None:  # these families off, the others on, whatever the index's fit says
            unknown = sorted(set(grounding_off) - set(family_names()))
            if unknown:
                raise ConfigError(f"grounding_off names unknown families {unknown} (see `simgrag ls`: "
                                  f"{', '.join(family_names())})")
            fit = GroundingFit(ground_patterns is not False, tuple(grounding_off))
        self.grounding_fit = fit
        #: whether typed unknown nodes get the examples' kinds in the search
        self.kind_prior = kind_prior if kind_prior is not None else (
            ground_patterns if ground_patterns is not None else stored is None or stored.kind_prior)
        self.channel = _channel_on(channel, stored, llm)
        margin = channel_margin if channel_margin is not None else (stored.channel_margin if stored else MARGIN)
        kinds = tuple(channel_readings) if channel_readings is not None else (
            stored.channel_readings if stored else READINGS)
        if channel_direct is not None:
            warnings.warn("the retriever option 'channel_direct' has no effect and will be removed: a longer reading's "
                          "score always adds the LLM's own likelihood of writing it", FutureWarning, stacklevel=2)
        # where the channel is off, the default readings alone, unless the fit found harm (or the channel was off)
        named = None if self.channel else _named_margin(channel, stored, llm)
        if named is not None:  # with the variant where the KG's fit turned it on
            margin, kinds = named, stored.default_readings if stored is not None else DEFAULT_READINGS
        #: the kinds of reading the channel choice offers (none: it does not run)
        self.channel_readings: tuple[str, ...] = kinds if self.channel or named is not None else ()

        def stage(generator_examples: Examples, *, asks: bool) -> PatternStage:
            generator = self._generator(llm, generator_examples, options)
            if asks and self.kind_prior:  # the question examples say what each kind is (claims: the same KG)
                self.subgraphs.use_kinds(e.triples for e in generator.prompt.examples.examples)
            grounded = fit.enabled if fit is not None else ground_patterns is not False
            chosen: PatternStage
            if grounded:
                # the fit is measured on questions: claims keep every family
                disabled: Sequence[str] = fit.disabled if fit is not None and asks else ()
                if fit is None and ground_patterns is None:  # no fit: what a fit must first show to help stays off
                    disabled = sorted(OFF_UNLESS_FITTED)
                chosen = GroundedPatterns(generator, self.subgraphs, asks=asks, disabled=disabled,
                                          search=self.settings, **stage_options)
            else:
                chosen = LLMPatternStage(generator, self.subgraphs if repair_roles else None)
            if self.channel_readings and asks and llm is not None:
                judge = chosen.judge if isinstance(chosen, GroundedPatterns) else None
                reader = _QuestionReader(self.subgraphs, generator, judge, self.settings)
                # a retyped reading is taken only where the kind prior makes the LLM's pattern pay: without it, skip
                offered = [k for k in kinds if k != "retyped" or self.kind_prior]
                chosen = ChannelChoice(chosen, llm, generator, margin=margin, mentions=reader.names,
                                       analogies=reader.analogies, readings=offered, extensions=reader.extensions,
                                       skips=reader.skips, anchors=reader.anchors, same=reader.same_relation,
                                       fit=reader.best_gsd, heads=reader.heads)
            return chosen

        self.patterns: PatternStage = patterns or stage(examples or index_examples(index), asks=True)
        claims = claim_examples or (None if claim_patterns is not None else _own_claim_examples(index))
        if claim_patterns is not None:
            self._claims = _LazyStage(lambda: claim_patterns)
        elif claims is None:
            self._claims = _LazyStage(lambda: self.patterns)  # a user's KG: its question examples serve claims too
        else:
            claim_set = _example_set(claims)  # read (and checked) now; the stage is built on the first claim
            self._claims = _LazyStage(lambda: stage(claim_set, asks=False))

    @property
    def claim_patterns(self) -> PatternStage:
        """The claims' pattern stage, built on the first claim: a question never needs it, and building
        it (its examples' relations embedded for the shot ranker) was half the set-up of a one-shot
        question."""
        return self._claims.get()

    @staticmethod
    def _generator(llm: LLM | None, examples: Examples, options: Mapping[str, Any]) -> PatternGenerator:
        if llm is None:
            raise ConfigError("The 'simgrag' retriever needs an LLM to write patterns (llm=…), or its own "
                              "pattern stages (patterns=…).")
        return PatternGenerator(llm, _example_set(examples), **options)

    def adjusted(self, **settings: Any) -> SimGRAGRetriever:
        """The same retriever (stages and search shared) with other :class:`RetrievalSettings`."""
        unknown = sorted(set(settings) - self.adjustable)
        if unknown:
            raise ConfigError(f"The 'simgrag' retriever has no setting {', '.join(map(repr, unknown))} "
                              f"(its settings: {', '.join(sorted(self.adjustable))}).")
        same = copy.copy(self)  # shares the stages (the claim stage too, built or not) and the search
        same.settings = replace(self.settings, **settings)
        return same

    def retrieve(self, question: str, *, topic_entities: Sequence[str] | None = None) -> RetrievedContext:
        """Raises :class:`~simgrag.errors.PatternError` when no valid pattern comes out of the LLM."""
        return self._retrieve(question, self.patterns, topic_entities)

    def retrieve_claim(self, claim: str) -> RetrievedContext:
        """The same, with the claim pattern stage (claims state facts: their own examples)."""
        return self._retrieve(claim, self.claim_patterns, None)

    def _retrieve(self, text: str, stage: PatternStage, topic_entities: Sequence[str] | None) -> RetrievedContext:
        t0 = time.perf_counter()
        generated = stage.pattern(text)
        t_pattern = time.perf_counter()
        retrieval = self.subgraphs.retrieve(generated.pattern, self.settings)
        triples, scores = _evidence_triples(retrieval)
        end = time.perf_counter()
        timings = {"pattern_s": t_pattern - t0}
        timings.update({k: retrieval.timings.get(k, 0.0) for k in ("embed_s", "vector_s", "graph_s", "answers_s")})
        timings["total_s"] = end - t0
        return RetrievedContext(
            retriever=self.name, question=text, triples=triples,
            answer_candidates=answer_candidates(generated.pattern, retrieval), scores=scores, timings=timings,
            info=_info(generated, retrieval, topic_entities), pattern=generated, subgraphs=retrieval,
        )


class _QuestionReader:
    """What the channel choice reads off a question, as the pattern stage reads it (its judge, or one made on the
    first question when the stage is off): the KG names of its confident entity mentions, and the examples'
    patterns with those entities in them."""

    def __init__(self, subgraphs: SubgraphRetriever, generator: PatternGenerator, judge: PatternJudge | None,
                 settings: RetrievalSettings | None = None) -> None:
        self.subgraphs, self.generator = subgraphs, generator
        self._judge = judge
        self.settings = settings or RetrievalSettings()  # the retriever's: its evidence search is then this one

    def judge(self) -> PatternJudge:
        if self._judge is None:
            examples = self.generator.prompt.examples.examples
            self._judge = PatternJudge(self.subgraphs, examples=[e.triples for e in examples],
                                       example_questions=[e.question for e in examples])
        return self._judge

    def names(self, question: str) -> list[str]:
        reader = self.judge()
        return [reader.store.entities[m.entity] for m in reader.read(question).mentions if m.confident]

    def extensions(self, question: str, triples: Triples) -> list[str]:
        """The KG relations that the asked-for node's best match for ``triples`` is the head of, those nearest a
        phrase of ``question`` first (the channel's longer readings; the LLM, not this order, chooses among them):
        none that is the turned-round twin of another (:func:`~simgrag.kg.twins.twin_relations`: a fact stored both ways
        is one hop, and its copy only walks back), and none whose far ends head it again — a hop to another of the
        same kind (a person's spouse, who has a spouse): the 1.5B model finds "Who is X's husband?" likelier with the
        husband's father or spouse added, and the contracted readings exist because it copies such hops."""
        pattern = Pattern.from_triples([list(t) for t in triples])
        asked = pattern.asked_node()
        if asked is None:
            return []
        return self.heads(question, triples, pattern.nodes[asked].text, repeats=False)

    def heads(self, question: str, triples: Triples, node: str, *, repeats: bool = True) -> list[str]:
        """The KG relations that ``node``'s best match for ``triples`` is the head of, those nearest a phrase of
        ``question`` first, no turned-round twin; with ``repeats`` off, none whose far ends head it again (as
        :meth:`extensions`). The channel's inserted readings take every one: a hop left out in the middle of a
        chain is as often one to another person ("X's siblings' kids" written without the kids)."""
        pattern = Pattern.from_triples([list(t) for t in triples])
        try:
            found = self.subgraphs.retrieve(pattern, self.settings)
        except SimGRAGError as exc:  # a pattern the search cannot take offers no longer reading
            logger.debug("no KG relations for %r of %r: %s", node, question, exc)
            return []
        binding = found.evidence[0].binding(node) if found.evidence else None
        if binding is None:
            return []
        judge = self.judge()
        roles = kg_roles(judge.retriever, binding.entity_id)
        twins = twin_relations(judge.store)  # the turned-round copy → the relation kept
        heads = [r for r, sides in sorted(roles.items()) if "head" in sides and judge.store.relations[r] not in twins
                 and (repeats or not _hop_repeats(judge.retriever, binding.entity_id, r))]
        if not heads:
            return []
        phrases = list(judge.read(question).phrases) or [question]
        nearest = judge.lexicon.relation_distances(phrases).min(axis=0)
        return [judge.store.relations[r] for r in sorted(heads, key=lambda r: (float(nearest[r]), r))]

    def anchors(self, question: str, triples: Triples) -> list[tuple[str, str, str]]:
        """Triples that tie an entity the question names (a confident mention) to an unknown node of ``triples``
        through a KG relation the entity has, on its side of it (the channel's anchored readings,
        :func:`~simgrag.grounding.channel.anchored_readings`): the pattern's nodes the question does not ask for first
        (a chain starts at the named entity), each with the entity's relations nearest a phrase of the question first;
        no turned-round twin. Empty where the pattern names an entity or the question names none the KG has, and for
        an entity the pattern takes as it stands — put in one of its unknown nodes, the KG matches it as well as it
        matches the pattern (a named reading is then the whole repair: "Petra's kids" written ``[UNKNOWN person 1,
        children, UNKNOWN person 2]`` is Petra's children, not her grandchildren)."""
        pattern = Pattern.from_triples([list(t) for t in triples])
        if any(not node.unknown for node in pattern.nodes):
            return []
        judge = self.judge()
        store = judge.store
        asked = pattern.asked_node()
        reading = judge.read(question)
        entities = [e for e in dict.fromkeys(m.entity for m in reading.mentions if m.confident)
                    if not self._takes_name(triples, store.entities[e])]
        if not entities:
            return []
        phrases = list(reading.phrases) or [question]
        nearest = judge.lexicon.relation_distances(phrases).min(axis=0)
        twins = twin_relations(store)
        kinds = self.subgraphs.kinds() or self._example_kinds
        nodes = [i for i in range(len(pattern.nodes)) if i != asked] + ([asked] if asked is not None else [])
        ties: list[tuple[float, int, tuple[str, str, str]]] = []
        for entity in entities:
            name = store.entities[entity]
            far = _far_ends(store, entity)
            for (rel, side), ends in sorted(far.items()):
                if store.relations[rel] in twins:
                    continue
                for rank, node in enumerate(nodes):
                    hint = pattern.nodes[node].type_hint
                    members = None if kinds is None or not hint else kinds.members.get(kind_of(hint))
                    if members is not None and not any(_member(members, end) for end in ends):
                        continue  # the relation reaches no entity of the kind the LLM typed the node with
                    unknown = pattern.nodes[node].text
                    tie = ((name, store.relations[rel], unknown) if side == "head"
                           else (unknown, store.relations[rel], name))
                    ties.append((float(nearest[rel]), rank, tie))
        return [tie for _, _, tie in sorted(ties, key=lambda x: (x[1], x[0], x[2]))]

    def same_relation(self, first: str, second: str) -> bool:
        """Whether the pattern's relation phrases ``first`` and ``second`` are nearest one KG relation ("brother" and
        "sister" both ``sibling``): the contracted readings take two such hops chained for a copy."""
        one = self.subgraphs.nearest_relation(first)
        return one is not None and one == self.subgraphs.nearest_relation(second)

    @cached_property
    def _example_kinds(self) -> NodeKinds | None:
        """The kinds of the examples' typed unknown nodes (:mod:`simgrag.match.kinds`) where the search runs without
        the kind prior; ``None`` where they type none."""
        examples = self.generator.prompt.examples.examples
        return kinds_of_examples(self.subgraphs.store, (e.triples for e in examples), self.subgraphs.nearest_relation)

    def best_gsd(self, triples: Sequence[Sequence[str]]) -> float:
        """The GSD of the KG's best match for ``triples`` (infinite where nothing matches)."""
        try:
            found = self.subgraphs.retrieve([list(t) for t in triples], self.settings)
        except SimGRAGError:  # a pattern the search cannot take matches nothing
            return float("inf")
        return found.evidence[0].gsd if found.evidence else float("inf")

    def _takes_name(self, triples: Triples, name: str) -> bool:
        """Whether the KG matches ``triples`` with ``name`` put in one of its unknown nodes as well as it matches them
        as written (best GSD within the answer tolerance)."""
        own = self.best_gsd(triples)
        nodes = dict.fromkeys(n for h, _, t in triples for n in (h, t) if is_unknown(n))
        return any(self.best_gsd([[name if x == node else x for x in t] for t in triples]) <= own + ANSWER_TOLERANCE
                   for node in nodes)

    def skips(self, question: str, triples: Triples) -> set[tuple[str, str]]:
        """The (named node, unknown node) pairs of ``triples`` whose hop the channel may skip
        (:func:`~simgrag.grounding.channel.skipped_readings`): the unknown node's other triple is one the KG does not
        hold as written from where the pattern's best match puts it (the search took another relation there), and
        the named node's entity has that relation, on that side, itself — "What country is X from?" written through
        X's place of birth, where places have no country edge and people do."""
        try:
            pattern = Pattern.from_triples([list(t) for t in triples])
            found = self.subgraphs.retrieve(pattern, self.settings)
        except SimGRAGError as exc:  # a pattern the search cannot take offers no skipped reading
            logger.debug("no skipped readings for %r: %s", question, exc)
            return set()
        if not found.evidence:
            return set()
        best = found.evidence[0]
        bound = {tuple(edge.pattern_triple): edge.triple.relation for edge in best.edges}
        out: set[tuple[str, str]] = set()
        for hop in triples:
            for named, middle in ((hop[0], hop[2]), (hop[2], hop[0])):
                binding = best.binding(named) if not is_unknown(named) and is_unknown(middle) else None
                if binding is None:
                    continue
                roles = kg_roles(self.subgraphs, binding.entity_id)
                for other in triples:
                    if other == hop or middle not in (other[0], other[2]):
                        continue
                    rel = self.subgraphs.nearest_relation(other[1])
                    side = "head" if other[0] == middle else "tail"
                    if (rel is not None and bound.get(other) != self.subgraphs.store.relations[rel]
                            and side in roles.get(rel, set())):
                        out.add((named, middle))
        return out

    def analogies(self, question: str, shots: Sequence[Example]) -> list[tuple[str, Triples]]:
        """Each of ``shots`` whose pattern takes the question's entities (:func:`analog_candidates`) and whose
        named nodes, so filled, have the example's relations on the same sides in the KG: (its question, the
        pattern)."""
        judge = self.judge()
        reading = judge.read(question)
        roles = {judge.store.entities[m.entity]: kg_roles(judge.retriever, m.entity)
                 for m in reading.mentions if m.confident}
        out: list[tuple[str, Triples]] = []
        for shot in shots:
            for candidate in analog_candidates(judge, reading, [shot], [0], limit=1):
                if all(side in roles[node].get(rel, ()) for _, rel, node, side
                       in judge.lexicon.relation_ends(candidate.triples) if node in roles):
                    out.append((shot.question, tuple(candidate.triples)))
        return out


def _far_ends(store: KGStore, entity: int) -> dict[tuple[int, str], list[int]]:
    """(KG relation, ``entity``'s side of it: "head" | "tail") → the entities at the other end of those triples (the
    grouping :func:`~simgrag.grounding.lexicon.kg_roles` makes, with the far ends kept)."""
    out: dict[tuple[int, str], list[int]] = {}
    others, rels, tids = store.neighbors(entity)
    heads = store.heads[tids] == entity
    for other, rel, is_head in zip(others.tolist(), rels.tolist(), heads.tolist(), strict=True):
        out.setdefault((int(rel), "head" if is_head else "tail"), []).append(int(other))
    return out


def _member(ids: np.ndarray, entity: int) -> bool:
    """Whether ``entity`` is in ``ids`` (sorted)."""
    at = int(np.searchsorted(ids, entity))
    return at < len(ids) and int(ids[at]) == entity


def _hop_repeats(retriever: SubgraphRetriever, entity: int, relation: int) -> bool:
    """Whether an entity that ``entity`` reaches by ``relation`` (as its head) is itself the head of ``relation``."""
    store = retriever.store
    _, rels, tids = store.neighbors(entity)
    ends = {int(store.tails[t]) for r, t in zip(rels.tolist(), tids.tolist(), strict=True)
            if r == relation and int(store.heads[t]) == entity}
    return any("head" in kg_roles(retriever, end).get(relation, set()) for end in ends)


def _channel_on(asked: bool | None, fit: GroundingFit | None, llm: LLM | None) -> bool:
    """Whether the channel choice runs: as ``asked``, else as the index's fit says — for the LLM it was fitted
    with (its margin is in that model's nats); an LLM that cannot score text turns a fitted "on" off (logged)
    and an asked one into a :class:`ConfigError`."""
    wanted = asked if asked is not None else bool(fit is not None and fit.channel)
    if not wanted or llm is None:
        return False
    fitted_with = fit.info.get("llm") if fit is not None else None
    if asked is None and isinstance(fitted_with, str) and fitted_with != llm.name:
        logger.info("the index's fit has the channel choice on for %s, not %s: off (fit it with this LLM: "
                    "`simgrag grounding fit`, or --channel)", fitted_with, llm.name)
        return False
    if scores_text(llm):
        return True
    if asked:
        raise ConfigError(f"the channel choice needs an LLM that scores text (the embedded llama.cpp model), "
                          f"not {llm.name}")
    logger.info("the index's fit has the channel choice on, but %s cannot score text: off", llm.name)
    return False


def _named_margin(asked: bool | None, fit: GroundingFit | None, llm: LLM | None) -> float | None:
    """The margin of the default readings where the channel itself is off (``None``: they do not run either): the
    fit's ``named_margin`` when it was made with this LLM, else :data:`~simgrag.grounding.channel.MARGIN` — not
    when the channel was turned off (``asked`` false), the fit found harm, or the LLM cannot score text."""
    if asked is False or llm is None or not scores_text(llm):
        return None
    if fit is None:
        return MARGIN
    if fit.named_margin is None:
        return None
    fitted_with = fit.info.get("llm")
    return fit.named_margin if not isinstance(fitted_with, str) or fitted_with == llm.name else MARGIN


def _evidence_triples(retrieval: Retrieval) -> tuple[tuple[Triple, ...], tuple[float, ...]]:
    seen: dict[Triple, float] = {}
    for ev in sorted(retrieval.evidence, key=lambda e: (e.gsd, e.rank)):
        for triple in ev.triples():
            seen.setdefault(triple, -float(ev.gsd))
    return tuple(seen), tuple(seen.values())


def _info(generated: PatternResult, retrieval: Retrieval, topic_entities: Sequence[str] | None) -> dict[str, Any]:
    return {
        "asked_node": asked_text(generated.pattern),
        "pattern_attempts": generated.attempts,
        "pattern_prompt_tokens": generated.prompt_tokens,
        "pattern_completion_tokens": generated.completion_tokens,
        "gsd": [float(ev.gsd) for ev in retrieval.evidence],
        "complete": retrieval.complete,
        "topic_entities_given": list(topic_entities or []),
    }
