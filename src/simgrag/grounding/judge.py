"""Judge a pattern with the question and the KG, after the LLM wrote it.

A small LLM reads the few-shot examples as something to copy: asked "Which movies share actors with
Heat?" it may add the ``has genre`` triple of the nearest example, drop the entity the question is
about, or leave a 3-hop chain with its middle link missing. Text added to the prompt does not stop
this (a 1.5B model copies that text too), so the pattern is checked *after* it is written:

- **problems** (any one disqualifies a pattern when a better one exists): a named node the question
  does not name; no named node although the question names a KG entity; a disconnected pattern; no
  unknown node to answer with; a named entity without an edge of its triple's relation, or on a side
  of it the KG never has it on (``[movie 1, starred actors, Ned Kelly]`` where *Ned Kelly* is a film);
  an answer node that contradicts the question's focus word ("Which **tags** …" answered by ``UNKNOWN movie 1``, "Who
  **directed** …" answered through ``written by``); no subgraph of the KG matching at all;
- **unsupported triples**: a triple with nothing for it in the question: no phrase of the question
  reads as its KG relation (:mod:`~simgrag.grounding.lexicon`), no leaf end whose type the question names,
  no named end that the KG knows only through that relation;
- **the KG's fit**: the GSD of the best matching subgraph.

A judgement also says whether the question's focus word *confirms* the answer node (its type or its
relation). :mod:`~simgrag.grounding.stage` keeps the LLM's pattern unless something is wrong
with it, and then prefers edited candidates (:mod:`~simgrag.grounding.edits`) that fix problems
or are confirmed.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

import numpy as np

from simgrag.errors import PatternError
from simgrag.grounding.english import APPOSITION_DETERMINERS, STOPWORDS, WH_WORDS
from simgrag.grounding.lexicon import Lexicon, kg_roles, other_side
from simgrag.grounding.question import QuestionReading, common_words_of, phrases_of
from simgrag.kg.twins import twin_ids
from simgrag.match.retrieve import NodeBinding, Retrieval, RetrievalSettings, SubgraphRetriever
from simgrag.pattern.graph import Pattern, is_unknown, singular, type_hint
from simgrag.pattern.validate import validate_pattern

__all__ = ["Candidate", "Judgement", "PatternJudge", "QuestionView", "Triple3", "judge_settings", "kg_roles",
           "unknown_name"]

Triple3 = tuple[str, str, str]
Focus = Literal["confirmed", "unknown", "contradicted"]

#: ... or after no determiner, a word naming a node type, unless it is this close to a relation
APPOSITION_RELATION_GAP = 0.3
#: the question's focus word names a relation only when this close (cosine ≥ 0.55)
FOCUS_DISTANCE = 0.95
#: a phrase this close to a relation no triple has means the pattern leaves part of the question out
COVER_DISTANCE = 0.85
#: ... or this close when no other relation is within ``COVER_MARGIN`` of it (a word the relation's texts
#: do not spell, "neighbouring" for ``borders``: 0.86, the next relation 1.02), unless it ends in a type word
COVER_CLEAR_DISTANCE = 0.9
COVER_MARGIN = 0.12
#: a phrase this near a relation's text names it whatever its words (``_uncovered``)
EXACT_PHRASE_DISTANCE = 0.5
#: ... and a phrase ending in a type word names a relation only this much nearer than the type word alone
TYPE_WORD_MARGIN = 0.05
#: each candidate's search stops after this many steps (best-so-far): a bad edit must not hold the question up.
#: A count, so that the judgement does not depend on the machine's load (BENCHMARKS.md §17: on geo-wc 35 of
#: 1,587 judge searches needed 0.2-1.6M steps, all under 0.25 s on a quiet machine, cut by a 0.25 s deadline
#: beside two busy processes)
JUDGE_MAX_STEPS = 2_000_000
#: ... and after this many seconds, a safety net only (2M steps took ~0.4 s on a hub of the 2-core machine)
JUDGE_DEADLINE_S = 1.0
#: a best-subgraph GSD up to this counts as "the KG holds this pattern" when ranking
GOOD_GSD = 0.5
#: the examples say what "who" asks for (:attr:`PatternJudge.who_types`) once this many of them ask "who"
MIN_WHO_EXAMPLES = 5


def _content_words(texts: Iterable[str]) -> set[str]:
    """The singular forms of the words of ``texts`` but stopwords, read as the question's words are
    (:func:`~simgrag.grounding.question.common_words_of`: ``plays_in_club`` → play, club)."""
    return {singular(w) for w in common_words_of(texts) if w not in STOPWORDS}


def dangling_leaves(pattern: Pattern) -> list[tuple[int, int]]:
    """(leaf, node) for each UNKNOWN leaf other than the answer node that hangs from a node which the
    answer's triple also touches: ``[Brazil, borders, UNKNOWN country 1]`` beside ``[Brazil, currency,
    UNKNOWN currency 1]`` ("Which currencies do Brazil's neighbours use?"), or ``[UNKNOWN country 1,
    borders, UNKNOWN country 2]`` beside ``[UNKNOWN country 1, official language, UNKNOWN language 1]``
    ("the languages of the countries bordering the country of Brno") — a node the pattern asks nothing
    of, where the question walks through it."""
    asked = pattern.asked_node()
    if asked is None:
        return []
    degree = pattern.degrees()
    near_asked = {e.source for e in pattern.edges if e.target == asked} | {e.target for e in pattern.edges
                                                                           if e.source == asked}
    out: list[tuple[int, int]] = []
    for edge in pattern.edges:
        for leaf, other in ((edge.source, edge.target), (edge.target, edge.source)):
            if (leaf != asked and pattern.nodes[leaf].unknown and degree[leaf] == 1 and other in near_asked):
                out.append((leaf, other))
    return out


@dataclass(frozen=True)
class Candidate:
    """A pattern to judge: its triples, where it came from and the edits that made it."""

    triples: tuple[Triple3, ...]
    origin: str = "llm"
    edits: tuple[str, ...] = ()
    asked: str | None = None  # the answer node of the LLM's pattern this one derives from
    families: tuple[str, ...] = ()  # the edit families that made it (:mod:`~simgrag.grounding.registry`)

    def edited(self, triples: Sequence[Triple3], note: str) -> Candidate:
        return Candidate(tuple(triples), self.origin, (*self.edits, note), self.asked, self.families)

    def tagged(self, family: str) -> Candidate:
        """The same candidate, noted as made (also) by the edit family ``family``."""
        return replace(self, families=(*self.families, family))

    def split(self, i: int, first: Triple3, second: Triple3, why: str) -> Candidate:
        """Triple ``i`` replaced by ``first`` and ``second`` (a hop made explicit), noted with ``why``."""
        old = self.triples[i]
        new = [*self.triples[:i], first, second, *self.triples[i + 1:]]
        return self.edited(new, f"{list(old)} -> {list(first)} + {list(second)}: {why}")


@dataclass(frozen=True)
class QuestionView:
    """The question seen from one pattern: per word, whether a named node covers it and which node
    type it names (or ``None``); the phrases that may name relations; the focus word's index."""

    covered: tuple[bool, ...]
    type_of: tuple[str | None, ...]
    phrases: tuple[str, ...]
    focus: int | None


