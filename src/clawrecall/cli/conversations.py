"""`clawrecall conversations …`: the conversation record from the command line (`mem.conversations`)."""

from __future__ import annotations

import json
import sys
from typing import Any, get_args

import click

from ..models import GroupBy, Message, Segment
from ..scopes import Caller
from . import output as out
from .commands import State, caller_options, confirm, group_json_option, json_option, output_file, pass_state, yes_option
from .erasure import counts_text

SNIPPET = 100
# a session id names one conversation per scope (alice's "chat" and bob's are two)
scope_option = click.option("--scope", metavar="SCOPE", help="Only the conversation(s) in this scope.")


@click.group("conversations")
@group_json_option
def conversations_group() -> None:
    """The record of what was said: every message, in segments, searchable with `search --sources message`."""


@conversations_group.command("list")
@caller_options
@scope_option
@click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@pass_state
def list_conversations(state: State, caller: Caller, scope: str | None, limit: int, offset: int, as_json: bool) -> None:
    """The conversations you may read, the latest first."""
    found = state.open(embeds=False).conversations.sessions(caller=caller, scope=scope, limit=limit, offset=offset)
    rows = [[c.session_id, c.scope, str(c.messages), out.timestamp(c.first_at) or "",
             out.timestamp(c.last_at) or ""] for c in found]
    text = out.table(["SESSION", "SCOPE", "MESSAGES", "FIRST", "LAST"], rows, right=[2]) if rows else "No conversations."
    out.respond(as_json, found, text)


