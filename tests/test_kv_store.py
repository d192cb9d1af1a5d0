"""The disk store of prompt-prefix KV states (no model needed: states are opaque bytes here)."""

from __future__ import annotations

import os
from pathlib import Path

from simgrag.llm.kv_store import KVStateStore


def test_round_trip_and_namespaces(tmp_path: Path) -> None:
    store = KVStateStore(tmp_path / "kv", namespace="model-a")
    assert store.get([1, 2, 3]) is None
    store.put([1, 2, 3], b"state-123")
    assert store.get([1, 2, 3]) == b"state-123"
    assert store.get([1, 2]) is None and store.get([1, 2, 3, 4]) is None
    assert store.with_namespace("model-b").get([1, 2, 3]) is None  # another model never sees it
    assert KVStateStore(tmp_path / "kv", namespace="model-a").get([1, 2, 3]) == b"state-123"


def test_corrupt_or_mismatched_file_is_ignored(tmp_path: Path) -> None:
    store = KVStateStore(tmp_path)
    store.put([5, 6], b"good")
    path = store.path_for([5, 6])
    path.write_bytes(b"garbage")
    assert store.get([5, 6]) is None
    store.put([7, 8], b"other")  # a file holding other tokens under this name (a hash collision)
    os.replace(store.path_for([7, 8]), path)
    assert store.get([5, 6]) is None
    store.put([5, 6], b"good again")  # and it is simply replaced
    assert store.get([5, 6]) == b"good again"


def test_trimmed_to_max_bytes_least_recently_used_first(tmp_path: Path) -> None:
    store = KVStateStore(tmp_path, max_bytes=3 * 1100)
    for i in range(3):
        store.put([i], bytes(1000))
        os.utime(store.path_for([i]), (1000 + i, 1000 + i))
    assert store.get([0]) is not None  # a read makes [0] the most recently used
    store.put([3], bytes(1000))
    assert store.size_bytes() <= store.max_bytes
    assert store.get([1]) is None  # the least recently used went first
    assert store.get([0]) is not None and store.get([3]) is not None
    store.put([9], bytes(5000))  # larger than the whole store: not kept
    assert store.get([9]) is None


def test_no_partial_files_left(tmp_path: Path) -> None:
    store = KVStateStore(tmp_path)
    store.put(list(range(100)), bytes(10_000))
    assert [p.suffix for p in tmp_path.iterdir()] == [".kv"]


def test_unwritable_directory_does_not_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = KVStateStore(blocker / "kv")
    store.put([1], b"x")  # logged, not raised: the LLM call must not fail for its cache
    assert store.get([1]) is None
