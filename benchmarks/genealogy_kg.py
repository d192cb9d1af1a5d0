"""Write a fictional genealogy KG with test, validation and few-shot question files (deterministic).

A held-out KG unlike the movie and geography ones: family trees of invented people, asked about with
everyday synonyms of the relation names (dad, kids, wife, job, born in, died of, …).

Regenerate (about 15 minutes on 2 busy CPU cores: one or two embedded-LLM calls per test and validation
question, ~4.5 s each)::

    .venv/bin/python benchmarks/genealogy_kg.py --out-dir runs/genealogy --seed 0
    .venv/bin/simgrag index runs/genealogy/genealogy.tsv -o runs/genealogy.idx

Options: ``--families 60`` (family trees), ``--per-hop 40`` (test questions per hop count 1, 2, 3),
``--val-per-hop 12`` (validation questions per hop), ``--llm llamacpp`` (the paraphrasing model),
``--llm-threads 1`` (llama.cpp threads; one is fastest on cores other jobs use too),
``--no-paraphrase`` (template wording only: a quick dry run).

Outputs in ``--out-dir``:

- ``genealogy.tsv``: ``head<TAB>relation<TAB>tail``, about 3.9K triples (~400 people) over 60 families
  of 3 to 4 generations. Names are made from invented name parts (``Maren Oakes-Villard``) and are unique; places
  and nationalities come from a small invented list. The 13 relations: ``father``, ``mother`` (child →
  parent), ``children`` (parent → child, their inverse), ``spouse`` and ``sibling`` (stored both ways),
  ``gender`` (male/female), ``profession``, ``place_of_birth``, ``place_of_death`` (some of the dead),
  ``nationality``, ``religion``, ``ethnicity`` (most people) and ``cause_of_death`` (only the dead).
  Families are linked by some marriages between them.
- ``questions.jsonl`` (test; ``--per-hop`` per hop), ``validation.jsonl`` (``--val-per-hop`` per hop,
  for fitting per-KG settings): one JSON object a line, ``{"question", "answers", "group" ("1-hop" …),
  "hop", "topic", "chain", "template", "paraphrased", "seed"}``. Loadable with
  :func:`simgrag.eval.chains.load_chain_questions` too (it reads ``hop``, ``topic``, ``chain``,
  ``question``).
- ``examples.yaml``: 12 few-shot examples (4 per hop, hops interleaved) in the format of
  ``src/simgrag/data/examples/metaqa.yaml``, with the template wording and the 13 relation names.

How the questions are made:

1. Every person is put, by a seeded shuffle, in one of three disjoint topic pools: test (70 %),
   validation (20 %) and examples (10 %); no two questions (in any file) share a topic.
2. A chain is a seeded random walk from a topic: at each step a relation is drawn uniformly among those
   the current person has (kinship relations only before the last step), then one of its neighbours. The
   gold answer set is every entity the chain reaches from the topic, computed exactly on the triples
   (the topic itself excluded). A chain is kept when it has 1 to 5 answers, every person reached before
   a step has that step's relation (every step well defined), the topic is not reached again, and no step
   undoes the one before or leads straight to a relative one step away (``father`` then ``children``,
   ``spouse`` twice, ``father`` then ``spouse``: the mother; :data:`DEGENERATE`). ``gender`` is asked in
   1-hop chains only. 1-hop chains cycle through the 13 relations so each is asked about.
3. The question is first rendered from a plain template ("What is the profession of the father of Maren
   Oakes-Villard?"), then rewritten by the embedded LLM (``simgrag.llm.registry.resolve_llm("llamacpp")``)
   the way a person would type it, with everyday synonyms and the name kept exactly; one of several style
   instructions is picked by a seeded RNG. ``LLM.complete`` takes no seed, but the llama.cpp backend
   samples with its ``seed`` attribute on every call, so that attribute is set to a per-question seed
   (a CRC32 of the run seed, the file and the question) and the model samples at temperature 0.7. With a
   backend that has no ``seed`` attribute the call is greedy (temperature 0) and only the style varies.
   The prompt lists the synonyms and shows 8 invented examples; for a spouse step it notes whether the
   spouse is a wife or a husband. A paraphrase is rejected when it drops the exact name or is over 200
   characters, and also when a cheap word check says it asks something else (:func:`meaning_problem`:
   its kinship words, read in the order they apply, are not the chain's kinship steps, "dad's mom" and
   "grandma" both being two; an attribute of the chain has no word for it; it names an attribute outside
   the chain; or it states an answer). The 1.5B model drops or reorders hops in about one 3-hop paraphrase
   in four. After a rejection the call is retried once (next seed, so mostly another style), else the
   template is kept (``"paraphrased": false``).
4. The examples file keeps the template wording; each example's triples follow the chain with the topic
   and typed unknowns (``[Maren Oakes-Villard, father, UNKNOWN person 1]``), written as stored in the KG.

The KG and the chains depend only on ``--seed`` and the sizes; the paraphrases also on the LLM (same
model file and llama-cpp-python version: same text; 1 and 2 llama.cpp threads gave the same text).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import re
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger("genealogy_kg")

RELATIONS = ["father", "mother", "children", "spouse", "sibling", "gender", "profession", "place_of_birth",
             "place_of_death", "nationality", "religion", "cause_of_death", "ethnicity"]
KINSHIP = {"father", "mother", "children", "spouse", "sibling"}
#: consecutive steps that undo each other or lead back (the chain would be degenerate)
DEGENERATE = {("father", "children"), ("mother", "children"), ("children", "father"), ("children", "mother"),
              ("spouse", "spouse"), ("sibling", "sibling"), ("sibling", "father"), ("sibling", "mother"),
              ("father", "spouse"), ("mother", "spouse"), ("spouse", "children"), ("children", "sibling")}
#: relations asked about only in 1-hop chains (the gender of a mother is no question)
ONE_HOP_ONLY = {"gender"}
#: the type word of each relation's tail, for the examples' unknowns (``UNKNOWN profession 1``)
TAIL_TYPE = {"father": "person", "mother": "person", "children": "person", "spouse": "person",
             "sibling": "person", "gender": "gender", "profession": "profession", "place_of_birth": "place",
             "place_of_death": "place", "nationality": "nationality", "religion": "religion",
             "cause_of_death": "cause of death", "ethnicity": "ethnicity"}
#: the template noun phrase of each relation (singular, plural)
NOUN = {"father": ("father", "fathers"), "mother": ("mother", "mothers"), "children": ("children", "children"),
        "spouse": ("spouse", "spouses"), "sibling": ("siblings", "siblings"), "gender": ("gender", "genders"),
        "profession": ("profession", "professions"), "place_of_birth": ("place of birth", "places of birth"),
        "place_of_death": ("place of death", "places of death"), "nationality": ("nationality", "nationalities"),
        "religion": ("religion", "religions"), "cause_of_death": ("cause of death", "causes of death"),
        "ethnicity": ("ethnicity", "ethnicities")}
PLURAL_RELATIONS = {"children", "sibling"}

MALE_NAMES = [
    "Aldric", "Ansel", "Bram", "Caspian", "Corwin", "Dorian", "Edmund", "Elias", "Emory", "Fenwick", "Gideon",
    "Halden", "Ivo", "Jasper", "Jory", "Kester", "Lachlan", "Leander", "Lorcan", "Magnus", "Milo", "Niall",
    "Oren", "Osric", "Percival", "Quill", "Rafe", "Roderick", "Rowan", "Silas", "Soren", "Tamsin", "Thaddeus",
    "Tobias", "Ulric", "Valen", "Wendell", "Wystan", "Yannick", "Zeb",
]
FEMALE_NAMES = [
    "Adela", "Alinta", "Briony", "Calla", "Clementine", "Delphine", "Elowen", "Esme", "Fenella", "Greer",
    "Hester", "Imogen", "Isolde", "Juniper", "Katell", "Linnea", "Liesl", "Maren", "Marisol", "Nerys", "Odile",
    "Ottilie", "Perpetua", "Quenby", "Rosalind", "Saoirse", "Sidony", "Talitha", "Tove", "Ursa", "Verity",
    "Wilhelmina", "Winifred", "Xanthe", "Yselda", "Zinnia", "Bettany", "Corisande", "Ilse", "Petra",
]
SURNAME_FIRST = [
    "Oakes", "Ashgrove", "Brennick", "Caddow", "Dunlevy", "Elsmore", "Farrant", "Gorringe", "Halloway",
    "Ingleby", "Jessop", "Kilbride", "Lathom", "Marchbank", "Norcott", "Orpen", "Pellow", "Quarrie", "Rendall",
    "Sallow", "Tredgold", "Upcott", "Vosper", "Whitlock",
]
SURNAME_SECOND = [
    "Villard", "Abernell", "Beaumarch", "Corrigal", "Delacourt", "Esterby", "Fairlie", "Grisewood", "Hexton",
    "Ivesley", "Jardine", "Kettering", "Lavelle", "Moncrieff", "Nettleford", "Ostrand", "Pennarth", "Rackham",
    "Stavely", "Thurlow", "Umberleigh", "Vantreight", "Wolstan", "Yelverton",
]
#: nationality → its towns (all invented)
COUNTRIES = {
    "Velmaran": ["Port Hallow", "Ebbmoor", "Kestrel Vale", "Saltmarch", "Thistledown"],
    "Ostrian": ["Grauwald", "Ostberg", "Lindenfels", "Marrowick"],
    "Caldessi": ["Santa Orsola", "Valcastra", "Portomare", "Ciriago"],
    "Norvish": ["Skarnholm", "Fjellby", "Tovik", "Hallandvik"],
    "Brennish": ["Duncaster", "Carrow Fen", "Westmere", "Ashfordby"],
}
ETHNICITIES = ["Velmari", "Ostrish", "Caldese", "Norvic", "Brenn", "Sarathi", "Kessari"]
NATIONAL_ETHNICITY = {"Velmaran": "Velmari", "Ostrian": "Ostrish", "Caldessi": "Caldese", "Norvish": "Norvic",
                      "Brennish": "Brenn"}
RELIGIONS = ["Lantern Faith", "Old Covenant", "Sunward Creed", "Reformed Tidal Church", "Harrowism",
             "Quiet Path"]
PROFESSIONS = [
    "Teacher", "Carpenter", "Physician", "Nurse", "Blacksmith", "Lawyer", "Farmer", "Baker", "Sailor",
    "Engineer", "Architect", "Accountant", "Pharmacist", "Journalist", "Librarian", "Shipwright", "Potter",
    "Tailor", "Miner", "Clockmaker", "Veterinarian", "Cartographer", "Surveyor", "Chemist", "Musician",
]
CAUSES_OF_DEATH = ["Pneumonia", "Heart failure", "Stroke", "Tuberculosis", "Drowning", "Influenza", "Cancer",
                   "Old age", "Typhoid fever", "Mining accident", "Kidney failure"]

Triple = tuple[str, str, str]


# --------------------------------------------------------------------------------------------------
# the KG
# --------------------------------------------------------------------------------------------------

@dataclass
class Person:
    name: str
    gender: str
    generation: int
    nationality: str
    birthplace: str
    father: Person | None = None
    mother: Person | None = None
    spouse: Person | None = None
    children: list[Person] = field(default_factory=list)
    dead: bool = False


class FamilyBuilder:
    """Builds the family trees with one seeded RNG; names are unique over the whole KG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.people: list[Person] = []
        self.names: set[str] = set()
        pairs = [f"{a}-{b}" for a in SURNAME_FIRST for b in SURNAME_SECOND]
        rng.shuffle(pairs)
        self.surnames = pairs
        #: unmarried people of finished families, by (generation, gender): spouses for later families
        self.single: dict[tuple[int, str], list[Person]] = defaultdict(list)

    def surname(self) -> str:
        if not self.surnames:
            raise SystemExit("ran out of surnames; use fewer --families")
        return self.surnames.pop()

    def name(self, gender: str, surname: str) -> str:
        pool = MALE_NAMES if gender == "male" else FEMALE_NAMES
        free = [f for f in pool if f"{f} {surname}" not in self.names]
        if not free:
            raise SystemExit(f"ran out of first names for {surname}")
        full = f"{self.rng.choice(free)} {surname}"
        self.names.add(full)
        return full

    def person(self, gender: str, surname: str, generation: int, *, home: str | None = None,
               father: Person | None = None, mother: Person | None = None) -> Person:
        rng = self.rng
        if home is not None and rng.random() < 0.7:
            birthplace = home
        else:
            country = rng.choice(sorted(COUNTRIES))
            birthplace = rng.choice(COUNTRIES[country])
        country = _country_of(birthplace)
        nationality = father.nationality if father is not None and rng.random() < 0.15 else country
        dead_p = {1: 0.95, 2: 0.6, 3: 0.15}.get(generation, 0.0)
        p = Person(self.name(gender, surname), gender, generation, nationality, birthplace, father, mother,
                   dead=rng.random() < dead_p)
        for parent in (father, mother):
            if parent is not None:
                parent.children.append(p)
        self.people.append(p)
        return p

    def marry(self, p: Person, local: bool) -> Person:
        """A spouse for ``p``: an unmarried person of an earlier family (sometimes) or someone new."""
        other = "female" if p.gender == "male" else "male"
        pool = self.single[(p.generation, other)]
        if local and pool and self.rng.random() < 0.5:
            spouse = pool.pop(self.rng.randrange(len(pool)))
        else:
            spouse = self.person(other, self.surname(), p.generation, home=p.birthplace)
        p.spouse, spouse.spouse = spouse, p
        return spouse

    def family(self) -> None:
        rng = self.rng
        surname = self.surname()
        home = rng.choice(COUNTRIES[rng.choice(sorted(COUNTRIES))])
        founder = self.person("male", surname, 1, home=home)
        self.marry(founder, local=False)
        couples = [(founder, founder.spouse)]
        new: list[Person] = []
        for generation, sizes, weights, marry_p in ((2, [1, 2, 3], [3, 5, 2], 0.65),
                                                    (3, [0, 1, 2, 3], [3, 4, 2, 1], 0.3),
                                                    (4, [0, 1, 2], [3, 4, 2], 0.0)):
            next_couples = []
            for husband, wife in couples:
                assert wife is not None
                for _ in range(rng.choices(sizes, weights)[0]):
                    child = self.person(rng.choice(["male", "female"]), husband.name.split(" ", 1)[1],
                                        generation, home=husband.birthplace, father=husband, mother=wife)
                    new.append(child)
                    if rng.random() < marry_p:
                        spouse = self.marry(child, local=True)
                        next_couples.append((child, spouse) if child.gender == "male" else (spouse, child))
            couples = next_couples
        for p in new:
            if p.spouse is None and p.generation in (2, 3):
                self.single[(p.generation, p.gender)].append(p)


