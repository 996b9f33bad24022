"""Vectors for rows written without one: messages and file chunks are stored at once and embedded here,
off the request path (nova-memory's embedding queue). The rows are the queue: whatever a crash
interrupts is embedded at the next start. Keyword search finds the rows meanwhile."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ..runtime import Runtime
from ..storage import Store
from ._embedding import Embedding

log = logging.getLogger("clawrecall.backfill")

BATCH = 64
RETRY_AFTER_S = 30.0  # the provider failed: try again this much later


class Backfill:
    """Embeds unembedded rows on the runtime's `embed` queue; `kick()` after a write schedules a run."""

    def __init__(self, store: Store, embedding: Embedding, runtime: Runtime):
        self.store = store
        self.embedding = embedding
        self.runtime = runtime
        self.listeners: list[Callable[[list[str]], None]] = []  # told which rows got vectors (segment topic checks)
        self._lock = threading.Lock()
        self._running = threading.Lock()  # one run at a time in this process: the same rows are not embedded twice
        self._scheduled = False
        self._failed_at: float | None = None

    def kick(self) -> None:
        """Schedule a run unless one is waiting to start (a running one picks up rows written meanwhile)."""
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        if self.runtime.queue("embed").submit(self._run) is None:
            with self._lock:
                self._scheduled = False

    def _run(self) -> None:
        with self._lock:
            self._scheduled = False
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return
        try:
            self.run()
            self._failed_at = None
        except Exception:  # the rows stay unembedded and are tried again later; keyword search finds them
            self._failed_at = time.monotonic()
            log.exception("embedding backfill failed; retrying in %.0f s", RETRY_AFTER_S)

    def run(self, *, limit: int | None = None) -> int:
        """Embed pending rows now, in batches, until none is left (or `limit` rows are done). Returns how many."""
        with self._running:
            return self._run_batches(limit)

    def _run_batches(self, limit: int | None) -> int:
        done = 0
        while limit is None or done < limit:
            rows = self.store.unembedded(BATCH if limit is None else min(BATCH, limit - done))
            if not rows:
                break
            ids = [i for i, _ in rows]
            vectors = self.embedding.passages([text for _, text in rows])
            self.store.set_vectors(ids, vectors, self.embedding.model_name, self.embedding.confirm_unchanged)
            done += len(rows)
            for listener in self.listeners:
                listener(ids)
        return done

    def pending(self) -> int:
        return self.store.count_unembedded()
