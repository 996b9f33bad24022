"""What both SQL backends share: records, filters, history, startup, migrations.

A backend supplies a connection (`_run`, `_run_many`, `transaction`), its value adapters
(timestamps, JSON, tags, vectors) and its three candidate legs. Everything else — every
statement that reads or writes records — is written once, here, with `?` placeholders.
"""

from __future__ import annotations

import json
import uuid
from abc import abstractmethod
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .._time import utcnow
from ..errors import StorageError
from ..models import HistoryEntry, MemoryRecord, StartupEntry
from .base import TOKEN_COLUMNS, Candidate, Filters, HistoryDraft, Order, Store, StoreStats
from .text import short_cjk_words

if TYPE_CHECKING:
    import numpy as np

COLUMNS = (
    "id", "content", "title", "category", "tags", "importance", "confidence", "scope", "user_id", "agent_id",
    "session_id", "visibility", "source_type", "source_id", "metadata", "created_at", "updated_at", "deleted_at",
    "expires_at", "embedding_model",
)
_SELECT = ", ".join(f"m.{c}" for c in COLUMNS)


def api_tokens_table(timestamp: str) -> str:
    """The API tokens table (auth.py) in a backend's timestamp type; IF NOT EXISTS: older SQLite stores have it."""
    return f"""CREATE TABLE IF NOT EXISTS api_tokens (
        id TEXT PRIMARY KEY,
        name TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'service')),
        user_id TEXT,
        agent_id TEXT,
        scopes TEXT,
        salt TEXT NOT NULL,
        hash TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        revoked_at {timestamp}
    )"""


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """The smallest and largest canonical UUIDs starting with a hex prefix (dashes optional).

    A range works on a UUID column and on canonical UUID text alike, and uses the index.
    """
    digits = prefix.replace("-", "")
    lo = uuid.UUID(digits.ljust(32, "0"))
    hi = uuid.UUID(digits.ljust(32, "f"))
    return str(lo), str(hi)


