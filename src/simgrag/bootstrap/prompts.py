"""The bootstrap's LLM prompts and the reading of their answers.

1. :func:`question_messages`: several natural questions for one sampled subgraph, shown as its pattern
   (JSON ``{"questions": [...]}``), read by :func:`read_questions`, screened by :func:`screen_question`;
   for a chain, :func:`describe_messages` first turns its middle into a noun phrase, one hop at a time
   (``{"description": "the countries bordering Kuwait"}``, :func:`read_description`), and the question
   is asked about the last hop from there;
2. :func:`kind_messages`: what kind of thing the entities at one end of a relation are (``{"kind":
   "country"}``), read by :func:`read_kind`;
3. :func:`alias_messages`: everyday phrases for a relation (``{"phrases": [...]}``), read by
   :func:`read_phrases`; :func:`role_messages`: the nouns people call a relation's tail, asked as a
   blank ("Portugal is Spain's ___" → ``{"nouns": ["neighbour"]}``), read by :func:`read_phrases` too;
4. for learning at index time (:mod:`simgrag.bootstrap.learn`), batched prompts whose worked examples
   are about no KG's domain (clubs and recipes: a small model copies its demo's words, and a movie demo
   typed a company KG's mentees as actors): :func:`kind_batch_messages` — the kinds of several groups
   of names (the ends of relations) in one call (``{"1": "person", "2": "club", …}``, read by
   :func:`read_kind_batch`) — and :func:`question_batch_messages` — questions for several sampled
   subgraphs in one call (``{"1 Alice Brown": ["…", "…"], "2 …": […]}``, read by :func:`read_question_batch`,
   which also reads a list, a cut-off reply or stray text).

LLM output is data: it is parsed as JSON (the first ``{…}`` object in the text) or, failing that, as
quoted strings or lines; it is never evaluated. Unusable output reads as nothing (the caller records
why), not as an error.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simgrag.bootstrap.sample import Sample
from simgrag.index.directory import relation_text
from simgrag.llm.base import ChatMessage
from simgrag.pattern.graph import Pattern, type_hint

__all__ = ["DEMO_PHRASES", "AskedPattern", "alias_messages", "describe_messages", "described_pattern",
           "kind_batch_messages", "kind_messages", "kind_role", "question_batch_messages", "question_messages",
           "read_description", "read_kind", "read_kind_batch", "read_phrases", "read_question_batch",
           "read_questions", "render_pattern", "respell", "role_messages", "screen_question"]

_QUESTION_SYSTEM = ("You write the questions that real people type to ask a knowledge graph about its facts. "
                    "Answer with JSON only.")
_STYLE = ("Make them different from each other and natural, the way people really type: a plain question, a "
          "request (\"Tell me …\", \"List …\", \"Give me …\"), a short casual one; say the relations in everyday "
          "words rather than copying the relation names.")
_WORD = re.compile(r"[\w']+")
_TYPE_WORD = re.compile(r"^[a-z][a-z \-]{0,30}$")


def _quoted(names: Sequence[str]) -> str:
    return " and ".join(f'"{n}"' for n in names)


@dataclass(frozen=True)
class _Demo:
    """A worked example of the question prompt for one shape (movies: no KG's own domain)."""

    triples: tuple[tuple[str, str, str], ...]
    questions: tuple[str, ...]


_DEMOS = {
    "1hop": _Demo((("Titanic", "directed by", "UNKNOWN director 1"),),
                  ("Who directed Titanic?", "Tell me the director of Titanic.", "titanic director?")),
    "2hop": _Demo((("Titanic", "directed by", "UNKNOWN director 1"), ("UNKNOWN movie 1", "directed by",
                                                                       "UNKNOWN director 1")),
                  ("Which movies have the same director as Titanic?", "What else did the director of Titanic make?",
                   "films by the guy who directed Titanic")),
    "3hop": _Demo((("Titanic", "starred actors", "UNKNOWN actor 1"), ("UNKNOWN movie 1", "starred actors",
                                                                       "UNKNOWN actor 1"),
                   ("UNKNOWN movie 1", "release year", "UNKNOWN year 1")),
                  ("When did the other films with the actors of Titanic come out?",
                   "Release years of movies starring Titanic's cast?",
                   "In which years were movies with the Titanic actors released?")),
    "star": _Demo((("UNKNOWN movie 1", "directed by", "Christopher Nolan"),
                   ("UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio")),
                  ("Which Christopher Nolan movie has Leonardo DiCaprio in it?",
                   "Name the film Christopher Nolan directed with Leonardo DiCaprio.",
                   "leonardo dicaprio movie by christopher nolan")),
    "described": _Demo((("the movies directed by James Cameron", "release year", "UNKNOWN year 1"),),
                       ("When were the movies directed by James Cameron released?",
                        "Tell me the release years of the movies directed by James Cameron.",
                        "the movies directed by James Cameron came out in which years?")),
    "conjunction": _Demo((("UNKNOWN movie 1", "directed by", "Christopher Nolan"),
                          ("UNKNOWN movie 1", "starred actors", "Leonardo DiCaprio"),
                          ("UNKNOWN movie 1", "release year", "UNKNOWN year 1")),
                         ("When did the Christopher Nolan film with Leonardo DiCaprio come out?",
                          "Tell me the release year of the movie Christopher Nolan made with Leonardo DiCaprio.",
                          "christopher nolan + leonardo dicaprio movie, what year?")),
}


def render_pattern(triples: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """The pattern as the question prompt shows it — ``UNKNOWN country 1`` as ``[country 1]``, the asked
    node as ``[answer: city]`` — and its named entities."""
    pattern = Pattern.from_triples(triples)
    asked = pattern.asked_node()
    labels = [f"[answer: {n.type_hint or 'entity'}]" if i == asked else f"[{n.text[len('UNKNOWN '):]}]" if n.unknown
              else n.text for i, n in enumerate(pattern.nodes)]
    lines = [f"- {labels[e.source]} | {e.relation} | {labels[e.target]}" for e in pattern.edges]
    return "\n".join(lines), [n.text for n in pattern.nodes if not n.unknown]


def _ask_questions(triples: Sequence[Sequence[str]], answers: int, n: int, *, described: bool = False) -> str:
    shown, named = render_pattern(triples)
    many = f" (it has {answers} answers in the knowledge graph)" if answers > 1 else ""
    between = (" Say each other [bracketed] thing through its facts (\"the director of …\", \"the movies that … "
               "starred in\"), never by a name.") if len(triples) > 1 else ""
    names = (f"contains {_quoted(named)} word for word (never replace it by the name of what it describes)"
             if described else f"names {_quoted(named)} exactly as written here")
    return (f"A question pattern over a knowledge graph (head | relation | tail):\n{shown}\n\n"
            f"Write {n} different questions whose answer is [answer]{many}. Each {names} and goes through every "
            f"line above.{between}\n{_STYLE}\n"
            'Answer with JSON only: {"questions": ["…", "…"]}')


def question_messages(shape: str, triples: Sequence[Sequence[str]], answers: int, n: int) -> list[ChatMessage]:
    """The prompt for ``n`` questions with the pattern ``triples`` (``answers`` of them in the KG): the
    pattern with its unknowns in brackets (the sample's other entities are not shown: a question cannot
    name them by copying), after a worked example of the same ``shape`` (``described``: one triple whose
    named end is a description, see :func:`describe_messages`)."""
    demo, described = _DEMOS.get(shape, _DEMOS["1hop"]), shape == "described"
    return [ChatMessage("system", _QUESTION_SYSTEM),
            ChatMessage("user", _ask_questions(demo.triples, 1, 3, described=described)),
            ChatMessage("assistant", json.dumps({"questions": list(demo.questions)})),
            ChatMessage("user", _ask_questions(triples, answers, n, described=described))]


def _describe(fact: Sequence[str], anchor: str) -> str:
    shown = " | ".join(f"[{t[len('UNKNOWN '):]}]" if t.startswith("UNKNOWN ") else t for t in fact)
    role = "head" if fact[0].startswith("UNKNOWN ") else "tail"
    thing = f"[{fact[0 if role == 'head' else 2][len('UNKNOWN '):]}]"
    return (f"A fact of a knowledge graph (head | relation | tail):\n- {shown}\n\nDescribe {thing}, the {role} of "
            f'this fact (not "{anchor}"), in a few everyday words through this fact, keeping "{anchor}" exactly as '
            'written; no other name.\nAnswer with JSON only: {"description": "…"}')


def describe_messages(fact: Sequence[str], anchor: str) -> list[ChatMessage]:
    """The prompt for a noun phrase that says what the unknown end of ``fact`` is through its other end
    ``anchor`` (an entity, or an earlier description): how a chain's middle enters a question
    ("the countries bordering Kuwait"). Two worked examples first, one per direction."""
    return [ChatMessage("system", "You describe things through their facts. Answer with JSON only."),
            ChatMessage("user", _describe(("UNKNOWN movie 1", "directed by", "James Cameron"), "James Cameron")),
            ChatMessage("assistant", '{"description": "the movies directed by James Cameron"}'),
            ChatMessage("user", _describe(("the movies directed by James Cameron", "starred actors", "UNKNOWN actor 1"),
                                          "the movies directed by James Cameron")),
            ChatMessage("assistant", '{"description": "the actors in the movies directed by James Cameron"}'),
            ChatMessage("user", _describe(fact, anchor))]


def read_description(text: str, named: str) -> str | None:
    """The description in the LLM's answer when it still names the chain's entity ``named`` and is at most
    25 words, else ``None`` (whether it describes the right thing, the retrieval check decides)."""
    value = (_json_object(text) or {}).get("description")
    if not isinstance(value, str):
        return None
    value = " ".join(value.split()).rstrip(".")
    return value if _contains(value, named) and len(value.split()) <= 25 else None


def _relation_prompt(relation: str, examples: Sequence[tuple[str, str]]) -> str:
    shown = "; ".join(f"{h} → {t}" for h, t in examples)
    return f'In a knowledge graph the relation "{relation}" links, for example: {shown}.\n'


#: the worked example of the alias and role prompts: about no KG's domain (clubs), as learning's are — with a movie
#: demo ("directed by": director, filmmaker) the 1.5B model gave a genealogy KG's ``spouse`` "director" and
#: "producer", its ``nationality`` "filmmaker"
_ALIAS_DEMO = "member of"
_ALIAS_DEMO_PAIRS = [("Alice Brown", "Chess Club"), ("Omar Haddad", "Rowing Club")]
_ALIAS_DEMO_PHRASES = ("belongs to", "joined", "member", "in the club", "part of", "signed up for")
_ROLE_DEMO_NOUNS = ("club",)
#: the demo's own words: a phrase that is one of them was copied, not written for the relation asked
DEMO_PHRASES = frozenset((*_ALIAS_DEMO_PHRASES, *_ROLE_DEMO_NOUNS))
_KIND_DEMO = ("Titanic", "Heat", "Avatar", "The Matrix", "Casablanca")


def _kind_prompt(names: Sequence[str]) -> str:
    return ("What kind of thing are all of these? " + "; ".join(names) + "\n"
            'Answer with one or two common lowercase words, as JSON only: {"kind": "…"}')


def kind_messages(names: Sequence[str]) -> list[ChatMessage]:
    """The prompt asking what kind of thing ``names`` (entities at one end of a relation) are."""
    return [ChatMessage("system", "You describe knowledge graphs. Answer with JSON only."),
            ChatMessage("user", _kind_prompt(_KIND_DEMO)), ChatMessage("assistant", '{"kind": "movie"}'),
            ChatMessage("user", _kind_prompt(names))]


def _alias_ask(n: int) -> str:
    return (f"Write {n} different short phrases (one to four words) that people use for this relation in "
            "questions: synonyms, everyday verbs and nouns, other word orders. Only the relation's words: no "
            "names, no whole questions.\n"
            'Answer with JSON only: {"phrases": ["…", "…"]}')


def alias_messages(relation: str, examples: Sequence[tuple[str, str]], n: int) -> list[ChatMessage]:
    """The prompt asking for ``n`` everyday phrases that mean ``relation`` (one worked example first)."""
    return [ChatMessage("system", "You know the words people use for facts. Answer with JSON only."),
            ChatMessage("user", _relation_prompt(_ALIAS_DEMO, _ALIAS_DEMO_PAIRS) + _alias_ask(6)),
            ChatMessage("assistant", json.dumps({"phrases": list(_ALIAS_DEMO_PHRASES)})),
            ChatMessage("user", _relation_prompt(relation, examples) + _alias_ask(n))]


def _role_ask(pairs: Sequence[tuple[str, str]]) -> str:
    blanks = "; ".join(f'"{tail} is {head}\'s ___"' for head, tail in pairs)
    return (f"Fill in the blank with the noun people use, one or two words: {blanks}.\n"
            'Answer with JSON only: {"nouns": ["…"]}')


def role_messages(examples: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    """The prompt asking for the noun people call a relation's tail, given its (head, tail) ``examples``
    as blanks ("Portugal is Spain's ___"): everyday words the paraphrase prompt misses ("neighbour" for a
    ``borders`` relation, where the 1.5B model paraphrases only "bordering", "adjacent to")."""
    return [ChatMessage("system", "You know the words people use for facts. Answer with JSON only."),
            ChatMessage("user", _role_ask(_ALIAS_DEMO_PAIRS)),
            ChatMessage("assistant", json.dumps({"nouns": list(_ROLE_DEMO_NOUNS)})),
            ChatMessage("user", _role_ask(examples))]


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _strings(text: str, key: str) -> list[str]:
    """The strings of ``key`` in the text's JSON object; else its quoted strings; else its lines."""
    found = _json_object(text)
    if found is not None and isinstance(found.get(key), list):
        items = [s for s in found[key] if isinstance(s, str)]
    else:
        items = re.findall(r'"([^"\n]{3,})"', text) or text.splitlines()
        items = [s for s in items if s.strip().lower() not in (key, "questions", "phrases")]
    out: dict[str, str] = {}
    for item in items:
        clean = " ".join(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", item).split()).strip("\"'")
        if clean and not clean.startswith(("{", "}", "[", "]")):
            out.setdefault(clean.lower(), clean)
    return list(out.values())


def read_questions(text: str, n: int) -> list[str]:
    """Up to ``n`` distinct questions from the LLM's answer (5 to 300 characters each)."""
    return [q for q in _strings(text, "questions") if 5 <= len(q) <= 300][:n]


_QUESTION_WORDS = frozenset(("what", "which", "who", "whom", "whose", "where", "when", "how", "why", "is", "are",
                             "does", "do", "did", "can"))


def read_phrases(text: str, n: int, key: str = "phrases") -> list[str]:
    """Up to ``n`` distinct phrases of one to four words from the LLM's answer (the list under ``key``),
    lower case; whole questions (a ``?``, a question word first) are not phrases."""
    out: dict[str, None] = {}
    for phrase in _strings(text, key):
        words = _WORD.findall(phrase.lower())
        if 1 <= len(words) <= 4 and "?" not in phrase and words[0] not in _QUESTION_WORDS:
            out.setdefault(" ".join(words), None)
    return list(out)[:n]


def read_kind(text: str) -> str | None:
    """The kind word of the LLM's answer; ``None`` when it is missing or not a short lowercase phrase."""
    return _kind_word((_json_object(text) or {}).get("kind"))


def _kind_word(value: Any) -> str | None:
    """``value`` as a kind (one or two lowercase words), ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    value = " ".join(value.lower().split())
    return value if _TYPE_WORD.match(value) and len(value.split()) <= 2 else None


def _normal(text: str) -> str:
    """Lower-case words, a possessive ``'s`` dropped ("Peru's" names "Peru")."""
    return " ".join(re.findall(r"\w+", re.sub(r"['’]s\b", "", text.lower())))


def _contains(text: str, name: str) -> bool:
    """``name`` occurs in ``text`` as whole words (case, punctuation and spacing ignored)."""
    needle = _normal(name)
    return bool(needle) and f" {needle} " in f" {_normal(text)} "


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` case-folded with its accents dropped, and for each folded character its index in ``text``."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        folded = [c for c in unicodedata.normalize("NFKD", ch.casefold()) if not unicodedata.combining(c)]
        out.extend(folded)
        where.extend([i] * len(folded))
    return "".join(out), where


def respell(question: str, names: Sequence[str]) -> str:
    """``question`` with each of ``names`` it writes another way spelt as the KG does: "Somali Shilling",
    "Saint Barthélemy", "saint denis" become ``somali_shilling``, ``saint_barthelemy``, ``saint-denis``.
    The words must be the name's own (case, accents, and ``_`` / ``-`` / spaces between them aside; other
    punctuation as written): an example then reads as the KG's users write its entities, and the screen
    sees the entity named."""
    respelt: list[tuple[int, int]] = []  # spans already written the KG's way: not matched again
    for name in sorted(names, key=len, reverse=True):
        parts = [p for p in re.split(r"[\s_\-]+", _folded(name)[0]) if p]
        if not parts:
            continue
        written = [m.span() for m in re.finditer(r"(?<!\w)" + re.escape(name) + r"(?!\w)", question, re.IGNORECASE)]
        if written:  # spelt the KG's way already; a shorter name is not looked for inside it (":E" holds "E")
            respelt += written
            continue
        folded, where = _folded(question)
        pattern = r"(?<!\w)" + r"[\s_\-]+".join(map(re.escape, parts)) + r"(?!\w)"
        for found in re.finditer(pattern, folded):
            start, end = where[found.start()], where[found.end() - 1] + 1
            if _splits_a_character(where, found.start(), found.end()) or any(start < b and a < end
                                                                             for a, b in respelt):
                continue
            question = question[:start] + name + question[end:]
            shift = len(name) - (end - start)
            respelt = [(a + shift, b + shift) if a >= end else (a, b) for a, b in respelt]
            respelt.append((start, start + len(name)))
            break
    return question


def _splits_a_character(where: Sequence[int], start: int, end: int) -> bool:
    """Whether the folded span ``start:end`` begins or ends inside one original character that folded to
    several ("¼" → "1⁄4": a name "1" is not in it; found by the respelling property test)."""
    return ((start > 0 and where[start - 1] == where[start])
            or (end < len(where) and where[end] == where[end - 1]))


def screen_question(question: str, sample: Sample) -> str | None:
    """Why ``question`` cannot be an example of ``sample`` (``None``: it can): it must name each named
    entity as written and none of the others (an entity name inside a named one does not count)."""
    for name in sample.named_entities:
        if not _contains(question, name):
            return f"does not name {name!r}"
    named = sample.named_entities
    for name in sample.hidden_entities:
        if len(_normal(name)) >= 3 and _contains(question, name) and not any(_contains(n, name) for n in named):
            return f"names {name!r}, which it should ask about"
    return None


# -- learning at index time: several relations or samples per call, worked examples of no KG's domain ---------
_KIND_BATCH_SYSTEM = "You name the kinds of things a knowledge graph holds. Answer with JSON only."
#: groups of names from unrelated everyday domains (a small model copies its demo's words: no KG's own domain),
#: two of them with names that hold a word that is not their kind ("Orbit Software" is a company)
_KIND_BATCH_DEMO: tuple[tuple[str, ...], ...] = (
    ("Alice Brown", "Tom Reed", "Maya Lin"), ("Greenleaf Bakery", "Orbit Software", "Tidewater Foods"),
    ("flour", "egg", "avocado"), ("Spring Fair", "Chess Night", "Charity Run"))
_KIND_BATCH_ANSWER = {"1": "person", "2": "company", "3": "ingredient", "4": "event"}
#: what the demo's groups are in their made-up graph (a group's line says where its names stand: fictional or coded
#: names alone — "Grauwald; Duncaster" — were called a "profession" by the 1.5B model, the places of birth they are)
_KIND_BATCH_DEMO_ROLES = ("X has member them; they works for X", "X works for them", "X uses ingredient them",
                          "X holds event them")
#: characters of an entity name a prompt shows
_SHOWN_NAME = 60


def _short(name: str) -> str:
    name = " ".join(name.split())
    return name if len(name) <= _SHOWN_NAME else name[:_SHOWN_NAME - 1] + "…"


def _kind_batch_prompt(groups: Sequence[Sequence[str]], roles: Sequence[str] | None = None) -> str:
    lines = [f"{i}. " + "; ".join(_short(name) for name in names)
             + (f" ({roles[i - 1]})" if roles is not None and roles[i - 1] else "")
             for i, names in enumerate(groups, start=1)]
    keys = ", ".join(f'"{i}": "…"' for i in range(1, len(groups) + 1))
    return ("Groups of things from a knowledge graph:\n" + "\n".join(lines)
            + "\n\nWhat kind of thing is each group? One or two common lowercase words per group: the kind the "
              "things are, not a word copied from their names.\n" + f"Answer with JSON only: {{{keys}}}")


def kind_batch_messages(groups: Sequence[Sequence[str]], roles: Sequence[str] | None = None) -> list[ChatMessage]:
    """The prompt asking what kind of thing each of ``groups`` is (the entity names at one end of a
    relation: a list of names is easier for a small model than a relation's direction), several groups in
    one call, after a worked example about clubs and recipes. ``roles``: per group, where its names stand in the
    KG in a few words (:func:`kind_role`), shown beside them."""
    with_roles = roles is not None
    return [ChatMessage("system", _KIND_BATCH_SYSTEM),
            ChatMessage("user", _kind_batch_prompt(_KIND_BATCH_DEMO, _KIND_BATCH_DEMO_ROLES if with_roles else None)),
            ChatMessage("assistant", json.dumps(_KIND_BATCH_ANSWER), cache_after=True),
            ChatMessage("user", _kind_batch_prompt(groups, roles))]


def kind_role(ends: Sequence[tuple[str, int]], shown: int = 2) -> str:
    """Where a group's names stand, from its relation ends (``(relation, 0)``: heads, ``(relation, 1)``:
    tails), tails first, as "X <relation> them" / "they <relation> X": "X place of birth them; X place of death
    them" (the same wording for a relation named by a noun or by a verb: "X reports to them")."""
    tails = [f"X {relation_text(r)} them" for r, side in ends if side == 1]
    heads = [f"they {relation_text(r)} X" for r, side in ends if side == 0]
    return "; ".join((tails + heads)[:shown])


def read_kind_batch(text: str, n: int) -> dict[int, str]:
    """Per group number (1 to ``n``), the kind of the LLM's answer to :func:`kind_batch_messages`; a group
    without a usable kind (one or two lowercase words) is missing. Never raises."""
    out: dict[int, str] = {}
    for i, value in _numbered(_json_value(text), n).items():
        kind = _kind_word(value.get("kind") if isinstance(value, Mapping) else value)
        if kind is not None:
            out[i] = kind
    return out


_QUESTION_BATCH_SYSTEM = ("You write the questions that real people type to ask a knowledge graph about its facts. "
                          "Answer with JSON only.")
@dataclass(frozen=True)
class AskedPattern:
    """One sample as a batched question prompt shows it: ``triples`` (a middle node may stand as its
    description: :func:`described_pattern`), ``answers`` in the KG, and the entity ``names`` its questions
    must say (default: the named nodes of ``triples``)."""

    triples: tuple[tuple[str, str, str], ...]
    answers: int = 1
    names: tuple[str, ...] | None = None

    def named(self) -> list[str]:
        return list(self.names) if self.names is not None else render_pattern(self.triples)[1]


def _unknown_kind(label: str) -> str:
    """``"UNKNOWN team member 2"`` → ``"team member"`` (:func:`~simgrag.pattern.graph.type_hint`), else "thing"."""
    return type_hint(label) or "thing"


def _described(label: str, facts: Sequence[Sequence[str]]) -> str:
    """``label`` (an unknown node) through its ``facts``: "the department that Nikolai Kowalski works in",
    "the person that contributes to Churn Radar and reports to Farid Abbott"."""
    said = [f"{r} {t}" if h == label else f"{h} {r}" for h, r, t in facts]
    return f"the {_unknown_kind(label)} that " + " and ".join(said)


def described_pattern(triples: Sequence[Sequence[str]]) -> tuple[tuple[str, str, str], ...]:
    """A sample's pattern as one line for the question prompt when it has a middle node: the middle replaced
    by its description through the facts before the last ("- the department that Nikolai Kowalski works in |
    located in | [answer: building]"). A small model asked for a two-hop pattern line by line asks its first
    hop; given the first hops as words it keeps them. Chains describe their middles one after the other; a
    pattern whose last triple does not pass through a described middle is shown as it is."""
    shown = [tuple(t) for t in triples]
    if len(shown) < 2:
        return tuple((str(h), str(r), str(t)) for h, r, t in shown)
    pattern = Pattern.from_triples(shown)
    asked_at = pattern.asked_node()
    asked = pattern.nodes[asked_at].text if asked_at is not None else None
    *facts, (h, r, t) = shown
    middles = [x for x in (h, t) if x.startswith("UNKNOWN ") and x != asked and any(x in (f[0], f[2]) for f in facts)]
    if len(middles) != 1:
        return tuple((str(a), str(b), str(c)) for a, b, c in shown)
    middle = middles[0]
    own = [f for f in facts if middle in (f[0], f[2])]
    rest = [f for f in facts if f not in own]
    for other in (x for f in own for x in (f[0], f[2]) if x != middle and x.startswith("UNKNOWN ")):
        inner = described_pattern([*[f for f in rest if other in (f[0], f[2])], *own])[-1]  # a chain's earlier hop
        text = inner[0] if inner[0] != middle else inner[2]
        own = [tuple(text if x == other else x for x in f) for f in own]
    text = _described(middle, own)
    return ((text if h == middle else str(h)), str(r), (text if t == middle else str(t))),


#: a worked example of each default shape (1 hop, 2 hops, a conjunction) about clubs and recipes
_QUESTION_BATCH_DEMO = (
    AskedPattern((("Alice Brown", "member of", "UNKNOWN club 1"),)),
    AskedPattern(described_pattern((("Alice Brown", "member of", "UNKNOWN club 1"),
                                    ("UNKNOWN club 1", "meets in", "UNKNOWN room 1"))), names=("Alice Brown",)),
    AskedPattern(described_pattern((("UNKNOWN person 1", "member of", "Chess Club"),
                                    ("UNKNOWN person 1", "favourite dish", "pancake"),
                                    ("UNKNOWN person 1", "plays", "UNKNOWN instrument 1"))), 2,
                 names=("Chess Club", "pancake")),
)
_QUESTION_BATCH_ANSWER = (
    ["Which club is Alice Brown a member of?", "alice brown's club?"],
    ["Where does the club Alice Brown is a member of meet?", "Tell me the room where Alice Brown's club meets."],
    ["Which instruments does the Chess Club member whose favourite dish is pancake play?",
     "List the instruments played by Chess Club members who love pancake."],
)


def _pattern_keys(patterns: Sequence[AskedPattern]) -> list[str]:
    """The answer's key of each pattern: its number and its names ("2 Alice Brown"): writing the names
    just before its questions keeps a small model on that pattern's names, not its neighbour's."""
    return [f"{i} " + " & ".join(p.named()) for i, p in enumerate(patterns, start=1)]


def _question_batch_prompt(patterns: Sequence[AskedPattern], n: int) -> str:
    blocks = []
    for i, asked in enumerate(patterns, start=1):
        shown, _ = render_pattern(asked.triples)
        named = asked.named()
        many = f"; {asked.answers} answers in the knowledge graph" if asked.answers > 1 else ""
        blocks.append(f"Pattern {i} (name{'s' if len(named) > 1 else ''}: {_quoted(named)}{many}):\n{shown}")
    keys = ", ".join(json.dumps(key) + ": [" + ", ".join(['"…"'] * n) + "]" for key in _pattern_keys(patterns))
    return ("Question patterns over a knowledge graph, each a fact (head | relation | tail) or a few. In each, "
            "[answer: kind] is what the question asks for; a thing written as \"the … that …\" is said through "
            "those facts, in everyday words, and any other [bracketed] thing too, never by a name.\n\n"
            + "\n".join(blocks)
            + f"\n\nFor each pattern write {n} different questions whose answer is its [answer]. Each question of a "
              "pattern names that pattern's own names exactly as written, and says every fact of that pattern: a "
              "question that leaves a fact out is wrong. " + _STYLE + f"\nAnswer with JSON only: {{{keys}}}")


def question_batch_messages(patterns: Sequence[AskedPattern], n: int) -> list[ChatMessage]:
    """The prompt asking ``n`` questions for each of ``patterns`` in one call, after a worked example of each
    default shape about clubs and recipes; the answer is read by :func:`read_question_batch`."""
    demo = dict(zip(_pattern_keys(_QUESTION_BATCH_DEMO), _QUESTION_BATCH_ANSWER, strict=True))
    return [ChatMessage("system", _QUESTION_BATCH_SYSTEM),
            ChatMessage("user", _question_batch_prompt(_QUESTION_BATCH_DEMO, 2)),
            ChatMessage("assistant", json.dumps(demo), cache_after=True),
            ChatMessage("user", _question_batch_prompt(patterns, n))]


def read_question_batch(text: str, patterns: int, per_pattern: int) -> dict[int, list[str]]:
    """Per pattern number (1 to ``patterns``), up to ``per_pattern`` distinct questions (5 to 300
    characters) of the LLM's answer to :func:`question_batch_messages`: an object keyed by number (or a
    list in order, or one wrapped in ``{"questions": …}``); a reply cut off mid-JSON gives the questions
    of the complete keys it holds. Never raises: unreadable output reads as nothing."""
    value = _json_value(text)
    numbered = _numbered(value, patterns) if value is not None else _salvaged(text, patterns)
    out: dict[int, list[str]] = {}
    for i, item in numbered.items():
        questions = _clean_questions(_question_items(item))[:per_pattern]
        if questions:
            out[i] = questions
    return out


def _json_value(text: str) -> Any:
    """The JSON object or list in ``text`` (from its first ``{`` or ``[`` to the matching last bracket),
    ``None`` when there is none that parses."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    if end <= start:
        return None
    try:
        return json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return None


def _numbered(value: Any, n: int, *, unwrap: bool = True) -> dict[int, Any]:
    """1-based item number (at most ``n``) → item: an object keyed ``"1"``, ``"pattern 2"``…, a list in
    order, or either wrapped in a one-key object."""
    if isinstance(value, list):
        return {i: item for i, item in enumerate(value[:n], start=1)}
    if not isinstance(value, Mapping):
        return {}
    out: dict[int, Any] = {}
    for key, item in value.items():
        digits = re.search(r"\d{1,4}", str(key))
        if digits is not None and 1 <= int(digits.group()) <= n:
            out.setdefault(int(digits.group()), item)
    if not out and unwrap and len(value) == 1:
        return _numbered(next(iter(value.values())), n, unwrap=False)
    return out


def _question_items(item: Any) -> list[str]:
    """The question strings of one pattern's item: a list of strings, one string, or an object holding them."""
    if isinstance(item, str):
        return [item]
    if isinstance(item, Mapping):
        item = item.get("questions", item.get("question", []))
        return [item] if isinstance(item, str) else [q for q in item if isinstance(q, str)] if isinstance(
            item, list) else []
    if isinstance(item, list):
        return [q for q in item if isinstance(q, str)]
    return []


_KEYED_LIST = re.compile(r'"(\d{1,4})(?:[^"\\\n]|\\.){0,300}"\s*:\s*\[')
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.){5,300})"')


def _salvaged(text: str, n: int) -> dict[int, list[str]]:
    """The questions of a reply that is not whole JSON (cut off by the token limit, chatter around it):
    each ``"k": [`` key's complete quoted strings up to the next key."""
    keys = [m for m in _KEYED_LIST.finditer(text) if 1 <= int(m.group(1)) <= n]
    out: dict[int, list[str]] = {}
    for i, m in enumerate(keys):
        segment = text[m.end(): keys[i + 1].start() if i + 1 < len(keys) else len(text)]
        out.setdefault(int(m.group(1)), [_unescaped(s) for s in _QUOTED.findall(segment)])
    return out


def _unescaped(quoted: str) -> str:
    try:
        value = json.loads(f'"{quoted}"')
    except ValueError:
        return quoted
    return value if isinstance(value, str) else quoted


def _clean_questions(items: Sequence[str]) -> list[str]:
    out: dict[str, str] = {}
    for item in items:
        clean = " ".join(item.split()).strip("\"'")
        if 5 <= len(clean) <= 300:
            out.setdefault(clean.lower(), clean)
    return list(out.values())
