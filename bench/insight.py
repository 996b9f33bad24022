"""Insight benchmark: the clusters of near-identical memories and the clean-up report over one big scope.

Builds (once, kept in --db-dir) a store of N synthetic memories (random sentences, or bench/scale.py's
templated texts) all in one user's scope, every 50th memory with two near-copies (a word added, a word dropped), embedded with the
`hash` provider (the cost measured is the store's and the grouping's, not the model's); then times
`mem.insight.clusters` (the 20 largest groups, as a person asks) and `mem.insight.cleanup` over that scope and reports how many planted memories
were put in one group with their two copies (a group may hold more: the synthetic texts share templates). Goal: clusters over a 100k scope in ≤ 10 s.

    python bench/insight.py                  # 100k memories
    python bench/insight.py --n 10000 --runs 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale import synthetic_memories  # noqa: E402

from clawrecall import Memory  # noqa: E402
from clawrecall.scopes import Caller  # noqa: E402

HASH = '[embedding]\nprovider = "hash"\n\n[retrieval.relevance]\nmodel = "hash/hashed-word-trigrams"\n'
GOAL_S = 10.0
PLANT_EVERY = 50
USER = Caller("bench")


def sentences(n: int) -> list[dict]:
    """N distinct memories: 8-14 words each from a 20,000-word vocabulary (as varied as real notes are)."""
    rng = random.Random(7)
    syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "din", "pa", "quo", "ix", "zu", "ber", "na"]
    vocabulary = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(30_000)})
    return [{"content": " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 14))).capitalize() + ".",
             "category": "fact"} for _ in range(n)]


def items(n: int, texts: str) -> tuple[list[dict], list[list[int]]]:
    """N memories of one user, each 50th followed by two near-copies of it."""
    base = synthetic_memories(n) if texts == "templates" else sentences(n)
    out: list[dict] = []
    planted: list[list[int]] = []
    for i, item in enumerate(base):
        if len(out) >= n:
            break
        text = f"{item['content']} (note {i})"  # every memory its own words: only the planted copies are alike
        out.append({"content": text, "category": item["category"]})
        if i % PLANT_EVERY == 0 and len(out) + 2 <= n:
            first = len(out) - 1
            out.append({"content": text + " indeed", "category": item["category"]})
            out.append({"content": text.replace(" ", "  ", 1) + " again", "category": item["category"]})
            planted.append([first, first + 1, first + 2])
    return out, planted


def build(path: Path, n: int, texts: str) -> tuple[list[str], list[list[int]]]:
    """The store's ids in insertion order and the planted groups (indexes), building the store if missing."""
    data, planted = items(n, texts)
    marker = path.with_suffix(".ids.json")
    if path.exists() and marker.exists():
        return json.loads(marker.read_text()), planted
    ids: list[str] = []
    with Memory.open(path) as mem:
        for i in range(0, len(data), 2000):
            ids += [r.id for r in mem.add_many(data[i:i + 2000], caller=USER, dedup=False)]
            print(f"built {len(ids)}/{len(data)}", file=sys.stderr, flush=True)
    marker.write_text(json.dumps(ids))
    return ids, planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the scope (default 100000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each report (default 3)")
    parser.add_argument("--db-dir", default=os.path.join(tempfile.gettempdir(), "clawrecall-bench-insight"),
                        help="where the built store is kept between runs")
    parser.add_argument("--texts", choices=["sentences", "templates"], default="sentences",
                        help="distinct random sentences (default), or bench/scale.py's templated memories, which "
                             "the hash provider finds alike by the thousand (a worst case: huge groups)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    folder = Path(args.db_dir)
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.toml"
    config.write_text(HASH)
    os.environ["CLAWRECALL_CONFIG"] = str(config)
    path = folder / f"insight-{args.texts}-{args.n}.db"
    ids, planted = build(path, args.n, args.texts)
    results: dict[str, object] = {"n": args.n, "texts": args.texts, "load": os.getloadavg()[0]}
    with Memory.open(path) as mem:
        times = []
        for _ in range(args.runs):  # as a person asks: the 20 largest groups
            started = time.perf_counter()
            mem.insight.clusters(caller=USER)
            times.append(time.perf_counter() - started)
        found = mem.insight.clusters(caller=USER, limit=10_000)  # every group, to check the planted ones
        group_of = {m.id: n for n, c in enumerate(found) for m in c.memories}
        together = sum(len({group_of.get(ids[i], -1 - i) for i in g}) == 1 for g in planted)
        started = time.perf_counter()
        report = mem.insight.cleanup(caller=USER)
        cleanup_s = time.perf_counter() - started
    results.update(clusters_s=round(statistics.median(times), 2), clusters_found=len(found),
                   planted=len(planted), planted_together=together, cleanup_s=round(cleanup_s, 2),
                   cleanup_items=len(report.items), goal_s=GOAL_S)
    if args.json:
        print(json.dumps(results))
        return
    print(f"| memories | clusters (median of {args.runs}) | groups found | planted copies grouped together | cleanup | goal |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.n:,} | {results['clusters_s']} s | {len(found)} | {together} of {len(planted)} | "
          f"{results['cleanup_s']} s | ≤ {GOAL_S:g} s |")
    print(f"load average {results['load']:.1f}")


if __name__ == "__main__":
    main()
