"""Reading a file as lines with their places: Markdown, plain text and source code by line, PDF by page.

The type comes from the name (the extension, or a few well-known names such as `Makefile`), never
from guessing at the content: a file of an unknown kind is refused, not indexed as noise. Text must
be UTF-8 (a BOM is dropped); a NUL byte means binary. PDF text is extracted with pypdf; a PDF
without text (a scan) is refused, since there is nothing to search.

A file's bytes do not bound the work of reading it: a 14 KB PDF whose pages all draw one huge
compressed content stream makes millions of characters and minutes of parsing. `Limits` bound the
text, the pages and the time; a PDF is read in a child process, killed at the time limit, so the
parse holds neither this process's interpreter lock nor its memory.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Callable, Literal, get_args

from ..errors import ValidationError
from .chunking import PARAGRAPH, SECTION, Line

# pypdf logs what it then raises (a second line beside our error) and what it reads past anyway
logging.getLogger("pypdf").setLevel(logging.ERROR)

FileType = Literal["markdown", "text", "code", "pdf"]
FILE_TYPES: tuple[str, ...] = get_args(FileType)

_BY_EXTENSION: dict[str, FileType] = {
    **dict.fromkeys((".md", ".markdown", ".mdx"), "markdown"),
    **dict.fromkeys((".txt", ".text", ".rst", ".adoc", ".org", ".log", ".csv", ".tsv"), "text"),
    ".pdf": "pdf",
    **dict.fromkeys((
        ".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".kts", ".scala",
        ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cs", ".fs", ".swift", ".m", ".mm", ".rb", ".php", ".pl", ".lua",
        ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj", ".el", ".zig", ".nim", ".sh", ".bash",
        ".zsh", ".fish", ".ps1", ".sql", ".html", ".css", ".scss", ".vue", ".svelte", ".json", ".jsonc", ".json5",
        ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml", ".proto", ".graphql", ".tf", ".nix", ".cmake", ".gradle",
    ), "code"),
}
_BY_NAME: dict[str, FileType] = {
    **dict.fromkeys(("makefile", "dockerfile", "justfile", "rakefile", "gemfile", "cmakelists.txt"), "code"),
    **dict.fromkeys(("readme", "license", "changelog", "notice", "authors"), "text"),
}
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def text_lines(text: str) -> list[Line]:
    """A text that is no file (a conversation message, read as Markdown: headings, fences, paragraphs) as lines."""
    return _markdown_lines(text.splitlines())


def file_type(path: str | PurePath) -> FileType | None:
    """The kind of file its name says, or None for a kind that is not read."""
    name = PurePath(path).name.lower()
    return _BY_NAME.get(name) or _BY_EXTENSION.get(PurePath(name).suffix)


@dataclass(frozen=True)
class Limits:
    """What reading one file may cost (`files.max_text_chars`, `max_pages`, `max_seconds`); past one, the
    file is refused with an error naming it, and nothing of it is stored."""

    max_chars: int
    max_pages: int
    max_seconds: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)


def read(data: bytes, kind: FileType, name: str, limits: Limits) -> list[Line]:
    """The file's lines, each with its line number (its page for a PDF) and where a chunk may start."""
    if kind == "pdf":
        return _pdf_lines(_pdf_pages_apart(data, name, limits), name)
    text = _text(data, name)
    if len(text) > limits.max_chars:
        raise _too_much_text(name, limits)
    lines = text.splitlines()
    if kind == "markdown":
        return _markdown_lines(lines)
    return _plain_lines(lines, sections=kind == "code")


