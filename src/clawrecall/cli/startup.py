"""`clawrecall startup set|list|delete`: the startup identity entries (`mem.startup`) from the command line."""

from __future__ import annotations

import click

from ..scopes import Caller
from . import output as out
from .commands import State, caller_options, group_json_option, json_option, pass_state, rows_format_options


@click.group("startup")
@group_json_option
def startup_group() -> None:
    """Startup entries: who the agent is and standing rules, injected on a session's first turn (by priority)."""


@startup_group.command("set")
@click.argument("key")
@click.argument("content")
@click.option("--priority", type=click.IntRange(0, 9), default=2, show_default=True, help="0 is injected first.")
@click.option("--reinforce", is_flag=True, help="Inject it on every later turn of a session too (alone, in the budget).")
@click.option("--scope", metavar="SCOPE", help="Where it lives (default: user:<user>, else agent:<agent>, else global).")
@caller_options
@json_option
@pass_state
def startup_set(state: State, key: str, content: str, priority: int, reinforce: bool, scope: str | None,
                caller: Caller, as_json: bool) -> None:
    """Create or replace the entry KEY with CONTENT."""
    entry = state.open(embeds=False, creates=True).startup.set(
        key, content, priority=priority, reinforce=reinforce, scope=scope, caller=caller
    )
    out.respond(as_json, entry, f"Set {entry.key} in {entry.scope} (priority {entry.priority}).")


@startup_group.command("list")
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE", help="Only this scope (repeatable).")
@caller_options
@rows_format_options
@pass_state
def startup_list(state: State, scopes: tuple[str, ...], caller: Caller, fmt: out.Format) -> None:
    """The entries in the scopes you read, by priority then key."""
    entries = state.open(embeds=False).startup.list(caller=caller, scope=list(scopes) or None)
    rows = [[str(e.priority), e.scope, e.key, "yes" if e.reinforce else "", e.content] for e in entries]
    text = out.table(["P", "SCOPE", "KEY", "REINFORCE", "CONTENT"], rows) if rows else "No startup entries."
    out.respond_rows(fmt, entries, text)


@startup_group.command("delete")
@click.argument("key")
@click.option("--scope", metavar="SCOPE", help="The entry's scope (default: your own, where `set` writes).")
@caller_options
@json_option
@pass_state
def startup_delete(state: State, key: str, scope: str | None, caller: Caller, as_json: bool) -> None:
    """Remove the entry KEY."""
    state.open(embeds=False).startup.delete(key, scope=scope, caller=caller)
    out.respond(as_json, {"deleted": key, "scope": scope}, f"Deleted startup entry {key}.")
