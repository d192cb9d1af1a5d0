"""The English word lists of the grounding stage and of the answer's reading check, in one place.

Every rule that reads a question's *words* (not its embeddings) is English-specific, and these lists are
all of that knowledge: a KG asked in another language needs them replaced (or the word rules switched off by
the per-KG fit, :mod:`simgrag.grounding.fit`, which turns off what does not help on that KG's own questions).
Used by :mod:`simgrag.grounding.question` (reading a question), :mod:`simgrag.grounding.judge` and
:mod:`simgrag.answer.reading`.
"""

from __future__ import annotations

__all__ = ["APPOSITION_DETERMINERS", "AUXILIARIES", "COMPANION_PREPOSITIONS", "COPULAS", "IRREGULAR_PARTICIPLES",
           "JOIN_WORDS",
           "NOUN_PHRASE_DETERMINERS", "RELATION_PREPOSITIONS", "STEM_ENDINGS", "STOPWORDS", "VAGUE_FOCUS",
           "WH_WITHOUT_FOCUS", "WH_WORDS"]

#: words that do not start a relation phrase (they may sit inside one: "kinds of movies")
STOPWORDS = frozenset([
    "a", "an", "the", "of", "in", "on", "at", "by", "with", "for", "to", "from", "into", "onto", "as", "and", "or",
    "nor", "but", "if", "then", "than", "so", "such", "is", "are", "was", "were", "be", "been", "being", "am",
    "do", "does", "did", "done", "doing", "has", "have", "had", "having", "will", "would", "shall", "should",
    "can", "could", "may", "might", "must", "it", "its", "it's", "this", "that", "these", "those", "there", "here",
    "their", "theirs", "they", "them", "he", "him", "his", "she", "her", "hers", "we", "us", "our", "you", "your",
    "i", "me", "my", "mine", "who", "whom", "whose", "what", "which", "when", "where", "why", "how", "whatever",
    "whoever", "whichever", "also", "too", "very", "just", "only", "any", "some", "all", "each", "every", "both",
    "either", "neither", "no", "not", "please", "tell", "list", "show", "give", "name", "find", "let", "know",
    "want", "need", "looking", "look", "out", "up", "down", "over", "other", "others", "else", "same", "another",
    "i'm", "im", "someone", "somebody", "something", "anything", "anyone", "one", "ones", "thing", "things",
    "ever", "get", "got", "i'd", "id", "like", "wonder", "wondering",
])

#: question words after which the next content word says what is asked
WH_WORDS = frozenset(["who", "whom", "whose", "what", "which", "when", "where", "how"])
#: … except after these, where it does not ("when did the **movies** … come out")
VAGUE_FOCUS = frozenset(["kind", "kinds", "sort", "sorts", "type", "types"])
AUXILIARIES = frozenset(["did", "does", "do", "is", "are", "was", "were", "has", "have", "had", "can", "could",
                         "will", "would", "should", "may", "might"])
#: the copula (an apposition or a "who is X" question turns on it)
COPULAS = ("is", "are", "was", "were")
WH_WITHOUT_FOCUS = frozenset(["when", "where", "how"])
#: a "where/when" after a noun phrase that begins with one of these is relative ("the countries **where**
#: French is official"), not a question word
NOUN_PHRASE_DETERMINERS = frozenset(["the", "a", "an", "this", "that", "these", "those", "some", "every", "each"])
#: past participles that do not end in -ed (a noun phrase ends before one: "a movie **written** by X")
IRREGULAR_PARTICIPLES = frozenset(["written", "spoken", "made", "known", "seen", "shown", "given", "taken", "sung",
                                   "shot", "set", "told", "sold", "won", "done", "begun", "drawn", "chosen"])
#: a clause-final "who" after these asks for a companion of the subject, not for the word before them
#: ("X co-directed **movies** with who", "X is a co-star of who"); after "by" the verb names the answer's
#: relation ("… were **written** by who")
COMPANION_PREPOSITIONS = frozenset(["with", "of", "alongside", "beside", "besides", "to", "for", "from", "against"])

#: "the film X", "this country X": a word between one of these and a named entity describes the entity
#: ("that" is not one: "the countries **that border** Thailand" is a relative clause; "that film X" is
#: covered anyway when "film" names one of the examples' node types)
APPOSITION_DETERMINERS = frozenset({"the", "a", "an", "this"})

#: words that a pattern says by its shape: two triples meeting at one unknown node
JOIN_WORDS = frozenset({"share", "shares", "shared", "sharing", "common", "together", "co-star", "co-stars"})
#: endings that turn one word of a stem into another ("lead|s", "lead|er", "direct|or", "direct|ed"): the answer's
#: reading check takes two words as one stem when they differ only by these after a shared start
STEM_ENDINGS = frozenset({"", "s", "es", "er", "ers", "ed", "ing", "or", "ors", "ion", "ions", "e"})

#: a relation name that begins or ends with one of these reads as a verb phrase ("located in", "in language",
#: "written by"): a composed question says "the film that in language French", not "whose in language is French"
#: (:func:`simgrag.bootstrap.compose.verb_like`)
RELATION_PREPOSITIONS = frozenset({"by", "in", "for", "to", "at", "on", "from", "with", "of", "into", "as"})
