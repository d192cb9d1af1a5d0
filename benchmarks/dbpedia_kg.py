"""Write a DBpedia-shaped RDF KG with 522 relations, and test, validation and few-shot question files.

The held-out KG of many relations: the synthetic DBpedia-shaped generator
(:class:`simgrag.eval.synthetic_dbpedia.SyntheticKG`, 467 classes, 522 relations with domains, ranges and
literal kinds) written as **Turtle with opaque IRIs** (``ex:e42``, ``ex:p7``) named only by their
``rdfs:label`` — the shape of Wikidata-like exports, where nothing readable is in the IRI — with questions
rewritten by the embedded LLM the way a person types them, with a fixed seed.

Regenerate (about 10 minutes on 2 busy cores: one or two LLM calls per question)::

    .venv/bin/python benchmarks/dbpedia_kg.py --out-dir runs/dbpedia --seed 0
    .venv/bin/simgrag index runs/dbpedia/dbpedia.ttl -o runs/dbpedia.idx

Options: ``--entities 8000`` (planned entities; literal values become entities too), ``--per-hop 30``
(test questions per hop count 1 and 2), ``--val-per-hop 20``, ``--llm llamacpp``, ``--llm-threads 1``,
``--no-paraphrase`` (template wording: a dry run).

Outputs in ``--out-dir``:

- ``dbpedia.ttl``: every entity ``ex:e<N>`` with its ``rdfs:label`` and ``rdf:type`` (its class and the
  ancestors, each class with a label), every relation ``ex:p<N>`` with a label (``birthPlace`` →
  ``birth place``), literal objects typed with XSD datatypes (they become entities named by their value).
  About 34K triples over 12K entities with ``--entities 8000``.
- ``dbpedia.tsv``: the same triples by label (``head<TAB>relation<TAB>tail``), for reading.
- ``questions.jsonl`` / ``validation.jsonl``: ``{"question", "answers", "group", "hop", "topic", "chain",
  "template", "paraphrased", "seed"}`` (as :mod:`benchmarks.genealogy_kg` writes them).
- ``examples.yaml``: 12 few-shot examples (6 per hop) with the template wording.

How the questions are made: entities are split by a seeded shuffle into test (70 %), validation (20 %)
and examples (10 %) topic pools, no two questions share a topic. A 1-hop question asks one relation of
its topic (relations taken in a shuffled order so that the test set asks ~30 different ones); a 2-hop
question follows an entity-valued relation then any relation. The gold answers are every entity the
chain reaches (the topic excluded), computed on the triples; a chain is kept with 1 to 5 answers, when
every entity reached before a step has that step's relation and at most 3 entities are in between. The
template ("What is the birth place of the doctoral advisor of Fatima Gomez?") is rewritten by the LLM
with the relation's phrases from ``relations.txt`` as hints (``born in; place of birth``), seeded per
question at temperature 0.7; a rewrite is rejected when it drops the name, names an answer or is over
200 characters, and then retried once, else the template stays (``"paraphrased": false``). Unlike the
genealogy generator there is no check that the rewrite keeps every hop: the 1.5B model drops one
sometimes, which makes a few gold answers unreachable by any reading and lowers every mode alike.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("dbpedia_kg")

EX = "http://example.org/kg/"
RDFS_LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_OF_KIND = {"date": "date", "year": "gYear", "count": "nonNegativeInteger", "number": "integer",
               "decimal": "double"}
MAX_CHARS = 200
MAX_BETWEEN = 3


def relation_label(name: str) -> str:
    """``birthPlace`` → ``birth place``; ``formerDesignerOf`` → ``former designer of``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()


