"""Cutting a file's text into chunks that fit the embedding model, overlap, and keep where they came from.

The text arrives as lines, each with its place (a line number, or a PDF page) and how strongly a
chunk may start there: a heading (Markdown) or a top-level statement (code) is a section's start,
a line after a blank line a paragraph's. Lines are packed into a chunk until the next would not
fit; the chunk then ends at the last section start that leaves it at least a quarter full, else
the last paragraph start that leaves it half full, else where the next line would not fit. The
next chunk repeats the last ~15 % of the one before (the overlap, in whole lines), so a sentence cut in two is
whole in one of them, except after a section start: a new section needs none of the last one.
A line longer than a chunk is cut at token boundaries into pieces of overlap size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .tokens import Tokens

PARAGRAPH, SECTION = 1, 2  # how strongly a chunk may start at a line
_SECTION_FILL, _PARAGRAPH_FILL = 0.25, 0.5  # how full a chunk must be to end before such a line


@dataclass(frozen=True)
class Line:
    """A line of text where it was found: `at` is its line number, or the page it is on."""

    text: str
    at: int
    start: int = 0  # PARAGRAPH or SECTION: a chunk may start here


@dataclass(frozen=True)
class Chunk:
    text: str
    first: int  # the first and last line (or page) it covers
    last: int
    tokens: int


@dataclass(frozen=True)
class _Unit:
    text: str
    at: int
    start: int
    tokens: int
    joint: str  # what comes before it in a chunk: a newline, or nothing for the rest of a cut line


def chunk(lines: Sequence[Line], tokens: Tokens, overlap: float) -> list[Chunk]:
    """The chunks of a text, in order; blank chunks are left out."""
    budget = tokens.window
    keep = int(budget * overlap)
    units = _units(lines, tokens, max(keep, budget // 8, 1))
    chunks: list[Chunk] = []
    begin, n = 0, len(units)
    while begin < n:
        end, fill = begin + 1, units[begin].tokens
        while end < n and fill + units[end].tokens <= budget:
            fill += units[end].tokens
            end += 1
        cut = _cut(units, begin, end, budget) if end < n else end
        if (made := _chunk(units[begin:cut])) is not None:
            chunks.append(made)
        if cut == n:
            break
        begin = _overlap_start(units, begin, cut, keep)
    return chunks


def _units(lines: Sequence[Line], tokens: Tokens, piece: int) -> list[_Unit]:
    """The lines with their token counts; one longer than a chunk becomes several pieces."""
    counts = tokens.count([line.text for line in lines])
    out: list[_Unit] = []
    for line, count in zip(lines, counts):
        if count <= tokens.window:
            out.append(_Unit(line.text, line.at, line.start, count, "\n"))
            continue
        parts = tokens.split(line.text, piece)
        for i, (part, n) in enumerate(zip(parts, tokens.count(parts))):
            out.append(_Unit(part, line.at, line.start if i == 0 else 0, n, "\n" if i == 0 else ""))
    return out


def _cut(units: list[_Unit], begin: int, end: int, budget: int) -> int:
    """Where a full chunk ends (`units[end]` did not fit): before the last section or paragraph start
    that leaves it full enough, else at `end`."""
    fill = sum(u.tokens for u in units[begin:end])
    found = {SECTION: 0, PARAGRAPH: 0}
    for k in range(end, begin, -1):  # `fill` is the tokens of units[begin:k]
        kind = units[k].start
        if kind and not found[kind] and fill >= budget * (_SECTION_FILL if kind == SECTION else _PARAGRAPH_FILL):
            found[kind] = k
        fill -= units[k - 1].tokens
    return found[SECTION] or found[PARAGRAPH] or end


def _overlap_start(units: list[_Unit], begin: int, cut: int, keep: int) -> int:
    """Where the next chunk starts: the lines before the cut that make `keep` tokens (a line that
    crosses it counts while the overlap stays under twice `keep`), not before the section's start,
    and never before `begin + 1` (every chunk moves on)."""
    start, kept = cut, 0
    while (start - 1 > begin and units[start].start != SECTION and kept < keep
           and kept + units[start - 1].tokens <= 2 * keep):
        start -= 1
        kept += units[start].tokens
    return start


def _chunk(units: list[_Unit]) -> Chunk | None:
    filled = [i for i, u in enumerate(units) if u.text.strip()]
    if not filled:
        return None
    used = units[filled[0] : filled[-1] + 1]
    text = used[0].text + "".join(u.joint + u.text for u in used[1:])
    return Chunk(text, used[0].at, used[-1].at, sum(u.tokens for u in used))
