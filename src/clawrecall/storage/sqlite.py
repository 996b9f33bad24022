"""The embedded backend: one SQLite file in WAL mode.

FTS5 (porter) gives the BM25 leg, an FTS5 trigram table the fuzzy/CJK leg, and an exact
in-memory matrix (`vector_index.py`) the vector leg. Triggers keep both full-text tables
and the `changes` log in step with `memories`, so no write path can forget one.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._time import as_utc, from_db, to_db, utcnow
from ..errors import StorageError
from ..models import HistoryEntry, MemoryRecord, StartupEntry
from .base import Candidate, Filters, HistoryDraft, Order, Store, StoreStats
from .text import fts_or_query, keywords, trigrams
from .vector_index import RowMeta, VectorIndex

_COLUMNS = (
    "id, content, title, category, tags, importance, confidence, scope, user_id, agent_id, session_id, "
    "visibility, source_type, source_id, metadata, created_at, updated_at, deleted_at, expires_at, embedding_model"
)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL CHECK (length(content) > 0),
            title TEXT,
            category TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            importance REAL NOT NULL CHECK (importance >= 0 AND importance <= 1),
            confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            scope TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            session_id TEXT,
            visibility TEXT NOT NULL DEFAULT 'shared' CHECK (visibility IN ('private', 'shared', 'secret')),
            source_type TEXT,
            source_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            deleted_at TEXT,
            expires_at TEXT,
            embedding_model TEXT,
            embedding BLOB
        );
        CREATE INDEX idx_memories_scope ON memories (scope, created_at);
        CREATE INDEX idx_memories_category ON memories (category);
        CREATE INDEX idx_memories_created_at ON memories (created_at);
        CREATE INDEX idx_memories_deleted_at ON memories (deleted_at);
        CREATE INDEX idx_memories_user_id ON memories (user_id);
        CREATE INDEX idx_memories_session_id ON memories (session_id);

        CREATE VIRTUAL TABLE memories_fts USING fts5 (
            title, content, tags, content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE memories_trgm USING fts5 (
            content, content='memories', content_rowid='rowid', tokenize='trigram'
        );
        CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL);

        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, title, content, tags) VALUES (new.rowid, new.title, new.content, new.tags);
            INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
            INSERT INTO changes (memory_id) VALUES (new.id);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, title, content, tags)
                VALUES ('delete', old.rowid, old.title, old.content, old.tags);
            INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO changes (memory_id) VALUES (old.id);
        END;
        CREATE TRIGGER memories_au_text AFTER UPDATE OF title, content, tags ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, title, content, tags)
                VALUES ('delete', old.rowid, old.title, old.content, old.tags);
            INSERT INTO memories_fts (rowid, title, content, tags) VALUES (new.rowid, new.title, new.content, new.tags);
            INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
        END;
        CREATE TRIGGER memories_au_log AFTER UPDATE ON memories BEGIN
            INSERT INTO changes (memory_id) VALUES (new.id);
        END;

        CREATE TABLE history (
            id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL,
            action TEXT NOT NULL,
            before TEXT,
            after TEXT,
            actor TEXT,
            at TEXT NOT NULL
        );
        CREATE INDEX idx_history_memory ON history (memory_id, id);
        """,
    ),
    (
        2,
        """
        CREATE TABLE startup (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 2,
            reinforce INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (scope, key)
        );
        """,
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
_CHANGES_KEEP = 20_000


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else as_utc(value).timestamp()


class SQLiteStore(Store):
    backend = "sqlite"

    def __init__(self, path: str | Path, *, dims: int | None = None):
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from None
        self._lock = threading.RLock()
        self._depth = 0
        self._index: VectorIndex | None = None
        self._dims = dims
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StorageError(f"{self.path} is not a usable clawrecall database: {exc}") from None

    # -- lifecycle ---------------------------------------------------------------
    def _migrate(self) -> None:
        version = self._read_version()
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"{self.path} has schema version {version}, newer than this clawrecall ({SCHEMA_VERSION}); upgrade clawrecall"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction():
            version = self._read_version()  # another process may have migrated meanwhile
            for number, sql in MIGRATIONS:
                if number <= version:
                    continue
                for statement in _split_sql(sql):
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(number),),
                )

    def _read_version(self) -> int:
        row = self._conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if row is None:
            return 0
        row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def schema_version(self) -> int:
        return self._read_version()

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._depth = 0

    # -- writes --------------------------------------------------------------------
    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        rows = [
            (*_record_row(r), None if vectors is None else np.asarray(vectors[i], dtype=np.float32).tobytes())
            for i, r in enumerate(records)
        ]
        with self.transaction():
            self._conn.executemany(
                f"INSERT INTO memories ({_COLUMNS}, embedding) VALUES ({', '.join('?' * 21)})", rows
            )
            self._trim_changes()

    def update(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        row = _record_row(record)
        assignments = ", ".join(f"{c.strip()} = ?" for c in _COLUMNS.split(",")[1:])
        params: list[Any] = [*row[1:]]
        if vector is not None:
            assignments += ", embedding = ?"
            params.append(np.asarray(vector, dtype=np.float32).tobytes())
        with self.transaction():
            self._conn.execute(f"UPDATE memories SET {assignments} WHERE id = ?", (*params, record.id))

    def remove(self, ids: list[str]) -> None:
        with self.transaction():
            self._conn.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])

    def add_history(self, entries: list[HistoryDraft]) -> None:
        rows = [
            (
                e.memory_id,
                e.action,
                None if e.before is None else json.dumps(e.before, default=str),
                None if e.after is None else json.dumps(e.after, default=str),
                e.actor,
                to_db(e.at),
            )
            for e in entries
        ]
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO history (memory_id, action, before, after, actor, at) VALUES (?, ?, ?, ?, ?, ?)", rows
            )

    def erase_history(self, memory_id: str) -> None:
        with self.transaction():
            self._conn.execute("UPDATE history SET before = NULL, after = NULL WHERE memory_id = ?", (memory_id,))

    def _trim_changes(self) -> None:
        row = self._conn.execute("SELECT max(seq) FROM changes").fetchone()
        if row[0] and row[0] % 1000 == 0:
            self._conn.execute("DELETE FROM changes WHERE seq <= ?", (row[0] - _CHANGES_KEEP,))

    # -- reads -----------------------------------------------------------------------
    def _query(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def fetch(self, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._query(
                f"SELECT {_COLUMNS} FROM memories WHERE id IN ({', '.join('?' * len(chunk))})", chunk
            )
            for row in rows:
                out[row[0]] = _row_record(row)
        return out

    def ids_with_prefix(self, prefix: str, filters: Filters, limit: int = 6) -> list[str]:
        where, params = _where(filters, "m")
        rows = self._query(
            f"SELECT m.id FROM memories m WHERE m.id >= ? AND m.id < ? AND {where} ORDER BY m.id LIMIT ?",
            (prefix, prefix + "\uffff", *params, limit),
        )
        return [r[0] for r in rows]

    def list(self, filters: Filters, *, limit: int, offset: int, order: Order) -> list[MemoryRecord]:
        where, params = _where(filters, "m")
        by = {"newest": "m.created_at DESC, m.rowid DESC", "oldest": "m.created_at ASC, m.rowid ASC", "updated": "m.updated_at DESC"}[order]
        cols = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        rows = self._query(
            f"SELECT {cols} FROM memories m WHERE {where} ORDER BY {by} LIMIT ? OFFSET ?", (*params, limit, offset)
        )
        return [_row_record(r) for r in rows]

    def iter_all(self, filters: Filters, batch: int = 500) -> Iterator[tuple[MemoryRecord, np.ndarray | None]]:
        where, params = _where(filters, "m")
        cols = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        last = 0
        while True:
            rows = self._query(
                f"SELECT m.rowid, {cols}, m.embedding FROM memories m WHERE m.rowid > ? AND {where} "
                "ORDER BY m.rowid LIMIT ?",
                (last, *params, batch),
            )
            if not rows:
                return
            for row in rows:
                blob = row[-1]
                yield _row_record(row[1:-1]), (None if blob is None else np.frombuffer(blob, dtype=np.float32))
            last = rows[-1][0]

    def count(self, filters: Filters) -> int:
        where, params = _where(filters, "m")
        return self._query(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0]

    def stats(self) -> StoreStats:
        now = to_db(utcnow())
        total, deleted, expired, users, oldest, newest = self._query(
            "SELECT count(*), count(deleted_at), "
            "sum(CASE WHEN expires_at IS NOT NULL AND expires_at <= ? THEN 1 ELSE 0 END), "
            "count(DISTINCT user_id), min(created_at), max(created_at) FROM memories",
            (now,),
        )[0]
        active = "deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?)"
        by_category = dict(self._query(f"SELECT category, count(*) FROM memories WHERE {active} GROUP BY category ORDER BY 2 DESC", (now,)))
        by_scope = dict(self._query(f"SELECT scope, count(*) FROM memories WHERE {active} GROUP BY scope ORDER BY 2 DESC", (now,)))
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return StoreStats(
            total=total, deleted=deleted, expired=expired or 0, by_category=by_category, by_scope=by_scope,
            users=users, oldest=from_db(oldest), newest=from_db(newest), size_bytes=size,
        )

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._query(
            "SELECT id, memory_id, action, before, after, actor, at FROM history WHERE memory_id = ? ORDER BY id",
            (memory_id,),
        )
        return [
            HistoryEntry(
                id=r[0], memory_id=r[1], action=r[2],
                before=None if r[3] is None else json.loads(r[3]),
                after=None if r[4] is None else json.loads(r[4]),
                actor=r[5], at=from_db(r[6]),
            )
            for r in rows
        ]

    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        index = self._fresh_index()
        out: dict[str, np.ndarray] = {}
        if index is not None:
            for i in ids:
                v = index.vector(i)
                if v is not None:
                    out[i] = v
        return out

    def purgeable(self, deleted_before: datetime) -> list[str]:
        return [r[0] for r in self._query("SELECT id FROM memories WHERE deleted_at IS NOT NULL AND deleted_at <= ?", (to_db(deleted_before),))]

    def session_neighbors(self, ids: list[str], filters: Filters) -> dict[str, list[str]]:
        where, params = _where(filters, "m")
        out: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._query(
                "SELECT id, prev, next FROM (SELECT m.id, "
                "lag(m.id) OVER w AS prev, lead(m.id) OVER w AS next FROM memories m "
                f"WHERE m.session_id IN (SELECT session_id FROM memories WHERE id IN ({marks})) AND {where} "
                "WINDOW w AS (PARTITION BY m.scope, m.session_id ORDER BY m.created_at, m.rowid)) "
                f"WHERE id IN ({marks})",
                (*chunk, *params, *chunk),
            )
            for memory_id, prev, nxt in rows:
                out[memory_id] = [n for n in (prev, nxt) if n is not None]
        return out

    def startup_entries(self, scopes: list[str] | None) -> list[StartupEntry]:
        where = "1" if scopes is None else f"scope IN ({', '.join('?' * len(scopes))})"
        rows = self._query(
            f"SELECT scope, key, content, priority, reinforce, updated_at FROM startup WHERE {where} "
            "ORDER BY priority, key", scopes or [],
        )
        return [
            StartupEntry(scope=r[0], key=r[1], content=r[2], priority=r[3], reinforce=bool(r[4]), updated_at=from_db(r[5]))
            for r in rows
        ]

    def put_startup(self, entry: StartupEntry) -> None:
        with self.transaction():
            self._conn.execute(
                "INSERT INTO startup (scope, key, content, priority, reinforce, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (scope, key) DO UPDATE SET content = excluded.content, priority = excluded.priority, "
                "reinforce = excluded.reinforce, updated_at = excluded.updated_at",
                (entry.scope, entry.key, entry.content, entry.priority, int(entry.reinforce), to_db(entry.updated_at)),
            )

    def delete_startup(self, scope: str, key: str) -> bool:
        with self.transaction():
            return self._conn.execute("DELETE FROM startup WHERE scope = ? AND key = ?", (scope, key)).rowcount > 0

    # -- candidate legs ----------------------------------------------------------------
    def vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        index = self._fresh_index()
        if index is None:
            return []
        now = (filters.now or utcnow()).timestamp()
        kwargs = dict(
            scopes=filters.scopes, categories=filters.categories, since=_epoch(filters.since), until=_epoch(filters.until),
            include_deleted=filters.include_deleted, only_deleted=filters.only_deleted,
            include_expired=filters.include_expired, now=now,
        )
        if not (filters.tags or filters.user_id or filters.session_id):
            return [Candidate(i, s) for i, s in index.search(query, k, **kwargs)]
        # Filters the matrix does not carry are checked in SQL; widen until k survive or all were seen.
        want = k * 4
        while True:
            hits = index.search(query, want, **kwargs)
            kept = set(self._filter_ids([i for i, _ in hits], filters))
            out = [Candidate(i, s) for i, s in hits if i in kept]
            if len(out) >= k or len(hits) < want:
                return out[:k]
            want *= 4

    def _filter_ids(self, ids: list[str], filters: Filters) -> list[str]:
        where, params = _where(filters, "m")
        out: list[str] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out += [r[0] for r in self._query(
                f"SELECT m.id FROM memories m WHERE m.id IN ({', '.join('?' * len(chunk))}) AND {where}", (*chunk, *params)
            )]
        return out

    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        terms = keywords(query)
        return self._fts("memories_fts", fts_or_query(terms), filters, k) if terms else []

    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        grams = trigrams(query)
        return self._fts("memories_trgm", fts_or_query(grams), filters, k) if grams else []

    def _fts(self, table: str, match: str, filters: Filters, k: int) -> list[Candidate]:
        where, params = _where(filters, "m")
        rows = self._query(
            f"SELECT m.id, -bm25({table}) AS s FROM {table} JOIN memories m ON m.rowid = {table}.rowid "
            f"WHERE {table} MATCH ? AND {where} ORDER BY bm25({table}) LIMIT ?",
            (match, *params, k),
        )
        return [Candidate(r[0], float(r[1])) for r in rows]

    # -- vector index maintenance ---------------------------------------------------------
    def _fresh_index(self) -> VectorIndex | None:
        """The in-memory index, first brought up to date with the `changes` log."""
        with self._lock:
            lo, hi = self._conn.execute("SELECT min(seq), max(seq) FROM changes").fetchone()
            if self._index is None or (lo is not None and lo > self._index.last_seq + 1 and self._index.last_seq < hi):
                return self._load_index(hi or 0)
            if hi is None or hi == self._index.last_seq:
                return self._index
            ids = [r[0] for r in self._conn.execute(
                "SELECT DISTINCT memory_id FROM changes WHERE seq > ?", (self._index.last_seq,)
            )]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows = self._conn.execute(
                    "SELECT id, embedding, scope, category, created_at, deleted_at, expires_at FROM memories "
                    f"WHERE id IN ({', '.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                found = {r[0] for r in rows}
                for r in rows:
                    self._index_row(r)
                for gone in set(chunk) - found:
                    self._index.remove(gone)
            self._index.last_seq = hi
            return self._index

    def _load_index(self, seq: int) -> VectorIndex | None:
        dims = self._dims
        if dims is None:
            row = self._conn.execute("SELECT length(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1").fetchone()
            if row is None:
                self._index = None
                return None
            dims = row[0] // 4
        count = self._conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        self._index = VectorIndex(dims, capacity=max(1024, int(count * 1.25)))
        cursor = self._conn.execute(
            "SELECT id, embedding, scope, category, created_at, deleted_at, expires_at FROM memories"
        )
        for r in cursor:
            self._index_row(r)
        self._index.last_seq = seq
        return self._index

    def _index_row(self, r: tuple) -> None:
        assert self._index is not None
        memory_id, blob, scope, category, created, deleted, expires = r
        if blob is None or len(blob) != self._index.dims * 4:
            self._index.remove(memory_id)
            return
        self._index.upsert(
            memory_id,
            np.frombuffer(blob, dtype=np.float32),
            RowMeta(
                scope=scope, category=category, created=from_db(created).timestamp(), deleted=deleted is not None,
                expires=from_db(expires).timestamp() if expires else float("inf"),
            ),
        )


def _split_sql(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (which contain `;`) whole."""
    statements, current = [], []
    for line in sql.strip().splitlines():
        current.append(line)
        joined = "\n".join(current).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current))
    return statements


def _where(f: Filters, alias: str) -> tuple[str, list[Any]]:
    """The SQL for a `Filters`; the one place filters become SQL for this backend."""
    clauses: list[str] = []
    params: list[Any] = []
    a = alias
    if f.only_deleted:
        clauses.append(f"{a}.deleted_at IS NOT NULL")
    elif not f.include_deleted:
        clauses.append(f"{a}.deleted_at IS NULL")
    if not f.include_expired:
        clauses.append(f"({a}.expires_at IS NULL OR {a}.expires_at > ?)")
        params.append(to_db(f.now or utcnow()))
    for column, values in (("scope", f.scopes), ("category", f.categories)):
        if values is not None:
            clauses.append(f"{a}.{column} IN ({', '.join('?' * len(values))})" if values else "0")
            params.extend(values)
    if f.tags:
        clauses.append(f"EXISTS (SELECT 1 FROM json_each({a}.tags) WHERE value IN ({', '.join('?' * len(f.tags))}))")
        params.extend(f.tags)
    if f.user_id is not None:
        clauses.append(f"{a}.user_id = ?")
        params.append(f.user_id)
    if f.session_id is not None:
        clauses.append(f"{a}.session_id = ?")
        params.append(f.session_id)
    if f.since is not None:
        clauses.append(f"{a}.created_at >= ?")
        params.append(to_db(f.since))
    if f.until is not None:
        clauses.append(f"{a}.created_at <= ?")
        params.append(to_db(f.until))
    return (" AND ".join(clauses) or "1"), params


def _record_row(r: MemoryRecord) -> tuple:
    return (
        r.id, r.content, r.title, r.category, json.dumps(r.tags), r.importance, r.confidence, r.scope, r.user_id,
        r.agent_id, r.session_id, r.visibility.value, r.source_type, r.source_id, json.dumps(r.metadata, default=str),
        to_db(r.created_at), to_db(r.updated_at), to_db(r.deleted_at), to_db(r.expires_at), r.embedding_model,
    )


def _row_record(row: tuple) -> MemoryRecord:
    return MemoryRecord(
        id=row[0], content=row[1], title=row[2], category=row[3], tags=json.loads(row[4]), importance=row[5],
        confidence=row[6], scope=row[7], user_id=row[8], agent_id=row[9], session_id=row[10], visibility=row[11],
        source_type=row[12], source_id=row[13], metadata=json.loads(row[14]), created_at=from_db(row[15]),
        updated_at=from_db(row[16]), deleted_at=from_db(row[17]), expires_at=from_db(row[18]), embedding_model=row[19],
    )
