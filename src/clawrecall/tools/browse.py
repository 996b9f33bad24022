"""Seed 002's management tools: memory_list and memory_stats.

Both count only what the caller may read; memory-lancedb-pro's answered 0 while recall worked
(its #607), so they use the same scope rules as search.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from typing_extensions import TypedDict

from ..engine import Memory
from ..models import EmbeddingFingerprint, JobStats
from ..scopes import Caller, read_scopes
from .base import OptionalStr, ToolArgs, ToolResult, tool
from .render import MemoryEntry, entry, line, untrusted


class ListArgs(ToolArgs):
    limit: int = Field(20, ge=1, le=100, description="Most memories to return.")
    offset: int = Field(0, ge=0, description="How many to skip, for paging.")
    category: OptionalStr = Field(None, description="Only memories of this category.")
    scope: OptionalStr = Field(None, description="Only this scope, e.g. 'global' or 'project:atlas'.")
    includeDeleted: bool = Field(False, description="Also list soft-deleted memories.")


class ListDetails(TypedDict):
    count: int
    total: int
    offset: int
    memories: list[MemoryEntry]


@tool(
    label="Memory List",
    details=ListDetails,
    description="""List stored memories, newest first, without searching; page with offset. Use it to browse or audit
    what is remembered, or to find a deleted memory to restore.""",
)
def memory_list(mem: Memory, caller: Caller, args: ListArgs) -> ToolResult:
    filters: dict[str, Any] = {
        "caller": caller, "scope": args.scope, "category": args.category, "include_deleted": args.includeDeleted,
    }
    records = mem.list(**filters, limit=args.limit, offset=args.offset)
    total = mem.count(**filters)
    details: ListDetails = {
        "count": len(records), "total": total, "offset": args.offset, "memories": [entry(r) for r in records]
    }
    if not records:
        return ToolResult(f"No memories to show ({total} in all).", details)
    first = args.offset + 1
    text = f"Memories {first}–{args.offset + len(records)} of {total}:\n\n" + untrusted(
        [line(n, r) for n, r in enumerate(records, first)]
    )
    return ToolResult(text, details)


class StatsArgs(ToolArgs):
    pass


class StatsDetails(TypedDict):
    """Counts of what the caller may read; `active` and `deleted` as in `Memory.stats()`."""

    active: int
    deleted: int
    by_category: dict[str, int]
    by_scope: dict[str, int]
    embedding: EmbeddingFingerprint | None
    backend: str
    jobs: JobStats


@tool(
    label="Memory Stats",
    details=StatsDetails,
    description="""Count the long-term memories you can see: active and deleted, by category and by scope, and name
    the embedding model and storage backend in use; background jobs (fact extraction) per state, with their tokens.""",
)
def memory_stats(mem: Memory, caller: Caller, args: StatsArgs) -> ToolResult:
    scopes = read_scopes(caller, None, access=mem.config.access)
    active = mem.count(caller=caller, scope=scopes)
    deleted = mem.count(caller=caller, scope=scopes, include_deleted=True) - active
    by_category = {c: n for c in mem.config.categories if (n := mem.count(caller=caller, scope=scopes, category=c))}
    if scopes is None:  # the administrator sees every scope, including ones it could not name
        by_scope = mem.stats().by_scope
    else:
        by_scope = {s: n for s in scopes if (n := mem.count(caller=caller, scope=s))}
    fingerprint = mem.upkeep.stored_fingerprint()
    details = {
        "active": active, "deleted": deleted, "by_category": by_category, "by_scope": by_scope,
        "embedding": fingerprint.model_dump() if fingerprint else None, "backend": mem.upkeep.backend,
        "jobs": mem.jobs.stats(caller=caller).model_dump(mode="json"),
    }
    counts = ", ".join(f"{name} {n}" for name, n in sorted(by_category.items(), key=lambda kv: (-kv[1], kv[0])))
    text = f"{active} memories ({deleted} deleted)" + (f": {counts}" if counts else "") + (
        f"\nEmbedding model: {fingerprint}" if fingerprint else ""
    )
    return ToolResult(text, details)


TOOLS = (memory_list, memory_stats)
