"""`clawrecall migrate` on a store created at an old schema version, on both backends."""

from __future__ import annotations

import json

from click.testing import CliRunner

from clawrecall.cli import cli
from clawrecall.storage import open_store


def _old_store(target: str) -> None:
    store = open_store(target, migrate=False)
    with store.transaction():
        for statement in store.migrations[0][1]:
            store._run(statement)
        store._run("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    store.close()


def test_status_dry_run_apply(db_target):
    _old_store(db_target)
    store = open_store(db_target, migrate=False)
    latest = [n for n, _ in store.migrations]
    store.close()
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "status", "--json"]).output)
    assert status["schema_version"] == 1 and status["pending"] == latest[1:] and status["applied"] == []

    dry = runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--dry-run"])
    assert dry.exit_code == 0 and "-- migration 2" in dry.output and "CREATE TABLE startup" in dry.output
    assert json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "--json"]).output)["schema_version"] == 1

    applied = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--json"]).output)
    assert applied["applied"] == latest[1:] and applied["schema_version"] == latest[-1] and applied["pending"] == []
    again = runner.invoke(cli, ["--db", db_target, "migrate", "apply"])
    assert again.exit_code == 0 and "Pending: none" in again.output
