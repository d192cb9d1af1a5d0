"""The geography held-out set rewritten in the surface conventions of WorldCup2014 / PathQuestion.

A KG nobody here has tuned on does not only hold other facts: it spells them differently. The PathQuestion
and WorldCup2014 data the SimGRAG paper evaluates on write entities as lower-case ``snake_case`` identifiers
(``new_zealand``), relations as ``snake_case`` verbs phrases, keep an inverse twin of every relation, and
ask questions in lower case with a detached possessive and question mark (``what is the capital of
new_zealand 's neighbour ?``). This module rewrites every file of the ``geo`` set that way — the KG, the
questions, the 12-example file and the relation aliases — so that the same facts and the same questions
test the engine on those conventions (``heldout_eval.py --set geo-wc``):

    Peru|capital|Lima                 →  peru|has_capital|lima
                                         lima|has_capital_inverse|peru
    "What's the capital of Peru?"     →  "what 's the capital of peru ?"

Relations: capital → has_capital, continent → in_continent, currency → uses_currency, official language
→ official_language, borders → borders_with, located in → is_in_country; every triple is also written
reversed with ``<relation>_inverse``. The aliases file keeps its texts under the new names (none for the
inverse relations: a user writes aliases for the relations they think in). Deterministic.

    python benchmarks/heldout/wc_style.py --kg runs/heldout/geo_kg.txt --out runs/heldout/wc
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from simgrag.pattern.graph import is_unknown

HERE = Path(__file__).resolve().parent

RELATIONS: Mapping[str, str] = {
    "capital": "has_capital",
    "continent": "in_continent",
    "currency": "uses_currency",
    "official language": "official_language",
    "borders": "borders_with",
    "located in": "is_in_country",
}
INVERSE_SUFFIX = "_inverse"
#: the examples file's instructions, as its user would write them for these relation names (a word-for-word
#: substitution into the geo file's sentence reads "linked to their has_capital city")
INSTRUCTIONS = ("Countries are linked to their capital city (has_capital), continent (in_continent), currency "
                "(uses_currency), official languages (official_language) and bordering countries (borders_with); "
                "cities are linked to their country (is_in_country). Every relation also has an _inverse twin: "
                "write facts forwards, country first, and city first for is_in_country.")
FILES = ("kg.txt", "questions.jsonl", "examples.yaml", "aliases.yaml")


def entity(name: str) -> str:
    """``"Name, Country (city)"`` → ``"name_country_(city)"``: lower case, words joined by underscores."""
    return "_".join(name.replace(",", " ").lower().split())


def relation(name: str) -> str:
    """A geo relation's new name; a chain step's ``~`` (backwards) mark is kept."""
    backwards = name.startswith("~")
    bare = name.lstrip("~").strip()
    if bare not in RELATIONS:
        raise ValueError(f"unknown geography relation {bare!r}; expected one of {sorted(RELATIONS)}")
    return ("~" if backwards else "") + RELATIONS[bare]


def question(text: str, names: list[str]) -> str:
    """Lower case, each of ``names`` (entities the question names) as its identifier, possessives
    detached (``peru 's``) and one ``?`` at the end, as PathQuestion writes them."""
    out = text
    for name in sorted(names, key=len, reverse=True):
        out = out.replace(name, f"\x00{entity(name)}\x01")
    out = out.lower()
    out = re.sub(r"[’']s\b", " 's", out)
    out = re.sub(r"[?.!]+\s*$", "", out.strip())
    out = out.replace("\x00", "").replace("\x01", "")
    return " ".join(out.split()) + " ?"


def _is_wc(name: str) -> bool:
    return name.removesuffix(INVERSE_SUFFIX) in RELATIONS.values()


def kg_lines(lines: list[str]) -> list[str]:
    """``head|relation|tail`` lines with each triple also written reversed with ``<relation>_inverse``."""
    out: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        head, rel, tail = line.split("|")
        h, r, t = entity(head), relation(rel), entity(tail)
        out += [f"{h}|{r}|{t}", f"{t}|{r}{INVERSE_SUFFIX}|{h}"]
    return out


def _named_entities(example_triples: list[list[str]]) -> list[str]:
    return [x for t in example_triples for x in (t[0], t[2]) if not is_unknown(x)]


def examples(data: Mapping[str, Any]) -> dict[str, Any]:
    """An examples file (the geo 12-example format) with its questions, triples and relation names rewritten."""
    out: dict[str, Any] = {"name": f"{data.get('name', 'geography')}-wc"}
    out["relations"] = [relation(r) for r in data.get("relations", [])]
    out["instructions"] = INSTRUCTIONS
    rewritten = []
    for ex in data["examples"]:
        triples = ex["triples"]
        rewritten.append({
            "question": question(ex["question"], _named_entities(triples)),
            "triples": [[x if is_unknown(x) else entity(x) if i != 1 else relation(x)
                         for i, x in enumerate(t)] for t in triples],
        })
    out["examples"] = rewritten
    return out


def write_wc_set(kg: Path, questions_file: Path, examples_file: Path, aliases_file: Path | None,
                 out: Path) -> dict[str, Path | None]:
    """Write the rewritten KG, questions, examples and aliases into ``out``; the paths written (``None`` for
    the aliases without an aliases file)."""
    out.mkdir(parents=True, exist_ok=True)
    kg_out, q_out, ex_out, al_out = (out / name for name in FILES)
    kg_out.write_text("\n".join(kg_lines(kg.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
    rows = []
    for line in questions_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        row["question"] = question(row["question"], [row["topic"]])
        row["topic"] = entity(row["topic"])
        row["chain"] = [relation(step) for step in row["chain"]]
        rows.append(json.dumps(row, ensure_ascii=False))
    q_out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ex = examples(yaml.safe_load(examples_file.read_text(encoding="utf-8")))
    ex_out.write_text(yaml.safe_dump(ex, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    if aliases_file is not None:
        aliases = yaml.safe_load(aliases_file.read_text(encoding="utf-8")) or {}
        # a file already under the new names (one bootstrapped on the rewritten index) is kept as it is
        renamed = {k if _is_wc(k) else relation(k): v for k, v in aliases.items()}
        al_out.write_text(yaml.safe_dump(renamed, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    return {"kg.txt": kg_out, "questions.jsonl": q_out, "examples.yaml": ex_out,
            "aliases.yaml": al_out if aliases_file is not None else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kg", type=Path, required=True, help="the geo KG (make_geo_kg.py's output)")
    p.add_argument("--questions", type=Path, default=HERE / "geo_questions.jsonl")
    p.add_argument("--examples", type=Path, default=HERE / "geo_examples.yaml")
    p.add_argument("--aliases", default=str(HERE / "geo_aliases.yaml"), help="an aliases file, or 'none'")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    aliases = None if args.aliases.lower() == "none" else Path(args.aliases)
    for name, path in write_wc_set(args.kg, args.questions, args.examples, aliases, args.out).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
