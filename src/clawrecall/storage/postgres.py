"""The PostgreSQL backend: pgvector HNSW for the vector leg, a tsvector for the text leg,
pg_trgm for the fuzzy leg; everything else is the shared SQL of `sql.py`.

Connections come from a psycopg pool that checks each connection before lending it, so a
server restart costs the in-flight call (a clear `StorageError`) and nothing after it.
No row is kept between calls: every search reads the database, so several servers on one database,
or on a read replica, answer as the database does, by construction. Cached are only the vector
dimensions (re-read when a query's differ, as after a `reembed` by another process) and, for a
minute, the planner's estimates (`_estimates`): whether a filter's vector search reads exactly or
through HNSW, how many rows each keyword matches under a filter, and how many rows the searched scopes
and the table hold.

The vector index is HNSW (`postgres.hnsw_m`, `hnsw_ef_construction`, `hnsw_ef_search`); a
filter that leaves few rows (`postgres.exact_search_rows`, by the planner's estimate) is read
exactly instead, which is both faster and complete there, from an index that keeps each scope's
vectors together (`_SCOPE_VECTORS`). Bulk loads can defer the index (`deferred_vector_index`) and
build it once at the end.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .._urls import redacted_url
from ..errors import ConfigError, StorageError
from ..models import MemoryRecord
from .base import Candidate
from .dialect import PostgresDialect
from .filters import Filters
from .migrations import (
    CORE, LIST_INDEXES, MESSAGE_WINDOWS, PARTIAL_INDEXES, RECORD_KINDS, SEALED_SECRETS, SEGMENT_SUMMARY, SESSION_INDEX_SCOPE,
    api_tokens_table,
    validity,
)
from .schema import KIND_CHECK, Table
from .sql import Store, T, dimensions_differ
from .text import keywords

if TYPE_CHECKING:
    from ..config import PostgresConfig

log = logging.getLogger("clawrecall.storage")

_TS_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")
PGVECTOR_NEEDED = (0, 8)  # halfvec (0.7) and iterative HNSW scans (0.8)
_MIGRATION_LOCK = 0x636C6177  # pg_advisory_xact_lock key: "claw"
_PLAN_TTL_S = 60.0  # how long `_estimates` trusts the planner's answer
_INDEX_WAIT_S = 60.0  # how long an index build waits for transactions that still see rows' old vectors
_PLANS_KEPT = 4096  # answers kept (a filter each, or a word and a filter: a user's scopes, a session…)
_RANKED = 2_000  # matches the keyword leg ranks at most (`_ranked`)
# the table's pages the keyword leg reads first for its k other matches (`text_candidates`): among other scopes' rows,
# and when the searched scopes hold most of the table (most rows of those pages are theirs)
_FRONT_PAGES, _FRONT_PAGES_MOST = 24, 512
# the rows of the searched scopes, and of the table, by the planner's estimates (`text_candidates`)
_SCOPES_ROWS, _TABLE_ROWS = "SELECT 1 FROM memories m WHERE m.scope = ANY (%s::text[])", "SELECT 1 FROM memories m"
_monotonic = time.monotonic  # `_estimates`' clock
_INDEX_DEFERRED = "vector_index_deferred"  # meta key: a bulk load is writing without the HNSW index


FTS_SCOPE = "ARRAY[scope]"  # indexed with the tsvector; queried as `ARRAY[m.scope] && scopes`
TRGM_SCOPE = "ARRAY['trgm:' || scope]"  # indexed with the trigrams
# The scope joins the text indexes (a GIN array column, no btree_gin needed), so a scoped keyword
# or trigram search intersects posting lists instead of matching the whole store and filtering
# afterwards. Each index gets its own expression, so the planner cannot answer one leg's scope
# clause from the other leg's index.
_TEXT_INDEXES = [
    f"CREATE INDEX idx_memories_fts_scope ON memories USING gin (fts, ({FTS_SCOPE}))",
    f"CREATE INDEX idx_memories_trgm_scope ON memories USING gin (content gin_trgm_ops, ({TRGM_SCOPE}))",
]
_EXTENSIONS = ["CREATE EXTENSION IF NOT EXISTS vector", "CREATE EXTENSION IF NOT EXISTS pg_trgm"]
# Binary COPY needs each column's type named (a vector goes as pgvector's binary)
_ALL_STEPS = CORE.steps[: CORE.steps.index("text-index-bulk") + 1]  # the core steps before named migrations
# schema v1-v5 of releases before named migrations (v4 added the API tokens, v5 the scoped text indexes)
_LEGACY = {
    1: _ALL_STEPS[:1], 2: _ALL_STEPS[:2], 3: _ALL_STEPS[:3], 4: (*_ALL_STEPS[:3], "api-tokens"), 5: _ALL_STEPS,
}


def _fts_function(ts_config: str, verb: str) -> str:
    """The tsvector's function: title, content, tags and (since fact-keys) the row's keys; none for a long
    message's window (since window-text), whose text is its message's, which the tsvector holds whole."""
    return f"""{verb} FUNCTION memories_fts_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.fts := CASE WHEN NEW.kind = 'window' THEN NULL ELSE
                to_tsvector('{ts_config}', coalesce(NEW.title, '') || ' ' || NEW.content || ' ' ||
                            array_to_string(NEW.tags, ' ') || ' ' || coalesce(NEW.keys, '')) END;
            RETURN NEW;
        END $$"""


def _fts_trigger(ts_config: str, verb: str) -> list[str]:
    """The tsvector's function and trigger."""
    return [
        _fts_function(ts_config, verb),
        "CREATE TRIGGER memories_fts BEFORE INSERT OR UPDATE OF title, content, tags, keys ON memories "
        "FOR EACH ROW EXECUTE FUNCTION memories_fts_refresh()",
    ]


