"""Entity names by their words: candidates that an approximate vector index misses.

SimGRAG's filtering step keeps the ``k_n`` entities whose name embeddings are nearest a pattern node's
text. A compressed index (IVF-PQ) returns an *approximation* of that list, and at 10M entities the
approximation loses what matters most: asked for "Alexander Lang", IVF-PQ with 512 of 4,096 lists
probed does not return *Alexander Lang (fictional character)* at embedding distance 0.61, although it
returns 16,384 entities farther than that (measured on the synthetic 10M KG of BENCHMARKS §6: 67 of
the 82 planted entities missing from their node's candidates were nearer than the list's last one).

:class:`NameTokenIndex` is a second, exact way in: an inverted index from the words of entity names
to the entities. A pattern node's text is split into words the same way; the entities sharing a word
that is rare enough to narrow anything (``max_postings``) are looked up, their *embedding* distances
computed exactly (two words in common suffice when each is common, as first names and surnames are), and
they join the vector candidates, which are then cut to ``k_n`` by distance
again. The distances keep their meaning (the embedder's, as before); only entities the approximate
index overlooked get in, and only when they are nearer than its ``k_n``-th.

Words: maximal runs of ASCII letters and digits and of non-ASCII characters (UTF-8 bytes ≥ 0x80),
ASCII letters lower-cased, at least :data:`MIN_WORD_BYTES` bytes long; each is stored as a 64-bit
FNV-1a hash (a collision only adds a candidate whose distance is then computed exactly). The index
is built in memory from the KG's name table (no file: about 2 s per million names on one core) and
holds 12 bytes per word occurrence.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simgrag.kg.names import NameTable

__all__ = ["MAX_LEXICAL_CANDIDATES", "MAX_POSTINGS", "MAX_SHARED_POSTINGS", "MIN_WORD_BYTES", "NameTokenIndex",
           "word_hashes"]

#: words shorter than this (in UTF-8 bytes) are ignored: "of", "la", initials
MIN_WORD_BYTES = 3
#: a word shared by more entity names than this is too common to narrow the search on its own ("river")
MAX_POSTINGS = 2048
#: ... but two such words together may ("Alexander" and "Lang"), up to this many names each ("the": never)
MAX_SHARED_POSTINGS = 65536
#: at most this many entities per lookup (rarest words first)
MAX_LEXICAL_CANDIDATES = 4096

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, nogil=True)
def _is_word_byte(b):  # type: ignore[no-untyped-def]
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122) or b >= 128


@njit(cache=True, nogil=True)
def _scan(blob, offsets, min_bytes, fill, hashes, owners):  # type: ignore[no-untyped-def]
    """Count the words of every name (``fill`` False) or also write their hashes and owners."""
    n = 0
    for i in range(offsets.shape[0] - 1):
        h = _FNV_OFFSET
        length = 0
        for j in range(offsets[i], offsets[i + 1] + 1):  # one step past the end closes the last word
            b = blob[j] if j < offsets[i + 1] else 32
            if _is_word_byte(b):
                if 65 <= b <= 90:
                    b += 32
                h = (h ^ np.uint64(b)) * _FNV_PRIME
                length += 1
            else:
                if length >= min_bytes:
                    if fill:
                        hashes[n] = h
                        owners[n] = i
                    n += 1
                h = _FNV_OFFSET
                length = 0
    return n


def _words(blob: np.ndarray, offsets: np.ndarray, min_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    blob, offsets = np.ascontiguousarray(blob, dtype=np.uint8), np.ascontiguousarray(offsets, dtype=np.int64)
    none_h, none_o = np.empty(0, np.uint64), np.empty(0, np.int32)
    n = _scan(blob, offsets, min_bytes, False, none_h, none_o)
    hashes, owners = np.empty(n, np.uint64), np.empty(n, np.int32 if len(offsets) <= 2**31 else np.int64)
    _scan(blob, offsets, min_bytes, True, hashes, owners)
    return hashes, owners


def word_hashes(text: str, min_bytes: int = MIN_WORD_BYTES) -> np.ndarray:
    """The distinct word hashes of ``text``, as :class:`NameTokenIndex` stores names' words."""
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    hashes, _ = _words(data, np.array([0, len(data)], dtype=np.int64), min_bytes)
    return np.unique(hashes)


class NameTokenIndex:
    """Entity ids by the words of their names (module docstring)."""

    def __init__(self, words: np.ndarray, indptr: np.ndarray, entities: np.ndarray, num_names: int) -> None:
        self.words = words  # sorted unique word hashes (uint64)
        self.indptr = indptr  # entities[indptr[w]:indptr[w + 1]]: the names holding word w (ascending ids)
        self.entities = entities
        self.num_names = num_names

    @classmethod
    def build(cls, names: NameTable, *, min_bytes: int = MIN_WORD_BYTES) -> NameTokenIndex:
        hashes, owners = _words(names.blob, names.offsets, min_bytes)
        order = np.argsort(hashes, kind="stable")  # owners come ascending, and stay so within a word
        hashes, owners = hashes[order], owners[order]
        del order
        if len(hashes):  # a word twice in one name is one posting
            keep = np.ones(len(hashes), dtype=bool)
            keep[1:] = (hashes[1:] != hashes[:-1]) | (owners[1:] != owners[:-1])
            hashes, owners = hashes[keep], owners[keep]
        words, starts = np.unique(hashes, return_index=True)
        indptr = np.append(starts, len(hashes)).astype(np.int64)
        return cls(words, indptr, owners, len(names))

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes + self.indptr.nbytes + self.entities.nbytes)

    def lookup(self, text: str, *, max_postings: int = MAX_POSTINGS, max_shared: int = MAX_SHARED_POSTINGS,
               limit: int = MAX_LEXICAL_CANDIDATES) -> np.ndarray:
        """Entities whose names share with ``text`` a word held by at most ``max_postings`` names, or two
        words held by at most ``max_shared`` names each; those sharing more words first, at most
        ``limit`` of them (ascending ids, int64)."""
        found = word_hashes(text)
        slots = np.searchsorted(self.words, found)
        known = slots < len(self.words)
        known[known] = self.words[slots[known]] == found[known]
        slots = slots[known]
        sizes = self.indptr[slots + 1] - self.indptr[slots]
        usable = slots[sizes <= max_shared]
        if len(usable) == 0:
            return np.empty(0, dtype=np.int64)
        postings = [self.entities[self.indptr[s]:self.indptr[s + 1]] for s in usable]
        ids, shared = np.unique(np.concatenate(postings), return_counts=True)
        rare = [p for p, s in zip(postings, usable, strict=True) if self.indptr[s + 1] - self.indptr[s] <= max_postings]
        keep = shared >= 2
        if rare:
            keep |= np.isin(ids, np.concatenate(rare))
        ids, shared = ids[keep], shared[keep]
        if len(ids) > limit:
            ids = np.sort(ids[np.argsort(-shared, kind="stable")[:limit]])
        return ids.astype(np.int64)
