"""kill -9 of `clawrecall serve` under a stream of acknowledged adds, updates, deletes and agent_end captures,
on SQLite and PostgreSQL: none of them is lost, and the store opens and serves again (test_crash_commands.py:
`import`, `purge` and `migrate`).

A few rounds here; `bench/reliability.py crash --rounds 20` runs the published twenty."""

from __future__ import annotations

from reliability_workloads import crash_serve

SERVE_ROUNDS = 2


def test_kill_9_of_serve_loses_no_acknowledged_change(db_target, tmp_path):
    # the second round's server starts on the store the first kill left; the last one's is opened in process
    report = crash_serve(db_target, tmp_path, SERVE_ROUNDS, seed=120, serve_after=False)
    assert report["rounds"] == SERVE_ROUNDS and report["lost"] == 0
    counts = report["acknowledged"]
    assert counts["add"] > 0 and counts["update"] > 0 and counts["delete"] > 0 and counts["capture"] > 0, counts
