"""Hostile retrieves against a real ``simgrag serve`` while normal clients keep asking (issue #15).

Starts ``simgrag serve INDEX_DIR`` (retrieval only: an LLM that is never called) as a separate
process and, once it is ready, sends at the same time:

- ``--hostile`` anchored explosive patterns: chains of ``--hops`` unknown nodes and relations from a
  hub entity (``--hub``, e.g. a genre with thousands of films), each bounded only by the search
  deadline (10 s by default);
- ``--unanchored`` chains of untyped unknowns without any name (refused before any search);
- ``--normal-clients`` clients sending ordinary one- and two-hop patterns back to back.

Reports the hostile requests' statuses and how many stopped at their deadline, and the normal
requests' statuses, completeness and latency (p50/p95/max), next to the same normal load without
attack. Normal requests must all succeed, complete, within the request timeout.

    python benchmarks/hostile_retrieve.py --index-dir /tmp/metaqa.idx --out runs/hostile_retrieve.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from simgrag.testing.loopback import free_port


def hostile(hub: str, hops: int) -> dict[str, Any]:
    names = [hub] + [f"UNKNOWN thing {i}" for i in range(1, hops + 1)]
    return {"pattern": [[names[i], "UNKNOWN relation", names[i + 1]] for i in range(hops)], "k": 50}


def unanchored(hops: int) -> dict[str, Any]:
    return {"pattern": [[f"UNKNOWN {i}", "UNKNOWN relation", f"UNKNOWN {i + 1}"] for i in range(hops)]}


def normal_bodies(index_dir: Path, n: int) -> list[dict[str, Any]]:
    """One- and two-hop patterns from films of the index (the first ``n`` with a director)."""
    from simgrag.index.directory import open_index_dir

    store = open_index_dir(index_dir).store
    directed = store.relations.id_of("directed_by")
    films = [store.entities[int(h)] for h, r in zip(store.heads[:50_000], store.rels[:50_000], strict=True)
             if int(r) == directed][: n]
    return [{"pattern": [[f, "directed by", "UNKNOWN director 1"]]} if i % 2 == 0 else
            {"pattern": [[f, "directed by", "UNKNOWN director 1"], ["UNKNOWN movie 2", "directed by",
                                                                  "UNKNOWN director 1"]]}
            for i, f in enumerate(films)]


async def post(client: httpx.AsyncClient, body: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    start = time.perf_counter()
    try:
        response = await client.post("/v1/retrieve", json=body)
        payload = response.json()
        rows.append({"status": response.status_code, "seconds": time.perf_counter() - start,
                     "complete": payload.get("complete"), "error": payload.get("error")})
    except httpx.HTTPError as exc:
        rows.append({"status": -1, "seconds": time.perf_counter() - start, "error": type(exc).__name__})


async def normal_load(url: str, bodies: list[dict[str, Any]], clients: int, timeout: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    async def loop(mine: list[dict[str, Any]]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
            for body in mine:
                await post(client, body, rows)

    await asyncio.gather(*(loop(bodies[i::clients]) for i in range(clients)))
    return rows


async def attack(url: str, args: argparse.Namespace, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    hostile_rows: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=args.hostile + args.unanchored + 8)
    async with httpx.AsyncClient(base_url=url, timeout=args.timeout + 30, limits=limits) as client:
        start = time.perf_counter()
        attacks = [asyncio.create_task(post(client, hostile(args.hub, args.hops), hostile_rows))
                   for _ in range(args.hostile)]
        attacks += [asyncio.create_task(post(client, unanchored(args.hops), hostile_rows))
                    for _ in range(args.unanchored)]
        await asyncio.sleep(0.5)  # the attack is running
        normal = await normal_load(url, bodies, args.normal_clients, args.timeout + 30)
        await asyncio.gather(*attacks)
        wall = time.perf_counter() - start
    return {"hostile": hostile_rows, "normal": normal, "wall_s": wall}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r["seconds"] for r in rows if r["status"] == 200]
    statuses: dict[str, int] = {}
    for r in rows:
        key = f"{r['status']}" + (f" {r['error']}" if r.get("error") else "")
        statuses[key] = statuses.get(key, 0) + 1
    lat = np.asarray(ok) * 1000 if ok else np.zeros(1)
    return {"requests": len(rows), "statuses": statuses, "ok": len(ok),
            "complete": sum(r.get("complete") is True for r in rows),
            "incomplete": sum(r.get("complete") is False for r in rows),
            "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
            "max_ms": float(lat.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--hub", default="Drama", help="the named start of the hostile chains")
    parser.add_argument("--hops", type=int, default=6)
    parser.add_argument("--hostile", type=int, default=60)
    parser.add_argument("--unanchored", type=int, default=60)
    parser.add_argument("--normal", type=int, default=200, help="normal requests during the attack")
    parser.add_argument("--normal-clients", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0, help="the server's request timeout (--timeout)")
    parser.add_argument("--out", type=Path, default=Path("runs/hostile_retrieve.json"))
    args = parser.parse_args()
    bodies = normal_bodies(args.index_dir, args.normal)
    port = free_port()
    # retrieval only: an OpenAI-compatible LLM that is never called (no server behind the URL)
    cmd = [sys.executable, "-m", "simgrag.cli", "serve", str(args.index_dir), "--llm", "openai:unused", "--base-url",
           "http://127.0.0.1:9/v1", "--api-key", "unused", "--port", str(port), "--timeout", str(args.timeout),
           "--max-connections", "1024"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).json()["status"] == "ready":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("the server did not become ready")
        quiet = asyncio.run(normal_load(url, bodies, args.normal_clients, args.timeout + 30))
        loud = asyncio.run(attack(url, args, bodies))
    finally:
        server.terminate()
        server.wait(30)
    report = {"args": {k: str(v) for k, v in vars(args).items()}, "normal_alone": summary(quiet),
              "normal_under_attack": summary(loud["normal"]), "hostile": summary(loud["hostile"]),
              "attack_wall_s": loud["wall_s"]}
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
