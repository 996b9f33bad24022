"""`clawrecall migrate` on stores created by earlier releases, on both backends."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from legacy import load

from clawrecall.cli import cli
from clawrecall.storage import open_store
from clawrecall.storage.migrations import CONVERSATIONS, CORE, INSIGHT, JOBS_SET, KNOWLEDGE, REEMBED, latest

pytestmark = pytest.mark.empty_db  # each test writes an old store into its database


def test_status_dry_run_apply(db_target):
    load(db_target, "v1")
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "status", "--json"]).output)
    later = [f"core/{name}" for name in CORE.steps[1:]] + [
        "conversations/initial", "conversations/segment-summary", "jobs/initial", "knowledge/initial", "reembed/initial",
        "reembed/half-precision-staging", "insight/initial"]
    assert status["schema_version"] == 1
    assert status["latest"] == latest() == sum(len(s.steps) for s in (CORE, CONVERSATIONS, JOBS_SET, KNOWLEDGE, REEMBED, INSIGHT))
    assert sorted(status["pending"]) == sorted(later) and status["applied"] == []

    dry = runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--dry-run"])
    assert dry.exit_code == 0 and "-- migration core/startup" in dry.output and "CREATE TABLE startup" in dry.output
    assert "-- To read, not to run: `clawrecall migrate apply` runs these in one transaction" in dry.output
    assert json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "--json"]).output)["schema_version"] == 1

    applied = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--json"]).output)
    assert applied["applied"] == status["pending"] and applied["schema_version"] == latest() and applied["pending"] == []
    again = runner.invoke(cli, ["--db", db_target, "migrate", "apply"])
    assert again.exit_code == 0 and "Pending: none" in again.output


def test_apply_in_text_says_the_version_before_and_after(db_target):
    load(db_target, "v1")
    text = CliRunner().invoke(cli, ["--db", db_target, "migrate", "apply"])
    assert text.exit_code == 0
    assert text.output.splitlines()[0] == f"Schema version: 1 → {latest()} (latest {latest()})"
    assert text.output.splitlines()[1].startswith("Applied: core/startup, core/partial-indexes")


def test_the_last_release_gets_the_record_kinds_the_validity_the_conversation_and_job_tables_and_every_step_recorded(db_target):
    """A v7 SQLite file or v5 PostgreSQL database has every step up to text-index-bulk: it gets the
    ones this release added, and the record of all of them."""
    load(db_target, "latest")
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "--json"]).output)
    assert status["schema_version"] == latest() - 20
    assert status["pending"] == ["core/record-kinds", "core/validity", "core/fact-keys", "core/half-precision-vectors",
                                 "core/change-feed", "core/drop-sql-api", "core/message-windows", "core/no-change-feed",
                                 "core/sealed-secrets", "core/scope-vectors", "core/list-indexes", "core/session-index-scope", "core/window-text",
                                 "conversations/initial", "conversations/segment-summary",
                                 "jobs/initial", "knowledge/initial", "reembed/initial", "reembed/half-precision-staging",
                                 "insight/initial"]
    applied = json.loads(runner.invoke(cli, ["--db", db_target, "migrate", "apply", "--json"]).output)
    assert applied["applied"] == status["pending"] and applied["schema_version"] == latest()
    store = open_store(db_target, migrate=False)
    assert store.run("SELECT count(*) FROM migrations")[0][0] == latest()
    assert store.run("SELECT count(*) FROM memories WHERE kind = 'memory'")[0][0] > 0
    store.close()
