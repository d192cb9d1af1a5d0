"""Crash safety of live updates: a process doing an update is killed (SIGKILL) at random moments; the
index then opens, passes `simgrag check` and holds either the old KG or the new one, and the same
update run again finishes it. The window between the swap's two renames is hit deterministically."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simgrag.index.directory import build_index_dir, open_index_dir
from simgrag.index.swap import old_dir, work_dir
from simgrag.index.update import update_index_dir
from simgrag.index.verify import verify_index

CHILD = """
import sys, time
from simgrag.index.update import update_index_dir
print("ready", flush=True)
t = time.perf_counter()
update_index_dir(sys.argv[1], add=sys.argv[2], remove=sys.argv[3], show_progress=False)
print("done", time.perf_counter() - t, flush=True)
"""


def write(path: Path, triples: list[tuple[str, str, str]]) -> Path:
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A base index (faiss-hnsw, hash embedder), an add file with ~4,000 new entities, a remove file that
    retires some entities, and the content hashes before and after the update."""
    root = tmp_path_factory.mktemp("crash")
    rng = random.Random(7)
    rels = ["directed_by", "starred_actors", "written_by", "has_genre"]
    base = [(f"film {i}", rng.choice(rels), f"person {rng.randrange(800)}") for i in range(3000)]
    added = [(f"new film {i}", rng.choice(rels), f"new person {rng.randrange(2000)}") for i in range(4000)]
    removed = base[:300]
    build_index_dir(write(root / "base.txt", base), root / "pristine.idx", embedder="hash:64",
                    index_kind="faiss-hnsw", show_progress=False)
    add_file, remove_file = write(root / "add.txt", added), write(root / "remove.txt", removed)
    shutil.copytree(root / "pristine.idx", root / "full.idx")
    update_index_dir(root / "full.idx", add=add_file, remove=remove_file, show_progress=False)
    return {"root": root, "add": add_file, "remove": remove_file,
            "old": open_index_dir(root / "pristine.idx").manifest["kg"]["content_hash"],
            "new": open_index_dir(root / "full.idx").manifest["kg"]["content_hash"]}


def run_child(index: Path, kit: dict[str, object], kill_after: float | None) -> float | None:
    """Run the update in a child process; kill it ``kill_after`` seconds after it is ready (None: let it
    finish and return how long the update took)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(index), str(kit["add"]), str(kit["remove"])],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    if kill_after is None:
        line = proc.stdout.readline().split()
        assert proc.wait(timeout=300) == 0 and line[0] == "done"
        return float(line[1])
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return None


def test_kill_at_random_moments_leaves_old_or_new(kit: dict[str, object]) -> None:
    root = kit["root"]
    assert isinstance(root, Path)
    shutil.copytree(root / "pristine.idx", root / "timing.idx")
    duration = run_child(root / "timing.idx", kit, None)
    assert duration is not None
    rng = random.Random(11)
    seen: list[str] = []
    kills = 12
    for i in range(kills):  # one random moment in each twelfth of [0, 1.25 x the update's duration]
        index = root / f"kill{i}.idx"
        shutil.copytree(root / "pristine.idx", index)
        run_child(index, kit, (i + rng.random()) / kills * 1.25 * duration)
        report = verify_index(index)  # opens the path: finishes an interrupted swap first
        assert report.ok, report.problems
        state = open_index_dir(index).manifest["kg"]["content_hash"]
        assert state in (kit["old"], kit["new"])
        seen.append("new" if state == kit["new"] else "old")
        update_index_dir(index, add=kit["add"], remove=kit["remove"], show_progress=False)  # finish it
        assert open_index_dir(index).manifest["kg"]["content_hash"] == kit["new"]
        assert verify_index(index).ok
        assert not work_dir(index).exists() and not old_dir(index).exists()
    assert "old" in seen  # the kills did land inside updates


def test_a_crash_between_the_two_renames_is_finished_on_open(kit: dict[str, object]) -> None:
    root = kit["root"]
    assert isinstance(root, Path)
    index = root / "swap.idx"
    shutil.copytree(root / "pristine.idx", index)
    shutil.copytree(root / "full.idx", work_dir(index))  # a finished new version, not yet moved in
    index.rename(old_dir(index))  # the first rename happened, then the process died
    assert verify_index(index).ok  # the open moved the finished version in
    assert open_index_dir(index).manifest["kg"]["content_hash"] == kit["new"]


def test_a_finished_but_unswapped_version_is_dropped_by_the_next_update(kit: dict[str, object]) -> None:
    root = kit["root"]
    assert isinstance(root, Path)
    index = root / "stale.idx"
    shutil.copytree(root / "pristine.idx", index)
    shutil.copytree(root / "full.idx", work_dir(index))  # died before the first rename: never committed
    assert open_index_dir(index).manifest["kg"]["content_hash"] == kit["old"]
    update_index_dir(index, add=[("late film", "directed_by", "person 1")], show_progress=False)
    opened = open_index_dir(index)
    assert opened.manifest["updates"]["count"] == 1 and opened.store.entity_id("late film") is not None
    assert opened.store.entity_id("new film 0") is None  # the stale version's additions did not leak in
    assert verify_index(index).ok and not work_dir(index).exists()
