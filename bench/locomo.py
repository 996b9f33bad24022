"""LoCoMo retrieval benchmark: does search put the evidence turns of a question in the top k?

Per conversation, every turn is stored as a memory ("{speaker}: {text}", plus the image
caption), dated with its session's date, its `dia_id` in metadata, in a scope of its own.
Each question of categories 1–4 is searched in that scope and scored against its evidence
ids: recall@5, recall@10 (fraction of evidence found) and NDCG@10; plus search latency
and ingest rate. The default pipeline runs beside its own vector-only and BM25-only modes.

    python bench/locomo.py [path/to/locomo.json] [--db PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from clawrecall import Memory

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev5.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA = re.compile(r"D\d+:\d+")


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turns(sample: dict) -> list[dict]:
    conv = sample["conversation"]
    out = []
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(conv[k], list))
    for n in numbers:
        when = session_date(conv[f"session_{n}_date_time"])
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            out.append({
                "content": text,
                "created_at": when + timedelta(seconds=30 * i),  # turns follow each other
                "session_id": f"{sample['sample_id']}/session_{n}",
                "metadata": {"dia_id": turn["dia_id"]},
            })
    return out


def questions(sample: dict, known: set[str], counters: dict[str, int]) -> list[dict]:
    out = []
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence: set[str] = set()
        for item in qa.get("evidence", []):
            ids = _DIA.findall(str(item))
            if len(ids) > 1:
                counters["evidence_split"] += 1
            for i in ids:
                if i in known:
                    evidence.add(i)
                else:
                    counters["evidence_unknown"] += 1
        if not evidence:
            counters["questions_without_evidence"] += 1
            continue
        out.append({"question": str(qa["question"]), "category": qa["category"], "evidence": evidence})
    return out


def ndcg(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def ingest(mem: Memory, data: list[dict]) -> tuple[dict[str, list[dict]], dict[str, int], float, int]:
    counters: dict[str, int] = defaultdict(int)
    qs: dict[str, list[dict]] = {}
    seconds = 0.0
    stored = 0
    for sample in data:
        scope = f"custom:{sample['sample_id']}"
        items = turns(sample)
        start = time.perf_counter()
        mem.add_many([{**t, "scope": scope} for t in items], dedup=False)
        seconds += time.perf_counter() - start
        stored += len(items)
        qs[scope] = questions(sample, {t["metadata"]["dia_id"] for t in items}, counters)
    return qs, dict(counters), seconds, stored


def evaluate(mem: Memory, qs: dict[str, list[dict]], mode: str, limit: int = 10) -> dict:
    """Score one search mode. `vector-leg`/`bm25-leg`: that leg alone, without the session-neighbour stage."""
    if mode.endswith("-leg"):
        saved = mem.config.retrieval.neighbor_weight
        mem.config.retrieval.neighbor_weight = 0.0
        try:
            return evaluate(mem, qs, mode.removesuffix("-leg"), limit)
        finally:
            mem.config.retrieval.neighbor_weight = saved
    per_cat: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    latencies = []
    for scope, items in qs.items():
        for q in items:
            start = time.perf_counter()
            hits = mem.search(q["question"], scope=scope, limit=limit, mode=mode)
            latencies.append((time.perf_counter() - start) * 1000)
            ranked = [h.memory.metadata.get("dia_id") for h in hits]
            ev = q["evidence"]
            r5 = len(ev & set(ranked[:5])) / len(ev)
            r10 = len(ev & set(ranked[:10])) / len(ev)
            per_cat[q["category"]].append((r5, r10, ndcg(ranked, ev)))
    rows = {}
    everything = [x for v in per_cat.values() for x in v]
    for name, values in [*((CATEGORIES[c], per_cat[c]) for c in sorted(per_cat)), ("overall", everything)]:
        rows[name] = {
            "n": len(values),
            "recall@5": statistics.fmean(v[0] for v in values),
            "recall@10": statistics.fmean(v[1] for v in values),
            "ndcg@10": statistics.fmean(v[2] for v in values),
        }
    latencies.sort()
    return {
        "rows": rows,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(len(latencies) * 0.95) - 1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo JSON file")
    parser.add_argument("--db", help="store to use (default: a temporary SQLite file)")
    parser.add_argument(
        "--modes", default="hybrid,vector,bm25,vector-leg,bm25-leg",
        help="comma-separated: hybrid, vector, bm25, trigram (the full pipeline on those legs), "
        "vector-leg, bm25-leg (the leg alone, no session-neighbour stage)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    data = json.loads(Path(args.data).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory.open(args.db or f"{tmp}/locomo.db")
        mem.embedder.embed(["warm up"], kind="passage")  # model load is not ingest time
        qs, counters, seconds, stored = ingest(mem, data)
        mem.search("warm up", scope=next(iter(qs)), limit=1)
        results = {mode: evaluate(mem, qs, mode) for mode in args.modes.split(",")}
        mem.close()
    report = {
        "data": args.data,
        "conversations": len(data),
        "memories": stored,
        "questions": sum(len(v) for v in qs.values()),
        "ingest_per_s": stored / seconds,
        "evidence": counters,
        "modes": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"LoCoMo: {report['conversations']} conversations, {stored} memories, {report['questions']} questions "
          f"(categories 1-4); ingest {report['ingest_per_s']:.0f} memories/s; evidence fixes: {counters}")
    print()
    print("| mode | category | n | recall@5 | recall@10 | NDCG@10 |")
    print("|---|---|---:|---:|---:|---:|")
    for mode, res in results.items():
        for name, row in res["rows"].items():
            label = f"**{name}**" if name == "overall" else name
            print(f"| {mode} | {label} | {row['n']} | {row['recall@5']:.3f} | {row['recall@10']:.3f} | {row['ndcg@10']:.3f} |")
    print()
    print("| mode | search p50 (ms) | search p95 (ms) |")
    print("|---|---:|---:|")
    for mode, res in results.items():
        print(f"| {mode} | {res['p50_ms']:.1f} | {res['p95_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