def _text(data: bytes, name: str) -> str:
    if b"\x00" in data:
        raise ValidationError(f"{name} holds NUL bytes: a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{name} is not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _plain_lines(lines: list[str], *, sections: bool) -> list[Line]:
    """A line after a blank one starts a paragraph; in code, one that is not indented starts a section
    (a top-level definition)."""
    out = []
    for i, text in enumerate(lines):
        after_blank = i > 0 and not lines[i - 1].strip() and bool(text.strip())
        top_level = sections and after_blank and not text[:1].isspace()
        out.append(Line(text, i + 1, SECTION if top_level else PARAGRAPH if after_blank else 0))
    return out


def _markdown_lines(lines: list[str]) -> list[Line]:
    """A heading (`# …`, or a line underlined with === or ---) starts a section; not inside a fenced code block."""
    starts = [0] * len(lines)
    fence: str | None = None
    for i, text in enumerate(lines):
        if (opened := _FENCE.match(text)) is not None:
            marker = opened.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        if _ATX_HEADING.match(text):
            starts[i] = SECTION
        elif _SETEXT_UNDERLINE.match(text) and i > 0 and lines[i - 1].strip() and not starts[i - 1]:
            starts[i - 1] = SECTION
        elif text.strip() and i > 0 and not lines[i - 1].strip():
            starts[i] = PARAGRAPH
    return [Line(text, i + 1, start) for i, (text, start) in enumerate(zip(lines, starts))]


class _Over(Exception):
    """Raised inside pypdf's text visitor to stop a page's extraction at a limit."""


def pdf_pages(data: bytes, name: str, limits: Limits) -> list[str]:
    """Each page's text, within the limits: the clock is read before each page and as its text comes."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    deadline = limits.clock() + limits.max_seconds
    pages: list[str] = []
    total = 0

    def visit(text: str, *_: object) -> None:  # pypdf calls it per piece of text it shows
        nonlocal total
        total += len(text)
        if total > limits.max_chars or limits.clock() > deadline:
            raise _Over

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValidationError(f"{name} is an encrypted PDF: decrypt it first")
        if len(reader.pages) > limits.max_pages:
            raise ValidationError(f"{name} has {len(reader.pages)} pages; the limit is {limits.max_pages} (files.max_pages)")
        for page in reader.pages:
            if limits.clock() > deadline:
                raise _Over
            pages.append(page.extract_text(visitor_text=visit) or "")
    except _Over:
        raise (_too_much_text(name, limits) if total > limits.max_chars else _too_slow(name, limits)) from None
    except ValidationError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ValidationError(f"{name} is not a readable PDF: {exc}") from None
    if sum(map(len, pages)) > limits.max_chars:  # the visitor does not see every character extract_text adds
        raise _too_much_text(name, limits)
    return pages


def _pdf_pages_apart(data: bytes, name: str, limits: Limits) -> list[str]:
    """`pdf_pages` in a child process, killed when the time limit has passed (parsing a page's content runs
    before any text is seen, so the child's own clock cannot stop it)."""
    args = json.dumps({"name": name, "max_chars": limits.max_chars, "max_pages": limits.max_pages,
                       "max_seconds": limits.max_seconds})
    try:
        done = subprocess.run([sys.executable, "-c", "from clawrecall.files.readers import _child; _child()", args],
                              input=data, capture_output=True, env=_CHILD_ENV,
                              timeout=limits.max_seconds * 1.1 + 5)  # the child's start and its answer, beside the parse
    except subprocess.TimeoutExpired:
        raise _too_slow(name, limits) from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise ValidationError(f"{name} could not be read: the PDF reader stopped ({done.stderr.decode()[-300:].strip()})") from None
    if "error" in answer:
        raise ValidationError(answer["error"])
    return answer["pages"]


# the child imports this package from where this process did, whatever its sys.path was made of
_CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p)}


def _too_much_text(name: str, limits: Limits) -> ValidationError:
    return ValidationError(f"{name} holds more than {limits.max_chars} characters of text (files.max_text_chars)")


def _too_slow(name: str, limits: Limits) -> ValidationError:
    return ValidationError(f"{name} takes longer than {limits.max_seconds:g} s to read (files.max_seconds)")


def _pdf_lines(pages: list[str], name: str) -> list[Line]:
    """Each page's text, line by line; a page starts a paragraph (a paragraph often runs on)."""
    out: list[Line] = []
    for number, text in enumerate(pages, start=1):
        lines = text.replace("\x00", "").splitlines()
        out.extend(Line(line.text, number, PARAGRAPH if j == 0 else line.start)
                   for j, line in enumerate(_plain_lines(lines, sections=False)))
    if not any(line.text.strip() for line in out):
        raise ValidationError(f"{name} has no text to index (a scanned PDF? text in images is not recognised)")
    return out


def _child() -> None:
    """The child of `_pdf_pages_apart`: the PDF on stdin, the limits as JSON in argv, its pages as JSON on stdout."""
    given = json.loads(sys.argv[1])
    result: dict[str, Any]
    try:
        result = {"pages": pdf_pages(sys.stdin.buffer.read(), given.pop("name"), Limits(**given))}
    except ValidationError as exc:
        result = {"error": str(exc)}
    sys.stdout.write(json.dumps(result))
