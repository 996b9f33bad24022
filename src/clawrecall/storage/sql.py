"""The store: one class every backend extends, holding all the SQL they share (records,
history, startup entries, metadata, migrations).

A backend supplies a connection (`run`, `run_many`, `rowcount`, `transaction`: the `Executor` the table modules take), its `Dialect` (parameter
mark, types, value adapters), the SQL of its migration steps, and its candidate legs. Shared SQL
is composed with the dialect's parameter mark and sent to the driver as written.
"""

from __future__ import annotations

import builtins
import json
from abc import ABC, abstractmethod
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from .._time import utcnow
from ..errors import StorageError
from ..models import HistoryEntry, MemoryRecord, StartupEntry, embedded_text
from . import migrations
from .base import Candidate, HistoryDraft, Order, Owned, StoreStats, chunks
from .dialect import Dialect, RowMap, prefix_bounds
from .filters import Filters, checked_in_sql, where
from .insight import SearchLog
from .knowledge import Occurrences
from .schema import HISTORY, MEMORIES, STARTUP
from .text import short_cjk_words
from .jobs import Jobs
from .record import Files, Messages, Segments
from .staging import StagedVectors
from .tokens import ApiTokens

if TYPE_CHECKING:
    import numpy as np

    from .vector_index import VectorIndex


T = TypeVar("T")

#: what a `HistoryDraft` holds: every column but the id the database gives
HISTORY_DRAFT_FIELDS = tuple(c for c in HISTORY.fields if HISTORY.column(c).type != "serial")


