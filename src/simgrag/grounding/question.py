"""A question read without an LLM: the KG entities it names and the phrases that can name relations.

:func:`read_question` splits a question into words, finds the longest word n-grams that are KG entity
names (case-insensitive, a possessive ``'s`` dropped) and keeps the rest as *phrases*: the 1–3-word
runs outside the entity mentions that start with a content word ("share actors", "come out",
"kinds of movies"). The pattern judge (:mod:`~simgrag.grounding.judge`) uses both: a named pattern node must
be one of the question's mentions, and each pattern relation should have a phrase of the question that
names it. No LLM, no KG walk: a dictionary look-up per n-gram.

>>> reading = read_question("Which movies share actors with Heat?", {"heat": 7}.get)
>>> [(m.text, m.entity) for m in reading.mentions]
[('Heat', 7)]
>>> reading.phrases[:4]
('movies', 'movies share', 'movies share actors', 'share')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from simgrag.grounding.english import (
    AUXILIARIES,
    COMPANION_PREPOSITIONS,
    COPULAS,
    IRREGULAR_PARTICIPLES,
    NOUN_PHRASE_DETERMINERS,
    STOPWORDS,
    VAGUE_FOCUS,
    WH_WITHOUT_FOCUS,
    WH_WORDS,
)

__all__ = ["Mention", "QuestionReading", "common_words_of", "normalize_name", "phrases_of",
           "read_question"]

MAX_MENTION_WORDS = 10
MAX_PHRASE_WORDS = 3
#: two words of at least this many letters, one the other's start give or take 3 letters, share a stem
STEM_LETTERS = 4

_EDGE_PUNCT = "?!.,;:\"'()[]{}«»“”‘’`"
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def normalize_name(text: str) -> str:
    """The form names are compared in: lower case, single spaces, no punctuation at the ends."""
    return _SPACES.sub(" ", text).strip().strip(_EDGE_PUNCT).strip().lower()


@dataclass(frozen=True)
class Mention:
    """A KG entity named in the question: words ``start:end`` (``text`` as written)."""

    text: str
    start: int
    end: int
    entity: int
    #: a name by the question's own evidence (see :func:`read_question`), whatever its letters' case
    named: bool = False

    @property
    def words(self) -> int:
        return self.end - self.start

    @property
    def confident(self) -> bool:
        """Several words, a capital letter not at the question's start, a digit, or :attr:`named`: a name,
        not a common word that happens to be some entity's name ("cast", "played")."""
        if self.words > 1 or self.named or any(c.isdigit() for c in self.text):
            return True
        return self.start > 0 and self.text[:1].isupper()


