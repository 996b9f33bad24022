"""A worker process for tests/test_jobs_processes.py, run as `python job_worker.py DB MODE FOLDER LEASE_S`.

Modes: `slow-fact` says it started (FOLDER/started) and sleeps, to be killed, before writing a memory in its
commit; `fact` writes that memory at once; `count` waits for FOLDER/go, then records each job it runs in
FOLDER/ran-<pid>.txt until no job is ready. The first two run one job and exit."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from clawrecall import Memory


def main() -> None:
    db, mode, folder, lease_s = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    mem = Memory.open(db, jobs={"lease_s": lease_s, "poll_s": 0.02})
    ran = folder / f"ran-{os.getpid()}.txt"

    def extract(job, lease):
        if mode == "count":
            with ran.open("a") as fh:
                fh.write(job.id + "\n")
            time.sleep(0.005)  # a little work, so the two processes interleave
            return
        if mode == "slow-fact":
            (folder / "started").write_text(job.id)
            time.sleep(60)
        with lease.commit():
            mem.add(f"A fact from segment {job.subject_id}", user_id="alice", dedup=False)

    mem.upkeep.job("extract", extract)
    if mode == "count":
        (folder / f"ready-{os.getpid()}").touch()
        while not (folder / "go").exists():
            time.sleep(0.01)
        mem.upkeep.worker().run(once=True)
    else:
        deadline = time.monotonic() + 60
        while mem.upkeep.run_job(f"{mode}-{os.getpid()}") is None and time.monotonic() < deadline:
            time.sleep(0.05)  # until the killed worker's lease runs out
    mem.close()


if __name__ == "__main__":
    main()
