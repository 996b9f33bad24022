"""The reliability figures of docs/reliability.md: crash, concurrency and load, on SQLite and PostgreSQL.

    python bench/reliability.py crash [--rounds 20] [--command-rounds 3]
    python bench/reliability.py concurrency [--seconds 60] [--writers 8] [--readers 8]
    python bench/reliability.py load [--sizes 10000,100000] [--clients 1,8,32] [--seconds 20]

Common options: `--backends sqlite,postgres`, `--pg-url URL` (a server whose user may CREATE DATABASE;
default: a private `pgserver` in a temporary directory), `--json`. Crash and concurrency embed with the
`hash` provider (their subject is the store, not the model); load builds each store with
`--build-provider` (per size) and searches with the provider it was built with. Each run prints the
machine's load average next to its figures. The workloads themselves are tests/reliability_workloads.py's, which
the test suite runs in short versions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import httpx  # noqa: E402
from reliability_workloads import commands, concurrency, crash_command, crash_serve, pct  # noqa: E402
from scale import synthetic_memories, synthetic_queries  # noqa: E402

from clawrecall import Memory  # noqa: E402
from clawrecall.server.spawn import spawn_server  # noqa: E402

HASH_CONFIG = '[embedding]\nprovider = "hash"\n\n[retrieval.relevance]\nmodel = "hash/hashed-word-trigrams"\n'


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Backends:
    """Fresh store locations: SQLite files in a temporary directory, PostgreSQL databases on one server."""

    def __init__(self, workdir: Path, pg_url: str | None) -> None:
        self.workdir, self._pg_url, self._pg = workdir, pg_url, None
        self._made: list[str] = []

    def pg_server(self) -> str:
        if self._pg_url is None:
            import pgserver

            self._pg = pgserver.get_server(self.workdir / "pg", cleanup_mode="delete")
            self._pg_url = self._pg.get_uri()
        return self._pg_url

    def new(self, backend: str) -> str:
        if backend == "sqlite":
            path = self.workdir / f"store-{uuid.uuid4().hex[:8]}.db"
            return str(path)
        import psycopg

        server = self.pg_server()
        name = "rel_" + uuid.uuid4().hex[:12]
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self._made.append(name)
        return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))

    def close(self) -> None:
        if self._made:
            import psycopg

            with psycopg.connect(self.pg_server(), autocommit=True) as conn:
                for name in self._made:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if self._pg is not None:
            self._pg.cleanup()


@contextlib.contextmanager
def setting(provider: str, workdir: Path) -> Iterator[None]:
    """Embed with `provider` in this process and every server and process it starts."""
    before = os.environ.get("CLAWRECALL_CONFIG")
    if provider == "hash":
        path = workdir / "hash.toml"
        path.write_text(HASH_CONFIG)
        os.environ["CLAWRECALL_CONFIG"] = str(path)
    else:
        os.environ.pop("CLAWRECALL_CONFIG", None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CLAWRECALL_CONFIG", None)
        else:
            os.environ["CLAWRECALL_CONFIG"] = before


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


# --- crash ------------------------------------------------------------------------------------------


def run_crash(args, backends: Backends, log) -> dict:
    out: dict[str, Any] = {"load_avg_before": load_avg(), "serve": [], "commands": []}
    with setting("hash", backends.workdir):
        for backend in args.backends:
            work = backends.workdir / f"crash-{backend}"
            work.mkdir(exist_ok=True)
            started = time.monotonic()
            report = crash_serve(backends.new(backend), work, args.rounds, log=log)
            report.update(backend=backend, seconds=round(time.monotonic() - started, 1), load_avg=load_avg())
            report.pop("runs")
            out["serve"].append(report)
            log(f"serve on {backend}: {report}")
            for command in commands(work, args.size) if args.command_rounds else ():
                report = crash_command(command, lambda b=backend: backends.new(b), args.command_rounds, log=log)
                report.update(backend=backend, load_avg=load_avg())
                out["commands"].append(report)
    return out


def render_crash(report: dict) -> str:
    serve = table(["backend", "kill -9 rounds", "acknowledged add/update/delete/capture", "lost", "integrity",
                   "opens and serves", "seconds", "load avg after"],
                  [[r["backend"], r["rounds"], "/".join(str(r["acknowledged"][k]) for k in ("add", "update", "delete",
                                                                                             "capture")),
                    r["lost"], r["integrity"], "yes", r["seconds"], r["load_avg"]] for r in report["serve"]])
    cmds = table(["backend", "command", "write statements", "killed after statement", "run again", "load avg"],
                 [[r["backend"], r["command"], r["write_statements"], ", ".join(map(str, r["killed_at"])),
                   f"finished, same result ({r['finished_after']}/{len(r['killed_at'])})", r["load_avg"]]
                  for r in report["commands"]])
    return f"{serve}\n\n{cmds}" if report["commands"] else serve


# --- concurrency ------------------------------------------------------------------------------------


def run_concurrency(args, backends: Backends, log) -> dict:
    out = []
    with setting("hash", backends.workdir):
        for backend in args.backends:
            before = load_avg()
            report = concurrency(backends.new(backend), writers=args.writers, readers=args.readers, seconds=args.seconds)
            report.update(backend=backend, load_avg_before=before, load_avg=load_avg())
            log(f"{backend}: {report}")
            out.append(report)
    return {"runs": out}


def render_concurrency(report: dict) -> str:
    rows = []
    for r in report["runs"]:
        for op, s in r["ops"].items():
            rows.append([r["backend"], f"{r['writers']}w+{r['readers']}r × {r['seconds']:g}s", op, s["n"], s["per_s"],
                         s["p50_ms"], s["p95_ms"], r["lost"], r["duplicated"], r["errors"], r["locked_errors"],
                         r["integrity"] if isinstance(r["integrity"], str) else "FAILED", r["load_avg"]])
    return table(["backend", "run", "op", "n", "ops/s", "p50 ms", "p95 ms", "lost", "dup", "errors", "locked",
                  "integrity", "load avg"], rows)


# --- load -------------------------------------------------------------------------------------------


def build_store(target: str, size: int, log) -> float:
    started = time.monotonic()
    items = synthetic_memories(size)
    with Memory.open(target) as mem:
        for i in range(0, size, 2000):
            mem.add_many(items[i:i + 2000], dedup=False)
            log(f"  built {min(size, i + 2000)}/{size}")
    return time.monotonic() - started


def hammer(url: str, op: str, clients: int, seconds: float, queries: list[tuple[str, str]]) -> dict:
    """`clients` threads, each with its own keep-alive connection, calling `op` back to back for `seconds`."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(n: int) -> None:
        mine, bad, i = [], [], 0
        with httpx.Client(base_url=url, timeout=60) as c:
            while time.monotonic() < end:
                query, user = queries[(n * 7919 + i) % len(queries)]
                headers = {"x-clawrecall-user": user}
                began = time.perf_counter()
                try:
                    if op == "search":
                        r = c.post("/v1/search", json={"query": query, "limit": 5}, headers=headers)
                    else:
                        r = c.post("/v1/memories", json={"content": f"load note {n}-{i}-{time.time_ns()}: {query}",
                                                         "dedup": False}, headers=headers)
                    if r.status_code >= 300:
                        bad.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    bad.append(repr(exc))
                mine.append(time.perf_counter() - began)
                i += 1
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    return {"op": op, "clients": clients, "requests": len(latencies), "per_s": round(len(latencies) / wall, 1),
            "p50_ms": round(pct(latencies, 50) * 1000, 1), "p95_ms": round(pct(latencies, 95) * 1000, 1),
            "p99_ms": round(pct(latencies, 99) * 1000, 1), "errors": len(errors), "first_errors": errors[:2]}


