"""The embedded backend: one SQLite file in WAL mode.

FTS5 (porter) gives the BM25 leg, an FTS5 trigram table the fuzzy/CJK leg, and an in-memory
matrix per scope (`vector_index.py`; exact up to `sqlite.exact_search_rows` rows) the vector
leg. Triggers keep both full-text tables and the `changes` log in step with `memories` on
update and delete; `insert` indexes its new rows itself, in bulk (see `after_insert`).
Everything that is plain SQL lives in `sql.py`, shared with PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from ..errors import StorageError
from ..models import MemoryRecord
from .base import Candidate
from .checkpoint import WRITER_AUTOCHECKPOINT, Checkpointer
from .dialect import SQLiteDialect
from .filters import INDEX_COLUMNS, Filters
from .migrations import (
    CORE, LIST_INDEXES, MESSAGE_WINDOWS, OLD_KIND_CHECK, PARTIAL_INDEXES, RECORD_KINDS, SEALED_SECRETS, SEGMENT_SUMMARY,
    SESSION_INDEX_SCOPE,
    api_tokens_table, validity,
)
from .schema import KIND_CHECK
from .sql import Store, dimensions_differ
from .text import fts_or_query, keywords, trigrams

if TYPE_CHECKING:
    import numpy as np

    from ..config import SQLiteConfig
    from .vector_index import RowMeta, VectorIndex

# numpy and the vector index are imported where vectors are first touched: they are most of the
# start-up of a command that reads no vectors (`clawrecall stats` must stay fast).

_BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's transaction
# The writer's page cache, KiB (SQLite's default is 2 MB). A write touches a page of each of the memories
# table's indexes and of both full-text indexes; past ~20k memories they outgrow 2 MB and every insert read
# its index pages back from the OS: inserting 60k memories with their history took 107 µs a memory of CPU,
# 89 µs with this cache (docs/benchmarks/importing.md). Pages are cached only once read: a small store never
# grows to it.
_CACHE_KIB = 65_536

# The full-text tables index `memories` through this view, so 'rebuild' and integrity checks see
# the values the triggers and `after_insert` write: the scope as one token, hex(scope) ("user:alice"
# was two tokens, and the query word "user" matched every row's scope).
_FTS_SOURCE = """CREATE VIEW memories_fts_source AS
    SELECT rowid AS rid, title, content, tags, hex(scope) AS scope_key FROM memories"""
# Since the fact-keys step the indexed content is the content and the row's keys (never shown).
_TEXT = "{0}content || coalesce(char(10) || {0}keys, '')"
_FTS_SOURCE_KEYS = f"""CREATE VIEW memories_fts_source AS
    SELECT rowid AS rid, title, {_TEXT.format('')} AS content, tags, hex(scope) AS scope_key FROM memories"""
_FTS = """CREATE VIRTUAL TABLE memories_fts USING fts5 (
    title, content, tags, scope_key, content='memories_fts_source', content_rowid='rid',
    tokenize='porter unicode61 remove_diacritics 2'
)"""
_TRIGGER_AD = """CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope_key)
        VALUES ('delete', old.rowid, old.title, old.content, old.tags, hex(old.scope));
    INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO changes (memory_id) VALUES (old.id);
END"""
_TRIGGER_AU_TEXT = """CREATE TRIGGER memories_au_text AFTER UPDATE OF title, content, tags, scope ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope_key)
        VALUES ('delete', old.rowid, old.title, old.content, old.tags, hex(old.scope));
    INSERT INTO memories_fts (rowid, title, content, tags, scope_key)
        VALUES (new.rowid, new.title, new.content, new.tags, hex(new.scope));
    INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
END"""

_TRIGGER_AD_KEYS = f"""CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope_key)
        VALUES ('delete', old.rowid, old.title, {_TEXT.format('old.')}, old.tags, hex(old.scope));
    INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO changes (memory_id) VALUES (old.id);
END"""
_TRIGGER_AU_TEXT_KEYS = f"""CREATE TRIGGER memories_au_text AFTER UPDATE OF title, content, tags, scope, keys ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope_key)
        VALUES ('delete', old.rowid, old.title, {_TEXT.format('old.')}, old.tags, hex(old.scope));
    INSERT INTO memories_fts (rowid, title, content, tags, scope_key)
        VALUES (new.rowid, new.title, {_TEXT.format('new.')}, new.tags, hex(new.scope));
    INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
