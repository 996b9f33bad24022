"""What the search log costs a search: p50 and p95 of the same queries with `insight.search_log` on and
off, interleaved in rounds so the machine's load falls on both alike, and the log's work on the request
path alone (noting a search), which a loaded machine's noise on whole searches hides. The store is N memories with the
`hash` embedder (the figures are the store's and the log's work, not a model's).

    python bench/search_log.py --rows 5000 --queries 400 [--db postgresql://…]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from clawrecall import Caller, Memory

ALICE = Caller("alice")


def timings(mem: Memory, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        mem.search(q, caller=ALICE)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--db", help="a store URL (default: a new SQLite file)")
    args = ap.parse_args()
    target = args.db or str(Path(tempfile.mkdtemp()) / "memory.db")
    with Memory.open(target, embedding={"provider": "hash"}) as mem:
        mem.add_many([{"content": f"alice's note {i} about topic {i % 97} and item {i % 13}"} for i in range(args.rows)],
                     caller=ALICE, dedup=False)
    queries = [f"topic {i % 97} item {i % 13}" for i in range(args.queries)]
    results: dict[bool, list[float]] = {True: [], False: []}
    with Memory.open(target, embedding={"provider": "hash"}) as on, \
            Memory.open(target, embedding={"provider": "hash"}, insight={"search_log": False}) as off:
        timings(on, queries[:50]), timings(off, queries[:50])  # warm both
        for _ in range(args.rounds):
            for logged, mem in ((True, on), (False, off)):
                results[logged] += timings(mem, queries)
        on.upkeep.runtime.drain()
        logged_rows = len(on.insight.searches(limit=10_000))
        # the log's share of a search alone, free of the search's own noise: noting one with its 10 hits
        hits = on.search(queries[0], caller=ALICE, limit=10, min_score=0.0)
        noted = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for _ in range(1000):
                on._recorder.note(ALICE, ["global", "user:alice"], queries[0], "hybrid", hits, 1.0)
            noted.append((time.perf_counter() - started) * 1000)  # ms per 1000 = µs per search
            on.upkeep.runtime.drain()
    for logged, ms in results.items():
        ms.sort()
        print(f"search_log={'on ' if logged else 'off'}  p50 {statistics.median(ms):.3f} ms  "
              f"p95 {ms[int(len(ms) * 0.95)]:.3f} ms  ({len(ms)} searches)")
    print(f"p50 overhead {statistics.median(results[True]) - statistics.median(results[False]):+.3f} ms; "
          f"{logged_rows} searches logged")
    print(f"on the request path: {statistics.median(noted):.1f} µs a search (noting it with {len(hits)} hits; median of "
          f"{args.rounds} × 1000)")


if __name__ == "__main__":
    main()
