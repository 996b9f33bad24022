"""Reading a file as lines with their places: Markdown, plain text and source code by line, PDF by page.

The type comes from the name (the extension, or a few well-known names such as `Makefile`), never
from guessing at the content: a file of an unknown kind is refused, not indexed as noise. Text must
be UTF-8 (a BOM is dropped); a NUL byte means binary. PDF text is extracted with pypdf; a PDF
without text (a scan) is refused, since there is nothing to search.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import PurePath
from typing import Literal, get_args

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


def read(data: bytes, kind: FileType, name: str) -> list[Line]:
    """The file's lines, each with its line number (its page for a PDF) and where a chunk may start."""
    if kind == "pdf":
        return _pdf_lines(data, name)
    lines = _text(data, name).splitlines()
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


def _pdf_lines(data: bytes, name: str) -> list[Line]:
    """Each page's text, line by line; a page starts a paragraph (a paragraph often runs on)."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValidationError(f"{name} is an encrypted PDF: decrypt it first")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ValidationError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ValidationError(f"{name} is not a readable PDF: {exc}") from None
    out: list[Line] = []
    for number, text in enumerate(pages, start=1):
        lines = text.replace("\x00", "").splitlines()
        out.extend(Line(line.text, number, PARAGRAPH if j == 0 else line.start)
                   for j, line in enumerate(_plain_lines(lines, sections=False)))
    if not any(line.text.strip() for line in out):
        raise ValidationError(f"{name} has no text to index (a scanned PDF? text in images is not recognised)")
    return out