END"""

# Since the window-text step a long message's windows are in neither full-text table: their text is
# the message's, which both index whole, so a window only made every keyword match a second time
# (and a keyword leg then filtered them all out, past its best matches). Rows of kind `window` are
# left out by the tables' sources (what 'rebuild' and integrity checks read), by `after_insert`, and by
# the triggers' own WHERE (an FTS5 'delete' of a row never indexed would corrupt the index).
_NOT_WINDOW = "kind <> 'window'"
_FTS_SOURCE_TEXT = f"""CREATE VIEW memories_fts_source AS
    SELECT rowid AS rid, title, {_TEXT.format('')} AS content, tags, hex(scope) AS scope_key FROM memories
    WHERE {_NOT_WINDOW}"""
_TRGM_SOURCE = f"CREATE VIEW memories_trgm_source AS SELECT rowid AS rid, content FROM memories WHERE {_NOT_WINDOW}"
_TRGM = ("CREATE VIRTUAL TABLE memories_trgm USING fts5 (content, content='memories_trgm_source', content_rowid='rid', "
         "tokenize='trigram')")
_TRIGGER_AD_TEXT = f"""CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope_key)
        SELECT 'delete', old.rowid, old.title, {_TEXT.format('old.')}, old.tags, hex(old.scope) WHERE old.{_NOT_WINDOW};
    INSERT INTO memories_trgm (memories_trgm, rowid, content) SELECT 'delete', old.rowid, old.content WHERE old.{_NOT_WINDOW};
    INSERT INTO changes (memory_id) VALUES (old.id);
END"""
_TRIGGER_AU_TEXT_TEXT = _TRIGGER_AU_TEXT_KEYS.replace(" ON memories BEGIN", f" ON memories WHEN old.{_NOT_WINDOW} BEGIN")

# What installing the core set makes besides its tables: the full-text (BM25) and trigram
# tables, the `changes` log the vector index follows, and the triggers that keep them in step
# on update and delete (`insert` indexes its new rows itself: see `after_insert`).
_CORE_EXTRAS = [
    "CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL)",
    _FTS_SOURCE_TEXT,
    _FTS,
    _TRGM_SOURCE,
    _TRGM,
    _TRIGGER_AD_TEXT,
    _TRIGGER_AU_TEXT_TEXT,
    """CREATE TRIGGER memories_au_log AFTER UPDATE ON memories BEGIN
    INSERT INTO changes (memory_id) VALUES (new.id);