def _country_of(place: str) -> str:
    return next(c for c, towns in COUNTRIES.items() if place in towns)


def build_kg(seed: int, families: int) -> list[Triple]:
    """The KG's triples, sorted (the same for the same seed and size)."""
    rng = random.Random(f"genealogy-kg:{seed}")
    builder = FamilyBuilder(rng)
    for _ in range(families):
        builder.family()
    triples: set[Triple] = set()
    religion_of: dict[str, str] = {}
    ethnicity_of: dict[str, str] = {}
    for p in builder.people:  # parents come before their children
        triples.add((p.name, "gender", p.gender))
        triples.add((p.name, "profession", rng.choice(PROFESSIONS)))
        triples.add((p.name, "place_of_birth", p.birthplace))
        triples.add((p.name, "nationality", p.nationality))
        if rng.random() < 0.8:
            inherited = p.father is not None and p.father.name in religion_of and rng.random() < 0.7
            religion = religion_of[p.father.name] if inherited and p.father is not None else rng.choice(RELIGIONS)
            religion_of[p.name] = religion
            triples.add((p.name, "religion", religion))
        if rng.random() < 0.7:
            parent = p.father if rng.random() < 0.5 else p.mother
            if parent is not None and parent.name in ethnicity_of:
                ethnicity = ethnicity_of[parent.name]
            else:
                ethnicity = NATIONAL_ETHNICITY[p.nationality] if rng.random() < 0.75 else rng.choice(ETHNICITIES)
            ethnicity_of[p.name] = ethnicity
            triples.add((p.name, "ethnicity", ethnicity))
        if p.dead:
            if rng.random() < 0.85:
                triples.add((p.name, "cause_of_death", rng.choice(CAUSES_OF_DEATH)))
            if rng.random() < 0.6:
                place = p.birthplace if rng.random() < 0.5 else rng.choice(COUNTRIES[_country_of(p.birthplace)])
                triples.add((p.name, "place_of_death", place))
        for parent, relation in ((p.father, "father"), (p.mother, "mother")):
            if parent is not None:
                triples.add((p.name, relation, parent.name))
                triples.add((parent.name, "children", p.name))
        if p.spouse is not None:
            triples.add((p.name, "spouse", p.spouse.name))
        if p.father is not None:
            for sib in p.father.children:
                if sib is not p and sib.mother is p.mother:
                    triples.add((p.name, "sibling", sib.name))
    return sorted(triples)