# the revisions go, if the store had them (the column's index and sequence go with it)
_NO_REVISIONS = [
    "DROP TRIGGER IF EXISTS memories_rev ON memories",
    "DROP FUNCTION IF EXISTS memories_rev_next()",
    "ALTER TABLE memories DROP COLUMN IF EXISTS rev",
]
# what a process once held of a scope was kept in step by a change feed (each row's writing transaction,
# triggers, the ids that left a scope); servers hold no rows now, and it goes, if the store had it
_NO_CHANGE_FEED = [
    "DROP TRIGGER IF EXISTS memories_written ON memories",
    "DROP TRIGGER IF EXISTS memories_deleted ON memories",
    "DROP TRIGGER IF EXISTS memories_moved ON memories",
    "DROP TRIGGER IF EXISTS memories_truncated ON memories",
    "DROP FUNCTION IF EXISTS memories_written()",
    "DROP FUNCTION IF EXISTS memories_departed()",
    "DROP FUNCTION IF EXISTS memories_truncated()",
    "DROP TABLE IF EXISTS memory_departures",
    "ALTER TABLE memories DROP COLUMN IF EXISTS wxid",  # its index goes with it
    "DELETE FROM meta WHERE key = 'departures_pruned'",
]


def _core_after_tables(ts_config: str) -> list[str]:
    """What installing the core set makes after its tables: the tsvector's trigger and the text indexes."""
    return [*_fts_trigger(ts_config, "CREATE"), *_TEXT_INDEXES]


def _hnsw_index(dims: int | str, cfg: PostgresConfig) -> str:
    """The vector index over vectors of `dims` dimensions (a migration's placeholder, filled when it runs)."""
    return (f"CREATE INDEX IF NOT EXISTS idx_memories_embedding ON memories USING hnsw ((embedding::halfvec({dims})) "
            f"halfvec_cosine_ops) WITH (m = {cfg.hnsw_m}, ef_construction = {cfg.hnsw_ef_construction})")


# A scope's vectors in scope order, read index-only by an exact search: a user's 6,000 rows of a 120k-row
# store sit on ~1,600 heap pages among other users' rows, and on ~750 pages of this index. It holds every
# column a search's filters test but the session and the source (up to 800 and 4,000 bytes), so a search
# that leaves out a session, or names message roles, reads the heap. A btree entry holds at most 2,704
# bytes: with ids of 200 four-byte characters, a vector of 384 dimensions still fits, and larger vectors
# get no such index. Like the HNSW index, it follows the stored vectors: made with it, dropped with it.
_SCOPE_VECTORS_DIMS = 384
_SCOPE_VECTORS = ("CREATE INDEX IF NOT EXISTS idx_memories_scope_vectors ON memories (scope, kind) INCLUDE "
                  "(id, deleted_at, expires_at, valid_from, valid_to, created_at, visibility, agent_id, embedding) "
                  "WHERE embedding IS NOT NULL")
_DROP_VECTOR_INDEXES = ["DROP INDEX IF EXISTS idx_memories_embedding", "DROP INDEX IF EXISTS idx_memories_scope_vectors"]


def pgvector_too_old(version: str) -> str | None:
    """Why a database whose pgvector is `version` (its `extversion`) cannot hold a store, or None."""
    if tuple(int(n) for n in re.findall(r"\d+", version)[:2]) >= PGVECTOR_NEEDED:
        return None
    needed = ".".join(map(str, PGVECTOR_NEEDED))
    return (f"pgvector {needed} or later is needed, the database has {version} (install the newer package, "
            "then ALTER EXTENSION vector UPDATE)")