class Store(ABC):
    """Records in and out, three candidate legs for retrieval (vector, full-text, trigram),
    history, startup entries, API tokens (`api_tokens`) and a little metadata. Everything above
    it (validation, scopes, dedup, fusion, scoring) is shared by all backends."""

    backend: str
    location: str
    dialect: Dialect
    #: old `meta.schema_version` numbers -> the core steps they stand for
    legacy_versions: dict[int, tuple[str, ...]]

    def __init__(self) -> None:
        """The row mappings of the backend's dialect (a backend's __init__ calls this first)."""
        d = self.dialect
        self._memories = RowMap(d, MEMORIES)
        self._memory_columns = ", ".join(f"m.{c}" for c in MEMORIES.fields)
        self._history = RowMap(d, HISTORY)
        self._history_drafts = RowMap(d, HISTORY, HISTORY_DRAFT_FIELDS, json_text=True)
        self._startup = RowMap(d, STARTUP)
        self.api_tokens = ApiTokens(self)
        self.messages = Messages(self)
        self.segments = Segments(self)
        self.files = Files(self)
        self.jobs = Jobs(self)
        self.occurrences = Occurrences(self)
        self.staged = StagedVectors(self)
        self.search_log = SearchLog(self)

    # -- what a backend provides -------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested calls join the outer one."""

    def pinned(self) -> AbstractContextManager[None]:
        """Statements run inside it share one connection (a search's reads after its legs): a backend with a
        pool lends one once instead of once per statement. A transaction inside it uses that connection."""
        return nullcontext()

    def beside(self, fn: Callable[[], T], filters: Filters) -> Callable[[], T]:
        """Start `fn` (reads only, of the rows `filters` pass) on a connection of its own while this thread
        goes on, where the backend serves two readers at once and the read is worth a thread; call the
        result for `fn`'s value. Elsewhere, and inside a transaction or `pinned` block (whose writes another
        connection would not see), `fn` runs now."""
        done: Future[T] = Future()
        try:
            done.set_result(fn())
        except Exception as exc:  # raised where the value is asked for, as from a thread
            done.set_exception(exc)
        return done.result

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[Callable[[str], Iterator[tuple]]]:
        """One consistent read of the whole store while writers go on (a backup): yields `read(sql)`,
        whose rows all come from the same moment, streamed."""

    @abstractmethod
    def integrity_problems(self) -> list[str]:
        """What the backend's own consistency checks find wrong, one line each; empty when the store
        is sound. `clawrecall doctor` runs it: a damaged store can still answer `stats` correctly."""

    @abstractmethod
    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Execute one statement (joining the current transaction if any); rows for a query, else []."""

    @abstractmethod
    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def rowcount(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    @abstractmethod
    def lock_schema(self) -> None:
        """Inside the migration transaction: keep other processes from migrating at the same time."""

    @abstractmethod
    def table_exists(self, name: str) -> bool: ...

    @abstractmethod
    def migration_steps(self) -> dict[str, list[str]]:
        """This backend's SQL for each migration step it has work for (see `migrations.py`)."""

    @abstractmethod
    def migration_extras(self, migration_set: str) -> tuple[list[str], list[str]]:
        """What installing a migration set runs before and after creating its declared tables
        (extensions; full-text tables, triggers, functions)."""

    @abstractmethod
    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]: ...

    def vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        """Nearest memories by cosine similarity (score = cosine). A search of messages also searches the
        windows of the long ones in the same scopes (`conversations/windows.py`): a message found by a
        window scores that window's cosine, if it is its best, and names it (`Candidate.via`)."""
        with self.pinned():  # one pooled connection for the whole leg (PostgreSQL)
            found = self._vector_candidates(query, filters, k)
            if "message" not in filters.kinds or not self._has_windows(filters.scopes):
                return found
            parts = self._vector_candidates(query, Filters(scopes=filters.scopes, kinds=("window",)), k)
            of = self._window_messages([c.id for c in parts], filters)
        best = {c.id: c for c in found}
        for part in parts:
            message = of.get(part.id)
            if message is not None and (message not in best or part.score > best[message].score):
                best[message] = Candidate(message, part.score, via=part.id)
        return sorted(best.values(), key=lambda c: c.score, reverse=True)[:k]

    @abstractmethod
    def _vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        """The backend's nearest rows of the kinds `filters` name."""

    def _has_windows(self, scopes: list[str] | None) -> bool:
        """Whether any of these scopes holds a window: one index seek (kind, scope)."""
        where = "" if scopes is None else f" AND scope IN ({self.dialect.marks(len(scopes))})"
        return bool(self.run(f"SELECT 1 FROM memories WHERE kind = 'window'{where} LIMIT 1", scopes or []))

    def _window_messages(self, ids: list[str], filters: Filters) -> dict[str, str]:
        """The message each of these windows (ids the window search gave) is part of, if it passes `filters`:
        a message's session, role, times and deletion are its own row's, checked on it (one statement)."""
        where, params = self.where(filters, "m")
        out: dict[str, str] = {}
        for chunk in chunks(ids):
            these, ids_params = self.dialect.one_of("w.id", chunk, "uuid")
            out.update((str(r[0]), str(r[1])) for r in self.run(
                f"SELECT w.id, m.id FROM memories w JOIN memories m ON m.id = CAST(w.source_id AS {self.dialect.types['uuid']}) "
                f"WHERE {these} AND {where}", (*ids_params, *params)))  # no kind test: SQLite would scan every window
        return out

    def put_windows(self, windows: list[MemoryRecord], vectors: np.ndarray, messages: list[str]) -> None:
        """The windows of these messages, with their vectors, in place of any they had. Only of messages still
        stored (locked until the windows are in, on PostgreSQL): one deleted or erased while its windows were
        embedded leaves none, where nothing would find them to remove."""
        with self.transaction():
            self._remove_windows(messages)
            live = self._live_messages(messages)
            keep = [n for n, w in enumerate(windows) if w.source_id in live]
            if keep:
                self.insert([windows[n] for n in keep], vectors[keep])

    def _live_messages(self, ids: list[str]) -> set[str]:
        live: set[str] = set()
        for chunk in chunks(sorted(ids)):
            these, params = self.dialect.one_of("id", chunk, "uuid")
            live.update(str(r[0]) for r in self.run(
                f"SELECT id FROM memories WHERE {these} AND kind = 'message'{self.dialect.for_update}", params))
        return live

    def _remove_windows(self, messages: list[str]) -> list[str]:
        """In a transaction: delete the windows of these rows; their ids (a backend drops what it keeps of them)."""
        gone: list[str] = []
        for chunk in chunks(sorted(messages)):
            marks = self.dialect.marks(len(chunk))
            ids = [str(r[0]) for r in self.run(
                f"SELECT id FROM memories WHERE source_id IN ({marks}) AND kind = 'window'", chunk)]
            if ids:
                self.run(f"DELETE FROM memories WHERE source_id IN ({marks}) AND kind = 'window'", chunk)
                gone += ids
        return gone

    @abstractmethod
    def nearest(self, vectors: np.ndarray, scope: str, min_score: float) -> list[Candidate | None]:
        """For each vector, the most similar live memory of one scope if its cosine reaches
        `min_score`, else None (batch deduplication)."""

    @abstractmethod
    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        """Full-text (BM25) matches (score = positive BM25)."""

    @abstractmethod
    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        """Trigram matches: typo-tolerant, and the leg that finds CJK text without word breaks."""

    @abstractmethod
    def drop_vector_index(self) -> None:
        """Before re-embedding: forget any index tied to the old vectors' dimensions."""

    @abstractmethod
    def build_vector_index(self) -> None:
        """After re-embedding or a deferred bulk load: index the vectors (now, if not yet done)."""

    def lock_writes(self) -> None:
        """In a write transaction: no other writer may change `memories` until COMMIT (reads go on)."""

    def swap_staged_vectors(self, target: str, model: str) -> int:
        """In a write transaction holding `lock_writes`, with every row staged for `target`: the staged
        vectors (and `model`) become the rows' own (`staging.py`). How many rows changed; the index
        follows after COMMIT."""
        return self.staged.swap(target, model)

    def other_vectors(self, model: str, dims: int) -> tuple[int, int]:
        """Rows whose vector another model made, and vectors of other dimensions than `dims`: a mixed
        store (both 0 when every vector is the store's model's)."""
        p = self.dialect.p
        dims_of = self.dialect.vector_dims.format("embedding")
        other_model, other_dims = self.run(
            f"SELECT (SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND embedding_model <> {p}), "
            f"(SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND {dims_of} <> {p})",
            (model, dims),
        )[0]
        return int(other_model), int(other_dims)

    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        """Bulk loads: write without maintaining an on-disk vector index, build it once at the end.

        `rebuild` drops an existing index first. Backends without such an index do nothing.
        """
        yield

    # -- migrations (migrations.py) ------------------------------------------------------
    def schema_version(self) -> int:
        """How many migration steps the store has; `migrations.latest()` when up to date."""
        return migrations.version(self)

    def pending_migrations(self) -> list[migrations.Step]:
        return migrations.pending(self)

    def migrate(self) -> list[str]:
        """Apply pending migration steps; safe when several processes open at once."""
        return migrations.migrate(self)

    # -- metadata -----------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.run(f"SELECT value FROM meta WHERE key = {self.dialect.p}", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        p = self.dialect.p
        with self.transaction():
            self.run(
                f"INSERT INTO meta (key, value) VALUES ({p}, {p}) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writes -------------------------------------------------------------------------
    def insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        d, to_row = self.dialect, self._memories.row
        vector = d.to_db["vector"]
        # generators: each row is bound and dropped, not kept (a batch's lists kept the garbage collector busy)
        rows = ((*to_row(r), None if vectors is None else vector(vectors[i])) for i, r in enumerate(records))
        with self.transaction():
            self.run_many(
                f"INSERT INTO memories ({self._memories.columns}, embedding) "
                f"VALUES ({d.marks(len(self._memories.fields) + 1)})",
                rows,
            )
            self._after_insert(records, vectors)

    def _after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        """Backends hook work on the rows just inserted (text indexing, lazy index creation)."""

    def update(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        """Replace every field of `record` (by id); replace the vector when one is given."""
        p = self.dialect.p
        row = self._memories.row(record)
        assignments = ", ".join(f"{c} = {p}" for c in self._memories.fields[1:])
        params: list[Any] = row[1:]
        if vector is not None:
            assignments += f", embedding = {p}"
            params.append(self.dialect.to_db["vector"](vector))
        with self.transaction():
            self.run(f"UPDATE memories SET {assignments} WHERE id = {p}", (*params, record.id))

    def unembedded(self, limit: int) -> list[tuple[str, str, str]]:
        """(id, text to embed, kind) of rows written without a vector (messages, chunks), oldest first: the
        content, and the row's keys if it has them (`MemoryRecord.embedded_text`)."""
        rows = self.run(f"SELECT id, content, keys, kind FROM memories WHERE embedding IS NULL ORDER BY created_at "
                         f"LIMIT {self.dialect.p}", (limit,))
        return [(str(r[0]), embedded_text(r[1], r[2]), r[3]) for r in rows]

    def count_unembedded(self) -> int:
        return int(self.run("SELECT count(*) FROM memories WHERE embedding IS NULL")[0][0])

    def set_vectors(self, ids: list[str], vectors: np.ndarray, model: str, confirm: Callable[[], None] | None = None) -> None:
        """Give rows written without a vector theirs (a row that got one meanwhile keeps it); `confirm`
        runs after, in the transaction, and may refuse the change by raising."""
        p, vector = self.dialect.p, self.dialect.to_db["vector"]
        with self.transaction():  # rows in id order, as `remove` takes them: two writers may wait, never deadlock
            self.run_many(
                f"UPDATE memories SET embedding = {p}, embedding_model = {p} WHERE id = {p} AND embedding IS NULL",
                sorted(((vector(v), model, i) for i, v in zip(ids, vectors)), key=lambda row: row[2]),
            )
            if confirm is not None:
                confirm()
        # after COMMIT: an index built while this transaction held its rows could deadlock with another writer
        self._vectors_arrived()

    def _vectors_arrived(self) -> None:
        """Backends hook work on vectors given to stored rows (the first ones: an index to create)."""

    def remove(self, ids: list[str]) -> None:
        """Hard delete: the row, its windows, their vectors and index entries are gone."""
        with self.transaction():
            windows = self._remove_windows(ids)
            for chunk in chunks(sorted(ids)):  # in id order, as `set_vectors` takes rows: writers wait, never deadlock
                self.run(f"DELETE FROM memories WHERE id IN ({self.dialect.marks(len(chunk))})", chunk)
                self.staged.remove(chunk)
            for chunk in chunks(windows):
                self.staged.remove(chunk)
            self.erased()

    def erased(self, scope: str | None = None) -> None:
        """In a write transaction that removed personal data (`scope`: a person's, erased whole): a backend
        that keeps copies of written pages (SQLite's WAL) drops them after COMMIT."""

    def mark_deleted(self, ids: list[str], when: datetime) -> None:
        """Soft-delete these memories (those not deleted yet) at `when`."""
        ts = self.dialect.ts(when)
        with self.transaction():
            for chunk in chunks(ids):
                self.run(
                    f"UPDATE memories SET deleted_at = {self.dialect.p}, updated_at = {self.dialect.p} "
                    f"WHERE id IN ({self.dialect.marks(len(chunk))}) AND deleted_at IS NULL",
                    (ts, ts, *chunk),
                )

    def add_history(self, entries: list[HistoryDraft]) -> None:
        drafts = self._history_drafts
        with self.transaction():
            self.run_many(
                f"INSERT INTO history ({drafts.columns}) VALUES ({self.dialect.marks(len(drafts.fields))})",
                (drafts.row(e) for e in entries),
            )

    def erase_history(self, ids: list[str]) -> None:
        """Blank the before/after of every history row of these memories (GDPR forget)."""
        with self.transaction():
            for chunk in chunks(ids):
                self.run(
                    f"UPDATE history SET before = NULL, after = NULL WHERE memory_id IN ({self.dialect.marks(len(chunk))})",
                    chunk,
                )

    def history_actors(self) -> list[str]:
        """Every distinct actor history names (a few per user and agent)."""
        return [r[0] for r in self.run("SELECT DISTINCT actor FROM history WHERE actor IS NOT NULL")]

    def count_history_by_actor(self, actors: list[str]) -> int:
        if not actors:
            return 0
        return self.run(f"SELECT count(*) FROM history WHERE actor IN ({self.dialect.marks(len(actors))})", actors)[0][0]

    def rename_history_actor(self, old: str, new: str) -> int:
        """Name another actor on every history row of `old`; how many rows."""
        p = self.dialect.p
        with self.transaction():
            return self.rowcount(f"UPDATE history SET actor = {p} WHERE actor = {p}", (new, old))

    def count_history(self, ids: list[str]) -> int:
        """History rows of these memories."""
        return sum(
            self.run(f"SELECT count(*) FROM history WHERE memory_id IN ({self.dialect.marks(len(chunk))})", chunk)[0][0]
            for chunk in chunks(ids)
        )

    # -- reads --------------------------------------------------------------------------
    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        return self._memories.read(MemoryRecord, row)

    def fetch(self, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        for chunk in chunks(ids):
            where, params = self.dialect.one_of("m.id", chunk, "uuid")
            for row in self.run(f"SELECT {self._memory_columns} FROM memories m WHERE {where}", params):
                record = self._record(row)
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
        p = self.dialect.p
        where, params = self.where(filters, "m")
        patterns = ["%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for w in words]
        contains = [rf"m.content LIKE {p} ESCAPE '\'"] * len(words)
        count = " + ".join(f"(CASE WHEN {c} THEN 1 ELSE 0 END)" for c in contains)
        rows = self.run(
            f"SELECT m.id, {count} AS n FROM memories m WHERE ({' OR '.join(contains)}) AND {where} "
            f"ORDER BY n DESC, m.created_at DESC LIMIT {p}",
            (*patterns, *patterns, *params, k),
        )
        top = max((h.score for h in hits), default=1.0)
        scores = {h.id: h.score for h in hits}
        for memory_id, n in rows:
            scores[str(memory_id)] = max(scores.get(str(memory_id), 0.0), top * n / len(words))
        return [Candidate(i, s) for i, s in sorted(scores.items(), key=lambda x: x[1], reverse=True)[:k]]

    def fetch_for_update(self, memory_id: str) -> MemoryRecord | None:
        """Inside a write transaction: the record as stored now, which no other writer can change
        before COMMIT. An update applies its changes to this, not to what it read before."""
        d = self.dialect
        rows = self.run(f"SELECT {self._memory_columns} FROM memories m WHERE m.id = {d.p}{d.for_update}", (memory_id,))
        return self._record(rows[0]) if rows else None

    def ids_with_prefix(self, prefix: str, filters: Filters, limit: int = 6) -> list[str]:
        lo, hi = prefix_bounds(prefix)
        p = self.dialect.p
        where, params = self.where(filters, "m")
        rows = self.run(
            f"SELECT m.id FROM memories m WHERE m.id BETWEEN {p} AND {p} AND {where} ORDER BY m.id LIMIT {p}",
            (lo, hi, *params, limit),
        )
        return [str(r[0]) for r in rows]

    def list(self, filters: Filters, *, limit: int, offset: int, order: Order) -> list[MemoryRecord]:
        p, oc = self.dialect.p, self.dialect.order_column
        where, params = self.where(filters, "m")
        by = {"newest": f"m.created_at DESC, m.{oc} DESC", "oldest": f"m.created_at ASC, m.{oc} ASC",
              "updated": f"m.updated_at DESC, m.{oc} DESC"}[order]
        rows = self.run(f"SELECT {self._memory_columns} FROM memories m WHERE {where} ORDER BY {by} LIMIT {p} OFFSET {p}",
                         (*params, limit, offset))
        return [self._record(r) for r in rows]

    def iter_all(self, filters: Filters, batch: int = 500) -> Iterator[tuple[MemoryRecord, np.ndarray | None]]:
        p, oc = self.dialect.p, self.dialect.order_column
        from_vector = self.dialect.from_db["vector"]
        where, params = self.where(filters, "m")
        last = 0
        while True:
            rows = self.run(
                f"SELECT m.{oc}, {self._memory_columns}, m.embedding FROM memories m WHERE m.{oc} > {p} AND {where} "
                f"ORDER BY m.{oc} LIMIT {p}",
                (last, *params, batch),
            )
            if not rows:
                return
            for row in rows:
                yield self._record(row[1:-1]), from_vector(row[-1])
            last = rows[-1][0]

    def ids(self, filters: Filters) -> builtins.list[str]:
        """The ids of every memory that passes `filters`, oldest first."""
        where, params = self.where(filters, "m")
        return [str(r[0]) for r in self.run(f"SELECT m.id FROM memories m WHERE {where} ORDER BY m.{self.dialect.order_column}", params)]

    def owned(self, column: str, owner: str, scope: str, kind: str = "memory") -> builtins.list[Owned]:
        """Every row of one kind of one person, deleted and expired ones included: those it owns
        (`column` is user_id or agent_id) in any scope, and any in its own scope."""
        if column not in ("user_id", "agent_id"):
            raise ValueError(f"not an owner column: {column}")
        p = self.dialect.p
        rows = self.run(f"SELECT id, scope, user_id, agent_id FROM memories WHERE ({column} = {p} OR scope = {p}) "
                         f"AND kind = {p}", (owner, scope, kind))
        return [Owned(str(r[0]), r[1], r[2], r[3]) for r in rows]

    def count(self, filters: Filters) -> int:
        where, params = self.where(filters, "m")
        return self.run(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0]

    def latest_sessions(self, filters: Filters, *, limit: int) -> builtins.list[tuple[str, str | None]]:
        """The conversations (scope, session) of the rows these filters pass, the one with the newest row first
        (a session of `None`: rows of no session)."""
        where, params = self.where(filters, "m")
        rows = self.run(f"SELECT m.scope, m.session_id FROM memories m WHERE {where} GROUP BY m.scope, m.session_id "
                         f"ORDER BY max(m.created_at) DESC, m.scope, m.session_id LIMIT {self.dialect.p}", (*params, limit))
        return [(r[0], r[1]) for r in rows]

    def stats(self) -> StoreStats:
        """Counts from indexes only: each kind's rows grouped, minus the (few) deleted or expired rows.
        The totals are memories'; `by_kind` counts the live rows of every kind."""
        d = self.dialect
        now = d.ts(utcnow())
        users, oldest, newest = self.run(
            "SELECT (SELECT count(DISTINCT user_id) FROM memories), (SELECT min(created_at) FROM memories), "
            "(SELECT max(created_at) FROM memories)",
        )[0]
        # two conditions, each served by its own partial index (an OR of them would scan the table)
        inactive = {"deleted": ("deleted_at IS NOT NULL", ()),
                    "expired": (f"expires_at IS NOT NULL AND expires_at <= {d.p} AND deleted_at IS NULL", (now,))}
        grouped: dict[str, dict[tuple[str, str], int]] = {}
        gone: dict[str, dict[str, int]] = {}
        for column in ("category", "scope"):
            counts = {(k, v): n for k, v, n in self.run(f"SELECT kind, {column}, count(*) FROM memories GROUP BY kind, {column}")}
            for name, (condition, params) in inactive.items():  # few rows: counted here, so no planner can trade the index for a sort
                for kind, value in self.run(f"SELECT kind, {column} FROM memories WHERE {condition}", params):
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
            oldest=from_ts(oldest), newest=from_ts(newest), size_bytes=self._size_bytes(),
        )

    def _size_bytes(self) -> int | None:
        return None

    def local_folder(self) -> Path | None:
        """The folder a file-based store lives in (files that belong with it go there), else None."""
        return None

    def is_conflict(self, exc: BaseException) -> bool:
        """Whether `exc` is a unique-key violation (another writer stored the same row first)."""
        return False

    def history(self, memory_id: str) -> builtins.list[HistoryEntry]:
        rows = self.run(
            f"SELECT {self._history.columns} FROM history WHERE memory_id = {self.dialect.p} ORDER BY id", (memory_id,),
        )
        return [self._history.read(HistoryEntry, r) for r in rows]

    def history_after(self, after_id: int, limit: int) -> builtins.list[HistoryEntry]:
        """History rows after `after_id`, in id order: the change feed (`engine/_changes.py`). Ids are in
        commit order (PostgreSQL: `add_history` holds a lock from the id to the commit), so one read from a
        cursor misses nothing a later read would find."""
        p = self.dialect.p
        rows = self.run(f"SELECT {self._history.columns} FROM history WHERE id > {p} ORDER BY id LIMIT {p}", (after_id, limit))
        return [self._history.read(HistoryEntry, r) for r in rows]

    def history_last(self) -> int:
        """The newest history row's id (0: none): where a change feed that starts now starts."""
        return int(self.run("SELECT coalesce(max(id), 0) FROM history")[0][0])

    @abstractmethod
    def watch_history(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]:
        """Call `wake()` (from another thread) after history rows may have been committed, by this process
        or another; returns the function that stops it. A `wake` too many is harmless, one too few is not."""

    def unname_erasures(self, scope: str, agent_id: str | None, *, dry_run: bool) -> int:
        """Blank where an erased memory was (the `after` of its forget or purge row: scope, agent, level) when it
        names this person (its own scope, or as the agent that wrote it); how many rows (would be)."""
        rows = self.run("SELECT id, after FROM history WHERE action IN ('forget', 'purge') AND after IS NOT NULL")
        ids = [i for i, after in rows if (w := after if isinstance(after, dict) else json.loads(after)).get("scope") == scope
               or (agent_id is not None and w.get("agent_id") == agent_id)]
        if not dry_run:
            with self.transaction():
                for chunk in chunks(ids):
                    self.run(f"UPDATE history SET after = NULL WHERE id IN ({self.dialect.marks(len(chunk))})", chunk)
        return len(ids)

    def history_ids_with_prefix(self, prefix: str, limit: int = 6) -> builtins.list[str]:
        """Ids with history that start with `prefix`: an erased memory has no row left to resolve by."""
        lo, hi = prefix_bounds(prefix)
        p = self.dialect.p
        rows = self.run(
            f"SELECT DISTINCT memory_id FROM history WHERE memory_id BETWEEN {p} AND {p} ORDER BY memory_id LIMIT {p}",
            (lo, hi, limit),
        )
        return [str(r[0]) for r in rows]

    def purgeable(self, before: datetime) -> builtins.list[str]:
        """Memories soft-deleted, or expired, at or before `before`."""
        d = self.dialect
        rows = self.run(f"SELECT id FROM memories WHERE (deleted_at IS NOT NULL AND deleted_at <= {d.p}) "
                        f"OR (expires_at IS NOT NULL AND expires_at <= {d.p})", (d.ts(before), d.ts(before)))
        return [str(r[0]) for r in rows]

    def session_neighbors(self, ids: builtins.list[str], filters: Filters) -> dict[str, builtins.list[str]]:
        """For each memory, the turns just before and after it in its scope and session that pass
        `filters`: two index seeks per memory on (session_id, created_at), whatever the session's length."""
        where, params = self.where(filters, "m")
        oc = self.dialect.order_column
        same = "m.session_id = h.session_id AND m.scope = h.scope"
        before = f"(m.created_at < h.created_at OR (m.created_at = h.created_at AND m.{oc} < h.{oc}))"
        after = f"(m.created_at > h.created_at OR (m.created_at = h.created_at AND m.{oc} > h.{oc}))"
        out: dict[str, list[str]] = {}
        for chunk in chunks(ids):
            hits, ids_params = self.dialect.one_of("h.id", chunk, "uuid")
            rows = self.run(
                f"SELECT h.id, (SELECT m.id FROM memories m WHERE {same} AND {before} AND {where} "
                f"ORDER BY m.created_at DESC, m.{oc} DESC LIMIT 1), "
                f"(SELECT m.id FROM memories m WHERE {same} AND {after} AND {where} "
                f"ORDER BY m.created_at, m.{oc} LIMIT 1) "
                f"FROM memories h WHERE {hits} AND h.session_id IS NOT NULL",
                (*params, *params, *ids_params),
            )
            for memory_id, prev, nxt in rows:
                out[str(memory_id)] = [str(n) for n in (prev, nxt) if n is not None]
        return out

    def _index_candidates(
        self, index: VectorIndex, query: np.ndarray, filters: Filters, k: int, *, widen: bool = True
    ) -> builtins.list[Candidate] | None:
        """The k nearest rows of an in-memory index that pass `filters`. Filters the index does not carry
        are checked in SQL on its 4k nearest; with `widen`, on 16k, 64k… until k survive or all were seen
        (past the rows a large scope's nearest clusters hold, the index reads them all), else None when
        fewer than k survive the first round and more rows are left."""
        if not checked_in_sql(filters):
            return [Candidate(i, s) for i, s in index.search(query, k, filters)]
        want = k * 4
        while True:
            hits = index.search(query, want, filters)
            kept = self._filter_ids([i for i, _ in hits], filters)
            out = [Candidate(i, s) for i, s in hits if i in kept]
            if len(out) >= k or len(hits) < want:
                return out[:k]
            if not widen:
                return None
            want *= 4

    def _filter_ids(self, ids: builtins.list[str], filters: Filters) -> set[str]:
        """The subset of `ids` that pass `filters` (for legs that filter part of the way themselves)."""
        where, params = self.where(filters, "m")
        out: set[str] = set()
        for chunk in chunks(ids):
            these, ids_params = self.dialect.one_of("m.id", chunk, "uuid")
            rows = self.run(f"SELECT m.id FROM memories m WHERE {these} AND {where}", (*ids_params, *params))
            out.update(str(r[0]) for r in rows)
        return out

    # -- startup identity ------------------------------------------------------------------
    def startup_entries(self, scopes: builtins.list[str] | None) -> builtins.list[StartupEntry]:
        """Entries of these scopes (all when None), by priority then key."""
        where = "1 = 1" if scopes is None else f"scope IN ({self.dialect.marks(len(scopes))})"
        rows = self.run(f"SELECT {self._startup.columns} FROM startup WHERE {where} ORDER BY priority, key", scopes or [])
        return [self._startup.read(StartupEntry, r) for r in rows]

    def put_startup(self, entry: StartupEntry) -> None:
        fields = self._startup.fields
        updates = ", ".join(f"{c} = excluded.{c}" for c in fields if c not in STARTUP.key)
        with self.transaction():
            self.run(
                f"INSERT INTO startup ({self._startup.columns}) VALUES ({self.dialect.marks(len(fields))}) "
                f"ON CONFLICT ({', '.join(STARTUP.key)}) DO UPDATE SET {updates}",
                self._startup.row(entry),
            )

    def startup_count(self, scope: str) -> int:
        return self.run(f"SELECT count(*) FROM startup WHERE scope = {self.dialect.p}", (scope,))[0][0]

    def delete_startup_scope(self, scope: str) -> int:
        """Remove every startup entry of a scope; how many there were."""
        with self.transaction():
            return self.rowcount(f"DELETE FROM startup WHERE scope = {self.dialect.p}", (scope,))

    def delete_startup(self, scope: str, key: str) -> bool:
        p = self.dialect.p
        with self.transaction():
            return self.rowcount(f"DELETE FROM startup WHERE scope = {p} AND key = {p}", (scope, key)) > 0

    # -- filters ------------------------------------------------------------------------------
    def where(self, f: Filters, alias: str) -> tuple[str, builtins.list[Any]]:
        """The SQL for a `Filters` (the rules of `filters.py`)."""
        return where(f, self.dialect, alias)


def dimensions_differ(stored: int, query: int) -> StorageError:
    """A query or a new vector of another model than the stored vectors' (another process re-embedded the store)."""
    return StorageError(f"the stored vectors have {stored} dimensions, the query {query}: "
                        "run `clawrecall reembed` or configure the stored embedding model")