# --------------------------------------------------------------------------------------------------
# chains and questions
# --------------------------------------------------------------------------------------------------

class Graph:
    """Outgoing edges by (head, relation), for following chains exactly."""

    def __init__(self, triples: Iterable[Triple]) -> None:
        self.out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.relations_of: dict[str, set[str]] = defaultdict(set)
        self.entities: set[str] = set()
        for h, r, t in triples:
            self.out[(h, r)].add(t)
            self.relations_of[h].add(r)
            self.entities.update((h, t))
        self.gender = {h: next(iter(self.out[(h, "gender")])) for h in self.relations_of
                       if self.out.get((h, "gender"))}

    def persons(self) -> list[str]:
        return sorted(self.gender)

    def step(self, frontier: set[str], relation: str) -> set[str]:
        out: set[str] = set()
        for node in frontier:
            out |= self.out.get((node, relation), set())
        return out

    def follow(self, topic: str, chain: Sequence[str]) -> set[str]:
        frontier = {topic}
        for relation in chain:
            frontier = self.step(frontier, relation)
        frontier.discard(topic)
        return frontier

    def well_defined(self, topic: str, chain: Sequence[str]) -> bool:
        """Every person reached before a step has that step's relation, no step undoes the previous one,
        and the topic is never reached again."""
        if any(pair in DEGENERATE for pair in itertools.pairwise(chain)) or (
                len(chain) > 1 and ONE_HOP_ONLY & set(chain)):
            return False
        frontier = {topic}
        for i, relation in enumerate(chain):
            if not frontier or any(not self.out.get((n, relation)) for n in frontier):
                return False
            frontier = self.step(frontier, relation)
            if topic in frontier or (i < len(chain) - 1 and relation not in KINSHIP):
                return False
        return bool(frontier)


