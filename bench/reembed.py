"""What a `reembed` costs, phase by phase: staging the new vectors (embedding + writes to
`staged_vectors`), the swap (one transaction: every row's vector and model, the fingerprint) and
the vector index after it (SQLite: the in-process matrix reloaded by the first search;
PostgreSQL: the HNSW build). Writers wait for the swap; PostgreSQL's readers too (its DROP INDEX
lock), SQLite's go on with the old vectors until COMMIT. "staging" includes emptying the staged
table after the swap.

The store is N synthetic rows with random 384-d vectors, re-embedded by the `hash` provider (so
the figures are the store's work, not a model's).

    python bench/reembed.py --sizes 20000,100000 [--backend sqlite|postgres] [--url postgresql://…]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from clawrecall import Memory


def load(target: str, n: int) -> None:
    rng = np.random.default_rng(7)
    with Memory.open(target, embedding={"provider": "hash"}) as mem, mem.upkeep.deferred_vector_index():
        for start in range(0, n, 5000):
            size = min(5000, n - start)
            vectors = rng.standard_normal((size, 384)).astype(np.float32)
            mem.add_many([{"content": f"synthetic memory {start + i} about topic {(start + i) % 997}"} for i in range(size)],
                         embeddings=vectors, dedup=False)


def measure(target: str, n: int) -> dict[str, float]:
    load(target, n)
    with Memory.open(target, embedding={"provider": "hash"}, check_embedding=False) as mem:
        store = mem._store
        timings: dict[str, float] = {}

        def timed(name: str, fn):
            def run(*args, **kw):
                t = time.perf_counter()
                try:
                    return fn(*args, **kw)
                finally:
                    timings[name] = time.perf_counter() - t
            return run

        store.swap_staged_vectors = timed("swap", store.swap_staged_vectors)
        store.build_vector_index = timed("index", store.build_vector_index)
        started = time.perf_counter()
        assert mem.reembed() == n
        timings["total"] = time.perf_counter() - started
        t = time.perf_counter()
        mem.search("synthetic memory 5 about topic 5", mode="vector")
        timings["first search"] = time.perf_counter() - t
    timings["staging"] = timings["total"] - timings["swap"] - timings["index"]
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--url", help="a PostgreSQL database to use (emptied first); default: a temporary pgserver")
    args = parser.parse_args()
    server = None
    print("| backend | rows | staging s | rows/s | swap s | index s | first search s | total s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        if args.backend == "sqlite":
            target = str(Path(tempfile.mkdtemp(prefix="clawrecall-reembed-")) / "bench.db")
        else:
            import psycopg

            if args.url is None and server is None:
                import pgserver

                server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="clawrecall-reembed-pg-")), cleanup_mode="delete")
            url = args.url or server.get_uri()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")
            target = url
        t = measure(target, n)
        print(f"| {args.backend} | {n:,} | {t['staging']:.1f} | {n / t['staging']:,.0f} | {t['swap']:.2f} | "
              f"{t['index']:.2f} | {t['first search']:.2f} | {t['total']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
