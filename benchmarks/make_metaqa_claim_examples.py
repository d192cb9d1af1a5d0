"""Write the few-shot examples for turning MetaQA-KB claims into patterns (fact verification).

Claims are generated from DEV question topics with a seed the benchmark does not use; each example's
pattern is the facts the claim states (a refuted claim states a false fact: its pattern is that fact),
relation names in their readable form, every entity named.

    python benchmarks/make_metaqa_claim_examples.py --metaqa-dir ../shared/data/MetaQA
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from simgrag.eval.claims import ALL_SHAPES, generate_claims
from simgrag.eval.metaqa import load_metaqa
from simgrag.index.directory import relation_text
from simgrag.kg.loader import load_kg

OUT = Path(__file__).resolve().parents[1] / "src/simgrag/data/examples/metaqa_claims.yaml"
RELATIONS = ["directed by", "written by", "starred actors", "release year", "in language", "has tags",
             "has genre", "has imdb votes", "has imdb rating"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--per-shape", type=int, default=4)
    args = parser.parse_args()
    store, _ = load_kg(args.metaqa_dir / "kb.txt")
    topics = sorted({q.topic for hop in (1, 2, 3) for q in load_metaqa(args.metaqa_dir, hop, "dev")})
    claims = generate_claims(store, topics, n=args.per_shape * len(ALL_SHAPES), seed=args.seed)
    examples = [{"question": c.text, "triples": [[h, relation_text(r), t] for h, r, t in c.facts]}
                for c in claims]
    # interleave shapes so the static prefix shows each shape early
    examples = examples[::2] + examples[1::2]
    doc = {
        "name": "metaqa_claims",
        "relations": RELATIONS,
        "instructions": ("The input is a claim, not a question: write the facts it states as triples, "
                         "every entity named exactly as in the claim, movie first; no UNKNOWN nodes."),
        "examples": examples,
    }
    header = ("# Few-shot examples for claims → patterns "
              "(made by benchmarks/make_metaqa_claim_examples.py from DEV topics).\n")
    OUT.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=200), encoding="utf-8")
    print(f"{len(examples)} examples -> {OUT}")


if __name__ == "__main__":
    main()