@dataclass(frozen=True)
class Chain:
    topic: str
    chain: tuple[str, ...]
    answers: tuple[str, ...]


def random_chain(graph: Graph, topic: str, hops: int, rng: random.Random, first: str | None = None) -> Chain | None:
    """A seeded random walk of ``hops`` steps from ``topic`` (kinship steps before the last), or None when
    the walk gets stuck or the chain is not kept (see the module docstring)."""
    node, chain = topic, []
    for i in range(hops):
        allowed = sorted(graph.relations_of[node] if i == hops - 1 else graph.relations_of[node] & KINSHIP)
        if hops > 1:
            allowed = [r for r in allowed if r not in ONE_HOP_ONLY]
        if chain:
            allowed = [r for r in allowed if (chain[-1], r) not in DEGENERATE]
        if i == 0 and first is not None:
            allowed = [first] if first in allowed else []
        if not allowed:
            return None
        relation = rng.choice(allowed)
        chain.append(relation)
        node = rng.choice(sorted(graph.out[(node, relation)]))
    if not graph.well_defined(topic, chain):
        return None
    answers = graph.follow(topic, chain)
    if not 1 <= len(answers) <= 5:
        return None
    return Chain(topic, tuple(chain), tuple(sorted(answers)))


def pick_chains(graph: Graph, topics: list[str], hops: int, n: int, rng: random.Random,
                used: set[str], *, cycle_relations: bool) -> list[Chain]:
    """``n`` chains of ``hops`` steps from distinct unused ``topics`` (marked used); 1-hop chains with
    ``cycle_relations`` take the relations in turn so that each is asked about."""
    out: list[Chain] = []
    order = list(topics)
    rng.shuffle(order)
    targets = list(RELATIONS)
    rng.shuffle(targets)
    for k in range(n):
        want = targets[k % len(targets)] if cycle_relations else None
        found = None
        for _attempt in range(2):
            for topic in order:
                if topic in used:
                    continue
                found = random_chain(graph, topic, hops, rng, first=want)
                if found is not None:
                    break
            if found is not None or want is None:
                break
            want = None  # no unused topic has this relation any more: any relation
        if found is None:
            raise SystemExit(f"only {len(out)} of {n} {hops}-hop chains found; use more --families")
        used.add(found.topic)
        out.append(found)
    return out


def pick_examples(graph: Graph, topics: list[str], rng: random.Random, used: set[str], per_hop: int = 4) -> list[Chain]:
    """``per_hop`` chains per hop from unused ``topics``, chosen greedily to cover as many relations as
    possible, hops interleaved (1, 2, 3, 1, 2, 3, …)."""
    by_hop: dict[int, list[Chain]] = {}
    covered: Counter[str] = Counter()
    for hops in (1, 2, 3):
        candidates: list[Chain] = []
        order = [t for t in topics if t not in used]
        rng.shuffle(order)
        for topic in order:
            for _ in range(3):
                c = random_chain(graph, topic, hops, rng)
                if c is not None:
                    candidates.append(c)
                    break
        chosen: list[Chain] = []
        for _ in range(per_hop):
            pool = [c for c in candidates if c.topic not in used]
            if not pool:
                raise SystemExit(f"not enough {hops}-hop example chains; use more --families")
            best = min(pool, key=lambda c: (sum(covered[r] for r in c.chain), c.chain != tuple(sorted(c.chain))))
            chosen.append(best)
            used.add(best.topic)
            covered.update(best.chain)
        by_hop[hops] = chosen
    return [by_hop[h][i] for i in range(per_hop) for h in (1, 2, 3)]


