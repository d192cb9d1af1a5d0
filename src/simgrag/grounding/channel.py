"""The LLM's own say between a pattern and its readings (a hop shorter, a name put in, an example's pattern): the
noisy-channel score.

A small model copies the shape of its few-shot examples. With the example "where is the football club that
Y plays for? → [Y, plays_in_club, UNKNOWN club 1], [UNKNOWN club 1, is_in_country, UNKNOWN country 1]" it
writes "which club does X play for?" with the same two triples, and the answer becomes X's club's country.
Greedy decoding cannot take that back (the longer pattern *was* its most likely continuation), and word rules
that read the question without the LLM broke other KGs. The *channel* direction can: how likely is the
**question** given each candidate pattern, log P(question | pattern), under a prompt of the same examples turned
round (pattern and its asked-for node → question; noisy-channel prompting, Min et al., ACL 2022). A triple the
question has no words for makes the question less likely to follow, and the model's own preference decides —
no word list, no threshold fitted on another KG.

The candidates are the pattern itself, the pattern with one triple to an unknown leaf dropped
(:func:`shorter_readings`: the rest connected, every named node kept, an unknown node left): "one hop less than the
LLM wrote", the most frequent small-model mistake on the KGs measured (BENCHMARKS.md "The pattern stage per KG");
given the question's entity mentions, the pattern with an unknown node taken to be an entity the question names and
the pattern leaves out (:func:`named_readings`); the pattern with a hop the LLM copied taken out ("X's dad's dad"
written with three ``father`` hops: :func:`contracted_readings`); given the KG relations the asked-for node's best
match heads, the pattern with the hop the LLM left out added ("what does X's wife do for a living?" written as X's
spouse: :func:`longer_readings`) or put in the middle of a chain ("X's siblings' kids" written without the kids:
:func:`inserted_readings`, each node's KG relations, where the KG matches it as well); given the KG's say, the
pattern with a hop the LLM added from a named node taken out ("What country is X from?" written through X's place of
birth, where places have no country edge and people do: :func:`skipped_readings`); the pattern with a hop hung from
the other of two leaves ("where is the club X plays for?" written as a star from X that asks for the club:
:func:`moved_readings`, the way round the KG matches best); a pattern written in parts with one node under two
labels joined (:func:`joined_readings`, taken where the KG matches it as well as the parts — the channel cannot tell
a loose part); and, given the examples the prompt showed, *analogies*: an example's pattern with the question's
entities in place of the example's own (:func:`analogy_readings`; the KG checks that each entity has the example's
relations on those sides). Learned examples are read from the KG by the model itself but worded its way, not the
user's: for "where is the football club that X plays for?" the 1.5B model wrote "[UNKNOWN person 1, plays for
country, UNKNOWN country 1], [UNKNOWN country 1, is in club, UNKNOWN club 1]" beside the example "What country does
Y play in? → [Y, plays in club, UNKNOWN club 1], [UNKNOWN club 1, is in country, UNKNOWN country 1]"; the channel
compares the two. The best-scoring reading replaces the pattern only when it scores more than the pattern itself by
a margin: :data:`MARGIN` (0: the model's own preference) unless the KG's fit sets one — the largest gap at which the
channel broke more validation questions than it fixed (:func:`fit_margin`).

And the LLM's own alternatives: :data:`SAMPLES` patterns it samples for the question at
:data:`SAMPLE_TEMPERATURE` (fixed seeds; :func:`sampled_readings`) — "X's husband" written greedily with ``father``
is sampled with ``spouse`` or ``husband`` too; these cost :data:`SAMPLES` more LLM calls per question, so they are
not in :data:`READINGS`: offered where asked for, or where a fit asked to try them (``simgrag grounding fit
--llm-samples``) found they answer more than the readings without them. One call instead of four: the *variant* — the
pattern the LLM writes greedily for the question under the same prompt with :data:`VARIANT_EXTRA_SHOTS` more of the
examples shown (:meth:`~simgrag.pattern.generate.PatternGenerator.variant`, :func:`variant_readings`; one more LLM
call). The 1.5B model's pattern changes with the shots it is shown, right one way and wrong the other: on
WorldCup2014's learned index 4 dynamic shots instead of 2 fixed 12 of 100 two-hop questions and broke 7; of those 19,
the question's likelihood plus the model's own (both directions, below) chose the right pattern in 18. But not on
every KG (the company KG lost 4 two-hop questions to it, the DBpedia-shaped one net 4), so it is opt-in: a fit asked
to try it (``simgrag grounding fit --llm-variant``) adds it to the default readings only on a gain beyond chance.

A longer, inserted, sampled or variant reading's score adds the other direction (the *direct* score), the model's own
log P(pattern | the pattern prompt) against its own pattern's: a hop the LLM did not write must explain the question
*and* be one it might have written. The channel alone favours a pattern that explains more of the question's words —
a hop added to a one-hop question — which the model asked for the pattern would not write; an added hop is spelled
the way the examples spell its relation (:func:`shot_spelling`), or the likelihood is of text the model was never
taught. Readings that take something out are scored by the channel alone: a copied hop is the model's own likeliest
output, so its likelihood cannot speak against it. Longer readings mend the LLM's slip, so they are offered only for
a pattern an LLM call wrote, not for an example's pattern the stage took on the question's and the KG's word alone
(on the bundled sample KG the model's likelihood favours a `has genre` hop it copies from a shot). They may put
back a hop the stage took out of the LLM's pattern: the stage's drops were the edits that broke held-out KGs.

Whether this runs on a KG is fitted on that KG's validation questions like the edit families
(:func:`simgrag.eval.fit_grounding.fit_grounding`: on only with a gain beyond chance and no question group
lower) and stored with the index — where it is off, the :data:`DEFAULT_READINGS` still run unless they cost a
question group; it needs an LLM that scores text (:class:`~simgrag.llm.base.ScoresText`: the
embedded llama.cpp model), one scoring pass over ~100 tokens per reading (~0.7 s each on 2 CPU cores).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from simgrag.errors import ConfigError, LLMError
from simgrag.grounding.judge import unknown_name
from simgrag.grounding.question import normalize_name
from simgrag.llm.base import LLM, samples_text, scores_text
from simgrag.match.answers import ANSWER_TOLERANCE
from simgrag.match.kinds import UNTYPED
from simgrag.pattern.examples import Example
from simgrag.pattern.generate import PatternGenerator, PatternResult
from simgrag.pattern.graph import Pattern, is_unknown

__all__ = ["CHANNEL", "DEFAULT_READINGS", "DIRECT_KEEP", "KNOWN_READINGS", "MARGIN", "MAX_READINGS", "READINGS",
           "SAMPLES", "SAMPLE_TEMPERATURE", "VARIANT", "Analogies", "Anchors", "ChannelChoice", "Extensions",
           "PatternSource", "Reading", "ShotSpelling", "Skips", "analogy_readings", "anchored_readings",
           "channel_prompt", "contracted_readings", "fit_margin", "joined_readings", "longer_readings",
           "moved_readings", "named_readings", "sampled_readings", "shorter_readings", "shot_spelling",
           "skipped_readings", "unnamed_pattern", "variant_readings"]

logger = logging.getLogger(__name__)

#: the name the channel choice goes by in a pattern's ``families`` and in the fit
CHANNEL = "channel"
#: a reading replaces the pattern only when the question's log-likelihood under it is higher by more than this
#: (nats): 0, the model's own preference, with no constant fitted on some KG
MARGIN = 0.0
#: readings of each kind (:data:`READINGS`) scored at most per question (the first in triple order; analogies
#: in the order the prompt ranks its examples for the question)
MAX_READINGS = 4
#: the kinds of reading offered unless told otherwise, each with its function: a hop shorter, a name put in, an
#: example's pattern, a copied hop taken out, a hop longer, a hop the KG does not go on from skipped, an entity the
#: question names tied to a pattern naming none, a hop hung from another leaf, a pattern's parts joined, an asked node
#: reached through one more hop (retyped), a hop put back in the middle of a chain (inserted)
READINGS = ("shorter", "named", "analogy", "contracted", "longer", "skipped", "anchored", "moved", "joined",
            "retyped", "inserted")
#: every kind of reading: :data:`READINGS`, the patterns the LLM samples for the question (:data:`SAMPLES` more
#: LLM calls per question) and its variant (one more): offered only where a KG's fit turns them on, or when asked for
KNOWN_READINGS = (*READINGS, "sampled", "variant", "reasked")
#: the patterns the LLM samples per question for the sampled readings (seeds 1 … SAMPLES; the call cache keeps them)
SAMPLES = 4
#: the temperature they are sampled at
SAMPLE_TEMPERATURE = 0.8
#: the variant reading's prompt shows this many more dynamic shots than the pattern prompt (one more LLM call per
#: question, greedy: :meth:`~simgrag.pattern.generate.PatternGenerator.variant`)
VARIANT_EXTRA_SHOTS = 2
#: with the direct score, the longer readings scored by the channel: those the model itself finds likeliest to write
#: (its direct score is one cheap pass over the prompt it has just answered; each channel score is a pass of its own).
#: On genealogy's learned index, where the direct score fixed 7 questions, 2 of 4 gave the same answers on all 120
DIRECT_KEEP = 2
#: the kinds that run where the channel choice itself is off (no fit, or a fit that left it off) unless the KG's fit
#: found harm: each undoes a mistake no question asks for — an entity the question names left out, a hop the LLM
#: copied, a last hop it left out that it would itself have written (longer, with the direct score), a hop it added
#: that the KG does not go on from while the named entity does (skipped), an entity the question names tied to a
#: pattern that names none (anchored), a hop hung from the wrong one of two leaves (moved), one node written under
#: two labels (joined: taken on the KG's say alone), an asked node of a kind its hop cannot reach (retyped: the KG's
#: say alone), a hop left out in the middle of a chain (inserted, with the direct score) — so they
#: need only do no harm, not show a gain the validation questions may never give a chance to (learned validation
#: questions are written the model's way and rarely show these slips). The variant joins them where a KG's fit
#: asked to try it found a gain (:attr:`~simgrag.grounding.fit.GroundingFit.variant`)
DEFAULT_READINGS = ("named", "contracted", "longer", "skipped", "anchored", "moved", "joined", "retyped",
                    "inserted")
#: the kind name of the variant readings (:func:`variant_readings`)
VARIANT = "variant"

Triples = tuple[tuple[str, str, str], ...]
#: (question, the examples its prompt shows, best-fitting first) → (example question, its pattern with the question's
#: entities in place of its own) for each example whose pattern can take them
Analogies = Callable[[str, Sequence[Example]], Sequence[tuple[str, Triples]]]
#: (question, pattern) → the KG relations its asked-for node's best match is the head of, most likely first
Extensions = Callable[[str, Triples], Sequence[str]]
#: (question, pattern, node) → the KG relations the node's best match heads, most likely first
#: (:func:`inserted_readings`)
Heads = Callable[[str, Triples, str], Sequence[str]]
#: (question, pattern) → the (named node, unknown node) pairs whose hop the KG says may be skipped
#: (:func:`skipped_readings`)
Skips = Callable[[str, Triples], Collection[tuple[str, str]]]
#: (question, pattern) → triples that tie an entity the question names to one of the pattern's unknown nodes through
#: a relation the KG gives that entity, most likely first (:func:`anchored_readings`)
Anchors = Callable[[str, Triples], Sequence[tuple[str, str, str]]]

_HEAD = ("Each set of knowledge-graph triples below is followed by the question that asks for its ANSWER node "
         "(an UNKNOWN node of the triples).\n\n")


class PatternSource(Protocol):
    """What the channel choice wraps: text → pattern (the retriever's ``PatternStage``, seen from here)."""

    def pattern(self, text: str) -> PatternResult: ...


@dataclass(frozen=True)
class Reading:
    """One candidate pattern: its triples and what made it — the triple a shorter or contracted (``copied``) reading
    dropped, the (unknown node, name) a named reading put in, or the example question whose pattern an analogy is."""

    triples: Triples
    dropped: tuple[str, str, str] | None = None
    named: tuple[str, str] | None = None
    example: str | None = None  # an analogy: the example question whose pattern it is
    copied: bool = False  # a contracted reading: ``dropped`` repeated the hop before it
    added: tuple[str, str, str] | None = None  # a longer reading: the hop it adds at the asked-for node
    sampled: bool = False  # a pattern the LLM sampled for the question
    variant: bool = False  # the pattern the LLM wrote for the question with more examples shown
    skipped: str | None = None  # a skipped reading: the named node that took the dropped hop's far end's place
    asked: str | None = None  # a reasked reading: the unknown leaf it asks for instead
    anchor: str | None = None  # an anchored reading: the named entity its added triple ties to the pattern
    moved: str | None = None  # a moved reading: the unknown leaf ``dropped`` hangs from instead
    unnamed: str | None = None  # a moved or joined reading: the name the LLM put at a leaf, which the question lacks
    joined: tuple[str, str] | None = None  # a joined reading: (the unknown node taken out, the one in its place)
    retyped: str | None = None  # a retyped reading: the asked node, now reached through ``added``
    inserted: str | None = None  # an inserted reading: the node ``added`` goes out from, in the middle of a hop

    @property
    def kind(self) -> str:
        """Its kind of reading (:data:`KNOWN_READINGS`)."""
        if self.sampled:
            return "sampled"
        if self.variant:
            return "variant"
        if self.anchor is not None:
            return "anchored"
        if self.moved is not None:
            return "moved"
        if self.joined is not None:
            return "joined"
        if self.retyped is not None:
            return "retyped"
        if self.inserted is not None:
            return "inserted"
        if self.added is not None:
            return "longer"
        if self.asked is not None:
            return "reasked"
        if self.skipped is not None:
            return "skipped"
        if self.copied:
            return "contracted"
        if self.example is not None:
            return "analogy"
        return "named" if self.named is not None else "shorter"

    @property
    def written(self) -> bool:
        """Whether an LLM call wrote this reading for the question (sampled, or a variant): its direct score counts."""
        return self.sampled or self.variant

    def why(self) -> str:
        if self.sampled:
            return "took a pattern the LLM sampled for the question"
        if self.variant:
            return "took the pattern the LLM wrote for the question with more examples shown"
        if self.anchor is not None:
            return f"added {list(self.added or ())}: the question names {self.anchor!r}, the pattern named nothing"
        if self.retyped is not None:
            return f"reached {self.retyped!r} through {list(self.added or ())}, a hop of the kind it asks for"
        if self.inserted is not None:
            return f"added {list(self.added or ())} in the middle, a hop the pattern went on from {self.inserted!r}"
        took = f"took out {self.unnamed!r}, which the question does not name, and " if self.unnamed else ""
        if self.joined is not None:
            return f"{took}took {self.joined[0]!r} to be {self.joined[1]!r}, joining the pattern's parts"
        if self.moved is not None:
            return f"{took}hung {list(self.dropped or ())} from {self.moved!r} instead"
        if self.added is not None:
            return f"added {list(self.added)}, a hop from the node it asked for"
        if self.asked is not None:
            put = f", took {self.named[0]!r} to be {self.named[1]!r}" if self.named is not None else ""
            return f"asked for {self.asked!r} instead{put}"
        if self.skipped is not None:
            return (f"took out {list(self.dropped or ())}, a hop the KG does not go on from as the pattern does, "
                    f"and went on from {self.skipped!r}")
        if self.copied:
            return f"took out {list(self.dropped or ())}, a copy of the hop before it"
        if self.example is not None:
            return f"took the pattern of the example {self.example!r} with the question's entities"
        if self.named is not None:
            return f"took {self.named[0]!r} to be {self.named[1]!r}, which the question names"
        return f"dropped {list(self.dropped or ())}"


def shorter_readings(triples: Sequence[Sequence[str]], limit: int = MAX_READINGS) -> list[Reading]:
    """The pattern with one triple to an unknown leaf (a node on no other triple) dropped, for each such triple
    whose removal leaves the rest connected, with every named node still in it and some unknown node left to ask
    for (a fully named pattern is a claim, not a question; at most ``limit``)."""
    full = _as_triples(triples)
    if len(full) < 2:
        return []
    named = {n for h, _, t in full for n in (h, t) if not is_unknown(n)}
    out: list[Reading] = []
    for i, (head, _, tail) in enumerate(full):
        ends = [n for n in (head, tail) if is_unknown(n) and sum(n in (h, t) for h, _, t in full) == 1]
        if not ends:
            continue
        rest = full[:i] + full[i + 1:]
        left = {n for h, _, t in rest for n in (h, t)}
        if named <= left and any(is_unknown(n) for n in left) and Pattern.from_triples(rest).is_connected():
            out.append(Reading(rest, full[i]))
        if len(out) >= limit:
            break
    return out


def reasked_readings(triples: Sequence[Sequence[str]], limit: int = MAX_READINGS) -> list[Reading]:
    """The same triples asking for another unknown leaf: "where is the club X plays for?" written ``[X, plays for
    country, UNKNOWN country 1], [X, plays in club, UNKNOWN club 1]`` asks (by its last unknown leaf,
    :meth:`~simgrag.pattern.graph.Pattern.asked_node`) for the club; the triple at the other leaf put last asks for
    the country. Nothing is added or dropped: the search finds the same matches, the channel says which node the
    question asks for (at most ``limit``). Only for a connected pattern: a part hanging loose is not what the question
    asks about (genealogy's "What faith is X's wife from?" with a loose ``[UNKNOWN person 1, religion, …]``)."""
    full = _as_triples(triples)
    if not full:
        return []
    pattern = Pattern.from_triples(full)
    if not pattern.is_connected():
        return []
    asked = _asked(full)
    degree = dict(zip((node.text for node in pattern.nodes), pattern.degrees(), strict=True))
    out: list[Reading] = []
    for i, (head, _, tail) in enumerate(full):
        for leaf in (tail, head):
            if leaf == asked or not is_unknown(leaf) or degree[leaf] != 1:
                continue
            moved = full[:i] + full[i + 1:] + (full[i],)
            if _asked(moved) == leaf:
                out.append(Reading(moved, asked=leaf))
    return _distinct(out)[:limit]


def contracted_readings(triples: Sequence[Sequence[str]], limit: int = MAX_READINGS,
                        same: Callable[[str, str], bool] | None = None) -> list[Reading]:
    """The pattern with a hop the LLM copied taken out: two triples with the same relation chained at an unknown
    node on no other triple (``[X, children, UNKNOWN person 1], [UNKNOWN person 1, children, UNKNOWN person 2],
    [UNKNOWN person 2, profession, …]`` for "X's children's professions"; ``[X, sibling, UNKNOWN person 1],
    [UNKNOWN person 1, sibling, UNKNOWN person 2]`` for "X's siblings") become one — the first triple reaching the
    second's far end (at most ``limit``; one reading per pattern, however three copies pair). Given ``same``
    (two relation phrases → whether they name one KG relation), two relations the KG takes for one count as a copy
    too: "X's brothers and sisters" written ``[X, brother, UNKNOWN person 1], [UNKNOWN person 1, sister, UNKNOWN
    person 2]``, where the KG's ``sibling`` is nearest both, becomes ``[X, brother and sister, UNKNOWN person 2]``
    (both phrases kept, so the question's words stay explained). Unlike the :func:`shorter_readings` (which drop any
    leaf, a hop the question may well ask) this only undoes a copy, so it runs by default with the named readings
    (:data:`DEFAULT_READINGS`)."""
    full = _as_triples(triples)
    out: list[Reading] = []
    for i, (head, relation, middle) in enumerate(full):
        if not is_unknown(middle) or sum(middle in (h, t) for h, _, t in full) != 2:
            continue
        for j, (h, r, tail) in enumerate(full):
            copy = r == relation or (same is not None and same(relation, r))
            if j == i or h != middle or tail == head or not copy:
                continue
            joined = relation if r == relation else f"{relation} and {r}"  # both words kept for the channel
            rest = tuple((head, joined, tail) if k == i else t for k, t in enumerate(full) if k != j)
            asks = any(is_unknown(n) for h2, _, t2 in rest for n in (h2, t2))  # not a claim
            if asks and len(set(rest)) == len(rest) and Pattern.from_triples(rest).is_connected():
                out.append(Reading(rest, full[j], copied=True))
    # and each taken on to no copy at all ("the kids of X" written with three children hops: one hop, not two)
    for reading in list(out):
        deeper = reading
        while further := contracted_readings(deeper.triples, 1, same) if len(deeper.triples) > 1 else []:
            deeper = replace(further[0], dropped=reading.dropped)
        if deeper is not reading:
            out.append(deeper)
    return _distinct(out)[:limit]  # a chain of three copies contracts two ways to one pattern


def skipped_readings(triples: Sequence[Sequence[str]], skippable: Collection[tuple[str, str]],
                     limit: int = MAX_READINGS) -> list[Reading]:
    """The pattern with the hop from a named node to an unknown node on one other triple taken out, the named node
    taking the unknown node's place there: "What country is X from?" written ``[X, place of birth, UNKNOWN place 1],
    [UNKNOWN place 1, country, UNKNOWN country 1]`` → ``[X, country, UNKNOWN country 1]`` — a hop the small model
    adds. Only for the (named node, unknown node) pairs in ``skippable``, which the caller's KG allows (the KG does
    not hold the next hop from the unknown node as written, and the named entity has that relation on that side:
    :meth:`~simgrag.retrievers.simgrag._QuestionReader.skips`); never the asked-for node, and the rest stays
    connected and asks for something (at most ``limit``)."""
    full = _as_triples(triples)
    asked = _asked(full) if full else "none"
    out: list[Reading] = []
    for i, (head, _, tail) in enumerate(full):
        for named, middle in ((head, tail), (tail, head)):
            if (named, middle) not in skippable or is_unknown(named) or not is_unknown(middle) or middle == asked:
                continue
            if sum(middle in (h, t) for j, (h, _, t) in enumerate(full) if j != i) != 1:
                continue
            rest = tuple((named if h == middle else h, r, named if t == middle else t)
                         for j, (h, r, t) in enumerate(full) if j != i)
            asks = any(is_unknown(n) for h, _, t in rest for n in (h, t))
            if asks and len(set(rest)) == len(rest) and Pattern.from_triples([list(t) for t in rest]).is_connected():
                out.append(Reading(rest, full[i], skipped=named))
    return _distinct(out)[:limit]


@dataclass(frozen=True)
class ShotSpelling:
    """How the examples spell a KG relation and the unknown node at its far end (:func:`shot_spelling`): called with
    a KG relation, (relation, node kind) as they write them; ``per_kind``: whether they number unknown nodes per kind
    (``UNKNOWN person 1``, ``UNKNOWN religion 1``) rather than across the pattern."""

    known: Mapping[str, tuple[str, str]]
    spaced: bool = False
    per_kind: bool = False

    def __call__(self, relation: str) -> tuple[str, str]:
        if _relation_key(relation) in self.known:
            return self.known[_relation_key(relation)]
        words = " ".join(relation.replace("_", " ").split())
        return (words if self.spaced else relation), words


def shot_spelling(examples: Sequence[Example]) -> ShotSpelling:
    """How the examples spell each relation they use and its far node: ``place_of_death`` → ``("place of death",
    "place")`` when an example has ``[…, place of death, UNKNOWN place 1]``. A relation no example has keeps its
    words, with spaces for underscores where the examples write relations with spaces. The LLM's own likelihood of a
    pattern (the direct score) is of text written the way its examples taught it, not the KG's."""
    known: dict[str, tuple[str, str]] = {}
    relations: list[str] = []
    per_kind = False
    for example in examples:
        for _, relation, tail in example.triples:
            relations.append(relation)
            kind = _node_kind(tail) if is_unknown(tail) else ""
            if kind:
                known.setdefault(_relation_key(relation), (relation, kind))
        numbers: dict[str, set[str]] = {}
        for node in {n for h, _, t in example.triples for n in (h, t) if is_unknown(n)}:
            words = node.split()
            if len(words) > 2 and words[-1].isdigit():
                numbers.setdefault(words[-1], set()).add(_node_kind(node))
        per_kind = per_kind or any(len(kinds) > 1 for kinds in numbers.values())  # two kinds, one number
    spaced = any(" " in r for r in relations) and not any("_" in r for r in relations)
    return ShotSpelling(known, spaced, per_kind)


def _relation_key(relation: str) -> str:
    return " ".join(relation.replace("_", " ").lower().split())


def _node_kind(node: str) -> str:
    """``UNKNOWN place of birth 2`` → ``place of birth``; ``""`` for a bare ``UNKNOWN``."""
    words = node.split()[1:]
    while words and words[-1].isdigit():
        words.pop()
    return " ".join(words)


def _spelled(relation: str, spell: ShotSpelling | None) -> tuple[str, str]:
    """A KG relation as the examples write it and the kind of node it leads to (:func:`shot_spelling`); without
    ``spell`` the KG's relation name serves for both."""
    written, kind = spell(relation) if spell is not None else (relation, relation.replace("_", " "))
    return written, " ".join(kind.split()) or UNTYPED


def _fresh_node(full: Triples, kind: str, spell: ShotSpelling | None) -> str:
    """A new unknown node of ``kind`` for a reading that adds a hop to ``full``: numbered after the pattern's own
    unknown nodes (of that kind, where the examples number per kind); where the pattern has gaps (a copy taken out),
    the next name it does not use."""
    unknown = [n for n in dict.fromkeys(n for h, _, t in full for n in (h, t)) if is_unknown(n)]
    same = [n for n in unknown if _node_kind(n) == kind] if spell is not None and spell.per_kind else unknown
    return unknown_name(full, kind, start=1 + len(same))


def longer_readings(triples: Sequence[Sequence[str]], relations: Sequence[str],
                    limit: int = MAX_READINGS, spell: ShotSpelling | None = None) -> list[Reading]:
    """The pattern with one more hop from its asked-for node, which the hop's far end becomes: ``[X, spouse,
    UNKNOWN person 1]`` for "what does X's wife do for a living?" gains ``[UNKNOWN person 1, profession, UNKNOWN
    profession 2]`` — the small model's other frequent slip, the last hop left out. ``relations`` are the KG
    relations the asked-for node's match is the head of (the caller's KG lookup, most likely first); one the
    node already heads in the pattern is skipped (a second edge of the same kind is a constraint, not a hop;
    at most ``limit``). ``spell``: KG relation → (relation, node kind) as the examples write them
    (:func:`shot_spelling`); without it the KG's relation names them both."""
    full = _as_triples(triples)
    asked = _asked(full) if full else "none"
    if asked == "none":
        return []
    heads = {r for h, r, _ in full if h == asked}
    out: list[Reading] = []
    for relation in dict.fromkeys(relations):
        written, kind = _spelled(relation, spell)
        if relation in heads or written in heads or not written.strip():  # a blank name makes no triple
            continue
        hop = (asked, written, _fresh_node(full, kind, spell))
        if len(out) >= limit:
            break
        out.append(Reading((*full, hop), added=hop))
    return out


def insertion_points(triples: Sequence[Sequence[str]]) -> list[tuple[int, str]]:
    """(triple index, its end further from the asked-for node) for each triple of a connected pattern that names an
    entity: where a hop left out in the middle would go out from (:func:`inserted_readings`), nearest the asked node
    first."""
    full = _as_triples(triples)
    asked = _asked(full) if full else "none"
    if (asked == "none" or all(is_unknown(n) for h, _, t in full for n in (h, t))
            or not Pattern.from_triples([list(t) for t in full]).is_connected()):
        return []  # and none in a pattern that names nothing: a chain goes out from a name
    distance = {asked: 0}
    frontier = [asked]
    while frontier:
        node = frontier.pop(0)
        for h, _, t in full:
            for here, there in ((h, t), (t, h)):
                if here == node and there not in distance:
                    distance[there] = distance[node] + 1
                    frontier.append(there)
    points = [(i, h if distance[h] > distance[t] else t) for i, (h, _, t) in enumerate(full)
              if distance[h] != distance[t]]
    return sorted(points, key=lambda p: distance[p[1]])


def inserted_readings(triples: Sequence[Sequence[str]], heads: Mapping[str, Sequence[str]], limit: int = MAX_READINGS,
                      spell: ShotSpelling | None = None, *, per_point: int = 2) -> list[Reading]:
    """The pattern with one more hop in the middle of one of its hops: "Lachlan's siblings' kids, what ethnic
    background are they?" written ``[Lachlan, sibling, UNKNOWN person 1], [UNKNOWN person 1, ethnicity, …]`` — the
    kids left out — gains ``[UNKNOWN person 1, children, UNKNOWN person 2]``, the ethnicity now the kids'. At each
    :func:`insertion_points` (a triple and its end further from the asked node), ``heads[end]`` are the KG relations
    that end's match heads (the caller's KG lookup, most likely first; ``per_point`` of them, not the hop's own): the
    new hop goes out from that end to a new node, from which the triple goes on — not by a relation the end already
    has in the pattern ("X's kids' kids" gaining a third ``children`` hop is a copy, not a hop left out). The asked
    node stays the one asked for; at most ``limit``. ``spell`` writes the relation and the new node's kind as the
    examples do."""
    full = _as_triples(triples)
    asked = _asked(full) if full else "none"
    out: list[Reading] = []
    for i, far in insertion_points(full):
        head, relation, tail = full[i]
        near = tail if head == far else head
        own = {r for h, r, t in full if far in (h, t)}  # a copy of a hop the node has is no hop left out
        taken = 0
        for kg_relation in dict.fromkeys(heads.get(far, ())):
            if len(out) >= limit or taken >= per_point:
                break
            written, kind = _spelled(kg_relation, spell)
            if kg_relation in own or written in own or not written.strip():
                continue
            middle = _fresh_node(full, kind, spell)
            added = (far, written, middle)
            goes_on = (middle, relation, near) if head == far else (near, relation, middle)
            ordered = _asking((*full[:i], added, goes_on, *full[i + 1:]), asked)
            if ordered is not None:
                out.append(Reading(ordered, added=added, inserted=far))
                taken += 1
    return out


def anchored_readings(triples: Sequence[Sequence[str]], ties: Sequence[tuple[str, str, str]],
                      limit: int = MAX_READINGS, spell: ShotSpelling | None = None) -> list[Reading]:
    """The pattern with one more triple tying an entity the question names to it, where the pattern names no entity at
    all: the 1.5B model wrote "Who does the leader of Project Orion report to?" as ``[UNKNOWN person 1, reports to,
    UNKNOWN person 2]``, which any two people in the KG match, so its answer is anyone's manager. ``ties`` are the
    candidate triples (an unknown node of the pattern, a KG relation the named entity has, the entity; or the other
    way round: the caller's KG lookup, most likely first); ``spell`` writes the relation as the examples do. Only for
    a pattern with no named node (a named one anchors it already), at most ``limit``."""
    full = _as_triples(triples)
    if not full or any(not is_unknown(n) for h, _, t in full for n in (h, t)):
        return []
    nodes = {n for h, _, t in full for n in (h, t)}
    out: list[Reading] = []
    for head, relation, tail in ties:
        if len(out) >= limit:
            break
        unknown, named = (head, tail) if is_unknown(head) else (tail, head)
        if unknown not in nodes or is_unknown(named) or not relation.strip():
            continue
        written = spell(relation)[0] if spell is not None else relation
        tie = (head, written, tail)
        out.append(Reading((*full, tie), added=tie, anchor=named))
    return out


def moved_readings(triples: Sequence[Sequence[str]], limit: int = MAX_READINGS) -> list[Reading]:
    """The pattern with a hop hung from the wrong node moved: two triples from one node to two unknown leaves (nodes
    on no other triple), the one hung from the other leaf instead — "where is the football club that X plays for?"
    written ``[X, plays for country, UNKNOWN country 1], [X, plays in club, UNKNOWN club 1]`` (X's club, asked last)
    becomes ``[X, plays in club, UNKNOWN club 1], [UNKNOWN club 1, plays for country, UNKNOWN country 1]``: a chain
    asking for the moved hop's leaf. The relation keeps the LLM's words (the search finds the KG's nearest) and the
    triple its direction, the other leaf in the shared node's place; nothing is added or dropped, so the channel alone
    scores it (at most ``limit``)."""
    full = _as_triples(triples)
    if not full:
        return []
    pattern = Pattern.from_triples(full)
    degree = dict(zip((node.text for node in pattern.nodes), pattern.degrees(), strict=True))

    def leaf_of(triple: tuple[str, str, str], node: str) -> str | None:
        other = triple[2] if triple[0] == node else triple[0]
        return other if other != node and is_unknown(other) and degree[other] == 1 else None
    out: list[Reading] = []
    for i, moving in enumerate(full):
        for node in dict.fromkeys((moving[0], moving[2])):
            if leaf_of(moving, node) is None:
                continue
            for j, other in enumerate(full):
                if j == i or node not in (other[0], other[2]):
                    continue
                to = leaf_of(other, node)
                if to is None:
                    continue
                h, r, t = moving
                hung = (to if h == node else h, r, to if t == node else t)
                rest = (*(x for k, x in enumerate(full) if k != i), hung)  # the moved hop last: it is asked for
                if Pattern.from_triples(rest).is_connected():
                    out.append(Reading(rest, moving, moved=to))
    return _distinct(out)[:limit]


def joined_readings(triples: Sequence[Sequence[str]]) -> list[Reading]:
    """The pattern with its parts joined: for a pattern in several parts, each pair of unknown nodes from two parts
    taken to be one — the node of the part that names an entity kept. "Which department does the leader of Atlas
    Migration work in?" written ``[UNKNOWN person 1, leads project, Atlas Migration], [UNKNOWN project 1, works in,
    UNKNOWN department 1]`` (two labels for one person) becomes ``[UNKNOWN person 1, leads project, Atlas
    Migration], [UNKNOWN person 1, works in, UNKNOWN department 1]``. Nothing is added or dropped, and the node asked
    for stays the one asked for (a join that leaves another leaf last asks another question); every such pair is
    offered (the caller lets the KG pick among them)."""
    full = _as_triples(triples)
    if not full:
        return []
    pattern = Pattern.from_triples(full)
    parts = [[pattern.nodes[i].text for i in nodes] for nodes, _ in pattern.components()]
    if len(parts) < 2:
        return []
    asked = _asked(full)
    out: list[Reading] = []
    for a, first in enumerate(parts):
        for second in parts[a + 1:]:
            named_first = any(not is_unknown(n) for n in first) or all(is_unknown(n) for n in second)
            for x in (n for n in first if is_unknown(n)):
                for y in (n for n in second if is_unknown(n)):
                    keep, gone = (x, y) if named_first else (y, x)
                    rest = tuple((keep if h == gone else h, r, keep if t == gone else t) for h, r, t in full)
                    asks = keep if asked == gone else asked
                    if len(set(rest)) == len(rest) and all(h != t for h, _, t in rest) and _asked(rest) == asks:
                        out.append(Reading(rest, joined=(gone, keep)))
    return _distinct(out)


def unnamed_pattern(triples: Sequence[Sequence[str]], names: Collection[str], question: str,
                    spell: ShotSpelling | None = None) -> tuple[Triples, str] | None:
    """``triples`` with the first named leaf (a node on one triple) that neither ``names`` (the KG names of the
    question's entity mentions) nor the question's own words give put back as an unknown node, and that name; the
    node's kind is the one the examples give the far end of its relation (``spell``), else untyped. "where is the
    football club that X plays for?" written ``[X, plays for country, Argentina], [X, plays in club, UNKNOWN club
    1]``: Argentina is the LLM's own knowledge, not the question's — and the star it leaves can then be moved
    (:func:`moved_readings`). ``None`` where every named leaf is the question's."""
    full = _as_triples(triples)
    said = normalize_name(question)
    given = {normalize_name(n) for n in names}
    ends = [n for h, _, t in full for n in (h, t)]
    unknown = {n for n in ends if is_unknown(n)}
    for h, relation, t in full:
        for leaf in (t, h):
            name = normalize_name(leaf)
            if is_unknown(leaf) or ends.count(leaf) != 1 or name in given or not name or name in said:
                continue
            known = spell.known.get(_relation_key(relation)) if spell is not None and leaf == t else None
            kind = known[1] if known is not None else UNTYPED  # the examples' word for it, else none
            node = unknown_name(full, kind, start=1 + sum(_node_kind(n) == kind for n in unknown))
            return tuple((node if a == leaf else a, r, node if b == leaf else b) for a, r, b in full), leaf
    return None


def named_readings(triples: Sequence[Sequence[str]], names: Sequence[str],
                   limit: int = MAX_READINGS) -> list[Reading]:
    """The pattern with one unknown node taken to be an entity the question names and the pattern does not (the
    small model wrote ``[UNKNOWN club 1, is_in_country, UNKNOWN country 1]`` for "which country is the team X based
    in?"): for each such name in ``names`` (the question's entity mentions, KG spelling) and each unknown node but the
    asked-for one — the answer is not a name the question gives (at most ``limit``)."""
    full = _as_triples(triples)
    nodes = list(dict.fromkeys(n for h, _, t in full for n in (h, t)))
    asked = _asked(full)
    unknown = [n for n in nodes if is_unknown(n) and n != asked]  # the answer is not a name the question gives
    present = {normalize_name(n) for n in nodes}  # the LLM may spell a name in another case ("Oscar" for OSCAR)
    out: list[Reading] = []
    for name in dict.fromkeys(names):
        if normalize_name(name) in present:
            continue
        for node in unknown:
            renamed = tuple((name if h == node else h, r, name if t == node else t) for h, r, t in full)
            out.append(Reading(renamed, named=(node, name)))
            if len(out) >= limit:
                return out
    return out


def analogy_readings(triples: Sequence[Sequence[str]], analogies: Sequence[tuple[str, Triples]],
                     limit: int = MAX_READINGS) -> list[Reading]:
    """The examples' patterns with the question's entities in them (``analogies``: example question, triples),
    each pattern once and none the same as ``triples`` (at most ``limit``)."""
    seen = {_as_triples(triples)}
    out: list[Reading] = []
    for question, analog in analogies:
        key = _as_triples(analog)
        if key in seen or not key:
            continue
        seen.add(key)
        out.append(Reading(key, example=question))
        if len(out) >= limit:
            break
    return out


def sampled_readings(triples: Sequence[Sequence[str]], samples: Sequence[Sequence[Sequence[str]]],
                     limit: int = MAX_READINGS) -> list[Reading]:
    """The patterns the LLM sampled (``samples``), each once and none the same as ``triples`` up to its unknown
    nodes' labels, nor one in pieces where ``triples`` is connected (at most ``limit``)."""
    own = _shape(_as_triples(triples))
    out = [Reading(key, sampled=True) for key in map(_as_triples, samples)
           if key and _shape(key) != own and _keeps_whole(triples, key)]
    return _distinct(out)[:limit]


def variant_readings(triples: Sequence[Sequence[str]], variant: Sequence[Sequence[str]] | None) -> list[Reading]:
    """The pattern the LLM wrote for the question under a prompt with more examples (``variant``), unless it is
    ``triples`` up to its unknown nodes' labels, or in pieces where ``triples`` is connected."""
    if not variant:
        return []
    key = _as_triples(variant)
    if _shape(key) == _shape(_as_triples(triples)) or not _keeps_whole(triples, key):
        return []
    return [Reading(key, variant=True)]


def _keeps_whole(own: Sequence[Sequence[str]], other: Triples) -> bool:
    """Whether ``other`` is connected wherever the LLM's own pattern is: a question asks about one subgraph, and every
    other reading keeps the pattern connected (the 1.5B model's variant for "Which department does the leader of P
    work in?" joined no hop to the leader: ``[UNKNOWN person 1, leads project, P], [UNKNOWN project 1, works in,
    …]``)."""
    return Pattern.from_triples([list(t) for t in other]).is_connected() or not Pattern.from_triples(
        [list(t) for t in own]).is_connected()


def _as_triples(triples: Sequence[Sequence[str]]) -> Triples:
    return tuple((str(h), str(r), str(t)) for h, r, t in triples)


def _shape(triples: Triples) -> Triples:
    """``triples`` with each unknown node renamed by its first appearance: equal for patterns that differ only in
    their unknown nodes' labels."""
    names: dict[str, str] = {}
    def canon(node: str) -> str:
        return names.setdefault(node, f"?{len(names)}") if is_unknown(node) else node
    return tuple((canon(h), r, canon(t)) for h, r, t in triples)


def _distinct(readings: Sequence[Reading]) -> list[Reading]:
    """``readings`` without those whose pattern an earlier one has, up to its unknown nodes' labels."""
    seen: set[Triples] = set()
    out = []
    for reading in readings:
        key = _shape(reading.triples)
        if key not in seen:
            seen.add(key)
            out.append(reading)
    return out


def _render(triples: Sequence[Sequence[str]]) -> str:
    return "; ".join("[" + ", ".join(t) + "]" for t in triples)


def _asked(triples: Sequence[Sequence[str]]) -> str:
    pattern = Pattern.from_triples([tuple(t) for t in triples])
    index = pattern.asked_node()
    return pattern.nodes[index].text if index is not None else "none"


def _asking(triples: Triples, node: str) -> Triples | None:
    """``triples`` in an order whose asked-for node (:meth:`~simgrag.pattern.graph.Pattern.asked_node`) is ``node``:
    as they are, else the triples without ``node`` first; ``None`` where neither order asks for it (another unknown
    leaf)."""
    last = (*(x for x in triples if node not in (x[0], x[2])), *(x for x in triples if node in (x[0], x[2])))
    for order in (triples, last):
        if _asked(order) == node:
            return order
    return None


def _condition(triples: Sequence[Sequence[str]]) -> str:
    return f"Triples: {_render(triples)}\nANSWER: {_asked(triples)}\nQuestion:"


def channel_prompt(examples: Sequence[Example]) -> str:
    """The turned-round few-shot prompt: each example's triples and asked-for node, then its question."""
    shots = "".join(f"{_condition(e.triples)} {e.question.strip()}\n\n" for e in examples)
    return _HEAD + shots


def fit_margin(changes: Sequence[tuple[float, int]], *, keep_ties: bool = False) -> tuple[float, int, int]:
    """The margin that keeps the changes worth keeping: ``changes`` are, per validation question where the
    channel took a reading at margin 0, its gap (nats) and its effect (+1 fixed, -1 broke, 0 neither).
    Returns ``(margin, fixed, broke)`` for the margin (0 or one of the gaps; a change is kept when its gap is
    above it) with the most fixed minus broke, ties going to the larger margin (fewer changes) — or, with
    ``keep_ties`` (readings on by default, which need only do no harm), to the smaller: a change that neither
    fixed nor broke does not raise the margin."""
    best = (0.0, sum(e > 0 for _, e in changes), sum(e < 0 for _, e in changes))
    for margin in sorted({g for g, _ in changes}):
        kept = [e for g, e in changes if g > margin]
        fixed, broke = sum(e > 0 for e in kept), sum(e < 0 for e in kept)
        if fixed - broke > best[1] - best[2] or (fixed - broke == best[1] - best[2] and not keep_ties):
            best = (float(margin), fixed, broke)
    return best


class ChannelChoice:
    """A :class:`~simgrag.retrievers.base.PatternStage` that asks ``inner`` for the pattern, then lets the LLM
    choose between it, its :func:`shorter_readings`, — given ``mentions`` (question → the KG names of its entity
    mentions) — its :func:`named_readings` and — given ``analogies`` — the :func:`analogy_readings` of the examples
    its prompt showed and — given ``extensions`` (question, pattern → KG relations) — its :func:`longer_readings`, by
    log P(question | pattern) (module docstring); ``readings`` names the kinds offered
    (:data:`READINGS`). The turned-round prompt holds the examples the pattern prompt showed for the question
    (static, then dynamic). A longer reading's score adds how much likelier (or less likely) the
    model itself finds writing it than its own pattern, log P(pattern | the pattern prompt) — both directions of the
    noisy channel: a hop the LLM did not write must explain the question *and* be a hop it might have written (hops
    added on the channel's word alone broke one-hop questions). Only for readings that add: a copied hop is the
    model's own likeliest output, so its likelihood cannot speak against the copy (with it, the contracted readings
    lost three genealogy questions they had right). A scoring failure keeps the inner pattern (logged): the choice
    can only add."""

    def __init__(self, inner: PatternSource, llm: LLM, generator: PatternGenerator, *, margin: float = MARGIN,
                 limit: int = MAX_READINGS, mentions: Callable[[str], Sequence[str]] | None = None,
                 analogies: Analogies | None = None, readings: Collection[str] = READINGS,
                 extensions: Extensions | None = None, skips: Skips | None = None,
                 anchors: Anchors | None = None, same: Callable[[str, str], bool] | None = None,
                 fit: Callable[[Triples], float] | None = None, heads: Heads | None = None) -> None:
        if not scores_text(llm):
            raise LLMError(f"{llm.name} cannot score text: the channel choice needs the embedded llama.cpp model")
        unknown = sorted(set(readings) - set(KNOWN_READINGS))
        if unknown:
            raise ConfigError(f"unknown kinds of reading {unknown} for the channel choice (known: "
                              f"{', '.join(KNOWN_READINGS)})")
        self.inner, self.llm, self.generator = inner, llm, generator
        self.margin, self.limit = margin, limit
        self.mentions = mentions if "named" in readings else None
        self.analogies = analogies if "analogy" in readings else None
        self.shorter = "shorter" in readings
        self.contracted = "contracted" in readings
        self.moved = "moved" in readings and fit is not None
        self.joined = "joined" in readings and fit is not None
        self.retyped = "retyped" in readings and fit is not None and extensions is not None
        self.fit = fit
        self.same = same
        # longer readings always carry the direct score: on the channel's word alone they add hops the question does
        # not ask (WorldCup2014's file, fitted with them and without it: 3 conjunctive questions lost a club hop)
        self.extensions = extensions if "longer" in readings else None
        self.heads = heads if "inserted" in readings and fit is not None else None  # and the direct score
        self.skips = skips if "skipped" in readings else None
        self.anchors = anchors if "anchored" in readings else None
        # the LLM's own alternatives: only where it samples by seed (fixed seeds; the call cache keeps their replies)
        self.sampled = "sampled" in readings and samples_text(llm)
        if "sampled" in readings and not self.sampled:
            logger.warning("%s cannot sample by seed: the channel choice offers no sampled readings", llm.name)
        self.variant = "variant" in readings
        self.reasked = "reasked" in readings

    def pattern(self, text: str) -> PatternResult:
        result = self.inner.pattern(text)
        prompt = self.generator.prompt
        dynamic = prompt.dynamic_examples(text)  # word overlap only: cheap, and ranked once for every use below
        shots = [*prompt.static_examples, *dynamic]  # what the pattern prompt showed for the question
        spelling = shot_spelling(shots)
        result = self._retyped(text, self._joined(text, result, shots, spelling))
        triples = result.pattern.triples()
        readings = shorter_readings(triples, self.limit) if self.shorter else []
        if self.contracted:
            readings += contracted_readings(triples, self.limit, self.same)
        moving = self.moved and result.attempts > 0  # a hop the LLM hung from the wrong node: not where no LLM wrote
        if moving:
            readings += self._best_moved(triples)
        if self.mentions is not None:
            names = self.mentions(text)
            named = named_readings(triples, names, self.limit)
            readings += named
            if moving:  # and with a name put in, or a name the question does not give taken out
                readings += [replace(again, named=r.named) for r in named for again in self._best_moved(r.triples)]
                for source in (triples, *(r.triples for r in named)):
                    taken = unnamed_pattern(source, names, text, spelling)
                    if taken is not None:
                        readings += [replace(again, unnamed=taken[1]) for again in self._best_moved(taken[0])]
        if self.extensions is not None and result.attempts > 0:  # a hop the LLM left out: not where no LLM wrote it
            readings += longer_readings(triples, self.extensions(text, _as_triples(triples)), self.limit,
                                        spelling)
        if self.heads is not None and result.attempts > 0:  # a hop left out in the middle: as the longer ones
            readings += self._inserted(text, triples, spelling)
        if self.skips is not None:
            readings += skipped_readings(triples, self.skips(text, _as_triples(triples)), self.limit)
        if self.anchors is not None and result.attempts > 0:  # both return nothing where the pattern names an entity
            readings += anchored_readings(triples, self.anchors(text, _as_triples(triples)), self.limit,
                                          spelling)
        if self.reasked:  # the pattern, and each with a name put in, asking for another leaf
            readings += reasked_readings(triples, self.limit)
            readings += [replace(again, named=r.named) for r in readings if r.kind == "named"
                         for again in reasked_readings(r.triples, self.limit)]
        if self.analogies is not None:  # the question's best-fitting examples first (dynamic: best last)
            shown = [*reversed(dynamic), *(e for e in prompt.static_examples if e not in dynamic)]
            readings += analogy_readings(triples, self.analogies(text, shown), self.limit)
        readings = _distinct(readings)  # a copy at a leaf is a shorter and a contracted reading
        sampling = self.sampled and result.attempts > 0  # alternatives the LLM writes: not where no LLM wrote
        varying = self.variant and result.attempts > 0
        if not readings and not sampling and not varying:
            return result
        extra: dict[int, float] = {}  # reading → its direct score against the LLM's own pattern
        try:  # the direct score first: the model's context still holds the pattern prompt it just answered
            if varying:
                other = self.generator.variant(text, prompt.n_dynamic_shots + VARIANT_EXTRA_SHOTS)
                readings = _distinct([*readings, *variant_readings(triples, other.triples() if other else None)])
            if sampling:
                sampled = self.generator.sample(text, range(1, SAMPLES + 1), SAMPLE_TEMPERATURE)
                readings = _distinct([*readings, *sampled_readings(triples, [p.triples() for p in sampled],
                                                                   self.limit)])
            if not readings:
                return result
            readings, extra = self._with_direct(text, triples, readings)
            items = [(_condition(triples), " " + text.strip() + "\n"),
                     *((_condition(r.triples), " " + text.strip() + "\n") for r in readings)]
            scores = self.llm.score_continuations(channel_prompt(shots), items)  # type: ignore[attr-defined]
        except LLMError as exc:
            logger.warning("channel choice skipped for %r: %s", text, exc)
            return result
        for i, gain in extra.items():  # a hop added: the LLM's own say counts too
            scores[i + 1] += gain
        own, best = scores[0], max(range(len(readings)), key=lambda i: scores[i + 1])
        if scores[best + 1] <= own + self.margin:
            return result
        chosen = readings[best]
        both = (chosen.added is not None and chosen.anchor is None) or chosen.written  # the direct score counted too
        said = "the question and the pattern are" if both else "the question is"
        note = (f"{chosen.why()}: {said} likelier given that pattern (log-likelihood "
                f"{scores[best + 1]:.2f} against {own:.2f})")
        return replace(result, pattern=Pattern.from_triples(list(chosen.triples)),
                       kg_repairs=(*result.kg_repairs, note), families=(*result.families, CHANNEL),
                       channel_gap=scores[best + 1] - own, channel_reading=chosen.kind)

    def _retyped(self, text: str, result: PatternResult) -> PatternResult:
        """``result`` with its asked-for node reached through one more hop where the KG matches that strictly better:
        "Stafice War Memorial, the architect that designed it, graduated from what university?" written
        ``[Stafice War Memorial, architect, UNKNOWN university 1]`` — the architect is no university, and the search's
        kind prior makes the match pay for it; ``[Stafice War Memorial, architect, UNKNOWN entity 1], [UNKNOWN entity
        1, alma mater, UNKNOWN university 1]`` does not. Where the asked node has several hops, each is tried in turn
        ("which team has a player from Ghana?" written ``[UNKNOWN team 1, is in country, Ghana], [UNKNOWN team 1,
        plays for country, Ghana]``: a team plays for no country; its player does, and plays in it). The added
        relation is one the middle node's best match heads (nearest the question's words first, two tried per hop);
        without the kind prior nothing is cheaper than the LLM's own pattern, so nothing changes."""
        if not self.retyped or result.attempts == 0 or self.extensions is None or self.fit is None:
            return result
        triples = _as_triples(result.pattern.triples())
        asked = _asked(triples) if triples else "none"
        on = [i for i, (h, _, t) in enumerate(triples) if asked in (h, t) and h != t]
        if asked == "none" or _node_kind(asked) in ("", UNTYPED) or not on:
            return result
        middle = unknown_name(triples, UNTYPED)
        candidates = [reading for i in on for reading in self._retyped_at(text, triples, i, middle)]
        if not candidates:
            return result
        fits = [self.fit(r.triples) for r in candidates]
        own, best = self.fit(triples), min(range(len(candidates)), key=lambda i: fits[i])
        if not fits[best] < own - ANSWER_TOLERANCE:
            return result
        chosen = candidates[best]
        note = f"{chosen.why()}: the KG matches it better (GSD {fits[best]:.3f} against {own:.3f})"
        return replace(result, pattern=Pattern.from_triples(list(chosen.triples)),
                       kg_repairs=(*result.kg_repairs, note), families=(*result.families, CHANNEL),
                       channel_reading="retyped")

    def _retyped_at(self, text: str, triples: Triples, i: int, middle: str) -> list[Reading]:
        """The retyped readings of ``triples`` through hop ``i``: its asked end made ``middle``, which reaches the asked
        node by one of the (two first) relations the middle node's best match heads — not hop ``i``'s own again (a
        copy); none where no order of the triples keeps the asked node the one asked for."""
        if self.extensions is None:
            return []
        asked = _asked(triples)
        h, written, t = triples[i]
        hop = (middle if h == asked else h, written, middle if t == asked else t)
        others = tuple(x for j, x in enumerate(triples) if j != i)
        # the middle node is the one asked for while its relations are looked up: its hop goes last, a leaf
        bare = (*others, hop) if asked in (n for x in others for n in (x[0], x[2])) else tuple(
            hop if j == i else x for j, x in enumerate(triples))
        relations = [relation for relation in self.extensions(text, bare)
                     if relation != written and (self.same is None or not self.same(relation, written))]
        out = []
        for relation in relations[:2]:
            added = (middle, relation, asked)
            ordered = _asking((*bare, added), asked)
            if ordered is not None:
                out.append(Reading(ordered, added=added, retyped=asked))
        return out

    def _joined(self, text: str, result: PatternResult, shots: Sequence[Example],
                spelling: ShotSpelling) -> PatternResult:
        """``result`` with its parts joined where the LLM wrote a pattern in parts and the KG matches one of its
        :func:`joined_readings` (the best) as well as the parts: a part hanging loose is not what a question asks
        (it matches anything), and the channel cannot tell — the 1.5B model found "Which department does the leader
        of Atlas Migration work in?" likelier under the two parts than joined (−13.9 against −15.2)."""
        if not self.joined or result.attempts == 0:  # not where no LLM wrote the pattern
            return result
        triples = result.pattern.triples()
        candidates = joined_readings(triples)
        if self.mentions is not None:  # and with a name the question does not give put back as an unknown node
            taken = unnamed_pattern(triples, self.mentions(text), text, spelling)
            if taken is not None:
                candidates += [replace(r, unnamed=taken[1]) for r in joined_readings(taken[0])]
        joined = self._best_of(candidates, cap=2 * self.limit)
        if not joined or self.fit is None:
            return result
        own, gsd = self.fit(_as_triples(triples)), self.fit(joined[0].triples)
        if gsd > own + ANSWER_TOLERANCE:
            return result
        alike = [r for r in joined if r.joined is not None and _node_kind(r.joined[0]) == _node_kind(r.joined[1])]
        joined = alike or joined  # two nodes the LLM typed alike first ("person" and "person", not a religion)
        chosen = joined[0]
        if len(joined) > 1:  # joins the KG matches alike (it ignores directions): the LLM's likelihood picks
            items = [(_condition(r.triples), " " + text.strip() + "\n") for r in joined]
            try:
                scores = self.llm.score_continuations(channel_prompt(shots), items)  # type: ignore[attr-defined]
                if len(scores) != len(items):
                    raise LLMError(f"{self.llm.name} gave {len(scores)} scores for {len(items)} joined readings")
                chosen = joined[max(range(len(joined)), key=lambda i: scores[i])]
            except LLMError as exc:
                logger.warning("joined readings not scored for %r (the first kept): %s", text, exc)
        note = f"{chosen.why()}: the KG matches it as well as the parts (GSD {gsd:.3f} against {own:.3f})"
        logger.debug("joined for %r: %s", text, note)
        return replace(result, pattern=Pattern.from_triples(list(chosen.triples)),
                       kg_repairs=(*result.kg_repairs, note), families=(*result.families, CHANNEL),
                       channel_reading="joined")

    def _inserted(self, text: str, triples: Sequence[Sequence[str]], spelling: ShotSpelling) -> list[Reading]:
        """The :func:`inserted_readings` of ``triples``, each insertion point's relations looked up in the KG, those
        the KG matches as well as the pattern: a hop left out is a chain the KG has as the question says it
        (``[UNKNOWN year 1, directed by, …]``, a year that someone directed, is none)."""
        if self.heads is None or self.fit is None:
            return []
        full = _as_triples(triples)
        ends = dict.fromkeys(far for _, far in insertion_points(full))
        readings = inserted_readings(full, {far: self.heads(text, full, far) for far in ends}, 2 * self.limit,
                                     spelling)
        if not readings:
            return []
        own = self.fit(full)
        return [r for r in readings if self.fit(r.triples) <= own + ANSWER_TOLERANCE]

    def _best_moved(self, triples: Sequence[Sequence[str]]) -> list[Reading]:
        """The :func:`moved_readings` of ``triples`` the KG matches best: which way round a hop hangs is the KG's
        say; whether it hangs there at all, the channel's."""
        return self._best_of(moved_readings(triples, self.limit))

    def _best_of(self, readings: Sequence[Reading], cap: int | None = None) -> list[Reading]:
        """Of ``readings`` (one pattern's alternatives that add and drop nothing), those the KG matches best (least
        GSD, ties kept; at most ``cap`` searched, in order: :attr:`limit` unless given)."""
        readings = list(readings)[:cap if cap is not None else self.limit]
        if not readings or self.fit is None:
            return []
        fits = [self.fit(r.triples) for r in readings]
        best = min(fits)
        return [r for r, gsd in zip(readings, fits, strict=True)
                if gsd < float("inf") and gsd <= best + ANSWER_TOLERANCE]

    def _with_direct(self, text: str, triples: Sequence[Sequence[str]],
                     readings: list[Reading]) -> tuple[list[Reading], dict[int, float]]:
        """``readings`` with the longer ones and the inserted ones each cut to the :data:`DIRECT_KEEP` the model itself
        finds likeliest to write, and for each of those kept and each one an LLM call wrote (sampled, a variant; by its
        new position) its direct score minus the LLM's own pattern's."""
        added = [i for i, r in enumerate(readings) if r.added is not None and r.anchor is None]
        sampled = [i for i, r in enumerate(readings) if r.written]
        if not added and not sampled:
            return readings, {}
        both = [*added, *sampled]
        written = self._direct(text, [triples, *(readings[i].triples for i in both)])
        score = {i: written[j + 1] - written[0] for j, i in enumerate(both)}
        gains: dict[int, float] = {i: score[i] for i in sampled}
        for inserted in (False, True):  # the longer ones, then the inserted ones: each its DIRECT_KEEP likeliest
            group = [i for i in added if (readings[i].inserted is not None) == inserted]
            gains.update({i: score[i] for i in sorted(group, key=lambda i: -score[i])[:DIRECT_KEEP]})
        kept = [i for i, r in enumerate(readings) if ((r.added is None or r.anchor is not None) and not r.written)
                or i in gains]  # an anchored reading puts in a name, as a named one does: the channel alone
        return [readings[i] for i in kept], {n: gains[i] for n, i in enumerate(kept) if i in gains}

    def _direct(self, text: str, patterns: Sequence[Sequence[Sequence[str]]]) -> list[float]:
        """log P(pattern | the pattern prompt for ``text``) per pattern: the model's own evidence for writing it,
        in the compact JSON its shots show (the *direct* score, added to a longer reading's channel score)."""
        prompt = self.generator.prompt
        replies = [prompt.render_shot_answer(p) for p in patterns]
        scored = self.llm.score_replies(prompt.messages(text), replies)  # type: ignore[attr-defined]
        if len(scored) != len(replies):
            raise LLMError(f"{self.llm.name} gave {len(scored)} scores for {len(replies)} patterns")
        return [float(x) for x in scored]
