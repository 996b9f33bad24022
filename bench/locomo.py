"""LoCoMo retrieval benchmark: does search put the evidence turns of a question in the top k?

Two ways in (`--through`):

  * `memories` (default): per conversation, every turn is stored as a memory ("{speaker}: {text}",
    plus the image caption), dated with its session's date, its `dia_id` in metadata, in a scope
    of its own;
  * `messages`: the conversation record. Each session is logged as one conversation session of the
    conversation's user (`mem.conversations.log`; the session's first speaker is the user, the other
    the assistant; the same text and times), the vectors are backfilled, and questions are asked
    as `search_context` asks them: over memories, messages and file chunks together.

Each question of categories 1–4 is searched in its conversation and scored against its evidence
ids: recall@5, recall@10 (fraction of evidence found) and NDCG@10; plus search latency and
ingest rate. The default pipeline runs beside its own vector-only and BM25-only modes.

`--extract` (with `--through messages`, an OpenAI-compatible `--base-url` and `--model`) measures
fact-augmented keys (docs/extraction.md): the ended sessions' extraction jobs run with
`mem.upkeep.run_job` until none is left, and the questions are asked twice of the same store: with
the messages' keys as extraction wrote them, then with every message's keys removed and its vector
made again of its content alone, so the keys are the only difference. Each time three ways: over
messages only (raw conversation search); over every source as search_context searches, where a
fact or summary hit finds no turn; and the same where a fact hit finds the turns it came from (its
`metadata.message_ids`). `--conversations` and `--sessions` take a subset; a question is kept only
if all its evidence lies in the sessions logged.

    python bench/locomo.py [path/to/locomo.json] [--through memories|messages] [--db PATH] [--json]
                           [--embedding-model multilingual-e5-small]
    python bench/locomo.py --through messages --extract --base-url http://127.0.0.1:18099/v1 --model local \
        --conversations conv-30 --sessions 6
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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # imported where used: bench/llm_tokens.py reads LoCoMo here in mem0's environment, without clawrecall
    from clawrecall import Memory

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev5.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA = re.compile(r"D\d+:\d+")
SOURCES = ["memory", "message", "chunk"]  # what search_context searches
TUNE = 3  # conversations a default may be tuned on; the rest are held out (bench/relevance.py, bench/segments.py)


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def sessions(sample: dict) -> list[tuple[str, list[dict]]]:
    """Each session's id and turns, in order: dia_id, speaker, text (with the image caption), time."""
    conv = sample["conversation"]
    out = []
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(conv[k], list))
    for n in numbers:
        when = session_date(conv[f"session_{n}_date_time"])
        items = []
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            items.append({
                "dia_id": turn["dia_id"], "speaker": turn["speaker"], "text": text,
                "at": when + timedelta(seconds=30 * i),  # turns follow each other
            })
        out.append((f"{sample['sample_id']}/session_{n}", items))
    return out


def turns(sample: dict) -> list[dict]:
    """Every turn as a memory to store."""
    return [
        {"content": f"{t['speaker']}: {t['text']}", "created_at": t["at"], "session_id": session,
         "metadata": {"dia_id": t["dia_id"]}}
        for session, items in sessions(sample) for t in items
    ]


def transcript(items: list[dict], *, names: bool = True) -> list[dict]:
    """A session's turns as chat messages: its first speaker is the user, the other the assistant."""
    user = items[0]["speaker"] if items else None
    return [
        {"role": "user" if t["speaker"] == user else "assistant",
         "content": f"{t['speaker']}: {t['text']}" if names else t["text"],
         "timestamp": t["at"].isoformat(), "id": t["dia_id"]}
        for t in items
    ]


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


def ndcg(ranked: list[list[str]], relevant: set[str], k: int = 10) -> float:
    """Each hit's gain is the evidence turns it finds first (one for a turn; a fact may find several)."""
    seen: set[str] = set()
    dcg = 0.0
    for i, hit in enumerate(ranked[:k]):
        new = (set(hit) & relevant) - seen
        seen |= new
        dcg += len(new) / math.log2(i + 2)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return min(dcg / ideal, 1.0) if ideal else 0.0


@dataclass
class Ingested:
    """A store built from LoCoMo, and how to ask it: `ask(conversation, question, mode, limit)` → the dia_ids
    of the hits, best first."""

    questions: dict[str, list[dict]]  # by conversation (sample id)
    counters: dict[str, int]
    seconds: float  # storing, embedding included
    stored: int
    ask: Callable[[str, str, str, int], list[list[str]]]  # each hit's dia_ids (none, or a fact's several)
    message_ids: dict[str, str] | None = None  # messages: message id → dia_id


