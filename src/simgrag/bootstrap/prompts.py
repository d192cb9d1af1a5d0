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
   blank ("Portugal is Spain's ___" → ``{"nouns": ["neighbour"]}``), read by :func:`read_phrases` too.

LLM output is data: it is parsed as JSON (the first ``{…}`` object in the text) or, failing that, as
quoted strings or lines; it is never evaluated. Unusable output reads as nothing (the caller records
why), not as an error.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simgrag.bootstrap.sample import Sample
from simgrag.llm.base import ChatMessage
from simgrag.pattern.graph import Pattern

__all__ = ["alias_messages", "describe_messages", "kind_messages", "question_messages", "read_description",
           "read_kind", "read_phrases", "read_questions", "render_pattern", "respell", "role_messages",
           "screen_question"]

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


_DEMO_PAIRS = [("Titanic", "James Cameron"), ("Heat", "Michael Mann")]
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
            ChatMessage("user", _relation_prompt("directed by", _DEMO_PAIRS) + _alias_ask(6)),
            ChatMessage("assistant", '{"phrases": ["director", "directed", "filmmaker", "made by", "director of", '
                                     '"helmed by"]}'),
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
            ChatMessage("user", _role_ask(_DEMO_PAIRS)),
            ChatMessage("assistant", '{"nouns": ["director", "filmmaker"]}'),
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
    value = (_json_object(text) or {}).get("kind")
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
