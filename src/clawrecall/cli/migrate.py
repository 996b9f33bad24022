"""`clawrecall migrate`: see and apply schema migrations without opening the engine.

Every open applies pending migrations anyway (under a lock, so concurrent opens are safe);
this command is for operators who want to look first, or migrate before a deployment.
"""

from __future__ import annotations

import click

from ..storage.migrations import Step, latest
from . import output as out
from .commands import State, json_option, pass_state


@click.command()
@click.argument("action", type=click.Choice(["status", "apply"]), default="status")
@click.option("--dry-run", is_flag=True, help="With apply: print the SQL that would run, change nothing.")
@json_option
@pass_state
def migrate(state: State, action: str, dry_run: bool, as_json: bool) -> None:
    """Show the schema version and pending migration steps, or apply them."""
    store = state.open_store(migrate=False)
    current = store.schema_version()
    pending = store.pending_migrations()
    applied: list[str] = []
    if action == "apply" and not dry_run:
        applied = store.migrate()
    data = {
        "backend": store.backend, "location": store.location, "schema_version": store.schema_version(),
        "latest": latest(), "pending": [step.label for step in store.pending_migrations()], "applied": applied,
    }
    if action == "apply" and dry_run:
        data["sql"] = {step.label: list(step.statements) for step in pending}
    out.respond(as_json, data, _text(action, dry_run, current, pending, applied))


def _text(action: str, dry_run: bool, current: int, pending: list[Step], applied: list[str]) -> str:
    if action == "apply" and applied:
        return f"Schema version: {current} → {current + len(applied)} (latest {latest()})\nApplied: " + ", ".join(applied)
    lines = [f"Schema version: {current} (latest {latest()})"]
    if action == "status" or not pending:
        lines.append("Pending: " + (", ".join(step.label for step in pending) or "none"))
    else:  # a dry run
        # what each step runs, to read: `migrate apply` runs them in one transaction, under the schema lock, and
        # records each step, which this script alone would not
        lines.append("-- To read, not to run: `clawrecall migrate apply` runs these in one transaction under the schema")
        lines.append("-- lock and records each step.")
        for step in pending:
            lines.append(f"-- migration {step.label}" + ("" if step.statements else " (nothing to run on this backend)"))
            lines.extend(s.strip().rstrip(";") + ";" for s in step.statements)
    return "\n".join(lines)