def ingest(mem: Memory, data: list[dict]) -> Ingested:
    """Each turn a memory, each conversation a scope."""
    counters: dict[str, int] = defaultdict(int)
    qs: dict[str, list[dict]] = {}
    seconds = 0.0
    stored = 0
    for sample in data:
        items = turns(sample)
        start = time.perf_counter()
        mem.add_many([{**t, "scope": f"custom:{sample['sample_id']}"} for t in items], dedup=False)
        seconds += time.perf_counter() - start
        stored += len(items)
        qs[sample["sample_id"]] = questions(sample, {t["metadata"]["dia_id"] for t in items}, counters)

    def ask(conversation: str, question: str, mode: str, limit: int) -> list[list[str]]:
        hits = mem.search(question, scope=f"custom:{conversation}", limit=limit, mode=mode)
        return [[d] if (d := h.memory.metadata.get("dia_id")) else [] for h in hits]

    return Ingested(qs, dict(counters), seconds, stored, ask)


def ingest_messages(mem: Memory, data: list[dict], *, names: bool = True, limit_sessions: int | None = None) -> Ingested:
    """Each session a logged conversation session of the conversation's user; vectors backfilled before
    searching. `names=False` logs each turn's text without its speaker's name; `limit_sessions` logs
    each conversation's first sessions only and keeps the questions whose evidence all lies in them."""
    from clawrecall import Caller

    counters: dict[str, int] = defaultdict(int)
    qs: dict[str, list[dict]] = {}
    dia: dict[str, str] = {}  # message id → dia_id
    start = time.perf_counter()
    for sample in data:
        caller = Caller(user_id=sample["sample_id"])
        everything = sessions(sample)
        logged = set()
        for session, items in everything[:limit_sessions]:
            result = mem.conversations.log(transcript(items, names=names), caller=caller, session_id=session)
            dia.update(zip(result.ids, (t["dia_id"] for t in items)))
            mem.conversations.end(session, caller=caller)
            logged.update(t["dia_id"] for t in items)
        asked = questions(sample, {t["dia_id"] for _, items in everything for t in items}, counters)
        qs[sample["sample_id"]] = [q for q in asked if q["evidence"] <= logged]
        counters["questions_beyond_sessions"] += len(asked) - len(qs[sample["sample_id"]])
    mem.upkeep.backfill()
    seconds = time.perf_counter() - start
    return Ingested(qs, {k: v for k, v in counters.items() if v}, seconds, len(dia), asker(mem, dia), dia)


def asker(mem: Memory, dia: dict[str, str], sources: list[str] = SOURCES,
          facts_find_turns: bool = False) -> Callable[[str, str, str, int], list[list[str]]]:
    """Questions asked of the logged conversations over `sources`, as the conversation's user. A message's
    hit finds its turn; with `facts_find_turns` an extracted fact's hit finds the turns it came from."""
    from clawrecall import Caller

    def ask(conversation: str, question: str, mode: str, limit: int) -> list[list[str]]:
        hits = mem.search(question, caller=Caller(user_id=conversation), sources=sources, limit=limit, mode=mode)
        out = []
        for h in hits:
            if h.id in dia:
                out.append([dia[h.id]])
            elif facts_find_turns and h.memory.source_type == "extraction":
                out.append([dia[m] for m in h.memory.metadata.get("message_ids", []) if m in dia])
            else:
                out.append([])
        return out

    return ask


def extract(mem: Memory, built: Ingested, worker: str = "bench-locomo", budget_s: float | None = None) -> dict:
    """Run the queued jobs (extraction, session summaries) until none is left, waiting out the retries of
    an LLM that is slow or down, and starting none after `budget_s` (the rest stay queued, and counted);
    what they did and cost."""
    from clawrecall import Caller

    start = time.perf_counter()
    jobs = []
    while budget_s is None or time.perf_counter() - start < budget_s:
        job = mem.upkeep.run_job(worker)
        if job is not None:
            jobs.append(job)
            print(f"[{time.perf_counter() - start:7.0f} s] {job.kind} {job.status} tokens {job.input_tokens}+"
                  f"{job.output_tokens}{' ' + job.last_error if job.last_error else ''}", file=sys.stderr, flush=True)
            continue
        stats = mem.jobs.stats(caller=Caller())
        if not stats.by_status.get("queued") and not stats.by_status.get("running"):
            break
        time.sleep(1.0)  # a job waits for its retry
    seconds = time.perf_counter() - start
    counted = {"extraction": 0, "session_summary": 0}
    for conversation in built.questions:
        for source_type in counted:
            counted[source_type] += len(mem.list(caller=Caller(user_id=conversation), source_type=source_type, limit=100_000))
    assert built.message_ids is not None
    keyed = [r for r in mem._store.memories.fetch(list(built.message_ids)).values() if r.keys]
    stats = mem.jobs.stats(caller=Caller())
    return {
        "seconds": seconds, "facts": counted["extraction"], "session_summaries": counted["session_summary"],
        "messages_keyed": len(keyed), "jobs": {k: v for k, v in stats.by_status.items() if v},
        "extract_jobs": stats.by_kind["extract"].jobs if "extract" in stats.by_kind else {},
        "input_tokens": sum(k.input_tokens for k in stats.by_kind.values()),
        "output_tokens": sum(k.output_tokens for k in stats.by_kind.values()),
    }