def template_question(chain: Chain) -> str:
    """The plain template sentence: "What is the profession of the father of Maren Oakes-Villard?"."""
    phrase = chain.topic
    plural = False
    for relation in chain.chain:
        singular, many = NOUN[relation]
        plural = plural or relation in PLURAL_RELATIONS
        phrase = f"the {many if plural and relation not in PLURAL_RELATIONS else singular} of {phrase}"
    wh = "Who" if chain.chain[-1] in KINSHIP else "What"
    verb = "are" if plural else "is"
    return f"{wh} {verb} {phrase}?"


# --------------------------------------------------------------------------------------------------
# paraphrasing
# --------------------------------------------------------------------------------------------------

PARAPHRASE_SYSTEM = """You rewrite questions about people's families the way a real person would type them.
Use everyday words instead of the formal relation names, for example:
father -> dad, mother -> mom or mum, children -> kids, spouse -> wife or husband, siblings -> brothers and sisters,
profession -> job, occupation, line of work, what does X do for a living,
place of birth -> where was X born, hometown, place of death -> where did X die,
cause of death -> what did X die of, how did X die, nationality -> what country is X from, citizenship,
religion -> faith, what does X believe in, ethnicity -> ethnic background, heritage, gender -> is X a man or a woman.
Rules: keep every person's name exactly as written (same spelling, capitals and hyphens); keep the meaning exactly
(the same relatives in the same order); answer with the rewritten question only, on one line, and nothing else."""

#: (user, assistant) turns shown before each question (names invented, not in the KG)
PARAPHRASE_SHOTS = [
    ("Style: casual.\nQuestion: What is the profession of the father of Tobin Ashvale?",
     "what does Tobin Ashvale's dad do for a living?"),
    ("Style: a polite, complete question.\nNote: Ada Merriwether-Konig is a woman, so the spouse is her husband.\n"
     "Question: Who are the siblings of the spouse of Ada Merriwether-Konig?",
     "Could you tell me who the brothers and sisters of Ada Merriwether-Konig's husband are?"),
    ("Style: a short search query.\nQuestion: What is the cause of death of the mother of the father of Lew Harcastle?",
     "what did Lew Harcastle's dad's mom die of"),
    ("Style: start with the person's name.\nQuestion: What are the religions of the children of Oskar Penhallow?",
     "Oskar Penhallow's kids, what faith are they?"),
    ("Style: lower case, except the name.\nQuestion: What is the place of birth of Mirela Stonebridge?",
     "where was Mirela Stonebridge born"),
    ("Style: casual.\nNote: Hedda Marlowe is a woman, so the spouse is her husband.\n"
     "Question: What is the nationality of the spouse of Hedda Marlowe?",
     "What country is Hedda Marlowe's husband from?"),
    ("Style: a short search query.\nQuestion: Who is the mother of Piet Varnell?", "Piet Varnell mum"),
    ("Style: a polite, complete question.\nQuestion: What is the gender of Rune Alcott?",
     "Is Rune Alcott a man or a woman?"),
]

STYLES = [
    "casual.",
    "a short search query.",
    "a polite, complete question.",
    "lower case, except the name.",
    "start with the person's name.",
    "someone curious about their family history.",
]

MAX_CHARS = 200

#: words that show a relation is asked about (checked on the paraphrase, the name removed)
RELATION_WORDS = {
    "father": r"father|fathers|dad|dads|daddy|papa|pa|paternal|grandfather|grandpa|granddad|grandad|parents?",
    "mother": r"mother|mothers|mom|moms|mum|mums|mommy|mama|ma|maternal|grandmother|grandma|granny|parents?",
    "children": r"child|children|kids?|sons?|daughters?|offspring|grandchild|grandchildren|grandkids?|grandsons?"
                r"|granddaughters?|sons-in-law|daughters-in-law",
    "spouse": r"spouses?|wife|wives|husbands?|married|marry|partners?|widow|widower|[a-z]+-in-law",
    "sibling": r"siblings?|brothers?|sisters?|[a-z]+-in-law|nephews?|nieces?|uncles?|aunts?",
    "gender": r"gender|sex|man|woman|male|female|boy|girl",
    "profession": r"profession|professions|job|jobs|occupations?|work|works|working|living|careers?|trades?|do"
                  r"|does",
    "place_of_birth": r"born|birth|birthplace|hometown|from",
    "place_of_death": r"die|died|dies|death|pass|passed|buried",
    "nationality": r"nationality|nationalities|country|countries|citizens?|citizenship|national|from|passports?",
    "religion": r"religion|religions|religious|faiths?|believe|beliefs?|church|worship",
    "cause_of_death": r"die|died|dies|death|cause|killed|passed",
    "ethnicity": r"ethnic|ethnicity|ethnicities|heritage|background|ancestry|descent|roots|origins?",
}
#: words that name an attribute only (a paraphrase with one of a relation outside its chain asks something else)
ATTRIBUTE_ONLY_WORDS = {
    "gender": r"gender|man or a woman|male or female",
    "profession": r"profession|job|jobs|occupations?|for a living|careers?",
    "place_of_birth": r"born|birthplace|hometown",
    "nationality": r"nationality|citizenship|passport",
    "religion": r"religion|religious|faiths?|believe",
    "cause_of_death": r"die of|died of|cause of death|killed",
    "ethnicity": r"ethnic|ethnicity|heritage|ancestry|descent",
}
#: how a gender question asks (without it the model tends to state the answer: "X is a woman.")
GENDER_ASKED = (r"gender|sex|(?:a )?(?:man|male|boy) or (?:a )?(?:woman|female|girl)"
                r"|(?:a )?(?:woman|female|girl) or (?:a )?(?:man|male|boy)")
