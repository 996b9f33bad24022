"""`clawrecall migrate` on stores created by earlier releases, on both backends."""

from __future__ import annotations

import json

from click.testing import CliRunner
from legacy import load

from clawrecall.cli import cli
from clawrecall.storage import open_store
from clawrecall.storage.migrations import CORE, latest


def test_status_dry_run_apply(db_target):
    load(db_target, "v1")
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "status", "--json"]).output)
    later = [f"core/{name}" for name in CORE.steps[1:]]
    assert status["schema_version"] == 1 and status["latest"] == latest() == len(CORE.steps)
    assert sorted(status["pending"]) == sorted(later) and status["applied"] == []

    dry = runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--dry-run"])
    assert dry.exit_code == 0 and "-- migration core/startup" in dry.output and "CREATE TABLE startup" in dry.output
    assert json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "--json"]).output)["schema_version"] == 1

    applied = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--json"]).output)
    assert applied["applied"] == status["pending"] and applied["schema_version"] == latest() and applied["pending"] == []
    again = runner.invoke(cli, ["--db", db_target, "migrate", "apply"])
    assert again.exit_code == 0 and "Pending: none" in again.output


def test_status_of_the_last_release_lists_nothing_to_do_and_records_steps_on_apply(db_target):
    """A v7 SQLite file or v5 PostgreSQL database has every step: only the record is written."""
    load(db_target, "latest")
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "--json"]).output)
    assert status["schema_version"] == latest() and status["pending"] == []
    applied = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--json"]).output)
    assert applied["applied"] == [] and applied["schema_version"] == latest()
    store = open_store(db_target, migrate=False)
    assert store._run("SELECT count(*) FROM migrations")[0][0] == len(CORE.steps)
    store.close()
