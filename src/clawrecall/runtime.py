"""What an open store keeps in process besides its database: background work and per-session state.

A `Runtime` belongs to one `Memory` (`mem.upkeep.runtime`), so two stores in one process share neither
their queues nor their sessions, and `Memory.close()` drains the work queued on it before the
store goes: a capture queued just before close is written, not lost. Work runs on named queues
(`capture` writes after the hook has answered; `recall` searches the hook may stop waiting for);
this is where the persistent job queue will sit.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

from .errors import ShuttingDownError

log = logging.getLogger("clawrecall")

T = TypeVar("T")

DRAIN_ON_CLOSE_S = 30.0


class WorkQueue:
    """Calls run on `threads` threads of their own. Past `max_pending` queued or running calls, `submit`
    refuses (returns None) rather than block the caller; `None` means no bound."""

    def __init__(self, name: str, *, threads: int = 1, max_pending: int | None = None):
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"clawrecall-{name}")
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()
        self._max = max_pending
        self._hurry = threading.Event()  # set while someone waits for the queue: delayed calls start at once

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T] | None:
        with self._lock:
            if self._max is not None and len(self._pending) >= self._max:
                return None
            future = self._pool.submit(fn, *args, **kwargs)
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return future

    def submit_later(self, delay_s: float, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T] | None:
        """`fn` after `delay_s`, or at once when the queue is drained or stopped: work that gains from gathering
        (many searches' log rows in one write, off the searches' way) without delaying anyone who waits for it."""
        return self.submit(self._after, delay_s, fn, *args, **kwargs)

    def _after(self, delay_s: float, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        self._hurry.wait(delay_s)
        return fn(*args, **kwargs)

    def _finished(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the calls submitted so far. True when none is left running."""
        with self._lock:
            pending = set(self._pending)
        self._hurry.set()
        try:
            return not wait(pending, timeout).not_done
        finally:
            self._hurry.clear()  # (a call queued meanwhile may wait its delay once more: it is only later)

    def stop(self, timeout: float | None = None) -> bool:
        """Refuse new calls, wait up to `timeout` for the queued ones, and let the threads go."""
        self._pool.shutdown(wait=False)
        drained = self.drain(timeout)
        if not drained:
            log.warning("%s: work still running after %s s; it finishes unobserved", self.name, timeout)
        return drained


class SessionLRU(Generic[T]):
    """Per-session state in process memory, bounded: the least recently used session is forgotten first."""

    def __init__(self, factory: Callable[[], T], max_sessions: int = 4096):
        self._factory = factory
        self._max = max_sessions
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, *, reset: bool = False) -> T:
        """The session's state, created on first use; `reset` starts it afresh (a `/new` session)."""
        with self._lock:
            if reset or key not in self._items:
                self._items[key] = self._factory()
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)
            return self._items[key]


class Runtime:
    """One store's work queues and session states, each made on first use under its name."""

    def __init__(self) -> None:
        self._queues: dict[str, WorkQueue] = {}
        self._sessions: dict[str, SessionLRU[Any]] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def queue(self, name: str, *, threads: int = 1, max_pending: int | None = None) -> WorkQueue:
        """The queue `name`; the first call makes it, with these limits."""
        with self._lock:
            if self._stopped:
                raise ShuttingDownError("this store is closed: no more background work")
            if name not in self._queues:
                self._queues[name] = WorkQueue(name, threads=threads, max_pending=max_pending)
            return self._queues[name]

    def sessions(self, name: str, factory: Callable[[], T]) -> SessionLRU[T]:
        """The per-session states `name` (one per caller's session), each made by `factory` on first use."""
        with self._lock:
            if name not in self._sessions:
                self._sessions[name] = SessionLRU(factory)
            return self._sessions[name]

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the work queued so far on every queue (the server's shutdown, tests). True when all is done."""
        with self._lock:
            queues = list(self._queues.values())
        return all([q.drain(timeout) for q in queues])

    def stop(self, timeout: float | None = DRAIN_ON_CLOSE_S) -> bool:
        """Refuse new work and wait up to `timeout` for what is queued (`Memory.close`). Calling it again is harmless."""
        with self._lock:
            self._stopped = True
            queues = list(self._queues.values())
        return all([q.stop(timeout) for q in queues])
