"""REST `/v1`: memories CRUD, history, search, context and stats.

Like the CLI, a thin door over `Memory`: identity comes from the caller the authentication
middleware established, never from the body, and a bound token's scopes apply through the same
`Caller` rules the tools use. `/v1/context` and `/v1/stats` answer with the `details` of the
search_context and memory_stats tools.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from .._time import parse_when
from ..engine import Memory, is_id_or_prefix
from ..errors import (
    AmbiguousIdError,
    EmbeddingError,
    EmbeddingMismatchError,
    NotFoundError,
    ScopeError,
    ValidationError,
    WritesDisabledError,
)
from ..models import AddResult, HistoryEntry, ListOrder, MemoryRecord, SearchHit, SearchMode, Visibility
from ..scopes import Caller
from ..tools import browse, recall
from .deps import caller, memory
from .openapi import errors

def _true_or_false(value: Any) -> Any:
    """A query string's boolean is `true` or `false`: `yes`, `1` or `on` are refused, as JSON bodies refuse them,
    since a mistyped flag (`hard=yse`) must not be read as a guess."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


QueryBool = Annotated[bool, BeforeValidator(_true_or_false)]

router = APIRouter(prefix="/v1")

# The errors of each kind of work (the door's own are added to every route by openapi.py).
READ = errors(ValidationError, ScopeError)
FIND = errors(NotFoundError, AmbiguousIdError)
WRITE = errors(ValidationError, ScopeError, WritesDisabledError, EmbeddingError, EmbeddingMismatchError)
SEARCH = errors(ValidationError, ScopeError, EmbeddingError, EmbeddingMismatchError)


def memory_id(
    memory_id: str = Path(description="The memory's id, or 8+ of its leading hex characters."),
) -> str:
    """A path that cannot name a memory is 404, as for any URL that names nothing (the engine's `invalid_input`
    is for an argument)."""
    if not is_id_or_prefix(memory_id):
        raise NotFoundError(f"no memory with id {memory_id!r}: an id is a UUID or 8+ of its leading hex characters")
    return memory_id


MemoryId = Annotated[str, Depends(memory_id)]


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
    mode: SearchMode = "hybrid"
    min_score: float | None = Field(
        None, ge=0, le=1, description="Leave out hits whose relevance score (an estimated probability) is below this; "
        "default: the server's `retrieval.min_score`.",
    )
    explain: bool = False
    sources: list[Literal["memory", "message", "chunk"]] | None = Field(
        None, description="Only these: memories, conversation messages (every role), file chunks. Default: "
        "`retrieval.sources` (all three, messages of users and assistants), or memories with a category or tags filter."
    )
    as_of: When | None = Field(None, description="Search what was true at this time (default: what is true now).")
    secrets: bool = Field(False, description="Also the caller's own secret memories, found by their words (docs/agents.md).")


class MemoryList(BaseModel):
    memories: list[MemoryRecord]
    count: int = Field(description="How many memories this page holds.")
    offset: int


class Forgotten(BaseModel):
    forgotten: str = Field(description="The id of the memory erased for good.")


class History(BaseModel):
    history: list[HistoryEntry]


class SearchResults(BaseModel):
    results: list[SearchHit]
    without_vectors: str | None = Field(
        None, description="Why the search ran on its keyword legs only (the embedding provider failed); its "
        "scores are then ranking scores, not calibrated relevance. null when the search ran whole.")


@router.post(
    "/memories", status_code=201, tags=["memories"],
    responses={200: {"model": AddResult, "description": "A near-duplicate exists: nothing stored."}, **WRITE},
)
def add_memory(
    body: MemoryIn, response: Response, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> AddResult:
    """Store a memory; a near-duplicate in its scope is reported (200, `action: duplicate`) and not stored."""
    fields = body.model_dump(exclude={"content", "scope", "dedup"}, exclude_none=True)
    result = mem.add(
        body.content, **fields, caller=ctx, scope=body.scope, dedup=body.dedup,
    )
    if result.action == "duplicate":
        response.status_code = 200
    return result


@router.get("/memories", tags=["memories"], responses=READ)
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
    order: ListOrder = "newest",
    as_of: datetime | None = Query(None, description="What was true at this time (default: what is true now)."),
    include_superseded: QueryBool = Query(False, description="Include the versions others superseded."),
    user: str | None = Query(None, description="Only this user's rows."),
    agent: str | None = Query(None, description="Only the rows this agent wrote."),
    visibility: str | None = Query(None, description="Only the rows at this level: private, shared or secret."),
    source: str | None = Query(None, description="Only this kind of row: memory, fact (a memory the extraction "
                               "made from a conversation), message or chunk."),
    mem: Memory = Depends(memory),
    ctx: Caller = Depends(caller),
) -> MemoryList:
    """Memories newest first (or oldest, last updated, most important, most found by logged searches), without searching."""
    records = mem.list(
        caller=ctx, scope=scope, category=category, tags=tag, session_id=session, since=since,
        until=until, include_deleted=include_deleted, only_deleted=only_deleted, limit=limit, offset=offset,
        order=order, as_of=as_of, include_superseded=include_superseded, user=user, agent=agent,
        visibility=visibility, source=source,
    )
    return MemoryList(memories=records, count=len(records), offset=offset)


