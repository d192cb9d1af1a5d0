"""Entity linking from noisy mentions: how often does each embedder put the right entity first?

Issue #7 needs an embedder that can encode ~10M entity names on two cores. This measures, for
each embedder, speed (names/s while encoding the corpus) and quality: recall@1/@10 of the right
entity for noisy mentions of MetaQA entity names, by L2 distance between unit vectors (as the
vector index does).

- targets: ``--n`` MetaQA entity names (seeded sample; each has a word of 4+ letters to mis-type);
- mentions, two conditions made by :mod:`simgrag.eval.synthetic_dbpedia.paraphrase`:
  ``typo`` (one keyboard slip) and ``mixed`` (1–2 edits: typo, word order, abbreviation, case);
- corpus: the targets plus ``--distractors`` other MetaQA entity names (default: all of them).

Embedders (``--embedders``, comma-separated registry specs) plus ``distilled``: MiniLM distilled
here into a static model (every WordPiece token encoded once by MiniLM, centred; a name is the mean
of its tokens' vectors; saved in the Model2Vec layout under ``--cache``, default
``~/.cache/simgrag/static``), the model2vec idea done offline.

    nice python benchmarks/entity_linking_embedders.py --out runs/entity_linking.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from simgrag.config import cache_dir, metaqa_dir
from simgrag.embed import Embedder, resolve_embedder
from simgrag.eval.synthetic_dbpedia.paraphrase import paraphrase_name, typo


def _entities(metaqa: Path) -> list[str]:
    names: set[str] = set()
    with (metaqa / "kb.txt").open(encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 3:
                names.update((parts[0], parts[2]))
    return sorted(names)


def _mentions(targets: list[str], seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    mixed = []
    for name in targets:
        text, _ = paraphrase_name(name, rng, edits=rng.choice((1, 2)))
        mixed.append(text if text != name else typo(name, rng))
    return {"typo": [typo(name, rng) for name in targets], "mixed": mixed}


def distill_minilm(cache: Path) -> Path:
    """A static model from the bundled MiniLM: one vector per WordPiece token (Model2Vec layout)."""
    out = cache / "minilm-static-centered"
    if (out / "model.safetensors").is_file():
        return out
    import torch
    from safetensors.numpy import save_file
    from sentence_transformers import SentenceTransformer

    from simgrag.embed.bundled import bundled_model_dir

    source = bundled_model_dir()
    model = SentenceTransformer(str(source), device="cpu")
    tok = model.tokenizer
    ids = torch.arange(tok.vocab_size)
    cls, sep = tok.cls_token_id, tok.sep_token_id
    rows = []
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in ids.split(1024):
            input_ids = torch.stack([torch.full_like(batch, cls), batch, torch.full_like(batch, sep)], dim=1)
            feats = model({"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)})
            rows.append(feats["sentence_embedding"].numpy())
    out.mkdir(parents=True, exist_ok=True)
    matrix = np.concatenate(rows)
    matrix -= matrix.mean(axis=0)  # centred: the direction every token shares would swamp a name's mean
    save_file({"embeddings": matrix.astype(np.float32)}, str(out / "model.safetensors"))
    shutil.copy(source / "tokenizer.json", out / "tokenizer.json")
    print(f"distilled {tok.vocab_size} MiniLM tokens in {time.perf_counter() - start:.1f}s → {out}", file=sys.stderr)
    return out


def _recall(corpus: np.ndarray, queries: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    hits1 = hits10 = 0
    for lo in range(0, len(queries), 256):
        scores = queries[lo:lo + 256] @ corpus.T  # unit vectors: max dot product = min L2
        top = np.argpartition(-scores, 10, axis=1)[:, :10]
        best = np.argmax(scores, axis=1)
        g = gold[lo:lo + 256]
        hits1 += int((best == g).sum())
        hits10 += int((top == g[:, None]).any(axis=1).sum())
    return {"recall@1": hits1 / len(gold), "recall@10": hits10 / len(gold)}


def _run(spec: str, emb: Embedder, corpus: list[str], gold: np.ndarray,
         mentions: dict[str, list[str]]) -> dict[str, Any]:
    emb.encode(corpus[:64])  # load the model outside the timing
    start = time.perf_counter()
    vectors = emb.encode(corpus, batch_size=256, show_progress=False)
    seconds = time.perf_counter() - start
    row: dict[str, Any] = {"embedder": spec, "name": emb.name, "dim": emb.dim,
                           "names_per_s": round(len(corpus) / seconds, 1), "corpus": len(corpus)}
    for condition, texts in mentions.items():
        row[condition] = _recall(vectors, emb.encode(texts, batch_size=256, show_progress=False), gold)
    print(json.dumps(row), file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-dir", type=Path, default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--distractors", type=int, default=None, help="default: every other MetaQA entity")
    parser.add_argument("--embedders", default="static,static:wordllama:128,static:wordllama:64,distilled,minilm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=cache_dir() / "static")
    parser.add_argument("--out", type=Path, default=Path("runs/entity_linking.json"))
    args = parser.parse_args()
    folder = args.metaqa_dir or metaqa_dir()
    if folder is None:
        sys.exit("MetaQA not found: pass --metaqa-dir or set SIMGRAG_METAQA_DIR")
    names = _entities(folder)
    rng = random.Random(args.seed)
    targets = rng.sample([n for n in names if any(len(w) >= 4 and w.isalpha() for w in n.split())], args.n)
    others = sorted(set(names) - set(targets))
    if args.distractors is not None:
        others = rng.sample(others, args.distractors)
    corpus = targets + others
    gold = np.arange(len(targets))
    mentions = _mentions(targets, args.seed)
    rows = []
    for spec in [s.strip() for s in args.embedders.split(",") if s.strip()]:
        emb = resolve_embedder(f"static:{distill_minilm(args.cache)}" if spec == "distilled" else spec)
        rows.append(_run(spec, emb, corpus, gold, mentions))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"n": args.n, "seed": args.seed, "corpus": len(corpus), "rows": rows}, indent=2))
    print("| embedder | dim | names/s | typo R@1 | typo R@10 | mixed R@1 | mixed R@10 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['dim']} | {r['names_per_s']:,.0f} | {r['typo']['recall@1']:.3f} | "
              f"{r['typo']['recall@10']:.3f} | {r['mixed']['recall@1']:.3f} | {r['mixed']['recall@10']:.3f} |")


if __name__ == "__main__":
    main()
