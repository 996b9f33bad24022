"""The job queue as the store keeps it: `store.jobs` (the rules: `engine/_jobs.py`, docs/jobs.md).

A job is a row; its state changes are single UPDATEs that name the claim they belong to (`worker`
and `attempts`), so a worker whose lease another has taken over changes nothing. Claiming is one
statement, `UPDATE … WHERE id = (SELECT id … LIMIT 1) RETURNING …`: on SQLite inside the store's
`BEGIN IMMEDIATE` (one writer at a time), on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so workers
never wait for, nor take, a row another is claiming.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from ..models import Job
from .base import chunks
from .dialect import prefix_bounds
from .executor import Executor, TableRows
from .schema import JOBS


# ready: queued and due, or running under a lease that ran out (its worker died)
_READY = "((t.status = 'queued' AND t.run_after <= {p}) OR (t.status = 'running' AND t.lease_until < {p}))"


@dataclass(frozen=True)
class Claim:
    """Who holds a job: the worker and the attempt it took (a later claim of the same worker differs)."""

    job_id: str
    worker: str
    attempts: int


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None


class Jobs(TableRows[Job]):
    table = JOBS
    model = Job

    def __init__(self, store: Executor):
        super().__init__(store)
        p = store.dialect.p
        self._held = f"id = {p} AND worker = {p} AND attempts = {p} AND status = 'running'"
        self._usage = (f"input_tokens = input_tokens + {p}, output_tokens = output_tokens + {p}, "
                       f"cost = coalesce(cost + CAST({p} AS REAL), cost, CAST({p} AS REAL))")

    def add(self, job: Job) -> bool:
        """Insert the job unless one of its kind and subject exists; whether it was inserted. Joins the
        caller's transaction, so the job commits (or rolls back) with the data that made it due."""
        s = self._store
        with s.transaction():
            return s.rowcount(
                f"INSERT INTO jobs ({self._map.columns}) VALUES ({s.dialect.marks(len(self._map.fields))}) "
                "ON CONFLICT (kind, subject_id) DO NOTHING",
                self._map.row(job),
            ) == 1

    def for_subject(self, kind: str, subject_id: str) -> Job | None:
        """The job of this kind about this subject (there is at most one)."""
        p = self._store.dialect.p
        found = self._read(f"WHERE t.kind = {p} AND t.subject_id = {p}", (kind, subject_id))
        return found[0] if found else None

    def claim(self, worker: str, now: datetime, lease_until: datetime, kinds: Sequence[str]) -> Job | None:
        """Take the ready job that waited longest, of one of `kinds`: running, this worker's until `lease_until`,
        one more attempt. None when no job is ready."""
        s, d = self._store, self._store.dialect
        if not kinds:
            return None
        ts = d.ts(now)
        kind_in, kind_params = self._in("kind", kinds)
        first = f"SELECT t.id FROM jobs t WHERE {_READY.format(p=d.p)} AND {kind_in} ORDER BY t.run_after LIMIT 1"
        if not s.run(first, (ts, ts, *kind_params)):  # an idle poll takes no write lock (SQLite's is the file's)
            return None
        sql = (
            f"UPDATE jobs SET status = 'running', attempts = attempts + 1, worker = {d.p}, lease_until = {d.p}, "
            f"updated_at = {d.p} WHERE id = ({first}{d.skip_locked}) RETURNING {self._map.columns}"
        )
        with s.transaction():
            rows = s.run(sql, (worker, d.ts(lease_until), ts, ts, ts, *kind_params))
        return self._map.read(Job, rows[0]) if rows else None

    def renew(self, claim: Claim, now: datetime, lease_until: datetime) -> bool:
        """Extend a lease still held; False when it is not (taken over, finished, cancelled)."""
        d = self._store.dialect
        with self._store.transaction():
            return self._store.rowcount(
                f"UPDATE jobs SET lease_until = {d.p}, updated_at = {d.p} WHERE {self._held}",
                (d.ts(lease_until), d.ts(now), *_held(claim)),
            ) == 1

    def hold(self, claim: Claim, now: datetime) -> bool:
        """Inside a transaction: whether the claim still holds the job, locking its row until the transaction
        ends (PostgreSQL; SQLite's BEGIN IMMEDIATE holds the file), so no one takes it over meanwhile."""
        d = self._store.dialect
        return self._store.rowcount(f"UPDATE jobs SET updated_at = {d.p} WHERE {self._held}", (d.ts(now), *_held(claim))) == 1

    def finish(self, claim: Claim, now: datetime, usage: Usage) -> bool:
        d = self._store.dialect
        ts = d.ts(now)
        with self._store.transaction():
            return self._store.rowcount(
                f"UPDATE jobs SET status = 'done', lease_until = NULL, finished_at = {d.p}, updated_at = {d.p}, "
                f"last_error = NULL, {self._usage} WHERE {self._held}",
                (ts, ts, *_usage(usage), *_held(claim)),
            ) == 1

    def release(
        self, claim: Claim, now: datetime, usage: Usage, *, status: str, error: str, run_after: datetime | None = None,
        refund: bool = False,
    ) -> bool:
        """End a run that did not finish: queued again at `run_after` (`refund`: the attempt does not count),
        or dead. False when the claim no longer holds the job."""
        d = self._store.dialect
        ts = d.ts(now)
        finished = ts if status == "dead" else None
        attempts = "attempts - 1" if refund else "attempts"
        with self._store.transaction():
            return self._store.rowcount(
                f"UPDATE jobs SET status = {d.p}, attempts = {attempts}, run_after = coalesce({d.p}, run_after), "
                f"lease_until = NULL, last_error = {d.p}, finished_at = {d.p}, updated_at = {d.p}, {self._usage} "
                f"WHERE {self._held}",
                (status, d.ts(run_after), error, finished, ts, *_usage(usage), *_held(claim)),
            ) == 1

    def move(self, job_id: str, before: Sequence[str], status: str, now: datetime, *, reset: bool = False) -> bool:
        """Change a job's status if it is one of `before` (`reset`: a fresh start, due now, attempts 0)."""
        d = self._store.dialect
        ts = d.ts(now)
        fresh = f", attempts = 0, run_after = {d.p}, last_error = NULL, finished_at = NULL" if reset else \
            f", finished_at = {d.p}"
        with self._store.transaction():
            return self._store.rowcount(
                f"UPDATE jobs SET status = {d.p}, worker = NULL, lease_until = NULL, updated_at = {d.p}{fresh} "
                f"WHERE id = {d.p} AND status IN ({d.marks(len(before))})",
                (status, ts, ts, job_id, *before),
            ) == 1

    def find(self, scopes: Sequence[str] | None, *, status: str | None, kind: str | None, limit: int,
             offset: int) -> list[Job]:
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        for column, value in (("status", status), ("kind", kind)):
            if value is not None:
                where += f" AND t.{column} = {d.p}"
                params.append(value)
        return self._read(f"WHERE {where} ORDER BY t.created_at DESC, t.id LIMIT {d.p} OFFSET {d.p}", (*params, limit, offset))

    def ids_with_prefix(self, prefix: str, scopes: Sequence[str] | None, limit: int = 6) -> list[str]:
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        rows = self._store.run(
            f"SELECT t.id FROM jobs t WHERE t.id BETWEEN {d.p} AND {d.p} AND {where} ORDER BY t.id LIMIT {d.p}",
            (*prefix_bounds(prefix), *params, limit),
        )
        return [str(r[0]) for r in rows]

    def counts(self, scopes: Sequence[str] | None) -> list[tuple[str, str, int, int, int, float | None]]:
        """(kind, status, jobs, input tokens, output tokens, cost) per kind and status."""
        where, params = self._in_scopes(scopes)
        rows = self._store.run(
            "SELECT t.kind, t.status, count(*), coalesce(sum(t.input_tokens), 0), coalesce(sum(t.output_tokens), 0), "
            f"sum(t.cost) FROM jobs t WHERE {where} GROUP BY t.kind, t.status ORDER BY t.kind, t.status",
            params,
        )
        return [(k, st, int(n), int(i), int(o), None if c is None else float(c)) for k, st, n, i, o, c in rows]

    def oldest_ready(self, scopes: Sequence[str] | None, now: datetime) -> datetime | None:
        """When the longest-waiting ready job became ready (a running one whose lease ran out counts from then)."""
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        ts = d.ts(now)
        rows = self._store.run(
            f"SELECT min(CASE WHEN t.status = 'queued' THEN t.run_after ELSE t.lease_until END) FROM jobs t "
            f"WHERE {_READY.format(p=d.p)} AND {where}",
            (ts, ts, *params),
        )
        return d.from_db["time"](rows[0][0]) if rows and rows[0][0] is not None else None

    def retrying(self, scopes: Sequence[str] | None) -> tuple[int, str | None]:
        """Queued jobs that failed before (waiting for their retry), and the latest of their errors."""
        where, params = self._in_scopes(scopes)
        failed = f"WHERE t.status = 'queued' AND t.last_error IS NOT NULL AND {where}"
        n = int(self._store.run(f"SELECT count(*) FROM jobs t {failed}", params)[0][0])
        latest = self._store.run(f"SELECT t.last_error FROM jobs t {failed} ORDER BY t.updated_at DESC LIMIT 1", params)
        return n, latest[0][0] if latest else None

    def about(self, subjects: Sequence[str], *, delete: bool) -> int:
        """The jobs about these subjects (a deleted conversation's segments): counted, or removed."""
        marks = self._store.dialect.marks
        return self._count_or_delete([(f"subject_id IN ({marks(len(chunk))})", chunk) for chunk in chunks(subjects)],
                                     delete)

    def in_scope(self, scope: str, subjects: Sequence[str] = (), *, delete: bool) -> int:
        """A scope's jobs, and any elsewhere about these subjects (a person's segments in a shared scope):
        counted, or removed (erasure; a worker running one then loses its lease and writes nothing)."""
        p, marks = self._store.dialect.p, self._store.dialect.marks
        return self._count_or_delete([(f"scope = {p}", [scope])] + [
            (f"scope <> {p} AND subject_id IN ({marks(len(chunk))})", [scope, *chunk]) for chunk in chunks(subjects)
        ], delete)

    def _count_or_delete(self, parts: list[tuple[str, list[Any]]], delete: bool) -> int:
        """The jobs matching any of the conditions: counted, or removed (a worker running one then loses its
        lease, so nothing it found is written)."""
        s = self._store
        if not delete:
            return sum(int(s.run(f"SELECT count(*) FROM jobs WHERE {where}", params)[0][0]) for where, params in parts)
        with s.transaction():
            return sum(s.rowcount(f"DELETE FROM jobs WHERE {where}", params) for where, params in parts)


def _held(claim: Claim) -> tuple[Any, ...]:
    return (claim.job_id, claim.worker, claim.attempts)


def _usage(usage: Usage) -> tuple[Any, ...]:
    return (usage.input_tokens, usage.output_tokens, usage.cost, usage.cost)
