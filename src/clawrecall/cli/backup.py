"""`clawrecall backup` and `clawrecall restore`: a store as one portable file, and back (docs/backups.md).

Both open the store without the engine: a backup reads tables, it never embeds.
"""

from __future__ import annotations

import click

from ..models import BackupSummary
from ..storage.backup import backup as take_backup, restore as restore_backup
from . import output as out
from .commands import State, json_option, pass_state


def _text(verb: str, s: BackupSummary) -> str:
    rows = ", ".join(f"{n} {name}" for name, n in s.tables.items() if n)
    return f"{verb} {s.path} ({s.bytes / 1e6:.1f} MB, schema {s.schema_version}): {rows or 'no rows'}"


@click.command()
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@pass_state
def backup(state: State, path: str, as_json: bool) -> None:
    """Write the whole store to PATH (a tar; .tar.gz compresses), consistent while the server writes.

    The file restores into either backend (`clawrecall restore`)."""
    store = state.open_store()
    with out.progress_bar("Backing up") as progress:
        summary = take_backup(store, path, progress)
    out.respond(as_json, summary, _text("Backed up to", summary))


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@json_option
@pass_state
def restore(state: State, path: str, as_json: bool) -> None:
    """Restore a backup into an empty store (a new SQLite file or an empty PostgreSQL database).

    The file is checked whole first; one from a newer clawrecall is refused."""
    store = state.open_store(creates=True)
    with out.progress_bar("Restoring") as progress:
        summary = restore_backup(store, path, progress)
    out.respond(as_json, summary, _text("Restored from", summary))


COMMANDS = [backup, restore]
