"""The journal: memories as Markdown, one file per scope and day (`<scope>/memory/YYYY-MM-DD.md`),
readable and diffable, in the layout OpenClaw's memory-core indexes (a scope's folder is an agent
workspace) and `clawrecall openclaw import` reads back: each memory one list item.

A day lists what was recorded that day, by kind: decisions, preferences, the other facts, and
what changed (a memory that replaced another, with the text it replaced). A memory later replaced
says so and when. Deleted memories are left out; the same memories give the same files, byte for byte.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..models import MemoryRecord

_KINDS = (("decision", "Decisions"), ("preference", "Preferences"))


def journal(records: Iterable[MemoryRecord]) -> dict[str, str]:
    """{relative path: Markdown} for the records (deleted ones are left out)."""
    kept = [r for r in records if not r.is_deleted]
    by_id = {r.id: r for r in kept}
    days: dict[tuple[str, str], list[MemoryRecord]] = defaultdict(list)
    for r in sorted(kept, key=lambda r: (r.created_at, r.id)):
        days[(r.scope, r.created_at.date().isoformat())].append(r)
    return {f"{_folder(scope)}/memory/{day}.md": _day(scope, day, rs, by_id) for (scope, day), rs in sorted(days.items())}


def _folder(scope: str) -> str:
    """A scope as a folder name: `agent:main` → `agent-main` (no path separators, whatever the scope)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in scope.replace(":", "-", 1)).strip(".") or "scope"


def _day(scope: str, day: str, records: list[MemoryRecord], by_id: dict[str, MemoryRecord]) -> str:
    changed = [r for r in records if r.supersedes]
    rest = [r for r in records if not r.supersedes]
    lines = [f"# {day} · {scope}", ""]
    for category, title in _KINDS:
        lines += _section(title, [r for r in rest if r.category == category], by_id)
    lines += _section("Facts", [r for r in rest if r.category not in dict(_KINDS)], by_id)
    lines += _section("What changed", changed, by_id)
    return "\n".join(lines).rstrip("\n") + "\n"


def _section(title: str, records: list[MemoryRecord], by_id: dict[str, MemoryRecord]) -> list[str]:
    if not records:
        return []
    return [f"## {title}", "", *(_item(r, by_id) for r in records), ""]


def _item(r: MemoryRecord, by_id: dict[str, MemoryRecord]) -> str:
    text = r.content.strip().replace("\n", "\n  ")  # continuation lines stay inside the item
    notes = []
    if r.supersedes and r.supersedes in by_id:
        notes.append(f"replaces: {by_id[r.supersedes].content.strip().splitlines()[0]}")
    if r.superseded_by:
        notes.append(f"replaced {r.valid_to.date().isoformat()}" if r.valid_to else "replaced")
    return f"- {text}" + (f"\n  ({'; '.join(notes)})" if notes else "")
