"""Seed 002's management tools, memory_list and memory_stats, and memory_why (insight's "why stored,
why recalled" for one memory).

They count and show only what the caller may read; memory-lancedb-pro's answered 0 while recall
worked (its #607), so they use the same scope rules as search.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from typing_extensions import TypedDict

from .._time import age_string
from ..engine import Memory
from ..models import EmbeddingFingerprint, JobStats
from ..scopes import Caller, read_scopes
from .base import OptionalStr, ToolArgs, ToolResult, tool
from .records import IdArgs
from .render import LINE_CHARS, MemoryEntry, entry, line, shown, untrusted


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


class WhyDetails(TypedDict):
    """Where a memory came from and how often searches found it (`mem.insight.why`)."""

    id: str
    origin: str
    explanation: str
    added_by: str | None
    changes: list[str]
    message_ids: list[str]
    recalls: int


@tool(
    label="Memory Why",
    details=WhyDetails,
    description="""Explain one long-term memory: where it came from (a capture rule, extraction from a conversation
    and the messages it came from, a file, a tool, an import), who stored it and when, its changes, and how often
    searches recalled it. Use it when the user asks why you know or believe something.""",
)
def memory_why(mem: Memory, caller: Caller, args: IdArgs) -> ToolResult:
    p = mem.insight.why(args.id, caller=caller)
    said = [shown(p.memory.content, LINE_CHARS)] + [f"{m.role}: {shown(m.content, LINE_CHARS)}" for m in p.messages]
    facts = [f"id {p.memory.id}", f"origin: {p.explanation}",
             f"stored {age_string(p.added_at or p.memory.created_at)}" + (f" by {p.added_by}" if p.added_by else ""),
             f"changes: {', '.join(h.action for h in p.history) or 'none'}", f"recalled {len(p.recalls)} times"]
    text = f"[{p.memory.category}] the memory, then what it came from:\n{untrusted(said)}\n\n({'; '.join(facts)})"
    return ToolResult(text, {"id": p.memory.id, "origin": p.origin, "explanation": p.explanation, "added_by": p.added_by,
                             "changes": [h.action for h in p.history], "message_ids": [m.id for m in p.messages],
                             "recalls": len(p.recalls)})


TOOLS = (memory_list, memory_stats, memory_why)
