"""The job queue (docs/jobs.md) on both backends: a job commits with the data that made it due, runs once
under a lease, retries with backoff, dies with its reason, and belongs to a scope like the data it touches."""

from __future__ import annotations

import json
import queue
import threading
import time
from datetime import timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import (
    Caller,
    JobStateError,
    LeaseLostError,
    Memory,
    NotFoundError,
    PermanentJobError,
    RetryLaterError,
    ScopeError,
)
from clawrecall._time import utcnow
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.server import create_app
from clawrecall.storage import open_store
from clawrecall.storage.migrations import latest

ADMIN = Caller()


@pytest.fixture
def jobs_mem(db_target):
    """A store whose retries are due at once (no backoff) and whose leases are short."""
    m = Memory.open(db_target, jobs={"backoff_base_s": 0, "lease_s": 5, "poll_s": 0.05, "max_attempts": 3})
    yield m
    m.close()


def _contents(mem: Memory, user: str = "alice") -> list[str]:
    return sorted(r.content for r in mem.list(user_id=user, limit=1000))


def test_enqueue_joins_the_callers_transaction(jobs_mem):
    """Rolled back with the caller's writes, the job is gone too; committed, both are there."""
    mem = jobs_mem
    with pytest.raises(RuntimeError):
        with mem._store.transaction():
            assert mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1") is not None
            raise RuntimeError("the segment's close failed")
    assert mem.jobs.list(caller=ADMIN) == []
    with mem._store.transaction():
        mem.add("The segment's own write", user_id="alice")
        job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1", payload={"segment": "seg-1"})
    assert job is not None and [j.id for j in mem.jobs.list(caller=ADMIN)] == [job.id]
    assert mem.jobs.get(job.id[:8], caller=ADMIN).payload == {"segment": "seg-1"}


def test_a_subject_is_queued_once_per_kind(jobs_mem):
    mem = jobs_mem
    first = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    assert first is not None
    assert mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1") is None
    assert mem.jobs.enqueue("summarize", scope="user:alice", subject_id="seg-1") is not None
    assert len(mem.jobs.list(caller=ADMIN)) == 2


def test_a_job_runs_once_writes_in_its_commit_and_counts_its_tokens(jobs_mem):
    mem = jobs_mem
    job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    seen = []

    def extract(j, lease):
        seen.append(j.id)
        lease.usage(1200, 300, 0.0021)
        lease.usage(100, 20)  # an unpriced call: tokens count, cost stays
        with lease.commit():
            mem.add(f"A fact from {j.subject_id}", user_id="alice")

    mem.upkeep.job("extract", extract)
    done = mem.upkeep.run_job("w1")
    assert seen == [job.id] and done.status == "done" and done.attempts == 1 and done.finished_at is not None
    assert (done.input_tokens, done.output_tokens, done.cost) == (1300, 320, pytest.approx(0.0021))
    assert done.lease_until is None and done.worker == "w1"
    assert _contents(mem) == ["A fact from seg-1"]
    assert mem.upkeep.run_job("w1") is None  # nothing else is ready
    stats = mem.stats().jobs
    assert stats.by_status["done"] == 1 and stats.by_kind["extract"].input_tokens == 1300
    assert stats.by_kind["extract"].cost == pytest.approx(0.0021)


def test_a_handler_that_writes_nothing_is_done_and_kinds_without_handlers_wait(jobs_mem):
    mem = jobs_mem
    mem.jobs.enqueue("extract", scope="user:alice", subject_id="a")
    waiting = mem.jobs.enqueue("summarize", scope="user:alice", subject_id="a")
    mem.upkeep.job("extract", lambda job, lease: None)
    assert mem.upkeep.run_job("w1").status == "done"
    assert mem.upkeep.run_job("w1") is None
    assert mem.jobs.get(waiting.id, caller=ADMIN).status == "queued"


