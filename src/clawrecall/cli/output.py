"""How the CLI speaks: JSON on stdout for programs, aligned text for people, errors and progress on stderr.

Kept apart from the commands so every command formats the same way and stdout stays
clean when `--json` is given (progress bars and messages for people never go there).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import unicodedata
from contextlib import ExitStack, contextmanager
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable, Iterator, Literal, Sequence

import click
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

Progress = Callable[[int, int], None]
Format = Literal["text", "json", "nl", "csv"]


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


def respond_rows(fmt: Format, items: Sequence[Any], text: str) -> None:
    """A list-like answer, in sqlite-utils' formats: `json` one array, `nl` one object a line,
    `csv` a header and one row per item (a nested model's fields as `memory.id`, lists and
    objects as JSON text), `text` for a person."""
    if fmt == "json":
        emit_json(items)
    elif fmt == "nl":
        for item in items:
            click.echo(json.dumps(jsonable(item), ensure_ascii=False))
    elif fmt == "csv":
        flat = [_flat(item) for item in items]
        columns = list(dict.fromkeys(k for row in flat for k in row))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        click.echo(buffer.getvalue(), nl=False)
    else:
        click.echo(text)


def _flat(item: Any, prefix: str = "") -> dict[str, Any]:
    """One CSV row: fields of nested models as `outer.inner`, lists and dicts as JSON, None as empty."""
    data = jsonable(item)
    row: dict[str, Any] = {}
    for key, value in data.items():
        nested = getattr(item, key, None) if isinstance(item, BaseModel) else None
        if isinstance(nested, BaseModel):
            row.update(_flat(nested, f"{prefix}{key}."))
            continue
        if isinstance(value, (list, dict)):
            value = json.dumps(value, ensure_ascii=False)
        row[prefix + key] = "" if value is None else value
    return row


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories`: the count with the noun it takes."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def memories(n: int) -> str:
    return plural(n, "memory", "memories")


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


@lru_cache(maxsize=4096)
def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Terminal columns `text` takes: CJK and other wide characters take two, combining marks none."""
    return len(text) if text.isascii() else sum(_char_width(ch) for ch in text)


def truncate(text: str, width: int) -> str:
    """Collapse whitespace (a table row is one line) and cut to `width` columns with an ellipsis."""
    flat = " ".join(text.split())
    if display_width(flat) <= width:
        return flat
    room, cut = max(width - 1, 0), 0
    for i, ch in enumerate(flat):
        if (cut := cut + _char_width(ch)) > room:
            return flat[:i] + "…"
    return flat


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * max(width - display_width(text), 0)
    return fill + text if right else text + fill


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Aligned columns, measured in terminal columns; the last takes what is left of the terminal
    width and is truncated to it."""
    widths = [max([display_width(h)] + [display_width(r[i]) for r in rows]) for i, h in enumerate(headers[:-1])]
    room = max(terminal_width() - sum(widths) - 2 * len(widths) - 1, 12)

    def line(cells: Sequence[str]) -> str:
        fixed = [_pad(c, w, i in right) for i, (c, w) in enumerate(zip(cells, widths))]
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
