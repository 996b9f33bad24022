"""Long turns: chat histories as agents write them, searched whole and fast.

A deterministic generator writes what LoCoMo's one-line chit-chat is not: assistant answers of
300-800 words (each ending in a paragraph that states one particular fact), user turns that are
short questions or pasted logs and code. `--users` users of `--turns` turns each, plus one user of
`--big-turns` turns (the default: 20 x 500 and 5,000, as OpenClaw users' histories run). Every user's
turns go through `mem.conversations.log` (sessions of 40 turns) and the backfill embeds them, long
answers as windows. Reported, per backend (`--backends sqlite,postgres`):

  * ingest: turns per second from the first `log` until the backfill left no row without a vector,
    against the raw rate: `Embedder.embed` in one call (sorted by token count, as the embedder does,
    so padded least) of the same kind of texts the ingest embeds — the first user's turns and the
    windows the backfill cuts of them (its first 200 turns) (`conversations.windows`, the roles searches read) — measured
    before and after the ingest (the mean: the load drifts). A share of 1.0 means the write path costs
    nothing beside the model. Given per turn and per text (turns and windows), by the clock and by
    CPU seconds of the process (which a loaded machine distorts less);
  * search: `mem.search(q, sources=memory+message+chunk)` at `limit=10` and `limit=50`, the first
    search of each user right after its turns were written beside the later ones (p50/p95), the
    `search_context` tool and the recall hook (`before_prompt_build`), and each pipeline stage's
    own time (p50/p95 over the searches: the legs, fusion, neighbours, noise, relevance, …), by the clock
    and by the CPU time of the thread that ran it (`cpu_p50_ms`: what the stage costs on a free core);
  * tail recall: for `--tail-questions` long answers, a question about their last paragraph
    only; the share whose answer (an answer whose last paragraph names what the question asks) is in the
    top 10 (and top 1) of a search of messages, and in the top 10 of the vector leg alone (`mode="vector"`),
    which finds a last paragraph only through the message's windows.

    python bench/long_turns.py [--backends sqlite,postgres] [--users 20] [--turns 500] [--big-turns 5000]
        [--queries 40] [--tail-questions 40] [--embedding local|hash] [--db-url URL] [--json]

Building 15,000 long turns with the local model takes hours on two cores: `--users 2 --turns 200
--big-turns 0` is a development size. The report carries the load averages at its start and end.
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
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from postgres import Server  # noqa: E402

import clawrecall.retrieval.pipeline as pipeline  # noqa: E402
from clawrecall import Caller, Memory  # noqa: E402
from clawrecall.conversations.windows import windows  # noqa: E402
from clawrecall.files import tokens_for  # noqa: E402
from clawrecall.hooks import before_prompt_build  # noqa: E402
from clawrecall.models import KINDS  # noqa: E402
from clawrecall.storage.memories import Memories  # noqa: E402
from clawrecall.storage.sql import Store  # noqa: E402
from clawrecall.tools.recall import ContextArgs, search_context  # noqa: E402

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
TARGETS = {"search_p50_ms@10": 15.0, "search_p50_ms@50": 25.0, "ingest_share_of_raw": 0.9}
SUBJECTS = ["the billing service", "the search cluster", "the mobile app", "the data pipeline", "the auth gateway",
            "the nightly backup", "the payment webhook", "the reporting dashboard", "the CI runners", "the cache layer"]
VERBS = ["migrate", "profile", "refactor", "monitor", "scale", "secure", "document", "test", "deploy", "debug"]
WORDS = ("latency throughput replica shard index queue retry timeout budget rollout canary metric alert trace span "
         "schema partition vacuum checkpoint snapshot lease token quota region failover cluster container image "
         "build artifact cache eviction warmup pool connection handshake certificate rotation secret policy").split()
COLOURS = ["amber", "cobalt", "crimson", "emerald", "indigo", "ochre", "saffron", "teal", "violet", "umber"]
ANIMALS = ["falcon", "otter", "lynx", "heron", "badger", "marten", "ibis", "gecko", "bison", "raven"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 95), 2)} if ms else {"n": 0}


# -- the generator ---------------------------------------------------------------------------------------


def sentence(rng: random.Random, subject: str) -> str:
    w = rng.sample(WORDS, 5)
    return (f"For {subject}, the {w[0]} depends on the {w[1]} and the {w[2]}, so we should {rng.choice(VERBS)} "
            f"the {w[3]} before touching the {w[4]}.")


def answer(rng: random.Random, subject: str, fact: str) -> str:
    """300-800 words: paragraphs of a few sentences, sometimes a code block; the last paragraph states `fact`."""
    words, paragraphs = rng.randint(300, 800), []
    while sum(len(p.split()) for p in paragraphs) < words:
        if rng.random() < 0.15:
            paragraphs.append("```python\n" + "\n".join(
                f"def {rng.choice(VERBS)}_{rng.choice(WORDS)}(x):\n    return x.{rng.choice(WORDS)}()" for _ in range(3)) + "\n```")
        else:
            paragraphs.append(" ".join(sentence(rng, subject) for _ in range(rng.randint(2, 5))))
    return "\n\n".join(paragraphs + [fact])


def pasted_log(rng: random.Random) -> str:
    lines = [f"2026-06-01T09:{m:02d}:{rng.randint(0, 59):02d}Z {rng.choice(['INFO', 'WARN', 'ERROR'])} "
             f"{rng.choice(WORDS)}: {rng.choice(WORDS)} {rng.choice(WORDS)} after {rng.randint(1, 900)} ms" for m in range(rng.randint(10, 60))]
    return "Here is the log:\n" + "\n".join(lines)


def conversation(seed: int, turns: int) -> tuple[list[dict[str, Any]], list[tuple[int, str, str]]]:
    """`turns` messages (user, assistant, …) and, for each answer, (its position, what its last paragraph names,
    a question about that paragraph: answered by any answer whose last paragraph names the same)."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    tails: list[tuple[int, str, str]] = []
    for i in range(turns):
        at = int((T0 + timedelta(minutes=i)).timestamp() * 1000)
        subject = rng.choice(SUBJECTS)
        if i % 2 == 0:
            text = pasted_log(rng) if rng.random() < 0.15 else f"How should we {rng.choice(VERBS)} {subject}?"
            out.append({"role": "user", "content": text, "timestamp": at})
            continue
        colour, animal, day = rng.choice(COLOURS), rng.choice(ANIMALS), rng.randint(1, 28)
        named = f"the {colour} {animal} release of {subject}"
        fact = f"One last thing: {named} ships on the {day}th, after the freeze, and only the on-call lead may delay it."
        out.append({"role": "assistant", "content": answer(rng, subject, fact), "timestamp": at})
        tails.append((i, named, f"when does {named} ship, and who may delay it?"))
    return out, tails


