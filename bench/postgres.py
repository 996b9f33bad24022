"""PostgreSQL + pgvector benchmark: bulk ingest, HNSW build, vector-leg latency and recall at scale.

For each size N (default 100k and 1M) it creates a fresh database on a PostgreSQL server
(its own `pgserver` in a temporary directory, or `--url`), generates N synthetic memories
and loads them through the engine's batch path `Memory.add_many(items, embeddings=...,
dedup=False)` in chunks, then measures:

  * ingest rate (memories/s), split into engine work (validation, records, history rows)
    and the two statements (COPY into `memories`, INSERT into `history`). Two load paths:
    `deferred` (default) loads N - `--tail` rows inside `mem.upkeep.deferred_vector_index()` (the
    engine's bulk-load path), whose exit builds the index once (timed, with the engine's
    `postgres.maintenance_work_mem`), then loads the last `--tail` rows with the index in
    place (maintained per row); `online` loads everything without deferring, so the first
    insert creates the index and every later row is inserted into the graph;
  * the HNSW build: seconds, index size, progress (pg_stat_progress_create_index), the
    "graph no longer fits into maintenance_work_mem" notice if any; `--compare-build`
    also rebuilds with the server's default maintenance_work_mem (what
    `store.build_vector_index()` gets on an untuned server);
  * the vector leg itself, `mem._store.vector_candidates(q, Filters(...), 10)` — the code
    path of every search — for `--queries` queries (a stored vector plus noise),
    unfiltered and filtered to the query's own scope (~2% of rows), at each ef_search of
    `--ef` ("engine" is what the engine sets: max(postgres.hnsw_ef_search, k)); a scope
    the planner expects at most `--exact-rows` rows in is read exactly; p50/p95 latency,
    recall@10 against the exact top 10 (numpy float32 brute force over every loaded vector
    the filter allows), the similarity ratio (mean cosine of the 10 returned over that of
    the exact 10: how much worse the misses are), and the plan PostgreSQL chose; plus the exact search in SQL (index
    scans off) for a few queries, as a check of the ground truth and as a latency point;
  * end-to-end `mem.search(text, mode=...)` with the real local embedding model (query
    embedding included, query cache off): hybrid and each leg alone, unscoped and scoped;
  * storage footprint (heap, HNSW, GIN fts, GIN trigram, history) and server settings.

And once per run: `add_many` WITHOUT embeddings (the local model embeds) on `--model-n`
one-sentence memories, next to the raw embedding rate of the model on the same texts.

Data: `--centroids` Gaussian centroids (unit vectors in 384-d); each memory is a centroid
plus isotropic Gaussian noise (`--spread`: noise norm relative to the centroid), normalised;
each query is a stored vector plus noise (`--query-noise`), normalised. Memories come in
sessions of 20 consecutive turns, each session in one of `--scopes` scopes (uniformly at
random, independent of the cluster), with a short template text ("<name> <verb> <topic>
and <topic> at the <place> ...") so the text legs have work to do. Fixed seed.

`--vectors-from scale-100000.db` takes the vectors (and texts) of a SQLite store instead,
e.g. the real MiniLM embeddings built by `bench/scale.py`, as a check of the synthetic data.

    python bench/postgres.py [--sizes 100000,1000000] [--url postgresql://USER@HOST/DB]
        [--load deferred|online] [--tail 20000] [--chunk 10000] [--maintenance-work-mem 4GB]
        [--hnsw-m 24 --hnsw-ef-construction 128] [--exact-rows 50000]
        [--pg-setting shared_buffers=4GB ...] [--ef 64,200] [--queries 200]
        [--model-n 2000] [--compare-build] [--vectors-from PATH.db] [--keep] [--json]

The 1M run needs about 6 GB of RAM in this process (vectors, ids, ground truth), ~6 GB on
disk, and tens of minutes on 2 cores; run it in the background:

    nohup .venv/bin/python bench/postgres.py --sizes 1000000 --json > pg-1m.json 2> pg-1m.log &
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import pct  # noqa: E402

from clawrecall import Memory  # noqa: E402
from clawrecall.storage import Filters  # noqa: E402

DIMS = 384
K = 10
SESSION = 20  # turns per session; a session lives in one scope
T0 = time.perf_counter()

NAMES = ("alice bob carol dave erin frank grace heidi ivan judy mallory nina oscar peggy quentin rupert sybil "
         "trent ursula victor wendy xavier yvonne zach amber blake chloe dmitri elena farid gwen hiro ines jonas "
         "kenji lena marco noor").split()
VERBS = ("likes prefers decided mentioned dislikes bought booked planned asked recommended cancelled visited "
         "scheduled forgot reviewed shared started finished postponed approved rejected moved fixed "
         "tested ordered tried learned taught wrote").split()
TOPICS = ("tea coffee hiking sailing budget invoice deadline roadmap migration database backup kubernetes "
          "python rust golang typescript react postgres redis kafka terraform ansible grafana dashboard alert "
          "incident postmortem refactor release sprint retro standup interview hiring onboarding offsite "
          "conference talk paper thesis garden tomato basil orchid bonsai guitar piano violin concert opera "
          "museum gallery painting sculpture novel poetry chess puzzle marathon cycling swimming yoga pilates "
          "climbing skiing surfing camping fishing baking bread pasta sushi ramen curry tacos salad vegan "
          "keto allergy dentist doctor vaccine pharmacy insurance mortgage rent lease landlord neighbor "
          "plumber electrician roof window kitchen bathroom furniture sofa lamp carpet curtain paint "
          "wallpaper flight hotel visa passport luggage train ferry rental scooter bicycle car tyre battery "
          "charger laptop monitor keyboard mouse headphones camera lens tripod drone printer router modem "
          "firmware license subscription newsletter podcast audiobook course exam certificate scholarship "
          "grant donation charity volunteer election council permit tax refund pension salary bonus promotion "
          "contract vendor supplier warehouse shipment pallet forklift inventory audit compliance privacy "
          "encryption password token certificate firewall vpn proxy latency throughput cache index shard "
          "replica partition vacuum checkpoint wal snapshot restore failover quorum consensus raft paxos "
          "gossip lighthouse harbor island volcano glacier desert canyon forest meadow river waterfall lake "
          "beach cliff cave valley summit trail bridge tunnel tower castle temple cathedral library "
          "bakery market festival parade wedding birthday anniversary funeral graduation reunion picnic "
          "barbecue brunch dinner lunch breakfast snack dessert cake cookie chocolate vanilla cinnamon ginger "
          "lemon mango banana cherry grape melon peach plum apricot walnut almond hazelnut peanut honey").split()
PLACES = ("office home cafe library gym park airport station hotel clinic school campus studio garage "
          "warehouse harbor market beach cabin lab").split()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:8.1f}s] {msg}", file=sys.stderr, flush=True)


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# -- the server ------------------------------------------------------------------------------
class Server:
    """A PostgreSQL server: our own pgserver in a temporary directory, or the one `--url` names."""

    def __init__(self, url: str | None, settings: list[str]):
        self.home: Path | None = None
        self.pg = None
        if url:
            self.url = url
            if settings:
                self._alter_system(settings, restart=False)
            return
        import pgserver

        self.home = Path(tempfile.mkdtemp(prefix="clawrecall-pgbench-"))
        self.pg = pgserver.get_server(self.home / "data", cleanup_mode="delete")
        self.url = self.pg.get_uri()
        if settings:
            self._alter_system(settings, restart=True)

    def _alter_system(self, settings: list[str], *, restart: bool) -> None:
        for setting in settings:
            name, _, value = setting.partition("=")
            if not re.fullmatch(r"[a-z_.]+", name):
                raise SystemExit(f"bad --pg-setting {setting!r}: use name=value")
            admin(self.url, f"ALTER SYSTEM SET {name} = '{value}'")
        if restart:
            from pgserver._commands import pg_ctl

            pg_ctl(["-w", "-l", str(self.pg.log), "restart"], pgdata=self.pg.pgdata, user=self.pg.system_user, timeout=120)
        else:
            admin(self.url, "SELECT pg_reload_conf()")

    def database(self, name: str) -> str:
        admin(self.url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin(self.url, f"CREATE DATABASE {name}")
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{name}"))

    def drop(self, name: str) -> None:
        admin(self.url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        if self.pg is not None:
            self.pg.cleanup()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)


def admin(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


# -- data ------------------------------------------------------------------------------------
class Data:
    """N memories, generated chunk by chunk (deterministically) and kept as vectors for the ground truth."""

    def __init__(self, n: int, args: argparse.Namespace):
        self.n = n
        self.args = args
        rng = np.random.default_rng(args.seed)
        self.scope_names = [f"custom:bench-{i:03d}" for i in range(args.scopes)]
        self.scope_of_session = rng.integers(0, args.scopes, size=n // SESSION + 1).astype(np.int16)
        self.scopes = self.scope_of_session[np.arange(n) // SESSION]
        self.vectors = np.empty((n, DIMS), dtype=np.float32)
        self.texts: list[str] | None = None
        if args.vectors_from:
            self._load_real(args.vectors_from)
        else:
            c = rng.standard_normal((args.centroids, DIMS)).astype(np.float32)
            self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)
        self.ids: list[str] = [""] * n

    def _load_real(self, path: str) -> None:
        import sqlite3

        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute("SELECT embedding, content FROM memories WHERE embedding IS NOT NULL ORDER BY rowid").fetchall()
        con.close()
        if len(rows) < self.n:
            raise SystemExit(f"{path} has {len(rows)} vectors, fewer than --sizes {self.n}")
        raw = np.frombuffer(b"".join(r[0] for r in rows[: self.n]), dtype=np.float32).reshape(self.n, -1)
        if raw.shape[1] != DIMS:
            raise SystemExit(f"{path} holds {raw.shape[1]}-d vectors; this benchmark is for {DIMS}-d")
        self.vectors[:] = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        self.texts = [r[1] for r in rows[: self.n]]

    def chunk(self, start: int, stop: int) -> tuple[list[dict], np.ndarray]:
        rng = np.random.default_rng([self.args.seed, start])
        m = stop - start
        if self.texts is None:
            labels = rng.integers(0, len(self.centroids), size=m)
            noise = rng.standard_normal((m, DIMS)).astype(np.float32) * (self.args.spread / np.sqrt(DIMS))
            v = self.centroids[labels] + noise
            self.vectors[start:stop] = v / np.linalg.norm(v, axis=1, keepdims=True)
            w = [rng.integers(0, len(vocab), size=m) for vocab in (NAMES, VERBS, TOPICS, TOPICS, PLACES)]
            texts = [
                f"{NAMES[a]} {VERBS[b]} {TOPICS[c]} and {TOPICS[d]} at the {PLACES[e]} (note {start + i})"
                for i, (a, b, c, d, e) in enumerate(zip(*w))
            ]
        else:
            texts = self.texts[start:stop]
        items = [
            {"content": texts[i], "scope": self.scope_names[self.scopes[start + i]], "category": "fact",
             "session_id": f"s{(start + i) // SESSION}"}
            for i in range(m)
        ]
        return items, self.vectors[start:stop]

    def queries(self, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(query vectors, the scope code of the stored vector each comes from)."""
        rng = np.random.default_rng([self.args.seed, seed])
        rows = rng.choice(self.n, size=count, replace=False)
        q = self.vectors[rows] + rng.standard_normal((count, DIMS)).astype(np.float32) * (self.args.query_noise / np.sqrt(DIMS))
        return q / np.linalg.norm(q, axis=1, keepdims=True), self.scopes[rows]

    def exact(self, queries: np.ndarray, scopes: np.ndarray | None) -> list[tuple[set[str], float]]:
        """The exact top K ids of each query (over the query's scope when `scopes` is given), and their mean similarity."""
        out = []
        step = 16
        for s in range(0, len(queries), step):
            sims = queries[s : s + step] @ self.vectors.T
            for j, row in enumerate(sims):
                if scopes is not None:
                    row = np.where(self.scopes == scopes[s + j], row, -np.inf)
                top = np.argpartition(-row, K)[:K]
                out.append(({self.ids[i] for i in top}, float(row[top].mean())))
        return out