@dataclass(frozen=True)
class QuestionReading:
    """The question's words, its entity mentions (longest first, non-overlapping) and phrases."""

    question: str
    words: tuple[str, ...]
    mentions: tuple[Mention, ...]
    phrases: tuple[str, ...]

    def clean_words(self) -> list[str]:
        """The words as compared with names (lower case, no edge punctuation or possessive)."""
        return _clean_words(self.words)

    def span_of(self, text: str) -> tuple[int, int] | None:
        """Word offsets of the first occurrence of ``text`` (normalised) in the question, if any."""
        wanted = normalize_name(text).split()
        clean = self.clean_words()
        for start in range(len(clean) - len(wanted) + 1):
            if wanted and clean[start:start + len(wanted)] == wanted:
                return start, start + len(wanted)
        return None

    def focus(self, covered: Sequence[bool]) -> int | None:
        """Index of the word that says what is asked, outside ``covered`` (named entities), or ``None``:

        - after an interrogative "who": its first content word ("Who **directed** …", "Who were the
          **writers** …");
        - after an interrogative "what/which": the next content word when no verb comes first ("Which
          **tags** …", "… are in which **genres**?"; "What else *did* …" has none), or the noun after a
          form of *be*, as after "who" ("What are the **movies** that …", "What is the release **year** of …");
        - none at all with "when/where/how" ("Tell me when …"; a relative one does not count: "the countries
          **where** …") or before "kind of" — unless an interrogative
          "who/what/which" opens a clause of the question ("Which **countries** use the currency of the
          country where Abidjan is?": a relative "where"; "Where is Vladivostok? Which **country**?");
        - before a clause-final "who", the content word before it ("the films X acted in were **written**
          by who"); none after a preposition of :data:`COMPANION_PREPOSITIONS` ("X is a co-star of who");
        - without a question word, the first content word of the last sentence ("List the **years** in
          which …"; "Tampere is in some country. List the **capitals** of …").

        "what/which" is interrogative when it opens a clause or ends it ("… in what **year**?"), not
        when a clause follows it ("the years in which Kevin Howarth's movies came out").
        """
        clean = self.clean_words()
        opened = any(w in WH_WORDS - WH_WITHOUT_FOCUS and not covered[i] and self._opens_clause(i)
                     for i, w in enumerate(clean))
        if not opened and any(w in WH_WITHOUT_FOCUS and not covered[i] and not self._relative(clean, i)
                              for i, w in enumerate(clean)):
            return None
        start = 0
        for i, word in enumerate(clean):
            if word not in WH_WORDS or covered[i]:
                continue
            if word in ("who", "whom", "whose") and self._opens_clause(i):
                return self._after_who(clean, covered, i + 1)
            if word in ("who", "whom") and self._last_of_clause(i):
                if i > 0 and clean[i - 1] in COMPANION_PREPOSITIONS:
                    return None  # "X co-directed movies with who": a companion, not "movies" nor "co-directed"
                before = self._before_who(clean, covered, i)
                if before is not None:
                    return before
            if word in ("what", "which") and (self._opens_clause(i) or self._ends_clause(i)):
                start = i + 1
                after = next((w for w in clean[start:] if w not in ("else", "other", "others")), None)
                if after in COPULAS and start < len(clean) and clean[start] == after:
                    return self._after_who(clean, covered, start)  # "What are the **movies** that …"
                if after in AUXILIARIES:
                    return None
                break
        if start == 0:  # no question word: the request is the last sentence ("X is in some country. List …")
            start = self._last_sentence(covered)
        i = start
        while i < len(clean):
            past = _past_name_of(clean, i)  # "List the names of the **films** …"
            if past != i:
                i = past
                continue
            if not covered[i] and clean[i] and clean[i] not in STOPWORDS:
                return None if clean[i] in VAGUE_FOCUS else i
            i += 1
        return None

    def _last_sentence(self, covered: Sequence[bool]) -> int:
        """First word of the question's last sentence: after a word ending in . ! ? or ; that no entity
        name covers ("Dr. No" stays one name), where a capitalised word begins — any word, in a question
        written all in lower case ("tampere is in some country. list the capitals …") — and a content word
        follows; 0 for one sentence."""
        lower_case = not any(w[:1].isupper() for w in self.words)
        clean = self.clean_words()
        for i in range(len(self.words) - 1, 0, -1):
            if (self.words[i - 1][-1:] in ".!?;" and not covered[i - 1]
                    and (lower_case or self.words[i][:1].isupper())
                    and any(w and w not in STOPWORDS and not covered[k] for k, w in enumerate(clean[i:], i))):
                return i
        return 0

    def _after_who(self, clean: Sequence[str], covered: Sequence[bool], i: int) -> int | None:
        """"Who **directed** …" (a verb right after), "Who were the **writers** …" (a noun after a form
        of *be*: the last word of the noun phrase, "Who are film **co-directors** of …", also after a
        named owner: "Who are Iraq's **neighbours**?"); nothing for "Who was in the movies …"; the noun
        phrase ends before a participle ("What is a **movie** written by …")."""
        if i < len(clean) and clean[i] in (*COPULAS, "'s"):
            i = self._past_owner(covered, _past_name_of(clean, _past_determiners(clean, i + 1)))
            start = i
            while (i + 1 < len(clean) and i + 1 - start < 3 and not covered[i + 1] and clean[i + 1]
                   and clean[i + 1] not in STOPWORDS and not covered[i] and not _participle(clean[i + 1])):
                i += 1
        elif i < len(clean) and clean[i] in ("has", "have", "had"):
            i += 1
        if i < len(clean) and not covered[i] and clean[i] and clean[i] not in STOPWORDS:
            return None if clean[i] in VAGUE_FOCUS else i
        return None

    def _past_owner(self, covered: Sequence[bool], i: int) -> int:
        """Past a named entity in the possessive that starts at word ``i`` ("**Iraq's** neighbours",
        "**iraq 's** neighbours"); ``i`` itself otherwise."""
        j = i
        while j < len(covered) and covered[j]:
            j += 1
        return j if j > i and any(self.possessive(k) for k in range(i, j)) else i

    @staticmethod
    def _before_who(clean: Sequence[str], covered: Sequence[bool], i: int) -> int | None:
        """A clause-final "who": the content word before it ("… were **written** by who"), or ``None``
        when a named entity comes first ("the director of X is who": the usual rule finds "director")."""
        j = i - 1
        while j >= 0 and not covered[j] and clean[j] in STOPWORDS:
            j -= 1
        if j < 0 or covered[j] or not clean[j] or clean[j] in VAGUE_FOCUS:
            return None
        return j

    def asks_who(self) -> bool:
        """An interrogative who/whom/whose: one that opens a clause ("Who has …") or ends one ("… starred
        who"); not a relative one ("the person who directed X")."""
        return any(w in ("who", "whom", "whose") and (self._opens_clause(i) or self._last_of_clause(i))
                   for i, w in enumerate(self.clean_words()))

    def _relative(self, clean: Sequence[str], i: int) -> bool:
        """Word ``i`` ("where", "when") joins a clause to the noun phrase before it: "List the countries
        **where** Dutch is official" (a determiner within the three words before it, more words after it),
        not "Tell me **where** …" nor "… came out **when**?"."""
        return (not self._last_of_clause(i) and not self._opens_clause(i)
                and any(w in NOUN_PHRASE_DETERMINERS for w in clean[max(0, i - 3): i - 1]))

    def _last_of_clause(self, i: int) -> bool:
        """Word ``i`` ends its clause (the question's last word, or followed by . ; : ? !)."""
        return i == len(self.words) - 1 or self.words[i][-1:] in ".;:?!"

    def _opens_clause(self, i: int) -> bool:
        """Word ``i`` is among the first two words of a clause (after . ; : ? ! or a dash)."""
        for back in (1, 2):
            j = i - back
            if j < 0 or self.words[j] in ("-", "–", "—") or self.words[j][-1:] in ".;:?!,":
                return True
        return False

    def _ends_clause(self, i: int) -> bool:
        """A clause ends within three words after word ``i`` ("… in which genres?")."""
        for j in range(i, min(i + 4, len(self.words))):
            if self.words[j][-1:] in ".;:?!," or j == len(self.words) - 1:
                return True
        return False

    def possessive(self, i: int) -> bool:
        """Word ``i`` ends with a possessive mark ("Ted North**'s** co-stars")."""
        return 0 <= i < len(self.words) and bool(_POSSESSIVE.search(self.words[i].rstrip(_EDGE_PUNCT)))

    def mentions_text(self, text: str) -> bool:
        """Whether ``text`` (a pattern node) is written in the question (case-insensitive)."""
        wanted = normalize_name(text)
        if not wanted:
            return False
        haystack = " " + " ".join(normalize_name(w) for w in self.words) + " "
        return f" {wanted} " in haystack or wanted in normalize_name(self.question)