def test_failures_back_off_then_the_job_is_dead_with_its_reason(db_target):
    with Memory.open(db_target, jobs={"backoff_base_s": 40, "backoff_max_s": 60, "max_attempts": 3}) as mem:
        job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")

        def broken(j, lease):
            lease.usage(10, 1)
            raise ValueError(f"the model answered nonsense (attempt {j.attempts})")

        mem.upkeep.job("extract", broken)
        waits = []
        for attempt in (1, 2, 3):
            before = utcnow()
            ran = mem.upkeep.run_job("w1")
            assert ran.attempts == attempt and ran.last_error == f"ValueError: the model answered nonsense (attempt {attempt})"
            if attempt < 3:
                assert ran.status == "queued" and ran.worker == "w1" and ran.lease_until is None  # who ran it last
                waits.append((ran.run_after - before).total_seconds())
                assert mem.upkeep.run_job("w1") is None  # not before its backoff
                _due_now(mem, job.id)
        # base·2^(n−1), jittered into its upper half, capped: 20–40 s, then 40–60 s (80 capped at 60)
        assert 20 <= waits[0] <= 40.5 and 30 <= waits[1] <= 60.5, waits
        assert ran.status == "dead" and ran.finished_at is not None and ran.input_tokens == 30
        assert mem.upkeep.run_job("w1") is None
        assert [j.id for j in mem.jobs.list(caller=ADMIN, status="dead")] == [job.id]


def _due_now(mem: Memory, job_id: str) -> None:
    """Skip a job's wait (the test's clock, not the queue's rule)."""
    d = mem._store.dialect
    with mem._store.transaction():
        mem._store.run(f"UPDATE jobs SET run_after = {d.p} WHERE id = {d.p}", (d.ts(utcnow() - timedelta(seconds=1)), job_id))


def test_retry_later_sets_the_time_exactly_and_gives_the_attempt_back(jobs_mem):
    mem = jobs_mem
    job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")

    def rate_limited(j, lease):
        raise RetryLaterError("429 from the provider", after=120)

    mem.upkeep.job("extract", rate_limited)
    before = utcnow()
    for _ in range(5):  # more than max_attempts (3): a provider that asks to wait never kills the job
        ran = mem.upkeep.run_job("w1")
        assert ran.status == "queued" and ran.attempts == 0 and ran.last_error == "RetryLaterError: 429 from the provider"
        assert 119.9 <= (ran.run_after - before).total_seconds() <= 121, ran.run_after
        _due_now(mem, job.id)


def test_a_permanent_error_kills_the_job_at_once(jobs_mem):
    mem = jobs_mem
    mem.jobs.enqueue("extract", scope="user:alice", subject_id="gone")

    def missing(j, lease):
        raise PermanentJobError(f"segment {j.subject_id} was erased")

    mem.upkeep.job("extract", missing)
    ran = mem.upkeep.run_job("w1")
    assert (ran.status, ran.attempts, ran.last_error) == ("dead", 1, "PermanentJobError: segment gone was erased")


def test_cancel_and_retry(jobs_mem):
    mem = jobs_mem
    job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    assert mem.jobs.cancel(job.id, caller=ADMIN).status == "cancelled"
    with pytest.raises(JobStateError, match="only a queued job can be cancelled"):
        mem.jobs.cancel(job.id, caller=ADMIN)
    mem.upkeep.job("extract", lambda j, lease: None)
    assert mem.upkeep.run_job("w1") is None  # a cancelled job is not run
    again = mem.jobs.retry(job.id[:8], caller=ADMIN)
    assert again.status == "queued" and again.attempts == 0 and again.finished_at is None
    with pytest.raises(JobStateError, match="only a dead or cancelled job can be retried"):
        mem.jobs.retry(job.id, caller=ADMIN)

    started, release = threading.Event(), threading.Event()

    def slow(j, lease):
        started.set()
        release.wait(10)

    mem.upkeep.job("extract", slow)
    runner = threading.Thread(target=mem.upkeep.run_job, args=("w1",))
    runner.start()
    try:
        assert started.wait(10)
        with pytest.raises(JobStateError, match="a running job cannot be cancelled"):
            mem.jobs.cancel(job.id, caller=ADMIN)
    finally:
        release.set()
        runner.join()
    assert mem.jobs.get(job.id, caller=ADMIN).status == "done"


def test_a_lease_taken_over_writes_nothing(jobs_mem):
    """The worker's lease ran out and another worker took the job: its commit raises LeaseLostError, writes
    nothing, and leaves the job to the new holder."""
    mem = jobs_mem
    mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    raised = []

    def overtaken(j, lease):
        d = mem._store.dialect
        with mem._store.transaction():  # as if this worker had stalled past its lease
            mem._store.run(f"UPDATE jobs SET lease_until = {d.p} WHERE id = {d.p}", (d.ts(utcnow() - timedelta(seconds=1)), j.id))
        now = utcnow()
        assert mem._store.jobs.claim("w2", now, now + timedelta(seconds=60), ["extract"]).id == j.id
        try:
            with lease.commit():
                mem.add("written by a worker that lost its lease", user_id="alice")
        except LeaseLostError as exc:
            raised.append(exc)
            raise

    mem.upkeep.job("extract", overtaken)
    ran = mem.upkeep.run_job("w1")
    assert raised and _contents(mem) == []
    assert (ran.status, ran.worker, ran.attempts, ran.last_error) == ("running", "w2", 2, None)


