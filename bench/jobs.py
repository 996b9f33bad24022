"""What the job queue costs: enqueueing a job in a transaction of its own (what a segment's close adds to
`agent_end`), and how many jobs per second workers drain when the handler does nothing (the queue's own
overhead: claim, heartbeat thread, finish).

    python bench/jobs.py [--db PATH|URL] [--jobs 1000] [--workers 1,2,4] [--json]

The default store is a fresh SQLite file in a temporary folder; `--db postgresql://…` measures PostgreSQL
(the database must be empty: the bench enqueues into it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from clawrecall import Caller, Memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="clawrecall-bench-jobs-")
    db = args.db or str(Path(folder) / "jobs.db")
    results: dict[str, object] = {"db": "sqlite" if not db.startswith("postgres") else "postgres", "jobs": args.jobs}
    with Memory.open(db, embedding={"provider": "hash"}, jobs={"poll_s": 0.01}) as mem:
        mem.upkeep.job("noop", lambda job, lease: None)
        for n in (int(w) for w in args.workers.split(",")):
            took = []
            for i in range(args.jobs):
                started = time.perf_counter()
                with mem._store.transaction():
                    mem.jobs.enqueue("noop", scope="user:bench", subject_id=f"{n}-{i}")
                took.append(time.perf_counter() - started)
            workers = [mem.upkeep.worker() for _ in range(n)]
            threads = [threading.Thread(target=w.run, kwargs={"once": True}) for w in workers]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - started
            took.sort()
            results[f"{n}_workers"] = {
                "enqueue_p50_ms": round(statistics.median(took) * 1000, 3),
                "enqueue_p99_ms": round(took[int(len(took) * 0.99)] * 1000, 3),
                "drained_per_s": round(args.jobs / elapsed),
            }
        assert mem.jobs.stats(caller=Caller()).by_status["done"] == args.jobs * len(args.workers.split(","))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{results['db']}, {args.jobs} jobs per run")
    for key, r in results.items():
        if isinstance(r, dict):
            print(f"  {key.split('_')[0]} worker(s): enqueue p50 {r['enqueue_p50_ms']} ms, p99 {r['enqueue_p99_ms']} ms; "
                  f"drained {r['drained_per_s']} jobs/s")


if __name__ == "__main__":
    main()
