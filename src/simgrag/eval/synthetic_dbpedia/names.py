"""Readable, unique entity names, made class by class from the word lists and name schemes.

A class's names come from its scheme's weighted *stems* (``{first} {surname}``, ``{place}``, …) put
into one of its *words* (``* Hospital``, ``University of *``, ``Battle of *``); slots draw words
uniformly from ``words.txt``. Names are drawn chunk by chunk with numpy (one random stream per
chunk, so they are the same for a seed whatever else is generated) and kept as one UTF-8 blob with
offsets, never as millions of Python strings.

Names repeat (a KG of millions of people has many John Smiths). As DBpedia does, the first keeps
the plain name and the others get their class: ``John Smith (soccer player)``, then
``John Smith (soccer player 2)``. Plain names never contain parentheses, so the result is unique.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from tqdm.auto import tqdm

from simgrag.eval.synthetic_dbpedia.layout import Layout
from simgrag.eval.synthetic_dbpedia.schema import ClassSpec, Schema, class_label, load_schemes, load_words
from simgrag.kg.names import NameTable

__all__ = ["CHUNK", "NameBlob", "NameMaker", "build_names", "class_segments"]

CHUNK = 65536  # entities per chunk; part of what a seed means, do not change lightly
_SLOT = re.compile(r"\{(\w+)(\^?)\}")
_STEM = "\x00"


@dataclass(frozen=True)
class _Template:
    literals: tuple[str, ...]  # one more than slots
    slots: tuple[np.ndarray, ...]  # object arrays of words

    def render(self, count: int, rng: np.random.Generator) -> np.ndarray:
        out = np.full(count, self.literals[0], dtype=object)
        for words, literal in zip(self.slots, self.literals[1:], strict=True):
            out = out + words[rng.integers(0, len(words), size=count)]
            if literal:
                out = out + literal
        return out


class NameMaker:
    """Draws names for entities of a class (templates compiled once per class)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.words = {k: np.array(v, dtype=object) for k, v in load_words().items()}
        self.capitalized = {k: np.array([w[:1].upper() + w[1:] for w in v], dtype=object)
                            for k, v in load_words().items()}
        self.macros, self.schemes = load_schemes()
        self._cache: dict[int, tuple[list[_Template], np.ndarray]] = {}

    def _compile(self, text: str) -> _Template:
        for macro, body in self.macros.items():
            text = text.replace(macro, body)
        literals, slots, pos = [], [], 0
        for match in _SLOT.finditer(text):
            literals.append(text[pos:match.start()])
            table = self.capitalized if match.group(2) else self.words
            slots.append(table[match.group(1)])
            pos = match.end()
        literals.append(text[pos:])
        return _Template(tuple(literals), tuple(slots))

    def _class_words(self, spec: ClassSpec) -> list[str]:
        if spec.words:
            return list(spec.words)
        default = self.schemes[spec.scheme]["words"]
        if isinstance(default, str) and default.startswith("@"):
            return list(load_words()[default[1:]])
        if default is None:
            return [re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", spec.name)]
        return list(default)

    def templates(self, c: int) -> tuple[list[_Template], np.ndarray]:
        """Every (stem, word) template of class ``c`` and their probabilities."""
        if c not in self._cache:
            spec = self.schema.classes[c]
            stems = self.schemes[spec.scheme]["stems"]
            words = [w.replace("*", _STEM) if "*" in w or "{" in w else f"{_STEM} {w}"
                     for w in self._class_words(spec)]
            texts, probs = [], []
            total = sum(weight for _, weight in stems)
            for stem, weight in stems:
                for word in words:
                    texts.append(word.replace(_STEM, stem))
                    probs.append(weight / total / len(words))
            self._cache[c] = ([self._compile(t) for t in texts], np.asarray(probs))
        return self._cache[c]

    def draw(self, c: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` names (object array of str) for entities of class ``c``."""
        templates, probs = self.templates(c)
        which = rng.choice(len(templates), size=count, p=probs)
        out = np.empty(count, dtype=object)
        for t in np.unique(which):
            rows = np.flatnonzero(which == t)
            out[rows] = templates[int(t)].render(len(rows), rng)
        return out


class NameBlob:
    """Unique names as one UTF-8 ``bytes`` blob plus ``offsets`` (int64, N+1)."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:
        return self.blob[int(self.offsets[i]):int(self.offsets[i + 1])].decode("utf-8")

    def many(self, ids: np.ndarray, blob: bytes | None = None) -> list[bytes]:
        """The encoded names of ``ids`` (from ``blob``, an equal-length variant, when given)."""
        data = self.blob if blob is None else blob
        starts, ends = self.offsets[ids].tolist(), self.offsets[np.asarray(ids) + 1].tolist()
        return [data[s:e] for s, e in zip(starts, ends, strict=True)]

    def table(self) -> NameTable:
        """The names as a :class:`~simgrag.kg.names.NameTable` (for building a store)."""
        return NameTable(np.frombuffer(self.blob, dtype=np.uint8), self.offsets)


def class_segments(layout: Layout, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """``(class, first id, last id + 1)`` for the classes owning ids ``start:end``."""
    c = int(layout.class_of(np.array([start]))[0])
    while start < end:
        stop = min(end, int(layout.own_start[c] + layout.own_count[c]))
        yield c, start, stop
        start, c = stop, c + 1


def _hashes(encoded: list[bytes]) -> np.ndarray:
    digest = b"".join(hashlib.blake2b(e, digest_size=8).digest() for e in encoded)
    return np.frombuffer(digest, dtype="<u8")


def _suffixes(schema: Schema, layout: Layout, hashes: np.ndarray) -> dict[int, str]:
    """Entity id → disambiguating suffix, for every entity whose plain name came earlier."""
    ids = np.arange(len(hashes), dtype=np.int64)
    order = np.lexsort((ids, hashes))
    sorted_hash = hashes[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_hash[1:] != sorted_hash[:-1]
    dup = order[~first]
    if not len(dup):
        return {}
    cls = layout.class_of(dup)
    sub = np.lexsort((dup, cls, hashes[dup]))
    dup, cls, dh = dup[sub], cls[sub], hashes[dup][sub]
    new_run = np.ones(len(dup), dtype=bool)
    new_run[1:] = (dh[1:] != dh[:-1]) | (cls[1:] != cls[:-1])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(dup)), 0))
    rank = np.arange(len(dup)) - run_start
    labels = [class_label(c.name) for c in schema.classes]
    return {int(e): f" ({labels[c]})" if r == 0 else f" ({labels[c]} {r + 1})"
            for e, c, r in zip(dup.tolist(), cls.tolist(), rank.tolist(), strict=True)}


def build_names(schema: Schema, layout: Layout, seed: int, *, show_progress: bool = False) -> NameBlob:
    """Unique names for every entity id (deterministic for ``seed``)."""
    maker = NameMaker(schema)
    n = layout.num_entities
    pieces: list[bytes] = []
    lengths: list[np.ndarray] = []
    hashes: list[np.ndarray] = []
    with tqdm(total=n, desc="naming entities", unit="ent", disable=not show_progress) as bar:
        for k, start in enumerate(range(0, n, CHUNK)):
            rng = np.random.default_rng([seed, 2, k])
            end = min(n, start + CHUNK)
            names = np.concatenate([maker.draw(c, e - s, rng) for c, s, e in class_segments(layout, start, end)])
            encoded = [name.encode("utf-8") for name in names]
            pieces.append(b"".join(encoded))
            lengths.append(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
            hashes.append(_hashes(encoded))
            bar.update(end - start)
    suffixes = _suffixes(schema, layout, np.concatenate(hashes))
    for k in sorted({e // CHUNK for e in suffixes}):
        pieces[k], lengths[k] = _apply_suffixes(pieces[k], lengths[k], k * CHUNK, suffixes)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    return NameBlob(b"".join(pieces), offsets)


def _apply_suffixes(piece: bytes, lengths: np.ndarray, first_id: int,
                    suffixes: dict[int, str]) -> tuple[bytes, np.ndarray]:
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    names = [piece[a:b] for a, b in pairwise(bounds)]
    for i in range(len(names)):
        extra = suffixes.get(first_id + i)
        if extra is not None:
            names[i] += extra.encode("utf-8")
    return b"".join(names), np.fromiter(map(len, names), dtype=np.int64, count=len(names))