def test_the_heartbeat_keeps_a_long_job_its_own(db_target):
    with Memory.open(db_target, jobs={"lease_s": 1.5}) as mem:
        mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
        taken, renewed, renew = [], queue.Queue(), mem._store.jobs.renew
        mem._store.jobs.renew = lambda *args: (renewed.put(args), renew(*args))[1]

        def long_call(j, lease):
            for _ in range(6):  # a beat every 0.5 s: 3 s, past its 1.5 s lease twice over
                renewed.get(timeout=60)
                now = utcnow()  # a thief right after a beat (not 1.5 s after: a loaded machine may be that slow)
                taken.append(mem._store.jobs.claim("thief", now, now + timedelta(seconds=60), ["extract"]))
            assert not lease.lost
            with lease.commit():
                mem.add("a fact from a slow model", user_id="alice")

        mem.upkeep.job("extract", long_call)
        ran = mem.upkeep.run_job("w1")
        assert taken == [None] * 6 and ran.status == "done" and ran.attempts == 1
        assert _contents(mem) == ["a fact from a slow model"]


def test_a_job_whose_workers_keep_dying_is_dead(jobs_mem):
    """Claimed max_attempts times without an outcome (each worker killed), it is not run again."""
    mem = jobs_mem
    job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    d = mem._store.dialect
    with mem._store.transaction():
        mem._store.run(f"UPDATE jobs SET status = 'running', attempts = 3, lease_until = {d.p} WHERE id = {d.p}",
                       (d.ts(utcnow() - timedelta(seconds=1)), job.id))
    mem.upkeep.job("extract", lambda j, lease: pytest.fail("run a fourth time"))
    ran = mem.upkeep.run_job("w1")
    assert ran.status == "dead" and "lease expired" in ran.last_error


def _two_scopes(mem: Memory):
    mine = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-a")
    theirs = mem.jobs.enqueue("extract", scope="user:bob", subject_id="seg-b")
    with mem._store.transaction():  # bob's job failed for good
        mem._store.run(f"UPDATE jobs SET status = 'dead' WHERE id = {mem._store.dialect.p}", (theirs.id,))
    return mine, theirs


def test_scopes_guard_jobs_in_python(jobs_mem):
    mem = jobs_mem
    mine, theirs = _two_scopes(mem)
    alice, bob = Caller("alice"), Caller("bob")
    assert [j.id for j in mem.jobs.list(caller=alice)] == [mine.id]
    assert {j.id for j in mem.jobs.list(caller=ADMIN)} == {mine.id, theirs.id}
    for verb in (mem.jobs.get, mem.jobs.retry, mem.jobs.cancel):
        with pytest.raises(NotFoundError):
            verb(theirs.id, caller=alice)
    assert mem.jobs.retry(theirs.id, caller=bob).status == "queued"
    assert mem.jobs.cancel(mine.id, caller=alice).status == "cancelled"
    assert mem.jobs.stats(caller=alice).by_status == {"queued": 0, "running": 0, "done": 0, "dead": 0, "cancelled": 1}
    # reading a shared scope is not enough to change its jobs
    shared = mem.jobs.enqueue("extract", scope="global", subject_id="seg-g")
    assert mem.jobs.get(shared.id, caller=alice).id == shared.id
    with pytest.raises(ScopeError):
        mem.jobs.cancel(shared.id, caller=alice)


def test_scopes_guard_jobs_in_the_cli(db_target):
    with Memory.open(db_target) as mem:
        mine, theirs = _two_scopes(mem)
    runner = CliRunner()

    def run(*args, code=0):
        result = runner.invoke(cli, ["--db", db_target, "jobs", *args, "--json"])
        assert result.exit_code == code, result.output
        return json.loads(result.stdout)

    assert [j["id"] for j in run("list", "--user", "alice")] == [mine.id]
    assert {j["id"] for j in run("list")} == {mine.id, theirs.id}
    assert [j["id"] for j in run("list", "--status", "dead")] == [theirs.id]
    assert run("show", theirs.id, "--user", "alice", code=1)["error"]["code"] == "not_found"
    assert run("retry", theirs.id[:8], "--user", "alice", code=1)["error"]["code"] == "not_found"
    assert run("show", mine.id[:8], "--user", "alice")["id"] == mine.id
    assert run("retry", theirs.id[:8], "--user", "bob")["status"] == "queued"
    assert run("cancel", mine.id, "--user", "alice")["status"] == "cancelled"
    refused = run("cancel", mine.id, "--user", "alice", code=1)["error"]
    assert refused["code"] == "job_state" and "only a queued job can be cancelled" in refused["message"]
    text = runner.invoke(cli, ["--db", db_target, "jobs", "list", "--user", "bob"])
    assert text.exit_code == 0 and theirs.id[:8] in text.output and mine.id[:8] not in text.output


