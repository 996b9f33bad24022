"""Import speed from the systems clawrecall replaces, and backup/restore of a large store.

Builds an N-memory source of each system from its documented schema (mem0's pgvector collection,
openclaw-memory-pgvector's and ShadowDB's `memories` on PostgreSQL, nova-memory's `entity_facts` and
`memory_embeddings`, memento-local's SQLite file, memory-lancedb-pro's LanceDB folder), then times the whole `clawrecall import --from SYSTEM` process
into a new SQLite store and a new PostgreSQL database:

* with stored vectors: the source's vectors are random unit vectors declared (`--vectors-from`) as
  the store model's, so the import stores them as they are and embeds nothing;
* re-embedding: the source names no model, so the store's model (the default local one) embeds every
  text. The local model's rate does not depend on the store, so this runs on a subset (`--embed-n`)
  and is set beside the model alone on the same texts (`Embedder.embed`), by CPU time a text.

Then a store of N memories is backed up and restored (`clawrecall backup` / `restore`) on each backend.

    python bench/importing.py --n 100000 [--n-others 20000] --embed-n 1000 [--systems mem0,shadowdb,…] [--url …]

Without --url a temporary pgserver is started. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit, urlunsplit

import numpy as np

STORE_MODEL = "local/all-MiniLM-L6-v2"  # the default store's model: what --vectors-from names
DIMS = 384
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu coffee lisbon flight seat repo deploy build "
         "standup monday tuesday budget invoice garden bicycle marathon piano recipe allergy").split()


def texts(n: int, seed: int = 7) -> list[str]:
    """N distinct one-sentence memories, of the length agents' memories run (8–16 words)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(WORDS), size=(n, 16))
    lengths = rng.integers(8, 17, size=n)
    return [f"Memory {i}: " + " ".join(WORDS[w] for w in picks[i, : lengths[i]]) for i in range(n)]


def unit_vectors(n: int, seed: int = 11) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def pg_vector_text(v: np.ndarray) -> str:
    return "[" + ",".join(map(str, np.round(v, 6).tolist())) + "]"


