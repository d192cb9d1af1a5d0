"""The bootstrap's three LLM prompts and the reading of their answers.

1. :func:`question_messages`: several natural questions for one sampled subgraph (JSON
   ``{"questions": [...]}``), read by :func:`read_questions`, screened by :func:`screen_question`;
2. :func:`kind_messages`: what kind of thing the entities at one end of a relation are (``{"kind":
   "country"}``), read by :func:`read_kind`;
3. :func:`alias_messages`: everyday phrases for a relation (``{"phrases": [...]}``), read by
   :func:`read_phrases`.

LLM output is data: it is parsed as JSON (the first ``{…}`` object in the text) or, failing that, as
quoted strings or lines; it is never evaluated. Unusable output reads as nothing (the caller records
why), not as an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simgrag.bootstrap.sample import Sample
from simgrag.llm.base import ChatMessage

__all__ = ["alias_messages", "kind_messages", "question_messages", "read_kind", "read_phrases", "read_questions",
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

    facts: tuple[tuple[str, str, str], ...]
    named: tuple[str, ...]
    answer: str
    questions: tuple[str, ...]


_DEMOS = {
    "1hop": _Demo((("Titanic", "directed by", "James Cameron"),), ("Titanic",), "James Cameron",
                  ("Who directed Titanic?", "Tell me the director of Titanic.", "titanic director?")),
    "2hop": _Demo((("Titanic", "directed by", "James Cameron"), ("Avatar", "directed by", "James Cameron")),
                  ("Titanic",), "Avatar",
                  ("Which movies have the same director as Titanic?", "What else did the director of Titanic make?",
                   "films by the guy who directed Titanic")),
    "3hop": _Demo((("Titanic", "starred actors", "Kate Winslet"), ("The Reader", "starred actors", "Kate Winslet"),
                   ("The Reader", "release year", "2008")), ("Titanic",), "2008",
                  ("When did the other films with the actors of Titanic come out?",
                   "Release years of movies starring Titanic's cast?",
                   "In which years were movies with the Titanic actors released?")),
    "star": _Demo((("Inception", "directed by", "Christopher Nolan"),
                   ("Inception", "starred actors", "Leonardo DiCaprio")), ("Christopher Nolan", "Leonardo DiCaprio"),
                  "Inception", ("Which Christopher Nolan movie has Leonardo DiCaprio in it?",
                                "Name the film Christopher Nolan directed with Leonardo DiCaprio.",
                                "leonardo dicaprio movie by christopher nolan")),
    "conjunction": _Demo((("Inception", "directed by", "Christopher Nolan"),
                          ("Inception", "starred actors", "Leonardo DiCaprio"), ("Inception", "release year", "2010")),
                         ("Christopher Nolan", "Leonardo DiCaprio"), "2010",
                         ("When did the Christopher Nolan film with Leonardo DiCaprio come out?",
                          "Tell me the release year of the movie Christopher Nolan made with Leonardo DiCaprio.",
                          "christopher nolan + leonardo dicaprio movie, what year?")),
}


def _ask_questions(facts: Sequence[tuple[str, str, str]], named: Sequence[str], answer: str, answers: int,
                   hidden: Sequence[str], n: int) -> str:
    shown = "\n".join(f"- {h} | {r} | {t}" for h, r, t in facts)
    asked = f'"{answer}"' + (f" (one of {answers} answers)" if answers > 1 else "")
    never = ", ".join(f'"{e}"' for e in dict.fromkeys([answer, *hidden]))
    path = (" The entities you may not write are part of the question: describe them by their facts (\"the "
            "director of …\", \"the movies that … starred in\").") if len(facts) > 1 else ""
    return (f"Facts from the knowledge graph (head | relation | tail):\n{shown}\n\n"
            f"Write {n} different questions, each of which uses every fact above: it names "
            f"{_quoted(named)} exactly as written here and asks for {asked}. Never write {never} in a question."
            f"{path}\n{_STYLE}\n"
            'Answer with JSON only: {"questions": ["…", "…"]}')


def question_messages(sample: Sample, n: int) -> list[ChatMessage]:
    """The prompt for ``n`` questions about ``sample``: it names the named slots, asks for the answer
    slot, goes through every fact, and never names the other slots; a worked example of the same shape
    comes first."""
    demo = _DEMOS.get(sample.shape, _DEMOS["1hop"])
    hidden = [e for f in demo.facts for e in (f[0], f[2]) if e not in demo.named]
    return [ChatMessage("system", _QUESTION_SYSTEM),
            ChatMessage("user", _ask_questions(demo.facts, demo.named, demo.answer, 1, hidden, 3)),
            ChatMessage("assistant", json.dumps({"questions": list(demo.questions)})),
            ChatMessage("user", _ask_questions(sample.facts(), sample.named_entities, sample.answer,
                                               len(sample.answers), sample.hidden_entities, n))]


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


def read_phrases(text: str, n: int) -> list[str]:
    """Up to ``n`` distinct phrases of one to four words from the LLM's answer, lower case; whole
    questions (a ``?``, a question word first) are not phrases."""
    out: dict[str, None] = {}
    for phrase in _strings(text, "phrases"):
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
