"""A deterministic company KG (no movies, no geography) for measuring learning at index time on a KG of one's own.

    python benchmarks/company_kg.py -o company.tsv [--seed 0] [--questions company_questions.jsonl]

Writes ``head<TAB>relation<TAB>tail`` lines (about 250 triples, 10 relations: works_in, has_role,
reports_to, located_in, leads_project, contributes_to, uses_technology, funded_by, serves_client, mentors)
and, with ``--questions``, hand-templated 1- and 2-hop questions with their gold answers computed on the KG
(JSONL ``{"question", "answers", "group"}``, as ``simgrag bench qa --questions`` and
``simgrag grounding fit --questions`` read). The same seed gives the same files.

Measured with the embedded model (README "Your own KG", the learning step)::

    time simgrag index company.tsv -o /tmp/co.idx
    time simgrag ask /tmp/co.idx "Which department does the leader of Project Falcon work in?"
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

FIRST = ["Alice", "Bruno", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Keiko", "Liam",
         "Maya", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera", "Wen", "Yusuf"]
LAST = ["Abbott", "Brennan", "Castillo", "Dalton", "Eriksen", "Fischer", "Gallo", "Hartley", "Iqbal", "Jansen",
        "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quist", "Rahman", "Sorensen", "Tanaka"]
DEPARTMENTS = ["Platform Engineering", "Data Science", "Customer Success", "Finance", "Marketing", "Security"]
OFFICES = ["North Tower", "Riverside Campus", "Harbor Building", "Innovation Lab"]
ROLES = {"Platform Engineering": ["Software Engineer", "Site Reliability Engineer"],
         "Data Science": ["Data Scientist", "Machine Learning Engineer"],
         "Customer Success": ["Account Manager", "Support Specialist"], "Finance": ["Financial Analyst", "Controller"],
         "Marketing": ["Content Strategist", "Growth Marketer"], "Security": ["Security Analyst", "Penetration Tester"]}
PROJECTS = ["Project Falcon", "Project Orion", "Atlas Migration", "Project Helix", "Ledger Revamp", "Project Comet",
            "Quota Planner", "Project Nimbus", "Churn Radar", "Brand Refresh", "Zero Trust Rollout",
            "Budget Forecaster", "Search Relevance", "Onboarding Portal"]
TECHNOLOGIES = ["Kubernetes", "PostgreSQL", "Terraform", "PyTorch", "Rust", "Tableau", "Snowflake", "React",
                "Kafka", "Airflow", "Vault", "Spark"]
CLIENTS = ["Northwind Traders", "Contoso Bank", "Globex Retail", "Initech Insurance", "Umbrella Health",
           "Stark Logistics"]
EMPLOYEES = 48

Triple = tuple[str, str, str]


def company_triples(seed: int = 0) -> list[Triple]:
    """The KG's triples; the same ``seed`` gives the same list."""
    rng = random.Random(seed)
    names = [f"{first} {last}" for first in FIRST for last in LAST]
    rng.shuffle(names)
    people = names[:EMPLOYEES]
    triples: list[Triple] = []
    office_of = {dept: OFFICES[i % len(OFFICES)] for i, dept in enumerate(DEPARTMENTS)}
    triples += [(dept, "located_in", office) for dept, office in office_of.items()]
    dept_of = {person: DEPARTMENTS[i % len(DEPARTMENTS)] for i, person in enumerate(people)}
    staff: dict[str, list[str]] = defaultdict(list)
    for person in people:
        staff[dept_of[person]].append(person)
        triples.append((person, "works_in", dept_of[person]))
        triples.append((person, "has_role", rng.choice(ROLES[dept_of[person]])))
    for members in staff.values():  # the first of each department heads it; the rest report to them
        triples += [(person, "reports_to", members[0]) for person in members[1:]]
    for i, project in enumerate(PROJECTS):
        dept = DEPARTMENTS[i % len(DEPARTMENTS)]
        leader = staff[dept][1 + i // len(DEPARTMENTS)]
        triples.append((leader, "leads_project", project))
        contributors = rng.sample([p for p in people if p != leader], 2)
        triples += [(person, "contributes_to", project) for person in contributors]
        triples += [(project, "uses_technology", tech) for tech in rng.sample(TECHNOLOGIES, 1 + i % 2)]
        triples.append((project, "funded_by", dept))
        triples.append((project, "serves_client", CLIENTS[i % len(CLIENTS)]))
    seniors = [members[1] for members in staff.values()] + [members[2] for members in staff.values()]
    for i, mentor in enumerate(seniors[:10]):
        mentee = staff[dept_of[mentor]][-1 - i // len(DEPARTMENTS)]
        triples.append((mentor, "mentors", mentee))
    return list(dict.fromkeys(triples))


def templated_questions(triples: list[Triple]) -> list[dict[str, object]]:
    """1- and 2-hop questions from templates, each with every answer the KG holds."""
    forward: dict[tuple[str, str], set[str]] = defaultdict(set)
    backward: dict[tuple[str, str], set[str]] = defaultdict(set)
    for h, r, t in triples:
        forward[(h, r)].add(t)
        backward[(t, r)].add(h)
    questions: list[dict[str, object]] = []
    for project in PROJECTS:
        leaders = backward[(project, "leads_project")]
        depts = {d for p in leaders for d in forward[(p, "works_in")]}
        bosses = {b for p in leaders for b in forward[(p, "reports_to")]}
        questions.append({"question": f"Which department does the leader of {project} work in?",
                          "answers": sorted(depts), "group": "2hop"})
        if bosses:
            questions.append({"question": f"Who does the leader of {project} report to?", "answers": sorted(bosses),
                              "group": "2hop"})
        questions.append({"question": f"Which client does {project} serve?",
                          "answers": sorted(forward[(project, "serves_client")]), "group": "1hop"})
    for dept in DEPARTMENTS:
        projects = backward[(dept, "funded_by")]
        tech = {t for p in projects for t in forward[(p, "uses_technology")]}
        questions.append({"question": f"Which technologies do the projects funded by {dept} use?",
                          "answers": sorted(tech), "group": "2hop"})
    return questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="the KG file to write (TSV)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--questions", type=Path, help="also write templated questions with gold answers (JSONL)")
    args = parser.parse_args()
    triples = company_triples(args.seed)
    args.output.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    relations = sorted({r for _, r, _ in triples})
    print(f"{args.output}: {len(triples)} triples, {len(relations)} relations ({', '.join(relations)})")
    if args.questions is not None:
        rows = templated_questions(triples)
        args.questions.write_text("".join(json.dumps(q) + "\n" for q in rows), encoding="utf-8")
        print(f"{args.questions}: {len(rows)} questions")


if __name__ == "__main__":
    main()
