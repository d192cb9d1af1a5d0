"""Start-up costs that users feel on every fresh process (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json
from simgrag.kg.store import KGStore
from simgrag.match import _kernel, restrict
from simgrag.match.candidates import CandidateTable, NodeCandidates
from simgrag.match.search import search_subgraphs
from simgrag.pattern.graph import Pattern

store = KGStore.from_triples([("a", "r", "b"), ("b", "r", "c"), ("a", "s", "c")])
ids = [store.entities.id_of(n) for n in "abc"]
pattern = Pattern.from_triples([["A", "r", "B"], ["B", "r", "C"]])
table = CandidateTable.from_relation_pairs([NodeCandidates.from_pairs(ids, [0.0, 0.5, 0.5])] * 3,
                                           [([0], [0.0])] * 2, store.num_relations)
restrict.MIN_CANDIDATES = 0
result = search_subgraphs(store, pattern, table, k=1)
stats = {f.__name__: (sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
         for f in (_kernel.run_search, restrict._consistency_pass, restrict._entries)}
print(json.dumps({"stats": stats, "gsd": result.matches[0].gsd}))
"""


def _probe() -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_compiled_search_is_loaded_from_the_numba_cache_in_a_fresh_process() -> None:
    """The search kernels are compiled once and cached on disk (``cache=True``): a second fresh process
    loads them (cache hits, no misses) instead of compiling for seconds before its first search."""
    _probe()  # compiles and writes the cache if this checkout has none yet
    second = _probe()
    assert second["gsd"] == 1.0  # a, b, c: 0 + 0.5 + 0.5 (injective)
    for name, (hits, misses) in second["stats"].items():  # type: ignore[attr-defined]
        assert hits >= 1 and misses == 0, f"{name} was compiled again ({hits} hits, {misses} misses)"