# -- timing ----------------------------------------------------------------------------------------------


STAGES: dict[str, list[float]] = {}
STAGES_CPU: dict[str, list[float]] = {}


@contextmanager
def timed_stages(store: type[Store]) -> Iterator[None]:
    """Each pipeline stage and store leg timed as it runs (wrapped in place on `store`, the backend's class, and
    the pipeline; restored after)."""
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = owner.__dict__.get(name, getattr(owner, name))

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                STAGES.setdefault(label, []).append((time.perf_counter() - start) * 1000)
                STAGES_CPU.setdefault(label, []).append((time.thread_time() - cpu) * 1000)

        patched.append((owner, name, original))
        setattr(owner, name, timed)

    for name in ("fuse", "apply_neighbors", "apply_noise", "apply_relevance", "apply_mmr", "trigram_rescore", "head_vectors",
                 "hit_origins"):
        wrap(pipeline, name, name)
    for name in ("vector_candidates", "text_candidates", "fuzzy_candidates", "vectors"):
        wrap(store, name, f"store.{name}")
    for name in ("fetch", "session_neighbors"):
        wrap(Memories, name, f"store.memories.{name}")
    wrap(pipeline.RetrievalPipeline, "_query_vectors", "embed query")
    wrap(pipeline.RetrievalPipeline, "_vector_query", "common words")
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def raw_rate(mem: Memory, texts: list[str]) -> tuple[float, float]:
    """Seconds by the clock and CPU seconds of the process for the model alone on `texts`, in one call."""
    start, cpu = time.perf_counter(), time.process_time()
    mem._embedding.embedder.embed(texts, kind="passage")
    return time.perf_counter() - start, time.process_time() - cpu


# -- one backend -----------------------------------------------------------------------------------------


