"""Workers as separate processes on one store, both backends: one killed with SIGKILL mid-job leaves nothing
half-written and its job runs again; two draining one queue run every job exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import clawrecall
from clawrecall import Caller, Memory

SCRIPT = Path(__file__).with_name("job_worker.py")


def _worker(db: str, mode: str, folder: Path, lease_s: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(clawrecall.__file__).parents[1]),
                                                                    os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, str(SCRIPT), db, mode, str(folder), str(lease_s)], env=env)


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the worker exited ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.02)


def test_a_worker_killed_mid_job_leaves_nothing_and_the_job_runs_again(db_target, tmp_path):
    with Memory.open(db_target) as mem:
        job = mem.jobs.enqueue("extract", scope="user:alice", subject_id="seg-1")
    first = _worker(db_target, "slow-fact", tmp_path, lease_s=1.0)
    try:
        _wait_for(tmp_path / "started", first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    with Memory.open(db_target) as mem:
        held = mem.jobs.get(job.id, caller=Caller())
        assert (held.status, held.attempts) == ("running", 1) and mem.list(user_id="alice") == []

    second = _worker(db_target, "fact", tmp_path, lease_s=1.0)
    assert second.wait(90) == 0
    with Memory.open(db_target) as mem:
        done = mem.jobs.get(job.id, caller=Caller())
        assert (done.status, done.attempts) == ("done", 2) and done.worker.startswith("fact-")
        assert [m.content for m in mem.list(user_id="alice")] == ["A fact from segment seg-1"]


def test_two_worker_processes_run_every_job_exactly_once(db_target, tmp_path):
    n = 120
    with Memory.open(db_target) as mem:
        with mem._store.transaction():
            ids = {mem.jobs.enqueue("extract", scope="user:alice", subject_id=f"seg-{i}").id for i in range(n)}
    workers = [_worker(db_target, "count", tmp_path, lease_s=30) for _ in range(2)]
    try:
        for w in workers:
            _wait_for(tmp_path / f"ready-{w.pid}", w)
        (tmp_path / "go").touch()
        assert [w.wait(120) for w in workers] == [0, 0]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    runs = {w.pid: (tmp_path / f"ran-{w.pid}.txt").read_text().split() for w in workers}
    counted = Counter(job_id for ran in runs.values() for job_id in ran)
    assert set(counted) == ids and set(counted.values()) == {1}, counted.most_common(3)
    assert all(runs.values()), {pid: len(ran) for pid, ran in runs.items()}  # both took part
    with Memory.open(db_target) as mem:
        assert mem.jobs.stats(caller=Caller()).by_status["done"] == n
