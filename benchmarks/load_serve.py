"""Loopback load test of ``simgrag serve``: many concurrent clients on /v1/retrieve, a few on /v1/ask.

Starts ``simgrag serve`` as a separate process (the embedded model and, by default, the bundled
sample KG), waits until /v1/health says ready, then runs two phases with asyncio + httpx:

1. ``--retrieve-clients`` clients (default 50), each sending ``--retrieve-requests`` /v1/retrieve
   requests back to back (1- to 3-triple patterns built from the KG's own triples);
2. ``--ask-clients`` clients (default 4), each asking ``--ask-requests`` questions ("Who directed X?"
   and the like) through the bounded LLM queue (``--max-waiting``).

Reports, per phase: requests, 2xx, 429 (counted apart: the queue saying "busy" is by design),
other errors, p50/p95/p99/max latency of the successful requests, throughput; and the server's peak
RSS (VmHWM from /proc). Writes JSON to ``--out`` and prints a Markdown table for BENCHMARKS.md.

    python benchmarks/load_serve.py --out runs/load_serve.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from simgrag.testing.loopback import free_port, stop_process

logger = logging.getLogger("load_serve")



def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def kg_triples(path: Path) -> list[tuple[str, str, str]]:
    triples = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            head, rel, tail = line.split("|")
            triples.append((head, rel, tail))
    return triples


PHRASES = {"directed_by": "directed by", "written_by": "written by", "starred_actors": "starred actors",
           "release_year": "release year", "has_genre": "has genre", "in_language": "in language"}
QUESTIONS = {"directed_by": "Who directed {}?", "written_by": "Who wrote {}?", "starred_actors": "Who acted in {}?",
             "release_year": "When was {} released?", "has_genre": "What genre is {}?"}


def make_patterns(triples: list[tuple[str, str, str]], n: int, rng: random.Random) -> list[list[list[str]]]:
    """1-, 2- and 3-triple patterns anchored on a movie of the KG (shapes of MetaQA 1–3-hop)."""
    by_movie: dict[str, list[tuple[str, str, str]]] = {}
    for t in triples:
        if t[1] in PHRASES:
            by_movie.setdefault(t[0], []).append(t)
    movies = sorted(by_movie)
    patterns = []
    for i in range(n):
        movie = rng.choice(movies)
        rel = rng.choice(by_movie[movie])[1]
        shape = i % 3
        if shape == 0:
            patterns.append([[movie, PHRASES[rel], "UNKNOWN thing 1"]])
        elif shape == 1:
            patterns.append([[movie, PHRASES[rel], "UNKNOWN person 1"],
                             ["UNKNOWN movie 1", PHRASES[rel], "UNKNOWN person 1"]])
        else:
            patterns.append([[movie, "directed by", "UNKNOWN director 1"],
                             ["UNKNOWN movie 1", "directed by", "UNKNOWN director 1"],
                             ["UNKNOWN movie 1", "release year", "UNKNOWN year 1"]])
    return patterns


def make_questions(triples: list[tuple[str, str, str]], n: int, rng: random.Random) -> list[str]:
    pool = sorted({QUESTIONS[r].format(h) for h, r, _ in triples if r in QUESTIONS})
    return rng.sample(pool, n)


async def client_loop(client: httpx.AsyncClient, path: str, bodies: list[dict[str, Any]],
                      results: list[tuple[int, float]]) -> None:
    for body in bodies:
        start = time.perf_counter()
        try:
            response = await client.post(path, json=body)
            status = response.status_code
        except httpx.HTTPError as exc:
            logger.warning("%s failed: %s", path, exc)
            status = -1
        results.append((status, time.perf_counter() - start))


async def phase(url: str, path: str, per_client: list[list[dict[str, Any]]], timeout_s: float,
                pid: int) -> dict[str, Any]:
    results: list[tuple[int, float]] = []
    limits = httpx.Limits(max_connections=len(per_client) + 4, max_keepalive_connections=len(per_client) + 4)
    peak_rss = 0

    async def watch_rss() -> None:
        nonlocal peak_rss
        while True:
            peak_rss = max(peak_rss, rss_kib(pid, "VmRSS"))
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch_rss())
    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:
        await asyncio.gather(*(client_loop(client, path, bodies, results) for bodies in per_client))
    wall = time.perf_counter() - start
    watcher.cancel()
    ok = np.array([lat for status, lat in results if 200 <= status < 300])
    statuses: dict[str, int] = {}
    for status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1

    def pct(q: float) -> float | None:
        return float(np.percentile(ok, q)) if len(ok) else None

    return {
        "path": path, "clients": len(per_client), "requests": len(results), "ok": len(ok),
        "rejected_429": statuses.get("429", 0),
        "errors": sum(n for s, n in statuses.items() if not s.startswith("2") and s != "429"),
        "statuses": statuses, "wall_s": wall, "throughput_rps": len(ok) / wall if wall else 0.0,
        "p50_s": pct(50), "p95_s": pct(95), "p99_s": pct(99), "max_s": float(ok.max()) if len(ok) else None,
        "peak_rss_mib_sampled": peak_rss / 1024,
    }


def start_server(args: argparse.Namespace, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "simgrag.cli", "serve", "--port", str(port), "--timeout", str(args.timeout),
           "--max-waiting", str(args.max_waiting), "--llm", args.llm]
    if args.index:
        cmd.insert(4, str(args.index))
    logger.info("starting: %s", " ".join(cmd))
    return subprocess.Popen(cmd, stdout=log_path.open("w"), stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            status = httpx.get(f"{url}/v1/health", timeout=2).json()["status"]
            if status == "ready":
                return time.perf_counter() - start
            if status == "failed":
                raise RuntimeError("the server failed to start; see its log")
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server was not ready in time")


def fmt(x: float | None) -> str:
    return "—" if x is None else (f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s")


def table(report: dict[str, Any]) -> str:
    rows = ["| endpoint | clients | requests | 2xx | 429 | errors | p50 | p95 | p99 | max | throughput |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in report["phases"]:
        rows.append(f"| {p['path']} | {p['clients']} | {p['requests']} | {p['ok']} | {p['rejected_429']} | "
                    f"{p['errors']} | {fmt(p['p50_s'])} | {fmt(p['p95_s'])} | {fmt(p['p99_s'])} | "
                    f"{fmt(p['max_s'])} | {p['throughput_rps']:.1f} req/s |")
    rows.append(f"\nserver peak RSS (VmHWM): {report['server_peak_rss_mib']:.0f} MiB; "
                f"ready after {report['startup_s']:.1f} s")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, help="index directory (default: the bundled sample KG)")
    parser.add_argument("--kg", type=Path, help="the KG file the patterns/questions come from "
                                                 "(default: the bundled sample KG)")
    parser.add_argument("--llm", default="llamacpp")
    parser.add_argument("--retrieve-clients", type=int, default=50)
    parser.add_argument("--retrieve-requests", type=int, default=20, help="per client")
    parser.add_argument("--ask-clients", type=int, default=4)
    parser.add_argument("--ask-requests", type=int, default=3, help="per client")
    parser.add_argument("--max-waiting", type=int, default=2, help="the server's LLM queue limit")
    parser.add_argument("--timeout", type=float, default=300.0, help="the server's per-request deadline")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/load_serve.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    from simgrag.pipeline import sample_kg_path

    rng = random.Random(args.seed)
    triples = kg_triples(args.kg or sample_kg_path())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(args, port, args.out.with_suffix(".server.log"))
    try:
        startup = wait_ready(url, proc, 900)
        logger.info("server ready after %.1f s", startup)
        # one warm-up request per endpoint, so the phases measure steady state
        httpx.post(f"{url}/v1/retrieve", json={"pattern": make_patterns(triples, 1, rng)[0]}, timeout=60)
        httpx.post(f"{url}/v1/ask", json={"question": make_questions(triples, 1, rng)[0]}, timeout=args.timeout)
        patterns = make_patterns(triples, args.retrieve_clients * args.retrieve_requests, rng)
        retrieve_bodies = [[{"pattern": patterns[c * args.retrieve_requests + i], "k": 3}
                            for i in range(args.retrieve_requests)] for c in range(args.retrieve_clients)]
        questions = make_questions(triples, args.ask_clients * args.ask_requests, rng)
        ask_bodies = [[{"question": questions[c * args.ask_requests + i]} for i in range(args.ask_requests)]
                      for c in range(args.ask_clients)]
        phases = [asyncio.run(phase(url, "/v1/retrieve", retrieve_bodies, 120, proc.pid))]
        logger.info("retrieve phase: %s", {k: v for k, v in phases[0].items() if k != "statuses"})
        phases.append(asyncio.run(phase(url, "/v1/ask", ask_bodies, args.timeout + 30, proc.pid)))
        logger.info("ask phase: %s", {k: v for k, v in phases[1].items() if k != "statuses"})
        report = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]), "startup_s": startup,
                  "server_peak_rss_mib": rss_kib(proc.pid, "VmHWM") / 1024, "phases": phases,
                  "health_after": httpx.get(f"{url}/v1/health", timeout=5).json()}
    finally:
        stop_process(proc)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))


if __name__ == "__main__":
    main()
