"""Merge the copies of an unknown node that a small model writes out one by one.

Asked "What currencies are used in Europe?", a 1.5B model may list ``UNKNOWN country 1`` …
``UNKNOWN country 10``, each with the same ``currency`` triple, instead of one country node. Under
injective matching that asks for ten *different* countries sharing one currency, and it often
exceeds the triple limit. An unknown node ``v`` with exactly the triples of another unknown node ``u`` of the
same type (the same ``(direction, relation, other end)`` set) is a copy: ``v`` is replaced by ``u`` and
the repeated triples go. A node with only *some* of another's triples is not a copy: it is how a question
asks for things that share something ("the countries using the currency of Hamburg's country").

A related loop: asked "What are the neighbouring countries of Laos?", the model may walk on and on,
``[Laos, borders, UNKNOWN country 1]``, ``[UNKNOWN country 1, borders, UNKNOWN country 2]``, … until it
runs out of tokens. A chain of :data:`RUNAWAY_LINKS` or more triples of one relation, each starting at
the previous one's unknown end, is not a question's path (three hops of one relation is already rare):
:func:`cut_runaway_chains` keeps its first link and drops the rest, with whatever hung on the dropped
nodes.

And a list written out in parallel: asked "the capital cities of the countries where French is official",
the model may write ``[country 1, capital, city 1]``, ``[country 2, capital, city 2]``, … — pieces that
touch only through named entities (or not at all) and are the same up to the numbers of their unknown
nodes. :func:`drop_repeated_pieces` keeps the first of each such set of pieces.

And a triple from a node to itself (``[UNKNOWN country 2, capital, UNKNOWN country 2]`` after two good
triples): no subgraph has one, so :func:`drop_self_loops` drops it when other triples remain; the judge
of :mod:`simgrag.grounding` then works on the rest instead of the whole answer being refused.

This is a repair for LLM-written *question* patterns only (:class:`~simgrag.pattern.generate.PatternGenerator`);
a pattern a user gives to ``retrieve`` is searched as written ("X has two children" is two nodes).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from simgrag.pattern.graph import is_unknown, normalize_text, type_hint

__all__ = ["RUNAWAY_LINKS", "cut_runaway_chains", "drop_repeated_pieces", "drop_self_loops", "merge_unknown_copies"]

logger = logging.getLogger(__name__)

#: longer outputs are left to the validation's size limit (merging is quadratic in the triples)
MAX_MERGE_TRIPLES = 96
#: this many chained triples of one relation (or more) are a loop, not a path
RUNAWAY_LINKS = 4


def merge_unknown_copies(triples: Sequence[Sequence[object]]) -> tuple[list[Sequence[object]], list[str]]:
    """``triples`` with each copy of an unknown node merged into the node it copies,
    and one note per merge. Anything but a list of ``[str, str, str]`` is returned unchanged (the
    validation reports it)."""
    if len(triples) > MAX_MERGE_TRIPLES or not _string_triples(triples):
        return list(triples), []
    texts = [[str(x) for x in t] for t in triples]  # all str: checked above
    rows = [tuple(normalize_text(x) for x in t) for t in texts]
    original = {normalize_text(x): x for t in texts for x in t}
    notes: list[str] = []
    while True:
        merge = _one_merge(rows)
        if merge is None:
            break
        copy, kept = merge
        shown_copy, shown_kept = original.get(copy, copy)[:80], original.get(kept, kept)[:80]
        notes.append(f"merged {shown_copy!r} into {shown_kept!r} (same triples)")
        rows = _unique([tuple(kept if x == copy else x for x in row) for row in rows])
    if not notes:
        return list(triples), []
    logger.info("pattern: %s", "; ".join(notes))
    return [[original.get(x, x) for x in row] for row in rows], notes


def drop_self_loops(triples: Sequence[Sequence[object]]) -> tuple[list[Sequence[object]], list[str]]:
    """``triples`` without those whose head and tail are one node (as the validation compares names),
    when at least one other triple remains; one note per dropped triple. Anything but a list of
    ``[str, str, str]`` is returned unchanged (the validation reports it)."""
    if not _string_triples(triples):
        return list(triples), []
    loops = [i for i, t in enumerate(triples) if normalize_text(str(t[0])) == normalize_text(str(t[2]))]
    if not loops or len(loops) == len(triples):
        return list(triples), []
    notes = [f"dropped {[str(x) for x in triples[i]]} (a triple from a node to itself)" for i in loops]
    logger.info("pattern: %s", "; ".join(notes))
    return [t for i, t in enumerate(triples) if i not in loops], notes


def cut_runaway_chains(triples: Sequence[Sequence[object]]) -> tuple[list[Sequence[object]], list[str]]:
    """``triples`` with each runaway chain (module docstring) cut after its first link, and one note per
    cut. The triples of the dropped nodes go too, so the rest stays connected; anything but a list of
    ``[str, str, str]`` is returned unchanged (the validation reports it)."""
    if not _string_triples(triples):
        return list(triples), []
    rows = [tuple(str(x) for x in t) for t in triples]
    notes: list[str] = []
    while (chain := _runaway(rows)) is not None:
        keep_node = rows[chain[0]][2]
        dropped = {rows[i][2] for i in chain[1:]}
        notes.append(f"cut a chain of {len(chain)} {rows[chain[0]][1]!r} triples after {list(rows[chain[0]])} "
                     f"(a loop, not a path)")
        rows = [r for i, r in enumerate(rows) if i not in chain[1:] and not ({r[0], r[2]} & dropped)]
        if keep_node in dropped:  # a cycle back to the kept node: nothing sensible remains of it
            break
    if not notes:
        return list(triples), []
    logger.info("pattern: %s", "; ".join(notes))
    return [list(r) for r in rows], notes


def drop_repeated_pieces(triples: Sequence[Sequence[object]]) -> tuple[list[Sequence[object]], list[str]]:
    """``triples`` without the pieces that repeat an earlier piece (module docstring), and one note per
    repeated piece kept. A *piece* is a set of triples joined through unknown nodes (named entities do
    not join them); two pieces repeat each other when they are the same triples once each unknown node is
    read as its type and its order of appearance in the piece. Anything but a list of ``[str, str, str]``
    is returned unchanged (the validation reports it)."""
    if not _string_triples(triples):
        return list(triples), []
    rows = [tuple(str(x) for x in t) for t in triples]
    pieces = _pieces(rows)
    first: dict[tuple[tuple[str, ...], ...], int] = {}
    dropped: dict[int, int] = {}  # first piece → how many repeats of it went
    keep: set[int] = set()
    for number, piece in enumerate(pieces):
        shape = _piece_shape([rows[i] for i in piece])
        if shape in first:
            dropped[first[shape]] = dropped.get(first[shape], 0) + 1
        else:
            first[shape] = number
            keep.update(piece)
    if not dropped:
        return list(triples), []
    notes = [f"dropped {n} repeat{'s' if n > 1 else ''} of {[list(rows[i]) for i in pieces[number]]} "
             f"(the same triples with other numbers)" for number, n in dropped.items()]
    logger.info("pattern: %s", "; ".join(notes))
    return [list(r) for i, r in enumerate(rows) if i in keep], notes


def _string_triples(triples: Sequence[Sequence[object]]) -> bool:
    """Every item is a ``[str, str, str]`` (the repairs leave anything else to the validation)."""
    return all(isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, str) for x in t) for t in triples)


def _pieces(rows: list[tuple[str, ...]]) -> list[list[int]]:
    """Row indices grouped into pieces (joined through shared unknown nodes), in order of first row."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    holder: dict[str, int] = {}
    for i, (head, _, tail) in enumerate(rows):
        for node in (head, tail):
            if not is_unknown(node):
                continue
            key = normalize_text(node)
            if key in holder:
                parent[root(i)] = root(holder[key])
            else:
                holder[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(rows)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _piece_shape(rows: list[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """The piece's triples with each unknown node read as its type and its order of appearance."""
    order: dict[str, str] = {}

    def read(node: str) -> str:
        if not is_unknown(node):
            return "=" + normalize_text(node)
        key = normalize_text(node)
        if key not in order:
            order[key] = f"?{type_hint(node) or ''}#{len(order)}"
        return order[key]

    return tuple((read(h), normalize_text(r), read(t)) for h, r, t in rows)


def _runaway(rows: list[tuple[str, ...]]) -> list[int] | None:
    """Indices of the first chain of ``RUNAWAY_LINKS`` or more triples of one relation, each one's head
    the previous one's unknown tail (a node that nothing else leads out of by that relation twice)."""
    out: dict[tuple[str, str], list[int]] = {}
    for i, (head, relation, _) in enumerate(rows):
        out.setdefault((head, relation), []).append(i)
    for start, (_, relation, tail) in enumerate(rows):
        chain, seen, node = [start], {rows[start][0]}, tail
        while is_unknown(node) and node not in seen and len(out.get((node, relation), ())) == 1:
            seen.add(node)
            nxt = out[(node, relation)][0]
            chain.append(nxt)
            node = rows[nxt][2]
        if len(chain) >= RUNAWAY_LINKS:
            return chain
    return None


def _one_merge(rows: list[tuple[str, ...]]) -> tuple[str, str] | None:
    """(copy, kept) for the first unknown node that copies another, else ``None``."""
    signatures: dict[str, set[tuple[str, str, str]]] = {}
    for head, relation, tail in rows:
        if is_unknown(head):
            signatures.setdefault(head, set()).add(("out", relation, tail))
        if is_unknown(tail):
            signatures.setdefault(tail, set()).add(("in", relation, head))
    nodes = sorted(signatures, key=lambda n: (-len(signatures[n]), _number(n), n))
    for v in reversed(nodes):  # the least constrained copy first
        for u in nodes:
            if u == v or type_hint(u) != type_hint(v):
                continue
            sig_v, sig_u = signatures[v], signatures[u]
            if any(other in (u, v) for _, _, other in sig_v):
                continue  # adjacent nodes are two ends of a triple, not copies
            if sig_v == sig_u:  # a subset is not a copy: [C1 located in Hamburg's …], [C1 currency X],
                return v, u     # [C2 currency X] asks for the countries *sharing* C1's currency
    return None


def _number(node: str) -> int:
    last = node.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() and len(last) < 10 else 0  # int() refuses 4,300+ digits


def _unique(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return list(dict.fromkeys(rows))  # first occurrence of each, in order