@router.get("/memories/{memory_id}", tags=["memories"], responses=FIND)
def get_memory(memory_id: MemoryId, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> MemoryRecord:
    """One memory by id or unique prefix (8+ characters), deleted ones included."""
    return mem.get(memory_id, caller=ctx)


@router.patch("/memories/{memory_id}", tags=["memories"], responses={**FIND, **WRITE})
def update_memory(
    memory_id: MemoryId, body: MemoryPatch, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> MemoryRecord:
    """Change the given fields; new content is re-embedded and history keeps the old values."""
    return mem.update(memory_id, caller=ctx, **body.model_dump(exclude_none=True))


@router.delete("/memories/{memory_id}", tags=["memories"], responses={**FIND, **WRITE})
def delete_memory(
    memory_id: MemoryId,
    hard: QueryBool = Query(False, description="Erase for good (GDPR forget) instead of a reversible soft delete."),
    mem: Memory = Depends(memory),
    ctx: Caller = Depends(caller),
) -> MemoryRecord | Forgotten:
    """Soft-delete (the memory, now deleted), or with `hard=true` erase for good (`{forgotten: id}`)."""
    if hard:
        return Forgotten(forgotten=mem.forget(memory_id, caller=ctx))
    return mem.delete(memory_id, caller=ctx)


@router.post("/memories/{memory_id}/undelete", tags=["memories"], responses={**FIND, **WRITE})
def undelete_memory(memory_id: MemoryId, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> MemoryRecord:
    """Restore a soft-deleted memory."""
    return mem.undelete(memory_id, caller=ctx)


class Versions(BaseModel):
    versions: list[MemoryRecord]


@router.post("/memories/{memory_id}/supersede", status_code=201, tags=["memories"], responses={**FIND, **WRITE})
def supersede_memory(
    memory_id: MemoryId, body: SupersedeIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> MemoryRecord:
    """A fact changed: store the new memory, which replaces this one from `valid_from` on. The old one is kept
    (`superseded_by`, `valid_to`) and found with `as_of` an earlier time."""
    fields = body.model_dump(exclude={"content"}, exclude_none=True)
    return mem.supersede(memory_id, body.content, caller=ctx, **fields)


@router.get("/memories/{memory_id}/versions", tags=["memories"], responses=FIND)
def memory_versions(memory_id: MemoryId, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Versions:
    """Every version of a fact, the first first."""
    return Versions(versions=mem.versions(memory_id, caller=ctx))


@router.get("/memories/{memory_id}/history", tags=["memories"], responses=FIND)
def memory_history(memory_id: MemoryId, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> History:
    """Every change, oldest first. A forgotten memory's history (who erased it, when) is shown to the administrator."""
    return History(history=mem.history(memory_id, caller=ctx))


@router.post("/search", tags=["search"], responses=SEARCH)
def search_memories(body: SearchIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> SearchResults:
    """Hybrid search (vector, BM25, trigram) in the scopes the caller may read."""
    hits = mem.search(
        body.query, caller=ctx, scope=body.scope, limit=body.limit, category=body.category,
        tags=body.tags, session_id=body.session, since=body.since, until=body.until,
        include_deleted=body.include_deleted, mode=body.mode, explain=body.explain, min_score=body.min_score,
        sources=body.sources, as_of=body.as_of, secrets=body.secrets,
    )
    return SearchResults(results=hits, without_vectors=hits.without_vectors)


@router.post("/context", tags=["search"], responses=SEARCH)
def context(
    body: recall.ContextArgs, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)
) -> recall.ContextDetails:
    """openclaw-memory-pgvector's search_context: the most relevant items of everything stored, with source and
    similarity (the search_context tool's details)."""
    return recall.search_context.invoke(mem, ctx, body.model_dump()).details  # type: ignore[return-value]


@router.get("/stats", tags=["search"])
def stats(mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> browse.StatsDetails:
    """Counts of what the caller may read (the memory_stats tool's details)."""
    return browse.memory_stats.invoke(mem, ctx, {}).details  # type: ignore[return-value]