def _written_relations() -> set[str]:
    from importlib.resources import files

    text = files("simgrag.data.synthetic_dbpedia").joinpath("relations.txt").read_text(encoding="utf-8")
    return {line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#")}


def _turtle_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Relation:
    name: str
    label: str
    phrases: tuple[str, ...]
    literal: str | None
    askable: bool  # written in relations.txt (not one of the generator's ``former…`` fill-ups)


@dataclass(frozen=True)
class Chain:
    topic: str
    chain: tuple[str, ...]  # relation labels
    answers: tuple[str, ...]


class Graph:
    """Labelled triples with outgoing edges by (head, relation), for following chains exactly."""

    def __init__(self, triples: Sequence[tuple[str, str, str]], literal_values: set[str]) -> None:
        self.out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.relations_of: dict[str, set[str]] = defaultdict(set)
        for h, r, t in triples:
            self.out[(h, r)].add(t)
            self.relations_of[h].add(r)
        self.literals = literal_values

    def follow(self, topic: str, chain: Sequence[str]) -> set[str]:
        frontier = {topic}
        for relation in chain:
            frontier = {t for node in frontier for t in self.out.get((node, relation), ())}
        frontier.discard(topic)
        return frontier

    def chain_from(self, topic: str, chain: Sequence[str]) -> Chain | None:
        frontier = {topic}
        for i, relation in enumerate(chain):
            if not frontier or any(not self.out.get((n, relation)) for n in frontier):
                return None
            frontier = {t for n in frontier for t in self.out[(n, relation)]}
            if i < len(chain) - 1 and (len(frontier) > MAX_BETWEEN or frontier & self.literals):
                return None
            if topic in frontier:
                return None
        if not 1 <= len(frontier) <= 5:
            return None
        return Chain(topic, tuple(chain), tuple(sorted(frontier)))


def build(entities: int, seed: int) -> tuple[list[tuple[str, str, str]], dict[str, Relation], Any, Any]:
    """The synthetic KG's labelled triples, its relations by label, the store and the generator."""
    from simgrag.eval.synthetic_dbpedia import SyntheticKG

    kg = SyntheticKG(entities, seed=seed, show_progress=False)
    store = kg.to_store()
    relations = {}
    for spec in kg.schema.relations:
        label = relation_label(spec.name)
        relations[label] = Relation(spec.name, label, spec.phrases, spec.literal, spec.name in _written_relations())
    names = [store.relations[i] for i in range(store.num_relations)]
    labels = [relation_label(n) for n in names]
    if len(set(labels)) != len(labels):
        raise SystemExit("two relations share a label")
    triples = [(store.entities[int(h)], labels[int(r)], store.entities[int(t)])
               for h, r, t in zip(store.heads.tolist(), store.rels.tolist(), store.tails.tolist(), strict=True)]
    return triples, relations, store, kg


def write_turtle(path: Path, store: Any, kg: Any, relations: dict[str, Relation]) -> None:
    """Opaque IRIs named by labels; literal tails typed by their relation's literal kind."""
    n_planned = kg.num_entities
    kinds = [relations[relation_label(store.relations[i])].literal for i in range(store.num_relations)]
    with path.open("w", encoding="utf-8") as f:
        f.write(f"@prefix ex: <{EX}> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n\n")
        for c in range(store.num_types):
            f.write(f"ex:c{c} rdfs:label {_turtle_string(store.types[c])} .\n")
        for r in range(store.num_relations):
            f.write(f"ex:p{r} rdfs:label {_turtle_string(relation_label(store.relations[r]))} .\n")
        for e in range(min(n_planned, store.num_entities)):
            types = " , ".join(f"ex:c{int(c)}" for c in store.types_of(e))
            f.write(f"ex:e{e} rdfs:label {_turtle_string(store.entities[e])}"
                    + (f" ;\n    a {types}" if types else "") + " .\n")
        for h, r, t in zip(store.heads.tolist(), store.rels.tolist(), store.tails.tolist(), strict=True):
            if t >= n_planned:
                kind = kinds[r] or "number"
                obj = f"{_turtle_string(store.entities[t])}^^<{XSD}{XSD_OF_KIND.get(kind, 'string')}>"
            else:
                obj = f"ex:e{t}"
            f.write(f"ex:e{h} ex:p{r} {obj} .\n")


def pick_chains(graph: Graph, pool: list[str], hops: int, n: int, rng: random.Random, used: set[str],
                relation_order: list[str]) -> list[Chain]:
    """``n`` chains from unused topics of ``pool``; the first relation taken in ``relation_order`` turn;
    every relation one of ``relation_order`` (the askable ones)."""
    askable = set(relation_order)
    out: list[Chain] = []
    order = list(pool)
    rng.shuffle(order)
    k = 0
    for topic in order:
        if len(out) == n:
            break
        if topic in used or not graph.relations_of.get(topic, set()) & askable:
            continue
        have = sorted(graph.relations_of[topic] & askable)
        wanted = relation_order[k % len(relation_order)]
        first = wanted if wanted in have else rng.choice(have)
        chain = [first]
        if hops == 2:
            mids = sorted(graph.out[(topic, first)])
            nxt = sorted({r for m in mids for r in graph.relations_of.get(m, ())} & askable)
            if not nxt:
                continue
            chain.append(rng.choice(nxt))
        found = graph.chain_from(topic, chain)
        if found is None:
            continue
        k += 1
        used.add(topic)
        out.append(found)
    if len(out) < n:
        raise SystemExit(f"only {len(out)} of {n} {hops}-hop chains found; use more --entities")
    return out


def template_question(c: Chain) -> str:
    phrase = c.topic
    for relation in c.chain:
        phrase = f"the {re.sub(r' of$', '', relation)} of {phrase}"
    return f"What is {phrase}?"


PARAPHRASE_SYSTEM = """You rewrite questions about an encyclopedia the way a real person would type them.
Use everyday words instead of the formal relation names; the notes list ways to say each relation.
Rules: keep every name exactly as written (same spelling, capitals and punctuation); keep the meaning exactly
(the same relations in the same order); answer with the rewritten question only, on one line, and nothing else."""

#: (user, assistant) turns shown before each question (names invented, not in the KG)
PARAPHRASE_SHOTS = [
    ("Style: casual.\nNote: birth place can be said: born in; place of birth.\n"
     "Question: What is the birth place of Tobin Ashvale?", "where was Tobin Ashvale born?"),
    ("Style: a polite, complete question.\nNote: doctoral advisor can be said: doctoral advisor; PhD supervisor.\n"
     "Note: alma mater can be said: studied at; graduated from.\n"
     "Question: What is the alma mater of the doctoral advisor of Ada Merriwether?",
     "Could you tell me where Ada Merriwether's PhD supervisor studied?"),
    ("Style: a short search query.\nNote: location city can be said: located in the city; city.\n"
     "Question: What is the location city of Harcastle Public Library?", "Harcastle Public Library city"),
    ("Style: start with the name.\nNote: record label can be said: released by; label.\n"
     "Note: founding year can be said: founded in year; year founded.\n"
     "Question: What is the founding year of the record label of Blue Lanterns?",
     "Blue Lanterns, the label that released it was founded in what year?"),
]

STYLES = ["casual.", "a short search query.", "a polite, complete question.", "lower case, except the names.",
          "start with the name.", "someone curious, in a full sentence."]


def _clean(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = re.sub(r"^(rewritten( question)?|question|answer)\s*:\s*", "", lines[0], flags=re.IGNORECASE)
    return line.strip().strip('"').strip("'").strip("`").strip()


class Paraphraser:
    """The embedded LLM rewrites a template question, seeded per question."""

    def __init__(self, spec: str, threads: int, relations: dict[str, Relation]) -> None:
        from simgrag.llm.registry import resolve_llm

        self.llm = resolve_llm(spec)
        if threads and hasattr(self.llm, "n_threads"):
            self.llm.n_threads = threads
        self.seeded = hasattr(self.llm, "seed")
        self.relations = relations
        self.calls = 0
        self.seconds = 0.0
        self.rejected: Counter[str] = Counter()

    def notes(self, c: Chain) -> list[str]:
        out = []
        for label in c.chain:
            phrases = self.relations[label].phrases
            if phrases:
                out.append(f"{label} can be said: {'; '.join(phrases)}.")
        return out

    def complete(self, template: str, notes: list[str], seed: int) -> str | None:
        from simgrag.errors import SimGRAGError
        from simgrag.llm.base import ChatMessage

        style = STYLES[random.Random(seed).randrange(len(STYLES))]
        user = f"Style: {style}\n" + "".join(f"Note: {n}\n" for n in notes) + f"Question: {template}"
        messages = [ChatMessage("system", PARAPHRASE_SYSTEM)]
        for shot_user, shot_assistant in PARAPHRASE_SHOTS:
            messages += [ChatMessage("user", shot_user), ChatMessage("assistant", shot_assistant)]
        messages = [*messages[:-1], ChatMessage("assistant", messages[-1].content, cache_after=True),
                    ChatMessage("user", user)]
        if self.seeded:
            self.llm.seed = seed  # type: ignore[attr-defined]  # read by LlamaCppLLM on every call
        start = time.perf_counter()
        try:
            response = self.llm.complete(messages, max_tokens=64, temperature=0.7 if self.seeded else 0.0,
                                         stop=["\n"])
        except SimGRAGError as exc:
            logger.warning("paraphrase failed for %r: %s", template, exc)
            return None
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - start
        return _clean(response.text)

    def paraphrase(self, template: str, c: Chain, seed: int) -> tuple[str, bool]:
        for attempt in range(2):
            text = self.complete(template, self.notes(c), seed + attempt)
            if not text or c.topic not in text:
                problem = "the name is not kept"
            elif len(text) > MAX_CHARS:
                problem = "too long"
            elif any(a.lower() in text.lower() for a in c.answers):
                problem = "names an answer"
            else:
                return text, text != template
            self.rejected[problem] += 1
            logger.info("rejected paraphrase %r of %r: %s", text, template, problem)
        return template, False


def question_seed(seed: int, split: str, c: Chain) -> int:
    return zlib.crc32(f"{seed}|{split}|{c.topic}|{'/'.join(c.chain)}".encode())


def make_rows(chains: list[Chain], split: str, seed: int, paraphraser: Paraphraser | None) -> list[dict[str, Any]]:
    rows = []
    for i, c in enumerate(chains, start=1):
        template = template_question(c)
        qseed = question_seed(seed, split, c)
        question, paraphrased = (paraphraser.paraphrase(template, c, qseed) if paraphraser is not None
                                 else (template, False))
        rows.append({"question": question, "answers": list(c.answers), "group": f"{len(c.chain)}-hop",
                     "hop": len(c.chain), "topic": c.topic, "chain": list(c.chain), "template": template,
                     "paraphrased": paraphrased, "seed": qseed})
        logger.info("%s %d/%d %s | %s", split, i, len(chains), template, question)
    return rows


def _type_word(store: Any, kg: Any, entity: str) -> str:
    """The most specific class of ``entity`` as words (``ChessPlayer`` → ``chess player``); ``value`` for
    a literal."""
    from simgrag.eval.synthetic_dbpedia import class_label

    eid = store.entity_id(entity)
    if eid is None or eid >= kg.num_entities:
        return "value"
    classes = [int(c) for c in store.types_of(eid)]
    if not classes:
        return "entity"
    deepest = max(classes, key=lambda c: kg.schema.classes[c].depth)
    return class_label(kg.schema.classes[deepest].name).lower()


def write_examples(path: Path, chains: list[Chain], store: Any, kg: Any, graph: Graph, seed: int) -> None:
    lines = ["# Few-shot examples for the DBpedia-shaped KG of benchmarks/dbpedia_kg.py "
             f"(--seed {seed}; generated, template wording).", "name: dbpedia-like", "examples:"]
    for c in chains:
        lines.append(f"  - question: {json.dumps(template_question(c))}")
        lines.append("    triples:")
        node, counts = c.topic, Counter[str]()
        frontier = {c.topic}
        for relation in c.chain:
            frontier = {t for n in frontier for t in graph.out[(n, relation)]}
            kind = _type_word(store, kg, sorted(frontier)[0])
            counts[kind] += 1
            unknown = f"UNKNOWN {kind} {counts[kind]}"
            lines.append(f"      - {json.dumps([node, relation, unknown], ensure_ascii=False)}")
            node = unknown
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entities", type=int, default=8000)
    parser.add_argument("--per-hop", type=int, default=30)
    parser.add_argument("--val-per-hop", type=int, default=20)
    parser.add_argument("--llm", default="llamacpp")
    parser.add_argument("--llm-threads", type=int, default=1)
    parser.add_argument("--no-paraphrase", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("simgrag", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start = time.perf_counter()

    triples, relations, store, kg = build(args.entities, args.seed)
    literal_values = {store.entities[i] for i in range(kg.num_entities, store.num_entities)}
    graph = Graph(triples, literal_values)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_turtle(args.out_dir / "dbpedia.ttl", store, kg, relations)
    (args.out_dir / "dbpedia.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")

    rng = random.Random(f"dbpedia-questions:{args.seed}")
    topics = sorted(h for h in graph.relations_of if h not in literal_values)
    rng.shuffle(topics)
    n = len(topics)
    pools = {"test": topics[: n * 7 // 10], "validation": topics[n * 7 // 10: n * 9 // 10],
             "examples": topics[n * 9 // 10:]}
    relation_order = sorted(label for label, r in relations.items() if r.askable)
    rng.shuffle(relation_order)
    used: set[str] = set()
    chains = {split: [c for hops in (1, 2)
                      for c in pick_chains(graph, pools[split], hops, per_hop, rng, used, relation_order)]
              for split, per_hop in (("test", args.per_hop), ("validation", args.val_per_hop))}
    example_chains = [c for hops in (1, 2) for c in pick_chains(graph, pools["examples"], hops, 6, rng, used,
                                                                 relation_order)]
    example_chains = [c for pair in zip(example_chains[:6], example_chains[6:], strict=True) for c in pair]

    paraphraser = None if args.no_paraphrase else Paraphraser(args.llm, args.llm_threads, relations)
    for split, name in (("test", "questions.jsonl"), ("validation", "validation.jsonl")):
        rows = make_rows(chains[split], split, args.seed, paraphraser)
        for row in rows:
            if sorted(graph.follow(row["topic"], row["chain"])) != row["answers"]:
                raise SystemExit(f"{name}: bad answers for {row['template']!r}")
        write_jsonl(args.out_dir / name, rows)
        done = sum(r["paraphrased"] for r in rows)
        asked = len({r["chain"][0] for r in rows} | {r["chain"][-1] for r in rows})
        print(f"{name}: {len(rows)} questions, {asked} relations asked, paraphrased {done}/{len(rows)}")
    write_examples(args.out_dir / "examples.yaml", example_chains, store, kg, graph, args.seed)
    from simgrag.pattern.examples import load_examples

    print(f"examples.yaml: {len(load_examples(args.out_dir / 'examples.yaml'))} examples")
    print(f"KG: {len(triples)} triples, {store.num_entities} entities, {store.num_relations} relations")
    if paraphraser is not None:
        print(f"LLM: {paraphraser.calls} calls, {paraphraser.seconds:.0f} s; rejected {dict(paraphraser.rejected)}")
    print(f"wall time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
