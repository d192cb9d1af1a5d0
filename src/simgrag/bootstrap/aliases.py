"""Relation aliases for a KG that has none: LLM paraphrases of each relation, kept when they embed near it.

For each relation the LLM sees a few of its triples and writes everyday phrases for it
(:func:`~simgrag.bootstrap.prompts.alias_messages`), then names the tail's role in a blank ("Portugal is
Spain's ___": :func:`~simgrag.bootstrap.prompts.role_messages`); two calls per relation. A phrase is kept
for relation ``r`` when, with the index's own embedder and the distance the relation search uses (L2
between embeddings),

- its distance to ``r``'s texts (the readable name and any alias the index has) is at most
  ``max_distance`` (``None``: no limit), and
- every other relation's texts, and the phrases kept for other relations, are at least ``margin``
  farther away (a role noun: only farther) —

so a kept phrase pulls a pattern's wording towards ``r`` and towards no other relation. The file is the
YAML ``relation: [phrase, …]`` that ``simgrag index --relation-aliases`` and ``simgrag aliases
install`` read, keyed by the KG's relation names; the index's existing aliases come first, and each
relation's dropped phrases are listed in a comment with the relation they were nearer to. Phrases that
name an entity of the KG are no paraphrases and are left out. Of twin relations (the same facts turned
round, :func:`~simgrag.kg.twins.twin_relations`) only the kept one is asked about, and a twin is no rival
of its pair. The LLM's phrases are kept in the progress log beside the file: a rerun asks the LLM only
about the relations it has not answered yet, and a rerun with another margin or distance asks it nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm.auto import tqdm

from simgrag.bootstrap.files import ProgressLog, progress_path
from simgrag.bootstrap.kinds import example_pairs
from simgrag.bootstrap.prompts import DEMO_PHRASES, alias_messages, read_phrases, role_messages
from simgrag.errors import ConfigError
from simgrag.fileio import write_bytes_atomic
from simgrag.index.directory import IndexDir, relation_text
from simgrag.kg.store import KGStore
from simgrag.kg.twins import twin_ids, twin_relations
from simgrag.llm.base import LLM, ChatMessage
from simgrag.llm.counting import CountingLLM
from simgrag.progress import progress_on

__all__ = ["AliasesReport", "AliasesSettings", "bootstrap_aliases", "filter_phrases"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AliasesSettings:
    """``per_relation`` phrases asked of the LLM per relation, ``shown`` triples shown with it;
    ``margin`` and ``max_distance`` of the filter (module docstring)."""

    per_relation: int = 8
    shown: int = 3
    margin: float = 0.1
    max_distance: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.per_relation < 1 or self.shown < 1 or self.margin < 0:
            raise ConfigError(f"phrases per relation and shown triples must be at least 1 and the margin not "
                              f"negative; got {self.per_relation}, {self.shown}, {self.margin}")


@dataclass(frozen=True)
class AliasesReport:
    output: Path
    progress: Path
    relations: int
    proposed: int
    kept: int
    llm_calls: int
    seconds: float
    aliases: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "output": str(self.output), "progress": str(self.progress)}


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """L2 distances between the rows of ``a`` and of ``b`` (as the relation index measures them)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.sqrt(np.clip(sq, 0.0, None))


