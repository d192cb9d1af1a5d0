"""First answer of a fresh process, per stage: ``simgrag demo`` (or ``serve``'s time to ready), timed
from outside and from its log.

Each round starts a fresh ``python`` process per source tree (``--src`` may be given several times, e.g.
the main branch's and this one's: rounds alternate between them, so a busy machine slows both alike),
runs the CLI with timestamped logging, and reads off:

- ``wall_s``: the process from start to exit (outside clock);
- from the log (seconds since the process's logging import): the embedder loaded, each llama.cpp
  model load (how many: ``llm_loads``), the pattern LLM call done, the answer;
- the CLI's own stage timings (pattern / vector / graph / answer).

With ``--serve`` it starts ``simgrag serve`` on a loopback port instead and polls ``/v1/health``
until it says ready (``ready_s``: questions are answered from then on) and its LLM is loaded
(``llm_ready_s``; before 2026-11-27 the server loaded the LLM before it said ready), then stops it.

``--question`` may be given several times: round r asks the r-th (cyclically). With ``--new-questions``
each tree runs as a block instead of alternating: the KV store of prompt prefixes
(``<cache dir>/llama-kv``) is emptied, one untimed process asks ``--warm-question``, then each timed
process asks a question the store has never seen — the first answer a user gets for a *new* question.

    python benchmarks/first_answer.py --src /path/to/main/src --src src --rounds 3 [--question "..."]
    python benchmarks/first_answer.py --src /path/to/main/src --src src --new-questions \
        --question "Who starred in Heat?" --question "What genre is Alien?" --question "Who wrote Ronin?"
    python benchmarks/first_answer.py --src src --serve --rounds 3
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from simgrag.config import cache_dir

_BOOT = ("import logging, sys; logging.basicConfig(level=logging.INFO, "
         "format='@%(relativeCreated)d %(name)s: %(message)s'); sys.argv = ['simgrag', *sys.argv[1:]]; "
         "from simgrag.cli import main; main()")
_EVENTS = {
    "embedder_loaded": re.compile(r"simgrag.embed.sentence_transformers: loaded|simgrag.embed.static"),
    "llm_loaded": re.compile(r"simgrag.llm.llamacpp: .* loaded in"),
    "pattern_done": re.compile(r"simgrag.llm.llamacpp: .* prompt \+ .* completion tokens"),
}


def _env(src: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "HF_HUB_OFFLINE": "1"}


def demo_round(src: str, question: str) -> dict[str, Any]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _BOOT, "demo", question], env=_env(src), capture_output=True,
                          text=True, timeout=600, check=False)
    wall = time.perf_counter() - start
    out: dict[str, Any] = {"src": src, "wall_s": round(wall, 2), "rc": proc.returncode}
    loads = 0
    for line in proc.stderr.splitlines():
        m = re.match(r"@(\d+) (.*)", line)
        if not m:
            continue
        at, text = int(m.group(1)) / 1e3, m.group(2)
        for name, pattern in _EVENTS.items():
            if pattern.search(text):
                loads += name == "llm_loaded"
                out.setdefault(f"{name}_at_s", round(at, 2))
    out["llm_loads"] = loads
    stages = re.search(r"stage timings: (.*)", proc.stdout)
    out["stages"] = stages.group(1) if stages else proc.stdout[-300:] + proc.stderr[-300:]
    answer = re.search(r"Answer: (.*)", proc.stdout)
    out["answer"] = answer.group(1) if answer else None
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_round(src: str) -> dict[str, Any]:
    port = _free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _BOOT, "serve", "--port", str(port), "-q"], env=_env(src),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listening = ready = llm_ready = None
    try:
        while time.perf_counter() - start < 300 and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2.0).json()
                listening = listening or time.perf_counter() - start
                if health.get("status") == "ready":
                    ready = ready or time.perf_counter() - start
                    if health.get("llm_status", "ready") in ("ready", "failed"):  # older trees: no llm_status
                        llm_ready = time.perf_counter() - start
                        break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"src": src, "listening_s": None if listening is None else round(listening, 2),
            "ready_s": None if ready is None else round(ready, 2),
            "llm_ready_s": None if llm_ready is None else round(llm_ready, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", action="append", required=True, help="a source tree (PYTHONPATH); repeatable")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--question", action="append", default=None, help="repeatable (default: Who directed Inception?)")
    p.add_argument("--new-questions", action="store_true", help="per tree: empty KV store, warm-up, new questions")
    p.add_argument("--warm-question", default="Who directed Inception?")
    p.add_argument("--serve", action="store_true", help="time `simgrag serve` to ready instead")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    questions = args.question or ["Who directed Inception?"]
    for src in args.src:  # every tree starts with bytecode, as an installed package does: where
        # PYTHONDONTWRITEBYTECODE is set (this sandbox), a fresh checkout otherwise compiles all its modules
        # in every process (~0.5-1 s), which had slowed the "before" trees of earlier comparisons
        compileall.compile_dir(src, quiet=1)
    rows = []
    if args.new_questions:
        for src in args.src:
            shutil.rmtree(cache_dir() / "llama-kv", ignore_errors=True)
            demo_round(src, args.warm_question)
            for r, question in enumerate(questions):
                row = {**demo_round(src, question), "round": r, "question": question}
                print(json.dumps(row), flush=True)
                rows.append(row)
    for r in range(0 if args.new_questions else args.rounds):
        for src in args.src if r % 2 == 0 else list(reversed(args.src)):
            row = serve_round(src) if args.serve else demo_round(src, questions[r % len(questions)])
            row["round"] = r
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        args.out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
