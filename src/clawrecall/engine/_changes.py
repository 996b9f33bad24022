"""`mem.changes`: the change feed, every change to a memory in commit order, told only to those who may
read the memory (docs/insight.md#live-updates; REST `/v1/events` streams it).

The history table is the durable log, and its ids are the events' ids: a client that lost its
connection reads on after the last id it got, and misses nothing. A reader is woken when history may
have grown (`store.history.watch`: PostgreSQL's LISTEN/NOTIFY, from every server on the database;
SQLite's own commits at once and another process's by polling), then reads its events past its
cursor. Each row is checked with the one scope check against the memory as it is now (an erased
memory by where its erasure row says it was), so a client never hears of a memory it may not read.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

from ..config import Config
from ..models import CHANGE_TYPES, ChangePage, MemoryEvent, MemoryRecord
from ..scopes import Caller, as_caller, read_scopes, sees
from ..storage import Store
from ._validate import check_int

log = logging.getLogger("clawrecall.changes")

BATCH = 500  # history rows read at once
MAX_EVENTS = 1000
_MAX_ID = 2**63 - 1  # a 64-bit SQL integer


@dataclass(frozen=True)
class _Where:
    """Where an erased memory was, as its forget or purge row keeps it: what the scope check needs."""

    scope: str
    agent_id: str | None
    visibility: str
    user_id: str | None = None


class Subscription:
    """A reader's hold on the feed (`mem.changes.subscribe`): `closed` once the feed has ended (the store is
    closing: a server shutting down does not wait for its readers), `cancel()` to be woken no more."""

    def __init__(self, changes: Changes, key: object):
        self._changes = changes
        self._key = key

    @property
    def closed(self) -> bool:
        return self._changes._closed

    def cancel(self) -> None:
        with self._changes._lock:
            self._changes._wakes.pop(self._key, None)


class Changes:
    def __init__(self, store: Store, config: Config):
        self._store = store
        self._config = config
        self._lock = threading.Lock()
        self._wakes: dict[object, Callable[[], None]] = {}
        self._unwatch: Callable[[], None] | None = None
        self._closed = False  # `_close()` was called: readers stop

    def last(self) -> int:
        """The newest event's id: a feed that starts now reads after it."""
        return self._store.history.last()

    def after(
        self, cursor: int, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None, limit: int = 100,
    ) -> ChangePage:
        """The events after `cursor` (an event's id, or `last()`) that the caller may read, oldest first, at most
        `limit`; the page's `cursor` is where to read on. `scope` narrows them as a search's does."""
        caller = as_caller(caller, user_id, agent_id)
        check_int(cursor, "cursor", 0, _MAX_ID)
        check_int(limit, "limit", 1, MAX_EVENTS)
        scopes = read_scopes(caller, scope, access=self._config.access)
        events: list[MemoryEvent] = []
        while True:
            rows = self._store.history.after(cursor, BATCH)
            records = self._store.memories.fetch(list({r.memory_id for r in rows}))
            for row in rows:
                if len(events) == limit:
                    return ChangePage(events=events, cursor=cursor, more=True)
                cursor = row.id
                record = records.get(row.memory_id)
                where = record or _erased_where(row.action, row.after)
                if where is None or (scopes is not None and where.scope not in scopes) or not sees(caller.agent_id, where):
                    continue
                events.append(MemoryEvent(id=row.id, type=CHANGE_TYPES[row.action], memory_id=row.memory_id,
                                          scope=where.scope, actor=row.actor, at=row.at, memory=record))
            if len(rows) < BATCH:
                return ChangePage(events=events, cursor=cursor, more=False)

    def subscribe(self, wake: Callable[[], None]) -> Subscription:
        """Call `wake()` (from another thread) whenever events may have arrived, and once more when the feed
        ends; the store is watched from the first subscriber until the store closes."""
        key = object()
        with self._lock:
            self._wakes[key] = wake
            if self._unwatch is None and not self._closed:
                self._unwatch = self._store.history.watch(self._wake_all, self._config.insight.events_poll_s)
        return Subscription(self, key)

    def _wake_all(self) -> None:
        with self._lock:
            wakes = list(self._wakes.values())
        for wake in wakes:
            try:
                wake()
            except Exception:  # a reader gone meanwhile (its loop closed): never the writer's problem (SQLite calls at commit)
                log.exception("a change feed reader could not be woken")

    def _close(self) -> None:
        """Stop watching the store and wake every reader, whose subscription is then `closed`
        (`mem.upkeep.close_feeds`, `Memory.close`)."""
        with self._lock:
            self._closed = True
            unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()
        self._wake_all()


def _erased_where(action: str, after: dict | None) -> _Where | None:
    """Where an erased memory was, from its erasure row (None: its other rows, and an erasure of a person)."""
    if action not in ("forget", "purge") or not after or "scope" not in after:
        return None
    return _Where(after["scope"], after.get("agent_id"), after.get("visibility", "shared"))


def erasure_where(record: MemoryRecord) -> dict[str, str | None]:
    """What a forget or purge row keeps of where the memory was (no content, no user): for `_erased_where`."""
    return {"scope": record.scope, "agent_id": record.agent_id, "visibility": str(record.visibility.value)}
