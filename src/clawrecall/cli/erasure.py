"""`clawrecall erase` and `clawrecall delete-bulk`: removing many memories in one call, the count shown first.

`erase` removes a person for good (a GDPR request); `delete-bulk` soft-deletes what matches a
filter (memory-lancedb-pro's command of that name) and only counts unless `--yes` is given.
"""

from __future__ import annotations

from typing import Any

import click

from ..scopes import Caller
from . import output as out
from .commands import (
    IsoTime,
    State,
    caller_options,
    category_filter,
    confirm,
    engine_args,
    json_option,
    pass_state,
    yes_option,
)

#: how each kind an erasure reports is named for people (a kind not listed shows its own name)
_KIND_NAMES = {"memories": ("memory", "memories"), "history": ("history entry", "history entries"),
               "history_actor": ("change signed by them", "changes signed by them"),
               "occurrences": ("fact occurrence", "fact occurrences"),
               "messages": ("message", "messages"), "segments": ("segment", "segments"), "files": ("file", "files"),
               "startup": ("startup entry", "startup entries"), "jobs": ("job", "jobs"),
               "searches": ("logged search", "logged searches")}


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(out.plural(n, *_KIND_NAMES.get(kind, (kind, kind))) for kind, n in counts.items())


@click.command()
@click.option("--user", "user_id", metavar="ID", help="Erase this user: its memories in any scope and user:ID.")
@click.option("--agent", "agent_id", metavar="ID", help="Erase this agent: its memories in any scope and agent:ID.")
@click.option("--dry-run", is_flag=True, help="Count what would be erased; change nothing.")
@yes_option
@json_option
@pass_state
def erase(state: State, user_id: str | None, agent_id: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Erase a person for good (GDPR): every memory of the user or agent, deleted ones included, the
    old values in their history and its startup entries. Asks first, showing the count."""
    if (user_id is None) == (agent_id is None):
        raise click.UsageError("name one person: --user ID or --agent ID")
    who = f"user {user_id}" if user_id is not None else f"agent {agent_id}"
    mem = state.open(embeds=False)
    counts = mem.erase(user_id=user_id, agent_id=agent_id, dry_run=True).erased
    if not dry_run and any(counts.values()):
        confirm(f"Erase {who} for good: {counts_text(counts)}?", yes)
        counts = mem.erase(user_id=user_id, agent_id=agent_id).erased
    verb = "Would erase" if dry_run else "Erased"
    text = f"{verb} {who}: {counts_text(counts)}." + (" Nothing changed (dry run)." if dry_run else "")
    out.respond(as_json, {"erased": counts, "dry_run": dry_run, "user_id": user_id, "agent_id": agent_id}, text)


@click.command("delete-bulk")
@caller_options
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE", help="Only this scope (repeatable).")
@category_filter
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable: any of them).")
@click.option("--session", "session_id", metavar="ID", help="Only memories from this session.")
@click.option("--older-than", "until", type=IsoTime(), metavar="TIME",
              help="Only memories created before this time: 30d, 2w, yesterday or an ISO date.")
@click.option("--newer-than", "since", type=IsoTime(), metavar="TIME",
              help="Only memories created at or after this time: 7d, 2h, today or an ISO date.")
@click.option("--yes", "-y", "yes", is_flag=True, help="Delete them; without it, only count them.")
@json_option
@pass_state
def delete_bulk(state: State, yes: bool, as_json: bool, caller: Caller, **filters: Any) -> None:
    """Soft-delete every memory that matches the filters (at least one) and that you may erase: your own
    words, or any in a scope you may write. Without --yes it only counts them; deleted memories can be
    restored with `undelete` until purged."""
    args = engine_args(filters)
    if not any(v is not None for v in args.values()):  # the engine's message would name its own arguments
        raise click.UsageError("delete-bulk needs a filter: --scope, --category, --tag, --session, --older-than or --newer-than")
    mem = state.open(embeds=False)
    n = mem.delete_bulk(caller=caller, dry_run=not yes, **args)
    found = out.memories(n)
    text = f"Deleted {found} (`list --deleted` lists deleted memories, `undelete ID` restores one)." if yes else (
        f"Would delete {found}. Run again with --yes to delete." if n else "No memories you may erase match."
    )
    out.respond(as_json, {"matched": n, "deleted": n if yes else 0, "dry_run": not yes}, text)


COMMANDS = [erase, delete_bulk]