PARENT = frozenset({"father", "mother"})
F, M, C, S, B = (frozenset({r}) for r in ("father", "mother", "children", "spouse", "sibling"))
#: kinship words → the steps they stand for (several readings for an ambiguous word), in chain order
KIN_WORDS: list[tuple[str, list[tuple[frozenset[str], ...]]]] = [
    (r"(?:paternal|father'?s'?(?: side)?) grand(?:father|pa|dad)", [(F, F)]),
    (r"(?:paternal|father'?s'?(?: side)?) grand(?:mother|ma|mom|mum)|paternal granny", [(F, M)]),
    (r"(?:maternal|mother'?s'?(?: side)?) grand(?:father|pa|dad)", [(M, F)]),
    (r"(?:maternal|mother'?s'?(?: side)?) grand(?:mother|ma|mom|mum)|maternal granny", [(M, M)]),
    (r"grand(?:father|pa|dad)s?", [(PARENT, F)]),
    (r"grand(?:mother|ma|mom|mum)s?|grann(?:y|ies)", [(PARENT, M)]),
    (r"grandparents?", [(PARENT, PARENT)]),
    (r"grand(?:child|children|kids?|sons?|daughters?)", [(C, C)]),
    (r"(?:mothers?|moms?|mums?)-in-law", [(S, M)]),
    (r"(?:fathers?|dads?)-in-law", [(S, F)]),
    (r"parents?-in-law|in-laws", [(S, PARENT)]),
    (r"(?:sons?|daughters?|children)-in-law", [(C, S)]),
    (r"(?:brothers?|sisters?|siblings?)-in-law", [(S, B), (B, S)]),
    (r"nephews?|nieces?", [(B, C)]),
    (r"uncles?|aunts?|aunties?", [(PARENT, B)]),
    (r"cousins?", [(PARENT, B, C)]),
    (r"husbands? (?:and|or|&) wives?|wives? (?:and|or|&) husbands?", [(S,)]),
    (r"brothers? (?:and|or|&) sisters?|sisters? (?:and|or|&) brothers?", [(B,)]),
    (r"sons? (?:and|or|&) daughters?|daughters? (?:and|or|&) sons?", [(C,)]),
    (r"(?:moms?|mums?|mothers?) (?:and|or|&) (?:dads?|fathers?)"
     r"|(?:dads?|fathers?) (?:and|or|&) (?:moms?|mums?|mothers?)", [(PARENT,)]),
    (r"fathers?|dads?|daddy|papa", [(F,)]),
    (r"mothers?|moms?|mums?|mommy|mummy|mama", [(M,)]),
    (r"parents?", [(PARENT,)]),
    (r"child|children|kids?|sons?|daughters?|offspring", [(C,)]),
    (r"spouses?|wife|wives|husbands?|partners?|married|marry", [(S,)]),
    (r"siblings?|brothers?|sisters?", [(B,)]),
]
_KIN_RE = re.compile("|".join(f"(?P<k{i}>\\b(?:{p})\\b)" for i, (p, _) in enumerate(KIN_WORDS)))


def kinship_readings(text: str, topic: str) -> list[list[frozenset[str]]]:
    """The kinship steps the text names, in the order they apply from the topic: the words after the name
    (possessives: "X's kids' spouses") first, then those before it from the nearest out ("the mothers of
    the spouses of X"); one list per reading of ambiguous words (brother-in-law)."""
    plain = text.lower()
    at = plain.find(topic.lower())
    if at < 0:
        return []
    def words(part: str) -> list[list[tuple[frozenset[str], ...]]]:
        return [KIN_WORDS[int(m.lastgroup[1:])][1] for m in _KIN_RE.finditer(part)]  # type: ignore[index]
    ordered = words(plain[at + len(topic):]) + words(plain[:at])[::-1]
    readings: list[list[frozenset[str]]] = [[]]
    for options in ordered:
        readings = [r + list(steps) for r in readings for steps in options]
    return readings


def _has(pattern: str, text: str) -> bool:
    return re.search(rf"\b(?:{pattern})\b", text) is not None


def meaning_problem(text: str, chain: Chain) -> str | None:
    """Why the paraphrase ``text`` seems to ask something else than ``chain`` (None when it seems fine):
    an attribute of the chain has no word for it, the kinship words name other steps or another order
    (:func:`kinship_readings`), a word of an attribute outside the chain ("what does X's mom do" asks for a
    profession), or an answer in the text. A cheap guard against a small model's drift,
    not a proof of meaning."""
    plain = text.replace(chain.topic, " ").lower()
    for relation in chain.chain:
        if relation not in KINSHIP and not _has(RELATION_WORDS[relation], plain):
            return f"no word for {relation}"
    kin = [r for r in chain.chain if r in KINSHIP]
    if not any(len(reading) == len(kin) and all(r in step for r, step in zip(kin, reading, strict=True))
               for reading in kinship_readings(text, chain.topic)):
        return "kinship steps differ"
    for relation, pattern in ATTRIBUTE_ONLY_WORDS.items():
        if relation not in chain.chain and _has(pattern, plain):
            return f"asks about {relation}"
    if "profession" not in chain.chain and re.search(r"\b(?:do|does|did)\b.*\bdo\W*$", plain):
        return "asks about profession"
    if any(_has(re.escape(a.lower()), plain) for a in chain.answers) or (
            chain.chain[-1] == "gender" and not _has(GENDER_ASKED, plain)):
        return "gives the answer"
    return None