def _steps(cfg: PostgresConfig, ts_config: str) -> dict[str, list[str]]:
    """The steps' SQL as they were written for databases made before each (see migrations.py)."""
    maintenance_work_mem = cfg.maintenance_work_mem
    return {
        "startup": [
            """CREATE TABLE startup (
                scope TEXT NOT NULL,
                key TEXT NOT NULL,
                content TEXT NOT NULL,
                priority INTEGER NOT NULL DEFAULT 2,
                reinforce BOOLEAN NOT NULL DEFAULT false,
                updated_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (scope, key)
            )""",
        ],
        "partial-indexes": PARTIAL_INDEXES,
        "text-index-scope": [
            f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'",
            *_TEXT_INDEXES,
            "DROP INDEX idx_memories_fts",
            "DROP INDEX idx_memories_trgm",
        ],
        # API tokens live in the database, so every server on it shares them
        "api-tokens": [api_tokens_table("TIMESTAMPTZ")],
        "record-kinds": RECORD_KINDS,
        "session-index-scope": SESSION_INDEX_SCOPE,
        "segment-summary": SEGMENT_SUMMARY,
        "list-indexes": LIST_INDEXES,
        "sealed-secrets": SEALED_SECRETS,
        "validity": validity("TIMESTAMPTZ", "UUID"),
        # every row's keys are NULL, so its tsvector is unchanged
        "fact-keys": [
            "ALTER TABLE memories ADD COLUMN keys TEXT",
            "DROP TRIGGER memories_fts ON memories",
            *_fts_trigger(ts_config, "CREATE OR REPLACE"),
        ],
        # the vectors in half precision: the table is rewritten, and the HNSW index (over the old type) made again
        "half-precision-vectors": [
            f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'",
            f"""DO $$
            DECLARE
                indexed boolean := to_regclass('idx_memories_embedding') IS NOT NULL;
                dims text := coalesce((SELECT value FROM meta WHERE key = 'vector_dims'),
                    (SELECT vector_dims(embedding)::text FROM memories WHERE embedding IS NOT NULL LIMIT 1));
            BEGIN
                DROP INDEX IF EXISTS idx_memories_embedding;
                ALTER TABLE memories ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec;
                IF dims IS NOT NULL THEN  -- what the vector leg reads the dimensions from
                    INSERT INTO meta (key, value) VALUES ('vector_dims', dims) ON CONFLICT (key) DO NOTHING;
                END IF;
                IF indexed AND dims IS NOT NULL THEN
                    EXECUTE replace('{_hnsw_index("DIMS", cfg)}', 'DIMS', dims::int::text);
                END IF;
            END $$""",
        ],
        "change-feed": _NO_REVISIONS,  # and the feed it made, which no-change-feed drops again
        # an SQL search of every user's rows, past the scope check, shaped after another system's API
        "drop-sql-api": [
            "DROP FUNCTION IF EXISTS search_memories(vector, text, text, integer, real)",
            "DROP VIEW IF EXISTS conversation_stats",
        ],
        "message-windows": [
            "ALTER TABLE memories DROP CONSTRAINT memories_kind_check",
            f"ALTER TABLE memories ADD CONSTRAINT memories_kind_check CHECK ({KIND_CHECK})",
            *MESSAGE_WINDOWS,
        ],
        "no-change-feed": _NO_CHANGE_FEED,
        "half-precision-staging": ["ALTER TABLE staged_vectors ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec"],
        # a store with its HNSW index gets the scope-ordered vectors beside it (a store without one, when it is built)
        "window-text": [_fts_function(ts_config, "CREATE OR REPLACE"), "UPDATE memories SET fts = NULL WHERE kind = 'window'"],
        "scope-vectors": [
            f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'",
            f"""DO $$
            BEGIN
                IF to_regclass('idx_memories_embedding') IS NOT NULL
                   AND (SELECT value::int FROM meta WHERE key = 'vector_dims') <= {_SCOPE_VECTORS_DIMS} THEN
                    EXECUTE '{_SCOPE_VECTORS}';
                END IF;
            END $$""",
        ],
    }


_RECONNECT_MAX_DELAY = 2.0


@functools.cache
def _pool_class() -> type:
    """psycopg_pool's pool, retrying a lost server every 2 s at most: on its own it doubles the delay
    without bound (1, 2, 4, 8, 16 s…), so after a 13 s outage it could stay idle 16 s more."""
    from psycopg_pool import ConnectionPool

    try:  # psycopg_pool's own (private) pieces: without them, its plain backoff
        from psycopg_pool.base import AttemptWithBackoff
    except ImportError:
        return ConnectionPool
    if not hasattr(ConnectionPool, "_add_connection"):
        return ConnectionPool

    class _Attempt(AttemptWithBackoff):
        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, _RECONNECT_MAX_DELAY)

    class _Pool(ConnectionPool):
        def _add_connection(self, attempt: Any, growing: bool = False) -> None:
            super()._add_connection(attempt or _Attempt(timeout=self.reconnect_timeout), growing)

    return _Pool


HISTORY_CHANNEL = "clawrecall_history"  # NOTIFY'd by each commit that wrote history rows
_HISTORY_LOCK = 0x636C6177_68697374  # the advisory lock that keeps history ids in commit order ("clawhist")