def test_scopes_guard_jobs_in_rest(db_target):
    with Memory.open(db_target) as mem:
        mine, theirs = _two_scopes(mem)
        tokens = TokenStore.for_memory(mem)
        alice = {"Authorization": f"Bearer {tokens.create(user_id='alice')[1]}"}
        bob = {"Authorization": f"Bearer {tokens.create(user_id='bob')[1]}"}
        http = TestClient(create_app(mem, tokens=tokens))
        assert [j["id"] for j in http.get("/v1/jobs", headers=alice).json()["jobs"]] == [mine.id]
        assert http.get("/v1/jobs", params={"status": "dead"}, headers=alice).json()["jobs"] == []
        assert http.get(f"/v1/jobs/{theirs.id}", headers=alice).status_code == 404
        assert http.post(f"/v1/jobs/{theirs.id}/retry", headers=alice).json()["error"]["code"] == "not_found"
        assert http.get(f"/v1/jobs/{mine.id[:8]}", headers=alice).json()["subject_id"] == "seg-a"
        assert http.post(f"/v1/jobs/{theirs.id}/retry", headers=bob).json()["status"] == "queued"
        assert http.post(f"/v1/jobs/{mine.id}/cancel", headers=alice).json()["status"] == "cancelled"
        again = http.post(f"/v1/jobs/{mine.id}/cancel", headers=alice)
        assert again.status_code == 409 and again.json()["error"]["code"] == "job_state"
        assert http.get("/v1/jobs", params={"status": "nonsense"}, headers=alice).status_code == 422
        stats = http.get("/v1/stats", headers=alice).json()["jobs"]
        assert stats["by_status"]["cancelled"] == 1 and sum(stats["by_status"].values()) == 1


def test_serve_runs_workers_only_when_a_handler_is_registered(db_target):
    with Memory.open(db_target, jobs={"poll_s": 0.05}) as mem:
        tokens = TokenStore.for_memory(mem)
        with TestClient(create_app(mem, tokens=tokens, allow_anonymous=True)):
            assert mem._runner._workers == []
        job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
        mem.upkeep.job("extract", lambda j, lease: None)
        with TestClient(create_app(mem, tokens=tokens, allow_anonymous=True)):
            assert len(mem._runner._workers) == 1
            deadline = time.monotonic() + 60
            while mem.jobs.get(job.id, caller=ADMIN).status != "done" and time.monotonic() < deadline:
                time.sleep(0.05)
        assert mem.jobs.get(job.id, caller=ADMIN).status == "done" and mem._runner._workers == []


def test_close_stops_the_workers_it_started(jobs_mem):
    mem = jobs_mem
    workers = mem.upkeep.start_workers(2)
    assert all(w._thread.is_alive() for w in workers)
    mem.upkeep.stop_workers()
    assert not any(w._thread.is_alive() for w in workers)


def test_erasing_a_person_removes_their_jobs(jobs_mem):
    mem = jobs_mem
    _two_scopes(mem)
    assert mem.erase(user_id="alice", dry_run=True).erased["jobs"] == 1
    assert mem.erase(user_id="alice").erased["jobs"] == 1
    assert [j.scope for j in mem.jobs.list(caller=ADMIN)] == ["user:bob"]


