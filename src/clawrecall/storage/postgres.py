"""The PostgreSQL backend: pgvector HNSW for the vector leg, a tsvector for the text leg,
pg_trgm for the fuzzy leg; everything else is the shared SQL of `sql.py`.

Connections come from a psycopg pool that checks each connection before lending it, so a
server restart costs the in-flight call (a clear `StorageError`) and nothing after it.
Nothing is cached between calls except the vector dimensions, so several processes on one
database see each other's writes at once.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

import numpy as np

from ..errors import ConfigError, StorageError
from .base import Candidate, Filters
from ..models import MemoryRecord
from .sql import COLUMNS, SQLStore
from .text import keywords

_TS_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")
HALFVEC_ABOVE = 2000  # pgvector indexes `vector` up to 2,000 dims and `halfvec` up to 4,000
_MIGRATION_LOCK = 0x636C6177  # pg_advisory_xact_lock key: "claw"


def _migrations(ts_config: str) -> list[tuple[int, list[str]]]:
    return [
        (1, [
            "CREATE EXTENSION IF NOT EXISTS vector",
            "CREATE EXTENSION IF NOT EXISTS pg_trgm",
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE memories (
                seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
                id UUID PRIMARY KEY,
                content TEXT NOT NULL CHECK (length(content) > 0),
                title TEXT,
                category TEXT NOT NULL,
                tags TEXT[] NOT NULL DEFAULT '{}',
                importance REAL NOT NULL CHECK (importance >= 0 AND importance <= 1),
                confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
                scope TEXT NOT NULL,
                user_id TEXT,
                agent_id TEXT,
                session_id TEXT,
                visibility TEXT NOT NULL DEFAULT 'shared' CHECK (visibility IN ('private', 'shared', 'secret')),
                source_type TEXT,
                source_id TEXT,
                metadata JSONB NOT NULL DEFAULT '{}',
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL,
                deleted_at TIMESTAMPTZ,
                expires_at TIMESTAMPTZ,
                embedding_model TEXT,
                embedding vector,
                fts tsvector
            )""",
            f"""CREATE FUNCTION memories_fts_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.fts := to_tsvector('{ts_config}', coalesce(NEW.title, '') || ' ' || NEW.content || ' ' ||
                                       array_to_string(NEW.tags, ' '));
                RETURN NEW;
            END $$""",
            "CREATE TRIGGER memories_fts BEFORE INSERT OR UPDATE OF title, content, tags ON memories "
            "FOR EACH ROW EXECUTE FUNCTION memories_fts_refresh()",
            "CREATE INDEX idx_memories_scope ON memories (scope, created_at)",
            "CREATE INDEX idx_memories_category ON memories (category)",
            "CREATE INDEX idx_memories_created_at ON memories (created_at)",
            "CREATE INDEX idx_memories_deleted_at ON memories (deleted_at)",
            "CREATE INDEX idx_memories_user_id ON memories (user_id)",
            "CREATE INDEX idx_memories_session_id ON memories (session_id)",
            "CREATE INDEX idx_memories_fts ON memories USING gin (fts)",
            "CREATE INDEX idx_memories_trgm ON memories USING gin (content gin_trgm_ops)",
            """CREATE TABLE history (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                memory_id UUID NOT NULL,
                action TEXT NOT NULL,
                before JSONB,
                after JSONB,
                actor TEXT,
                at TIMESTAMPTZ NOT NULL
            )""",
            "CREATE INDEX idx_history_memory ON history (memory_id, id)",
            # Seed 000's SQL-level API, for users who query the database directly.
            """CREATE FUNCTION search_memories(
                query_embedding vector,
                p_user_id TEXT DEFAULT NULL,
                p_memory_type TEXT DEFAULT NULL,
                p_limit INTEGER DEFAULT 10,
                p_threshold REAL DEFAULT 0.3
            ) RETURNS TABLE (id UUID, content TEXT, memory_type TEXT, importance REAL, confidence REAL,
                             metadata JSONB, created_at TIMESTAMPTZ, similarity REAL)
            LANGUAGE sql STABLE AS $$
                SELECT m.id, m.content, m.category, m.importance, m.confidence, m.metadata, m.created_at,
                       (1 - (m.embedding <=> query_embedding))::REAL
                FROM memories m
                WHERE m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
                  AND m.embedding IS NOT NULL
                  AND (p_user_id IS NULL OR m.user_id = p_user_id)
                  AND (p_memory_type IS NULL OR m.category = p_memory_type)
                  AND (1 - (m.embedding <=> query_embedding)) >= p_threshold
                ORDER BY m.embedding <=> query_embedding
                LIMIT p_limit
            $$""",
            # The conversation tables arrive with conversation tracking; until then they count 0.
            """CREATE VIEW conversation_stats AS SELECT
                (SELECT count(*) FROM memories WHERE deleted_at IS NULL) AS total_memories,
                0::bigint AS total_requests,
                0::bigint AS total_responses,
                0::bigint AS total_reasoning,
                0::bigint AS total_files,
                0::bigint AS total_chunks,
                (SELECT count(DISTINCT user_id) FROM memories) AS unique_users""",
        ]),
        (2, [
            """CREATE TABLE startup (
                scope TEXT NOT NULL,
                key TEXT NOT NULL,
                content TEXT NOT NULL,
                priority INTEGER NOT NULL DEFAULT 2,
                reinforce BOOLEAN NOT NULL DEFAULT false,
                updated_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (scope, key)
            )""",
        ]),
        (3, [
            "DROP INDEX idx_memories_deleted_at",
            "DROP INDEX idx_memories_session_id",
            "CREATE INDEX idx_memories_deleted ON memories (deleted_at) WHERE deleted_at IS NOT NULL",
            "CREATE INDEX idx_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL",
            "CREATE INDEX idx_memories_session ON memories (session_id, created_at) WHERE session_id IS NOT NULL",
        ]),
    ]


