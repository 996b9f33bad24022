"""`mem.upkeep`: what a server, a worker or an operator runs on a store, apart from the verbs a user calls.

The server's sweep and scheduled backups, the backfill of vectors, the vector index around a bulk load,
the embedding provider and the store's model fingerprint, the store's background work (`runtime`), the
handlers of events and job kinds and the workers that run jobs, the end of the change feed at shutdown,
the extraction's health: the doors that run the store (`serve`, `worker`, `doctor`, the hooks) reach them
here, so `Memory` itself keeps to memories.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from .._time import utcnow
from ..config import Config
from ..insight.log import SearchRecorder
from ..models import BackupSummary, EmbeddingFingerprint, Handlers, Job, PurgeRun, ReembedState, Sweep
from ..runtime import Runtime
from ..scopes import Caller
from ..storage import Store
from ._backfill import Backfill
from ._changes import Changes
from ._conversations import Conversations
from ._embedding import Embedding
from ._events import Events
from ._extraction import Extraction
from ._facts import Facts
from ._jobs import Handler, Runner
from ._maintenance import Maintenance
from ._worker import Worker, worker_name

if TYPE_CHECKING:
    from ..embeddings.base import Embedder


class Upkeep:
    """The store's upkeep and health, for the doors that run it."""

    def __init__(self, store: Store, config: Config, embedding: Embedding, maintenance: Maintenance, backfill: Backfill,
                 conversations: Conversations, recorder: SearchRecorder, facts: Facts, extraction: Extraction,
                 runtime: Runtime, events: Events, runner: Runner, changes: Changes):
        self._store = store
        self._config = config
        self._embedding = embedding
        self._maintenance = maintenance
        self._backfill = backfill
        self._conversations = conversations
        self._recorder = recorder
        self._facts = facts
        self._extraction = extraction
        self._runtime = runtime
        self._events = events
        self._runner = runner
        self._changes = changes

    # -- the server's schedule ------------------------------------------------------------------
    def sweep(self) -> Sweep:
        """The store's upkeep, run by `clawrecall serve` at start and every 30 s: close the segments whose
        pause has passed (also those that should have closed while nothing ran), erase the record past
        `conversations.retention_days` and the memories soft-deleted longer ago than
        `writes.retention_days` (ShadowDB's automatic purge) and the search log past `insight.search_log_days`, and schedule the embedding of rows
        waiting for a vector."""
        closed = self._conversations.close_due()
        writes = self._config.writes.enabled
        pruned = self._conversations.prune().messages if writes else 0
        purged = self._maintenance.purge(Caller()) if writes and self._maintenance.purge_due(utcnow()) else 0
        searches = self._recorder.prune() if writes else 0
        waiting = self._backfill.pending()
        if waiting:
            self._backfill.kick()
        return Sweep(segments_closed=len(closed), messages_pruned=pruned, memories_purged=purged,
                     searches_pruned=searches, awaiting_vectors=waiting)

    def backfill(self, *, limit: int | None = None) -> int:
        """Embed now the rows stored without a vector (messages, file chunks, memories written while the
        embedding provider was down); how many were embedded.

        The server does this in the background after each write; a script that logs messages and then
        searches by meaning calls it in between."""
        return self._backfill.run(limit=limit)

    def scheduled_backup(self, now: datetime | None = None) -> BackupSummary | None:
        """The server's daily backup, when `backups.dir` is set and the newest there is old enough."""
        return self._maintenance.scheduled_backup(now or utcnow())

    def saved_backups(self) -> list[Path]:
        """The scheduled backups kept in `backups.dir`, oldest first."""
        return self._maintenance.saved_backups()

    def last_purge(self) -> PurgeRun | None:
        """When memories were last purged (by `purge` or the server's schedule), and how many; None: never."""
        return self._maintenance.last_purge()

    # -- bulk loads and re-embedding -------------------------------------------------------------
    @contextmanager
    def deferred_vector_index(self, *, rebuild: bool = False) -> Iterator[None]:
        """For bulk loads on PostgreSQL: `add_many` inside the block skips the HNSW index, built once at the end.

        Maintaining the graph costs milliseconds per row; building it once is 10-30x cheaper. With
        `rebuild`, an index that already exists is dropped first (worth it when the load is large
        next to what is stored). Searches meanwhile read exactly. SQLite has nothing to defer.
        """
        with self._maintenance.deferred_vector_index(rebuild=rebuild):
            yield

    def build_vector_index(self) -> None:
        """Build the vector index if it is missing (after a deferred load that was interrupted)."""
        self._maintenance.build_vector_index()

    def reembed_state(self) -> ReembedState:
        """A re-embedding not finished, and rows whose vector is not the store's model's."""
        return self._maintenance.reembed_state()

    # -- the embedding model ----------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The configured provider, built on first use so commands that never embed stay light."""
        return self._embedding.embedder

    def configured_fingerprint(self) -> tuple[str, str, int | None]:
        """The provider, model and dimensions the config names (dimensions None: known once the model answers)."""
        return self._embedding.configured_fingerprint()

    def stored_fingerprint(self) -> EmbeddingFingerprint | None:
        """The model that made the store's vectors; None before the first vector."""
        return self._embedding.stored_fingerprint()

    def check_fingerprint(self, *, static_only: bool) -> None:
        """Raise EmbeddingMismatchError when the configured model is not the one that made the stored
        vectors; `static_only` compares what the config names, without loading or calling the model."""
        self._embedding.check_fingerprint(static_only=static_only)

    # -- the store and its work -------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._store.backend

    @property
    def location(self) -> str:
        """Where the store is: a SQLite file's path, or a PostgreSQL URL without its password."""
        return self._store.location

    def schema_version(self) -> int:
        """The schema version the database is at (it reads the database: `/health` asks it)."""
        return self._store.schema_version()

    def integrity_problems(self) -> list[str]:
        """What the database's own integrity check finds wrong (none: an empty list)."""
        return self._store.integrity_problems()

    def unembedded(self) -> int:
        """Rows waiting for a vector (messages, chunks, memories written while the provider was down)."""
        return self._store.memories.count_unembedded()

    @property
    def runtime(self) -> Runtime:
        """This store's background work (capture writes, recall searches, file ingestion) and per-session
        state; `Memory.close()` drains it."""
        return self._runtime

    # -- handlers and workers ---------------------------------------------------------------------
    def on(self, event: str, listener: Callable[[Any], None], *, name: str | None = None) -> None:
        """Run `listener(payload)` each time `event` (`segment_closed`, `vectors_stored`) fires, after the
        engine's own listeners; `name` (default: the function's) is who it is in `handlers()`."""
        self._events.on(event, listener, name=name)

    def job(self, kind: str, handler: Handler) -> None:
        """Run jobs of `kind` (`mem.jobs.enqueue(kind, …)`) with `handler(job, lease)` in this process's
        workers; one handler per kind."""
        self._events.job(kind, handler)

    def handlers(self) -> Handlers:
        """Who handles what, by name: each event's listeners, and each job kind's handler."""
        return self._events.handlers()

    def run_job(self, worker: str | None = None, kinds: Sequence[str] | None = None) -> Job | None:
        """Claim one ready job (of `kinds` that have a handler; default all) as `worker` (default: this host
        and process), run it, record the outcome, and return the job as it ended; None when none was ready."""
        return self._runner.run_once(worker or worker_name(), kinds)

    def worker(self, *, kinds: Sequence[str] | None = None, on_finish: Callable[[Job], None] | None = None) -> Worker:
        """A worker loop over this store's jobs (`clawrecall worker`): `run()` until `stop()`, or `run(once=True)`
        until none is ready; `on_finish` is told of each job as it ended."""
        return Worker(self._runner, kinds=kinds, on_finish=on_finish)

    def start_workers(self, count: int | None = None) -> list[Worker]:
        """Run `count` (default `jobs.workers`) worker threads until `stop_workers` (or `Memory.close`)."""
        return self._runner.start_workers(count)

    def stop_workers(self, timeout: float | None = 30.0) -> None:
        """Stop the worker threads `start_workers` started; each finishes the job it is running first (a job
        still running after `timeout` is left to its lease, and runs again elsewhere)."""
        self._runner.stop_workers(timeout)

    def close_feeds(self) -> None:
        """End every change feed reader (`mem.changes.subscribe`: its subscription is `closed`, and it is
        woken to see it): a server shutting down does not wait for its event streams. `Memory.close` does it."""
        self._changes._close()

    # -- extraction ----------------------------------------------------------------------------------
    @property
    def extracting(self) -> bool:
        """Whether closed segments are extracted: an LLM is configured and `extraction.enabled`."""
        return self._facts.active

    def check_llm(self) -> tuple[bool, str]:
        """Whether the LLM answers a one-word request now, in words, for `clawrecall doctor`."""
        return self._extraction.check()