def _past_determiners(clean: Sequence[str], i: int) -> int:
    """The first word from ``i`` on that is not an article."""
    while i < len(clean) and clean[i] in ("the", "a", "an"):
        i += 1
    return i


def _past_name_of(clean: Sequence[str], i: int) -> int:
    """Past "name(s) of the" at word ``i`` ("What is the **name** of the country …" asks for the country);
    ``i`` itself anywhere else."""
    if i + 1 < len(clean) and clean[i] in ("name", "names") and clean[i + 1] == "of":
        return _past_determiners(clean, i + 2)
    return i


def _candidates(words: list[str], start: int, n: int) -> list[str]:
    """The spellings an n-gram may name an entity by: as written, and without a possessive."""
    span = " ".join(words[start:start + n]).strip(_EDGE_PUNCT)
    forms = [span]
    bare = _POSSESSIVE.sub("", span).strip(_EDGE_PUNCT)
    if bare and bare != span:
        forms.append(bare)
    return forms


def _link(words: list[str], lookup: Callable[[str], int | None]) -> list[Mention]:
    taken = [False] * len(words)
    found: list[Mention] = []
    for n in range(min(MAX_MENTION_WORDS, len(words)), 0, -1):
        for start in range(len(words) - n + 1):
            if any(taken[start:start + n]):
                continue
            if n > 1 and not (normalize_name(words[start]) and normalize_name(words[start + n - 1])):
                continue  # a lone mark at an end ("abidjan ?") is not part of the name
            for form in _candidates(words, start, n):
                key = normalize_name(form)
                if not key or (n == 1 and (len(key) < 3 or key in STOPWORDS)):
                    continue
                entity = lookup(key)
                if entity is not None:
                    found.append(Mention(form, start, start + n, int(entity)))
                    taken[start:start + n] = [True] * n
                    break
    return sorted(found, key=lambda m: m.start)


