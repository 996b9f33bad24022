"""`store.history`: what happened to each memory (added, updated, deleted, erased), one row an event.

It is the change feed's durable log too (`engine/_changes.py`, `/v1/events`): read from a cursor by
id, so its ids must become visible in the order they were given (`before_history`), and a reader is
woken when rows may have committed (`after_history`, `watch`)."""

from __future__ import annotations

import json
from typing import Any, Callable, Protocol, Sequence

from ..models import HistoryEntry
from .base import HistoryDraft, chunks
from .dialect import RowMap, prefix_bounds
from .executor import Executor
from .schema import HISTORY

#: what a `HistoryDraft` holds: every column but the id the database gives
HISTORY_DRAFT_FIELDS = tuple(c for c in HISTORY.fields if HISTORY.column(c).type != "serial")


class HistoryStore(Executor, Protocol):
    """What the rows need of a backend besides statements: its hooks around a write of history rows and
    its way of watching for them (`sql.Store` has the hooks as no-ops)."""

    def before_history(self) -> None: ...

    def after_history(self) -> None: ...

    def watch_history(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]: ...


class History:
    """The history table's reads and writes."""

    def __init__(self, store: HistoryStore):
        self._store = store
        self._map = RowMap(store.dialect, HISTORY)
        self._drafts = RowMap(store.dialect, HISTORY, HISTORY_DRAFT_FIELDS, json_text=True)

    def add(self, entries: Sequence[HistoryDraft]) -> None:
        """The backend's bulk write (binary COPY on PostgreSQL): a bulk load writes one row per memory."""
        s = self._store
        with s.transaction():
            s.before_history()
            s.copy_in(HISTORY, self._drafts.fields, (self._drafts.row(e) for e in entries))
            s.after_history()

    def after(self, after_id: int, limit: int) -> list[HistoryEntry]:
        """Rows after `after_id`, in id order: the change feed. Ids become visible in the order they were
        given (`before_history`), so one read from a cursor misses nothing a later read would find."""
        p = self._store.dialect.p
        rows = self._store.run(f"SELECT {self._map.columns} FROM history WHERE id > {p} ORDER BY id LIMIT {p}",
                               (after_id, limit))
        return [self._map.read(HistoryEntry, r) for r in rows]

    def last(self) -> int:
        """The newest row's id (0: none): where a change feed that starts now starts."""
        return int(self._store.run("SELECT coalesce(max(id), 0) FROM history")[0][0])

    def watch(self, wake: Callable[[], None], poll_s: float) -> Callable[[], None]:
        """Call `wake()` (from another thread) after rows may have been committed, by this process or another
        (PostgreSQL: NOTIFY; SQLite: its own commits, and a poll every `poll_s`); returns the function that
        stops it. A wake too many is harmless, one too few is not."""
        return self._store.watch_history(wake, poll_s)

    def unname_erasures(self, scope: str, agent_id: str | None, *, dry_run: bool) -> int:
        """Blank where erased memories were (the `after` of their forget or purge rows: scope, agent, level) when
        it names this person (its own scope, or as the agent that wrote them); how many rows (would be)."""
        s = self._store
        rows = s.run("SELECT id, after FROM history WHERE action IN ('forget', 'purge') AND after IS NOT NULL")
        ids = [i for i, after in rows if (w := after if isinstance(after, dict) else json.loads(after)).get("scope") == scope
               or (agent_id is not None and w.get("agent_id") == agent_id)]
        if not dry_run:
            with s.transaction():
                for chunk in chunks(ids):
                    s.run(f"UPDATE history SET after = NULL WHERE id IN ({s.dialect.marks(len(chunk))})", chunk)
        return len(ids)

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

    def mask(self, ids: Sequence[str], mask: str) -> None:
        """Mask the text (content, title, keys) every history row of these memories holds: they became
        secret, and history must not keep what sealing hides."""
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            for chunk in chunks(ids):
                rows = s.run(f"SELECT id, before, after FROM history WHERE memory_id IN ({s.dialect.marks(len(chunk))})", chunk)
                for row_id, *values in rows:
                    s.run(f"UPDATE history SET before = {p}, after = {p} WHERE id = {p}",
                          (*(_masked(v, mask) for v in values), row_id))

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


_TEXT_FIELDS = ("content", "title", "keys")


def _masked(value: Any, mask: str) -> str | None:
    """A history value (JSON) with its text fields masked."""
    if value is None:
        return None
    data = json.loads(value) if isinstance(value, str) else value
    if isinstance(data, dict):
        data = {k: (v if k not in _TEXT_FIELDS or v is None else mask if k == "content" else None) for k, v in data.items()}
    return json.dumps(data)
