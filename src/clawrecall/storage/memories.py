"""`store.memories`: the rows every kind of record shares (memories, facts, messages, chunks, windows) —
their text, scope, times and vector — written and read by id, by filters, by owner.

What differs between backends is asked of the store through `MemoryStore`: its bulk write, and the
work each does on rows written, vectors given and rows removed (text indexes, a vector index, pages
left in a write-ahead log). The candidate legs of a search stay with the backend (`sql.Store`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from .._time import utcnow
from ..models import MemoryRecord, embedded_text
from .base import Order, Owned, StoreStats, chunks
from .dialect import RowMap, prefix_bounds
from .executor import Executor
from .filters import Filters, where
from .schema import MEMORIES
from .staging import StagedVectors

if TYPE_CHECKING:
    import numpy as np


_UNSEALED = "sealed IS NULL"  # a secret has no vector: none is made of its mask either


class MemoryStore(Executor, Protocol):
    """What the rows need of a backend besides statements: its hooks around writes (`sql.Store` has
    each as a no-op) and its staged vectors (a re-embedding's, removed with their rows)."""

    @property
    def staged(self) -> StagedVectors: ...

    def before_insert(self) -> None: ...

    def after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None: ...

    def after_vectors(self) -> None: ...

    def after_remove(self) -> None: ...

    def erased(self, scope: str | None = None) -> None: ...

    def size_bytes(self) -> int | None: ...


class Memories:
    """The `memories` table's reads and writes."""

    def __init__(self, store: MemoryStore):
        self._store = store
        self._map = RowMap(store.dialect, MEMORIES)
        self._columns = ", ".join(f"m.{c}" for c in MEMORIES.fields)

    def _where(self, filters: Filters) -> tuple[str, list[Any]]:
        return where(filters, self._store.dialect, "m")

    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        return self._map.read(MemoryRecord, row)

    # -- writes -------------------------------------------------------------------------
    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        s, to_row = self._store, self._map.row
        vector = s.dialect.to_db["vector"]
        # generators: each row is bound and dropped, not kept (a batch's lists kept the garbage collector busy)
        rows = ((*to_row(r), None if vectors is None else vector(vectors[i])) for i, r in enumerate(records))
        with s.transaction():
            s.before_insert()
            s.copy_in(MEMORIES, (*self._map.fields, "embedding"), rows)
            s.after_insert(records, vectors)

    def update(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        """Replace every field of `record` (by id); replace the vector when one is given."""
        s, p = self._store, self._store.dialect.p
        row = self._map.row(record)
        assignments = ", ".join(f"{c} = {p}" for c in self._map.fields[1:])
        params: list[Any] = row[1:]
        if vector is not None:
            assignments += f", embedding = {p}"
            params.append(s.dialect.to_db["vector"](vector))
        with s.transaction():
            s.run(f"UPDATE memories SET {assignments} WHERE id = {p}", (*params, record.id))

    def set_vectors(self, ids: list[str], vectors: np.ndarray, model: str, confirm: Callable[[], None] | None = None) -> None:
        """Give rows written without a vector theirs (a row that got one meanwhile keeps it); `confirm`
        runs after, in the transaction, and may refuse the change by raising."""
        s = self._store
        p, vector = s.dialect.p, s.dialect.to_db["vector"]
        with s.transaction():  # rows in id order, as `remove` takes them: two writers may wait, never deadlock
            s.run_many(
                f"UPDATE memories SET embedding = {p}, embedding_model = {p} WHERE id = {p} AND embedding IS NULL",
                sorted(((vector(v), model, i) for i, v in zip(ids, vectors)), key=lambda row: row[2]),
            )
            if confirm is not None:
                confirm()
        # after COMMIT: an index built while this transaction held its rows could deadlock with another writer
        s.after_vectors()

    def put_windows(self, windows: list[MemoryRecord], vectors: np.ndarray, messages: list[str]) -> None:
        """The windows of these messages, with their vectors, in place of any they had. Only of messages still
        stored (locked until the windows are in, on PostgreSQL): one deleted or erased while its windows were
        embedded leaves none, where nothing would find them to remove."""
        with self._store.transaction():
            self._remove_windows(messages)
            live = self._live_messages(messages)
            keep = [n for n, w in enumerate(windows) if w.source_id in live]
            if keep:
                self.insert([windows[n] for n in keep], vectors[keep])

    def _live_messages(self, ids: list[str]) -> set[str]:
        s = self._store
        live: set[str] = set()
        for chunk in chunks(sorted(ids)):
            these, params = s.dialect.one_of("id", chunk, "uuid")
            live.update(str(r[0]) for r in s.run(
                f"SELECT id FROM memories WHERE {these} AND kind = 'message' ORDER BY id{s.dialect.for_update}", params))
        return live

    def _remove_windows(self, messages: list[str]) -> list[str]:
        """In a transaction: delete the windows of these rows; their ids (their staged vectors go with them)."""
        s = self._store
        gone: list[str] = []
        for chunk in chunks(sorted(messages)):
            marks = s.dialect.marks(len(chunk))
            ids = [str(r[0]) for r in s.run(f"SELECT id FROM memories WHERE source_id IN ({marks}) AND kind = 'window'", chunk)]
            if ids:
                s.run(f"DELETE FROM memories WHERE source_id IN ({marks}) AND kind = 'window'", chunk)
                gone += ids
        return gone

    def remove(self, ids: list[str]) -> None:
        """Hard delete: the row, its windows, their vectors and index entries are gone."""
        s = self._store
        with s.transaction():
            windows = self._remove_windows(ids)
            for chunk in chunks(sorted(ids)):
                these = f"id IN ({s.dialect.marks(len(chunk))})"
                # locked in id order, as `set_vectors` takes rows: writers wait, never deadlock (a DELETE locks
                # rows in the order its scan meets them)
                s.run(f"SELECT id FROM memories WHERE {these} ORDER BY id{s.dialect.for_update}", chunk)
                s.run(f"DELETE FROM memories WHERE {these}", chunk)
                s.staged.remove(chunk)
            for chunk in chunks(windows):
                s.staged.remove(chunk)
            s.erased()
            s.after_remove()

    def mark_deleted(self, ids: list[str], when: datetime) -> None:
        """Soft-delete these memories (those not deleted yet) at `when`."""
        s, p = self._store, self._store.dialect.p
        ts = s.dialect.ts(when)
        with s.transaction():
            for chunk in chunks(ids):
                s.run(f"UPDATE memories SET deleted_at = {p}, updated_at = {p} "
                      f"WHERE id IN ({s.dialect.marks(len(chunk))}) AND deleted_at IS NULL", (ts, ts, *chunk))

    # -- reads --------------------------------------------------------------------------
    def fetch(self, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        for chunk in chunks(ids):
            these, params = self._store.dialect.one_of("m.id", chunk, "uuid")
            for row in self._store.run(f"SELECT {self._columns} FROM memories m WHERE {these}", params):
                record = self._record(row)
                out[record.id] = record
        return out

    def fetch_for_update(self, memory_id: str) -> MemoryRecord | None:
        """Inside a write transaction: the record as stored now, which no other writer can change
        before COMMIT. An update applies its changes to this, not to what it read before."""
        d = self._store.dialect
        rows = self._store.run(f"SELECT {self._columns} FROM memories m WHERE m.id = {d.p}{d.for_update}", (memory_id,))
        return self._record(rows[0]) if rows else None

    def ids_with_prefix(self, prefix: str, filters: Filters, limit: int = 6) -> list[str]:
        lo, hi = prefix_bounds(prefix)
        p = self._store.dialect.p
        where_, params = self._where(filters)
        rows = self._store.run(
            f"SELECT m.id FROM memories m WHERE m.id BETWEEN {p} AND {p} AND {where_} ORDER BY m.id LIMIT {p}",
            (lo, hi, *params, limit),
        )
        return [str(r[0]) for r in rows]

    def find(self, filters: Filters, *, limit: int, offset: int, order: Order) -> list[MemoryRecord]:
        p, oc = self._store.dialect.p, self._store.dialect.order_column
        where_, params = self._where(filters)
        if order == "recalls":
            return self._by_recalls(where_, params, limit, offset)
        by = {"newest": f"m.created_at DESC, m.{oc} DESC", "oldest": f"m.created_at ASC, m.{oc} ASC",
              "updated": f"m.updated_at DESC, m.{oc} DESC",
              "importance": f"m.importance DESC, m.created_at DESC, m.{oc} DESC"}[order]
        rows = self._store.run(f"SELECT {self._columns} FROM memories m WHERE {where_} ORDER BY {by} LIMIT {p} OFFSET {p}",
                               (*params, limit, offset))
        return [self._record(r) for r in rows]

    def _by_recalls(self, where_: str, params: list[Any], limit: int, offset: int) -> list[MemoryRecord]:
        """Most found by logged searches first, then those no search found, newest first. Bounded: the
        counting reads the search log's hits (kept `insight.search_log_days`), never sorts every memory,
        and the memories never found follow in the order of the time index."""
        p, oc = self._store.dialect.p, self._store.dialect.order_column
        found = self._store.run(
            f"SELECT {self._columns} FROM memories m JOIN (SELECT memory_id, count(*) AS n, max(at) AS last "
            f"FROM search_hits GROUP BY memory_id) r ON r.memory_id = m.id WHERE {where_} "
            f"ORDER BY r.n DESC, r.last DESC, m.{oc} DESC LIMIT {p} OFFSET {p}", (*params, limit, offset))
        if len(found) == limit:
            return [self._record(r) for r in found]
        skip = 0
        if not found:  # the page starts past the found ones: how many there are says where
            skip = offset - self._store.run(
                f"SELECT count(*) FROM memories m WHERE {where_} AND EXISTS "
                f"(SELECT 1 FROM search_hits h WHERE h.memory_id = m.id)", params)[0][0]
        rest = self._store.run(
            f"SELECT {self._columns} FROM memories m WHERE {where_} AND NOT EXISTS "
            f"(SELECT 1 FROM search_hits h WHERE h.memory_id = m.id) "
            f"ORDER BY m.created_at DESC, m.{oc} DESC LIMIT {p} OFFSET {p}", (*params, limit - len(found), skip))
        return [self._record(r) for r in (*found, *rest)]

    def added_per_period(self, filters: Filters, bucket: str, fact_source: str) -> list[tuple[str, str, str, int]]:
        """(day or month, category, source, rows) of the rows that pass `filters`, by when they were added;
        the source is the row's kind, or `fact` for a memory of `source_type` `fact_source`."""
        d = self._store.dialect
        where_, params = self._where(filters)
        period = d.period("m.created_at", bucket)
        rows = self._store.run(
            f"SELECT {period}, m.category, CASE WHEN m.kind = 'memory' AND m.source_type = {d.p} THEN 'fact' "
            f"ELSE m.kind END, count(*) FROM memories m WHERE {where_} GROUP BY 1, 2, 3 ORDER BY 1",
            (fact_source, *params))
        return [(r[0], r[1], r[2], int(r[3])) for r in rows]

    def iter_all(self, filters: Filters, batch: int = 500) -> Iterator[tuple[MemoryRecord, np.ndarray | None]]:
        from_vector = self._store.dialect.from_db["vector"]
        for row in self._pages(f"{self._columns}, m.embedding", filters, batch):
            yield self._record(row[:-1]), from_vector(row[-1])

    def vectors_by_scope(self, filters: Filters, batch: int = 5000) -> Iterator[tuple[str, str, np.ndarray]]:
        """(id, scope, vector) of every memory with a vector that passes `filters`: what a pass over a whole
        scope's vectors needs (insight's clusters), without building 100k records."""
        from_vector = self._store.dialect.from_db["vector"]
        for row in self._pages("m.id, m.scope, m.embedding", filters, batch, "m.embedding IS NOT NULL"):
            yield str(row[0]), row[1], from_vector(row[2])

    def _pages(self, columns: str, filters: Filters, batch: int, also: str = "1=1") -> Iterator[Sequence[Any]]:
        """Rows of `columns` that pass `filters`, read in keyset pages of `batch` in storage order."""
        p, oc = self._store.dialect.p, self._store.dialect.order_column
        where_, params = self._where(filters)
        last = 0
        while True:
            rows = self._store.run(
                f"SELECT m.{oc}, {columns} FROM memories m WHERE m.{oc} > {p} AND {where_} AND {also} "
                f"ORDER BY m.{oc} LIMIT {p}",
                (last, *params, batch),
            )
            if not rows:
                return
            for row in rows:
                yield row[1:]
            last = rows[-1][0]

    def ids(self, filters: Filters) -> list[str]:
        """The ids of every memory that passes `filters`, oldest first."""
        where_, params = self._where(filters)
        oc = self._store.dialect.order_column
        return [str(r[0]) for r in self._store.run(f"SELECT m.id FROM memories m WHERE {where_} ORDER BY m.{oc}", params)]

    def owned(self, column: str, owner: str, scope: str, kind: str = "memory") -> list[Owned]:
        """Every row of one kind of one person, deleted and expired ones included: those it owns
        (`column` is user_id or agent_id) in any scope, and any in its own scope."""
        if column not in ("user_id", "agent_id"):
            raise ValueError(f"not an owner column: {column}")
        p = self._store.dialect.p
        rows = self._store.run(f"SELECT id, scope, user_id, agent_id FROM memories WHERE ({column} = {p} OR scope = {p}) "
                               f"AND kind = {p}", (owner, scope, kind))
        return [Owned(str(r[0]), r[1], r[2], r[3]) for r in rows]

    def count(self, filters: Filters) -> int:
        where_, params = self._where(filters)
        return self._store.run(f"SELECT count(*) FROM memories m WHERE {where_}", params)[0][0]

    def latest_sessions(self, filters: Filters, *, limit: int) -> list[tuple[str, str | None]]:
        """The conversations (scope, session) of the rows these filters pass, the one with the newest row first
        (a session of `None`: rows of no session)."""
        where_, params = self._where(filters)
        rows = self._store.run(
            f"SELECT m.scope, m.session_id FROM memories m WHERE {where_} GROUP BY m.scope, m.session_id "
            f"ORDER BY max(m.created_at) DESC, m.scope, m.session_id LIMIT {self._store.dialect.p}", (*params, limit))
        return [(r[0], r[1]) for r in rows]

    def session_neighbors(self, ids: list[str], filters: Filters) -> dict[str, list[str]]:
        """For each memory, the turns just before and after it in its scope and session that pass
        `filters`: two index seeks per memory on (session_id, created_at), whatever the session's length."""
        where_, params = self._where(filters)
        oc = self._store.dialect.order_column
        same = "m.session_id = h.session_id AND m.scope = h.scope"
        # the bare bound on the time is implied by the rest, and is what the index seeks to: without it the seek
        # starts at the session's end and tests every turn on the way (PostgreSQL: 1.7 against 1.1 ms a search)
        before = f"m.created_at <= h.created_at AND (m.created_at < h.created_at OR (m.created_at = h.created_at AND m.{oc} < h.{oc}))"
        after = f"m.created_at >= h.created_at AND (m.created_at > h.created_at OR (m.created_at = h.created_at AND m.{oc} > h.{oc}))"
        out: dict[str, list[str]] = {}
        for chunk in chunks(ids):
            hits, ids_params = self._store.dialect.one_of("h.id", chunk, "uuid")
            rows = self._store.run(
                f"SELECT h.id, (SELECT m.id FROM memories m WHERE {same} AND {before} AND {where_} "
                f"ORDER BY m.created_at DESC, m.{oc} DESC LIMIT 1), "
                f"(SELECT m.id FROM memories m WHERE {same} AND {after} AND {where_} "
                f"ORDER BY m.created_at, m.{oc} LIMIT 1) "
                f"FROM memories h WHERE {hits} AND h.session_id IS NOT NULL",
                (*params, *params, *ids_params),
            )
            for memory_id, prev, nxt in rows:
                out[str(memory_id)] = [str(n) for n in (prev, nxt) if n is not None]
        return out

    def purgeable(self, before: datetime) -> list[str]:
        """Memories soft-deleted, or expired, at or before `before`."""
        d = self._store.dialect
        rows = self._store.run(f"SELECT id FROM memories WHERE (deleted_at IS NOT NULL AND deleted_at <= {d.p}) "
                               f"OR (expires_at IS NOT NULL AND expires_at <= {d.p})", (d.ts(before), d.ts(before)))
        return [str(r[0]) for r in rows]

    def unembedded(self, limit: int) -> list[tuple[str, str, str, str | None]]:
        """(id, text to embed, kind, source id: a message's role) of rows written without a vector (messages,
        chunks), oldest first: the content, and the row's keys if it has them (`MemoryRecord.embedded_text`)."""
        rows = self._store.run(f"SELECT id, content, keys, kind, source_id FROM memories WHERE embedding IS NULL AND "
                               f"{_UNSEALED} ORDER BY created_at LIMIT {self._store.dialect.p}", (limit,))
        return [(str(r[0]), embedded_text(r[1], r[2]), r[3], r[4]) for r in rows]

    def count_unembedded(self) -> int:
        return int(self._store.run(f"SELECT count(*) FROM memories WHERE embedding IS NULL AND {_UNSEALED}")[0][0])

    # -- secrets (`engine/_secrets.py`) -------------------------------------------------
    def forget_text(self, ids: list[str]) -> None:
        """In a write transaction that replaced these rows' text by its sealed copy (`sealing.py`): their
        vectors, made of the text, go, and so does any copy of the old text the backend keeps (as after a
        hard delete: text index segments, pages in a write-ahead log)."""
        s = self._store
        with s.transaction():
            for chunk in chunks(sorted(ids)):
                s.run(f"UPDATE memories SET embedding = NULL, embedding_model = NULL "
                      f"WHERE id IN ({s.dialect.marks(len(chunk))})", chunk)
            for chunk in chunks(self._remove_windows(ids)):
                s.staged.remove(chunk)
            s.erased()
            s.after_remove()

    def sealed_tokens(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """(id, sealed text) of the encrypted secrets past id `after` (None: from the first), in id order (a rotation's batches)."""
        p = self._store.dialect.p
        past = "" if after is None else f" AND id > {p}"
        return [(str(r[0]), r[1]) for r in self._store.run(
            f"SELECT id, sealed FROM memories WHERE sealed IS NOT NULL{past} ORDER BY id LIMIT {p}",
            (*([] if after is None else [after]), limit))]

    def reseal(self, rows: list[tuple[str, str, str]]) -> None:
        """(id, old sealed text, new one): each row takes the new one unless it changed meanwhile."""
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            s.run_many(f"UPDATE memories SET sealed = {p} WHERE id = {p} AND sealed = {p}", [(new, i, old) for i, old, new in rows])

    def count_secrets(self) -> tuple[int, int]:
        """Secret memories stored encrypted, and those stored in plain text before encryption."""
        sealed, unsealed = self._store.run(
            "SELECT count(sealed), count(*) - count(sealed) FROM memories WHERE visibility = 'secret' AND kind = 'memory'")[0]
        return int(sealed or 0), int(unsealed or 0)

    def unsealed_secrets(self, limit: int) -> list[MemoryRecord]:
        """Secret memories stored in plain text (before encryption), oldest first."""
        s = self._store
        rows = s.run(f"SELECT {self._columns} FROM memories m WHERE m.visibility = 'secret' AND m.kind = 'memory' "
                     f"AND m.sealed IS NULL ORDER BY m.{s.dialect.order_column} LIMIT {s.dialect.p}", (limit,))
        return [self._record(r) for r in rows]

    def other_vectors(self, model: str, dims: int) -> tuple[int, int]:
        """Rows whose vector another model made, and vectors of other dimensions than `dims`: a mixed
        store (both 0 when every vector is the store's model's)."""
        p = self._store.dialect.p
        dims_of = self._store.dialect.vector_dims.format("embedding")
        other_model, other_dims = self._store.run(
            f"SELECT (SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND embedding_model <> {p}), "
            f"(SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND {dims_of} <> {p})",
            (model, dims),
        )[0]
        return int(other_model), int(other_dims)

    def stats(self) -> StoreStats:
        """Counts from indexes only: each kind's rows grouped, minus the (few) deleted or expired rows.
        The totals are memories'; `by_kind` counts the live rows of every kind."""
        s, d = self._store, self._store.dialect
        now = d.ts(utcnow())
        users, oldest, newest = s.run(
            "SELECT (SELECT count(DISTINCT user_id) FROM memories), (SELECT min(created_at) FROM memories), "
            "(SELECT max(created_at) FROM memories)",
        )[0]
        # two conditions, each served by its own partial index (an OR of them would scan the table)
        inactive = {"deleted": ("deleted_at IS NOT NULL", ()),
                    "expired": (f"expires_at IS NOT NULL AND expires_at <= {d.p} AND deleted_at IS NULL", (now,))}
        grouped: dict[str, dict[tuple[str, str], int]] = {}
        gone: dict[str, dict[str, int]] = {}
        for column in ("category", "scope"):
            counts = {(k, v): n for k, v, n in s.run(f"SELECT kind, {column}, count(*) FROM memories GROUP BY kind, {column}")}
            for name, (condition, params) in inactive.items():  # few rows: counted here, so no planner can trade the index for a sort
                for kind, value in s.run(f"SELECT kind, {column} FROM memories WHERE {condition}", params):
                    counts[(kind, value)] -= 1
                    if column == "category":
                        gone.setdefault(name, {}).setdefault(kind, 0)
                        gone[name][kind] += 1
            grouped[column] = counts
        by_kind: dict[str, int] = {}
        for (kind, _), n in grouped["category"].items():
            by_kind[kind] = by_kind.get(kind, 0) + n
        deleted, expired = gone.get("deleted", {}).get("memory", 0), gone.get("expired", {}).get("memory", 0)

        def memories_by(column: str) -> dict[str, int]:
            rows = ((v, n) for (k, v), n in grouped[column].items() if k == "memory" and n)
            return dict(sorted(rows, key=lambda kv: (-kv[1], kv[0])))

        from_ts = d.from_db["time"]
        return StoreStats(
            total=by_kind.get("memory", 0) + deleted + expired, deleted=deleted, expired=expired,
            by_category=memories_by("category"), by_scope=memories_by("scope"),
            by_kind={k: n for k, n in sorted(by_kind.items()) if n and k != "window"}, users=users,  # a window is part of a message
            oldest=from_ts(oldest), newest=from_ts(newest), size_bytes=s.size_bytes(),
        )