@conversations_group.command("show")
@click.argument("session_id", metavar="SESSION")
@caller_options
@scope_option
@click.option("--limit", "-n", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@pass_state
def show(state: State, session_id: str, caller: Caller, scope: str | None, limit: int, offset: int, as_json: bool) -> None:
    """A conversation's messages in order."""
    found = state.open(embeds=False).conversations.show(session_id, caller=caller, scope=scope, limit=limit, offset=offset)
    out.respond(as_json, [_public(m) for m in found], "\n".join(_message_line(m) for m in found))


@conversations_group.command("segments")
@click.argument("session_id", metavar="[SESSION]", required=False)
@caller_options
@scope_option
@click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@pass_state
def segments(state: State, session_id: str | None, caller: Caller, scope: str | None, limit: int, offset: int,
             as_json: bool) -> None:
    """Segments (of one conversation, or of all you may read), the latest first."""
    found = state.open(embeds=False).conversations.segments(caller=caller, session_id=session_id, scope=scope,
                                                            limit=limit, offset=offset)
    rows = [_segment_row(s) for s in found]
    headers = ["SEGMENT", "SESSION", "STARTED", "TURNS", "STATUS", "TITLE"]
    out.respond(as_json, found, out.table(headers, rows, right=[3]) if rows else "No segments.")


@conversations_group.command("export")
@click.argument("session_id", metavar="[SESSION]", required=False)
@caller_options
@scope_option
@click.option("--output", "-o", "path", metavar="FILE", help="Write to FILE instead of stdout.")
@json_option
@pass_state
def export(state: State, session_id: str | None, caller: Caller, scope: str | None, path: str | None, as_json: bool) -> None:
    """Messages as JSONL, one a line (of one conversation, or of all you may read).

    To stdout the JSONL is the whole output (also with --json); with --output, stdout gets a summary."""
    mem = state.open(embeds=False)
    with output_file(path or "-") as fh:
        n = mem.conversations.export(fh, caller=caller, session_id=session_id, scope=scope)
    if path:
        out.respond(as_json, {"exported": n, "output": path}, f"Exported {out.plural(n, 'message')} to {path}.")


@conversations_group.command("stats")
@caller_options
@click.option("--by", type=click.Choice(get_args(GroupBy)), default="user", show_default=True)
@json_option
@pass_state
def stats(state: State, caller: Caller, by: GroupBy, as_json: bool) -> None:
    """Messages per role and tokens, per user, agent or session."""
    groups = state.open(embeds=False).conversations.stats(caller=caller, by=by)
    rows = [[str(g.key or "-"), str(g.messages), ", ".join(f"{r} {n}" for r, n in g.by_role.items()),
             str(g.input_tokens), str(g.output_tokens)] for g in groups]
    headers = [by.upper(), "MESSAGES", "BY ROLE", "TOKENS IN", "TOKENS OUT"]
    out.respond(as_json, groups, out.table(headers, rows, right=[1, 3, 4]) if rows else "No conversations.")


@conversations_group.command("log")
@click.argument("source", metavar="FILE", default="-")
@click.option("--session", "session_id", metavar="ID", required=True, help="The conversation the messages belong to.")
@click.option("--channel", metavar="NAME", help="Where it took place (telegram, cli, …).")
@caller_options
@json_option
@pass_state
def log_messages(state: State, source: str, session_id: str, channel: str | None, caller: Caller, as_json: bool) -> None:
    """Record messages from FILE (or - for stdin): a JSON list of {role, content, …}, or JSONL."""
    text = sys.stdin.read() if source == "-" else _read(source)
    messages = _parse_messages(text)
    result = state.open(embeds=False, creates=True).conversations.log(messages, caller=caller, session_id=session_id,
                                                                       channel=channel)
    out.respond(as_json, result, f"Recorded {out.plural(result.stored, 'message')} ({result.skipped} already recorded).")


@conversations_group.command("end")
@click.argument("session_id", metavar="SESSION")
@caller_options
@json_option
@pass_state
def end(state: State, session_id: str, caller: Caller, as_json: bool) -> None:
    """Close the conversation's open segment now."""
    closed = state.open(embeds=False).conversations.end(session_id, caller=caller, reason="explicit")
    text = "No open segment." if closed is None else f"Closed segment {out.short_id(closed.id)} ({closed.file or 'no file'})."
    out.respond(as_json, {"closed": closed}, text)


@conversations_group.command("delete")
@click.argument("session_id", metavar="SESSION")
@caller_options
@click.option("--scope", metavar="SCOPE", help="The conversation in this scope (default: your own, where it is recorded).")
@click.option("--dry-run", is_flag=True, help="Count what would be erased; change nothing.")
@yes_option
@json_option
@pass_state
def delete(state: State, session_id: str, caller: Caller, scope: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Erase a conversation for good: its messages, segments and their JSONL files, the extraction jobs of
    its segments and the fact occurrences quoting them (the facts stay). Asks first, showing the count."""
    record = state.open(embeds=False).conversations
    done = record.delete(session_id, caller=caller, scope=scope, dry_run=True)
    if not dry_run:
        confirm(f"Erase conversation {session_id} in {done.scope} for good: {counts_text(done.deleted)}?", yes)
        done = record.delete(session_id, caller=caller, scope=scope)
    verb = "Would erase" if dry_run else "Erased"
    text = (f"{verb} conversation {session_id} in {done.scope}: {counts_text(done.deleted)}."
            + (" Nothing changed (dry run)." if dry_run else ""))
    out.respond(as_json, {**done.model_dump(), "dry_run": dry_run, "session_id": session_id}, text)


@conversations_group.command("sweep")
@json_option
@pass_state
def sweep(state: State, as_json: bool) -> None:
    """Close the segments whose pause has passed, erase what is past its retention (the record's, and
    memories soft-deleted long ago) and embed the rows still waiting for a vector: what `clawrecall
    serve` does every 30 s, for a store no server runs on (e.g. from cron)."""
    mem = state.open(embeds=True)
    data = {**mem.upkeep.sweep().model_dump(exclude={"awaiting_vectors"}), "embedded": mem.upkeep.backfill()}
    out.respond(as_json, data, f"Closed {out.plural(data['segments_closed'], 'segment')}; erased {out.plural(data['messages_pruned'], 'message')}"
                f" and purged {out.plural(data['memories_purged'], 'deleted memory', 'deleted memories')} past"
                f" retention; embedded"
                f" {out.plural(data['embedded'], 'row')}.")


@conversations_group.command("prune")
@click.option("--older-than-days", type=click.FloatRange(0, 365_000), metavar="DAYS",
              help="Erase segments closed longer ago than this [default: conversations.retention_days].")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_state
def prune(state: State, older_than_days: float | None, yes: bool, as_json: bool) -> None:
    """Erase for good the messages, segments and JSONL files of segments closed long ago."""
    mem = state.open(embeds=False)
    if older_than_days is None and mem.config.conversations.retention_days is None:
        raise click.UsageError("no retention is set: give --older-than-days or set conversations.retention_days")
    confirm("Erase old conversations for good?", yes)
    counts = mem.conversations.prune(older_than_days=older_than_days)
    out.respond(as_json, counts, f"Erased {out.plural(counts.messages, 'message')}, {out.plural(counts.segments, 'segment')} and "
                f"{out.plural(counts.files, 'file')}.")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise click.FileError(path, exc.strerror) from None
    except UnicodeDecodeError:
        raise click.UsageError(f"{path} is not UTF-8 text") from None


def _parse_messages(text: str) -> list[Any]:
    """A JSON list, one JSON object (over several lines or not), or one JSON object a line."""
    stripped = text.strip()
    if not stripped:
        raise click.UsageError("no messages given: a JSON list of {role, content, …}, or one such object a line")
    try:
        if stripped.startswith("["):
            return json.loads(stripped)
        try:
            return [json.loads(stripped)]
        except json.JSONDecodeError:
            return [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"not JSON: {exc}") from None


def _public(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json", exclude={"dedup_key"})


def _message_line(m: Message) -> str:
    return f"{out.timestamp(m.created_at)}  {m.role:<11} {out.truncate(' '.join(m.content.split()), SNIPPET)}"


def _segment_row(s: Segment) -> list[str]:
    status = "open" if s.closed_at is None else f"closed ({s.close_reason})"
    return [out.short_id(s.id), s.session_id, out.timestamp(s.started_at) or "", str(s.turn_count), status, s.title or ""]
