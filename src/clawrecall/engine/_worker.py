"""A worker: the loop that runs ready jobs (`mem.upkeep.run_job`) until it is stopped.

`clawrecall worker` runs one in the foreground (`mem.upkeep.worker()`); `clawrecall serve` runs `jobs.workers`
of them as threads (`mem.upkeep.start_workers`), stopped by `Memory.close()`. Several workers, threads or
processes, on one store never run one job twice: each claim is one atomic statement (`storage/jobs.py`).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from typing import Callable, Protocol, Sequence

from ..models import Job

log = logging.getLogger("clawrecall.jobs")
_numbers = itertools.count(1)


class Queue(Protocol):
    """What a worker needs of the job queue (`_jobs.Runner`, which starts workers itself): a ready job run
    under a lease, and how long to wait when none is ready."""

    @property
    def poll_s(self) -> float: ...

    def run_once(self, worker: str, kinds: Sequence[str] | None = None) -> Job | None: ...


class Worker:
    def __init__(
        self, jobs: Queue, *, kinds: Sequence[str] | None = None, name: str | None = None,
        on_finish: Callable[[Job], None] | None = None,
    ):
        """`kinds`: only these (default: every kind with a handler); `on_finish` is told of each job it ran,
        as the job ended (done, queued again for a retry, or dead)."""
        self.jobs = jobs
        self.kinds = list(kinds) if kinds is not None else None
        self.name = name or worker_name()
        self.on_finish = on_finish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, *, once: bool = False) -> int:
        """Run jobs as they become ready, sleeping `jobs.poll_s` when none is, until `stop()`; with `once`,
        until no job is ready. How many jobs it ran. A failing store is logged and tried again after a
        sleep (with `once`, raised)."""
        ran = 0
        while not self._stop.is_set():
            try:
                job = self.jobs.run_once(self.name, self.kinds)
            except Exception:
                if once:
                    raise
                log.exception("worker %s could not run a job", self.name)
                job = None
            if job is None:
                if once:
                    break
                self._stop.wait(self.jobs.poll_s)
                continue
            ran += 1
            if self.on_finish is not None:
                self.on_finish(job)
        return ran

    def start(self) -> Worker:
        """Run in a thread of its own (a daemon: a process that exits without `stop` leaves its job to the lease)."""
        self._thread = threading.Thread(target=self.run, name=f"clawrecall-worker-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the job it is running; `wait`: until its thread has ended (or `timeout`)."""
        self._stop.set()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


def worker_name() -> str:
    """Who holds a lease, as `jobs show` says it: the host, the process and a number of its own."""
    return f"{socket.gethostname()}:{os.getpid()}:{next(_numbers)}"
