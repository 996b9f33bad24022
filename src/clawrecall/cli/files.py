"""`clawrecall files add | list | remove`: make files searchable (`mem.files`).

The CLI reads any file the user running it can (it is that user already); `files.roots` limits
only what a server's clients may have it read. A folder given to `add` stands for the files in it
of the types read, hidden ones left out. The chunks are embedded before `add` returns, so a search
by meaning finds them at once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..errors import ClawrecallError
from ..files import file_type
from ..models import FileRecord
from ..scopes import Caller
from . import output as out
from .commands import State, caller_options, group_json_option, json_option, pass_state

_POLL_S = 0.5


@click.group("files")
@group_json_option
def files_group() -> None:
    """Make Markdown, text, source code and PDF files searchable (search them with --source chunk)."""


@files_group.command("add")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@caller_options
@click.option("--message", "message_id", metavar="ID", help="The conversation message the file came with.")
@json_option
@pass_state
def files_add(state: State, paths: tuple[str, ...], message_id: str | None, as_json: bool, caller: Caller) -> None:
    """Ingest files (a folder: the files in it): again, a changed file is replaced, an unchanged one left as it is.

    A file that cannot be ingested is an error line on stderr and exit 1; the others are ingested."""
    mem = state.open(embeds=True, creates=True)
    targets = expand(paths)
    results: list[dict[str, Any]] = []
    with out.progress_bar("Ingesting") as progress:
        for n, target in enumerate(targets, start=1):
            try:
                results.append(mem.files.ingest(target, caller=caller, message_id=message_id).model_dump())
            except ClawrecallError as exc:
                results.append({"path": target, "error": {"code": exc.code, "message": " ".join(str(exc).split())}})
            if progress is not None:
                progress(n, len(targets))
    embed_now(mem)
    failed = [r for r in results if "error" in r]
    if not as_json:
        for r in failed:
            out.report_error(f"{r['path']}: {r['error']['message']}", r["error"]["code"], False)
    out.respond(as_json, {"files": results, "failed": len(failed)}, added_text(results))
    if failed:
        click.get_current_context().exit(1)


@files_group.command("list")
@caller_options
@json_option
@pass_state
def files_list(state: State, as_json: bool, caller: Caller) -> None:
    """The ingested files you may read, by path."""
    found = state.open(embeds=False).files.list(caller=caller)
    out.respond(as_json, found, files_text(found))


@files_group.command("remove")
@click.argument("files", nargs=-1, required=True, metavar="PATH|ID...")
@caller_options
@json_option
@pass_state
def files_remove(state: State, files: tuple[str, ...], as_json: bool, caller: Caller) -> None:
    """Forget ingested files, by path or id: their chunks are erased (the files themselves are left alone)."""
    mem = state.open(embeds=False)
    removed = [mem.files.remove(f, caller=caller) for f in files]
    out.respond(as_json, {"removed": [{"file_id": f.id, "path": f.path, "chunks": f.chunk_count} for f in removed]},
                "\n".join(f"Removed {f.path} ({chunks(f.chunk_count)})." for f in removed))


def expand(paths: tuple[str, ...]) -> list[str]:
    """The paths given, a folder replaced by the files in it (and below) whose type is read, in order."""
    out_paths: list[str] = []
    for given in paths:
        if not Path(given).is_dir():
            out_paths.append(given)
            continue
        for folder, dirs, names in os.walk(given):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out_paths += [os.path.join(folder, n) for n in sorted(names) if not n.startswith(".") and file_type(n)]
    return out_paths


def embed_now(mem: Any) -> None:
    """Wait for the background embedding the ingests started, with a bar, then embed what is left here
    (so a provider's failure is this command's error, not a log line)."""
    total = mem.upkeep.unembedded()
    if total:
        with out.progress_bar("Embedding") as progress:
            while not mem.upkeep.runtime.drain(_POLL_S):
                if progress is not None:
                    progress(total - min(mem.upkeep.unembedded(), total), total)
    mem.upkeep.backfill()


def added_text(results: list[dict[str, Any]]) -> str:
    done = [r for r in results if "error" not in r]
    lines = [f"{r['action']:<10} {r['path']} ({r['file_type']}, {chunks(r['chunks'])})" for r in done]
    return "\n".join(lines) or ("No file ingested." if results else "No files to ingest.")


def chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def files_text(found: list[FileRecord]) -> str:
    if not found:
        return "No files ingested."
    rows = [[out.short_id(f.id), f.file_type, str(f.chunk_count), f.scope, out.timestamp(f.updated_at) or "", f.path]
            for f in found]
    return out.table(["ID", "TYPE", "CHUNKS", "SCOPE", "UPDATED", "PATH"], rows, right=(2,))
