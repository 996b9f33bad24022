"""`mem.jobs`: the persistent job queue (docs/jobs.md).

Slow work on stored data (extracting facts from a closed segment with an LLM) is a job: a row
written in the same transaction as the data that made it due (`enqueue`), so a closed segment
and its job commit together or not at all. A worker claims a ready job under a lease, runs its
kind's handler, and records the outcome. The handler does its slow work outside any transaction
and writes its results inside `with lease.commit():`, one transaction that first checks the
lease is still its own and marks the job done before it commits: a worker killed mid-job leaves
nothing half-written, and the job runs again once its lease has run out.
"""

from __future__ import annotations

import builtins
import json
import logging
import random
import threading
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, Mapping, Sequence

from .._time import utcnow
from ..config import Config
from ..errors import (
    AmbiguousIdError,
    JobStateError,
    LeaseLostError,
    NotFoundError,
    PermanentJobError,
    RetryLaterError,
    ValidationError,
)
from ..models import JOB_STATUSES, Job, JobKindStats, JobStats, JobStatus
from ..scopes import Caller, as_caller, read_scopes, validate_scope, write_scope
from ..storage import Store
from ..storage.jobs import Claim, Usage
from ._reads import is_id_or_prefix
from ._validate import check_int, check_text, new_ids
from ._worker import Worker

log = logging.getLogger("clawrecall.jobs")

_MAX_ERROR_CHARS = 2000
_MAX_ROWS = 1_000_000_000


class Lease:
    """A worker's hold on one job while its handler runs: renewed by a heartbeat, checked at `commit`."""

    def __init__(self, store: Store, job: Job, claim: Claim):
        self._store = store
        self.job = job
        self._claim = claim
        self._usage = Usage()
        self._lost = threading.Event()
        self.committed = False

    @property
    def lost(self) -> bool:
        """The heartbeat found the job taken over (or cancelled): a long handler may stop early."""
        return self._lost.is_set()

    def usage(self, input_tokens: int = 0, output_tokens: int = 0, cost: float | None = None) -> None:
        """Add an LLM call's tokens (and cost, when priced) to the job's; recorded with its outcome, failures too."""
        u = self._usage
        self._usage = Usage(u.input_tokens + int(input_tokens), u.output_tokens + int(output_tokens),
                            u.cost if cost is None else (u.cost or 0.0) + float(cost))

    @contextmanager
    def commit(self) -> Iterator[None]:
        """One store transaction for the handler's results: it first checks that this worker still holds the
        job (else `LeaseLostError`, and nothing is written), and marks the job done before committing."""
        if self.committed:
            raise LeaseLostError(f"job {self.job.id} was committed already")
        with self._store.transaction():
            if not self._store.jobs.hold(self._claim, utcnow()):
                raise LeaseLostError(f"job {self.job.id} is no longer held by {self._claim.worker}: its lease ran out "
                                     "and another worker took it, or it was cancelled")
            yield
            self._store.jobs.finish(self._claim, utcnow(), self._take_usage())
        self.committed = True

    def _take_usage(self) -> Usage:
        usage, self._usage = self._usage, Usage()
        return usage


Handler = Callable[[Job, Lease], None]