def _copy(url: str, ddl: str | None, table: str, columns: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """Rows into `table` (made by `ddl`, unless it is there already)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if ddl is not None:
            conn.execute(ddl)
        with conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _times(n: int) -> list[str]:
    base = np.datetime64("2024-01-01T00:00:00")
    return [str(base + np.timedelta64(int(i) * 37, "s")) + "+00:00" for i in range(n)]


# -- sources, each from its system's documented schema -----------------------------------------------
def build_mem0(url: str, n: int, with_vectors: bool = True) -> str:
    vecs = unit_vectors(n) if with_vectors else None
    when = _times(n)

    def rows() -> Iterator[tuple[Any, ...]]:
        for i, text in enumerate(texts(n)):
            payload = {"data": text, "hash": f"h{i}", "created_at": when[i], "updated_at": when[i],
                       "user_id": f"user{i % 10}"}
            yield (str(uuid.UUID(int=i + 1)), pg_vector_text(vecs[i]) if vecs is not None else None, json.dumps(payload))

    _copy(url, f"CREATE TABLE mem0 (id UUID PRIMARY KEY, vector vector({DIMS}), payload JSONB)", "mem0",
          "id, vector, payload", rows())
    return url


def build_pgvector(url: str, n: int, with_vectors: bool = True) -> str:
    vecs = unit_vectors(n) if with_vectors else None
    when = _times(n)
    ddl = (f"CREATE TABLE memories (id UUID PRIMARY KEY, user_id TEXT NOT NULL, session_id TEXT, content TEXT NOT NULL, "
           f"memory_type TEXT NOT NULL DEFAULT 'fact', embedding vector({DIMS}), importance REAL DEFAULT 0.7, "
           "confidence REAL DEFAULT 1.0, metadata JSONB DEFAULT '{}', source_type TEXT, source_id TEXT, "
           "created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW(), expires_at TIMESTAMPTZ)")
    kinds = ("fact", "preference", "decision", "entity", "experience")

    def rows() -> Iterator[tuple[Any, ...]]:
        for i, text in enumerate(texts(n)):
            yield (str(uuid.UUID(int=i + 1)), f"user{i % 10}", f"s{i % 100}", text, kinds[i % 5],
                   pg_vector_text(vecs[i]) if vecs is not None else None, when[i], when[i])

    _copy(url, ddl, "memories", "id, user_id, session_id, content, memory_type, embedding, created_at, updated_at",
          rows())
    return url


def build_shadowdb(url: str, n: int, with_vectors: bool = True) -> str:
    vecs = unit_vectors(n) if with_vectors else None
    when = _times(n)
    ddl = (f"CREATE TABLE memories (id BIGSERIAL PRIMARY KEY, content TEXT NOT NULL, title TEXT, category TEXT DEFAULT "
           f"'general', record_type TEXT DEFAULT 'fact', tags TEXT[] DEFAULT '{{}}', embedding VECTOR({DIMS}), "
           "created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW(), deleted_at TIMESTAMPTZ)")

    def rows() -> Iterator[tuple[Any, ...]]:
        for i, text in enumerate(texts(n)):
            yield (text, ("fact", "decision", "preference")[i % 3], ["bench"],
                   pg_vector_text(vecs[i]) if vecs is not None else None, when[i], when[i])

    _copy(url, ddl, "memories", "content, record_type, tags, embedding, created_at, updated_at", rows())
    return url


MEMENTO_SCHEMA = """
CREATE TABLE facts (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, category TEXT NOT NULL, content TEXT NOT NULL,
  summary TEXT, visibility TEXT NOT NULL DEFAULT 'shared', confidence REAL DEFAULT 1.0, first_seen_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL, occurrence_count INTEGER DEFAULT 1, embedding TEXT, supersedes TEXT, metadata TEXT);
"""


def build_memento(path: str, n: int, with_vectors: bool = True) -> str:
    vecs = unit_vectors(n) if with_vectors else None
    db = sqlite3.connect(path)
    db.executescript(MEMENTO_SCHEMA)
    t0 = 1_735_689_600_000
    db.executemany("INSERT INTO facts (id, agent_id, category, content, first_seen_at, last_seen_at, embedding) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   ((f"f{i}", f"agent{i % 4}", ("preference", "decision", "technical", "person")[i % 4], text,
                     t0 + i * 37_000, t0 + i * 37_000, json.dumps(vecs[i].tolist()) if vecs is not None else None)
                    for i, text in enumerate(texts(n))))
    db.commit()
    db.close()
    return path


def build_lancedb(folder: str, n: int, with_vectors: bool = True) -> str:
    import lancedb
    import pyarrow as pa

    vecs = unit_vectors(n) if with_vectors else np.zeros((n, DIMS), np.float32)
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), DIMS)),
                        ("category", pa.string()), ("scope", pa.string()), ("importance", pa.float64()),
                        ("timestamp", pa.float64()), ("metadata", pa.string())])
    t0 = 1_735_689_600_000
    table = pa.table({
        "id": [f"m{i}" for i in range(n)], "text": texts(n),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), DIMS),
        "category": [("preference", "fact", "decision")[i % 3] for i in range(n)],
        "scope": [("global", "agent:coder", "user:bob")[i % 3] for i in range(n)],
        "importance": [0.7] * n, "timestamp": [float(t0 + i * 37_000) for i in range(n)], "metadata": ["{}"] * n,
    }, schema=schema)
    lancedb.connect(folder).create_table("memories", table)
    return folder


def build_nova(url: str, n: int, with_vectors: bool = True) -> str:
    """nova-memory's entity facts (ten to an entity) and the vectors its `memory_embeddings` queue holds of them."""
    vecs = unit_vectors(n) if with_vectors else None
    ddl = ("CREATE TABLE entities (id SERIAL PRIMARY KEY, name VARCHAR(255) NOT NULL, type VARCHAR(50) NOT NULL, "
           "created_at TIMESTAMP DEFAULT NOW()); "
           "CREATE TABLE entity_facts (id SERIAL PRIMARY KEY, entity_id INTEGER REFERENCES entities(id), "
           "key VARCHAR(255) NOT NULL, value TEXT NOT NULL, confidence DOUBLE PRECISION DEFAULT 1.0); "
           "CREATE TABLE memory_embeddings (id SERIAL PRIMARY KEY, source_type VARCHAR(50), source_id TEXT, content TEXT, "
           f"embedding VECTOR({DIMS}), metadata JSONB, created_at TIMESTAMP DEFAULT NOW(), updated_at TIMESTAMP DEFAULT NOW())")
    entities = (n + 9) // 10
    _copy(url, ddl, "entities", "id, name, type",
          ((e + 1, f"Entity {e}", ("person", "organization", "place")[e % 3]) for e in range(entities)))
    facts = texts(n)
    _copy(url, None, "entity_facts", "id, entity_id, key, value, confidence",
          ((i + 1, i // 10 + 1, ("note", "preference", "role")[i % 3], text, 0.9) for i, text in enumerate(facts)))
    if vecs is not None:  # without: an empty queue (the reader requires the table)
        _copy(url, None, "memory_embeddings", "source_type, source_id, content, embedding",
              (("entity_fact", str(i + 1), text, pg_vector_text(vecs[i])) for i, text in enumerate(facts)))
    return url


SOURCES: dict[str, tuple[str, Callable[[str, int, bool], str]]] = {
    "mem0": ("pg", build_mem0),
    "openclaw-memory-pgvector": ("pg", build_pgvector),
    "shadowdb": ("pg", build_shadowdb),
    "memento-local": ("file", build_memento),
    "memory-lancedb-pro": ("folder", build_lancedb),
    "nova-memory": ("pg", build_nova),
}


# -- running the CLI ---------------------------------------------------------------------------------
def clawrecall(*args: str) -> tuple[float, float, dict[str, Any]]:
    """One whole `clawrecall … --json` process, as a user runs it: its wall seconds, its CPU seconds
    (what it would take alone on an idle core: the machine is shared) and its answer."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "clawrecall.cli", *args, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"clawrecall {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, json.loads(done.stdout)


class Databases:
    """Fresh PostgreSQL databases on one server (a temporary pgserver unless --url names one)."""

    def __init__(self, url: str | None):
        self.server = None
        if url is None:
            import pgserver

            self.home = Path(tempfile.mkdtemp(prefix="clawrecall-bench-import-pg-"))
            self.server = pgserver.get_server(self.home / "data", cleanup_mode="delete")
            url = self.server.get_uri()
        self.url = url
        self.made: list[str] = []

    def new(self, prefix: str) -> str:
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return urlunsplit(urlsplit(self.url)._replace(path=f"/{name}"))

    def close(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if self.server is not None:
            self.server.cleanup()
            shutil.rmtree(self.home, ignore_errors=True)


def load() -> str:
    """The machine's load now: it is shared, and every section says what it ran beside."""
    return f"{os.uname().nodename}: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="memories per source (stored vectors) and per backup")
    parser.add_argument("--n-others", type=int, default=None, help="memories of the sources after the first (default "
                        "--n): on a shared machine, the first at 100k and the others smaller")
    parser.add_argument("--embed-n", type=int, default=2000, help="memories per source when re-embedding")
    parser.add_argument("--systems", default=",".join(SOURCES))
    parser.add_argument("--targets", default="sqlite,postgres")
    parser.add_argument("--embed-targets", default="sqlite", help="stores of the re-embedding runs (the model's "
                        "rate does not depend on the store)")
    parser.add_argument("--backup-targets", default=None, help="stores backed up and restored into (default --targets): "
                        "a store of one is made by restoring the other's backup when no import made it")
    parser.add_argument("--skip", default="", help="parts to leave out: vectors,embed,backup")
    parser.add_argument("--url", help="a PostgreSQL server URL whose user may CREATE DATABASE; default: a pgserver")
    args = parser.parse_args()
    print(load(), flush=True)
    dbs = Databases(args.url)
    work = Path(tempfile.mkdtemp(prefix="clawrecall-bench-import-"))
    try:
        run(args, dbs, work)
    finally:
        dbs.close()
        shutil.rmtree(work, ignore_errors=True)


def source_of(system: str, n: int, with_vectors: bool, dbs: Databases, work: Path) -> str:
    kind, build = SOURCES[system]
    place = {"pg": lambda: dbs.new("src"), "file": lambda: str(work / f"{system}-{n}-{uuid.uuid4().hex[:6]}.db"),
             "folder": lambda: str(work / f"{system}-{n}-{uuid.uuid4().hex[:6]}")}[kind]()
    return build(place, n, with_vectors)


def target_of(backend: str, dbs: Databases, work: Path) -> str:
    return str(work / f"store-{uuid.uuid4().hex[:8]}.db") if backend == "sqlite" else dbs.new("store")


def run(args: argparse.Namespace, dbs: Databases, work: Path) -> None:
    systems = [s for s in args.systems.split(",") if s]
    targets = [t for t in args.targets.split(",") if t]
    skip = set(args.skip.split(","))
    stores: dict[str, str] = {}  # backend -> the first source's store, backed up below
    if "vectors" not in skip:
        print(f"\n### Import with stored vectors (--vectors-from {STORE_MODEL}; PostgreSQL with --defer-index)\n\n{load()}\n")
        print("| source | memories | store | wall s | memories/s | CPU s (import process) | memories per CPU s | load |\n"
              "|---|---:|---|---:|---:|---:|---:|---:|", flush=True)
        for k, system in enumerate(systems):
            n = args.n if k == 0 or args.n_others is None else args.n_others
            source = source_of(system, n, True, dbs, work)
            for backend in targets:
                target = target_of(backend, dbs, work)
                stores.setdefault(backend, target)
                wall, cpu, out = clawrecall("--db", target, "import", "--from", system, source, "--vectors-from",
                                            STORE_MODEL, *(["--defer-index"] if backend == "postgres" else []))
                assert out["imported"] == n and out["vectors"]["reused"] == n, out
                print(f"| {system} | {n:,} | {backend} | {wall:.1f} | {n / wall:,.0f} | {cpu:.1f} | {n / cpu:,.0f} | "
                      f"{os.getloadavg()[0]:.1f} |", flush=True)
    if "embed" not in skip:
        from clawrecall.config import Config
        from clawrecall.embeddings import create_embedder

        sample = texts(args.embed_n)
        embedder = create_embedder(Config().embedding)
        embedder.embed(sample[:64], kind="passage")  # loaded and warm, as the import's is by its first batch

        def model_alone() -> tuple[float, float]:
            """The model alone on the sample: wall and CPU seconds a text."""
            started, cpu = time.perf_counter(), time.process_time()
            embedder.embed(sample, kind="passage")
            return (time.perf_counter() - started) / args.embed_n, (time.process_time() - cpu) / args.embed_n

        raw_wall, per_text = model_alone()
        print(f"\n### Import re-embedding ({args.embed_n:,} memories)\n\n{load()}\n")
        print(f"The model alone on these texts: {1 / raw_wall:,.0f}/s wall, {per_text * 1000:.2f} "
              "CPU ms a text. The import's CPU per text is compared with it (on a shared machine wall rates say more "
              "about the neighbours): whole process, and marginal, the last 80 % of the texts, (cpu(n) - cpu(n/5)) / "
              "(n - n/5), without the process's start and the model's load. The model's rate is measured again after "
              "the imports: a busy machine moves CPU time a text, too.\n")
        print("| source | store | wall s | memories/s | CPU ms a memory | model's share (whole) | "
              "marginal CPU ms | model's share (marginal) |\n|---|---|---:|---:|---:|---:|---:|---:|", flush=True)
        small = args.embed_n // 5
        marginals: list[tuple[str, str, float]] = []
        for system in systems:
            sources = {n: source_of(system, n, False, dbs, work) for n in (small, args.embed_n)}
            for backend in args.embed_targets.split(","):
                walls, cpus = {}, {}
                for n, source in sources.items():
                    walls[n], cpus[n], out = clawrecall("--db", target_of(backend, dbs, work), "import", "--from", system,
                                                        source)
                    assert out["imported"] == n and out["vectors"]["reused"] == 0, out
                whole = cpus[args.embed_n] / args.embed_n
                marginal = (cpus[args.embed_n] - cpus[small]) / (args.embed_n - small)
                print(f"| {system} | {backend} | {walls[args.embed_n]:.1f} | {args.embed_n / walls[args.embed_n]:,.0f} | "
                      f"{whole * 1000:.2f} | {per_text / whole:.0%} | {marginal * 1000:.2f} | {per_text / marginal:.0%} |",
                      flush=True)
                marginals.append((system, backend, marginal))
        _, after = model_alone()
        print(f"\nThe model alone again after the imports ({load()}): {after * 1000:.2f} CPU ms a text. The model's "
              "share (marginal) against it: " + ", ".join(f"{system} {backend} {after / m:.0%}" for system, backend, m
                                                         in marginals) + "\n", flush=True)
    if "backup" not in skip:
        backends = [t for t in (args.backup_targets or args.targets).split(",") if t]
        print(f"\n### Backup and restore (the first source's store; {args.n:,} memories)\n\n{load()}\n")
        print("| store | backup s (wall) | backup CPU s | file MB | restored into | restore s (wall) | restore CPU s |\n"
              "|---|---:|---:|---:|---|---:|---:|", flush=True)
        restored: dict[str, str] = {}  # a store each backend got by a restore: the one backed up next, if none else
        for backend in backends:
            target = stores.get(backend) or restored.get(backend)
            if target is None:
                target = target_of(backend, dbs, work)
                clawrecall("--db", target, "import", "--from", "mem0", source_of("mem0", args.n, True, dbs, work),
                           "--vectors-from", STORE_MODEL, *(["--defer-index"] if backend == "postgres" else []))
            file = work / f"backup-{backend}.tar.gz"
            seconds, cpu, _ = clawrecall("--db", target, "backup", str(file))
            for into in backends:
                new = target_of(into, dbs, work)
                back, back_cpu, _ = clawrecall("--db", new, "restore", str(file))
                restored.setdefault(into, new)
                print(f"| {backend} | {seconds:.1f} | {cpu:.1f} | {file.stat().st_size / 1e6:.0f} | {into} | {back:.1f} | "
                      f"{back_cpu:.1f} |", flush=True)

if __name__ == "__main__":
    main()
