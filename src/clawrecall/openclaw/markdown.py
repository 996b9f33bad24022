"""OpenClaw's Markdown memory (`MEMORY.md`, `USER.md`, `memory/*.md`) as clawrecall memories.

Each paragraph or list item becomes one memory in the agent's scope, titled by its nearest heading;
a dated daily note (`memory/2026-03-02.md`) keeps its date as the memory's creation time. Importing
again stores nothing twice: an identical section is a duplicate in that scope.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import ValidationError

if TYPE_CHECKING:
    from ..engine import Memory
    from ..scopes import Caller

SOURCE_TYPE = "openclaw-markdown"
MAX_FILES = 1000
MAX_SECTION_CHARS = 4000
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_DATED = re.compile(r"(?:^|/)(\d{4}-\d{2}-\d{2})[^/]*\.md$")


@dataclass(frozen=True)
class MarkdownFile:
    path: str  # relative to the agent's workspace, as OpenClaw's memory_get names it
    content: str


@dataclass(frozen=True)
class Section:
    text: str
    heading: str | None


def sections(markdown: str) -> Iterator[Section]:
    """Paragraphs and top-level list items (with their nested lines), each under its nearest heading."""
    heading: str | None = None
    block: list[str] = []
    in_fence = False

    def flush() -> Iterator[Section]:
        text = "\n".join(block).strip()
        block.clear()
        if len(text) >= 3:
            yield Section(text[:MAX_SECTION_CHARS], heading)

    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence or line.lstrip().startswith("```"):
            block.append(line)
            continue
        match = _HEADING.match(line)
        if match:
            yield from flush()
            heading = match.group(2) or None
            continue
        if not line.strip():
            yield from flush()
            continue
        item = _ITEM.match(line)
        if item and not item.group(1):  # a new top-level item starts a new memory
            yield from flush()
            block.append(item.group(2))
        else:
            block.append(line.strip() if block else line)
    yield from flush()


def import_markdown(mem: "Memory", caller: "Caller", files: list[MarkdownFile]) -> dict[str, Any]:
    """Store every section of `files` in the calling agent's scope; `{files, sections, created, duplicates}`."""
    if caller.agent_id is None:
        raise ValidationError("a Markdown import names the agent whose workspace it is (X-Clawrecall-Agent)")
    if len(files) > MAX_FILES:
        raise ValidationError(f"at most {MAX_FILES} files per import")
    scope = f"agent:{caller.agent_id}"  # the engine checks it against the caller (and a token's allow-list)
    items = []
    for f in files:
        dated = _DATED.search(f.path)
        created = datetime.strptime(dated.group(1), "%Y-%m-%d").replace(tzinfo=timezone.utc) if dated else None
        for s in sections(f.content):
            digest = hashlib.sha256(s.text.encode()).hexdigest()[:16]
            items.append({
                "content": s.text, "scope": scope, "title": s.heading, "source_type": SOURCE_TYPE,
                "source_id": f"{f.path}#{digest}", "metadata": {"path": f.path}, "created_at": created,
            })
    results = mem.add_many(items, caller=caller, dedup=True) if items else []
    created_count = sum(r.action == "created" for r in results)
    return {
        "files": len(files), "sections": len(items), "created": created_count,
        "duplicates": len(results) - created_count, "scope": scope,
    }
