"""`python kill_after.py K CLAWRECALL-ARGS…`: run the clawrecall CLI, and send this process SIGKILL right
after its K-th statement that writes (K = 0: never). A kill -9 at a point chosen on purpose, inside a
transaction or between two, rather than wherever the scheduler happens to be; at a normal exit the
number of writing statements made is the last line on stderr."""

from __future__ import annotations

import os
import signal
import sys

from clawrecall.cli import cli
from clawrecall.storage.postgres import PostgresStore
from clawrecall.storage.sqlite import SQLiteStore

READS = ("SELECT", "PRAGMA", "SHOW", "EXPLAIN")
limit = int(sys.argv[1])
made = 0


def counting(method):
    def wrapper(self, sql, *args, **kwargs):
        global made
        result = method(self, sql, *args, **kwargs)
        if not sql.lstrip().upper().startswith(READS):
            made += 1
            if made == limit:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    return wrapper


for store in (SQLiteStore, PostgresStore):
    for name in ("run", "run_many", "rowcount"):
        setattr(store, name, counting(getattr(store, name)))

try:
    cli.main(args=sys.argv[2:], prog_name="clawrecall")
finally:
    print(f"write statements: {made}", file=sys.stderr)
