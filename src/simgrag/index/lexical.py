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
FNV-1a hash (a collision only adds a candidate whose distance is then computed exactly). Two things
people type are read too:

- **typos**: a query word of :data:`FUZZY_MIN_BYTES` or more that no name holds stands for the names'
  words that become equal to it when at most one byte is left out of each (which covers a byte
  inserted, dropped or replaced and two neighbours swapped: "Ldburg" → *ledburg*, "sciehce" →
  *science*), found through a table of every word with one byte left out (the symmetric-delete
  method of spelling correctors);
- **initials**: a one-letter word ("C. Underwood") counts as a shared word for names with a word
  starting with that letter, among the names the other words found.

The index is built in memory from the KG's name table (no file: about 1 s per million names on one
core) and holds 12 bytes per word occurrence plus 12 per deleted-byte variant of each distinct word.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simgrag.kg.names import NameTable

__all__ = ["FUZZY_MIN_BYTES", "MAX_LEXICAL_CANDIDATES", "MAX_POSTINGS", "MAX_SHARED_POSTINGS", "MIN_WORD_BYTES",
           "NameTokenIndex", "compile_kernels", "query_words"]

#: words shorter than this (in UTF-8 bytes) are ignored: "of", "la", initials
MIN_WORD_BYTES = 3
#: a word shared by more entity names than this is too common to narrow the search on its own ("river")
MAX_POSTINGS = 2048
#: ... but two such words together may ("Alexander" and "Lang"), up to this many names each ("the": never)
MAX_SHARED_POSTINGS = 65536
#: at most this many entities per lookup (those sharing most words first)
MAX_LEXICAL_CANDIDATES = 4096
#: a query word this long that no name holds is read as a typo of the names' words (NameTokenIndex.corrections)
FUZZY_MIN_BYTES = 5
#: ... and words longer than this are not given deleted-byte variants (nor corrected)
FUZZY_MAX_BYTES = 32
#: at most this many corrections per query word
MAX_CORRECTIONS = 16

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, nogil=True)
def _is_word_byte(b):  # type: ignore[no-untyped-def]
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122) or b >= 128


@njit(cache=True, nogil=True)
def _mix(h, b):  # type: ignore[no-untyped-def]
    """FNV-1a step with byte ``b``, ASCII upper case read as lower case."""
    if 65 <= b <= 90:
        b += 32
    return (h ^ np.uint64(b)) * _FNV_PRIME


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
                h = _mix(h, b)
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


@njit(cache=True, nogil=True)
def _locate(blob, offsets, owners, hashes, first):  # type: ignore[no-untyped-def]
    """For each distinct word (first posting ``first[w]``): where it starts in its first name, its length."""
    where = np.empty(first.shape[0], dtype=np.int64)
    length = np.zeros(first.shape[0], dtype=np.int64)
    for w in range(first.shape[0]):
        i = owners[first[w]]
        want = hashes[first[w]]
        where[w] = -1
        h = _FNV_OFFSET
        n = 0
        for j in range(offsets[i], offsets[i + 1] + 1):
            b = blob[j] if j < offsets[i + 1] else 32
            if _is_word_byte(b):
                h = _mix(h, b)
                n += 1
            else:
                if n > 0 and h == want:
                    where[w], length[w] = j - n, n
                    break
                h = _FNV_OFFSET
                n = 0
    return where, length


@njit(cache=True, nogil=True)
def _deleted_byte_hashes(blob, where, length, lo, hi, fill, out_hash, out_word):  # type: ignore[no-untyped-def]
    """Hashes of each word of ``lo`` to ``hi`` bytes with one byte left out (count, or also fill)."""
    n = 0
    for w in range(where.shape[0]):
        if where[w] < 0 or length[w] < lo or length[w] > hi:
            continue
        for skip in range(length[w]):
            if fill:
                h = _FNV_OFFSET
                for j in range(length[w]):
                    if j != skip:
                        h = _mix(h, blob[where[w] + j])
                out_hash[n], out_word[n] = h, w
            n += 1
    return n


@njit(cache=True, nogil=True)
def _initials_held(blob, offsets, ids, letters):  # type: ignore[no-untyped-def]
    """For each name ``ids[i]``: how many of ``letters`` (lower-case ASCII) start one of its words."""
    out = np.zeros(ids.shape[0], dtype=np.int64)
    for k in range(ids.shape[0]):
        i = ids[k]
        seen = np.zeros(letters.shape[0], dtype=np.bool_)
        at_start = True
        for j in range(offsets[i], offsets[i + 1]):
            b = blob[j]
            if _is_word_byte(b):
                if at_start:
                    if 65 <= b <= 90:
                        b += 32
                    for m in range(letters.shape[0]):
                        if letters[m] == b:
                            seen[m] = True
                at_start = False
            else:
                at_start = True
        out[k] = seen.sum()
    return out