@dataclass(frozen=True)
class Judgement:
    """What the judge found about one candidate."""

    candidate: Candidate
    pattern: Pattern | None
    problems: tuple[str, ...]
    unsupported: tuple[Triple3, ...]
    gsd: float
    focus: Focus = "unknown"
    retrieval: Retrieval | None = field(default=None, repr=False, compare=False)
    wanted_relation: int | None = None  # the KG relation the focus word asks of the answer, if it contradicts
    focus_word: str | None = None
    schema_misses: int = 0  # (type, relation, side) uses the examples never show
    asked: str | None = None  # the answer node's text
    stray: int = 0  # relations the question's words did not choose (PatternJudge._unsupported)
    uncovered: tuple[int, ...] = ()  # relations the question names and no triple has (uncovered_relations)
    stray_relations: tuple[int, ...] = ()  # the ``stray`` relations themselves (KG relation ids)

    @property
    def key(self) -> tuple[float, ...]:
        """Lower is better: problems, unsupported triples, GSD bucket, schema misses, whether the answer
        node is another than the LLM's, edits, triples (of two otherwise equal readings, the simpler
        one), GSD."""
        gsd = self.gsd if math.isfinite(self.gsd) else 1e9
        moved = 0 if self.asked is None or self.asked == self.candidate.asked else 1
        return (len(self.problems), len(self.unsupported), 0 if gsd <= GOOD_GSD else 1, self.schema_misses,
                moved, len(self.candidate.edits), len(self.candidate.triples), gsd)

    @property
    def sound(self) -> bool:
        """No problem, every triple supported, and the KG holds the pattern closely."""
        return not self.problems and not self.unsupported and self.gsd <= GOOD_GSD

    def describe(self) -> str:
        """The problems and unsupported triples as one sentence (for a retry prompt and logs)."""
        parts = list(self.problems)
        parts += [f"the question has no words for the triple {list(t)}" for t in self.unsupported]
        if not parts and self.gsd > GOOD_GSD:
            parts.append("the knowledge graph has nothing close to it")
        return "; ".join(parts)


def judge_settings(search: RetrievalSettings | None = None) -> RetrievalSettings:
    """The judge's searches: ``search`` (the retriever's own settings, so that the search of the pattern the judge
    chooses is the one the retriever then reuses: :meth:`~simgrag.match.retrieve.SubgraphRetriever.retrieve`) under
    the judge's step cap and deadline; without it the default settings with no answer set (not needed to judge)."""
    base = search if search is not None else RetrievalSettings(answer_tolerance=None)
    return replace(base, deadline_s=JUDGE_DEADLINE_S, max_steps=JUDGE_MAX_STEPS)