def _as_named(mention: Mention, lower_case: bool, common_words: Collection[str]) -> Mention:
    """``mention``, :attr:`Mention.named` when its letters' case cannot tell (see :func:`read_question`)."""
    if mention.words > 1 or any(c.isupper() for c in mention.text):
        return mention
    key = _clean_words([mention.text])[0]
    identifier = "_" in key.strip("_")
    if identifier or (lower_case and not _is_common(key, common_words)):
        return replace(mention, named=True)
    return mention


def _is_common(word: str, common_words: Collection[str]) -> bool:
    """``word`` is one of ``common_words`` or shares its stem with one ("star": "starred"; "actors": "actor")."""
    if word in common_words:
        return True
    return len(word) >= STEM_LETTERS and any(
        (w.startswith(word) or word.startswith(w)) and len(w) >= STEM_LETTERS and abs(len(w) - len(word)) <= 3
        for w in common_words)


def common_words_of(texts: Iterable[str], names: Iterable[str] = ()) -> frozenset[str]:
    """The words of ``texts`` (compared as :func:`read_question` compares them; ``_`` splits words), less
    the words of ``names`` (the entities those texts name): :func:`read_question`'s ``common_words``."""
    found = {w for text in texts for w in _clean_words(text.replace("_", " ").split()) if w}
    named = {w for name in names for w in _clean_words(name.replace("_", " ").split())}
    return frozenset(found - named)


def _clean_words(words: Sequence[str]) -> list[str]:
    return [normalize_name(_POSSESSIVE.sub("", w)) for w in words]


def _participle(word: str) -> bool:
    """A past participle that follows a noun ("a movie **written** by X", "the films **directed** by Y")."""
    return word.endswith("ed") or word in IRREGULAR_PARTICIPLES


def phrases_of(words: Sequence[str], covered: Sequence[bool], no_start: Sequence[bool] = ()) -> tuple[str, ...]:
    """The 1–3-word runs of ``words`` outside ``covered`` that start with a content word (not a
    stopword, not marked in ``no_start``), in order, without repeats."""
    clean = _clean_words(words)
    blocked = list(no_start) or [False] * len(words)
    out: dict[str, None] = {}
    for start, word in enumerate(clean):
        if covered[start] or blocked[start] or not word or word in STOPWORDS:
            continue
        for n in range(1, MAX_PHRASE_WORDS + 1):
            end = start + n
            if end > len(words) or any(covered[start:end]) or not all(clean[start:end]):
                break
            out.setdefault(" ".join(clean[start:end]), None)
    return tuple(out)


def read_question(question: str, lookup: Callable[[str], int | None],
                  common_words: Collection[str] = frozenset()) -> QuestionReading:
    """Read ``question``; ``lookup`` maps a :func:`normalize_name`-d text to an entity id (or ``None``).

    A one-word mention with no capital letter is a name (:attr:`Mention.named`) when it is an identifier
    (``thai_baht``: words joined by underscores), or when the whole question is in lower case — so that
    letter case says nothing (``what currency do they use in abidjan ?``, PathQuestion's style and many a
    user's) — names no entity otherwise, and the word is not in ``common_words``: the words a KG's
    questions are written with (the examples' questions, relation and type names), which name entities
    only by accident (MetaQA has films called *Actors*, *Director*, *Fall* and *Star*)."""
    words = question.split()
    mentions = _link(words, lookup)
    # in lower case, a one-word name stands for the entity only where nothing else in the question does
    lower_case = not any(c.isupper() for c in question) and not any(m.confident for m in mentions)
    mentions = [_as_named(m, lower_case, common_words) for m in mentions]
    covered = [False] * len(words)
    for m in mentions:
        if m.confident:
            covered[m.start:m.end] = [True] * m.words
    return QuestionReading(question, tuple(words), tuple(mentions), phrases_of(words, covered))
