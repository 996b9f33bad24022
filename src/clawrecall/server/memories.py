"""REST `/v1`: memories CRUD, history, search, context and stats.

Like the CLI, a thin door over `Memory`: identity comes from the caller the authentication
middleware established, never from the body, and a bound token's scopes apply through the same
`Caller` rules the tools use. `/v1/context` and `/v1/stats` answer with the `details` of the
search_context and memory_stats tools.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from .._time import parse_when
from ..engine import Memory
from ..models import Visibility
from ..scopes import Caller
from ..tools import browse, recall
from .deps import caller, memory

def _true_or_false(value: Any) -> Any:
    """A query string's boolean is `true` or `false`: `yes`, `1` or `on` are refused, as JSON bodies refuse them,
    since a mistyped flag (`hard=yse`) must not be read as a guess."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


QueryBool = Annotated[bool, BeforeValidator(_true_or_false)]

router = APIRouter(prefix="/v1")
Order = Literal["newest", "oldest", "updated"]


class _Body(BaseModel):
    """Checked, never coerced, as the engine checks: `true` or `"0.5"` is no importance, an unknown field an error."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _iso_time(value: Any) -> Any:
    """JSON has no time: it is ISO-8601 text, read as the engine reads it (never a number of seconds)."""
    return parse_when(value) if isinstance(value, str) else value


# Strict validation wants Python objects, which a JSON body has not for these two: they take text.
When = Annotated[datetime, BeforeValidator(_iso_time)]
VisibilityName = Annotated[Visibility, Strict(False)]


class MemoryIn(_Body):
    content: str = Field(min_length=1)
    title: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(None, ge=0, le=1)
    confidence: float | None = Field(None, ge=0, le=1)
    scope: str | None = Field(None, description="Default: user:<caller>, else agent:<caller>, else global.")
    visibility: VisibilityName | None = None
    source_type: str | None = None
    source_id: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: When | None = Field(None, description="When it was said (default: now), e.g. for an import.")
    expires_at: When | None = None
    valid_from: When | None = Field(None, description="Since when it is true, if the source says (default: created_at).")
    dedup: bool | None = Field(None, description="Skip a near-duplicate in the same scope (default: config).")


class MemoryPatch(_Body):
    content: str | None = Field(None, min_length=1)
    title: str | None = None
    category: str | None = None
    tags: list[str] | None = None
    importance: float | None = Field(None, ge=0, le=1)
    confidence: float | None = Field(None, ge=0, le=1)
    visibility: VisibilityName | None = None
    metadata: dict[str, Any] | None = None
    expires_at: When | None = None


class SupersedeIn(MemoryPatch):
    content: str = Field(min_length=1)
    valid_from: When | None = Field(None, description="When the change became true (default: now).")


class SearchIn(_Body):
    query: str = Field(min_length=1)
    limit: int = Field(10, ge=1, le=100)
    category: list[str] | None = None
    tags: list[str] | None = None
    scope: list[str] | None = None
    session: str | None = Field(None, description="Only memories from this session.")
    since: When | None = None
    until: When | None = None
    include_deleted: bool = False
    mode: Literal["hybrid", "vector", "bm25", "trigram"] = "hybrid"
    min_score: float | None = Field(
        None, ge=0, le=1, description="Leave out hits whose relevance score (an estimated probability) is below this; "
        "default: the server's `retrieval.min_score`.",
    )
    explain: bool = False
    sources: list[Literal["memory", "message", "chunk"]] | None = Field(
        None, description="What to search: memories (the default), conversation messages, file chunks."
    )
    as_of: When | None = Field(None, description="Search what was true at this time (default: what is true now).")


@router.post(
    "/memories", status_code=201, tags=["memories"], responses={200: {"description": "A near-duplicate exists"}}
)
def add_memory(
    body: MemoryIn, response: Response, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> dict[str, Any]:
    """Store a memory; a near-duplicate in its scope is reported (200, `action: duplicate`) and not stored."""
    fields = body.model_dump(exclude={"content", "scope", "dedup"}, exclude_none=True)
    result = mem.add(
        body.content, **fields, caller=ctx, scope=body.scope, dedup=body.dedup,
    )
    if result.action == "duplicate":
        response.status_code = 200
    return result.model_dump(mode="json")


@router.get("/memories", tags=["memories"])
def list_memories(
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    category: list[str] | None = Query(None),
    tag: list[str] | None = Query(None),
    scope: list[str] | None = Query(None),
    session: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_deleted: QueryBool = False,
    only_deleted: QueryBool = False,
    order: Order = "newest",
    as_of: datetime | None = Query(None, description="What was true at this time (default: what is true now)."),
    include_superseded: QueryBool = Query(False, description="Include the versions others superseded."),
    mem: Memory = Depends(memory),
    ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """Memories newest first (or oldest, or last updated), without searching."""
    records = mem.list(
        caller=ctx, scope=scope, category=category, tags=tag, session_id=session, since=since,
        until=until, include_deleted=include_deleted, only_deleted=only_deleted, limit=limit, offset=offset,
        order=order, as_of=as_of, include_superseded=include_superseded,
    )
    return {"memories": [r.model_dump(mode="json") for r in records], "count": len(records), "offset": offset}


@router.get("/memories/{memory_id}", tags=["memories"])
def get_memory(memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """One memory by id or unique prefix (8+ characters), deleted ones included."""
    return mem.get(memory_id, caller=ctx).model_dump(mode="json")


@router.patch("/memories/{memory_id}", tags=["memories"])
def update_memory(
    memory_id: str, body: MemoryPatch, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> dict[str, Any]:
    """Change the given fields; new content is re-embedded and history keeps the old values."""
    return mem.update(memory_id, caller=ctx, **body.model_dump(exclude_none=True)).model_dump(mode="json")


@router.delete("/memories/{memory_id}", tags=["memories"])
def delete_memory(
    memory_id: str,
    hard: QueryBool = Query(False, description="Erase for good (GDPR forget) instead of a reversible soft delete."),
    mem: Memory = Depends(memory),
    ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    if hard:
        return {"forgotten": mem.forget(memory_id, caller=ctx)}
    return mem.delete(memory_id, caller=ctx).model_dump(mode="json")


@router.post("/memories/{memory_id}/undelete", tags=["memories"])
def undelete_memory(
    memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> dict[str, Any]:
    return mem.undelete(memory_id, caller=ctx).model_dump(mode="json")


@router.post("/memories/{memory_id}/supersede", status_code=201, tags=["memories"])
def supersede_memory(
    memory_id: str, body: SupersedeIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> dict[str, Any]:
    """A fact changed: store the new memory, which replaces this one from `valid_from` on. The old one is kept
    (`superseded_by`, `valid_to`) and found with `as_of` an earlier time."""
    fields = body.model_dump(exclude={"content"}, exclude_none=True)
    return mem.supersede(memory_id, body.content, caller=ctx, **fields).model_dump(mode="json")


@router.get("/memories/{memory_id}/versions", tags=["memories"])
def memory_versions(memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """Every version of a fact, the first first."""
    return {"versions": [r.model_dump(mode="json") for r in mem.versions(memory_id, caller=ctx)]}


@router.get("/memories/{memory_id}/history", tags=["memories"])
def memory_history(memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """Every change, oldest first. A forgotten memory's history (who erased it, when) is shown to the administrator."""
    return {"history": [e.model_dump(mode="json") for e in mem.history(memory_id, caller=ctx)]}


@router.post("/search", tags=["search"])
def search(body: SearchIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """Hybrid search (vector, BM25, trigram) in the scopes the caller may read."""
    hits = mem.search(
        body.query, caller=ctx, scope=body.scope, limit=body.limit, category=body.category,
        tags=body.tags, session_id=body.session, since=body.since, until=body.until,
        include_deleted=body.include_deleted, mode=body.mode, explain=body.explain, min_score=body.min_score,
        sources=body.sources, as_of=body.as_of,
    )
    return {"results": [h.model_dump(mode="json") for h in hits]}


@router.post("/context", tags=["search"])
def context(
    body: recall.ContextArgs, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> dict[str, Any]:
    """Seed 000's search_context: the most relevant items of everything stored, with source and similarity."""
    return recall.search_context.invoke(mem, ctx, body.model_dump()).details


@router.get("/stats", tags=["search"])
def stats(mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """Counts of what the caller may read (memory_stats' details)."""
    return browse.memory_stats.invoke(mem, ctx, {}).details