def _fnv(word: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in word:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def query_words(text: str) -> list[bytes]:
    """The words of ``text`` as the index reads names (lower-cased ASCII, UTF-8 bytes), every length."""
    out, run = [], bytearray()
    for b in text.encode("utf-8", "replace") + b" ":  # a lone surrogate (valid in JSON) is no name's
        if 48 <= b <= 57 or 97 <= b <= 122 or b >= 128:
            run.append(b)
        elif 65 <= b <= 90:
            run.append(b + 32)
        else:
            if run:
                out.append(bytes(run))
            run = bytearray()
    return out


def _one_byte_out(word: bytes) -> list[bytes]:
    return [word[:i] + word[i + 1:] for i in range(len(word))]


class NameTokenIndex:
    """Entity ids by the words of their names (module docstring)."""

    def __init__(self, names: NameTable, words: np.ndarray, indptr: np.ndarray, entities: np.ndarray,
                 deleted: np.ndarray, deleted_word: np.ndarray) -> None:
        self.names = names
        self.words = words  # sorted unique word hashes (uint64)
        self.indptr = indptr  # entities[indptr[w]:indptr[w + 1]]: the names holding word w (ascending ids)
        self.entities = entities
        self.deleted = deleted  # sorted hashes of the words with one byte left out ...
        self.deleted_word = deleted_word  # ... and which word each came from
        self.num_names = len(names)

    @classmethod
    def build(cls, names: NameTable, *, min_bytes: int = MIN_WORD_BYTES) -> NameTokenIndex:
        blob, offsets = np.ascontiguousarray(names.blob), np.ascontiguousarray(names.offsets, dtype=np.int64)
        hashes, owners = _words(blob, offsets, min_bytes)
        order = np.argsort(hashes, kind="stable")  # owners come ascending, and stay so within a word
        hashes, owners = hashes[order], owners[order]
        del order
        if len(hashes):  # a word twice in one name is one posting
            keep = np.ones(len(hashes), dtype=bool)
            keep[1:] = (hashes[1:] != hashes[:-1]) | (owners[1:] != owners[:-1])
            hashes, owners = hashes[keep], owners[keep]
        words, first = np.unique(hashes, return_index=True)
        indptr = np.append(first, len(hashes)).astype(np.int64)
        where, length = _locate(blob, offsets, owners, hashes, first.astype(np.int64))
        del hashes
        lo, hi = FUZZY_MIN_BYTES, FUZZY_MAX_BYTES + 1
        n = _deleted_byte_hashes(blob, where, length, lo, hi, False, np.empty(0, np.uint64), np.empty(0, np.int32))
        deleted, deleted_word = np.empty(n, np.uint64), np.empty(n, np.int32)
        _deleted_byte_hashes(blob, where, length, lo, hi, True, deleted, deleted_word)
        order = np.argsort(deleted, kind="stable")
        return cls(names, words, indptr, owners, deleted[order], deleted_word[order])

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes + self.indptr.nbytes + self.entities.nbytes + self.deleted.nbytes
                   + self.deleted_word.nbytes)

    def _slot(self, word: bytes) -> int | None:
        h = np.uint64(_fnv(word))
        slot = int(np.searchsorted(self.words, h))
        return slot if slot < len(self.words) and self.words[slot] == h else None

    def corrections(self, word: bytes) -> list[int]:
        """Slots of the names' words that a typo may have turned into ``word`` (which no name holds):
        ``word`` with a byte left out, and the words (of :data:`FUZZY_MIN_BYTES` to
        :data:`FUZZY_MAX_BYTES` bytes) that with a byte left out equal ``word`` or ``word`` with a byte
        left out; at most :data:`MAX_CORRECTIONS`."""
        if not FUZZY_MIN_BYTES <= len(word) <= FUZZY_MAX_BYTES:
            return []
        variants = _one_byte_out(word)
        found = {s for s in map(self._slot, variants) if s is not None}
        for h in np.unique(np.array([_fnv(v) for v in [word, *variants]], dtype=np.uint64)):
            lo, hi = np.searchsorted(self.deleted, h, "left"), np.searchsorted(self.deleted, h, "right")
            found.update(int(w) for w in self.deleted_word[lo:hi])
        return sorted(found)[:MAX_CORRECTIONS]

    def lookup(self, text: str, *, max_postings: int = MAX_POSTINGS, max_shared: int = MAX_SHARED_POSTINGS,
               limit: int = MAX_LEXICAL_CANDIDATES) -> np.ndarray:
        """Entities whose names share with ``text`` a word held by at most ``max_postings`` names, or two
        words (an initial counts) held by at most ``max_shared`` names each; those sharing more words
        first, at most ``limit`` of them (ascending ids, int64). A word no name holds stands for its
        :meth:`corrections`."""
        groups: list[np.ndarray] = []
        initials: list[int] = []
        for word in dict.fromkeys(query_words(text)):
            if len(word) == 1 and 97 <= word[0] <= 122:
                initials.append(word[0])
                continue
            if len(word) < MIN_WORD_BYTES:
                continue
            slot = self._slot(word)
            slots = [slot] if slot is not None else self.corrections(word)
            if not slots:
                continue
            sizes = [int(self.indptr[s + 1] - self.indptr[s]) for s in slots]
            if sum(sizes) > max_shared:
                continue
            parts = [self.entities[self.indptr[s]:self.indptr[s + 1]] for s in slots]
            groups.append(parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts)))
        if not groups:
            return np.empty(0, dtype=np.int64)
        ids, shared = np.unique(np.concatenate(groups), return_counts=True)
        if initials:
            shared = shared + _initials_held(self.names.blob, self.names.offsets, ids.astype(np.int64),
                                             np.array(sorted(set(initials)), dtype=np.uint8))
        keep = shared >= 2
        rare = [g for g in groups if len(g) <= max_postings]
        if rare:
            keep |= np.isin(ids, np.concatenate(rare))
        ids, shared = ids[keep], shared[keep]
        if len(ids) > limit:
            ids = np.sort(ids[np.argsort(-shared, kind="stable")[:limit]])
        return ids.astype(np.int64)


def compile_kernels() -> None:
    """Compile this module's numba kernels into numba's on-disk cache, on two names: a warm-up for the first search
    on a KG large enough to look names up by their words (above
    :data:`~simgrag.match.retrieve.NAME_WORDS_MIN_ENTITIES` entities), which would otherwise compile them. The
    look-up holds a typo and an initial, so every kernel runs."""
    index = NameTokenIndex.build(NameTable.from_names(["Alexander Lang", "Charlotte Underwood"]))
    index.lookup("C. Underwod")
