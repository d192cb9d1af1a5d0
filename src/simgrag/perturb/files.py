"""Perturb a KG file into another KG file, with its change log (the ``simgrag perturb`` command).

For an output ``OUT`` (every file written atomically):

- ``OUT``: the triples of 𝒢′ in the input's format family — ``pipe`` (``head|relation|tail``),
  ``tsv`` or ``csv`` (header ``head,relation,tail``); N-Triples input needs ``out_format``, because the
  store keeps readable names, not IRIs. Triples come in the store's order (by ids), not the input's.
- ``OUT.changes.jsonl``: one JSON object per changed edge, ``{"method", "edge", "old", "new"}`` with
  triples as ``[head, relation, tail]`` names, ``new`` null for a deletion (``edge`` is the row in the
  deduplicated store, in the order the edges were perturbed).
- ``OUT.isolated.txt``, only when some entity has no edge left (``ed``, the old tails of ``er``): their
  names, one per line. A triple file cannot hold an entity without an edge, so this sidecar is how the
  entity set 𝒱 is kept; :func:`load_perturbed` reads both back into one store over all of 𝒱.
- ``OUT.perturb.json``: method, level, seed, counts, the source's content hash, similarity if asked.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgrag import __version__
from simgrag.errors import ConfigError, KGError
from simgrag.fileio import atomic_path
from simgrag.kg.loader import load_kg
from simgrag.kg.readers import detect_format
from simgrag.kg.store import KGStore, Triple
from simgrag.perturb.base import Perturbation, TripleScorer
from simgrag.perturb.methods import perturb
from simgrag.perturb.similarity import KGSimilarity, kg_similarity

__all__ = ["PerturbReport", "load_perturbed", "perturb_file", "sidecar", "write_kg", "write_perturbation"]

logger = logging.getLogger(__name__)

WRITABLE = ("pipe", "tsv", "csv")


@dataclass(frozen=True)
class PerturbReport:
    """What :func:`perturb_file` did: the result, the files written, the similarity if asked."""

    perturbation: Perturbation
    files: dict[str, Path]
    similarity: KGSimilarity | None = None
    scorer: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        p = self.perturbation
        text = (f"{p.method} (level {p.level}, seed {p.seed}): {p.num_changed:,} of {p.original.num_triples:,} "
                f"edges changed → {self.files['kg']}; change log → {self.files['changes']}")
        if "isolated" in self.files:
            text += f"; {len(p.isolated_entities()):,} entities left without edges → {self.files['isolated']}"
        if self.similarity is not None:
            s = self.similarity
            text += f"\nSC2D {s.sc2d:.4f}  SD2 {s.sd2:.4f}"
            if s.ats is not None:
                text += f"  ATS {s.ats:.4f} (original KG: {s.ats_original:.4f})"
        return text


def sidecar(out: Path, suffix: str) -> Path:
    """``OUT`` + ``suffix`` (``.changes.jsonl``, ``.isolated.txt``, ``.perturb.json``)."""
    return out.with_name(out.name + suffix)


def write_kg(path: str | Path, triples: Iterable[Triple], fmt: str) -> int:
    """Write triples as ``pipe``, ``tsv`` or ``csv``; returns how many. Names that the format could not
    read back (a separator or line break inside, a ``#`` opening a pipe/TSV line) raise :class:`KGError`."""
    if fmt not in WRITABLE:
        raise ConfigError(f"cannot write a KG as {fmt!r}; use one of {', '.join(WRITABLE)}.")
    path = Path(path)
    count = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:
        if fmt == "csv":
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(["head", "relation", "tail"])
        sep = "|" if fmt == "pipe" else "\t"
        for triple in triples:
            names = triple.as_tuple()
            if fmt == "csv":
                _check(names, ("\n", "\r"), False)
                writer.writerow(names)
            else:
                _check(names, (sep, "\n", "\r"), True)
                fh.write(sep.join(names) + "\n")
            count += 1
    return count


def _check(names: tuple[str, str, str], forbidden: tuple[str, ...], no_comment: bool) -> None:
    bad = next((n for n in names if any(c in n for c in forbidden) or n != n.strip()), None)
    if bad is None and no_comment and names[0].startswith("#"):
        bad = names[0]
    if bad is not None:
        raise KGError(f"the name {bad!r} cannot be written in this format (it would not read back the same); "
                      "choose another output format.")


def _write_changes(path: Path, perturbation: Perturbation) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for change in perturbation.changes():
            fh.write(json.dumps(change.to_dict(), ensure_ascii=False) + "\n")


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_perturbation(out: Path, perturbation: Perturbation, fmt: str) -> dict[str, Path]:
    """Write the KG, the change log and (when needed) the isolated-entity list; returns the paths."""
    files = {"kg": out, "changes": sidecar(out, ".changes.jsonl")}
    write_kg(out, perturbation.triples(), fmt)
    _write_changes(files["changes"], perturbation)
    isolated = perturbation.isolated_entities()
    stale = sidecar(out, ".isolated.txt")
    if len(isolated):
        ent = perturbation.original.entities
        files["isolated"] = stale
        _write_text(stale, "".join(ent[int(i)] + "\n" for i in isolated))
    else:
        stale.unlink(missing_ok=True)  # from an earlier run into the same OUT
    return files


def load_perturbed(path: str | Path, *, format: str | None = None) -> KGStore:
    """A perturbed KG file read back with its ``.isolated.txt`` entities (as entities without edges)."""
    store, _ = load_kg(path, format=format)
    extra_path = sidecar(Path(path), ".isolated.txt")
    if not extra_path.is_file():
        return store
    known = set(store.entities)
    extra = [n for n in extra_path.read_text(encoding="utf-8").splitlines() if n and n not in known]
    return KGStore.from_ids(list(store.entities) + extra, store.relations, store.heads, store.rels, store.tails)


def _scorer(store: KGStore, scorer_dir: Path | None, epochs: int | None) -> tuple[TripleScorer, str]:
    from simgrag.perturb.scorer import DistMultScorer, ScorerConfig, train_scorer

    if scorer_dir is not None and DistMultScorer.exists(scorer_dir):
        return DistMultScorer.load(scorer_dir, store=store), f"loaded from {scorer_dir}"
    scorer = train_scorer(store, ScorerConfig() if epochs is None else ScorerConfig(epochs=epochs))
    where = f"trained in {scorer.seconds:.1f}s"
    if scorer_dir is not None:
        scorer.save(scorer_dir)
        where += f", saved to {scorer_dir}"
    return scorer, where


def perturb_file(kg_file: str | Path, out: str | Path, *, method: str, level: float, seed: int = 0,
                 format: str | None = None, out_format: str | None = None, similarity: bool = False,
                 scorer_dir: str | Path | None = None, scorer_epochs: int | None = None,
                 skip_bad_lines: bool = False) -> PerturbReport:
    """Load ``kg_file``, perturb it, write ``out`` and its sidecars, and measure the similarity if asked.

    ``rr`` and ATS need a triple scorer: loaded from ``scorer_dir`` when it holds one (it must have been
    trained on this KG), otherwise trained now (and saved to ``scorer_dir`` when given).
    """
    kg_path, out_path = Path(kg_file), Path(out)
    fmt = out_format or detect_format(kg_path, format)
    if fmt not in WRITABLE:
        raise ConfigError(f"{kg_path} is {fmt}; the perturbed KG can be written as {', '.join(WRITABLE)}: "
                          "pass an output format.")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    store, _ = load_kg(kg_path, format=format, skip_bad_lines=skip_bad_lines)
    timings["load_s"] = time.perf_counter() - t0
    scorer, scorer_note = None, None
    if method.strip().lower() == "rr" or similarity:
        t0 = time.perf_counter()
        scorer, scorer_note = _scorer(store, Path(scorer_dir) if scorer_dir else None, scorer_epochs)
        timings["scorer_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = perturb(store, method, level, seed=seed, scorer=scorer)
    timings["perturb_s"] = time.perf_counter() - t0
    files = write_perturbation(out_path, result, fmt)
    sim = None
    if similarity:
        t0 = time.perf_counter()
        sim = kg_similarity(store, result, scorer=scorer)
        timings["similarity_s"] = time.perf_counter() - t0
    files["meta"] = sidecar(out_path, ".perturb.json")
    meta: dict[str, Any] = {"simgrag_version": __version__, "source": str(kg_path), "source_format": fmt,
                            "source_content_hash": store.content_hash(), **result.summary(),
                            "scorer": scorer_note, "similarity": None if sim is None else sim.to_dict(),
                            "timings": {k: round(v, 3) for k, v in timings.items()}}
    _write_text(files["meta"], json.dumps(meta, indent=2) + "\n")
    return PerturbReport(result, files, sim, scorer_note, timings)

