"""How the CLI speaks: JSON on stdout for programs, aligned text for people, errors and progress on stderr.

Kept apart from the commands so every command formats the same way and stdout stays
clean when `--json` is given (progress bars and messages for people never go there).
"""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence

import click
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

Progress = Callable[[int, int], None]


def jsonable(value: Any) -> Any:
    """Models become their JSON form (`model_dump(mode="json")`), recursively through lists and dicts."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return to_jsonable_python(value)  # as a model's times are written
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


def respond(as_json: bool, data: Any, text: str) -> None:
    """The one way a command answers: `data` as JSON, or `text` for a person."""
    if as_json:
        emit_json(data)
    else:
        click.echo(text)


def report_error(message: str, code: str, as_json: bool) -> None:
    """One `Error: …` line on stderr; with `--json`, the same error as JSON on stdout."""
    one_line = " ".join(str(message).split())
    click.echo(f"Error: {one_line}", err=True)
    if as_json:
        emit_json({"error": {"code": code, "message": one_line}})


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def truncate(text: str, width: int) -> str:
    """Collapse whitespace (a table row is one line) and cut to `width` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Aligned columns; the last column takes what is left of the terminal width and is truncated to it."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers[:-1])]
    room = max(terminal_width() - sum(widths) - 2 * len(widths) - 1, 12)

    def line(cells: Sequence[str]) -> str:
        fixed = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(fixed + [truncate(cells[-1], room)]).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    """A `label: value` block with the values aligned; empty values are left out."""
    shown = [(k, str(v)) for k, v in pairs if v not in (None, "", [], {})]
    width = max((len(k) for k, _ in shown), default=0) + 1
    return "\n".join(f"{k + ':':<{width}} {v}" for k, v in shown)


def short_id(memory_id: str) -> str:
    return memory_id[:8]


def percent(score: float) -> str:
    return f"{score * 100:.0f}%"


def timestamp(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty()


@contextmanager
def progress_bar(label: str) -> Iterator[Progress | None]:
    """An engine `progress(done, total)` callback drawing a bar on stderr, or None when stderr is no terminal.

    The bar is created on the first report, so nothing is drawn while input is still being
    validated (a rejected import leaves stderr with just its error line).
    """
    if not _stderr_is_tty():
        yield None
        return
    with ExitStack() as stack:
        bars: list[Any] = []

        def update(done: int, total: int) -> None:
            if not bars:
                bars.append(stack.enter_context(click.progressbar(length=total, label=label, file=sys.stderr)))
            bars[0].update(done - bars[0].pos)

        yield update