END""",
]

# The steps' SQL as they were written for stores made before each (see migrations.py).
_STEPS: dict[str, list[str]] = {
    "startup": [
        """CREATE TABLE startup (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 2,
            reinforce INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (scope, key)
        )""",
    ],
    "partial-indexes": PARTIAL_INDEXES,
    # The scope joins the full-text index, so a scoped keyword search intersects posting
    # lists instead of ranking every match in the store and filtering afterwards.
    "text-index-scope": [
        "DROP TRIGGER memories_ai",
        "DROP TRIGGER memories_ad",
        "DROP TRIGGER memories_au_text",
        "DROP TABLE memories_fts",
        """CREATE VIRTUAL TABLE memories_fts USING fts5 (
            title, content, tags, scope, content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
        """CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, title, content, tags, scope) VALUES (new.rowid, new.title, new.content, new.tags, new.scope);
            INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
            INSERT INTO changes (memory_id) VALUES (new.id);
        END""",
        """CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope)
                VALUES ('delete', old.rowid, old.title, old.content, old.tags, old.scope);
            INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO changes (memory_id) VALUES (old.id);
        END""",
        """CREATE TRIGGER memories_au_text AFTER UPDATE OF title, content, tags, scope ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, title, content, tags, scope)
                VALUES ('delete', old.rowid, old.title, old.content, old.tags, old.scope);
            INSERT INTO memories_fts (rowid, title, content, tags, scope) VALUES (new.rowid, new.title, new.content, new.tags, new.scope);
            INSERT INTO memories_trgm (memories_trgm, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
        END""",
    ],
    "text-index-scope-key": [
        "DROP TRIGGER memories_ai",
        "DROP TRIGGER memories_ad",
        "DROP TRIGGER memories_au_text",
        "DROP TABLE memories_fts",
        _FTS_SOURCE,
        _FTS,
        "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
        """CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, title, content, tags, scope_key)
                VALUES (new.rowid, new.title, new.content, new.tags, hex(new.scope));
            INSERT INTO memories_trgm (rowid, content) VALUES (new.rowid, new.content);
            INSERT INTO changes (memory_id) VALUES (new.id);
        END""",
        _TRIGGER_AD,
        _TRIGGER_AU_TEXT,
    ],
    # API tokens, a store table on both backends (earlier versions created it here on first use)
    "api-tokens": [api_tokens_table("TEXT")],
    # New rows are indexed by `SQLiteStore.after_insert`, one statement per table: 10x cheaper
    # than this trigger, whose per-row FTS5 statements each flushed a one-row segment.
    "text-index-bulk": ["DROP TRIGGER memories_ai"],
    "record-kinds": RECORD_KINDS,
    "session-index-scope": SESSION_INDEX_SCOPE,
    # SQLite cannot alter a CHECK constraint: its text in the schema is rewritten, as SQLite's documentation
    # allows for a change that leaves every stored row valid; RESET reloads this connection's schema and the
    # CREATE INDEX that follows changes the schema cookie, so every other connection reloads it too
    "message-windows": [
        "PRAGMA writable_schema = ON",
        f"UPDATE sqlite_master SET sql = replace(sql, \"{OLD_KIND_CHECK}\", \"{KIND_CHECK}\") "
        "WHERE type = 'table' AND name = 'memories'",
        "PRAGMA writable_schema = RESET",
        *MESSAGE_WINDOWS,
    ],
    "segment-summary": SEGMENT_SUMMARY,
    "list-indexes": LIST_INDEXES,
    "sealed-secrets": SEALED_SECRETS,
    "validity": validity("TEXT", "TEXT"),
    # every row's keys are NULL, so its indexed text is unchanged: no rebuild
    "fact-keys": [
        "ALTER TABLE memories ADD COLUMN keys TEXT",
        "DROP VIEW memories_fts_source",
        _FTS_SOURCE_KEYS,
        "DROP TRIGGER memories_ad",
        _TRIGGER_AD_KEYS,
        "DROP TRIGGER memories_au_text",
        _TRIGGER_AU_TEXT_KEYS,
    ],
    # both tables built again from sources without the windows (the trigram table had the memories table as its own)
    "window-text": [
        "DROP TRIGGER memories_ad",
        "DROP TRIGGER memories_au_text",
        "DROP VIEW memories_fts_source",
        _FTS_SOURCE_TEXT,
        "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
        "DROP TABLE memories_trgm",
        "DROP VIEW IF EXISTS memories_trgm_source",  # none before this step; a store made since has it
        _TRGM_SOURCE,
        _TRGM,
        "INSERT INTO memories_trgm (memories_trgm) VALUES ('rebuild')",
        _TRIGGER_AD_TEXT,
        _TRIGGER_AU_TEXT_TEXT,
    ],
}


# The step text-index-bulk moved these out of the insert trigger (see `SQLiteStore.after_insert`).
_NEW_ROWS = "FROM memories WHERE rowid > (SELECT max(rowid) FROM memories) - ? {0}ORDER BY rowid"
_NEW_TEXT = _NEW_ROWS.format(f"AND {_NOT_WINDOW} ")  # a window's text is its message's (`_NOT_WINDOW`)
_INDEX_NEW_ROWS = (
    f"INSERT INTO memories_fts (rowid, title, content, tags, scope_key) SELECT rowid, title, {_TEXT.format('')}, tags, hex(scope) {_NEW_TEXT}",
    f"INSERT INTO memories_trgm (rowid, content) SELECT rowid, content {_NEW_TEXT}",
    f"INSERT INTO changes (memory_id) SELECT id {_NEW_ROWS.format('')}",
)
_CHANGES_KEEP = 20_000
_FTS_COLUMNS = "{title content tags} : "  # the columns a BM25 match reads (not the scope's)
_FTS_WIDEN = 4  # a keyword leg filters its best 4k matches before it falls back to filtering all of them
# A search whose scopes hold this many rows runs its keyword legs beside its vector leg (see `beside`)
_BESIDE_ROWS = 30_000

