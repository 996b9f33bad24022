"""OpenClaw's Markdown memory files as sections: each paragraph or top-level list item under its
nearest heading. Read by the import (markdown.py) and by the template fingerprints (templates.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

MAX_SECTION_CHARS = 4000  # one memory's text: a paragraph, not a whole file, is what recall should find
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")


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
            for part in split(text, MAX_SECTION_CHARS):
                yield Section(part, heading)

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


def split(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut after a line, else after a space, else anywhere."""
    parts: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit + 1)
        if cut <= 0:
            cut = text.rfind(" ", 0, limit + 1)
        if cut <= 0:
            cut = limit
        head, text = text[:cut].strip(), text[cut:].strip()
        if head:
            parts.append(head)
    if text:
        parts.append(text)
    return parts
