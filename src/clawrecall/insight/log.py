"""The search log's writer: each search is noted in memory on the request path (a tuple appended under
a lock) and written by the store's `search-log` queue, the searches of `WRITE_AFTER_S` in one transaction,
so a search never waits on the log's INSERT, nor, on SQLite, on the store's connection while another
search's rows are written (written after each search, they held it ~4 ms of every 25 ms search of a
burst). What a crash can lose: the searches noted but not yet written, those of the last half second;
a clean `close()` drains the queue first, and a read of the log (`Insight`) writes what is noted first."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timedelta
from typing import Sequence

from .._time import utcnow
from ..config import Config
from ..errors import ShuttingDownError
from ..models import LoggedHit, LoggedSearch, SearchHit
from ..runtime import Runtime
from ..scopes import Caller
from ..storage import Store
from .door import DOOR

log = logging.getLogger("clawrecall")

WRITE_AFTER_S = 0.5

_Noted = tuple[str, datetime, str, Caller, "list[str] | None", str, str, "list[tuple[str, float]]", float]


def owner_scope(caller: Caller) -> str | None:
    """The scope a caller's searches are logged under, which decides who reads them: its user's, else
    its agent's; None (the administrator alone reads it) for a caller with no identity."""
    if caller.user_id is not None:
        return f"user:{caller.user_id}"
    return f"agent:{caller.agent_id}" if caller.agent_id is not None else None


class SearchRecorder:
    def __init__(self, store: Store, config: Config, runtime: Runtime):
        self._store = store
        self._config = config
        self._runtime = runtime
        self._noted: list[_Noted] = []
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one flush at a time: a flush returns once all noted before it is written
        self._scheduled = False

    @property
    def enabled(self) -> bool:
        return self._config.insight.search_log and self._config.writes.enabled

    def note(self, caller: Caller, scopes: Sequence[str] | None, query: str, mode: str, hits: Sequence[SearchHit],
             took_ms: float) -> None:
        """Note a search; written soon after, off the request path."""
        if not self.enabled:
            return
        found = [(h.memory.id, h.score) for h in hits]
        # the id is drawn here, in the order searches happen, not in the order a thread writes them
        noted = (str(uuid.uuid4()), utcnow(), DOOR.get(), caller, None if scopes is None else list(scopes), query, mode, found, took_ms)
        with self._lock:
            self._noted.append(noted)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._runtime.queue("search-log").submit_later(WRITE_AFTER_S, self.flush)
        except ShuttingDownError:  # the store is closing: written here, as the drain would have
            self.flush()

    def flush(self) -> None:
        """Write what is noted, in one transaction, after a flush in flight (the queue's) has written its own:
        `forget` flushes first, so no search noted before comes back after. A failure (the store read-only,
        locked) loses those rows and says so: the log must never fail a search."""
        with self._writing:
            with self._lock:
                noted, self._noted, self._scheduled = self._noted, [], False
            if noted:
                self._write(noted)

    def _write(self, noted: list[_Noted]) -> None:
        rows = []
        for log_id, at, door, caller, scopes, query, mode, found, took_ms in noted:
            search = LoggedSearch(
                id=log_id, at=at, door=door, scope=owner_scope(caller), user_id=caller.user_id,
                agent_id=caller.agent_id, session_id=caller.session_id, scopes=scopes, query=query, mode=mode,
                result_count=len(found), top_score=found[0][1] if found else None, took_ms=round(took_ms, 3),
            )
            hits = [LoggedHit(log_id=search.id, rank=i, memory_id=mid, score=score, at=at)
                    for i, (mid, score) in enumerate(found, 1)]
            rows.append((search, hits))
        try:
            self._store.search_log.append(rows)
        except Exception:
            log.exception("search log: %d searches not written", len(rows))

    def prune(self) -> int:
        """Remove the searches older than `insight.search_log_days`; how many."""
        days = self._config.insight.search_log_days
        if days is None:
            return 0
        return self._store.search_log.prune(utcnow() - timedelta(days=days))
