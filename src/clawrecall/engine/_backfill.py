"""Vectors for rows written without one: messages and file chunks are stored at once and embedded here,
off the request path (nova-memory's embedding queue); a message longer than the model's window gets its
windows here too (`conversations/windows.py`). The rows are the queue: whatever a crash
interrupts is embedded at the next start. Keyword search finds the rows meanwhile."""

from __future__ import annotations

import logging
import threading
import time
from ..conversations.windows import windows
from ..files import Tokens, tokens_for
from ..models import MemoryRecord
from ..runtime import Runtime
from ..storage import Store
from ._embedding import Embedding
from ._events import Events, VectorsStored
from ._validate import new_ids

log = logging.getLogger("clawrecall.backfill")

BATCH = 64
RETRY_AFTER_S = 30.0  # the provider failed: try again this much later


class Backfill:
    """Embeds unembedded rows on the runtime's `embed` queue; `kick()` after a write schedules a run."""

    def __init__(self, store: Store, embedding: Embedding, runtime: Runtime, events: Events):
        self.store = store
        self.embedding = embedding
        self.runtime = runtime
        self.events = events  # `vectors_stored` after each batch (the segments' topic checks)
        self._lock = threading.Lock()
        self._running = threading.Lock()  # one run at a time in this process: the same rows are not embedded twice
        self._scheduled = False
        self._failed_at: float | None = None
        self._tokens: Tokens | None = None

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
            rows = self.store.memories.unembedded(BATCH if limit is None else min(BATCH, limit - done))
            if not rows:
                break
            ids = [i for i, _, _, _ in rows]
            cut = {i: parts for i, text, kind, role in rows if kind == "message" and (parts := self._windows(text, role))}
            windows = self._window_records(cut)
            vectors = self.embedding.passages([text for _, text, _, _ in rows] + [w.content for w in windows])
            # the windows first: a crash before the message's vector leaves it to be cut again, not half done
            if cut:
                self.store.memories.put_windows(windows, vectors[len(rows):], list(cut))
            self.store.memories.set_vectors(ids, vectors[: len(rows)], self.embedding.model_name, self.embedding.confirm_unchanged)
            done += len(rows)
            self.events.emit("vectors_stored", VectorsStored(ids=ids))
        return done

    def cuts(self, text: str, role: str) -> bool:
        """Whether a message is embedded as windows (so one vector of it whole cannot stand for it)."""
        return bool(self._windows(text, role))

    def _windows(self, text: str, role: str | None) -> list[str]:
        """A message's windows, none when the model's window holds it whole. Only what searches read by
        default is cut: a pasted tool output's tail costs model passes no search uses."""
        if role not in self.embedding.config.retrieval.message_roles:
            return []
        if self._tokens is None:  # the model's tokenizer, loaded at the first message that may need it
            self._tokens = tokens_for(self.embedding.config.embedding)
        return windows(text, self._tokens, self.embedding.config.files.overlap)

    def _window_records(self, cut: dict[str, list[str]]) -> list[MemoryRecord]:
        """The windows' rows: each in its message's scope, owned as it is, with no session (a window is no turn)."""
        messages = self.store.memories.fetch(list(cut)) if cut else {}
        return [
            MemoryRecord(id=window_id, content=text, kind="window", source_id=message.id, scope=message.scope,
                         user_id=message.user_id, agent_id=message.agent_id, importance=message.importance,
                         created_at=message.created_at, updated_at=message.created_at, metadata={"window": n},
                         embedding_model=self.embedding.model_name)
            for message_id, parts in cut.items() if (message := messages.get(message_id)) is not None
            for n, (window_id, text) in enumerate(zip(new_ids(len(parts)), parts), start=2)
        ]

    def pending(self) -> int:
        return self.store.memories.count_unembedded()
