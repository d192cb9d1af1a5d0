"""KG perturbations (OKGQA-P, Sui et al., 2025, §3.2) and KG-similarity metrics (App. A.7).

The robustness lab perturbs a KG 𝒢 into 𝒢′ by one of four heuristics of Raman et al. (2020) —
relation swapping ``rs``, relation replacement ``rr``, edge rewiring ``er``, edge deletion ``ed`` —
at a level (the fraction of edges changed), and measures how far 𝒢′ is from 𝒢 with ATS (semantic,
under a triple scorer trained on 𝒢), SC2D and SD2 (structural)::

    methods.py      the four perturbations → Perturbation (new triples + change log)
    scorer.py       DistMult triple scorer s_𝒢: training (torch, CPU), save/load (numpy)
    similarity.py   ATS, SC2D, SD2
    files.py        KG file → perturbed KG file + change log (``simgrag perturb``)

Names are imported lazily, so importing the package does not import torch or scipy.
"""

from __future__ import annotations

from simgrag._lazy import lazy_exports

_EXPORTS = {
    "Change": "simgrag.perturb.base",
    "Perturbation": "simgrag.perturb.base",
    "TripleScorer": "simgrag.perturb.base",
    "perturbed_count": "simgrag.perturb.base",
    "METHODS": "simgrag.perturb.methods",
    "edge_deletion": "simgrag.perturb.methods",
    "edge_rewiring": "simgrag.perturb.methods",
    "perturb": "simgrag.perturb.methods",
    "relation_replacement": "simgrag.perturb.methods",
    "relation_swapping": "simgrag.perturb.methods",
    "DistMultScorer": "simgrag.perturb.scorer",
    "ScorerConfig": "simgrag.perturb.scorer",
    "train_scorer": "simgrag.perturb.scorer",
    "KGSimilarity": "simgrag.perturb.similarity",
    "ats": "simgrag.perturb.similarity",
    "kg_similarity": "simgrag.perturb.similarity",
    "sc2d": "simgrag.perturb.similarity",
    "sd2": "simgrag.perturb.similarity",
    "PerturbReport": "simgrag.perturb.files",
    "load_perturbed": "simgrag.perturb.files",
    "perturb_file": "simgrag.perturb.files",
    "write_kg": "simgrag.perturb.files",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