class Jobs:
    """`mem.jobs`: the queue as a user sees it (queue a job, read, retry, cancel); what runs the jobs is
    the `Runner` below, reached by the doors that run the store through `mem.upkeep`."""

    def __init__(self, store: Store, config: Config):
        self._store = store
        self._config = config

    def enqueue(
        self, kind: str, *, scope: str, subject_id: str, payload: Mapping[str, Any] | None = None,
        run_after: datetime | None = None,
    ) -> Job | None:
        """Queue a job, in the caller's open `store.transaction()` if there is one (so it commits with the data
        it is about). None when a job of this kind and subject exists: a subject is worked on once."""
        for name, value in (("kind", kind), ("subject_id", subject_id)):
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"a job's {name} must be a non-empty string")
        validate_scope(scope)
        body = dict(payload or {})
        try:
            json.dumps(body)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"a job's payload must be JSON: {exc}") from None
        check_text(body, "a job's payload")
        now = utcnow()
        job = Job(id=new_ids(1)[0], kind=kind, scope=scope, subject_id=subject_id, payload=body,
                  max_attempts=self._config.jobs.max_attempts, run_after=run_after or now, created_at=now, updated_at=now)
        return job if self._store.jobs.add(job) else None

    # -- reading and managing -------------------------------------------------------------------
    def list(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        status: JobStatus | None = None, kind: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Job]:
        """The jobs in the scopes the caller reads, the newest first."""
        caller = as_caller(caller, user_id, agent_id)
        if status is not None and status not in JOB_STATUSES:
            raise ValidationError(f"unknown job status {status!r}: use {', '.join(JOB_STATUSES)}")
        check_text(kind, "kind")
        check_int(limit, "limit", 1, _MAX_ROWS)
        check_int(offset, "offset", 0, _MAX_ROWS)
        return self._store.jobs.find(self._reads(caller), status=status, kind=kind, limit=limit, offset=offset)

    def get(
        self, job_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
    ) -> Job:
        """A job by id or unique prefix (8+ hex characters), in the scopes the caller reads."""
        caller = as_caller(caller, user_id, agent_id)
        if not isinstance(job_id, str) or not is_id_or_prefix(job_id):
            raise ValidationError(f"invalid job id {job_id!r}: give the id or at least 8 of its first hex characters")
        prefix = job_id.strip().lower()
        matches = self._store.jobs.ids_with_prefix(prefix, self._reads(caller))
        if not matches:
            raise NotFoundError(f"no job with id {job_id!r}")
        if len(matches) > 1 and prefix not in matches:
            raise AmbiguousIdError(job_id, matches)
        found = self._store.jobs.get(prefix if prefix in matches else matches[0])
        if found is None:  # erased between the two reads
            raise NotFoundError(f"no job with id {job_id!r}")
        return found

    def retry(
        self, job_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
    ) -> Job:
        """Queue a dead or cancelled job again, due now, with its attempts back to 0."""
        caller = as_caller(caller, user_id, agent_id)
        return self._move(job_id, caller, ("dead", "cancelled"), "queued", "retried")

    def cancel(
        self, job_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
    ) -> Job:
        """Cancel a queued job. A running one cannot be: its worker holds it (cancel it if it is queued again)."""
        caller = as_caller(caller, user_id, agent_id)
        return self._move(job_id, caller, ("queued",), "cancelled", "cancelled")

    def _move(self, job_id: str, caller: Caller, before: tuple[str, ...], status: str, verb: str) -> Job:
        job = self.get(job_id, caller=caller)
        write_scope(caller, job.scope, access=self._config.access)  # reading a job is not enough to change it
        if job.status not in before or not self._store.jobs.move(job.id, before, status, utcnow(), reset=status == "queued"):
            current = self._store.jobs.get(job.id)
            now = current.status if current is not None else job.status
            if now == "running" and status == "cancelled":
                raise JobStateError(f"job {job.id} is running: a running job cannot be cancelled (its worker holds it; "
                                    "it can be cancelled if it fails and is queued again)")
            raise JobStateError(f"job {job.id} is {now}: only a {' or '.join(before)} job can be {verb}")
        moved = self._store.jobs.get(job.id)
        assert moved is not None
        return moved

    def stats(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
    ) -> JobStats:
        """Jobs per status, tokens in and out and cost per kind, and the oldest ready job, in the caller's scopes."""
        caller = as_caller(caller, user_id, agent_id)
        scopes = self._reads(caller)
        by_status = {s: 0 for s in JOB_STATUSES}
        by_kind: dict[str, JobKindStats] = {}
        for kind, status, n, tokens_in, tokens_out, cost in self._store.jobs.counts(scopes):
            by_status[status] += n
            k = by_kind.setdefault(kind, JobKindStats(jobs={}, input_tokens=0, output_tokens=0, cost=None))
            k.jobs[status] = n
            k.input_tokens += tokens_in
            k.output_tokens += tokens_out
            if cost is not None:
                k.cost = (k.cost or 0.0) + cost
        retrying, last_error = self._store.jobs.retrying(scopes)
        return JobStats(by_status=by_status, by_kind=by_kind, oldest_ready=self._store.jobs.oldest_ready(scopes, utcnow()),
                        retrying=retrying, last_error=last_error)

    def _reads(self, caller: Caller) -> builtins.list[str] | None:
        """The scopes the caller reads unasked (None: every scope, for the administrator)."""
        return read_scopes(caller, None, access=self._config.access)