class PatternJudge:
    """Checks patterns of one question against the question's words and the KG (see module doc).

    ``asks``: the text is a question (a pattern without an unknown node cannot answer it); claims
    (``asks=False``) may be fully named and have no focus word.
    """

    def __init__(self, retriever: SubgraphRetriever, settings: RetrievalSettings | None = None, *,
                 asks: bool = True, examples: Sequence[Sequence[Sequence[str]]] = (),
                 lexicon: Lexicon | None = None, example_questions: Sequence[str] = ()) -> None:
        self.retriever = retriever
        self.store = retriever.store
        self.settings = settings or judge_settings()
        self.asks = asks
        self.lexicon = lexicon or Lexicon(retriever, examples=examples)
        self._example_questions = list(zip(example_questions, examples, strict=False))

    @cached_property
    def focus_sides(self) -> dict[int, set[str]]:
        """KG relation → the sides of it the examples' answer nodes take when the example question's focus
        word names that relation ("who **directed** X": the tail of ``directed_by``). A question whose focus
        word names the relation must be answered on one of those sides: "Who **acted** alongside X?" is not
        answered by the film, the *head* of ``starred_actors``. Only questions with a question word teach
        (without one the first content word is taken, often not what is asked). Empty without example
        questions."""
        found: list[tuple[str, dict[int, set[str]]]] = []
        for question, triples in self._example_questions:
            try:
                pattern = Pattern.from_triples(triples)
            except PatternError:
                continue
            reading = self.read(question)
            if not WH_WORDS.intersection(reading.clean_words()):
                continue  # "the scriptwriter of X also wrote movies": the first content word is not what is asked
            covered = [False] * len(reading.words)
            spans = [reading.span_of(n.text) for n in pattern.nodes if not n.unknown]
            for span in [*spans, *((m.start, m.end) for m in reading.mentions if m.confident)]:
                if span is not None:
                    covered[span[0]:span[1]] = [True] * (span[1] - span[0])
            index, asked = reading.focus(covered), pattern.asked_node()
            if index is None or asked is None:
                continue
            sides: dict[int, set[str]] = {}
            for edge in pattern.edges:
                rel = None if edge.unknown else self.retriever.nearest_relation(edge.relation)
                if rel is not None and asked in (edge.source, edge.target):
                    sides.setdefault(rel, set()).add("head" if edge.source == asked else "tail")
            found.append((reading.clean_words()[index], sides))
        words = sorted({word for word, _ in found})
        distances = dict(zip(words, self.lexicon.relation_distances(words), strict=True)) if words else {}
        out: dict[int, set[str]] = {}
        for word, sides in found:
            best = int(np.argmin(distances[word]))
            if distances[word][best] <= FOCUS_DISTANCE and best in sides:
                out.setdefault(best, set()).update(sides[best])
        return out

    @cached_property
    def who_types(self) -> frozenset[str]:
        """The node types the examples answer "who" questions with (``{"actor", "director", "writer"}`` on
        MetaQA): a "who" question answered by a node of another of the examples' types ("Who has X directed
        movies with?" answered by ``UNKNOWN movie 1``) has a problem. Empty — no such check — when fewer than
        ``MIN_WHO_EXAMPLES`` example questions ask "who" (a KG whose examples never say what "who" is:
        "Who are Iraq's neighbours?" asks for countries)."""
        kinds: list[str] = []
        for question, triples in self._example_questions:
            try:
                pattern = Pattern.from_triples(triples)
            except PatternError:
                continue
            asked = pattern.asked_node()
            if asked is not None and pattern.nodes[asked].type_hint and self.read(question).asks_who():
                kinds.append(str(pattern.nodes[asked].type_hint))
        return frozenset(kinds) if len(kinds) >= MIN_WHO_EXAMPLES else frozenset()

    def _who_problems(self, reading: QuestionReading, pattern: Pattern) -> list[str]:
        """"Who" answered by a node of one of the examples' types that they never answer "who" with."""
        asked = pattern.asked_node()
        if asked is None or not self.who_types or not reading.asks_who():
            return []
        kind = pattern.nodes[asked].type_hint
        if kind is None or kind in self.who_types or kind not in self.lexicon.types:
            return []
        return [f"the question asks 'who', but the answer node {pattern.nodes[asked].text!r} is a {kind} "
                f"(the examples answer 'who' with: {', '.join(sorted(self.who_types))})"]

    def read(self, question: str) -> QuestionReading:
        """The question's entity mentions and words (:meth:`Lexicon.read`, with :attr:`common_words`)."""
        return self.lexicon.read(question, self.common_words)

    @cached_property
    def common_words(self) -> frozenset[str]:
        """The words this KG's questions are written with: the example questions' words (less the names
        their patterns give), the KG's relation names and aliases and the examples' node types; a lower-case one-word
        mention of one of them is not taken for a name (:func:`~simgrag.grounding.question.read_question`)."""
        texts = [question for question, _ in self._example_questions]
        texts += list(self.store.relations) + list(self.retriever.index.relation_texts) + list(self.lexicon.types)
        names = [x for _, triples in self._example_questions for t in triples for x in (t[0], t[2])
                 if not is_unknown(x)]
        return common_words_of(texts, names)

    def entity_of(self, text: str) -> int | None:
        """The KG entity a named pattern node stands for (:meth:`Lexicon.entity_of`)."""
        return self.lexicon.entity_of(text)

    # ------------------------------------------------------------------ judging
    def view(self, reading: QuestionReading, pattern: Pattern) -> QuestionView:
        """The question seen from ``pattern`` (see :class:`QuestionView`)."""
        covered = [False] * len(reading.words)
        spans = [reading.span_of(n.text) for n in pattern.nodes if not n.unknown]
        spans += [(m.start, m.end) for m in reading.mentions if m.confident]
        for span in spans:
            if span is not None:
                covered[span[0]:span[1]] = [True] * (span[1] - span[0])
        words = reading.clean_words()
        self._cover_appositions(words, covered)
        hints = list(dict.fromkeys(n.type_hint for n in pattern.nodes if n.unknown and n.type_hint))
        candidates = [i for i, w in enumerate(words) if w and not covered[i] and w not in STOPWORDS]
        types = self.lexicon.type_words(words, candidates, hints)
        type_of = tuple(types.get(i) for i in range(len(words)))
        phrases = phrases_of(reading.words, covered, [t is not None for t in type_of])
        focus = reading.focus(covered) if self.asks else None
        return QuestionView(tuple(covered), type_of, phrases, focus)

    def _cover_appositions(self, words: Sequence[str], covered: list[bool]) -> None:
        """A noun naming the kind of the entity right after it ("the **film** All Good Things",
        "describe **movie** A Better Life") is part of the mention: not a relation word, not the focus.
        It is such a noun after a determiner, or when it names one of the examples' node types."""
        before = [i for i in range(len(words) - 1) if covered[i + 1] and not covered[i] and words[i]]
        after_determiner = {i for i in before if i > 0 and words[i - 1] in APPOSITION_DETERMINERS}
        rest = [i for i in before if i not in after_determiner]  # only these need the embedder
        typed = set(self.lexicon.type_words(words, rest, self.lexicon.types)) if self.lexicon.types else set()
        # a type word that is also a relation's own word ("genre", "writer", "language") keeps its say
        typed = {i for i in typed
                 if min(self.lexicon.relation_phrases([words[i]]).values(), default=1.0) > APPOSITION_RELATION_GAP}
        for i in after_determiner | typed:
            covered[i] = True

    def judge(self, reading: QuestionReading, candidate: Candidate, *, max_problems: int | None = None) -> Judgement:
        """Problems, unsupported triples, the focus verdict and the KG's best GSD for ``candidate``.

        With ``max_problems``, a candidate that already has more problems before the search is not
        searched (its GSD stays infinite): it could not win anyway."""
        try:
            pattern = validate_pattern(Pattern.from_triples(candidate.triples))
        except PatternError as exc:
            return Judgement(candidate, None, (f"invalid pattern: {str(exc).splitlines()[0]}",), (), math.inf)
        view = self.view(reading, pattern)
        problems = self._structure_problems(reading, pattern) + self._role_problems(pattern)
        focus: Focus
        focus_problem: list[str]
        wanted: int | None
        uncovered: dict[int, str] = {}
        if candidate.origin == "template":
            # an example in the question's own words: its author read those words (the answer node, the
            # relations they name) into this pattern; the KG checks below still apply
            focus, focus_problem, wanted = "confirmed", [], None
        else:
            focus, focus_problem, wanted = self._focus(reading, pattern, view)
            uncovered = self.uncovered_relations(pattern, view)
            focus_problem += (self._uncovered(uncovered) + self._missing_nodes(reading, pattern, view)
                              + self._who_problems(reading, pattern))
        problems += focus_problem
        word = reading.clean_words()[view.focus] if view.focus is not None else None
        unsupported, stray = self._unsupported(pattern, view, word)
        retrieval = None
        if max_problems is None or len(problems) <= max_problems:
            retrieval = self.retriever.retrieve(pattern, self.settings)
            problems += self._type_problems(pattern, retrieval) + self._displaced_problems(retrieval)
            if not retrieval.evidence:
                problems.append("no subgraph of the KG matches it")
        gsd = retrieval.evidence[0].gsd if retrieval is not None and retrieval.evidence else math.inf
        asked = pattern.asked_node()
        return Judgement(candidate, pattern, tuple(problems), unsupported, gsd, focus, retrieval, wanted,
                         self._type_word(word), self.lexicon.schema_misses(pattern),
                         pattern.nodes[asked].text if asked is not None else None, len(stray), tuple(uncovered),
                         tuple(sorted(r for r in stray if r is not None)))

    def _type_word(self, word: str | None) -> str | None:
        """The focus word as a type for a new unknown node: a plural made singular ("cities" → city), or
        a singular that is one of the examples' types ("Which **year** …"); ``None`` for other words."""
        if not word:
            return None
        if word.endswith("s"):
            return singular(word)
        return word if word in self.lexicon.types else None

    def structure_problems(self, reading: QuestionReading, pattern: Pattern) -> list[str]:
        """A named node the question does not name, none of the question's entities named, disconnected
        triples, nothing asked, a loose leaf beside the answer: where the pattern stands, not its words."""
        return self._structure_problems(reading, pattern)

    def _structure_problems(self, reading: QuestionReading, pattern: Pattern) -> list[str]:
        problems: list[str] = []
        known = [n.text for n in pattern.nodes if not n.unknown]
        problems += [f"{t!r} is not named in the question" for t in known if not reading.mentions_text(t)]
        named = [m for m in reading.mentions if m.confident]
        if named and not known:
            names = ", ".join(repr(m.text) for m in named)
            problems.append(f"no triple names the question's entity ({names})")
        if not pattern.is_connected():
            problems.append("the triples are not connected through shared nodes")
        if self.asks and all(not n.unknown for n in pattern.nodes):
            problems.append("no UNKNOWN node stands for what is asked")
        if self.asks:
            problems += [f"{pattern.nodes[leaf].text!r} hangs from {pattern.nodes[named].text!r} beside the answer, "
                         "and nothing is asked of it" for leaf, named in dangling_leaves(pattern)]
        return problems

    def _role_problems(self, pattern: Pattern) -> list[str]:
        """Named entities on a side of a relation the KG never has them on (but has the other)."""
        problems: list[str] = []
        for edge, (head, relation, tail) in zip(pattern.edges, pattern.triples(), strict=True):
            if edge.unknown:
                continue
            for text, side in ((head, "head"), (tail, "tail")):
                entity = None if is_unknown(text) else self.entity_of(text)
                rel = self.retriever.nearest_relation(relation) if entity is not None else None
                if entity is None or rel is None:
                    continue
                roles = kg_roles(self.retriever, entity)
                sides = roles.get(rel, set())
                if not sides:
                    problems.append(f"{text!r} has no {self.store.relations[rel]!r} edge in the KG")
                elif side not in sides:
                    problems.append(f"{text!r} is never the {side} of {relation!r} in the KG, only its "
                                    f"{other_side(side)}")
        return problems

    def _type_problems(self, pattern: Pattern, retrieval: Retrieval) -> list[str]:
        """Typed unknowns where the examples put another type that a relation links to theirs
        (:meth:`~simgrag.grounding.lexicon.Lexicon.type_clashes`) and whose entity in the best
        subgraph is not of their type by the KG: no edge the examples give that type (Portugal for
        ``UNKNOWN currency 1``: never the tail of ``currency``). A hop was left out, or the type word is wrong.
        Any other typed unknown bound to an entity the examples' uses make of other types only is a problem
        too: ``[UNKNOWN actor 1, starred actors, Russ Conway]`` binds the "actor" to a film (an entity none
        of whose edges the examples show for any type says nothing: the examples file may be incomplete)."""
        if not retrieval.evidence:
            return []
        triples, best = pattern.triples(), retrieval.evidence[0]
        problems: dict[str, None] = {}
        clashed: set[str] = set()
        for i, node, side, fit, _, _ in self.lexicon.type_clashes(triples):
            binding = best.binding(node)
            if binding is not None and not self.lexicon.is_of_type(binding.entity_id, type_hint(node) or ""):
                clashed.add(node)
                problems[f"{node!r} is the {side} of {triples[i][1]!r}, where a {fit} belongs: a hop is missing "
                         f"({binding.entity!r} is no {singular((type_hint(node) or '').lower())})"] = None
        for typed in pattern.nodes:
            binding = (best.binding(typed.text) if typed.unknown and typed.type_hint and typed.text not in clashed
                       else None)
            kind = singular((typed.type_hint or "").lower())
            kinds = self.lexicon.kinds_of(binding.entity_id) if binding is not None else set()
            if binding is not None and kinds and kind not in kinds and kind in self.lexicon.types:
                problems[f"{typed.text!r} is bound to {binding.entity!r}, which the KG makes a "
                         f"{' / '.join(sorted(kinds))}, not a {kind}"] = None
        return list(problems)

    def displaced_names(self, retrieval: Retrieval | None) -> list[tuple[NodeBinding, str]]:
        """Named nodes the best subgraph matches with another entity while the entity they name stands in
        it for an UNKNOWN node (the named node's binding, that unknown node): ``[UNKNOWN country 1, is in
        country, Kenya]`` + ``[UNKNOWN country 2, borders with, UNKNOWN country 1]`` fits the KG only as
        (Nairobi, is in country, Kenya), "Kenya" matched by Nairobi and Kenya itself the unknown country — a
        hop the question has no words for."""
        if retrieval is None or not retrieval.evidence:
            return []
        best = retrieval.evidence[0]
        standing_for = {n.entity_id: n.pattern_node for n in best.nodes if n.unknown}
        out: list[tuple[NodeBinding, str]] = []
        for node in best.nodes:
            entity = None if node.unknown else self.entity_of(node.pattern_node)
            if entity is not None and entity != node.entity_id and entity in standing_for:
                out.append((node, standing_for[entity]))
        return out

    def _displaced_problems(self, retrieval: Retrieval) -> list[str]:
        return [f"{named.pattern_node!r} is matched by {named.entity!r} while the KG's {named.pattern_node!r} "
                f"stands for {unknown!r}: a hop too many at the named entity"
                for named, unknown in self.displaced_names(retrieval)]

    def _focus(self, reading: QuestionReading, pattern: Pattern,
               view: QuestionView) -> tuple[Focus, list[str], int | None]:
        """The focus word against the answer node: a type word must name its type ("Which **tags**
        …" → ``UNKNOWN tag 1``), a relation word one of its triples ("Who **directed** …")."""
        asked = pattern.asked_node()
        if asked is None or view.focus is None:
            return "unknown", [], None
        node = pattern.nodes[asked]
        word = reading.clean_words()[view.focus]
        wanted = view.type_of[view.focus]
        if wanted is None and self.lexicon.types:
            # a known type no node of this pattern has ("Which **writers** …" answered by UNKNOWN movie 1)
            wanted = self.lexicon.type_words(reading.clean_words(), [view.focus], self.lexicon.types).get(view.focus)
        if wanted is not None:
            if node.type_hint == wanted:
                return "confirmed", [], None
            # a type word may also name the relation that leads to it ("On which **continents** …": continent)
            relation = self._best_relation(phrases_of(reading.words[view.focus:view.focus + 1],
                                                      view.covered[view.focus:view.focus + 1]))
            return "contradicted", [f"the question asks for {word!r}, but the answer node is {node.text!r}"], relation
        end = view.focus
        clean = reading.clean_words()
        while (end < min(view.focus + 3, len(view.covered)) and not view.covered[end]
               and view.type_of[end] is None and clean[end] not in ("the", "a", "an")):
            end += 1  # the focus phrase stops before a named entity, an article or a type word ("made | the movie")
        relation = self._best_relation(phrases_of(reading.words[view.focus:end], view.covered[view.focus:end]))
        if relation is None:
            return "unknown", [], None
        at_asked = {self.retriever.nearest_relation(e.relation) for e in pattern.edges
                    if asked in (e.source, e.target) and not e.unknown}
        name = self.store.relations[relation]
        spelled = self._relation_words(at_asked)
        if relation not in at_asked and self._spelled_elsewhere(" ".join(clean[view.focus:end]), spelled, relation):
            return "confirmed", [], None  # "Who **plays** in X?": its words are those of the answer's `plays in club`
        if relation in at_asked:
            sides = {"head" if e.source == asked else "tail" for e in pattern.edges if asked in (e.source, e.target)
                     and not e.unknown and self.retriever.nearest_relation(e.relation) == relation}
            # the examples' sides hold for a focus before the named entity ("Who **acted** alongside X?") or
            # owned by it ("X's **co-stars**"); one after it says what the entity did ("a movie X **performed**
            # in"), and the answer may be on either side
            after = any(view.covered[:view.focus]) and not reading.possessive(view.focus - 1)
            wanted_sides = None if after else self.focus_sides.get(relation)
            if wanted_sides is None or sides & wanted_sides:
                return "confirmed", [], None
            return "contradicted", [f"the question asks {word!r} ({name}) of the answer, but the answer node "
                                    f"{node.text!r} is the {'/'.join(sorted(sides))} of its {name} triple, where "
                                    f"the examples ask for the {'/'.join(sorted(wanted_sides))}"], relation
        return "contradicted", [f"the question asks {word!r} ({name}) of the answer, but the answer node "
                                f"{node.text!r} is not on a {name} triple"], relation

    def _missing_nodes(self, reading: QuestionReading, pattern: Pattern, view: QuestionView) -> list[str]:
        """:meth:`missing_kinds` as problems."""
        return [f"the question names {said} {kind} node(s) ({plural} plural), but the pattern has {unknown} "
                f"UNKNOWN {kind} and {named} named one(s): a hop is missing"
                for kind, (said, plural, unknown, named) in self.missing_kinds(reading, pattern, view).items()]

    def missing_kinds(self, reading: QuestionReading, pattern: Pattern,
                      view: QuestionView) -> dict[str, tuple[int, int, int, int]]:
        """Node types the question names more often than the pattern has nodes of them. Every type word
        outside the named entities ("**countries**", "**country**") stands for a node: a named one of that
        type by the KG or an UNKNOWN one; a plural one for an UNKNOWN node (a set the KG must supply). "the
        capitals of the **countries** next to Kenya" is not ``[Kenya, capital, UNKNOWN city 1]``: a hop
        is missing. Untyped UNKNOWN nodes (or of a type the examples do not use) may stand for any type;
        only the examples' node types and their plurals count, as words, and not the focus word (``_focus``
        checks it against the answer node). Kind → (times said, plural, UNKNOWN nodes, named nodes)."""
        types = self.lexicon.types
        if not types:
            return {}
        said: Counter[str] = Counter()
        plural: Counter[str] = Counter()
        for i, (covered, word) in enumerate(zip(view.covered, reading.clean_words(), strict=True)):
            kind = None if covered or not word or i == view.focus else self.lexicon.type_named(word)
            if kind is not None:
                said[kind] += 1
                plural[kind] += word != kind
        if not said:
            return {}
        unknown: Counter[str] = Counter()
        named: Counter[str] = Counter()
        for node in pattern.nodes:
            if node.unknown:
                unknown[singular((node.type_hint or "").lower())] += 1
            elif (entity := self.entity_of(node.text)) is not None:
                named.update(self.lexicon.kinds_of(entity))
        wild = sum(n for kind, n in unknown.items() if kind not in types)
        return {kind: (said[kind], plural[kind], unknown[kind], named[kind]) for kind in said
                if plural[kind] > unknown[kind] + wild or said[kind] > unknown[kind] + named[kind] + wild}

    def _uncovered(self, uncovered: dict[int, str]) -> list[str]:
        """:meth:`uncovered_relations` as problems."""
        return [f"the question says {phrase!r} ({self.store.relations[r]}) but no triple has that relation"
                for r, phrase in uncovered.items()]

    def uncovered_relations(self, pattern: Pattern, view: QuestionView) -> dict[int, str]:
        """KG relation → the phrase naming it, for the relations the question names clearly (within
        ``COVER_DISTANCE``) that no triple has. A phrase ending in a node type word names a relation only
        if it is clearly nearer to it than the type word alone (by ``TYPE_WORD_MARGIN``; or matches it
        almost exactly): "made **movies**" is near
        ``has_genre`` (alias "kind of movie") through "movies" alone (MiniLM: 0.82, "movies" 0.80), and so
        is "around the **country**" near ``located in`` (0.746, "country" 0.758); "kinds of movies" is
        not (0.72)."""
        present = {self.retriever.nearest_relation(e.relation) for e in pattern.edges if not e.unknown}
        spelled = self._relation_words(present)
        phrases = [p for p in view.phrases if " " not in p or p.split()[0] not in STOPWORDS]
        distances = self.lexicon.relation_distances(phrases)
        # the last word names a node type as the examples spell it, or by meaning ("films" for ``movie``)
        multi = [i for i, p in enumerate(phrases) if " " in p]
        lasts = [phrases[i].rsplit(" ", 1)[1] for i in multi]
        typed = [multi[k] for k in self.lexicon.type_words(lasts, range(len(lasts)), self.lexicon.types)]
        if typed:
            alone = self.lexicon.relation_distances([phrases[i].rsplit(" ", 1)[1] for i in typed])
            distances = np.array(distances, copy=True)
            own = distances[typed]
            distances[typed] = np.where((own < alone - TYPE_WORD_MARGIN) | (own <= EXACT_PHRASE_DISTANCE), own, np.inf)
        named: dict[int, tuple[float, str]] = {}
        for phrase, row in zip(phrases, distances, strict=True):
            best = int(np.argmin(row))
            if best in present or self._spelled_elsewhere(phrase, spelled, best):
                continue
            if row[best] <= COVER_DISTANCE or self._clearly_one(phrase, row, best):
                named[best] = min(named.get(best, (np.inf, phrase)), (float(row[best]), phrase))
        return {r: phrase for r, (_, phrase) in sorted(named.items())}

    def _spelled_elsewhere(self, phrase: str, spelled: set[str], relation: int) -> bool:
        """Whether ``phrase`` is the wording of a relation the pattern has rather than of ``relation``: the
        pattern's relations spell each of its words, and it does not spell the whole name of ``relation``.
        "play" in "which club does X play for?" is `plays in club`'s word when the pattern has that relation,
        though `plays position` is nearer; "family" still names a KG relation `family` beside the pattern's
        `language family`."""
        own = _content_words([phrase])
        if not own or not own <= spelled:
            return False
        named = _content_words([self.store.relations[relation]])
        return not (named and named <= own)

    def _relation_words(self, relations: Iterable[int | None]) -> set[str]:
        """:func:`_content_words` of the names of the KG relations ``relations`` (``None`` skipped)."""
        return _content_words(self.store.relations[r] for r in relations if r is not None)

    def _clearly_one(self, phrase: str, row: np.ndarray, best: int) -> bool:
        """``phrase`` is near one relation (``COVER_CLEAR_DISTANCE``) and far from every other (by
        ``COVER_MARGIN``), and does not end in a node type word ("countries" is nearest ``continent``, by a
        margin, and names the type, not the relation)."""
        if row[best] > COVER_CLEAR_DISTANCE or len(row) < 2 or self.lexicon.is_type_word(phrase.rsplit(" ", 1)[-1]):
            return False
        return bool(np.partition(row, 1)[1] - row[best] >= COVER_MARGIN)

    def _best_relation(self, phrases: Sequence[str]) -> int | None:
        found = {r: d for r, d in self.lexicon.relation_phrases(phrases).items() if d <= FOCUS_DISTANCE}
        return min(found, key=lambda r: found[r]) if found else None

    def _only_through(self, entity: int, relation: int) -> bool:
        """The KG has ``entity`` on ``relation`` only — or on it and its twin, the same facts turned round
        (:func:`~simgrag.kg.twins.twin_ids`: ``is_in_country`` and ``is_in_country_inverse``)."""
        roles = set(kg_roles(self.retriever, entity))
        if roles == {relation}:
            return True
        return len(roles) == 2 and relation in roles and twin_ids(self.store).get(relation) in roles

    def _unsupported(self, pattern: Pattern, view: QuestionView,
                     focus_word: str | None = None) -> tuple[tuple[Triple3, ...], frozenset[int | None]]:
        """The triples nothing in the question supports, and the *stray* relations: relations of
        the pattern the question's words did not choose. Those no phrase reads while a phrase reads another
        ("Which country has Canberra as its capital?" words ``capital``; a pattern that also walks
        ``official language`` took that from somewhere else, even when the named type "country" supports
        the triple); or, when no phrase reads any, all of them if a named entity has other KG relations to
        choose from ("Which films feature James Keach?": he acted and directed; "feature" picks neither).

        The focus word alone (``focus_word``) says what the answer is: it supports only the relations of
        the answer node's triples ("which **person** directed X" reads ``starred_actors`` loosely — MiniLM
        0.97 — but does not let a pattern walk the film's actors before ``directed_by``)."""
        by_phrase = self.lexicon.relation_phrases([p for p in view.phrases if p != focus_word])
        asked = pattern.asked_node()
        if focus_word is not None and focus_word in view.phrases and asked is not None:
            at_asked = {self.retriever.nearest_relation(e.relation) for e in pattern.edges
                        if asked in (e.source, e.target) and not e.unknown}
            for answer_relation, distance in self.lexicon.relation_phrases([focus_word]).items():
                if answer_relation in at_asked:
                    by_phrase[answer_relation] = min(by_phrase.get(answer_relation, distance), distance)
        named_types = {t for t in view.type_of if t is not None}
        degree = [0] * len(pattern.nodes)
        for e in pattern.edges:
            degree[e.source] += 1
            degree[e.target] += 1
        out: list[Triple3] = []
        read: set[int | None] = set()
        unread: set[int | None] = set()
        for edge, triple in zip(pattern.edges, pattern.triples(), strict=True):
            if edge.unknown:
                continue
            relation = self.retriever.nearest_relation(edge.relation)
            (read if relation in by_phrase else unread).add(relation)
            if relation is None:
                out.append(triple)
                continue
            ends = [pattern.nodes[edge.source], pattern.nodes[edge.target]]
            leaves = [n for v, n in ((edge.source, ends[0]), (edge.target, ends[1])) if degree[v] == 1 and n.unknown]
            typed = leaves or [n for n in ends if n.unknown]  # a triple to a leaf must be justified by the leaf
            if relation in by_phrase or any(n.type_hint in named_types for n in typed):
                continue  # the question names the relation, or the type of what the triple leads to
            entities = [self.entity_of(n.text) for n in ends if not n.unknown]
            if any(e is not None and self._only_through(e, relation) for e in entities):
                continue  # the KG knows this entity only through this relation
            out.append(triple)
        stray = frozenset(unread)  # None: a pattern relation near no KG relation
        if read or not unread:
            return tuple(out), stray
        named = (self.entity_of(n.text) for n in pattern.nodes if not n.unknown)
        choice = any(e is not None and len(kg_roles(self.retriever, e)) > 1 for e in named)
        return tuple(out), stray if choice else frozenset()

    def judge_all(self, reading: QuestionReading, candidates: Sequence[Candidate], *,
                  max_problems: int | None = None, deadline: float | None = None,
                  budget: int | None = None) -> list[Judgement]:
        """Judge each candidate (identical triples judged once), in order; after ``budget`` distinct
        judgements, or past ``deadline`` (a :func:`time.perf_counter` value), the rest are left out."""
        seen: dict[tuple[Triple3, ...], Judgement] = {}
        out: list[Judgement] = []
        for candidate in candidates:
            key = triple_set(candidate.triples)
            if key not in seen:
                if (budget is not None and len(seen) >= budget) or (deadline is not None
                                                                     and time.perf_counter() > deadline):
                    break
                seen[key] = self.judge(reading, candidate, max_problems=max_problems)
            found = seen[key]
            out.append(found if found.candidate == candidate else replace(found, candidate=candidate))
        return out


def triple_set(triples: Sequence[Triple3]) -> tuple[Triple3, ...]:
    """``triples`` in a canonical order: two candidates with the same triples are judged once."""
    return tuple(sorted(triples))


def unknown_name(triples: Sequence[Triple3], hint: str, start: int = 1) -> str:
    """A fresh ``UNKNOWN <hint> <n>`` not used in ``triples``, ``n`` from ``start`` up."""
    used = {t for tr in triples for t in (tr[0], tr[2])}
    n = start
    while f"UNKNOWN {hint} {n}" in used:
        n += 1
    return f"UNKNOWN {hint} {n}"