def test_doctor_and_stats_report_jobs(db_target):
    with Memory.open(db_target) as mem:
        _two_scopes(mem)
    runner = CliRunner()
    report = json.loads(runner.invoke(cli, ["--db", db_target, "doctor", "--json"]).stdout)
    jobs = next(c for c in report["checks"] if c["name"] == "jobs")
    assert jobs["status"] == "warn" and jobs["detail"].startswith("1 queued, 0 running, 0 done, 1 dead")
    assert "jobs list --status dead" in jobs["detail"]
    stats = json.loads(runner.invoke(cli, ["--db", db_target, "stats", "--json"]).stdout)["jobs"]
    assert stats["by_status"]["dead"] == 1 and stats["by_kind"]["extract"]["jobs"] == {"dead": 1, "queued": 1}
    assert "Jobs:" in runner.invoke(cli, ["--db", db_target, "stats"]).output

    with Memory.open(db_target) as mem:  # nothing dead, but a ready job waited 11 minutes: no worker runs
        for job in mem.jobs.list(caller=ADMIN):
            mem._store.run(f"DELETE FROM jobs WHERE id = {mem._store.dialect.p}", (job.id,))
        mem.jobs.enqueue("extract", scope="user:alice", subject_id="late", run_after=utcnow() - timedelta(minutes=11))
    report = json.loads(runner.invoke(cli, ["--db", db_target, "doctor", "--json"]).stdout)
    jobs = next(c for c in report["checks"] if c["name"] == "jobs")
    assert jobs["status"] == "warn" and "was due 11m ago" in jobs["detail"] and "is a worker running" in jobs["detail"]
    assert report["ok"] is True  # a warning: nothing is lost


def test_the_worker_command_runs_ready_jobs_and_prints_a_line_each(db_target, tmp_path, monkeypatch):
    (tmp_path / "my_handlers.py").write_text(
        "def register(mem):\n"
        "    def note(job, lease):\n"
        "        if job.subject_id == 'bad':\n"
        "            raise ValueError('no such segment')\n"
        "        with lease.commit():\n"
        "            mem.add('noted ' + job.subject_id, user_id='alice')\n"
        "    mem.upkeep.job('note', note)\n"
        "    mem.upkeep.job('other', lambda job, lease: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with Memory.open(db_target, jobs={"backoff_base_s": 600}) as mem:
        for subject in ("a", "b", "bad"):
            mem.jobs.enqueue("note", scope="user:alice", subject_id=subject)
        mem.jobs.enqueue("other", scope="user:alice", subject_id="x")
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db_target, "worker", "--once", "--kinds", "note", "--handlers", "my_handlers", "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((j["subject_id"], j["status"]) for j in lines) == [("a", "done"), ("b", "done"), ("bad", "queued")]
    assert next(j for j in lines if j["subject_id"] == "bad")["last_error"] == "ValueError: no such segment"
    with Memory.open(db_target) as mem:
        assert _contents(mem) == ["noted a", "noted b"]
        assert [j.status for j in mem.jobs.list(caller=ADMIN, kind="other")] == ["queued"]
    none = runner.invoke(cli, ["--db", db_target, "worker", "--once", "--json"])
    assert none.exit_code == 1 and json.loads(none.stdout)["error"]["code"] == "config_error"
    unknown = runner.invoke(cli, ["--db", db_target, "worker", "--once", "--kinds", "nope", "--handlers", "my_handlers"])
    assert unknown.exit_code == 2 and "no handler for nope" in unknown.output


def test_a_store_without_the_queue_gets_it_when_opened(db_target):
    """A store of the release before the queue (core and conversations recorded, no `jobs` table) installs
    the `jobs` set on open, and records it."""
    with Memory.open(db_target) as mem:
        mem.add("Written before the queue existed", user_id="alice")
        mem._store.run("DROP TABLE jobs")
        mem._store.run("DELETE FROM migrations WHERE migration_set = 'jobs'")
    store = open_store(db_target, migrate=False)
    assert [s.label for s in store.pending_migrations()] == ["jobs/initial"]
    store.close()
    with Memory.open(db_target) as mem:
        assert mem._store.schema_version() == latest() and mem._store.pending_migrations() == []
        assert mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1") is not None
        assert _contents(mem) == ["Written before the queue existed"]


def test_doctor_says_when_jobs_wait_for_an_llm_that_is_down(db_target):
    with Memory.open(db_target) as mem:
        job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")

        def llm_down(j, lease):
            raise RetryLaterError("the LLM at http://127.0.0.1:9 refused the connection", after=30)

        mem.upkeep.job("extract", llm_down)
        assert mem.upkeep.run_job("w1").status == "queued"
    report = json.loads(CliRunner().invoke(cli, ["--db", db_target, "doctor", "--json"]).stdout)
    jobs = next(c for c in report["checks"] if c["name"] == "jobs")
    assert jobs["status"] == "warn" and report["ok"] is True
    assert jobs["detail"] == ("1 queued, 0 running, 0 done, 0 dead; 1 job failed and will be retried (the latest: "
                              "RetryLaterError: the LLM at http://127.0.0.1:9 refused the connection): is the LLM "
                              "reachable? Nothing is lost")
    with Memory.open(db_target) as mem:
        assert mem.jobs.get(job.id, caller=ADMIN).status == "queued"