class PostgresStore(SQLStore):
    backend = "postgres"
    order_column = "seq"

    def __init__(self, url: str, *, text_search_config: str = "english", pool_size: int = 10, migrate: bool = True):
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise ConfigError('the postgres backend needs psycopg: pip install "clawrecall[postgres]"') from None
        if not _TS_CONFIG.match(text_search_config):
            raise ConfigError(f"invalid text search configuration {text_search_config!r}")
        self._psycopg = psycopg
        self.ts_config = text_search_config
        self.migrations = _migrations(text_search_config)
        self.location = _redact(url)
        self._local = threading.local()
        self._dims: int | None = None
        try:
            psycopg.connect(url, connect_timeout=10).close()  # fail fast, with the server's own reason
            self._pool = ConnectionPool(
                url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                configure=self._configure, check=ConnectionPool.check_connection, open=True, timeout=10,
            )
            if migrate:
                self.migrate()
        except psycopg.Error as exc:
            raise StorageError(f"cannot open PostgreSQL database {self.location}: {_first_line(exc)}") from None
        except Exception as exc:  # pool timeout and friends
            if isinstance(exc, (StorageError, ConfigError)):
                raise
            raise StorageError(f"cannot open PostgreSQL database {self.location}: {_first_line(exc)}") from None

    @staticmethod
    def _configure(conn: Any) -> None:
        """Teach each new connection the vector type (creating the extension on a fresh database)."""
        import psycopg
        from pgvector.psycopg import register_vector

        if conn.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'").fetchone() is None:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.errors.UniqueViolation:
                pass  # another connection created it a moment ago
        register_vector(conn)

    # -- connection ------------------------------------------------------------------------
    def close(self) -> None:
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
            raise StorageError(f"PostgreSQL connection failed: {_first_line(exc)}") from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._connection() as conn:
            try:
                with conn.transaction():
                    self._local.conn = conn
                    try:
                        yield
                    finally:
                        self._local.conn = None
            except self._psycopg.OperationalError as exc:
                raise StorageError(f"PostgreSQL connection failed: {_first_line(exc)}") from None

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._connection() as conn:
            try:
                cur = conn.execute(sql.replace("?", "%s"), params)
            except self._psycopg.OperationalError as exc:
                raise StorageError(f"PostgreSQL connection failed: {_first_line(exc)}") from None
            return cur.fetchall() if cur.description else []

    def _run_many(self, sql: str, rows: list[Sequence[Any]]) -> None:
        with self._connection() as conn:
            conn.cursor().executemany(sql.replace("?", "%s"), rows)

    def _rowcount(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._connection() as conn:
            return conn.execute(sql.replace("?", "%s"), params).rowcount

    def _lock_schema(self) -> None:
        self._run("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def _table_exists(self, name: str) -> bool:
        # A plain query on pg_class sees what committed before this statement; to_regclass() may
        # answer from a catalog snapshot older than the migration lock we just waited for.
        return self._run(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relname = ? AND n.nspname = ANY (current_schemas(false)))",
            (name,),
        )[0][0]

    # -- value adapters ----------------------------------------------------------------------
    def _from_ts(self, raw: Any) -> datetime | None:
        return None if raw is None else raw.astimezone(timezone.utc)

    def _json(self, value: Any) -> Any:
        from psycopg.types.json import Jsonb

        return Jsonb(value)

    def _tags(self, tags: list[str]) -> Any:
        return list(tags)

    def _from_tags(self, raw: Any) -> list[str]:
        return list(raw or [])

    def _tags_any(self, alias: str, tags: list[str]) -> tuple[str, list[Any]]:
        return f"{alias}.tags && ?::text[]", [list(tags)]

    def _vector(self, vector: np.ndarray) -> Any:
        return np.asarray(vector, dtype=np.float32)

    def _from_vector(self, raw: Any) -> np.ndarray | None:
        if raw is None:
            return None
        return np.asarray(raw.to_numpy() if hasattr(raw, "to_numpy") else raw, dtype=np.float32)

    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        """COPY the rows in: several times faster than INSERTs for bulk loads."""
        columns = ", ".join((*COLUMNS, "embedding"))
        with self.transaction(), self._connection() as conn:
            with conn.cursor().copy(f"COPY memories ({columns}) FROM STDIN") as copy:
                for i, record in enumerate(records):
                    copy.write_row((*self._record_row(record), None if vectors is None else self._vector(vectors[i])))
            self._after_insert()

    def _after_insert(self) -> None:
        self._ensure_vector_index()

    def _size_bytes(self) -> int | None:
        return self._run("SELECT pg_total_relation_size('memories')")[0][0]

    # -- the vector index ------------------------------------------------------------------------
    def _vector_dims(self) -> int | None:
        if self._dims is None:
            raw = self.get_meta("vector_dims")
            self._dims = int(raw) if raw else None
        return self._dims

    def _vector_expr(self, dims: int) -> tuple[str, str]:
        kind = "halfvec" if dims > HALFVEC_ABOVE else "vector"
        return f"(embedding::{kind}({dims}))", f"{kind}_cosine_ops"

    def _ensure_vector_index(self) -> None:
        """Create the HNSW index for the store's dimensions the first time vectors arrive."""
        if self._vector_dims() is not None:
            return
        rows = self._run("SELECT vector_dims(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1")
        if not rows:
            return
        dims = rows[0][0]
        expr, ops = self._vector_expr(dims)
        self._lock_schema()
        self._run(f"CREATE INDEX IF NOT EXISTS idx_memories_embedding ON memories USING hnsw ({expr} {ops}) "
                  "WITH (m = 16, ef_construction = 64)")
        self.set_meta("vector_dims", str(dims))
        self._dims = dims

    def drop_vector_index(self) -> None:
        with self.transaction():
            self._lock_schema()
            self._run("DROP INDEX IF EXISTS idx_memories_embedding")
            self._run("DELETE FROM meta WHERE key = 'vector_dims'")
        self._dims = None

    def build_vector_index(self) -> None:
        with self.transaction():
            self._ensure_vector_index()

    # -- candidate legs ----------------------------------------------------------------------------
    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        rows = self._run(f"SELECT id, embedding FROM memories WHERE id IN ({', '.join('?' * len(ids))}) "
                         "AND embedding IS NOT NULL", ids)
        return {str(r[0]): self._from_vector(r[1]) for r in rows}

    def vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        dims = self._vector_dims()
        if dims is None:
            return []
        expr, _ = self._vector_expr(dims)
        kind = "halfvec" if dims > HALFVEC_ABOVE else "vector"
        where, params = self.where(filters, "memories")
        q = self._vector(query)
        with self.transaction():
            # ef_search at least the pool we want, and iterative scans so filters never starve the list
            self._run(f"SET LOCAL hnsw.ef_search = {max(40, min(k, 1000))}")
            self._run("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = self._run(
                f"SELECT id, 1 - ({expr} <=> ?::{kind}({dims})) FROM memories "
                f"WHERE embedding IS NOT NULL AND {where} ORDER BY {expr} <=> ?::{kind}({dims}) LIMIT ?",
                (q, *params, q, k),
            )
        hits = sorted(((str(r[0]), float(r[1])) for r in rows), key=lambda h: -h[1])
        return [Candidate(i, s) for i, s in hits]

    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        terms = keywords(query)
        if not terms:
            return []
        where, params = self.where(filters, "m")
        rows = self._run(
            f"SELECT m.id, ts_rank(m.fts, q, 1) AS s FROM memories m, to_tsquery('{self.ts_config}', ?) q "
            f"WHERE m.fts @@ q AND {where} ORDER BY s DESC, m.seq LIMIT ?",
            (" | ".join(terms), *params, k),
        )
        return [Candidate(str(r[0]), float(r[1])) for r in rows]

    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        text = " ".join(keywords(query))
        if len(text) < 3:
            return []
        where, params = self.where(filters, "m")
        with self.transaction():
            self._run("SET LOCAL pg_trgm.word_similarity_threshold = 0.3")
            rows = self._run(
                f"SELECT m.id, word_similarity(?, m.content) AS s FROM memories m "
                f"WHERE ? <%% m.content AND {where} ORDER BY s DESC, m.seq LIMIT ?",
                (text, text, *params, k),
            )
        return [Candidate(str(r[0]), float(r[1])) for r in rows]


def _redact(url: str) -> str:
    """The URL without its password, for messages and `stats`."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
