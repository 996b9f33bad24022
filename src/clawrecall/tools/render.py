"""How tools show memories: one line of text for the model, one JSON entry for programs.

Texts carry score and age (seed 001: "the agent sees this and decides if it matters") and the
short id a follow-up call (get, update, forget) needs. Memory text reaches a model only inside
the untrusted-data markers the recall block uses (`untrusted`: their code is drawn per block), sanitised too.
"""

from __future__ import annotations

from pydantic_core import to_jsonable_python
from typing_extensions import NotRequired, TypedDict

from ..conversations.text import discussed_text, percent, sanitize_for_context
from ..conversations.text import untrusted as untrusted  # the tools take it from here, with the rest of how memories are shown
from ..models import Discussed, MemoryRecord, SearchHits

LINE_CHARS = 300
SNIPPET_CHARS = 700


def memory_path(record: MemoryRecord) -> str:
    """Seed 001's virtual path of a record (`shadowdb/<category>/<id>`), in our namespace."""
    return f"clawrecall/{record.category}/{record.id}"


def short(text: str, limit: int) -> str:
    """One line, at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def line(n: int, record: MemoryRecord, score: float | None = None, *, label: str | None = None,
         discussed: Discussed | None = None) -> str:
    """`1. [preference] User prefers dark mode (85%, 3d ago, discussed 3 times, first on 2026-03-02, last on 2026-03-16, id 1a2b3c4d)`."""
    facts = ([percent(score)] if score is not None else []) + [record.age]
    facts += [discussed_text(discussed)] if discussed is not None else []
    facts.append(f"id {record.id[:8]}")
    deleted = " [deleted]" if record.is_deleted else ""
    return f"{n}. [{label or record.category}]{deleted} {shown(record.content, LINE_CHARS)} ({', '.join(facts)})"


def shown(content: str, limit: int) -> str:
    """A memory's text as a model may see it: one sanitised line, at most `limit` characters."""
    return sanitize_for_context(content, limit)


def degraded(hits: SearchHits) -> dict[str, str]:
    """`{"without_vectors": why}` for a tool's details when the search could only match words, else nothing."""
    return {"without_vectors": hits.without_vectors} if hits.without_vectors else {}


def keywords_only(hits: SearchHits) -> str:
    """A note after a tool's text when the search could not embed the query (the provider down): found by words only."""
    return f"\n\n(Found by keywords only: {hits.without_vectors})" if hits.without_vectors else ""


class MemoryEntry(TypedDict):
    """A memory in a tool's `details` (openclaw-memory-pgvector's MemoryEntry, with our fields)."""

    id: str
    path: str
    content: str
    category: str
    scope: str
    tags: list[str]
    importance: float
    created_at: str
    age: str
    deleted: bool
    score: NotRequired[float]


def entry(record: MemoryRecord, score: float | None = None) -> MemoryEntry:
    """A memory in a tool's `details`; `score` when it was found by a search."""
    out: MemoryEntry = {
        "id": record.id,
        "path": memory_path(record),
        "content": record.content,
        "category": record.category,
        "scope": record.scope,
        "tags": list(record.tags),
        "importance": record.importance,
        "created_at": to_jsonable_python(record.created_at),
        "age": record.age,
        "deleted": record.is_deleted,
    }
    if score is not None:
        out["score"] = round(score, 4)
    return out
