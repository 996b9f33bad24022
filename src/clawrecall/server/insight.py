"""REST `/v1/insight`: the search log's reports, a memory's recalls and origin, coverage, groups of
near-identical memories and the clean-up report (`mem.insight`), in the scopes the caller reads
(docs/insight.md)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from ..engine import Memory
from ..errors import AmbiguousIdError, NotFoundError, ScopeError, ValidationError, WritesDisabledError
from ..models import CleanupReport, Cluster, Coverage, LoggedSearch, MemoryRecord, Provenance, QueryCount, Recall, RecallCount
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/insight", tags=["insight"])
READ = errors(ValidationError, ScopeError)
ONE = errors(ValidationError, ScopeError, NotFoundError, AmbiguousIdError)


class Searches(BaseModel):
    searches: list[LoggedSearch]


class Queries(BaseModel):
    queries: list[QueryCount]


class Recalled(BaseModel):
    recalled: list[RecallCount]


class Memories(BaseModel):
    memories: list[MemoryRecord]


class Recalls(BaseModel):
    recalls: list[Recall]


@router.get("/searches", responses=READ)
def searches(
    scope: list[str] | None = Query(None), since: datetime | None = None, limit: int = Query(100, ge=1, le=10_000),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Searches:
    """The latest logged searches the caller may read (its own; the administrator's: all), newest first."""
    return Searches(searches=mem.insight.searches(caller=ctx, scope=scope, since=since, limit=limit))


@router.get("/popular", responses=READ)
def popular(
    scope: list[str] | None = Query(None), since: datetime | None = None, limit: int = Query(20, ge=1, le=10_000),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Queries:
    """The queries asked most, most first."""
    return Queries(queries=mem.insight.popular(caller=ctx, scope=scope, since=since, limit=limit))


@router.get("/unanswered", responses=READ)
def unanswered(
    scope: list[str] | None = Query(None), since: datetime | None = None, limit: int = Query(20, ge=1, le=10_000),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Queries:
    """The queries that found nothing, most asked first."""
    return Queries(queries=mem.insight.unanswered(caller=ctx, scope=scope, since=since, limit=limit))


@router.get("/recalled", responses=READ)
def recalled(
    scope: list[str] | None = Query(None), since: datetime | None = None, limit: int = Query(20, ge=1, le=10_000),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Recalled:
    """The memories the caller's searches found most, most first."""
    return Recalled(recalled=mem.insight.recalled(caller=ctx, scope=scope, since=since, limit=limit))


@router.get("/never-recalled", responses=READ)
def never_recalled(
    scope: list[str] | None = Query(None), days: float = Query(30, gt=0, le=36_500),
    limit: int = Query(100, ge=1, le=10_000), mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Memories:
    """Memories older than `days` that no search found in the last `days`, oldest first."""
    return Memories(memories=mem.insight.never_recalled(caller=ctx, scope=scope, days=days, limit=limit))


@router.get("/memories/{memory_id}/recalls", responses=ONE)
def recalls(memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Recalls:
    """Each time a search found the memory, newest first (the query only of searches the caller may read)."""
    return Recalls(recalls=mem.insight.recalls(memory_id, caller=ctx))


@router.get("/memories/{memory_id}/why", responses=ONE)
def why(memory_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Provenance:
    """Why the memory is stored (its origin, the messages, segment, job or file it came from, its history) and
    why it was recalled (every logged search that found it)."""
    return mem.insight.why(memory_id, caller=ctx)


class Coverages(BaseModel):
    coverage: list[Coverage]


@router.get("/coverage", responses=READ)
def coverage(scope: list[str] | None = Query(None), mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Coverages:
    """Embedding coverage per kind of row: rows, embedded, waiting for the backfill, made by another model."""
    return Coverages(coverage=mem.insight.coverage(caller=ctx, scope=scope))


class Clusters(BaseModel):
    clusters: list[Cluster]


@router.get("/clusters", responses=READ)
def clusters(
    scope: list[str] | None = Query(None), threshold: float = Query(0.8, ge=0.5, le=1),
    limit: int = Query(20, ge=1, le=10_000), mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Clusters:
    """Groups of memories that say nearly the same thing (cosine ≥ `threshold`), per scope, largest first,
    each with the suggested one to keep."""
    return Clusters(clusters=mem.insight.clusters(caller=ctx, scope=scope, threshold=threshold, limit=limit))


@router.get("/cleanup", responses=READ)
def cleanup(
    scope: list[str] | None = Query(None), days: float = Query(90, gt=0, le=36_500),
    duplicate_threshold: float = Query(0.95, ge=0.5, le=1), limit: int = Query(1_000, ge=1, le=100_000),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> CleanupReport:
    """Low-quality memories (noise, near-empty, placeholders, questions, near-copies, never recalled), oldest
    first, each with its reasons. Nothing changes: POST the ids a person confirmed to delete them."""
    return mem.insight.cleanup(caller=ctx, scope=scope, days=days, duplicate_threshold=duplicate_threshold, limit=limit)


class CleanupIds(BaseModel):
    ids: list[str]


@router.post("/cleanup", responses={**ONE, **errors(WritesDisabledError)})
def confirm_cleanup(body: CleanupIds, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Memories:
    """Soft-delete the memories a person confirmed from the report (restorable until purged); each must be
    one the caller may delete."""
    return Memories(memories=mem.insight.confirm_cleanup(body.ids, caller=ctx))