T = TypeVar("T")


# How the vector index gets each indexed column: from a record, and from a row as stored
_INDEX_SELECT = ", ".join(("id", "embedding", "scope", *INDEX_COLUMNS))


def _record_meta(r: MemoryRecord) -> RowMeta:
    from .vector_index import RowMeta

    return RowMeta.stored(r.scope, [getattr(r, c) for c in INDEX_COLUMNS])


def _stored_meta(row: tuple) -> RowMeta:
    """From a row selected as `_INDEX_SELECT`."""
    from .vector_index import RowMeta

    return RowMeta.stored(row[2], row[3:])


# What a write can meet that is not clawrecall's fault: a read-only file or folder, a full disk,
# an I/O error, a lock held past the busy timeout.
_REFUSALS = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED")
# What a damaged file raises: pages that are not what the b-tree (or an FTS5 index) expects.
_DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def _reports_damage(exc: sqlite3.DatabaseError) -> bool:
    return getattr(exc, "sqlite_errorname", "").startswith(_DAMAGE)


class SQLiteStore(Store):
    backend = "sqlite"
    dialect = SQLiteDialect()
    legacy_versions = {n: CORE.steps[:n] for n in range(1, 8)}  # schema vN (before named migrations): the first N core steps

    def __init__(self, path: str | Path, *, migrate: bool = True, create: bool = True, config: SQLiteConfig | None = None):
        from ..config import SQLiteConfig

        super().__init__()
        self.config = config or SQLiteConfig()
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        if not create and (not self.path.is_file() or self.path.stat().st_size == 0):
            # an empty file is what a failed copy or a `touch` leaves: no store to read, and nothing to create here
            empty = " (the file is empty)" if self.path.is_file() else ""
            raise StorageError(f"no clawrecall store at {self.path}{empty}: `clawrecall init` or a first `add` creates one")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
            self._file = self.path.resolve()
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from None
        self._lock = threading.RLock()
        self._depth = 0
        self._in_transaction: int | None = None  # the thread whose transaction is open
        self._local = threading.local()  # `reader`: the connection `beside`'s worker reads through
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()  # the reader's statements
        self._worker: ThreadPoolExecutor | None = None  # `beside`, started on first use
        self._worker_lock = threading.Lock()  # starting it, and closing
        self._closed = False
        self._index: VectorIndex | None = None
        self._at_commit: list[tuple[VectorIndex, list[MemoryRecord], np.ndarray, int]] = []  # see after_insert
        self._erased = False  # a hard delete in this transaction: scrub the WAL after COMMIT (see remove)
        self._history_added = False  # history rows in this transaction: wake the watchers after COMMIT
        self._history_watchers: list[Callable[[], None]] = []
        self._checkpointer = Checkpointer(self.path)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed: erased text leaves the file
            self._conn.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT}")
            self._conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            if migrate:
                self.migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StorageError(f"{self.path} is not a usable clawrecall database: {exc}") from None

    # -- connection ------------------------------------------------------------------------
    def close(self) -> None:
        with self._worker_lock:
            self._closed, worker = True, self._worker
        if worker is not None:
            worker.shutdown(wait=True)
        if self._reader is not None:
            self._reader.close()
        if self._index is not None:
            self._index.stop()
        self._checkpointer.close()
        with self._lock:
            try:
                self._conn.execute("PRAGMA optimize")  # keeps the planner's statistics fresh, cheaply
            except sqlite3.Error:
                pass
            self._conn.close()

    @contextmanager
    def _locked(self, *, main: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, under the store's lock (in `beside`'s worker: the reader, under its own; `main`:
        the store's own even there); a damaged file's error becomes one clear line."""
        reader = None if main else getattr(self._local, "reader", None)
        with self._lock if reader is None else self._reader_lock:
            try:
                yield self._conn if reader is None else reader
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._locked() as conn:
            return conn.execute(sql, params).fetchall()

    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._locked() as conn:
            conn.executemany(sql, rows)

    def rowcount(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._locked() as conn:
            return conn.execute(sql, params).rowcount

    def integrity_problems(self) -> list[str]:
        """`PRAGMA quick_check` (every page and b-tree), then FTS5's check of each full-text index
        against the memories table (a damaged index loses or invents matches; quick_check cannot see it)."""
        problems = []
        with self._lock:
            try:
                found = [row[0] for row in self._conn.execute("PRAGMA quick_check").fetchall()]
                if found != ["ok"]:
                    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
                    problems.append("quick_check: " + "; ".join(found[:3]) + more)
            except sqlite3.DatabaseError as exc:
                problems.append(f"quick_check: {self._damage_only(exc)}")
            for table in ("memories_fts", "memories_trgm"):
                try:
                    self._conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
                except sqlite3.DatabaseError as exc:
                    problems.append(f"full-text index {table}: {self._damage_only(exc)}")
        return problems

    def _damage_only(self, exc: sqlite3.DatabaseError) -> str:
        """The message of an error that reports damage; any other (a lock, a read-only file) is raised."""
        if _reports_damage(exc):
            return str(exc)
        if isinstance(exc, sqlite3.OperationalError):
            raise self._refused(exc) from None
        raise exc

    def _damaged(self, exc: sqlite3.DatabaseError) -> Exception:
        """A damaged file (a disk error, a bad copy) becomes one clear line; any other error is left as it is."""
        if not _reports_damage(exc):
            return exc
        return StorageError(f"SQLite database {self.path} is damaged: {exc} (`clawrecall doctor` checks it)")

    def lock_schema(self) -> None:
        """BEGIN IMMEDIATE already holds the write lock: no other process can migrate meanwhile."""

    def migration_steps(self) -> dict[str, list[str]]:
        return _STEPS

    def migration_extras(self, migration_set: str) -> tuple[list[str], list[str]]:
        return [], (_CORE_EXTRAS if migration_set == CORE.name else [])

    def beside(self, fn: Callable[[], T], filters: Filters, *, slow: bool = False) -> Future[T]:
        """`fn` on a second connection, in a worker thread, when the filters' scopes hold `_BESIDE_ROWS`
        rows or more (there FTS5 ranks tens of thousands of matches while the caller scans the vectors, and
        both leave the GIL), or when the caller goes on with `slow` work that leaves it (a model embedding the
        query). Else a thread per search costs more than it saves (docs/retrieval.md). Inline inside a
        transaction, whose writes another connection would not see."""
        if (self._depth and self._in_transaction == threading.get_ident()) or str(self.path) == ":memory:" \
                or (not slow and self._indexed_rows(filters.scopes) < _BESIDE_ROWS):
            return super().beside(fn, filters)
        with self._worker_lock:
            if self._closed:
                return super().beside(fn, filters)  # fails as any call on a closed store does
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="clawrecall-sqlite")
            return self._worker.submit(self._reader_call, fn)

    def _reader_call(self, fn: Callable[[], T]) -> T:
        """In the worker thread: `fn` with every statement on the reader (a WAL reader sees every commit)."""
        if self._reader is None:
            try:  # the file this store opened (not one a later chdir names), never created, read only
                self._reader = sqlite3.connect(f"{self._file.as_uri()}?mode=ro", uri=True, isolation_level=None,
                                               check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from None
        self._local.reader = self._reader
        try:
            return fn()
        finally:
            self._local.reader = None

    def _indexed_rows(self, scopes: Sequence[str] | None) -> int:
        """Rows the vector index holds in these scopes (all when None), 0 before it is loaded: a size to
        decide how to search by, read without waiting for the index's lock."""
        index = self._index
        return 0 if index is None else index.rows(scopes)

    @contextmanager
    def snapshot(self) -> Iterator[Callable[[str], Iterator[tuple]]]:
        """A connection of its own in a read transaction: under WAL it sees the database as of its first
        read, whatever is committed meanwhile, and blocks no writer."""
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=_BUSY_TIMEOUT_S)
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM meta").fetchall()  # the first read fixes the snapshot
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None

        def read(sql: str) -> Iterator[tuple]:
            cur = conn.execute(sql)
            while rows := cur.fetchmany(500):
                yield from rows

        try:
            yield read
        finally:
            conn.execute("ROLLBACK")
            conn.close()

    def table_exists(self, name: str) -> bool:
        return bool(self.run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

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
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise self._refused(exc) from None
            self._depth, self._in_transaction = 1, threading.get_ident()  # another thread's search may still go beside
            index = self._index
            seen = None if index is None else index.last_seq
            try:
                yield
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._at_commit.clear()
                self._erased = False
                self._history_added = False
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if self._index is not index or (index is not None and index.last_seq != seen):
                    self._replace_index(None)  # it read rows of this transaction (a search inside it): reload
                if isinstance(exc, sqlite3.OperationalError):
                    raise self._refused(exc) from None
                raise
            else:
                self._apply_at_commit()
                if self._erased:
                    self._erased = False
                    self._truncate_wal()
                self._checkpointer.committed()
                if self._history_added:
                    self._history_added = False
                    for wake in list(self._history_watchers):
                        wake()
            finally:
                self._depth = 0

    def after_history(self) -> None:
        self._history_added = True

    def watch_history(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]:
        """This process's commits wake at once; another process's are seen by polling the newest id every `poll_s`."""
        stop = threading.Event()

        def poll() -> None:
            last = self.history.last()
            while not stop.wait(poll_s):
                try:
                    newest = self.history.last()
                except Exception:  # a failing read now (the store busy, closing) is retried at the next poll
                    continue
                if newest != last:
                    last = newest
                    wake()

        self._history_watchers.append(wake)
        thread = threading.Thread(target=poll, daemon=True, name="clawrecall-history-poll")
        thread.start()

        def cancel() -> None:
            stop.set()
            if wake in self._history_watchers:
                self._history_watchers.remove(wake)
            if thread is not threading.current_thread():
                thread.join()

        return cancel

    def after_remove(self) -> None:
        """FTS5 only marks a deleted row's terms as deleted; its segments keep them (and the trigrams
        that spell the text) until merged. A hard delete merges both indexes at once ('optimize':
        ~0.5 s at 100k memories), and empties the WAL after COMMIT, so no copy of the text is left."""
        for table in ("memories_fts", "memories_trgm"):
            self.run(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

    def erased(self, scope: str | None = None) -> None:
        self._erased = True

    def _truncate_wal(self) -> None:
        """Frames written before a hard delete may still hold the text: copy the WAL into the file and
        truncate it. If a reader still needs it, or the checkpoint thread is copying (slow on a busy machine:
        a second was not always enough), give up after five seconds; later checkpoints rewind it."""
        try:
            self._conn.execute("PRAGMA busy_timeout = 5000")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")

    def _refused(self, exc: sqlite3.OperationalError) -> Exception:
        """A write the file system or another process refused becomes one clear line; any other
        OperationalError is a bug and keeps its traceback."""
        name = getattr(exc, "sqlite_errorname", "")
        if not name.startswith(_REFUSALS):
            return exc
        hint = " (is the file, or its folder, read-only?)" if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")) else ""
        return StorageError(f"cannot write to SQLite database {self.path}: {exc}{hint}")

    def after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        """Index the new rows (the last len(records) rowids: each insert took max(rowid) + 1) with
        one statement per table, trim the `changes` log, and have the vector index take the new
        vectors at COMMIT when nothing else changed since it last looked (no re-reading them).

        Not a per-row trigger: FTS5 flushes its pending terms at every statement savepoint, and a
        trigger's statements each take one, so a trigger wrote a segment per row and FTS5 then
        merged them (~0.1 ms a memory at 100k; ~0.01 ms in one statement)."""
        count = len(records)
        for sql in _INDEX_NEW_ROWS:
            self.run(sql, (count,))
        lo, hi = self.run("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)")[0]
        if hi is not None and hi - lo > 2 * _CHANGES_KEEP:  # readers further behind reload the index
            self.run("DELETE FROM changes WHERE seq <= ?", (hi - _CHANGES_KEEP,))
        index = self._index
        if (index is not None and vectors is not None and count and vectors.shape[1] == index.dims
                and index.last_seq == hi - count):
            self._at_commit.append((index, records, vectors, hi))

    def _apply_at_commit(self) -> None:
        """Put this transaction's new rows in the vector index, as `_fresh_index` would have."""
        pending, self._at_commit = self._at_commit, []
        try:
            for index, records, vectors, seq in pending:
                if index is not self._index or index.last_seq != seq - len(records):
                    break
                index.upsert_many([r.id for r in records], vectors, [_record_meta(r) for r in records])
                index.last_seq = seq
        except Exception:  # the rows are committed: never report a failed write; the next search reloads
            self._replace_index(None)

    def size_bytes(self) -> int | None:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    def local_folder(self) -> Path | None:
        return None if str(self.path) == ":memory:" else Path(self.path).resolve().parent

    def is_conflict(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in str(exc)

    # -- candidate legs ----------------------------------------------------------------------
    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        index = self._fresh_index()
        if index is None:
            return {}
        found = {i: index.vector(i) for i in ids}
        return {i: v for i, v in found.items() if v is not None}

    def _vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        index = self._fresh_index()
        if index is None:
            return []
        if len(query) != index.dims:
            raise dimensions_differ(index.dims, len(query))
        return self._index_candidates(index, query, filters, k) or []

    def nearest(self, vectors: np.ndarray, scope: str, min_score: float) -> list[Candidate | None]:
        index = self._fresh_index()
        if index is None:
            return [None] * len(vectors)
        if vectors.shape[1] != index.dims:
            raise dimensions_differ(index.dims, vectors.shape[1])
        found = index.nearest_many(vectors, scope, min_score)
        return [None if hit is None else Candidate(*hit) for hit in found]

    def text_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        terms = keywords(query)
        if not terms:
            return []
        match = _FTS_COLUMNS + "(" + fts_or_query(terms) + ")"
        scoped = None
        if filters.scopes:
            # The scope column narrows the match, and the SQL filter on m.scope stays the exact check. When the
            # scopes hold most rows it narrows little and costs much (one user's 120k rows: 17-19 ms against 10):
            # the best matches alone then hold enough of theirs, and the fallback, which filters every match,
            # still narrows. The answer is the same either way.
            scoped = match + " AND scope_key : (" + fts_or_query([s.encode().hex().upper() for s in filters.scopes]) + ")"
            everything = self._indexed_rows(None)
            if not (everything > 0 and self._indexed_rows(filters.scopes) * 2 >= everything):
                return self._fts("memories_fts", scoped, filters, k)  # ranks the scopes' matches only
        ranked = self._ranking_terms(terms, k)
        first = _FTS_COLUMNS + "(" + fts_or_query(ranked) + ")" if ranked != terms else None
        return self._fts("memories_fts", match, filters, k, every_match=scoped, first=first)

    def _ranking_terms(self, terms: list[str], k: int) -> list[str]:
        """What an unscoped match ranks first: the terms less those in at least half the indexed rows (all of
        them when fewer than k rows have the others). FTS5's BM25 clamps such a word's IDF to 10⁻⁶ (a match
        of it adds at most 2.2·10⁻⁶ to a score) yet scores every row that has it: a question's "release",
        "ship" and "may" matched 3,000 of one user's long answers, and ranking them took 9.6 ms against
        1.8 ms without (docs/retrieval.md). Counted here (a walk of each term's postings, no scoring), so
        the best matches are the same, their scores within 10⁻⁵; when fewer than k of them pass the
        filters, `_fts` ranks every term's matches, as before."""
        if len(terms) < 2:
            return terms
        counts = self.run("SELECT (SELECT count(*) FROM memories_fts_docsize), "
                          + ", ".join("(SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?)" for _ in terms),
                          [_FTS_COLUMNS + fts_or_query([t]) for t in terms])[0]
        ranked = [(t, n) for t, n in zip(terms, counts[1:]) if 2 * n < counts[0]]
        return [t for t, _ in ranked] if sum(n for _, n in ranked) >= k else terms

    def fuzzy_candidates(self, query: str, filters: Filters, k: int) -> list[Candidate]:
        grams = trigrams(query)
        hits = self._fts("memories_trgm", fts_or_query(grams), filters, k) if grams else []
        return self._with_short_cjk_words(query, hits, filters, k)

    def _fts(self, table: str, match: str, filters: Filters, k: int, *, every_match: str | None = None,
             first: str | None = None) -> list[Candidate]:
        """The k best matches passing the filters. FTS5 first ranks its matches alone and only its best
        `_FTS_WIDEN` x k are looked up in `memories` and filtered: joined row by row, every match of a
        common word read its row before the sort (100k memories, unscoped: 14 ms p50 against 7).
        `first`, when given, is ranked so before `match` (fewer terms: see `_ranking_terms`). When fewer
        than k of those pass, the joined query runs (on `every_match`, the same matches narrowed further,
        when given): the answer is the same either way."""
        where, params = self.where(filters, "m")
        # the scope column only filters: it must not add to the ranking
        rank = f"bm25({table}, 1.0, 1.0, 1.0, 0.0)" if table == "memories_fts" else f"bm25({table})"
        best = f"SELECT rowid AS r, -{rank} AS s FROM {table} WHERE {table} MATCH ? ORDER BY {rank} LIMIT ?"
        for tried in dict.fromkeys(m for m in (first, match) if m is not None):
            rows = self.run(
                f"SELECT m.id, t.s FROM ({best}) t JOIN memories m ON m.rowid = t.r WHERE {where} ORDER BY t.s DESC LIMIT ?",
                (tried, _FTS_WIDEN * k, *params, k),
            )
            if len(rows) >= k:
                return [Candidate(r[0], float(r[1])) for r in rows]
        # a match beyond the best may pass; with fewer matches than those, this is cheap
        rows = self.run(
            f"SELECT m.id, -{rank} AS s FROM {table} JOIN memories m ON m.rowid = {table}.rowid "
            f"WHERE {table} MATCH ? AND {where} ORDER BY {rank} LIMIT ?",
            (every_match or match, *params, k),
        )
        return [Candidate(r[0], float(r[1])) for r in rows]

    def drop_vector_index(self) -> None:
        with self._lock:
            self._replace_index(None)

    def build_vector_index(self) -> None:
        self.drop_vector_index()  # the next search loads the new vectors

    # -- vector index maintenance ---------------------------------------------------------------
    def _fresh_index(self) -> VectorIndex | None:
        """The in-memory index, first brought up to date with the `changes` log (through the store's own
        connection, in any thread: the index follows what it has committed)."""
        with self._locked(main=True):
            return self._refresh_index()

    def _refresh_index(self) -> VectorIndex | None:
        """Under the store's lock (see `_fresh_index`)."""
        # two subqueries: min() and max() together in one SELECT would scan the whole log
        lo, hi = self._conn.execute("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)").fetchone()
        index = self._index
        if index is None or (lo is not None and lo > index.last_seq + 1 and index.last_seq < hi):
            return self._load_index(hi or 0)
        if hi is None or hi == index.last_seq:
            return index
        ids = [r[0] for r in self._conn.execute("SELECT DISTINCT memory_id FROM changes WHERE seq > ?", (index.last_seq,))]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._conn.execute(
                f"SELECT {_INDEX_SELECT} FROM memories WHERE id IN ({self.dialect.marks(len(chunk))})",
                chunk,
            ).fetchall()
            if not self._index_rows(index, rows):  # other dimensions: the store was re-embedded
                return self._load_index(hi)
            for gone in set(chunk) - {r[0] for r in rows}:
                index.remove(gone)
        index.last_seq = hi
        return index

    def _load_index(self, seq: int) -> VectorIndex | None:
        row = self._conn.execute("SELECT length(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        if row is None:
            self._replace_index(None)
            return None
        from .vector_index import VectorIndex

        index = VectorIndex(row[0] // 4, self.config.exact_search_rows)
        cursor = self._conn.execute(f"SELECT {_INDEX_SELECT} FROM memories")
        while rows := cursor.fetchmany(5000):
            self._index_rows(index, rows)
        index.last_seq = seq
        self._replace_index(index)
        return index

    def _replace_index(self, index: VectorIndex | None) -> None:
        """The index searches use from now on; the one before stops any clustering it has under way."""
        if self._index is not None and self._index is not index:
            self._index.stop()
        self._index = index

    @staticmethod
    def _index_rows(index: VectorIndex, rows: list[tuple]) -> bool:
        """Put rows (selected as `_INDEX_SELECT`) in the index;
        False when some vector has other dimensions than the index (those rows are left out)."""
        size = index.dims * 4
        fits: list[tuple] = []
        misfits: list[tuple] = []
        for r in rows:
            (fits if r[1] is not None and len(r[1]) == size else misfits).append(r)
        for r in misfits:
            index.remove(r[0])
        if fits:
            import numpy as np

            index.upsert_many(
                [r[0] for r in fits],
                np.frombuffer(b"".join(r[1] for r in fits), dtype=np.float32).reshape(len(fits), index.dims),
                [_stored_meta(r) for r in fits],
            )
        return all(r[1] is None for r in misfits)