class SQLStore(Store):
    #: the column that orders rows by insertion (SQLite `rowid`, PostgreSQL `seq`)
    order_column = "rowid"
    #: what locks a row read in a write transaction (SQLite's BEGIN IMMEDIATE holds the whole file)
    for_update = ""
    migrations: list[tuple[int, list[str]]] = []

    # -- what a backend provides -------------------------------------------------------
    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Execute one statement (joining the current transaction if any); rows for a query, else []."""

    @abstractmethod
    def _run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def _rowcount(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    @abstractmethod
    def _lock_schema(self) -> None:
        """Inside the migration transaction: keep other processes from migrating at the same time."""

    @abstractmethod
    def _table_exists(self, name: str) -> bool: ...

    def _ts(self, value: datetime | None) -> Any:
        return value

    def _from_ts(self, raw: Any) -> datetime | None:
        return raw

    def _json(self, value: Any) -> Any:
        return json.dumps(value, default=str) if value != {} else "{}"

    def _from_json(self, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        return {} if raw == "{}" else json.loads(raw)  # most memories have no metadata: skip the parser

    @abstractmethod
    def _tags(self, tags: list[str]) -> Any: ...

    @abstractmethod
    def _from_tags(self, raw: Any) -> list[str]: ...

    @abstractmethod
    def _tags_any(self, alias: str, tags: list[str]) -> tuple[str, list[Any]]: ...

    @abstractmethod
    def _vector(self, vector: np.ndarray) -> Any: ...

    @abstractmethod
    def _from_vector(self, raw: Any) -> np.ndarray | None: ...

    # -- migrations ---------------------------------------------------------------------
    def schema_version(self) -> int:
        if not self._table_exists("meta"):
            return 0
        rows = self._run("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0][0]) if rows else 0

    def pending_migrations(self) -> list[tuple[int, list[str]]]:
        current = self.schema_version()
        return [(n, sql) for n, sql in self.migrations if n > current]

    def migrate(self) -> list[int]:
        """Apply pending migrations in one transaction; safe when several processes open at once."""
        latest = self.migrations[-1][0]
        if self.schema_version() > latest:
            raise StorageError(
                f"{self.location} has schema version {self.schema_version()}, newer than this clawrecall "
                f"({latest}); upgrade clawrecall"
            )
        if self.schema_version() == latest:
            return []
        applied: list[int] = []
        with self.transaction():
            self._lock_schema()
            for number, statements in self.pending_migrations():  # re-read under the lock
                for statement in statements:
                    self._run(statement)
                self._run(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(number),),
                )
                applied.append(number)
        return applied

    # -- metadata -----------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._run("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._run(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writes -------------------------------------------------------------------------
    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        # generators: each row is bound and dropped, not kept (a batch's tuples kept the garbage collector busy)
        rows = (
            (*self._record_row(r), None if vectors is None else self._vector(vectors[i])) for i, r in enumerate(records)
        )
        with self.transaction():
            self._run_many(
                f"INSERT INTO memories ({', '.join(COLUMNS)}, embedding) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})",
                rows,
            )
            self._after_insert(records, vectors)

    def _after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        """Backends hook work on the rows just inserted (text indexing, lazy index creation)."""

    def update(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        row = self._record_row(record)
        assignments = ", ".join(f"{c} = ?" for c in COLUMNS[1:])
        params: list[Any] = [*row[1:]]
        if vector is not None:
            assignments += ", embedding = ?"
            params.append(self._vector(vector))
        with self.transaction():
            self._run(f"UPDATE memories SET {assignments} WHERE id = ?", (*params, record.id))

    def remove(self, ids: list[str]) -> None:
        with self.transaction():
            self._run_many("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])

    def add_history(self, entries: list[HistoryDraft]) -> None:
        rows = ((e.memory_id, e.action, e.before, e.after, e.actor, self._ts(e.at)) for e in entries)
        with self.transaction():
            self._run_many(
                "INSERT INTO history (memory_id, action, before, after, actor, at) VALUES (?, ?, ?, ?, ?, ?)", rows
            )

    def erase_history(self, memory_id: str) -> None:
        with self.transaction():
            self._run("UPDATE history SET before = NULL, after = NULL WHERE memory_id = ?", (memory_id,))

    # -- reads --------------------------------------------------------------------------
    def fetch(self, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        for chunk in _chunks(ids):
            for row in self._run(f"SELECT {_SELECT} FROM memories m WHERE m.id IN ({_marks(chunk)})", chunk):
                record = self._row_record(row)
                out[record.id] = record
        return out

    def _with_short_cjk_words(self, query: str, hits: list[Candidate], filters: Filters, k: int) -> list[Candidate]:
        """The trigram leg's `hits`, joined by the memories that contain the query's 1–2 character CJK
        words, which no trigram finds: a substring scan of the rows the filters leave. Each scores
        the share of those words it contains times the best trigram score, so one containing them
        all ranks with the best trigram match."""
        words = short_cjk_words(query)
        if not words:
            return hits
        where, params = self.where(filters, "m")
        patterns = ["%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for w in words]
        contains = [r"m.content LIKE ? ESCAPE '\'"] * len(words)
        count = " + ".join(f"(CASE WHEN {c} THEN 1 ELSE 0 END)" for c in contains)
        rows = self._run(
            f"SELECT m.id, {count} AS n FROM memories m WHERE ({' OR '.join(contains)}) AND {where} "
            f"ORDER BY n DESC, m.created_at DESC LIMIT ?",
            (*patterns, *patterns, *params, k),
        )
        top = max((h.score for h in hits), default=1.0)
        scores = {h.id: h.score for h in hits}
        for memory_id, n in rows:
            scores[str(memory_id)] = max(scores.get(str(memory_id), 0.0), top * n / len(words))
        return [Candidate(i, s) for i, s in sorted(scores.items(), key=lambda x: x[1], reverse=True)[:k]]

    def fetch_for_update(self, memory_id: str) -> MemoryRecord | None:
        rows = self._run(f"SELECT {_SELECT} FROM memories m WHERE m.id = ?{self.for_update}", (memory_id,))
        return self._row_record(rows[0]) if rows else None

    def ids_with_prefix(self, prefix: str, filters: Filters, limit: int = 6) -> list[str]:
        lo, hi = prefix_bounds(prefix)
        where, params = self.where(filters, "m")
        rows = self._run(
            f"SELECT m.id FROM memories m WHERE m.id BETWEEN ? AND ? AND {where} ORDER BY m.id LIMIT ?",
            (lo, hi, *params, limit),
        )
        return [str(r[0]) for r in rows]

    def list(self, filters: Filters, *, limit: int, offset: int, order: Order) -> list[MemoryRecord]:
        where, params = self.where(filters, "m")
        oc = self.order_column
        by = {"newest": f"m.created_at DESC, m.{oc} DESC", "oldest": f"m.created_at ASC, m.{oc} ASC",
              "updated": f"m.updated_at DESC, m.{oc} DESC"}[order]
        rows = self._run(f"SELECT {_SELECT} FROM memories m WHERE {where} ORDER BY {by} LIMIT ? OFFSET ?",
                         (*params, limit, offset))
        return [self._row_record(r) for r in rows]

    def iter_all(self, filters: Filters, batch: int = 500) -> Iterator[tuple[MemoryRecord, np.ndarray | None]]:
        where, params = self.where(filters, "m")
        oc = self.order_column
        last = 0
        while True:
            rows = self._run(
                f"SELECT m.{oc}, {_SELECT}, m.embedding FROM memories m WHERE m.{oc} > ? AND {where} "
                f"ORDER BY m.{oc} LIMIT ?",
                (last, *params, batch),
            )
            if not rows:
                return
            for row in rows:
                yield self._row_record(row[1:-1]), self._from_vector(row[-1])
            last = rows[-1][0]

    def count(self, filters: Filters) -> int:
        where, params = self.where(filters, "m")
        return self._run(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0]

    def stats(self) -> StoreStats:
        """Counts from indexes only: all rows grouped, minus the (few) deleted or expired rows."""
        now = self._ts(utcnow())
        total, deleted, expired, users, oldest, newest = self._run(
            "SELECT (SELECT count(*) FROM memories), "
            "(SELECT count(*) FROM memories WHERE deleted_at IS NOT NULL), "
            "(SELECT count(*) FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?), "
            "(SELECT count(DISTINCT user_id) FROM memories), "
            "(SELECT min(created_at) FROM memories), (SELECT max(created_at) FROM memories)",
            (now,),
        )[0]
        # two conditions, each served by its own partial index (an OR of them would scan the table)
        inactive = ("deleted_at IS NOT NULL", "expires_at IS NOT NULL AND expires_at <= ? AND deleted_at IS NULL")
        grouped: dict[str, dict[str, int]] = {}
        for column in ("category", "scope"):
            counts = dict(self._run(f"SELECT {column}, count(*) FROM memories GROUP BY {column}"))
            for condition in inactive:  # few rows: counted here, so no planner can trade the index for a sort
                params = (now,) if "?" in condition else ()
                for (name,) in self._run(f"SELECT {column} FROM memories WHERE {condition}", params):
                    counts[name] -= 1
            grouped[column] = dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))
        return StoreStats(
            total=total, deleted=deleted, expired=int(expired), by_category=grouped["category"],
            by_scope=grouped["scope"], users=users, oldest=self._from_ts(oldest), newest=self._from_ts(newest),
            size_bytes=self._size_bytes(),
        )

    def _size_bytes(self) -> int | None:
        return None

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._run(
            "SELECT id, memory_id, action, before, after, actor, at FROM history WHERE memory_id = ? ORDER BY id",
            (memory_id,),
        )
        return [
            HistoryEntry(id=r[0], memory_id=str(r[1]), action=r[2], before=None if r[3] is None else self._from_json(r[3]),
                         after=None if r[4] is None else self._from_json(r[4]), actor=r[5], at=self._from_ts(r[6]))
            for r in rows
        ]

    def history_ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        lo, hi = prefix_bounds(prefix)
        rows = self._run(
            "SELECT DISTINCT memory_id FROM history WHERE memory_id BETWEEN ? AND ? ORDER BY memory_id LIMIT ?", (lo, hi, limit)
        )
        return [str(r[0]) for r in rows]

    def purgeable(self, deleted_before: datetime) -> list[str]:
        rows = self._run("SELECT id FROM memories WHERE deleted_at IS NOT NULL AND deleted_at <= ?", (self._ts(deleted_before),))
        return [str(r[0]) for r in rows]

    def session_neighbors(self, ids: list[str], filters: Filters) -> dict[str, list[str]]:
        """The turns just before and after each memory in its scope and session that pass `filters`:
        two index seeks per memory on (session_id, created_at), whatever the session's length."""
        where, params = self.where(filters, "m")
        oc = self.order_column
        same = "m.session_id = h.session_id AND m.scope = h.scope"
        before = f"(m.created_at < h.created_at OR (m.created_at = h.created_at AND m.{oc} < h.{oc}))"
        after = f"(m.created_at > h.created_at OR (m.created_at = h.created_at AND m.{oc} > h.{oc}))"
        out: dict[str, list[str]] = {}
        for chunk in _chunks(ids):
            rows = self._run(
                f"SELECT h.id, (SELECT m.id FROM memories m WHERE {same} AND {before} AND {where} "
                f"ORDER BY m.created_at DESC, m.{oc} DESC LIMIT 1), "
                f"(SELECT m.id FROM memories m WHERE {same} AND {after} AND {where} "
                f"ORDER BY m.created_at, m.{oc} LIMIT 1) "
                f"FROM memories h WHERE h.id IN ({_marks(chunk)}) AND h.session_id IS NOT NULL",
                (*params, *params, *chunk),
            )
            for memory_id, prev, nxt in rows:
                out[str(memory_id)] = [str(n) for n in (prev, nxt) if n is not None]
        return out

    def _filter_ids(self, ids: list[str], filters: Filters) -> set[str]:
        """The subset of `ids` that pass `filters` (for legs that filter part of the way themselves)."""
        where, params = self.where(filters, "m")
        out: set[str] = set()
        for chunk in _chunks(ids):
            rows = self._run(f"SELECT m.id FROM memories m WHERE m.id IN ({_marks(chunk)}) AND {where}", (*chunk, *params))
            out.update(str(r[0]) for r in rows)
        return out

    # -- startup identity ------------------------------------------------------------------
    def startup_entries(self, scopes: list[str] | None) -> list[StartupEntry]:
        where = "1 = 1" if scopes is None else f"scope IN ({_marks(scopes)})"
        rows = self._run(
            f"SELECT scope, key, content, priority, reinforce, updated_at FROM startup WHERE {where} ORDER BY priority, key",
            scopes or [],
        )
        return [
            StartupEntry(scope=r[0], key=r[1], content=r[2], priority=r[3], reinforce=bool(r[4]), updated_at=self._from_ts(r[5]))
            for r in rows
        ]

    def put_startup(self, entry: StartupEntry) -> None:
        with self.transaction():
            self._run(
                "INSERT INTO startup (scope, key, content, priority, reinforce, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (scope, key) DO UPDATE SET content = excluded.content, priority = excluded.priority, "
                "reinforce = excluded.reinforce, updated_at = excluded.updated_at",
                (entry.scope, entry.key, entry.content, entry.priority, entry.reinforce, self._ts(entry.updated_at)),
            )

    def delete_startup(self, scope: str, key: str) -> bool:
        with self.transaction():
            return self._rowcount("DELETE FROM startup WHERE scope = ? AND key = ?", (scope, key)) > 0

    # -- API tokens ---------------------------------------------------------------------------
    def put_token(self, row: Sequence[Any]) -> None:
        *head, created_at = row
        with self.transaction():
            self._run(
                "INSERT INTO api_tokens (id, name, kind, user_id, agent_id, scopes, salt, hash, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (*head, self._ts(created_at)),
            )

    def tokens(self, *, include_revoked: bool) -> list[tuple]:
        where = "" if include_revoked else " WHERE revoked_at IS NULL"
        rows = self._run(f"SELECT {', '.join(TOKEN_COLUMNS)} FROM api_tokens{where} ORDER BY created_at, id")
        return [self._token_row(r) for r in rows]

    def token(self, token_id: str, *, active_only: bool) -> tuple | None:
        active = " AND revoked_at IS NULL" if active_only else ""
        rows = self._run(f"SELECT {', '.join(TOKEN_COLUMNS)}, salt, hash FROM api_tokens WHERE id = ?{active}", (token_id,))
        return self._token_row(rows[0]) if rows else None

    def revoke_token(self, token_id: str, at: datetime) -> None:
        with self.transaction():
            self._run("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (self._ts(at), token_id))

    def any_active_token(self) -> bool:
        return bool(self._run("SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1"))

    def _token_row(self, row: Sequence[Any]) -> tuple:
        created, revoked = TOKEN_COLUMNS.index("created_at"), TOKEN_COLUMNS.index("revoked_at")
        out = list(row)
        out[created], out[revoked] = self._from_ts(row[created]), self._from_ts(row[revoked])
        return tuple(out)

    # -- filters and rows ----------------------------------------------------------------------
    def where(self, f: Filters, alias: str) -> tuple[str, list[Any]]:
        """The SQL for a `Filters`: the one place filters become SQL."""
        a = alias
        clauses: list[str] = []
        params: list[Any] = []
        if f.only_deleted:
            clauses.append(f"{a}.deleted_at IS NOT NULL")
        elif not f.include_deleted:
            clauses.append(f"{a}.deleted_at IS NULL")
        if not f.include_expired:
            clauses.append(f"({a}.expires_at IS NULL OR {a}.expires_at > ?)")
            params.append(self._ts(f.now or utcnow()))
        for column, values in (("scope", f.scopes), ("category", f.categories)):
            if values is not None:
                clauses.append(f"{a}.{column} IN ({_marks(values)})" if values else "1 = 0")
                params.extend(values)
        if f.tags:
            sql, extra = self._tags_any(a, f.tags)
            clauses.append(sql)
            params.extend(extra)
        for column, value in (("user_id", f.user_id), ("session_id", f.session_id)):
            if value is not None:
                clauses.append(f"{a}.{column} = ?")
                params.append(value)
        if f.since is not None:
            clauses.append(f"{a}.created_at >= ?")
            params.append(self._ts(f.since))
        if f.until is not None:
            clauses.append(f"{a}.created_at <= ?")
            params.append(self._ts(f.until))
        return (" AND ".join(clauses) or "1 = 1"), params

    def _record_row(self, r: MemoryRecord) -> tuple:
        return (
            r.id, r.content, r.title, r.category, self._tags(r.tags), r.importance, r.confidence, r.scope, r.user_id,
            r.agent_id, r.session_id, r.visibility.value, r.source_type, r.source_id, self._json(r.metadata),
            self._ts(r.created_at), self._ts(r.updated_at), self._ts(r.deleted_at), self._ts(r.expires_at),
            r.embedding_model,
        )

    def _row_record(self, row: Sequence[Any]) -> MemoryRecord:
        return MemoryRecord(
            id=str(row[0]), content=row[1], title=row[2], category=row[3], tags=self._from_tags(row[4]),
            importance=row[5], confidence=row[6], scope=row[7], user_id=row[8], agent_id=row[9], session_id=row[10],
            visibility=row[11], source_type=row[12], source_id=row[13], metadata=self._from_json(row[14]),
            created_at=self._from_ts(row[15]), updated_at=self._from_ts(row[16]), deleted_at=self._from_ts(row[17]),
            expires_at=self._from_ts(row[18]), embedding_model=row[19],
        )


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _marks(items: Sequence[Any]) -> str:
    return ", ".join("?" * len(items))