def hybrid_queries(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    forms = ("what did {n} say about {t}", "{n} {t} {p}", "when is the {t} at the {p}", "does {n} like {t}",
             "{t} and {t2} plans")
    out = []
    for i in range(count):
        form = forms[i % len(forms)]
        out.append(form.format(n=NAMES[rng.integers(len(NAMES))], t=TOPICS[rng.integers(len(TOPICS))],
                               t2=TOPICS[rng.integers(len(TOPICS))], p=PLACES[rng.integers(len(PLACES))]) + f" {i}")
    return out


# -- measuring helpers ------------------------------------------------------------------------
@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """Set an instance attribute for a while, restoring whatever the instance had before."""
    had = name in vars(obj)
    before = vars(obj).get(name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, before)
        else:
            delattr(obj, name)


class Timers:
    """Accumulated seconds of the store calls inside `add_many` (the rest is engine work)."""

    def __init__(self, store: Any):
        self.store = store
        self.seconds = {"insert": 0.0, "add_history": 0.0}

    @contextmanager
    def attached(self) -> Iterator[None]:
        def timed(name: str) -> Any:
            original = getattr(self.store, name)

            def call(*a: Any, **kw: Any) -> Any:
                start = time.perf_counter()
                try:
                    return original(*a, **kw)
                finally:
                    self.seconds[name] += time.perf_counter() - start

            return call

        with patched(self.store, "insert", timed("insert")), patched(self.store, "add_history", timed("add_history")):
            yield


@contextmanager
def ef_search(store: Any, ef: int | None, extra: tuple[str, ...] = ()) -> Iterator[None]:
    """Run `vector_candidates` unchanged except for the ef_search it sets (None: the engine's own)
    and `extra` settings (e.g. "hnsw.max_scan_tuples = 100000") after its own."""
    if ef is None and not extra:
        yield
        return
    original = store.run

    def run(sql: str, params: Any = ()) -> list[tuple]:
        if sql.startswith("SET LOCAL hnsw.ef_search") and ef is not None:
            sql = f"SET LOCAL hnsw.ef_search = {int(ef)}"
        out = original(sql, params)
        if sql.startswith("SET LOCAL hnsw.iterative_scan"):
            for setting in extra:
                original(f"SET LOCAL {setting}")
        return out

    with patched(store, "run", run):
        yield


@contextmanager
def hnsw_with(store: Any, params: str | None) -> Iterator[None]:
    """Build the index with other HNSW parameters than the engine's (any pgvector WITH list)."""
    if not params:
        yield
        return
    original = store.run

    def run(sql: str, args: Any = ()) -> list[tuple]:
        if "USING hnsw" in sql:
            sql = re.sub(r"WITH \(.*\)$", f"WITH ({params})", sql)
        return original(sql, args)

    with patched(store, "run", run):
        yield


def load(mem: Memory, data: Data, start: int, stop: int, chunk: int, label: str) -> dict:
    timers = Timers(mem._store)
    seconds = 0.0
    per_chunk = []
    with timers.attached():
        for s in range(start, stop, chunk):
            e = min(s + chunk, stop)
            items, vectors = data.chunk(s, e)
            t = time.perf_counter()
            results = mem.add_many(items, embeddings=vectors, dedup=False)
            dt = time.perf_counter() - t
            seconds += dt
            per_chunk.append((e - s) / dt)
            for i, r in enumerate(results):
                data.ids[s + i] = r.id
            if len(per_chunk) % 10 == 1 or e == stop:
                log(f"{label}: {e:,}/{stop:,} loaded, this chunk {per_chunk[-1]:,.0f}/s, load {loadavg()}")
    n = stop - start
    engine = seconds - sum(timers.seconds.values())
    return {
        "path": label, "memories": n, "seconds": seconds, "per_s": n / seconds if seconds else 0.0,
        "first_chunk_per_s": per_chunk[0] if per_chunk else None, "last_chunk_per_s": per_chunk[-1] if per_chunk else None,
        "copy_s": timers.seconds["insert"], "history_s": timers.seconds["add_history"], "engine_s": engine,
    }


class ProgressWatcher(threading.Thread):
    """Polls pg_stat_progress_create_index from its own connection while an index builds."""

    def __init__(self, url: str, every: float = 30.0):
        super().__init__(daemon=True)
        self.url, self.every = url, every
        self.stop = threading.Event()
        self.samples: list[dict] = []

    def run(self) -> None:
        import psycopg

        start = time.perf_counter()
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self.stop.wait(self.every):
                    rows = conn.execute(
                        "SELECT phase, tuples_done, tuples_total, blocks_done, blocks_total "
                        "FROM pg_stat_progress_create_index"
                    ).fetchall()
                    for phase, td, tt, bd, bt in rows:
                        sample = {"s": round(time.perf_counter() - start, 1), "phase": phase, "tuples_done": td,
                                  "tuples_total": tt, "blocks_done": bd, "blocks_total": bt}
                        self.samples.append(sample)
                        log(f"index build: {sample}, load {loadavg()}")
        except Exception as exc:  # the watcher must never break the build
            log(f"progress watcher stopped: {exc}")


def build_index(mem: Memory, url: str, maintenance_work_mem: str | None, params: str | None = None) -> dict:
    """Drop and (re)build the HNSW index through the store, with the given maintenance_work_mem."""
    store = mem._store
    store.drop_vector_index()
    notices: list[str] = []
    watcher = ProgressWatcher(url, every=30.0)
    watcher.start()
    peak_rss = 0
    with store.transaction():
        conn = store._local.conn
        def on_notice(diag: Any) -> None:
            notices.append(diag.message_primary)

        conn.add_notice_handler(on_notice)
        mwm = maintenance_work_mem or store.run("SHOW maintenance_work_mem")[0][0]  # '' = the server's
        workers = store.run("SHOW max_parallel_maintenance_workers")[0][0]
        pid = store.run("SELECT pg_backend_pid()")[0][0]
        rss = RSSWatcher(pid)
        rss.start()
        t = time.perf_counter()
        with hnsw_with(store, params), patched(store, "config", store.config.model_copy(update={"maintenance_work_mem": mwm})):
            store.build_vector_index()
        seconds = time.perf_counter() - t
        rss.stop.set()
        rss.join()
        peak_rss = rss.peak
        conn.remove_notice_handler(on_notice)
    watcher.stop.set()
    watcher.join()
    size = store.run("SELECT pg_relation_size('idx_memories_embedding')")[0][0]
    log(f"HNSW build: {seconds:.1f}s with maintenance_work_mem={mwm}, {workers} workers, notices {notices}")
    return {"seconds": seconds, "hnsw": params or engine_hnsw(store), "maintenance_work_mem": mwm, "parallel_workers": workers, "index_bytes": size,
            "notices": notices, "progress": watcher.samples, "leader_peak_rss_bytes": peak_rss}


class RSSWatcher(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            import psutil

            proc = psutil.Process(self.pid)
            while not self.stop.wait(0.5):
                self.peak = max(self.peak, proc.memory_info().rss)
        except Exception:
            pass


def engine_hnsw(store: Any) -> str:
    return f"m = {store.config.hnsw_m}, ef_construction = {store.config.hnsw_ef_construction}"


def plan_of(store: Any, sql: str, params: tuple, settings: list[str]) -> str:
    with store.transaction():
        for s in settings:
            store.run(s)
        rows = store.run("EXPLAIN " + sql, params)
    text = "\n".join(r[0] for r in rows)
    m = re.search(r"(Index Scan using \w+|Bitmap Heap Scan|Parallel Seq Scan|Seq Scan)", text)
    return m.group(1) if m else text.splitlines()[0]


def query_set(data: Data, args: argparse.Namespace) -> dict:
    """The timed queries, warm-up queries and exact answers (computed once per size)."""
    if getattr(data, "_query_set", None) is None:
        queries, qscopes = data.queries(args.queries, seed=1)
        warm, wscopes = data.queries(min(20, args.queries), seed=2)
        log("exact ground truth (numpy)")
        truth = {"none": data.exact(queries, None), "scope": data.exact(queries, qscopes)}
        data._query_set = {"queries": queries, "qscopes": qscopes, "warm": warm, "wscopes": wscopes, "truth": truth}
    return data._query_set


def vector_leg(mem: Memory, data: Data, args: argparse.Namespace) -> list[dict]:
    store = mem._store
    qs = query_set(data, args)
    queries, qscopes, warm, wscopes, truth = qs["queries"], qs["qscopes"], qs["warm"], qs["wscopes"], qs["truth"]
    variants: list[tuple[int | None, str, tuple[str, ...]]] = [(ef, flt, ()) for ef in args.ef for flt in ("none", "scope")]
    variants += [(None, "scope", tuple(x.strip() for x in args.scoped_extra.split(";")))] if args.scoped_extra else []
    rows = []
    for ef, flt, extra in variants:
        def filters(i: int, sc: np.ndarray = qscopes, flt: str = flt) -> Filters:
            return Filters() if flt == "none" else Filters(scopes=[data.scope_names[sc[i]]])

        with ef_search(store, ef, extra):
            for i in range(len(warm)):
                store.vector_candidates(warm[i], filters(i, wscopes), K)
            lat, rec, ratio = [], [], []
            for i in range(len(queries)):
                t = time.perf_counter()
                hits = store.vector_candidates(queries[i], filters(i), K)
                lat.append((time.perf_counter() - t) * 1000)
                ids, best = truth[flt][i]
                rec.append(len({h.id for h in hits} & ids) / K)
                ratio.append(sum(h.score for h in hits) / K / best)
        engine_ef = max(store.config.hnsw_ef_search, K)
        shown = f"{ef or engine_ef}" + ("" if ef else " (engine)")
        if store.reads_exactly(filters(0)):
            plan = "exact: every row of the filter (few rows)"
            shown = "-"
        else:
            where, params = store.where(filters(0), "memories")
            plan = plan_of(
                store, f"SELECT id FROM memories WHERE embedding IS NOT NULL AND {where} "
                f"ORDER BY (embedding::halfvec({DIMS})) <=> %s::halfvec({DIMS}) LIMIT {K}",
                (*params, queries[0]),
                [f"SET LOCAL hnsw.ef_search = {ef or engine_ef}", "SET LOCAL hnsw.iterative_scan = relaxed_order",
                 *(f"SET LOCAL {x}" for x in extra)],
            )
        row = {"ef_search": shown if not extra else f"{shown}, {'; '.join(extra)}", "filter": flt,
               "p50_ms": statistics.median(lat), "p95_ms": pct(lat, 95),
               "recall@10": statistics.fmean(rec), "min_recall": min(rec), "sim_ratio": statistics.fmean(ratio),
               "plan": plan}
        rows.append(row)
        log(f"vector leg ef={row['ef_search']} filter={flt}: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms, "
            f"recall@10 {row['recall@10']:.4f} ({plan})")
    rows.extend(exact_sql(mem, data, queries, qscopes, truth, args.exact_queries))
    return rows


def partitioned(mem: Memory, data: Data, args: argparse.Namespace) -> dict:
    """A copy of (id, scope, embedding, deleted_at, expires_at) partitioned by scope, one HNSW per partition
    (the engine's expression and parameters), searched with the engine's vector-leg SQL and settings."""
    store = mem._store
    kind = args.partitioned
    by = "LIST" if kind == "list" else "HASH"
    parts = len(data.scope_names) if kind == "list" else int(kind.split(":")[1])
    run = store.run
    run("DROP TABLE IF EXISTS bench_part")
    run(f"CREATE TABLE bench_part (id uuid, scope text NOT NULL, deleted_at timestamptz, expires_at timestamptz, "
        f"embedding halfvec) PARTITION BY {by} (scope)")
    for i in range(parts):
        bound = (f"IN ('{data.scope_names[i]}')" if kind == "list" else f"WITH (MODULUS {parts}, REMAINDER {i})")
        run(f"CREATE TABLE bench_part_{i} PARTITION OF bench_part FOR VALUES {bound}")
    t = time.perf_counter()
    run("INSERT INTO bench_part SELECT id, scope, deleted_at, expires_at, embedding FROM memories")
    copy_s = time.perf_counter() - t
    with store.transaction():
        if args.maintenance_work_mem:
            run(f"SET LOCAL maintenance_work_mem = '{args.maintenance_work_mem}'")
        t = time.perf_counter()
        run(f"CREATE INDEX bench_part_hnsw ON bench_part USING hnsw ((embedding::halfvec({DIMS})) halfvec_cosine_ops) "
            f"WITH ({args.hnsw or engine_hnsw(store)})")
        build_s = time.perf_counter() - t
    run("ANALYZE bench_part")
    size = run("SELECT sum(pg_relation_size(relid))::bigint FROM pg_partition_tree('bench_part_hnsw')")[0][0]
    log(f"partitioned copy ({kind}, {parts} partitions): insert {copy_s:.1f}s, per-partition HNSW build {build_s:.1f}s")
    qs = query_set(data, args)
    rows = []
    for ef in args.ef:
        for flt in ("none", "scope"):
            def filters(i: int, sc: np.ndarray, flt: str = flt) -> Filters:
                return Filters() if flt == "none" else Filters(scopes=[data.scope_names[sc[i]]])

            def search(q: np.ndarray, f: Filters) -> list[tuple[str, float]]:
                where, params = store.where(f, "bench_part")
                v = store.dialect.to_db["vector"](q)
                with store.transaction():  # exactly the engine's vector leg, on the partitioned copy
                    run(f"SET LOCAL hnsw.ef_search = {max(ef or store.config.hnsw_ef_search, K)}")
                    run("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    got = run(f"SELECT id, 1 - ((embedding::halfvec({DIMS})) <=> %s::halfvec({DIMS})) FROM bench_part "
                              f"WHERE embedding IS NOT NULL AND {where} "
                              f"ORDER BY (embedding::halfvec({DIMS})) <=> %s::halfvec({DIMS}) LIMIT %s",
                              (v, *params, v, K))
                return [(str(r[0]), float(r[1])) for r in got]

            for i in range(len(qs["warm"])):
                search(qs["warm"][i], filters(i, qs["wscopes"]))
            lat, rec, ratio = [], [], []
            for i in range(len(qs["queries"])):
                t = time.perf_counter()
                hits = search(qs["queries"][i], filters(i, qs["qscopes"]))
                lat.append((time.perf_counter() - t) * 1000)
                ids, best = qs["truth"][flt][i]
                rec.append(len({h[0] for h in hits} & ids) / K)
                ratio.append(sum(h[1] for h in hits) / K / best)
            rows.append({"ef_search": ef, "filter": flt, "p50_ms": statistics.median(lat), "p95_ms": pct(lat, 95),
                         "recall@10": statistics.fmean(rec), "min_recall": min(rec), "sim_ratio": statistics.fmean(ratio)})
            log(f"partitioned ({kind}) ef={ef} filter={flt}: p50 {rows[-1]['p50_ms']:.2f} ms, "
                f"recall@10 {rows[-1]['recall@10']:.4f}")
    if not args.keep:
        run("DROP TABLE bench_part")
    return {"kind": kind, "partitions": parts, "insert_s": copy_s, "build_s": build_s, "index_bytes": size, "rows": rows}


def exact_sql(mem: Memory, data: Data, queries: np.ndarray, qscopes: np.ndarray, truth: dict, count: int) -> list[dict]:
    """The exact top 10 in SQL (no index scans): checks the numpy ground truth; its latency is the no-index cost."""
    store = mem._store
    rows = []
    for flt in ("none", "scope"):
        lat, agree = [], []
        for i in range(min(count, len(queries))):
            f = Filters() if flt == "none" else Filters(scopes=[data.scope_names[qscopes[i]]])
            where, params = store.where(f, "memories")
            t = time.perf_counter()
            with store.transaction():
                store.run("SET LOCAL enable_indexscan = off")
                got = store.run(
                    f"SELECT id FROM memories WHERE embedding IS NOT NULL AND {where} "
                    f"ORDER BY (embedding::halfvec({DIMS})) <=> %s::halfvec({DIMS}) LIMIT {K}",
                    (*params, store.dialect.to_db["vector"](queries[i])),
                )
            lat.append((time.perf_counter() - t) * 1000)
            agree.append(len({str(r[0]) for r in got} & truth[flt][i][0]) / K)
        if lat:
            rows.append({"ef_search": "exact (SQL, no index scan)", "filter": flt, "p50_ms": statistics.median(lat),
                         "p95_ms": pct(lat, 95), "recall@10": statistics.fmean(agree), "min_recall": min(agree),
                         "sim_ratio": 1.0, "plan": f"{len(lat)} queries"})
            log(f"exact SQL filter={flt}: p50 {rows[-1]['p50_ms']:.1f} ms, agreement with numpy {rows[-1]['recall@10']:.4f}")
    return rows


def end_to_end(mem: Memory, data: Data, args: argparse.Namespace) -> list[dict]:
    texts = hybrid_queries(args.hybrid_queries, seed=args.seed + 7)
    mem.search("warm up the model", limit=1)
    rows = []
    for mode in ("hybrid", "vector", "bm25", "trigram"):
        for scoped in (False, True):
            lat = []
            for i, q in enumerate(texts):
                scope = data.scope_names[i % len(data.scope_names)] if scoped else None
                t = time.perf_counter()
                mem.search(q, mode=mode, scope=scope, limit=10)
                lat.append((time.perf_counter() - t) * 1000)
            rows.append({"mode": mode, "scope": "one scope" if scoped else "all", "p50_ms": statistics.median(lat),
                         "p95_ms": pct(lat, 95), "queries": len(lat)})
            log(f"search mode={mode} scoped={scoped}: p50 {rows[-1]['p50_ms']:.1f} ms p95 {rows[-1]['p95_ms']:.1f} ms")
    return rows


def text_legs(mem: Memory, data: Data, args: argparse.Namespace) -> list[dict]:
    """The keyword and trigram legs alone (`store.text_candidates` / `fuzzy_candidates`, pool 50), no embedding."""
    texts = hybrid_queries(args.hybrid_queries, seed=args.seed + 7)
    rows = []
    for leg in ("text_candidates", "fuzzy_candidates"):
        for scoped in (True, False):
            lat = []
            for i, q in enumerate(texts):
                f = Filters(scopes=[data.scope_names[i % len(data.scope_names)]]) if scoped else Filters()
                t = time.perf_counter()
                getattr(mem._store, leg)(q, f, 50)
                lat.append((time.perf_counter() - t) * 1000)
            rows.append({"leg": leg, "scope": "one scope" if scoped else "all", "p50_ms": statistics.median(lat),
                         "p95_ms": pct(lat, 95), "queries": len(lat)})
            log(f"{leg} scoped={scoped}: p50 {rows[-1]['p50_ms']:.1f} ms p95 {rows[-1]['p95_ms']:.1f} ms")
    return rows


def footprint(mem: Memory) -> dict:
    run = mem._store.run
    sizes = {
        "heap_bytes": run("SELECT pg_relation_size('memories')")[0][0],
        "toast_bytes": run("SELECT coalesce(pg_total_relation_size(reltoastrelid), 0) FROM pg_class WHERE relname = 'memories'")[0][0],
        "all_indexes_bytes": run("SELECT pg_indexes_size('memories')")[0][0],
        "history_bytes": run("SELECT pg_total_relation_size('history')")[0][0],
        "database_bytes": run("SELECT pg_database_size(current_database())")[0][0],
    }
    for name, idx in (("hnsw", "idx_memories_embedding"), ("gin_fts", "idx_memories_fts_scope"), ("gin_trgm", "idx_memories_trgm_scope")):
        found = run("SELECT to_regclass(%s) IS NOT NULL", (idx,))[0][0]
        sizes[f"{name}_bytes"] = run(f"SELECT pg_relation_size('{idx}')")[0][0] if found else 0
    return sizes


def settings(url: str) -> dict:
    names = ("server_version", "shared_buffers", "work_mem", "maintenance_work_mem", "max_parallel_maintenance_workers",
             "max_parallel_workers_per_gather", "effective_cache_size", "max_wal_size", "synchronous_commit")
    out = {n: admin(url, f"SHOW {n}")[0][0] for n in names}
    out["pgvector"] = (admin(url, "SELECT extversion FROM pg_extension WHERE extname = 'vector'") or [[None]])[0][0]
    return out


# -- one size ----------------------------------------------------------------------------------
def open_memory(url: str, args: argparse.Namespace) -> Memory:
    postgres: dict[str, Any] = {"maintenance_work_mem": args.maintenance_work_mem or "1GB"}
    if args.exact_rows is not None:
        postgres["exact_search_rows"] = args.exact_rows
    if args.hnsw_m:
        postgres |= {"hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction or 2 * args.hnsw_m}
    return Memory.open(url, embedding={"query_cache_size": 0}, postgres=postgres)


def run_size(server: Server, n: int, args: argparse.Namespace) -> dict:
    if args.reuse:
        return reuse_size(server, n, args)
    name = f"clawbench_{n}_{uuid.uuid4().hex[:6]}"
    url = server.database(name)
    log(f"size {n:,}: database {name}, load {loadavg()}")
    data = Data(n, args)
    report: dict[str, Any] = {"size": n, "database": name, "load_before": loadavg(), "ingest": [], "builds": []}
    mem = open_memory(url, args)
    try:
        tail = min(args.tail, n) if args.load == "deferred" else n
        bulk = n - tail
        if bulk:
            deferred = mem.upkeep.deferred_vector_index()
            deferred.__enter__()
            report["ingest"].append(load(mem, data, 0, bulk, args.chunk, "add_many in deferred_vector_index()"))
            t = time.perf_counter()
            with hnsw_with(mem._store, args.hnsw):
                deferred.__exit__(None, None, None)  # builds the index
            seconds = time.perf_counter() - t
            size = mem._store.run("SELECT pg_relation_size('idx_memories_embedding')")[0][0]
            log(f"HNSW build at the end of the deferred load: {seconds:.1f}s")
            report["builds"].append({"seconds": seconds, "hnsw": args.hnsw or engine_hnsw(mem._store),
                                     "maintenance_work_mem": mem._store.config.maintenance_work_mem,
                                     "parallel_workers": mem._store.run("SHOW max_parallel_maintenance_workers")[0][0],
                                     "index_bytes": size, "notices": [], "leader_peak_rss_bytes": None, "rows": bulk})
        if tail:
            label = "add_many, HNSW maintained per row" + (f" (last {tail:,} rows)" if bulk else " (no deferral)")
            with hnsw_with(mem._store, args.hnsw):
                report["ingest"].append(load(mem, data, bulk, n, args.chunk, label))
        t = time.perf_counter()
        mem._store.run("VACUUM ANALYZE memories")
        report["vacuum_analyze_s"] = time.perf_counter() - t
        if args.compare_build:
            report["builds"].append({**build_index(mem, url, None, args.hnsw), "rows": n})
            report["builds"].append({**build_index(mem, url, args.maintenance_work_mem, args.hnsw), "rows": n})
        report.update(measure_searches(mem, data, url, args))
    finally:
        mem.close()
        report["load_after"] = loadavg()
        if not args.keep:
            server.drop(name)
        else:
            report["url"] = url
    return report


def measure_searches(mem: Memory, data: Data, url: str, args: argparse.Namespace) -> dict:
    """What every run measures on a loaded database: footprint, the legs, end-to-end search, settings."""
    out: dict[str, Any] = {"footprint": footprint(mem)}
    out["vector_leg"] = [] if args.skip_search or args.skip_vector else vector_leg(mem, data, args)
    if args.partitioned:
        out["partitioned"] = partitioned(mem, data, args)
    if args.hybrid_queries and not args.skip_search:
        out["text_legs"] = text_legs(mem, data, args)
        out["search"] = end_to_end(mem, data, args)
    out["settings"] = settings(url)
    return out


def reuse_size(server: Server, n: int, args: argparse.Namespace) -> dict:
    """Search measurements only, on a database an earlier run loaded (`--keep`) with the same data options."""
    parts = urlsplit(server.url)
    url = urlunsplit(parts._replace(path=f"/{args.reuse}"))
    data = Data(n, args)
    mem = open_memory(url, args)
    report: dict[str, Any] = {"size": n, "database": args.reuse, "load_before": loadavg(), "ingest": [], "builds": []}
    try:
        ids = [str(r[0]) for r in mem._store.run("SELECT id FROM memories ORDER BY seq")]
        if len(ids) != n:
            raise SystemExit(f"{args.reuse} holds {len(ids)} memories, not {n}")
        for s in range(0, n, args.chunk):  # the same vectors again (same seed), in insertion order
            data.chunk(s, min(s + args.chunk, n))
        data.ids = ids
        check = mem._store.vectors(ids[-1:])[ids[-1]]
        if float(check @ data.vectors[-1]) < 0.9999:
            raise SystemExit(f"{args.reuse} was loaded with other data options")
        if args.compare_build:
            report["builds"].append({**build_index(mem, url, None, args.hnsw), "rows": n})
        if args.compare_build or args.rebuild:
            report["builds"].append({**build_index(mem, url, args.maintenance_work_mem, args.hnsw), "rows": n})
        report.update(measure_searches(mem, data, url, args))
    finally:
        mem.close()
        report["load_after"] = loadavg()
    return report


def model_ingest(server: Server, args: argparse.Namespace) -> dict:
    name = f"clawbench_model_{uuid.uuid4().hex[:6]}"
    url = server.database(name)
    try:
        mem = Memory.open(url)
        try:
            rng = np.random.default_rng(args.seed + 3)
            w = [rng.integers(0, len(v), size=args.model_n) for v in (NAMES, VERBS, TOPICS, TOPICS, PLACES)]
            texts = [f"{NAMES[a].title()} {VERBS[b]} the {TOPICS[c]} and the {TOPICS[d]} at the {PLACES[e]} on day {i}."
                     for i, (a, b, c, d, e) in enumerate(zip(*w))]
            mem.upkeep.embedder.embed(["warm up"], kind="passage")  # model load is not ingest time
            t = time.perf_counter()
            mem.upkeep.embedder.embed(texts, kind="passage")
            raw = len(texts) / (time.perf_counter() - t)
            t = time.perf_counter()
            for s in range(0, len(texts), 500):
                mem.add_many([{"content": x, "scope": "custom:model"} for x in texts[s : s + 500]], dedup=False)
            per_s = len(texts) / (time.perf_counter() - t)
            log(f"add_many with the local model: {per_s:.0f}/s (raw embedding {raw:.0f}/s)")
            return {"memories": len(texts), "add_many_per_s": per_s, "raw_embed_per_s": raw,
                    "model": f"{mem.upkeep.embedder.provider}/{mem.upkeep.embedder.model}", "batch_size": mem.upkeep.embedder.batch_size}
        finally:
            mem.close()
    finally:
        server.drop(name)


# -- output ------------------------------------------------------------------------------------
def mb(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.0f}"


def print_markdown(report: dict) -> None:
    m = report["machine"]
    print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']:.0f} GB RAM; load average {m['load_start']} at start, "
          f"{m['load_end']} at end. Data: {report['data']}.")
    for r in report["sizes"]:
        s = r["settings"]
        print(f"PostgreSQL {s['server_version']}, pgvector {s['pgvector']}; shared_buffers {s['shared_buffers']}, "
              f"maintenance_work_mem {s['maintenance_work_mem']} (server default), max_parallel_maintenance_workers "
              f"{s['max_parallel_maintenance_workers']}, synchronous_commit {s['synchronous_commit']}.")
        break
    print()
    print("Ingest through `add_many(items, embeddings=..., dedup=False)`:")
    print()
    print("| size | path | memories | seconds | memories/s | first / last chunk /s | COPY s | history s | engine s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in report["sizes"]:
        for i in r["ingest"]:  # (none when --reuse)
            print(f"| {r['size']:,} | {i['path']} | {i['memories']:,} | {i['seconds']:.1f} | {i['per_s']:,.0f} | "
                  f"{i['first_chunk_per_s']:,.0f} / {i['last_chunk_per_s']:,.0f} | {i['copy_s']:.1f} | "
                  f"{i['history_s']:.1f} | {i['engine_s']:.1f} |")
    if report.get("model"):
        mo = report["model"]
        print()
        print(f"`add_many` without embeddings ({mo['model']}, batch {mo['batch_size']}): {mo['memories']:,} memories at "
              f"{mo['add_many_per_s']:.0f}/s; the model alone embeds {mo['raw_embed_per_s']:.0f} texts/s.")
    print()
    print("HNSW build (`CREATE INDEX` through the engine: the end of `deferred_vector_index()` or `build_vector_index()`):")
    print()
    print("| size | rows | HNSW | maintenance_work_mem | parallel workers | seconds | rows/s | index MB | leader peak RSS MB | notice |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in report["sizes"]:
        for b in r["builds"]:
            note = "; ".join(b["notices"]) or "-"
            print(f"| {r['size']:,} | {b['rows']:,} | {b['hnsw']} | {b['maintenance_work_mem']} | {b['parallel_workers']} | "
                  f"{b['seconds']:.1f} | {b['rows'] / b['seconds']:,.0f} | {mb(b['index_bytes'])} | "
                  f"{mb(b.get('leader_peak_rss_bytes'))} | {note} |")
    print()
    print("Vector leg, `store.vector_candidates(q, filters, 10)` (iterative_scan = relaxed_order), "
          "recall@10 against exact search; similarity ratio = mean cosine of the 10 returned / of the exact 10:")
    print()
    print("| size | filter | ef_search | p50 ms | p95 ms | recall@10 | worst query | similarity ratio | plan |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in report["sizes"]:
        for v in r["vector_leg"]:
            ef = v["ef_search"]
            flt = "none" if v["filter"] == "none" else "one scope (~2%)"
            print(f"| {r['size']:,} | {flt} | {ef} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} | {v['recall@10']:.3f} | "
                  f"{v['min_recall']:.1f} | {v.get('sim_ratio', float('nan')):.4f} | {v['plan']} |")
    if any(r.get("partitioned") for r in report["sizes"]):
        print()
        print("The same vector-leg SQL on a copy partitioned by scope, one HNSW index per partition:")
        print()
        print("| size | partitioning | insert s | HNSW build s | index MB | filter | ef_search | p50 ms | p95 ms | recall@10 | similarity ratio |")
        print("|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in report["sizes"]:
            p = r.get("partitioned")
            for v in (p or {}).get("rows", []):
                flt = "none" if v["filter"] == "none" else "one scope (~2%)"
                print(f"| {r['size']:,} | {p['kind']} ({p['partitions']}) | {p['insert_s']:.1f} | {p['build_s']:.1f} | "
                      f"{mb(p['index_bytes'])} | {flt} | {v['ef_search']} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} | "
                      f"{v['recall@10']:.3f} | {v.get('sim_ratio', float('nan')):.4f} |")
    latency_table(report, "text_legs", "leg",
                  "Text legs alone, `store.text_candidates` / `store.fuzzy_candidates` (pool 50, no query embedding):")
    latency_table(report, "search", "mode",
                  "End to end, `mem.search(text, mode=..., limit=10)`, query embedding included (local model, cache off):")
    print()
    print("Storage (MB):")
    print()
    print("| size | heap | TOAST | HNSW | GIN fts | GIN trigram | all indexes | history | database |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in report["sizes"]:
        f = r["footprint"]
        print(f"| {r['size']:,} | {mb(f['heap_bytes'])} | {mb(f['toast_bytes'])} | {mb(f['hnsw_bytes'])} | "
              f"{mb(f['gin_fts_bytes'])} | {mb(f['gin_trgm_bytes'])} | {mb(f['all_indexes_bytes'])} | "
              f"{mb(f['history_bytes'])} | {mb(f['database_bytes'])} |")


def latency_table(report: dict, key: str, what: str, title: str) -> None:
    """A p50/p95 table of the `key` rows of every size (each row names its `what` and scope)."""
    if not any(r.get(key) for r in report["sizes"]):
        return
    print()
    print(title)
    print()
    print(f"| size | {what} | scope | p50 ms | p95 ms |")
    print("|---:|---|---|---:|---:|")
    for r in report["sizes"]:
        for row in r.get(key, []):
            print(f"| {r['size']:,} | {row[what]} | {row['scope']} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} |")


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        ram = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1]) / 2**20
    except (OSError, StopIteration):
        ram = 0.0
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": ram, "load_start": loadavg(), "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated memory counts")
    parser.add_argument("--url", help="a PostgreSQL server URL whose user may CREATE DATABASE (default: own pgserver)")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="ALTER SYSTEM setting for the server (own pgserver: applied with a restart)")
    parser.add_argument("--load", choices=("deferred", "online"), default="deferred",
                        help="deferred: bulk load without HNSW, build once, then --tail rows online; "
                        "online: everything through the engine's lazy index creation")
    parser.add_argument("--tail", type=int, default=20_000, help="rows loaded with the index in place (deferred)")
    parser.add_argument("--chunk", type=int, default=10_000, help="memories per add_many call")
    parser.add_argument("--maintenance-work-mem", default="4GB", help="SET for the HNSW build ('' = server default)")
    parser.add_argument("--compare-build", action="store_true",
                        help="also rebuild the index with the server's default maintenance_work_mem, then with ours")
    parser.add_argument("--hnsw", help="any pgvector index parameters, e.g. 'm = 16, ef_construction = 64'")
    parser.add_argument("--hnsw-m", type=int, help="postgres.hnsw_m for the engine (default: the engine's)")
    parser.add_argument("--hnsw-ef-construction", type=int, help="postgres.hnsw_ef_construction (default 2 * m)")
    parser.add_argument("--exact-rows", type=int,
                        help="postgres.exact_search_rows: filters expected to leave at most this many rows are "
                        "read exactly (default: the engine's)")
    parser.add_argument("--partitioned", metavar="list|hash:N",
                        help="also search a copy of the vectors partitioned by scope, one HNSW index per partition")
    parser.add_argument("--scoped-extra", default="",
                        help="';'-separated settings for one more scoped row at the engine's ef_search ('' = none)")
    parser.add_argument("--skip-search", action="store_true", help="measure ingest and build only")
    parser.add_argument("--skip-vector", action="store_true", help="no vector-leg table (nor its exact ground truth)")
    parser.add_argument("--ef", default="64,200", help="more hnsw.ef_search values than the engine's own")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--exact-queries", type=int, default=10, help="queries checked by exact search in SQL")
    parser.add_argument("--hybrid-queries", type=int, default=100, help="end-to-end searches per mode (0: skip)")
    parser.add_argument("--model-n", type=int, default=2000, help="memories embedded by the local model (0: skip)")
    parser.add_argument("--scopes", type=int, default=50)
    parser.add_argument("--centroids", type=int, default=2000)
    parser.add_argument("--spread", type=float, default=0.8, help="noise norm around a centroid (relative)")
    parser.add_argument("--query-noise", type=float, default=0.5, help="noise norm added to a stored vector")
    parser.add_argument("--vectors-from", help="SQLite store whose vectors and texts to use instead of synthetic ones")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the databases (only useful with --url)")
    parser.add_argument("--rebuild", action="store_true", help="with --reuse: drop and rebuild the HNSW index (--hnsw)")
    parser.add_argument("--reuse", metavar="DATABASE",
                        help="measure search on a database kept by an earlier run with the same data options "
                        "(with --url; one size)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    args.ef = [None, *(int(x) for x in args.ef.split(",") if x)]  # None: the engine's own

    report: dict[str, Any] = {"machine": machine(), "args": vars(args), "sizes": []}
    report["data"] = (f"vectors of {args.vectors_from}" if args.vectors_from else
                      f"{args.centroids:,} Gaussian centroids in {DIMS}-d, spread {args.spread}, query noise "
                      f"{args.query_noise}, {args.scopes} scopes, sessions of {SESSION}")
    server = Server(args.url, args.pg_setting)
    try:
        if args.model_n:
            report["model"] = model_ingest(server, args)
        for n in (int(x) for x in args.sizes.split(",")):
            report["sizes"].append(run_size(server, n, args))
            if args.json:  # keep what is done, in case a later size does not finish
                Path(tempfile.gettempdir(), "clawrecall-pgbench-partial.json").write_text(json.dumps(report, indent=2, default=str))
    finally:
        server.close()
    report["machine"]["load_end"] = loadavg()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print_markdown(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
