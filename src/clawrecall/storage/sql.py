"""The store: one class every backend extends. It holds the connection's side of things (statements,
transactions, metadata, migrations) and the candidate legs of a search, which each backend answers
its own way; the rows of each entity are read and written through an accessor of their own
(`store.memories`, `store.history`, `store.startup`, `store.messages`, `store.jobs`, …), each a
module that takes the store as its `Executor`.

A backend supplies a connection (`run`, `run_many`, `rowcount`, `transaction`), its `Dialect`
(parameter mark, types, value adapters), the SQL of its migration steps, its candidate legs and the
hooks `memories.MemoryStore` names. Shared SQL is composed with the dialect's parameter mark and sent
to the driver as written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from ..errors import StorageError
from ..models import MemoryRecord
from . import migrations
from .base import Candidate, chunks
from .dialect import Dialect
from .filters import Filters, checked_in_sql, where
from .history import History
from .insight import SearchLog
from .jobs import Jobs
from .knowledge import Occurrences
from .memories import Memories
from .record import Files, Messages, Segments
from .schema import Table
from .staging import StagedVectors
from .startup import StartupEntries
from .text import short_cjk_words
from .tokens import ApiTokens

if TYPE_CHECKING:
    import numpy as np

    from .vector_index import VectorIndex


T = TypeVar("T")


class Store(ABC):
    """A connection in one dialect, the three candidate legs of retrieval (vector, full-text, trigram),
    the vector index's upkeep, migrations and a little metadata; each entity's rows through its
    accessor. Everything above it (validation, scopes, dedup, fusion, scoring) is shared by all backends."""

    backend: str
    location: str
    dialect: Dialect
    #: old `meta.schema_version` numbers -> the core steps they stand for
    legacy_versions: dict[int, tuple[str, ...]]

    def __init__(self) -> None:
        """The accessors of the entities (a backend's __init__ calls this first: they read its dialect)."""
        self.memories = Memories(self)
        self.history = History(self)
        self.startup = StartupEntries(self)
        self.api_tokens = ApiTokens(self)
        self.messages = Messages(self, self.memories.remove)
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

    def beside(self, fn: Callable[[], T], filters: Filters, *, slow: bool = False) -> Future[T]:
        """Start `fn` (reads only, of the rows `filters` pass) on a connection of its own while this thread
        goes on (`slow`: with work that leaves the GIL, such as a model's run), where the backend serves two
        readers at once and the read is worth a thread; call the
        result for `fn`'s value. Elsewhere, and inside a transaction or `pinned` block (whose writes another
        connection would not see), `fn` runs now. Its `result()` is `fn`'s value (or raises its error)."""
        done: Future[T] = Future()
        try:
            done.set_result(fn())
        except Exception as exc:  # raised where the value is asked for, as from a thread
            done.set_exception(exc)
        return done

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
            message, chars = of.get(part.id, (None, None))
            if message is not None and (message not in best or part.score > best[message].score):
                best[message] = Candidate(message, part.score, via=part.id, via_chars=chars)
        return sorted(best.values(), key=lambda c: c.score, reverse=True)[:k]

    @abstractmethod
    def _vector_candidates(self, query: np.ndarray, filters: Filters, k: int) -> list[Candidate]:
        """The backend's nearest rows of the kinds `filters` name."""

    def _has_windows(self, scopes: list[str] | None) -> bool:
        """Whether any of these scopes holds a window: one index seek (kind, scope)."""
        where = "" if scopes is None else f" AND scope IN ({self.dialect.marks(len(scopes))})"
        return bool(self.run(f"SELECT 1 FROM memories WHERE kind = 'window'{where} LIMIT 1", scopes or []))

    def _window_messages(self, ids: list[str], filters: Filters) -> dict[str, tuple[str, int]]:
        """The message each of these windows (ids the window search gave) is part of, if it passes `filters`,
        and the window's length (what length normalisation measures a message found by it by: read here, not
        by fetching the windows' records): a message's session, role, times and deletion are its own row's,
        checked on it (one statement)."""
        where, params = self.where(filters, "m")
        out: dict[str, tuple[str, int]] = {}
        for chunk in chunks(ids):
            these, ids_params = self.dialect.one_of("w.id", chunk, "uuid")
            out.update((str(r[0]), (str(r[1]), int(r[2]))) for r in self.run(
                f"SELECT w.id, m.id, length(w.content) FROM memories w "
                f"JOIN memories m ON m.id = CAST(w.source_id AS {self.dialect.types['uuid']}) "
                f"WHERE {these} AND {where}", (*ids_params, *params)))  # no kind test: SQLite would scan every window
        return out

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

    # -- the bulk write, and the hooks around the writes of `store.memories` (`memories.MemoryStore`) --
    def copy_in(self, table: Table, fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Many rows into one table, the fastest way the backend has (joining the current transaction)."""
        with self.transaction():
            self.run_many(f"INSERT INTO {table.name} ({', '.join(fields)}) VALUES ({self.dialect.marks(len(fields))})", rows)

    def before_insert(self) -> None:
        """In the transaction of an insert, before any row is written."""

    def after_insert(self, records: list[MemoryRecord], vectors: np.ndarray | None) -> None:
        """In the transaction of an insert: work on the rows just inserted (text indexing, lazy index creation)."""

    def after_vectors(self) -> None:
        """After COMMIT of vectors given to stored rows (the first ones: an index to create)."""

    def after_remove(self) -> None:
        """In the transaction of a hard delete, after the rows went."""

    def before_history(self) -> None:
        """In the transaction of a write of history rows, before their ids are given (`store.history`)."""

    def after_history(self) -> None:
        """In the transaction of a write of history rows, after it: the change feed's readers are to be woken at COMMIT."""

    @abstractmethod
    def watch_history(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]:
        """Call `wake()` (from another thread) after history rows may have been committed, by this process
        or another; returns the function that stops it (`store.history.watch`)."""

    def erased(self, scope: str | None = None) -> None:
        """In a write transaction that removed personal data (`scope`: a person's, erased whole): a backend
        that keeps copies of written pages (SQLite's WAL) drops them after COMMIT."""

    def size_bytes(self) -> int | None:
        """The store's size on disk, where the backend can tell (`store.memories.stats`)."""
        return None

    # -- candidate legs ------------------------------------------------------------------
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

    def local_folder(self) -> Path | None:
        """The folder a file-based store lives in (files that belong with it go there), else None."""
        return None

    def is_conflict(self, exc: BaseException) -> bool:
        """Whether `exc` is a unique-key violation (another writer stored the same row first)."""
        return False

    def _index_candidates(
        self, index: VectorIndex, query: np.ndarray, filters: Filters, k: int, *, widen: bool = True
    ) -> list[Candidate] | None:
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

    def _filter_ids(self, ids: list[str], filters: Filters) -> set[str]:
        """The subset of `ids` that pass `filters` (for legs that filter part of the way themselves)."""
        where, params = self.where(filters, "m")
        out: set[str] = set()
        for chunk in chunks(ids):
            these, ids_params = self.dialect.one_of("m.id", chunk, "uuid")
            rows = self.run(f"SELECT m.id FROM memories m WHERE {these} AND {where}", (*ids_params, *params))
            out.update(str(r[0]) for r in rows)
        return out

    # -- filters ------------------------------------------------------------------------------
    def where(self, f: Filters, alias: str) -> tuple[str, list[Any]]:
        """The SQL for a `Filters` (the rules of `filters.py`)."""
        return where(f, self.dialect, alias)


def dimensions_differ(stored: int, query: int) -> StorageError:
    """A query or a new vector of another model than the stored vectors' (another process re-embedded the store)."""
    return StorageError(f"the stored vectors have {stored} dimensions, the query {query}: "
                        "run `clawrecall reembed` or configure the stored embedding model")