class Runner:
    """Runs ready jobs: one at a time (`run_once`, the loop of a `Worker`), or in worker threads."""

    def __init__(self, store: Store, config: Config, handlers: Mapping[str, Handler]):
        """`handlers`: kind -> handler, as registered (`mem.upkeep.job`, `_events.wire`)."""
        self._store = store
        self._config = config
        self.handlers = handlers
        self._workers: list[Worker] = []

    @property
    def poll_s(self) -> float:
        """How long an idle worker waits before it looks for a ready job again (`jobs.poll_s`)."""
        return self._config.jobs.poll_s

    def run_once(self, worker: str, kinds: Sequence[str] | None = None) -> Job | None:
        """Claim one ready job (of `kinds` that have a handler; default all), run it, record the outcome, and
        return the job as it ended; None when no job was ready."""
        wanted = [k for k in (self.handlers if kinds is None else kinds) if k in self.handlers]
        cfg = self._config.jobs
        now = utcnow()
        job = self._store.jobs.claim(worker, now, now + timedelta(seconds=cfg.lease_s), wanted)
        if job is None:
            return None
        claim = Claim(job.id, worker, job.attempts)
        if job.attempts > job.max_attempts:  # each run so far lost its worker (killed) before finishing
            self._store.jobs.release(claim, now, Usage(), status="dead",
                                    error=f"its worker stopped before finishing {job.max_attempts} times (lease expired)")
            return self._store.jobs.get(job.id)
        lease = Lease(self._store, job, claim)
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(lease, stop), daemon=True, name=f"clawrecall-lease-{job.id[:8]}")
        beat.start()
        try:
            self.handlers[job.kind](job, lease)
        except Exception as exc:
            self._failed(job, lease, exc)
        else:
            if not lease.committed and not self._store.jobs.finish(claim, utcnow(), lease._take_usage()):
                log.warning("job %s (%s) finished after its lease was lost: its result may be another run's", job.id, job.kind)
        finally:
            stop.set()
            beat.join()
        return self._store.jobs.get(job.id)

    def _failed(self, job: Job, lease: Lease, exc: Exception) -> None:
        """Record a handler's exception: retried later, with backoff, or dead."""
        if lease.committed:  # its results and `done` are committed; what failed after is the handler's to log
            log.warning("job %s (%s) raised after committing: %s", job.id, job.kind, exc)
            return
        if isinstance(exc, LeaseLostError):
            log.warning("job %s (%s): %s", job.id, job.kind, exc)
            return
        now, usage = utcnow(), lease._take_usage()
        error = f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS]
        if isinstance(exc, RetryLaterError):
            after = self._backoff(job.attempts) if exc.after is None else exc.after
            outcome = dict(status="queued", run_after=now + timedelta(seconds=after), refund=True)
        elif isinstance(exc, PermanentJobError) or job.attempts >= job.max_attempts:
            outcome = dict(status="dead")
        else:
            outcome = dict(status="queued", run_after=now + timedelta(seconds=self._backoff(job.attempts)))
            log.warning("job %s (%s) failed (attempt %d of %d), retried at %s: %s", job.id, job.kind, job.attempts,
                        job.max_attempts, outcome["run_after"], error)
        if outcome["status"] == "dead":
            log.error("job %s (%s) is dead (attempt %d of %d): %s", job.id, job.kind, job.attempts, job.max_attempts, error)
        if not self._store.jobs.release(lease._claim, now, usage, error=error, **outcome):  # type: ignore[arg-type]
            log.warning("job %s (%s) failed after its lease was lost: %s", job.id, job.kind, error)

    def _backoff(self, attempts: int) -> float:
        """Seconds before retry after the `attempts`-th failure: base·2^(attempts−1), at most the configured
        maximum, then a random point in its upper half, so jobs that failed together do not retry together."""
        cfg = self._config.jobs
        full = min(cfg.backoff_max_s, cfg.backoff_base_s * 2.0 ** min(max(attempts - 1, 0), 60))
        return random.uniform(full / 2, full)

    def _heartbeat(self, lease: Lease, stop: threading.Event) -> None:
        """Renew the lease every third of its length while the handler runs; a store that is briefly
        unreachable is tried again at the next beat (the lease has two more thirds to go)."""
        seconds = self._config.jobs.lease_s
        while not stop.wait(seconds / 3):
            try:
                now = utcnow()
                if not self._store.jobs.renew(lease._claim, now, now + timedelta(seconds=seconds)):
                    lease._lost.set()
                    return
            except Exception as exc:
                log.warning("could not renew the lease of job %s: %s", lease.job.id, exc)

    def start_workers(self, count: int | None = None) -> list[Worker]:
        """Run `count` (default `jobs.workers`) worker threads until `stop_workers` (or `Memory.close`)."""
        started = [Worker(self).start() for _ in range(self._config.jobs.workers if count is None else count)]
        self._workers += started
        return started

    def stop_workers(self, timeout: float | None = 30.0) -> None:
        """Stop the worker threads this instance started; each finishes the job it is running first (a job
        still running after `timeout` is left to its lease, and runs again elsewhere)."""
        workers, self._workers = self._workers, []
        for w in workers:
            w.stop(wait=False)
        for w in workers:
            w.stop(timeout=timeout)