def run(target: str, args: argparse.Namespace) -> dict[str, Any]:
    users = [(f"user{u:02d}", args.turns) for u in range(args.users)] + ([("big", args.big_turns)] if args.big_turns else [])
    overrides: dict[str, Any] = {"embedding": {"provider": args.embedding, "query_cache_size": 0}} if args.embedding == "hash" else {
        "embedding": {"query_cache_size": 0}}
    report: dict[str, Any] = {"load_start": load(), "users": len(users), "turns": sum(n for _, n in users)}
    with Memory.open(target, **overrides) as mem:
        made = {name: conversation(seed, n) for seed, (name, n) in enumerate(users)}
        sample = next(iter(made.values()))[0][:200]
        tokens = tokens_for(mem.config.embedding)
        cut = [w for m in sample if m["role"] in mem.config.retrieval.message_roles
               for w in windows(m["content"], tokens, mem.config.files.overlap)]
        raw_texts = [m["content"] for m in sample] + cut
        mem._embedding.embedder.embed(raw_texts[:8], kind="passage")  # the model loaded
        raw = [raw_rate(mem, raw_texts)]
        ingest_cpu = 0.0
        cold: dict[int, list[float]] = {10: [], 50: []}
        warm: dict[int, list[float]] = {10: [], 50: []}
        context_ms: list[float] = []
        hook_ms: list[float] = []
        tail_top1 = tail_top10 = tail_vector = asked = 0
        ingest_s = 0.0
        rng = random.Random(7)
        per_user = max(1, args.queries // len(users))
        for name, (turns, tails) in made.items():
            caller = Caller(name, "main")
            start, cpu = time.perf_counter(), time.process_time()
            for s in range(0, len(turns), 40):
                mem.conversations.log(turns[s : s + 40], caller=caller, session_id=f"{name}-s{s // 40}")
            mem.upkeep.backfill()
            mem.upkeep.runtime.drain(600)
            ingest_s += time.perf_counter() - start
            ingest_cpu += time.process_time() - cpu
            questions = [q for _, _, q in rng.sample(tails, min(len(tails), per_user + 2))]
            with timed_stages(type(mem._store)):
                for n, q in enumerate(questions[:per_user]):
                    for limit in (10, 50):
                        took, _ = ms(lambda: mem.search(q, caller=caller, sources=list(KINDS), limit=limit))
                        (cold if n == 0 else warm)[limit].append(took)
                    took, _ = ms(lambda: search_context.handler(mem, caller, ContextArgs(query=q, limit=10)))
                    context_ms.append(took)
                    took, _ = ms(lambda: before_prompt_build(mem, {"prompt": q}, Caller(name, "main", f"hook-{n}")))
                    hook_ms.append(took)
            for _, named, q in rng.sample(tails, min(len(tails), max(1, args.tail_questions // len(users)))):
                def answers(h: Any) -> bool:
                    return named in h.content.rsplit("\n\n", 1)[-1]

                asked += 1
                hits = mem.search(q, caller=caller, sources=["message"], limit=10)
                tail_top10 += any(answers(h) for h in hits)
                tail_top1 += bool(hits) and answers(hits[0])
                tail_vector += any(answers(h) for h in mem.search(q, caller=caller, sources=["message"], limit=10, mode="vector"))
            log(f"  {name}: {len(turns)} turns in {time.perf_counter() - start:.1f} s")
        raw.append(raw_rate(mem, raw_texts))
        stored_windows = mem._store.run("SELECT count(*) FROM memories WHERE kind = 'window'")[0][0]
    raw_s, raw_cpu = (statistics.mean(r[i] for r in raw) for i in (0, 1))
    texts = report["turns"] + stored_windows
    report |= {
        "raw": {"turns": len(sample), "windows": len(cut), "s": [round(r[0], 2) for r in raw],
                "turns_per_s": round(len(sample) / raw_s, 2), "texts_per_s": round(len(raw_texts) / raw_s, 2),
                "cpu_s_per_text": round(raw_cpu / len(raw_texts), 4)},
        "ingest_turns_per_s": round(report["turns"] / ingest_s, 2), "windows": stored_windows,
        "ingest_texts_per_s": round(texts / ingest_s, 2), "ingest_cpu_s_per_text": round(ingest_cpu / texts, 4),
        "search@10": {"first": summary(cold[10]), "later": summary(warm[10]), "all": summary(cold[10] + warm[10])},
        "search@50": {"first": summary(cold[50]), "later": summary(warm[50]), "all": summary(cold[50] + warm[50])},
        "search_context": summary(context_ms), "recall_hook": summary(hook_ms),
        "stages": {k: summary(v) | {"cpu_p50_ms": round(statistics.median(STAGES_CPU[k]), 2)} for k, v in sorted(STAGES.items())},
        "tail_recall": {"questions": asked, "top1": round(tail_top1 / max(asked, 1), 3), "top10": round(tail_top10 / max(asked, 1), 3),
                        "vector_mode_top10": round(tail_vector / max(asked, 1), 3)},
    }
    # per turn: the sample's windows a turn against the store's may differ a little; per text they are the same measure
    report["ingest_share_of_raw"] = {
        "turns": round(report["ingest_turns_per_s"] / report["raw"]["turns_per_s"], 3),
        "texts": round(report["ingest_texts_per_s"] / report["raw"]["texts_per_s"], 3),
        "texts_cpu": round(report["raw"]["cpu_s_per_text"] / report["ingest_cpu_s_per_text"], 3)}
    report["load_end"] = load()
    STAGES.clear()
    STAGES_CPU.clear()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--big-turns", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--tail-questions", type=int, default=40)
    parser.add_argument("--embedding", choices=["local", "hash"], default="local")
    parser.add_argument("--db-url", help="a PostgreSQL server whose user may CREATE DATABASE (else one is started)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends.split(","):
            log(f"{backend}: {args.users} x {args.turns} turns + {args.big_turns}")
            if backend == "sqlite":
                out[backend] = run(str(Path(folder) / "long.db"), args)
                continue
            pg = Server(args.db_url, [])
            name = f"clawbench_long_{os.getpid()}"
            try:
                out[backend] = run(pg.database(name), args)
            finally:
                pg.drop(name)
                pg.close()
    out["targets"] = TARGETS
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
