"""OpenClaw's Markdown memory (`MEMORY.md`, `USER.md`, `memory/*.md`) as clawrecall memories.

Each paragraph or list item becomes one memory in the agent's scope, titled by its nearest heading
(one longer than `MAX_SECTION_CHARS` becomes several, split between lines or words: no text is
dropped); a daily note named by a real date (`memory/2026-03-02.md`) keeps it as the memory's
creation time, any other file is undated.

Importing again stores nothing twice, by identity rather than by likeness: each section's
`source_id` is its file and a hash of its text, and a section whose `source_id` is already in the
agent's scope, deleted or not, is skipped. So a memory the user deleted stays deleted, and two
similar but different lines are two memories.

Template text is never imported: a section of OpenClaw's workspace templates (`templates.py`), or a
placeholder (`conversations.text.is_placeholder`: "Prefer ...", a line that is only a comment such
as `<!-- observed: YYYY-MM-DD | status: active -->`). The summary counts what was left out, and
names the files that were nothing but template text (an untouched `USER.md`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from ..conversations.text import is_placeholder
from ..errors import ValidationError
from . import templates
from .sections import sections

if TYPE_CHECKING:
    from ..engine import Memory
    from ..scopes import Caller

SOURCE_TYPE = "openclaw-markdown"
MAX_FILES = 1000
_LOOKUP_BATCH = 500  # source ids per query (SQLite's bound-parameter limit is 999 on old builds)
_DATED = re.compile(r"(?:^|/)(\d{4}-\d{2}-\d{2})[^/]*\.md$")


@dataclass(frozen=True)
class MarkdownFile:
    path: str  # relative to the agent's workspace, as OpenClaw's memory_get names it
    content: str



def _created_at(path: str) -> datetime | None:
    """The date a daily note is named by; None for other files and names that are no date (`2026-13-45.md`)."""
    dated = _DATED.search(path)
    if not dated:
        return None
    try:
        return datetime.strptime(dated.group(1), "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


@dataclass
class MarkdownItems:
    """The memories a set of Markdown files holds, by `source_id` (its file and a hash of its text), and
    what was left out as template text."""

    items: dict[str, dict[str, Any]]
    sections: int
    templates: int
    template_files: list[str]


def markdown_items(files: list[MarkdownFile], scope: str) -> MarkdownItems:
    """Each section of `files` that is not template text, as a memory of `scope` (NewMemory fields)."""
    items: dict[str, dict[str, Any]] = {}
    found = left_out = 0
    template_files: list[str] = []
    shipped = templates.known()
    for f in files:
        created = _created_at(f.path)
        kept = template = 0
        for s in sections(f.content):
            found += 1
            if is_placeholder(s.text) or templates.fingerprint(s.text) in shipped:
                template += 1
                continue
            kept += 1
            source_id = f"{f.path}#{hashlib.sha256(s.text.encode()).hexdigest()[:16]}"
            items.setdefault(source_id, {
                "content": s.text, "scope": scope, "title": s.heading, "source_type": SOURCE_TYPE,
                "source_id": source_id, "metadata": {"path": f.path}, "created_at": created,
            })
        left_out += template
        if template and not kept:
            template_files.append(f.path)
    return MarkdownItems(items, found, left_out, template_files)


class MarkdownImported(TypedDict):
    files: int
    sections: int
    created: int
    duplicates: int
    templates: int  # sections left out as template or placeholder text
    template_files: list[str]  # files left out whole: nothing in them but template text
    scope: str


def import_markdown(mem: "Memory", caller: "Caller", files: list[MarkdownFile]) -> MarkdownImported:
    """Store the sections of `files` not imported before in the calling agent's scope.

    Answers `{files, sections, created, duplicates, templates, template_files, scope}`; `duplicates`
    counts the sections skipped because their `source_id` is already in the scope (a deleted memory's
    too) or earlier in this import, `templates` those left out as template text, `template_files` the
    files that held nothing else.
    """
    if caller.agent_id is None:
        raise ValidationError("a Markdown import names the agent whose workspace it is (X-Clawrecall-Agent)")
    if len(files) > MAX_FILES:
        raise ValidationError(f"at most {MAX_FILES} files per import")
    scope = f"agent:{caller.agent_id}"  # the engine checks it against the caller (and a token's allow-list)
    read = markdown_items(files, scope)
    items, found, left_out, template_files = read.items, read.sections, read.templates, read.template_files
    known = _imported(mem, caller, scope, list(items))
    new = [item for source_id, item in items.items() if source_id not in known]
    # No near-duplicate check: identity decides, and similar lines of a file are distinct memories.
    results = mem.add_many(new, caller=caller, dedup=False) if new else []
    created_count = sum(r.action == "created" for r in results)
    return {
        "files": len(files), "sections": found, "created": created_count,
        "duplicates": found - left_out - created_count, "templates": left_out, "template_files": template_files,
        "scope": scope,
    }


def _imported(mem: "Memory", caller: "Caller", scope: str, source_ids: list[str]) -> set[str]:
    """Which of `source_ids` an earlier import stored in `scope`, deleted, expired and superseded memories included."""
    known: set[str] = set()
    for at in range(0, len(source_ids), _LOOKUP_BATCH):
        batch = source_ids[at: at + _LOOKUP_BATCH]
        records = mem.list(
            caller=caller, scope=scope, source_type=SOURCE_TYPE, source_id=batch, include_deleted=True,
            include_expired=True, include_superseded=True, limit=1_000_000,
        )
        known.update(r.source_id for r in records if r.source_id)
    return known