def _clean(text: str) -> str:
    """The first line of the reply, without a "Rewritten:" prefix or quotes."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = re.sub(r"^(rewritten( question)?|question|answer)\s*:\s*", "", lines[0], flags=re.IGNORECASE)
    return line.strip().strip('"').strip("'").strip("`").strip()


def _gender_hints(graph: Graph, chain: Chain) -> list[str]:
    """Who the spouses and parents are, so that the model writes wife/husband right."""
    hints = []
    frontier = {chain.topic}
    subject = chain.topic
    for relation in chain.chain:
        if relation == "spouse":
            genders = {graph.gender.get(n) for n in frontier}
            if genders == {"male"}:
                hints.append(f"{subject} is a man, so the spouse is his wife.")
            elif genders == {"female"}:
                hints.append(f"{subject} is a woman, so the spouse is her husband.")
        frontier = graph.step(frontier, relation)
        subject = f"the {NOUN[relation][0]} of {subject}"
    return [h[0].upper() + h[1:] for h in hints]


class Paraphraser:
    """The embedded LLM rewrites a template question, seeded per question (see the module docstring)."""

    def __init__(self, spec: str, threads: int = 0) -> None:
        from simgrag.llm.registry import resolve_llm

        self.llm = resolve_llm(spec)
        if threads and hasattr(self.llm, "n_threads"):
            self.llm.n_threads = threads  # read when the model is loaded (on the first call)
        self.seeded = hasattr(self.llm, "seed")
        self.calls = 0
        self.seconds = 0.0
        self.rejected: Counter[str] = Counter()

    def complete(self, template: str, hints: list[str], seed: int) -> str | None:
        from simgrag.errors import SimGRAGError
        from simgrag.llm.base import ChatMessage

        style = STYLES[random.Random(seed).randrange(len(STYLES))]
        user = f"Style: {style}\n" + "".join(f"Note: {h}\n" for h in hints) + f"Question: {template}"
        messages = [ChatMessage("system", PARAPHRASE_SYSTEM)]
        for shot_user, shot_assistant in PARAPHRASE_SHOTS:
            messages += [ChatMessage("user", shot_user), ChatMessage("assistant", shot_assistant)]
        messages = [*messages[:-1], ChatMessage("assistant", messages[-1].content, cache_after=True),
                    ChatMessage("user", user)]
        temperature = 0.7 if self.seeded else 0.0
        if self.seeded:
            self.llm.seed = seed  # type: ignore[attr-defined]  # read by LlamaCppLLM on every call
        start = time.perf_counter()
        try:
            response = self.llm.complete(messages, max_tokens=64, temperature=temperature, stop=["\n"])
        except SimGRAGError as exc:
            logger.warning("paraphrase failed for %r: %s", template, exc)
            return None
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - start
        return _clean(response.text)

    def paraphrase(self, template: str, chain: Chain, hints: list[str], seed: int) -> tuple[str, bool]:
        """The rewritten question and True, or the template and False after two rejected tries."""
        for attempt in range(2):
            text = self.complete(template, hints, seed + attempt)
            if not text or chain.topic not in text:
                problem: str | None = "the name is not kept"
            elif len(text) > MAX_CHARS:
                problem = f"{len(text)} characters"
            else:
                problem = meaning_problem(text, chain)
            if problem is None:
                return text, text != template
            self.rejected[problem.split(" for ")[0].split(" (")[0]] += 1
            logger.info("rejected paraphrase %r of %r: %s", text, template, problem)
        return template, False


def question_seed(seed: int, split: str, chain: Chain) -> int:
    key = f"{seed}|{split}|{chain.topic}|{'/'.join(chain.chain)}"
    return zlib.crc32(key.encode("utf-8"))


def make_rows(chains: list[Chain], split: str, seed: int, graph: Graph,
              paraphraser: Paraphraser | None) -> list[dict[str, Any]]:
    rows = []
    for i, c in enumerate(chains, start=1):
        template = template_question(c)
        qseed = question_seed(seed, split, c)
        if paraphraser is not None:
            question, paraphrased = paraphraser.paraphrase(template, c, _gender_hints(graph, c), qseed)
        else:
            question, paraphrased = template, False
        rows.append({"question": question, "answers": list(c.answers), "group": f"{len(c.chain)}-hop",
                     "hop": len(c.chain), "topic": c.topic, "chain": list(c.chain), "template": template,
                     "paraphrased": paraphrased, "seed": qseed})
        logger.info("%s %d/%d %s | %s", split, i, len(chains), template, question)
    return rows


# --------------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------------

def example_triples(c: Chain) -> list[list[str]]:
    """The pattern of a chain: the topic, then typed unknowns, one triple per step as stored in the KG."""
    counts: Counter[str] = Counter()
    names = [c.topic]
    for relation in c.chain:
        kind = TAIL_TYPE[relation]
        counts[kind] += 1
        names.append(f"UNKNOWN {kind} {counts[kind]}")
    return [[names[i], relation, names[i + 1]] for i, relation in enumerate(c.chain)]


EXAMPLES_INSTRUCTIONS = (
    "People are linked to their father, mother, children, spouse and siblings, and to their gender, profession, "
    "place of birth, place of death, nationality, religion, cause of death and ethnicity. Write every triple "
    "person first: the child first for father and mother, the parent first for children.")


def write_examples(path: Path, chains: list[Chain], seed: int) -> None:
    lines = [
        "# Few-shot examples for the genealogy KG of benchmarks/genealogy_kg.py "
        f"(--seed {seed}; generated, template wording).",
        "# 4 chains per hop (hops interleaved) about people no test or validation question is about.",
        "name: genealogy",
        "relations:",
        *(f"  - {r}" for r in RELATIONS),
        f"instructions: {json.dumps(EXAMPLES_INSTRUCTIONS)}",
        "examples:",
    ]
    for c in chains:
        lines.append(f"  - question: {json.dumps(template_question(c))}")
        lines.append("    triples:")
        lines.extend(f"      - {json.dumps(t, ensure_ascii=False)}" for t in example_triples(c))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def check(graph: Graph, rows: list[dict[str, Any]], name: str) -> None:
    """Every answer set is non-empty and exactly what the chain reaches; the question names its topic."""
    for row in rows:
        reached = graph.follow(row["topic"], row["chain"])
        if not reached or sorted(reached) != row["answers"]:
            raise SystemExit(f"{name}: bad answers for {row['template']!r}")
        if row["topic"] not in row["question"]:
            raise SystemExit(f"{name}: {row['question']!r} lacks its topic")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", type=int, default=60)
    parser.add_argument("--per-hop", type=int, default=40, help="test questions per hop count (1, 2, 3)")
    parser.add_argument("--val-per-hop", type=int, default=12, help="validation questions per hop count")
    parser.add_argument("--llm", default="llamacpp", help="the paraphrasing model (simgrag --llm names)")
    parser.add_argument("--llm-threads", type=int, default=1,
                        help="llama.cpp threads (0: all cores). 1 by default: on cores shared with other jobs "
                             "llama.cpp's threads wait for each other (a call took 50-110 s with 2 threads, 14 s "
                             "with 1, on 2 busy cores)")
    parser.add_argument("--no-paraphrase", action="store_true", help="keep the template wording (dry run)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("simgrag", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start = time.perf_counter()

    triples = build_kg(args.seed, args.families)
    graph = Graph(triples)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    kg_path = args.out_dir / "genealogy.tsv"
    kg_path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    persons = graph.persons()
    by_relation = Counter(r for _, r, _ in triples)
    logger.info("%s: %d triples, %d entities, %d people; %s", kg_path, len(triples), len(graph.entities),
                len(persons), dict(sorted(by_relation.items())))

    rng = random.Random(f"genealogy-questions:{args.seed}")
    shuffled = list(persons)
    rng.shuffle(shuffled)
    n = len(shuffled)
    pools = {"test": shuffled[: n * 7 // 10], "validation": shuffled[n * 7 // 10: n * 9 // 10],
             "examples": shuffled[n * 9 // 10:]}
    used: set[str] = set()
    chains = {
        split: [c for hops in (1, 2, 3)
                for c in pick_chains(graph, pools[split], hops, per_hop, rng, used, cycle_relations=hops == 1)]
        for split, per_hop in (("test", args.per_hop), ("validation", args.val_per_hop))
    }
    example_chains = pick_examples(graph, pools["examples"], rng, used)

    paraphraser = None if args.no_paraphrase else Paraphraser(args.llm, args.llm_threads)
    rows = {split: make_rows(chains[split], split, args.seed, graph, paraphraser) for split in chains}
    for split, name in (("test", "questions.jsonl"), ("validation", "validation.jsonl")):
        check(graph, rows[split], name)
        write_jsonl(args.out_dir / name, rows[split])
    examples_path = args.out_dir / "examples.yaml"
    write_examples(examples_path, example_chains, args.seed)
    from simgrag.pattern.examples import load_examples

    loaded = load_examples(examples_path)
    topics = {split: {r["topic"] for r in rows[split]} for split in rows}
    assert not topics["test"] & topics["validation"]
    assert not {c.topic for c in example_chains} & (topics["test"] | topics["validation"])

    wall = time.perf_counter() - start
    print(f"KG: {kg_path} ({len(triples)} triples, {len(persons)} people, {len(by_relation)} relations)")
    for split, name in (("test", "questions.jsonl"), ("validation", "validation.jsonl")):
        per_group = Counter(r["group"] for r in rows[split])
        done = sum(r["paraphrased"] for r in rows[split])
        sizes = Counter(len(r["answers"]) for r in rows[split])
        print(f"{name}: {len(rows[split])} questions {dict(sorted(per_group.items()))}; "
              f"paraphrased {done}/{len(rows[split])} ({done / max(len(rows[split]), 1):.0%}); "
              f"answer-set sizes {dict(sorted(sizes.items()))}")
    print(f"examples.yaml: {len(loaded)} examples, {len(loaded.relations)} relations")
    if paraphraser is not None:
        print(f"LLM: {paraphraser.calls} calls, {paraphraser.seconds:.0f} s "
              f"({paraphraser.seconds / max(paraphraser.calls, 1):.1f} s/call; "
              f"{'seeded, temperature 0.7' if paraphraser.seeded else 'greedy'}); "
              f"rejected paraphrases: {dict(paraphraser.rejected.most_common())}")
    print(f"wall time: {wall:.0f} s")


if __name__ == "__main__":
    main()