class PostgresStore(Store):
    backend = "postgres"
    dialect = PostgresDialect()
    legacy_versions = _LEGACY

    def __init__(
        self, url: str, *, config: PostgresConfig | None = None, migrate: bool = True,
        text_search_config: str | None = None, pool_size: int | None = None,
    ):
        """`config` is the `postgres` config block; `text_search_config` and `pool_size` override it."""
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise ConfigError('the postgres backend needs psycopg: pip install "clawrecall[postgres]" '
                              "(from a checkout: ./scripts/install.sh --postgres)") from None
        from ..config import PostgresConfig

        cfg = config or PostgresConfig()
        overrides = {"text_search_config": text_search_config, "pool_size": pool_size}
        cfg = cfg.model_copy(update={k: v for k, v in overrides.items() if v is not None})
        if not _TS_CONFIG.match(cfg.text_search_config):
            raise ConfigError(f"invalid text search configuration {cfg.text_search_config!r}")
        super().__init__()
        self._psycopg = psycopg
        self._rows_status = psycopg.pq.ExecStatus.TUPLES_OK  # a statement's result has rows (`run`)
        self.config = cfg
        self.ts_config = cfg.text_search_config
        self.location = redacted_url(url)
        self._url = url  # for the one connection of its own a change feed listens on (`watch_history`)
        self._local = threading.local()
        self._dims: int | None = None
        self._indexed = False  # the HNSW index is known to exist (another process may drop it: reembed)
        self._deferring = 0  # deferred_vector_index() blocks open in this process
        self._plans: dict[tuple, tuple[float, float]] = {}  # `_estimates`: statement -> (when asked, rows)
        self._workers: ThreadPoolExecutor | None = None  # `beside`, started on first use
        self._workers_lock = threading.Lock()
        self._closed = False
        try:
            with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:  # fail fast, with the server's own reason
                self._prepare_database(conn)
            self._pool = _pool_class()(
                url, min_size=1, max_size=cfg.pool_size, kwargs={"autocommit": True},
                configure=self._configure, check=ConnectionPool.check_connection, open=True, timeout=cfg.pool_timeout_s,
            )
            version = self.run("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            if version and (old := pgvector_too_old(version[0][0])) is not None:
                self._pool.close()
                raise StorageError(f"cannot open PostgreSQL database {self.location}: {old}")
            if migrate:
                self.migrate()
        except psycopg.Error as exc:
            raise StorageError(f"cannot open PostgreSQL database {self.location}: {_first_line(exc)}") from None
        except Exception as exc:  # pool timeout and friends
            if isinstance(exc, (StorageError, ConfigError)):
                raise
            raise StorageError(f"cannot open PostgreSQL database {self.location}: {_first_line(exc)}") from None

    def _prepare_database(self, conn: Any) -> None:
        """Once, before the pool: pgvector in the database (created on a fresh one, by a role that may), and
        the text search configuration known to it. The pool's connections only register the vector type: a
        check failing there would be retried until the pool's timeout."""
        errors = self._psycopg.errors
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except errors.UniqueViolation:
                pass  # another process created it a moment ago
            except errors.InsufficientPrivilege:
                raise StorageError(
                    f"cannot open PostgreSQL database {self.location}: pgvector is not installed in it and this role "
                    "may not install it: have a superuser run CREATE EXTENSION vector; CREATE EXTENSION pg_trgm"
                ) from None
        if conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s AND pg_ts_config_is_visible(oid)",
                        (self.ts_config,)).fetchone() is None:
            raise ConfigError(f"postgres.text_search_config: PostgreSQL has no text search configuration "
                              f"{self.ts_config!r} (SELECT cfgname FROM pg_ts_config lists those it has)")

    @staticmethod
    def _configure(conn: Any) -> None:
        """Teach each new connection the vector type."""
        from pgvector.psycopg import register_vector

        register_vector(conn)

    # -- connection ------------------------------------------------------------------------
    def close(self) -> None:
        with self._workers_lock:
            self._closed = True
            if self._workers is not None:
                self._workers.shutdown()
        self._pool.close()

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._psycopg.OperationalError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> StorageError:
        """A deadlock or a serialization failure rolled the transaction back; the other errors psycopg calls
        operational are the connection's."""
        rolled_back = (getattr(exc, "sqlstate", None) or "").startswith("40")  # class 40: transaction rollback
        return StorageError(f"PostgreSQL {'rolled the transaction back' if rolled_back else 'connection failed'}: "
                            f"{_first_line(exc)}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "in_transaction", False):
            yield
            return
        with self._connection() as conn:  # the pinned one, if any
            pinned = getattr(self._local, "conn", None)
            try:
                with conn.transaction():
                    self._local.conn, self._local.in_transaction = conn, True
                    try:
                        yield
                    finally:
                        self._local.conn, self._local.in_transaction = pinned, False
            except self._psycopg.OperationalError as exc:
                raise self._failed(exc) from None

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """One pool checkout (and its liveness check) for a whole search instead of one per statement:
        a search runs 4 statements or more."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._connection() as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def beside(self, fn: Callable[[], T], filters: Filters, *, slow: bool = False) -> Future[T]:
        """`fn` on a pooled connection of its own, in a worker thread. The caller must not hold a
        connection while it waits for the value (a full pool would then wait on itself): a search
        starts its keyword legs here, embeds its query and runs its vector leg, then waits."""
        with self._workers_lock:
            if not self._closed and getattr(self._local, "conn", None) is None:
                if self._workers is None:
                    self._workers = ThreadPoolExecutor(max(1, self.config.pool_size // 2), thread_name_prefix="clawrecall-pg")
                return self._workers.submit(self._pinned_call, fn)
        return super().beside(fn, filters)  # closed: fails as any call on a closed store does

    def _pinned_call(self, fn: Callable[[], T]) -> T:
        with self.pinned():
            return fn()

    def run(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple]:
        """`binary`: results in PostgreSQL's binary format (vectors: 0.5 ms for 20 where text took 2.7)."""
        with self._connection() as conn:
            try:
                cur = conn.execute(sql, params, binary=binary)
            except self._psycopg.OperationalError as exc:
                raise self._failed(exc) from None
            # (not `cur.description`, which builds a Column for each field: 28 µs for a record's 27)
            res = cur.pgresult
            return cur.fetchall() if res is not None and res.status == self._rows_status and res.nfields else []

    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._connection() as conn:
            conn.cursor().executemany(sql, rows)

    def rowcount(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._connection() as conn:
            return conn.execute(sql, params).rowcount

    def lock_schema(self) -> None:
        self.run("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    def migration_steps(self) -> dict[str, list[str]]:
        return _steps(self.config, self.ts_config)

    def migration_extras(self, migration_set: str) -> tuple[list[str], list[str]]:
        if migration_set != CORE.name:
            return [], []
        return _EXTENSIONS, _core_after_tables(self.ts_config)

    @contextmanager
    def snapshot(self) -> Iterator[Callable[[str], Iterator[tuple]]]:
        """A REPEATABLE READ, READ ONLY transaction: every statement in it sees the same snapshot; rows are
        streamed by a server-side cursor."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

            names = itertools.count()

            def read(sql: str) -> Iterator[tuple]:
                with conn.cursor(name=f"clawrecall_snapshot_{next(names)}") as cur:
                    cur.itersize = 500
                    cur.execute(sql)
                    yield from cur

            yield read

    def table_exists(self, name: str) -> bool:
        # A plain query on pg_class sees what committed before this statement; to_regclass() may
        # answer from a catalog snapshot older than the migration lock we just waited for.
        return self.run(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relname = %s AND n.nspname = ANY (current_schemas(false)))",
            (name,),
        )[0][0]

    def integrity_problems(self) -> list[str]:
        """Cheap sanity checks (the server guards its own pages): the extensions every search needs,
        and no index of `memories` left invalid by a failed build."""
        present = {r[0] for r in self.run("SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')")}
        problems = [f"extension {name} is missing" for name in ("vector", "pg_trgm") if name not in present]
        invalid = self.run(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memories'::regclass AND NOT (i.indisvalid AND i.indisready) ORDER BY c.relname"
        )
        problems += [f"index {name} is invalid (REINDEX INDEX {name} rebuilds it)" for (name,) in invalid]
        return problems

    def copy_in(self, table: Table, fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Binary COPY: no INSERT per row, and no vector printed as 384 decimal floats (3x faster than text COPY)."""
        types = [self.dialect.copy_types[table.column(c).type] for c in fields]
        with self.transaction(), self._connection() as conn:
            with conn.cursor().copy(f"COPY {table.name} ({', '.join(fields)}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(types)
                for row in rows:
                    copy.write_row(row)

    def before_insert(self) -> None:
        if self._may_change_schema():
            # Before any row lock: two first writers, each holding its new rows and waiting for
            # the other's schema lock to create the index, would deadlock.
            self.lock_schema()

    def before_history(self) -> None:
        """The change feed reads history by id from a cursor, so ids must become visible in the order they are
        given: the transaction takes a lock before its ids and keeps it until its commit (a writer that took id
        11 cannot commit before the one holding 10; writers of history commit one after another)."""
        self.run("SELECT pg_advisory_xact_lock(%s)", (_HISTORY_LOCK,))

    def after_history(self) -> None:
        self.run(f"NOTIFY {HISTORY_CHANNEL}")  # sent at COMMIT, to every server listening (`watch_history`)

    def watch_history(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]:
        """LISTEN on a connection of its own (not the pool's): each commit that wrote history, in any process,
        wakes it. A lost connection is opened again after `poll_s`, with a wake for what committed meanwhile."""
        stop = threading.Event()
        psycopg = self._psycopg

        def listen() -> None:
            while not stop.is_set():
                try:
                    with psycopg.connect(self._url, autocommit=True, connect_timeout=10) as conn:
                        conn.execute(f"LISTEN {HISTORY_CHANNEL}")
                        wake()
                        while not stop.is_set():
                            for _ in conn.notifies(timeout=poll_s, stop_after=1):
                                wake()
                except psycopg.Error as exc:
                    log.warning("the change feed lost its PostgreSQL connection (%s); listening again in %.1f s",
                                _first_line(exc), poll_s)
                    stop.wait(poll_s)

        thread = threading.Thread(target=listen, daemon=True, name="clawrecall-history-listen")
        thread.start()

        def cancel() -> None:
            stop.set()
            if thread is not threading.current_thread():
                thread.join()

        return cancel

    def after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        self._ensure_vector_index()

    def after_vectors(self) -> None:
        if self._may_change_schema():  # a store's first vectors may come from the backfill
            with self.transaction():  # its own, after the vectors' commit: an index built holding their rows could deadlock
                self._ensure_vector_index()

    def size_bytes(self) -> int | None:
        return self.run("SELECT pg_total_relation_size('memories')")[0][0]

    def is_conflict(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) == "23505"  # unique_violation

    # -- the vector index ------------------------------------------------------------------------
    def _vector_dims(self, expected: int | None = None) -> int | None:
        """The stored vectors' dimensions; re-read when a query's differ (another process re-embedded)."""
        if self._dims is None or (expected is not None and expected != self._dims):
            raw = self.get_meta("vector_dims")
            self._dims = int(raw) if raw else None
        return self._dims


    def _may_change_schema(self) -> bool:
        """Whether an insert may record the vector dimensions or create the HNSW index."""
        return self._vector_dims() is None or not (self._indexed or self._deferring)

    def _ensure_vector_index(self) -> None:
        """Record the dimensions when the first vectors arrive, and create the HNSW index unless deferred."""
        if self._vector_dims() is None:
            rows = self.run("SELECT vector_dims(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1")
            if not rows:
                return
            self.lock_schema()
            self.set_meta("vector_dims", str(rows[0][0]))
            self._dims = rows[0][0]
        if self._indexed or self._deferring:
            return
        if self.table_exists("idx_memories_embedding"):
            self._indexed = True
        elif self.get_meta(_INDEX_DEFERRED) is None:  # else another process's bulk load builds it when done
            self._create_vector_index()

    def _create_vector_index(self) -> None:
        dims = self._vector_dims()
        if dims is None:
            return
        self.lock_schema()
        self.run(f"SET LOCAL maintenance_work_mem = '{self.config.maintenance_work_mem}'")
        self.run(_hnsw_index(dims, self.config))
        if dims <= _SCOPE_VECTORS_DIMS:
            self.run(_SCOPE_VECTORS)
        self._indexed = True

    def lock_writes(self) -> None:
        """The schema lock first, as an insert that may create the index takes it before its rows."""
        self.lock_schema()
        self.run("LOCK TABLE memories IN EXCLUSIVE MODE")

    def swap_staged_vectors(self, target: str, model: str) -> int:
        """The vector indexes go first (built over the old dimensions, and rebuilding them beats updating
        them row by row); `build_vector_index` makes them again after COMMIT."""
        for sql in _DROP_VECTOR_INDEXES:
            self.run(sql)
        changed = super().swap_staged_vectors(target, model)
        rows = self.run("SELECT vector_dims(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1")
        if rows:
            self.set_meta("vector_dims", str(rows[0][0]))
        self._dims = None
        self._indexed = False
        return changed

    def has_vector_index(self) -> bool:
        return self.run("SELECT to_regclass('idx_memories_embedding') IS NOT NULL")[0][0]

    def drop_vector_index(self) -> None:
        with self.transaction():
            self.lock_schema()
            for sql in _DROP_VECTOR_INDEXES:
                self.run(sql)
            self.run("DELETE FROM meta WHERE key = 'vector_dims'")
        self._dims = None
        self._indexed = False

    def build_vector_index(self) -> None:
        """Create the index now (after `reembed`, or after a deferred bulk load), with `maintenance_work_mem`.

        A plain CREATE INDEX also reads the old versions of rows that a transaction begun earlier may still
        see. After a `reembed` to other dimensions their casts fail: the build waits for such transactions
        to end (up to `_INDEX_WAIT_S`) and tries again. Current rows of other dimensions fail it at once."""
        deadline = _monotonic() + _INDEX_WAIT_S
        while True:
            try:
                with self.transaction():
                    self.lock_schema()
                    self.run("DELETE FROM meta WHERE key = %s", (_INDEX_DEFERRED,))
                    self._indexed = False  # whatever this process believed: another one may have dropped it
                    self._ensure_vector_index()
                    if not self._indexed:  # a deferral still open in this process: build it all the same
                        self._create_vector_index()
                return
            except self._psycopg.errors.DataException:
                self._dims = None
                dims = self._vector_dims()
                current = dims is not None and self.run(
                    "SELECT EXISTS (SELECT 1 FROM memories WHERE embedding IS NOT NULL AND vector_dims(embedding) <> %s)",
                    (dims,))[0][0]
                if current or _monotonic() > deadline:
                    raise
                time.sleep(0.25)

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        """Insert without maintaining the HNSW index, and build it once at the end: for bulk loads.

        A missing index is created at the end, not at the first insert; with `rebuild`, an existing
        one is dropped first (worth it when the load is large next to what is stored). Searches
        meanwhile read exactly (correct, slower on large stores), in every process. If the block
        raises, the index is still built, unless the process is being interrupted: then
        `build_vector_index()` (`clawrecall index build`) finishes the job.
        """
        with self.transaction():
            self.lock_schema()
            self.set_meta(_INDEX_DEFERRED, "1")
            if rebuild:
                for sql in _DROP_VECTOR_INDEXES:
                    self.run(sql)
        self._indexed = False
        self._deferring += 1
        try:
            yield
        except Exception:
            self._deferring -= 1
            self._after_bulk_load()
            raise
        except BaseException:
            self._deferring -= 1
            raise
        else:
            self._deferring -= 1
            self._after_bulk_load()

    def _after_bulk_load(self) -> None:
        """Build the index, and give the planner statistics of the new rows (its scope estimates
        decide between an exact read and HNSW) before autovacuum would."""
        self.build_vector_index()
        self.run("ANALYZE memories")
        self._plans.clear()

    # -- candidate legs ----------------------------------------------------------------------------
    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        these, params = self.dialect.one_of("id", ids, "uuid")
        rows = self.run(f"SELECT id, embedding FROM memories WHERE {these} AND embedding IS NOT NULL", params, binary=True)
        from_vector = self.dialect.from_db["vector"]
        return {str(r[0]): from_vector(r[1]) for r in rows}

    def _vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        return self._vector_search([query], filters, k)[0]

    def nearest(self, vectors: np.ndarray, scope: str, min_score: float) -> list[Candidate | None]:
        """Batch deduplication: one pooled connection and one exact-or-HNSW decision for every vector."""
        found = self._vector_search(list(vectors), Filters(scopes=[scope]), 1)
        return [hits[0] if hits and hits[0].score >= min_score else None for hits in found]

    def _vector_search(self, queries: list[np.ndarray], filters: Filters, k: int) -> list[list[Candidate]]:
        if not queries:
            return []
        dims = self._vector_dims(expected=len(queries[0]))
        if dims is None:
            return [[] for _ in queries]
        if dims != len(queries[0]):
            raise dimensions_differ(dims, len(queries[0]))
        candidates, params = self._vector_sql(dims, filters)
        try:
            with self.pinned():  # the plan question and the queries: one pool checkout
                return self._vector_query(candidates, params, queries, filters, k)
        except self._psycopg.errors.DataException as exc:  # rows of other dimensions: another process re-embedded
            self._dims = None
            if (now := self._vector_dims()) is not None and now != len(queries[0]):
                raise dimensions_differ(now, len(queries[0])) from None
            raise StorageError(f"vector search failed: {_first_line(exc)} (`clawrecall doctor` checks the vectors)") from None

    def _vector_sql(self, dims: int, filters: Filters) -> tuple[str, list[Any]]:
        """Every allowed row with its cosine distance `d` to the query (the first parameter)."""
        where, params = self.where(filters, "m")
        # the indexed expression (`_hnsw_index`): the column holds vectors of any dimensions, an index one
        return (f"SELECT m.id, (embedding::halfvec({dims})) <=> %s::halfvec({dims}) AS d FROM memories m "
                f"WHERE m.embedding IS NOT NULL AND {where}"), params

    def reads_exactly(self, filters: Filters) -> bool:
        """Whether a vector search with these filters compares every allowed row (else: HNSW)."""
        dims = self._vector_dims()
        return dims is None or self._few_rows(*self._vector_sql(dims, filters))

    def _vector_query(
        self, candidates: str, params: list[Any], queries: list[np.ndarray], filters: Filters, k: int
    ) -> list[list[Candidate]]:
        vector = self.dialect.to_db["vector"]
        if self._few_rows(candidates, params):
            # OFFSET 0 keeps the subquery whole, so `ORDER BY d` cannot become an HNSW scan:
            # every filtered row is compared, and the top k are exact
            sql = f"SELECT id, d FROM ({candidates} OFFSET 0) s ORDER BY d LIMIT %s"
            return [self._hits(self.run(sql, (vector(q), *params, k))) for q in queries]
        with self.transaction():
            # ef_search covers the pool we want; iterative scans so filters never starve the list. For this
            # transaction only: a pooler in transaction mode hands each transaction any server connection.
            # Both in one round trip (a statement without parameters may hold several)
            self.run(f"SET LOCAL hnsw.ef_search = {max(self.config.hnsw_ef_search, min(k, 1000))}; "
                     "SET LOCAL hnsw.iterative_scan = relaxed_order")
            sql = f"{candidates} ORDER BY d LIMIT %s"
            return [self._hits(self.run(sql, (vector(q), *params, k))) for q in queries]

    @staticmethod
    def _hits(rows: list[tuple]) -> list[Candidate]:
        return [Candidate(str(r[0]), 1.0 - float(r[1])) for r in sorted(rows, key=lambda r: float(r[1]))]

    def _few_rows(self, candidates: str, params: list[Any]) -> bool:
        """Whether the planner expects at most `exact_search_rows` rows to pass the filters."""
        limit = self.config.exact_search_rows
        return limit > 0 and self._estimates([(candidates, [None, *params])])[0] <= limit

    def _estimates(self, statements: list[tuple[str, list[Any]]]) -> list[float]:
        """The rows the planner expects of each statement (asked together: each a subquery of one statement,
        planned on its own, so a parallel plan's Gather tops each and counts all its rows, and one round trip
        asks them all). Each answer is kept a minute (its times to the minute, `_plan_key`): a scope grows
        by a few rows a minute, and the question costs a round trip and a plan, which searches of the same
        filter, or of the same words under it, then spare."""
        now = _monotonic()
        keys = [(sql, tuple(_plan_key(p) for p in params)) for sql, params in statements]
        known = {k: v[1] for k in keys if (v := self._plans.get(k)) is not None and now - v[0] < _PLAN_TTL_S}
        ask = [(key, statement) for key, statement in dict(zip(keys, statements)).items() if key not in known]
        if ask:
            # (not one UNION ALL: a parallel plan would put one Gather over them all, each estimate a worker's share)
            plan = self.run("EXPLAIN (FORMAT JSON) SELECT " + ", ".join(f"(SELECT 1 FROM ({sql}) s)" for _, (sql, _) in ask),
                            [p for _, (_, params) in ask for p in params])[0][0]
            rows = [p["Plan Rows"] for p in (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plans"]]
            if len(self._plans) + len(ask) > _PLANS_KEPT:
                self._plans = {k: v for k, v in list(self._plans.items()) if now - v[0] < _PLAN_TTL_S}
                if len(self._plans) + len(ask) > _PLANS_KEPT:
                    self._plans.clear()
            for (key, _), n in zip(ask, rows):
                self._plans[key] = (now, n)
                known[key] = n
        return [known[k] for k in keys]

    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        """Matches of any keyword, ranked BM25-like: each keyword's `ts_rank` (term frequency, length
        normalised) weighted by its inverse document frequency among the ranked rows, so a rare word
        counts for more than one that most of them share (plain `ts_rank` weighs them alike).

        Up to `_RANKED` matches (by the planner's estimate) are all ranked. Beyond, ranking every
        match of a common word would read them all (27,000 rows of one user's 120,000: 60 ms), so the
        ranked rows are those that match a rarer word (`_ranked`), and the first k of the others in table
        order (from the table's first pages when they hold k: `_FRONT_PAGES`, or `_FRONT_PAGES_MOST` when the
        searched scopes hold most of the table).

        The scopes are in the text index beside the words, so a search of a few scopes intersects posting
        lists. When the planner expects the searched scopes to hold most of the table, that intersection narrows
        nothing and costs (each match of a word sought in the posting list of every row: one user holding
        all 120,000 rows, 9.0 against 7.5 ms of PostgreSQL's CPU per statement): the statement then leaves
        the scopes to the filter on `m.scope`, which is exact either way, and finds the same rows. The
        estimates of the words' matches ask with the scopes in the index as before, so the bound's decisions
        stay the same."""
        terms = keywords(query)
        if not terms:
            return []
        indexed, indexed_params = self._scoped_where(filters, "ARRAY[m.scope]", "")
        where, params = self.where(filters, "m")
        cfg = self.ts_config
        one = f"SELECT 1 FROM memories m WHERE m.fts @@ to_tsquery('{cfg}', %s) AND {indexed}"
        each = ", ".join(f"to_tsquery('{cfg}', %s) AS t{i}" for i in range(len(terms)))
        score = " + ".join(
            f"ts_rank(h.fts, q.t{i}, 1) * ln(1 + count(*) OVER () / "
            f"greatest(count(*) FILTER (WHERE h.fts @@ q.t{i}) OVER (), 1)::float8)"
            for i in range(len(terms))
        )
        with self.pinned():
            # each word's matches under the filters, and the scopes' rows and the table's: one question, each
            # answer kept a minute
            asked = [(one, [t, *indexed_params]) for t in terms]
            if filters.scopes:
                asked += [(_SCOPES_ROWS, [list(filters.scopes)]), (_TABLE_ROWS, [])]
            estimates = self._estimates(asked)
            filling = not filters.scopes or estimates[-2] * 2 > estimates[-1]  # the searched scopes hold most of the table
            if not filling:
                where, params = indexed, indexed_params
            ranked, most = _ranked(terms, estimates[: len(terms)])

            def rows_of(match: str, limit: str = "%s") -> str:
                return f"SELECT m.id, m.seq, m.fts FROM memories m, q WHERE {match} AND {where} LIMIT {limit}"

            others, front = "m.fts @@ q.other AND NOT m.fts @@ q.ranked", f"'({_FRONT_PAGES_MOST if filling else _FRONT_PAGES},0)'::tid"
            # when pruned, also k rows of the other matches, the first in table order: the leg still fills its k
            # when the rarer words have fewer rows (else the pipeline would run the trigram leg over the whole
            # scope). Read from the table's first pages when they hold k (a scope that fills the table), and
            # only then from the text index past them, whose answer for the common words is most of the scope
            # (10,000–54,000 rows of one user's 120,000); the index yields its rows in table order too, so
            # the rows are the same either way. A scope that holds most of the table has most of any page's
            # rows: 512 pages (~3,000 rows) hold k for most questions, where 24 held it for few (one user's
            # 120,000 rows: 11.9 against 8.0 ms of PostgreSQL's CPU per statement, the same rows)
            rows = self.run(
                f"WITH q AS (SELECT to_tsquery('{cfg}', %s) AS ranked, to_tsquery('{cfg}', %s) AS other, {each}), "
                f"front AS ({rows_of(f'm.ctid < {front} AND {others}')}) "
                f"SELECT id, s FROM (SELECT h.id, h.seq, {score} AS s FROM q, (({rows_of('m.fts @@ q.ranked')}) "
                f"UNION ALL TABLE front UNION ALL ({rows_of(f'm.ctid >= {front} AND {others}', '%s - (SELECT count(*) FROM front)')})) h) r "
                "ORDER BY s DESC, seq LIMIT %s",
                (ranked, " | ".join(terms), *terms, *params, 0 if most is None else k, *params, most, *params,
                 0 if most is None else k, k),
            )
        return [Candidate(str(r[0]), float(r[1])) for r in rows]

    def _scoped_where(self, filters: Filters, indexed: str, prefix: str) -> tuple[str, list[Any]]:
        """The filters, plus the scopes in the form a text index holds them (see migration 5)."""
        where, params = self.where(filters, "m")
        if filters.scopes:
            where += f" AND {indexed} && %s::text[]"
            params.append([prefix + s for s in filters.scopes])
        return where, params

    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        text = " ".join(keywords(query))
        hits: list[Candidate] = []
        if len(text) >= 3:
            where, params = self._scoped_where(filters, "ARRAY['trgm:' || m.scope]", "trgm:")
            with self.transaction():
                self.run("SET LOCAL pg_trgm.word_similarity_threshold = 0.3")
                rows = self.run(
                    f"SELECT m.id, word_similarity(%s, m.content) AS s FROM memories m "
                    f"WHERE %s <%% m.content AND {where} ORDER BY s DESC, m.seq LIMIT %s",
                    (text, text, *params, k),
                )
            hits = [Candidate(str(r[0]), float(r[1])) for r in rows]
        return self._with_short_cjk_words(query, hits, filters, k)


def _ranked(terms: list[str], rows: list[float]) -> tuple[str, int | None]:
    """Which matches the keyword leg ranks: a tsquery and at most how many rows (None: all).

    `rows` are the planner's estimates of each word's matches under the filters (`_estimates`). When they
    add up to `_RANKED` or fewer, every match is ranked. Otherwise the words are taken rarest first while
    their matches stay within `_RANKED`, and the rows ranked are those that have one of these rarer words;
    a row that has only common words is not ranked. With no rarer word, the rows that have two of the
    common words are ranked (a query of one word: that word's). The rows ranked still get every word's
    score, and at most `_RANKED` of them are read, in the order the index yields them (table order)
    when the planner's estimate fell short."""
    if sum(rows) <= _RANKED:
        return " | ".join(terms), None
    rare, common, total = [], [], 0.0
    for n, term in sorted(zip(rows, terms)):
        if total + n <= _RANKED:
            rare.append(term)
            total += n
        else:
            common.append(term)
    if rare:
        return " | ".join(rare), _RANKED
    pairs = [f"({a} & {b})" for i, a in enumerate(common) for b in common[i + 1:]]
    return " | ".join(pairs) or common[0], _RANKED


def _plan_key(param: Any) -> Any:
    """A filter parameter as `_few_rows` keys its answer: a time to the minute (the current time is a
    parameter of every search; a `since`, `until` or `as_of` changes the rows by more than a minute's
    worth only when it moves by more), a list as a tuple."""
    if isinstance(param, datetime):
        return int(param.timestamp() // 60)
    return tuple(param) if isinstance(param, list) else param


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
