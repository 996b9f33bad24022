"""`clawrecall migrate`: see and apply schema migrations without opening the engine.

Every open applies pending migrations anyway (under a lock, so concurrent opens are safe);
this command is for operators who want to look first, or migrate before a deployment.
"""

from __future__ import annotations

import click

from ..config import default_db_path, load_config
from ..storage import open_store
from . import output as out
from .commands import State, json_option, pass_state


@click.command()
@click.argument("action", type=click.Choice(["status", "apply"]), default="status")
@click.option("--dry-run", is_flag=True, help="With apply: print the SQL that would run, change nothing.")
@json_option
@pass_state
def migrate(state: State, action: str, dry_run: bool, as_json: bool) -> None:
    """Show the schema version and pending migrations, or apply them."""
    cfg = load_config(state.config)
    target = state.db or cfg.db or (cfg.database.url() if cfg.database else None) or default_db_path()
    store = open_store(target, migrate=False, postgres=cfg.postgres, create=False)
    try:
        current = store.schema_version()
        pending = store.pending_migrations()
        latest = store.migrations[-1][0]
        applied: list[int] = []
        if action == "apply" and not dry_run:
            applied = store.migrate()
        data = {
            "backend": store.backend, "location": store.location, "schema_version": store.schema_version(),
            "latest": latest, "pending": [n for n, _ in store.pending_migrations()], "applied": applied,
        }
        if action == "apply" and dry_run:
            data["sql"] = {str(n): statements for n, statements in pending}
        out.respond(as_json, data, _text(action, dry_run, current, latest, pending, applied))
    finally:
        store.close()


def _text(action: str, dry_run: bool, current: int, latest: int, pending: list, applied: list[int]) -> str:
    lines = [f"Schema version: {current} (latest {latest})"]
    if action == "status" or not pending:
        lines.append("Pending: " + (", ".join(str(n) for n, _ in pending) or "none"))
    elif dry_run:
        for number, statements in pending:
            lines.append(f"-- migration {number}")
            lines.extend(s.strip().rstrip(";") + ";" for s in statements)
    else:
        lines.append("Applied: " + ", ".join(str(n) for n in applied))
    return "\n".join(lines)