def filter_phrases(proposed: dict[int, list[str]], base_texts: list[str], base_owner: np.ndarray,
                   vectors: dict[str, np.ndarray], names: Sequence[str], *, margin: float,
                   max_distance: float | None, role_nouns: Mapping[int, Sequence[str]] | None = None,
                   twins: Mapping[int, int] | None = None,
                   ) -> tuple[dict[int, list[str]], dict[int, list[tuple[str, str]]]]:
    """Kept phrases per relation id, and the dropped ones with why. ``base_texts`` (owned by
    ``base_owner``) are the relations' current texts; ``vectors`` embeds every text and phrase;
    ``names``: the relations' names, for the reasons. A relation's ``role_nouns`` (the answers to the
    blank "Portugal is Spain's ___") need only be nearer to it — its texts and the paraphrases kept for it —
    than to any other relation's texts (margin 0): the blank names the relation's own triples, and such nouns embed
    far from every relation name (MiniLM: "neighbour" 1.21 from ``borders with``, 1.20 from ``in
    continent``, 1.02 from the paraphrase "adjacent to"). ``twins`` (relation id → its twin's id, one way or
    both, :func:`~simgrag.kg.twins.twin_ids`): a relation's twin holds its facts turned round and is no rival."""
    pair = {a: b for t, k in (twins or {}).items() for a, b in ((t, k), (k, t))}
    nouns = {(rid, n) for rid, ns in (role_nouns or {}).items() for n in ns}
    kept: dict[int, list[str]] = {}
    dropped: dict[int, list[tuple[str, str]]] = {}
    own_distance: dict[tuple[int, str], float] = {}

    def screen(phrases_of: dict[int, list[str]], texts: list[str], owner: np.ndarray, need: float,
               rivals: np.ndarray) -> None:
        table = np.stack([vectors[t] for t in texts])
        for rid, fresh in phrases_of.items():
            if not fresh:
                continue
            rival = rivals & (owner != rid) & (owner != pair.get(rid, -1))
            for phrase, row in zip(fresh, _distances(np.stack([vectors[p] for p in fresh]), table), strict=True):
                own, others = row[owner == rid].min(), row[rival]
                other = others.min() if len(others) else np.inf
                if max_distance is not None and own > max_distance:
                    dropped.setdefault(rid, []).append((phrase, f"distance {own:.2f} > {max_distance:g}"))
                elif other - own < need:
                    nearest = int(owner[rival][int(np.argmin(others))])
                    dropped.setdefault(rid, []).append((phrase, f"as near to {names[nearest]!r}"))
                else:
                    kept.setdefault(rid, []).append(phrase)
                    own_distance[(rid, phrase)] = float(own)

    for rid, phrases in proposed.items():
        for phrase in (p for p in phrases if p in base_texts):  # already a text: its own (kept) or another's
            owner = int(base_owner[base_texts.index(phrase)])
            if owner != rid:
                dropped.setdefault(rid, []).append((phrase, f"a text of {names[owner]!r}"))
    fresh = {rid: [p for p in phrases if p not in base_texts] for rid, phrases in proposed.items()}
    every = np.ones(len(base_texts), dtype=bool)
    screen({rid: [p for p in ps if (rid, p) not in nouns] for rid, ps in fresh.items()}, base_texts, base_owner,
           margin, every)
    # role nouns: their own relation's kept paraphrases count as its texts; the other relations' do not (as
    # in _against_each_other, a role noun has no rival phrase)
    paraphrases = [(rid, p) for rid, ps in kept.items() for p in ps]
    screen({rid: [p for p in ps if (rid, p) in nouns] for rid, ps in fresh.items()},
           base_texts + [p for _, p in paraphrases],
           np.concatenate([base_owner, np.array([rid for rid, _ in paraphrases], dtype=base_owner.dtype)]), 0.0,
           np.concatenate([every, np.zeros(len(paraphrases), dtype=bool)]))
    return _against_each_other(kept, dropped, own_distance, vectors, names, margin, nouns)


def _against_each_other(kept: dict[int, list[str]], dropped: dict[int, list[tuple[str, str]]],
                        own_distance: dict[tuple[int, str], float], vectors: dict[str, np.ndarray],
                        names: Sequence[str], margin: float, nouns: set[tuple[int, str]],
                        ) -> tuple[dict[int, list[str]], dict[int, list[tuple[str, str]]]]:
    """Drop a phrase that is within ``margin`` of another relation's kept phrase. Role nouns are neither
    checked nor rivals: the blank tied them to their relation, and they embed far from everything ("city",
    a role noun of ``located in``, does not push "capital city" out of ``capital``)."""
    owners = [(rid, p) for rid, phrases in kept.items() for p in phrases]
    if len(owners) < 2:
        return kept, dropped
    matrix = np.stack([vectors[p] for _, p in owners])
    dist = _distances(matrix, matrix)
    ids = np.array([rid for rid, _ in owners])
    rival_ok = np.array([owner not in nouns for owner in owners])
    final: dict[int, list[str]] = {}
    for i, (rid, phrase) in enumerate(owners):
        rivals = dist[i][(ids != rid) & rival_ok]
        if (rid, phrase) not in nouns and len(rivals) and rivals.min() - own_distance[(rid, phrase)] < margin:
            rival = owners[int(np.flatnonzero((ids != rid) & rival_ok)[int(np.argmin(rivals))])]
            dropped.setdefault(rid, []).append((phrase, f"as near to {rival[1]!r} of {names[rival[0]]!r}"))
        else:
            final.setdefault(rid, []).append(phrase)
    return final, dropped


def _names_entity(store: KGStore, phrase: str, relation: str) -> bool:
    """``phrase`` names a KG entity (one of its word runs, in a usual capitalisation, is an entity's name
    of four or more letters that the relation's own name does not contain): a fact, not a paraphrase."""
    words = phrase.split()
    runs = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    own = relation_text(relation)
    return any(len(run) >= 4 and run not in own and any(store.entities.id_of(v) is not None for v in
                                                         (run, run.title(), run.capitalize(), run.upper()))
               for run in runs)


def _copied(phrase: str, relation: str) -> bool:
    """Whether ``phrase`` is one of the prompt's worked example's own words (copied from the demo) and not a word of
    ``relation`` itself."""
    return phrase.lower() in DEMO_PHRASES and phrase.lower() not in relation_text(relation).lower()


