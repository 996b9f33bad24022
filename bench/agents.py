"""Household benchmark: what the household rule (docs/agents.md) costs a search and a write.

Builds a SQLite store of `--per-agent` synthetic memories for each of 4 agents of one user (a
level mix of 60 % private, 30 % shared, 10 % secret; fixed seed), then measures:

  * search p50/p95 (hybrid, limit 10, query embedding included, query cache off) as an agent,
    which reads its own memories and the master knowledge base (the other agents' shared ones,
    weighted by `retrieval.master_weight`), against the same search as the user with no agent
    (the scope's rows without the agent rule: what every search did before the household);
  * the cost of one add: a shared memory against a private one (dedup on, alternating, p50), the
    master copy being the row itself.

    python bench/agents.py [--per-agent 10000] [--queries 200] [--embedder hash|local] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

AGENTS = ("main", "drjones", "bob", "frank")
LEVELS = ("private",) * 6 + ("shared",) * 3 + ("secret",)
TOPICS = ("garden", "dentist", "bike", "router", "school", "recipe", "flight", "budget", "piano", "car",
          "insurance", "holiday", "doctor", "plants", "laptop", "neighbour", "birthday", "tax", "boiler", "dog")
TEMPLATES = ("Alice said the {t} needs attention on {d}.", "The {t} appointment moved to {d}.",
             "Remember that the {t} costs {n} euros.", "Alice prefers the {t} plan from {d}.",
             "Bob fixed the {t} on {d} for {n} euros.", "The {t} note: check it again in {n} days.")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def text(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(t=rng.choice(TOPICS), d=rng.choice(DAYS), n=rng.randint(2, 999)) + f" #{rng.randint(0, 10**9)}"


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-agent", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--embedder", choices=("hash", "local"), default="local")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.embedder == "hash":
        os.environ["CLAWRECALL_EMBEDDING__PROVIDER"] = "hash"
    os.environ["CLAWRECALL_EMBEDDING__QUERY_CACHE_SIZE"] = "0"

    from clawrecall import Caller, Memory

    rng = random.Random(20261207)
    folder = Path(tempfile.mkdtemp(prefix="clawrecall-agents-"))
    with Memory.open(folder / "household.db") as mem:
        started = time.perf_counter()
        for agent in AGENTS:
            caller = Caller("alice", agent)
            for start in range(0, args.per_agent, 1000):
                mem.add_many([{"content": text(rng), "visibility": rng.choice(LEVELS)}
                              for _ in range(min(1000, args.per_agent - start))], caller=caller, dedup=False)
        build_s = time.perf_counter() - started
        queries = [f"what about the {rng.choice(TOPICS)} on {rng.choice(DAYS)}?" for _ in range(args.queries)]
        as_agent, as_user = Caller("alice", "drjones"), Caller("alice")
        for q in queries[:10]:  # warm: the vector index loaded, the model's first runs
            mem.search(q, caller=as_agent)
            mem.search(q, caller=as_user)
        timings: dict[str, list[float]] = {"agent": [], "user": []}
        for q in queries:  # interleaved, so load on the machine falls on both alike
            for name, caller in (("agent", as_agent), ("user", as_user)):
                t = time.perf_counter()
                mem.search(q, caller=caller, limit=10)
                timings[name].append((time.perf_counter() - t) * 1000)
        writes: dict[str, list[float]] = {"private": [], "shared": []}
        for n in range(args.writes):
            for level in ("private", "shared") if n % 2 else ("shared", "private"):
                t = time.perf_counter()
                mem.add(text(rng), caller=as_agent, visibility=level)
                writes[level].append((time.perf_counter() - t) * 1000)
    result = {
        "per_agent": args.per_agent, "agents": len(AGENTS), "embedder": args.embedder, "build_s": round(build_s, 1),
        "search_ms": {k: {"p50": round(statistics.median(v), 2), "p95": round(percentile(v, 0.95), 2)} for k, v in timings.items()},
        "add_ms_p50": {k: round(statistics.median(v), 3) for k, v in writes.items()},
        "load": os.getloadavg(),
    }
    result["search_p50_ratio"] = round(result["search_ms"]["agent"]["p50"] / result["search_ms"]["user"]["p50"], 3)
    result["shared_write_extra_ms"] = round(result["add_ms_p50"]["shared"] - result["add_ms_p50"]["private"], 3)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{len(AGENTS)} agents x {args.per_agent} memories ({args.embedder} embedder), built in {build_s:.0f} s")
    for name, label in (("user", "as the user, no agent rule"), ("agent", "as agent drjones, master KB in the path")):
        s = result["search_ms"][name]
        print(f"  search {label:<40} p50 {s['p50']:.2f} ms  p95 {s['p95']:.2f} ms")
    print(f"  p50 ratio agent/user: {result['search_p50_ratio']:.3f}")
    print(f"  add p50: private {result['add_ms_p50']['private']:.3f} ms, shared {result['add_ms_p50']['shared']:.3f} ms "
          f"(+{result['shared_write_extra_ms']:.3f} ms)")
    print(f"  load average: {', '.join(f'{x:.2f}' for x in result['load'])}")


if __name__ == "__main__":
    main()