def run_load(args, backends: Backends, log) -> dict:
    out = []
    providers = dict(zip(args.sizes, args.build_provider))
    for backend in args.backends:
        for size in args.sizes:
            provider = providers.get(size, args.build_provider[-1])
            with setting(provider, backends.workdir):
                target = backends.new(backend)
                build_s = build_store(target, size, log)
                log(f"{backend} {size}: built with {provider} in {build_s:.0f}s")
                queries = synthetic_queries(2000)
                with spawn_server(target, log_path=backends.workdir / f"load-{backend}-{size}.log") as server:
                    hammer(server.url, "search", 1, 3, queries)  # warm-up
                    for op in ("search", "add"):
                        for clients in args.clients:
                            cell = hammer(server.url, op, clients, args.seconds, queries)
                            cell.update(backend=backend, size=size, provider=provider, load_avg=load_avg())
                            log(f"  {cell}")
                            out.append(cell)
    return {"cells": out}


def render_load(report: dict) -> str:
    return table(["backend", "memories", "embedder", "op", "clients", "requests", "req/s", "p50 ms", "p95 ms",
                  "p99 ms", "errors", "load avg"],
                 [[c["backend"], c["size"], c["provider"], c["op"], c["clients"], c["requests"], c["per_s"],
                   c["p50_ms"], c["p95_ms"], c["p99_ms"], c["errors"], c["load_avg"]] for c in report["cells"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["crash", "concurrency", "load"])
    parser.add_argument("--backends", default="sqlite,postgres", type=lambda s: s.split(","))
    parser.add_argument("--pg-url")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=20, help="crash: kill -9's of serve per backend")
    parser.add_argument("--command-rounds", type=int, default=3, help="crash: kill -9's of each command per backend (0: none)")
    parser.add_argument("--size", type=int, default=2000, help="crash: memories the commands import and purge")
    parser.add_argument("--seconds", type=float, default=None, help="concurrency: 60; load: per cell, 20")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--sizes", default=[10_000, 100_000], type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--clients", default=[1, 8, 32], type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--build-provider", default=["local", "hash"], type=lambda s: s.split(","),
                        help="load: the embedder of each size's store, in --sizes order (default local,hash)")
    args = parser.parse_args(argv)
    if args.seconds is None:
        args.seconds = 60.0 if args.what == "concurrency" else 20.0
    log = (lambda m: print(m, file=sys.stderr, flush=True))
    workdir = Path(tempfile.mkdtemp(prefix="clawrecall-reliability-"))
    backends = Backends(workdir, args.pg_url)
    started = time.monotonic()
    try:
        run, render = {"crash": (run_crash, render_crash), "concurrency": (run_concurrency, render_concurrency),
                       "load": (run_load, render_load)}[args.what]
        report = run(args, backends, log)
    finally:
        backends.close()
        shutil.rmtree(workdir, ignore_errors=True)
    report.update(command=" ".join(["python", "bench/reliability.py", *(argv or sys.argv[1:])]),
                  seconds=round(time.monotonic() - started, 1), cpus=os.cpu_count(), load_avg_after=load_avg())
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render(report))
        print(f"\n{report['command']}: {report['seconds']}s on {report['cpus']} CPUs; load average after: "
              f"{report['load_avg_after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