def bootstrap_aliases(index: IndexDir, llm: LLM, output: str | Path, settings: AliasesSettings | None = None, *,
                      resume: bool = True, show_progress: bool | None = None) -> AliasesReport:
    """Write a relation-aliases file for ``index`` to ``output`` (module docstring); the run's report."""
    settings = settings or AliasesSettings()
    output, t0 = Path(output), time.perf_counter()
    counted = CountingLLM(llm)
    store = index.store
    logged = {"kg": index.manifest.get("kg", {}).get("content_hash"), "llm": counted.name,  # what the LLM saw
              "per_relation": settings.per_relation, "shown": settings.shown, "seed": settings.seed}
    log = ProgressLog(progress_path(output), logged, resume=resume, command="simgrag aliases bootstrap")
    twins = twin_relations(store)  # asked about once per pair: the twin's phrases would be the same
    asked = {r["relation"]: r["phrases"] for r in log.of_kind("phrases") if r["relation"] not in twins}
    roles = {r["relation"]: r["phrases"] for r in log.of_kind("nouns") if r["relation"] not in twins}
    for rid in tqdm(range(store.num_relations), desc="bootstrap aliases", unit="relation",
                    disable=not progress_on(show_progress)):
        name = store.relations[rid]
        if (name in asked and name in roles) or name in twins:
            continue
        pairs = example_pairs(store, rid, settings.shown, settings.seed)
        shown = {n.lower() for pair in pairs for n in pair}

        def ask(messages: list[ChatMessage], key: str, name: str = name, shown: set[str] = shown) -> list[str]:
            response = counted.complete(messages, max_tokens=12 * settings.per_relation + 40, temperature=0.0)
            return [p for p in read_phrases(response.text, settings.per_relation, key)
                    if p not in shown and not _names_entity(store, p, name) and not _copied(p, name)]

        if name not in asked:
            asked[name] = ask(alias_messages(relation_text(name), pairs, settings.per_relation), "phrases")
            log.append({"kind": "phrases", "relation": name, "phrases": asked[name]})
        if name not in roles:
            roles[name] = ask(role_messages(pairs), "nouns")
            log.append({"kind": "nouns", "relation": name, "phrases": roles[name]})
    proposed = {store.relations.id_of(n) or 0: list(dict.fromkeys(phrases + roles.get(n, [])))
                for n, phrases in asked.items() if store.relations.id_of(n) is not None}
    base_texts, base_owner = list(index.relation_texts), np.asarray(index.relation_owner)
    every = list(dict.fromkeys(base_texts + [p for ps in proposed.values() for p in ps]))
    vectors = dict(zip(every, index.embedder.encode(every, show_progress=False), strict=True))
    nouns = {store.relations.id_of(n) or 0: [p for p in found if p not in asked.get(n, [])]
             for n, found in roles.items() if store.relations.id_of(n) is not None}
    kept, dropped = filter_phrases(proposed, base_texts, base_owner, vectors, list(store.relations),
                                   margin=settings.margin, max_distance=settings.max_distance, role_nouns=nouns,
                                   twins=twin_ids(store))
    existing = {rid: [t for t, o in zip(base_texts, base_owner, strict=True)
                      if o == rid and t != relation_text(store.relations[rid])] for rid in range(store.num_relations)}
    table = {store.relations[rid]: existing[rid] + kept.get(rid, []) for rid in range(store.num_relations)}
    _write(output, table, {store.relations[r]: d for r, d in dropped.items()}, counted.name, settings)
    return AliasesReport(output, log.path, store.num_relations, sum(map(len, proposed.values())),
                         sum(map(len, kept.values())), counted.calls, round(time.perf_counter() - t0, 3),
                         {k: v for k, v in table.items() if v})


def _write(output: Path, table: dict[str, list[str]], dropped: dict[str, list[tuple[str, str]]], llm: str,
           settings: AliasesSettings) -> None:
    limit = "" if settings.max_distance is None else f", max distance {settings.max_distance:g}"
    lines = [f"# Relation aliases bootstrapped by `simgrag aliases bootstrap` (LLM {llm}, margin {settings.margin:g}"
             f"{limit}): phrases that embed\n# near their relation and farther from every other one. Edit freely, "
             "then install them: simgrag aliases install INDEX_DIR FILE\n# (or build with: simgrag index KG_FILE "
             "-o INDEX_DIR --relation-aliases FILE)\n"]
    for name, phrases in table.items():
        if dropped.get(name):
            lines.append("# dropped: " + "; ".join(f"{p!r} ({w})" for p, w in dropped[name]) + "\n")
        lines.append(yaml.safe_dump({name: phrases}, allow_unicode=True, default_flow_style=None, width=10_000))
    write_bytes_atomic(output, "".join(lines).encode("utf-8"))
