"""Two releases' PostgreSQL searches, interleaved on copies of the same kept stores: wall time and CPU per search.

Each search is the `search_context` tool as an agent calls it (a user's question, the ten best items of
every source), in process: the query's embedding (no query cache), every statement and every stage.

On a shared machine a wall time says as much about the load as about the code, so each round runs every
release once on each store, one after the other, and reports beside the p50 the CPU each search cost:
the searching process's own, and that of every PostgreSQL process (the server must be one whose data
directory this user can read, `--pgdata`; the benchmark's runs are then the only work it does). The
top-10 items (ids and scores) of every question are written to `--hits` per release (the last round's), and
it says for how many questions each release's equal the first release's.

The stores are `bench/conversations.py`'s 120k-row search stores, kept as template databases (`--keep`).
Each release searches its own copy, made once: the second release migrates its copy when it opens it.

    python bench/pg_compare.py --url postgresql://…/postgres --pgdata DIR --release old=/path/to/src \
        --release new=/path/to/other/src [--layouts spread,one] [--queries 200] [--rounds 3] [--hits DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conversations import SEED, cpu_s, load, server_cpu_s
from postgres import admin
from scale import QUERY_TEMPLATES, USERS, _fill, pct

KEPT = "clawkept_search_{layout}_100000_10000_10000"


def questions(users: int, n: int) -> list[tuple[str, str]]:
    """`bench/conversations.py`'s questions: each with the user who asks it."""
    rng = random.Random(SEED + 5)
    seen: dict[str, str] = {}
    while len(seen) < n:
        seen.setdefault(_fill(rng.choice(QUERY_TEMPLATES), rng), rng.choice(USERS[:users]))
    return list(seen.items())


def search(url: str, users: int, n: int, pgdata: Path, hits_path: Path | None) -> dict[str, Any]:
    """One run, in the release's own process: every question once after a warm-up."""
    from clawrecall import Caller, Memory
    from clawrecall.tools import run_tool

    asked = questions(users, n)
    with Memory.open(url, embedding={"query_cache_size": 0}) as mem:
        context = lambda q, user: run_tool(mem, Caller(user, "main"), "search_context", {"query": q, "limit": 10})  # noqa: E731
        for q, user in asked[:20]:  # warm-up: the model, the pool, the planner's answers
            context(q, user)
        ms, top = [], []
        pid = os.getpid()
        pg0, own0 = server_cpu_s(pgdata), cpu_s(pid)
        for q, user in asked:
            t = time.perf_counter()
            found = context(q, user)
            ms.append((time.perf_counter() - t) * 1000)
            top.append([(r["id"], r["score"]) for r in found.details["results"]])
        pg1, own1 = server_cpu_s(pgdata), cpu_s(pid)
    if hits_path is not None:
        hits_path.write_text(json.dumps(top))
    return {"p50_ms": statistics.median(ms), "p95_ms": pct(ms, 95), "process_cpu_ms": (own1 - own0) * 1000 / n,
            "postgres_cpu_ms": (pg1 - pg0) * 1000 / n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the server (a database URL whose user may CREATE DATABASE)")
    parser.add_argument("--pgdata", type=Path, required=True, help="the server's data directory (its CPU is read)")
    parser.add_argument("--release", action="append", default=[], metavar="NAME=SRC", help="a release's source directory")
    parser.add_argument("--layouts", default="spread,one")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hits", type=Path, help="write each release's top-10 lists here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--run", nargs=3, metavar=("URL", "USERS", "HITS"), help=argparse.SUPPRESS)  # one run, in a child
    args = parser.parse_args(argv)
    if args.run:
        url, users, hits = args.run
        print(json.dumps(search(url, int(users), args.queries, args.pgdata, Path(hits) if hits != "-" else None)))
        return 0
    releases = dict(r.split("=", 1) for r in args.release)
    if args.hits is not None:
        args.hits.mkdir(parents=True, exist_ok=True)
    rows = []
    for layout in args.layouts.split(","):
        users = 20 if layout == "spread" else 1
        copies = {}
        for name in releases:
            db = f"compare_{layout}_{name}"
            admin(args.url, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            admin(args.url, f"CREATE DATABASE {db} TEMPLATE {KEPT.format(layout=layout)}")
            copies[name] = urlunsplit(urlsplit(args.url)._replace(path=f"/{db}"))
        for round_ in range(args.rounds):
            for name, src in releases.items():
                hits = "-" if args.hits is None else str(args.hits / f"{layout}-{name}.json")
                started = load()
                out = subprocess.run(
                    [sys.executable, __file__, "--url", args.url, "--pgdata", str(args.pgdata), "--queries", str(args.queries),
                     "--run", copies[name], str(users), hits],
                    env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(f"{name}'s run on {layout} failed:\n{out.stderr}")
                row = {"layout": layout, "release": name, "round": round_ + 1, "load": started,
                       **json.loads(out.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(f"{layout:6s} {name:5s} round {round_ + 1}: p50 {row['p50_ms']:6.1f} ms, p95 {row['p95_ms']:6.1f} ms, process CPU "
                      f"{row['process_cpu_ms']:5.1f} ms, PostgreSQL CPU {row['postgres_cpu_ms']:5.1f} ms per search "
                      f"(load {started})", file=sys.stderr, flush=True)
        for db in copies.values():
            admin(args.url, f"DROP DATABASE IF EXISTS {urlsplit(db).path[1:]} WITH (FORCE)")
        if args.hits is not None and len(releases) > 1:
            first, *others = [json.loads((args.hits / f"{layout}-{name}.json").read_text()) for name in releases]
            for name, other in zip(list(releases)[1:], others):
                same = sum(a == b for a, b in zip(first, other))
                print(f"{layout:6s} {name} and {next(iter(releases))}: the same top 10, ids and scores, for {same} of "
                      f"{len(first)} questions", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