def unkey(mem: Memory, built: Ingested) -> int:
    """Remove every message's keys and make its vector again of its content alone, through the write path
    extraction keys them by; how many messages had keys."""
    assert built.message_ids is not None
    keyed = [r for r in mem._store.memories.fetch(list(built.message_ids)).values() if r.keys]
    if keyed:
        vectors = mem._embedding.passages([r.content for r in keyed])  # embedded_text(content, None)
        mem._writes.set_keys([r.model_copy(update={"keys": None}) for r in keyed], vectors)
    return len(keyed)


def evaluate(mem: Memory, built: Ingested, mode: str, limit: int = 10) -> dict:
    """Score one search mode. `vector-leg`/`bm25-leg`: that leg alone, without the session-neighbour stage."""
    if mode.endswith("-leg"):
        saved = mem.config.retrieval.neighbor_weight
        mem.config.retrieval.neighbor_weight = 0.0
        try:
            return evaluate(mem, built, mode.removesuffix("-leg"), limit)
        finally:
            mem.config.retrieval.neighbor_weight = saved
    per_cat: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    per_conversation: dict[str, list[float]] = defaultdict(list)
    latencies = []
    for conversation, items in built.questions.items():
        for q in items:
            start = time.perf_counter()
            ranked = built.ask(conversation, q["question"], mode, limit)
            latencies.append((time.perf_counter() - start) * 1000)
            ev = q["evidence"]
            r5 = len(ev & set().union(*ranked[:5])) / len(ev)
            r10 = len(ev & set().union(*ranked[:10])) / len(ev)
            per_cat[q["category"]].append((r5, r10, ndcg(ranked, ev)))
            per_conversation[conversation].append(r10)
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
        "recall@10 by conversation": {c: statistics.fmean(v) for c, v in per_conversation.items()},
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
    parser.add_argument("--through", choices=("memories", "messages"), default="memories",
                        help="store each turn as a memory, or log each session as a conversation (default: memories)")
    parser.add_argument("--bare", action="store_true", help="with --through messages: log each turn's text without "
                        "its speaker's name (as a chat transcript carries it)")
    parser.add_argument("--embedding", default="local", help="embedding provider (default: local; hash for a quick check)")
    parser.add_argument("--embedding-model", help="the provider's model (default: its own; local: all-MiniLM-L6-v2, "
                        "or multilingual-e5-small)")
    parser.add_argument("--conversations", help="a subset: the first N conversations, or comma-separated sample ids")
    parser.add_argument("--sessions", type=int, help="with --through messages: each conversation's first N sessions only")
    parser.add_argument("--extract", action="store_true", help="with --through messages: extract facts with the LLM "
                        "at --base-url, then compare recall with the messages' fact keys against without")
    parser.add_argument("--base-url", help="--extract: an OpenAI-compatible server, e.g. http://127.0.0.1:18099/v1")
    parser.add_argument("--model", help="--extract: the model's name at that server")
    parser.add_argument("--timeout", type=float, default=1200.0, help="--extract: seconds one LLM call may take")
    parser.add_argument("--extract-seconds", type=float, help="--extract: start no job after this long; the sessions "
                        "not extracted by then stay without keys (the jobs left are reported)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if (args.extract or args.sessions) and args.through != "messages":
        parser.error("--extract and --sessions need --through messages")
    if args.extract and not (args.base_url and args.model):
        parser.error("--extract needs --base-url and --model")

    from clawrecall import Memory

    data = json.loads(Path(args.data).read_text())
    if args.conversations:
        wanted = args.conversations.split(",")
        data = data[: int(wanted[0])] if wanted[0].isdigit() else [d for d in data if d["sample_id"] in wanted]
        if not data:
            parser.error(f"no conversation {args.conversations!r} in {args.data}")
    llm = {"llm": {"provider": "openai", "base_url": args.base_url, "model": args.model, "api_key": "none",
                   "timeout_s": args.timeout}, "extraction": {"enabled": True}} if args.extract else {}
    extraction = None
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory.open(args.db or f"{tmp}/locomo.db", embedding={"provider": args.embedding, "model": args.embedding_model}, **llm)
        mem.upkeep.embedder.embed(["warm up"], kind="passage")  # model load is not ingest time
        if args.through == "memories":
            built = ingest(mem, data)
        else:
            built = ingest_messages(mem, data, names=not args.bare, limit_sessions=args.sessions)
        built.ask(next(iter(built.questions)), "warm up", "hybrid", 1)
        if not args.extract:
            results = {mode: evaluate(mem, built, mode) for mode in args.modes.split(",")}
        else:
            extraction = extract(mem, built, budget_s=args.extract_seconds)
            assert built.message_ids is not None
            ways = {"messages": asker(mem, built.message_ids, ["message"]),
                    "all sources": asker(mem, built.message_ids),
                    "all sources, facts find turns": asker(mem, built.message_ids, facts_find_turns=True)}
            results = {}
            for keys in ("fact keys", "no keys"):
                if keys == "no keys":
                    extraction["messages_unkeyed"] = unkey(mem, built)
                for way, ask in ways.items():
                    for mode in args.modes.split(","):
                        results[f"{keys} · {way} · {mode}"] = evaluate(mem, replace(built, ask=ask), mode)
        mem.close()
    tuning = [d["sample_id"] for d in data[:TUNE]]
    for res in results.values():
        by = res["recall@10 by conversation"]
        for split, ids in (("tune", tuning), ("held out", [c for c in by if c not in tuning])):
            n = [len(built.questions[c]) for c in ids]
            res[f"recall@10 {split}"] = sum(by[c] * k for c, k in zip(ids, n)) / sum(n) if sum(n) else None
    report = {
        "data": args.data,
        "through": args.through + (" (no speaker names)" if args.bare else ""),
        "conversations": len(data),
        "stored": built.stored,
        "questions": sum(len(v) for v in built.questions.values()),
        "ingest_per_s": built.stored / built.seconds,
        "evidence": built.counters,
        "sessions": args.sessions,
        "extraction": extraction,
        "modes": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"LoCoMo through {report['through']}: {report['conversations']} conversations "
          f"({', '.join(d['sample_id'] for d in data)}){f', first {args.sessions} sessions' if args.sessions else ''}, "
          f"{built.stored} turns, {report['questions']} questions (categories 1-4); ingest {report['ingest_per_s']:.0f} "
          f"turns/s (embedding included); evidence fixes: {built.counters}")
    if extraction:
        print(f"extraction by {args.model} at {args.base_url}: {extraction['facts']} facts, "
              f"{extraction['session_summaries']} session summaries, {extraction['messages_keyed']} messages keyed "
              f"(keys removed from {extraction['messages_unkeyed']}); jobs {extraction['jobs']} (extract: "
              f"{extraction['extract_jobs']}); LLM tokens {extraction['input_tokens']} in + {extraction['output_tokens']} "
              f"out; {extraction['seconds']:.0f} s")
    if extraction:
        print()
        print("| searched | mode | questions | recall@10 with fact keys | without | difference | NDCG@10 with | without |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for label, res in results.items():
            keys, way, mode = label.split(" · ")
            if keys == "fact keys":
                a, b = res["rows"]["overall"], results[f"no keys · {way} · {mode}"]["rows"]["overall"]
                print(f"| {way} | {mode} | {a['n']} | {a['recall@10']:.3f} | {b['recall@10']:.3f} "
                      f"| {a['recall@10'] - b['recall@10']:+.3f} | {a['ndcg@10']:.3f} | {b['ndcg@10']:.3f} |")
    print()
    print("| mode | category | n | recall@5 | recall@10 | NDCG@10 |")
    print("|---|---|---:|---:|---:|---:|")
    for mode, res in results.items():
        for name, row in res["rows"].items():
            label = f"**{name}**" if name == "overall" else name
            print(f"| {mode} | {label} | {row['n']} | {row['recall@5']:.3f} | {row['recall@10']:.3f} | {row['ndcg@10']:.3f} |")
    print()
    print("| mode | recall@10 tune / held out | by conversation | search p50 (ms) | search p95 (ms) |")
    print("|---|---:|---|---:|---:|")
    for mode, res in results.items():
        by = " ".join(f"{v:.3f}" for v in res["recall@10 by conversation"].values())
        split = " / ".join("–" if res[f"recall@10 {k}"] is None else f"{res[f'recall@10 {k}']:.3f}" for k in ("tune", "held out"))
        print(f"| {mode} | {split} | {by} "
              f"| {res['p50_ms']:.1f} | {res['p95_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
