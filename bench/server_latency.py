"""End-to-end latency of the server at 10k memories: `memory_recall` and the recall hook over HTTP.

The store is scale.py's synthetic 10k store (reused from its cache when present, built otherwise),
copied so the server's token table never touches scale.py's copy. A real `clawrecall serve` runs
on it; clients are threads, each with its own keep-alive httpx connection, calling as a trusted
service token naming one of the store's users per request (as the OpenClaw plugin does):

  * `POST /v1/tools/memory_recall` `{query, limit: 5}`
  * `POST /v1/hooks/before_prompt_build` `{prompt}` (with a session per client)

with 1 and with 8 concurrent clients. Every request asks a distinct question (no query-cache
hits); each cell reports p50/p95 latency as the client sees it and the sustained requests/s.
The same two calls made in process first (the tool layer and the hook function, no HTTP) show
what the server itself adds, measured on the machine as loaded at the time.

    python bench/server_latency.py [--size 10000] [--requests 400] [--db-dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DEFAULT_DB_DIR, build, machine, pct, synthetic_queries  # noqa: E402

from clawrecall import Caller, Memory, hooks  # noqa: E402
from clawrecall.auth import TokenStore  # noqa: E402
from clawrecall.server.spawn import spawn_server  # noqa: E402
from clawrecall.tools import run_tool  # noqa: E402

CLIENTS = (1, 8)
HOOK_P50_TARGET_MS = 25.0
ENDPOINTS = {
    "memory_recall": ("/v1/tools/memory_recall", lambda q: {"query": q, "limit": 5}),
    "recall hook": ("/v1/hooks/before_prompt_build", lambda q: {"prompt": q}),
}


def prepare_store(size: int, db_dir: Path, log) -> Path:
    """A private copy of scale.py's store of `size` memories (built there first if missing)."""
    source = DEFAULT_DB_DIR / f"scale-{size}.db"
    if not source.exists():
        log(f"building {source} (scale.py's synthetic store)")
        DEFAULT_DB_DIR.mkdir(parents=True, exist_ok=True)
        info = build(source, size, log)
        (DEFAULT_DB_DIR / f"scale-{size}.json").write_text(json.dumps(info, indent=2))
    target = db_dir / f"server-{size}.db"
    db_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", ".serve.log"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return target


def run_cell(url: str, token: str, path: str, body, work: list[tuple[str, str]], clients: int) -> dict:
    """`clients` threads share `work`; returns latencies (ms), wall time and how many hooks injected."""
    latencies: list[float] = []
    injected = [0]
    lock = threading.Lock()
    queue = list(work)

    def client(n: int) -> None:
        headers = {"Authorization": f"Bearer {token}", "X-Clawrecall-Session": f"bench-{n}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            while True:
                with lock:
                    if not queue:
                        return
                    query, user = queue.pop()
                started = time.perf_counter()
                response = http.post(path, json=body(query), headers={"X-Clawrecall-User": user})
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                with lock:
                    latencies.append(elapsed)
                    injected[0] += bool(response.json().get("prependContext"))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {
        "clients": clients, "requests": len(latencies), "p50_ms": statistics.median(latencies),
        "p95_ms": pct(latencies, 95), "req_per_s": len(latencies) / wall, "injected": injected[0],
    }


def in_process(db: Path, work: list[tuple[str, str]]) -> list[dict]:
    """The two calls without HTTP, one at a time: what the engine and the hook cost on their own."""
    with Memory.open(db) as mem:
        for query, user in work[:20]:
            run_tool(mem, Caller(user), "memory_recall", {"query": query})
        calls = {
            "memory_recall": lambda q, u: run_tool(mem, Caller(u), "memory_recall", {"query": q, "limit": 5}),
            "recall hook": lambda q, u: hooks.before_prompt_build(mem, {"prompt": q}, Caller(u, None, "bench")),
        }
        cells = []
        for n, (name, call) in enumerate(calls.items()):
            latencies = []
            for query, user in work[20 + n :: 2]:
                started = time.perf_counter()
                call(query, user)
                latencies.append((time.perf_counter() - started) * 1000)
            cells.append({"endpoint": f"{name} (in process)", "clients": 1, "requests": len(latencies),
                          "p50_ms": statistics.median(latencies), "p95_ms": pct(latencies, 95),
                          "req_per_s": 1000 * len(latencies) / sum(latencies), "injected": 0})
    return cells


def measure(size: int, requests: int, db_dir: Path, log) -> dict:
    db = prepare_store(size, db_dir, log)
    tokens = TokenStore(db)
    token = tokens.create(kind="service", name="bench")[1]
    tokens.close()
    cells = len(ENDPOINTS) * len(CLIENTS)
    queries = synthetic_queries(requests * (cells + 1) + 40)
    report = {"size": size, "machine": machine(), "cells": in_process(db, queries[requests * cells :])}
    for cell in report["cells"]:
        log(f"{cell['endpoint']}: p50 {cell['p50_ms']:.1f} ms, p95 {cell['p95_ms']:.1f} ms")
    with spawn_server(db, env={"CLAWRECALL_HOME": str(db_dir / "home")}) as server:
        log(f"server ready at {server.url}")
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            for query, user in queries[requests * cells : requests * cells + 20]:  # warm index, caches, code paths
                http.post("/v1/tools/memory_recall", json={"query": query}, headers={"X-Clawrecall-User": user})
        chunks = iter(queries[i : i + requests] for i in range(0, requests * cells, requests))
        for clients in CLIENTS:
            for name, (path, body) in ENDPOINTS.items():
                cell = {"endpoint": name, **run_cell(server.url, token, path, body, next(chunks), clients)}
                report["cells"].append(cell)
                log(f"{name}, {clients} client(s): p50 {cell['p50_ms']:.1f} ms, p95 {cell['p95_ms']:.1f} ms, "
                    f"{cell['req_per_s']:.0f} req/s")
    report["machine"]["load_avg_end"] = os.getloadavg()
    return report


def render(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"{report['size']:,} memories; {m['cpu']}, {m['cpu_count']} CPUs, Python {m['python']}, torch {m['torch']}; "
        f"load average {m['load_avg'][0]:.2f} at start, {m['load_avg_end'][0]:.2f} at end",
        "",
        "| endpoint | clients | requests | p50 (ms) | p95 (ms) | req/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in report["cells"]:
        targeted = c["endpoint"] == "recall hook" and c["clients"] == 1
        miss = " ✗" if targeted and c["p50_ms"] > HOOK_P50_TARGET_MS else ""
        lines.append(f"| {c['endpoint']} | {c['clients']} | {c['requests']} | {c['p50_ms']:.1f}{miss} "
                     f"| {c['p95_ms']:.1f} | {c['req_per_s']:.0f} |")
    hooks = [c for c in report["cells"] if c["endpoint"] == "recall hook"]
    lines += [
        "",
        f"Target: recall hook p50 ≤ {HOOK_P50_TARGET_MS:g} ms under 1 client (✗ marks a miss). Latency is the "
        "client's, HTTP included; every request embeds a new question. The hook injected memories on "
        f"{sum(c['injected'] for c in hooks)} of {sum(c['requests'] for c in hooks)} turns.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=400, help="requests per cell (endpoint × clients)")
    parser.add_argument("--db-dir", type=Path, default=DEFAULT_DB_DIR.parent / "clawrecall-server-latency")
    parser.add_argument("--json", action="store_true", help="print the raw report as JSON")
    args = parser.parse_args(argv)
    report = measure(args.size, args.requests, args.db_dir, lambda msg: print(msg, file=sys.stderr))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
