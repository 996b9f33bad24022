"""`store.history`: what happened to each memory (added, updated, deleted, erased), one row an event."""

from __future__ import annotations

from typing import Sequence

from ..models import HistoryEntry
from .base import HistoryDraft, chunks
from .dialect import RowMap, prefix_bounds
from .executor import Executor
from .schema import HISTORY

#: what a `HistoryDraft` holds: every column but the id the database gives
HISTORY_DRAFT_FIELDS = tuple(c for c in HISTORY.fields if HISTORY.column(c).type != "serial")


class History:
    """The history table's reads and writes."""

    def __init__(self, store: Executor):
        self._store = store
        self._map = RowMap(store.dialect, HISTORY)
        self._drafts = RowMap(store.dialect, HISTORY, HISTORY_DRAFT_FIELDS, json_text=True)

    def add(self, entries: Sequence[HistoryDraft]) -> None:
        """The backend's bulk write (binary COPY on PostgreSQL): a bulk load writes one row per memory."""
        self._store.copy_in(HISTORY, self._drafts.fields, (self._drafts.row(e) for e in entries))

    def of(self, memory_id: str) -> list[HistoryEntry]:
        """A memory's events, oldest first."""
        rows = self._store.run(
            f"SELECT {self._map.columns} FROM history WHERE memory_id = {self._store.dialect.p} ORDER BY id", (memory_id,),
        )
        return [self._map.read(HistoryEntry, r) for r in rows]

    def ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        """Ids with history that start with `prefix`: an erased memory has no row left to resolve by."""
        lo, hi = prefix_bounds(prefix)
        p = self._store.dialect.p
        rows = self._store.run(
            f"SELECT DISTINCT memory_id FROM history WHERE memory_id BETWEEN {p} AND {p} ORDER BY memory_id LIMIT {p}",
            (lo, hi, limit),
        )
        return [str(r[0]) for r in rows]

    def erase(self, ids: Sequence[str]) -> None:
        """Blank the before/after of every history row of these memories (GDPR forget)."""
        s = self._store
        with s.transaction():
            for chunk in chunks(ids):
                s.run(f"UPDATE history SET before = NULL, after = NULL WHERE memory_id IN ({s.dialect.marks(len(chunk))})",
                      chunk)

    def count(self, ids: Sequence[str]) -> int:
        """History rows of these memories."""
        s = self._store
        return sum(s.run(f"SELECT count(*) FROM history WHERE memory_id IN ({s.dialect.marks(len(chunk))})", chunk)[0][0]
                   for chunk in chunks(ids))

    def actors(self) -> list[str]:
        """Every distinct actor history names (a few per user and agent)."""
        return [r[0] for r in self._store.run("SELECT DISTINCT actor FROM history WHERE actor IS NOT NULL")]

    def count_by_actor(self, actors: Sequence[str]) -> int:
        if not actors:
            return 0
        return self._store.run(f"SELECT count(*) FROM history WHERE actor IN ({self._store.dialect.marks(len(actors))})",
                               actors)[0][0]

    def rename_actor(self, old: str, new: str) -> int:
        """Name another actor on every history row of `old`; how many rows."""
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            return s.rowcount(f"UPDATE history SET actor = {p} WHERE actor = {p}", (new, old))
