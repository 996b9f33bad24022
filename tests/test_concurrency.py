"""Eight writer and eight reader processes on one SQLite file and on one PostgreSQL database: every
acknowledged write is stored exactly once, and no error ("database is locked" or any other) reaches a
caller. A few seconds here; `bench/reliability.py concurrency` runs the published 60 s."""

from __future__ import annotations

from reliability_workloads import concurrency


def test_writers_and_readers_on_one_store_lose_nothing_and_surface_no_lock(db_target):
    report = concurrency(db_target, writers=8, readers=8, seconds=4)
    assert report["errors"] == 0, report["first_errors"]
    assert report["lost"] == 0 and report["duplicated"] == 0 and report["stored_not_acknowledged"] == 0
    assert report["acknowledged_writes"] >= 8 and report["ops"]["search"]["n"] > 0 and report["ops"]["list"]["n"] > 0
    assert report["integrity"] == "ok"
