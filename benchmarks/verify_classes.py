"""Verify accuracy per class — supported / refuted / not in the KG — on claims generated from the bundled sample
KG, and the time per claim (p50 / p90). Run with the simgrag under test first on ``PYTHONPATH`` (e.g. a worktree
of an older commit, for a before/after).

    .venv/bin/simgrag index src/simgrag/data/sample/movies.txt -o /tmp/sample.idx \
        --relation-aliases src/simgrag/data/aliases/metaqa.yaml --no-learn -q
    .venv/bin/python benchmarks/verify_classes.py --index /tmp/sample.idx --per-class 10 -o runs/verify_after.jsonl

Supported and refuted claims come from :func:`simgrag.eval.claims.generate_claims` (one-hop; refuted: an entity
or the relation swapped); "not in KG" claims are supported ones with the film swapped for a made-up title
(expected "Not enough evidence"). ``--llm-cache none`` times every claim with real LLM calls (the verify p50).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from simgrag.eval.claims import RELATION_PREDICATES, generate_claims
from simgrag.pipeline import SimGRAG

#: made-up film titles: no entity of the sample KG has these names
_FIRST = ["Glass", "Velvet", "Hollow", "Crimson", "Silent", "Iron", "Paper", "Winter", "Amber", "Distant"]
_SECOND = ["Orchard", "Lantern", "Harbor", "Meridian", "Tide", "Compass", "Garden", "Signal", "Furnace", "Atlas"]


def not_in_kg(claims: list[Any], n: int, seed: int) -> list[dict[str, Any]]:
    """Supported one-hop claims with the film swapped for a made-up title: the KG holds nothing on it."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for claim in claims:
        if len(out) >= n:
            break
        _, rel, tail = claim.facts[0]
        title = f"The {rng.choice(_FIRST)} {rng.choice(_SECOND)}"
        out.append({"text": f"{title} {RELATION_PREDICATES[rel][0].format(o=tail)}.", "label": "Not enough evidence",
                    "facts": [[title, rel, tail]]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", required=True)
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-cache", default="runs/llm.sqlite")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    options = {} if args.llm_cache == "none" else {"cache": args.llm_cache}
    engine = SimGRAG(args.index, llm="llamacpp", llm_options=options)
    store = engine.index.store
    topics = sorted({store.triple(t).head for t in range(0, store.num_triples, 7)})
    claims = generate_claims(store, topics, n=2 * args.per_class, seed=args.seed, shapes=("one_hop",))
    supported = [c for c in claims if c.label == "Supported"][: args.per_class]
    refuted = [c for c in claims if c.label == "Refuted"][: args.per_class]
    rows: list[dict[str, Any]] = [{"class": "supported", "text": c.text, "facts": c.facts} for c in supported]
    rows += [{"class": "refuted", "text": c.text, "facts": c.facts, "corruption": c.corruption} for c in refuted]
    rows += [{"class": "not_in_kg", **r} for r in not_in_kg(supported + [c for c in claims if c.label == "Supported"],
                                                            args.per_class, args.seed)]
    out = Path(args.output)
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            t0 = time.perf_counter()
            result = engine.verify(row["text"]).to_dict()
            row.update(got=result["label"], seconds=round(time.perf_counter() - t0, 2),
                       contradictions=[c["held"] for c in result.get("contradictions", [])],
                       evidence=bool(result.get("evidence") and result["evidence"]["matches"]),
                       reason=result["reason"], pattern=result["pattern"])
            fh.write(json.dumps(row) + "\n")
            fh.flush()
    seconds = sorted(r["seconds"] for r in rows)
    print(f"seconds per claim: p50 {seconds[len(seconds) // 2]:.2f}, p90 {seconds[int(0.9 * (len(seconds) - 1))]:.2f}, "
          f"max {seconds[-1]:.2f} ({len(seconds)} claims, LLM cache {args.llm_cache})")
    want = {"supported": "Supported", "refuted": "Refuted", "not_in_kg": "Not enough evidence"}
    for cls in want:
        got = [r for r in rows if r["class"] == cls]
        right = sum(r["got"] == want[cls] for r in got)
        shown = sum(r["got"] == "Refuted" and bool(r["contradictions"]) for r in got)
        print(f"{cls}: {right}/{len(got)} {want[cls]} ({100 * right / max(len(got), 1):.1f} %); labels "
              f"{dict(Counter(r['got'] for r in got))}; Refuted with a contradicting triple: {shown}")


if __name__ == "__main__":
    main()
