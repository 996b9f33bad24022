"""How long a change takes to reach a client of `/v1/events` through another server process: two
`clawrecall serve` processes on one store, a stream open on the first, memories added through the
second (each write, at a random moment, waits for its event before the next), p50/p95 from the moment the write was
answered to the moment its event arrived. SQLite (the poll of the log, `insight.events_poll_s`) and
PostgreSQL (LISTEN/NOTIFY; its own `pgserver` in a temporary directory, or `--url`).

    python bench/events.py [--writes 50] [--backend sqlite,postgres] [--url postgresql://…]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from clawrecall.server.spawn import spawn_server


def measure(target: str, writes: int, workdir: Path) -> list[float]:
    with spawn_server(target, log_path=workdir / "one.log") as one, spawn_server(target, log_path=workdir / "two.log") as two:
        arrived: queue.Queue = queue.Queue()
        opened = threading.Event()

        def read() -> None:
            with httpx.Client(base_url=one.url, timeout=httpx.Timeout(10, read=None),
                              headers={"x-clawrecall-user": "alice"}) as client:
                with client.stream("GET", "/v1/events") as response:
                    for line in response.iter_lines():
                        if line.startswith("retry:"):
                            opened.set()
                        elif line.startswith("data:"):
                            arrived.put((time.perf_counter(), json.loads(line[5:])["memory_id"]))

        threading.Thread(target=read, daemon=True).start()
        opened.wait(60)
        out = []
        with httpx.Client(base_url=two.url, timeout=30, headers={"x-clawrecall-user": "alice"}) as writer:
            for n in range(writes):
                time.sleep(random.uniform(0, 0.3))  # writes at random moments, not in step with SQLite's poll
                r = writer.post("/v1/memories", json={"content": f"note {n} on the benchmark", "dedup": False})
                answered = time.perf_counter()
                at, memory_id = arrived.get(timeout=60)
                assert memory_id == r.json()["id"]
                out.append((at - answered) * 1000)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writes", type=int, default=50)
    ap.add_argument("--backend", default="sqlite,postgres")
    ap.add_argument("--url", help="a PostgreSQL database (default: a pgserver of its own)")
    args = ap.parse_args()
    os.environ["CLAWRECALL_EMBEDDING__PROVIDER"] = "hash"  # the servers' model is not what is measured
    workdir = Path(tempfile.mkdtemp())
    os.environ["CLAWRECALL_HOME"] = str(workdir / "home")
    for backend in args.backend.split(","):
        if backend == "sqlite":
            target = str(workdir / "memory.db")
        else:
            target = args.url or _pgserver(workdir)
        ms = measure(target, args.writes, workdir)
        ms.sort()
        print(f"{backend}: {len(ms)} writes, delivery p50 {statistics.median(ms):.1f} ms, "
              f"p95 {ms[int(len(ms) * 0.95) - 1]:.1f} ms, max {ms[-1]:.1f} ms (load {os.getloadavg()[0]:.2f})")


def _pgserver(workdir: Path) -> str:
    import pgserver

    server = pgserver.get_server(workdir / "pg", cleanup_mode="delete")
    server.psql("CREATE DATABASE events_bench;")
    return server.get_uri("events_bench")


if __name__ == "__main__":
    sys.exit(main())
