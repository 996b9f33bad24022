"""Seed 001's tools: memory_search and memory_get, and the gated writes memory_write, memory_update,
memory_delete (soft, always reversible) and memory_undelete.

memory_search's result mirrors OpenClaw memory-core's `MemorySearchResult` (as ShadowDB's does),
so a runtime can show our hits where it shows its own: what was said in earlier conversations is
its `sessions` source, a memory or a file's chunk its `memory` source.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator
from typing_extensions import NotRequired, TypedDict

from ..engine import MAX_CONTENT_CHARS, Memory
from ..errors import ValidationError
from ..hooks.recall import label
from ..models import MemoryRecord
from ..scopes import Caller
from .base import Effects, OptionalFloat01, OptionalStr, OptionalStrList, ToolArgs, ToolResult, tool
from .render import LINE_CHARS, SNIPPET_CHARS, degraded, keywords_only, line, memory_path, shown, untrusted

PROVIDER = "clawrecall"


class SearchArgs(ToolArgs):
    query: str = Field(min_length=1, description="What to look for, in natural language or keywords.")
    maxResults: int = Field(8, ge=1, le=50, description="Most results to return.")
    minScore: OptionalFloat01 = Field(
        None, description="Drop results whose relevance score (an estimated probability, 0 to 1) is below this; "
        "by default the server's threshold applies.",
    )
    category: OptionalStr = Field(None, description="Only records of this category.")
    tags: OptionalStrList = Field(None, description="Only records with at least one of these tags.")
    asOf: OptionalStr = Field(None, description="An ISO date or time: search what was true then (default: now).")
    sources: Annotated[
        list[Literal["memory", "message", "chunk"]] | None,
        WithJsonSchema({"type": "array", "items": {"enum": ["memory", "message", "chunk"]}, "minItems": 1}),
    ] = Field(
        None, description="Only these: memory (stored memories), message (what was said in earlier conversations), "
        "chunk (ingested files). Default: all three, as the memories shown before a turn are found.",
    )
    secrets: bool = Field(
        False, description="Also your own secret records (credentials, health, money), found by their words: only "
        "when the request needs one, never to repeat it elsewhere.",
    )


class SearchResult(TypedDict):
    """OpenClaw memory-core's `MemorySearchResult` (hence `startLine`/`endLine`; `source` is `sessions` for what was
    said in a conversation), with our id, age, category, and `kind` and `label` as recalled lines name them."""

    id: str
    path: str
    startLine: int
    endLine: int
    score: float
    snippet: str
    source: Literal["memory", "sessions"]
    citation: str
    age: str
    category: str
    kind: Literal["memory", "message", "chunk"]
    label: str  # a memory's category, who said a message ("user said"), or "file"
    origin: NotRequired[dict[str, Any] | None]  # a message's or chunk's: its session, segment, file
    discussed: NotRequired[dict[str, Any]]  # a fact's occurrences: count, first_at, last_at


class SearchDetails(TypedDict):
    results: list[SearchResult]
    provider: str
    backend: str
    model: str
    citations: Literal["auto"]
    without_vectors: NotRequired[str]  # why the search could only match words (the embedding provider failed)


@tool(
    label="Memory Search",
    details=SearchDetails,
    description="""Search long-term memory by meaning, keywords and fuzzy spelling at once: stored memories, what was
    said in earlier conversations and ingested files. Returns ranked snippets, each with its id, path, score, age and
    source; read a whole record with memory_get. Use it before answering questions about prior work, decisions,
    dates, people, preferences or to-dos.""",
)
def memory_search(mem: Memory, caller: Caller, args: SearchArgs) -> ToolResult:
    # what recall searches, unless narrowed; the current conversation's messages are in the prompt already
    hits = mem.search(
        args.query, caller=caller, limit=args.maxResults, category=args.category, tags=args.tags, min_score=args.minScore,
        sources=args.sources, exclude_session=caller.session_id, message_roles=mem.config.retrieval.message_roles,
        as_of=args.asOf,  # type: ignore[arg-type]  # ISO text: the engine reads it as it reads every caller's time
        secrets=args.secrets,
    )
    provider, model, _ = mem.upkeep.configured_fingerprint()
    results: list[SearchResult] = []
    for h in hits:
        result: SearchResult = {
            "id": h.id, "path": memory_path(h.memory), "startLine": 1, "endLine": 1, "score": round(h.score, 4),
            "snippet": h.content[:SNIPPET_CHARS], "source": "sessions" if h.source == "message" else "memory",
            "citation": f"{PROVIDER}:memories#{h.id}", "age": h.age, "category": h.memory.category,
            "kind": h.source, "label": label(h),
        }
        if h.source != "memory":
            result["origin"] = h.origin
        if h.discussed is not None:
            result["discussed"] = h.discussed.model_dump(mode="json")
        results.append(result)
    text = (untrusted([line(n, h.memory, h.score, label=label(h), discussed=h.discussed) for n, h in enumerate(hits, 1)])
            if hits else "No relevant records.") + keywords_only(hits)
    details: SearchDetails = {
        "results": results, "provider": PROVIDER, "backend": mem.upkeep.backend, "model": f"{provider}/{model}",
        "citations": "auto", **degraded(hits),  # type: ignore[typeddict-item]
    }
    return ToolResult(text, details)


class IdArgs(ToolArgs):
    id: str = Field(
        min_length=1, description="The record's id, its first 8+ characters, or its path from memory_search."
    )

    @field_validator("id")
    @classmethod
    def _from_path(cls, value: str) -> str:
        """`clawrecall/<category>/<id>` names the same record as `<id>`."""
        return value.strip().rsplit("/", 1)[-1]


class GetDetails(TypedDict):
    memory: MemoryRecord
    path: str
    age: str


@tool(
    label="Memory Get",
    details=GetDetails,
    description="""Read one long-term memory record in full: its content, category, tags, scope, importance, age and
    whether it is deleted. Use it after memory_search when a snippet is not enough.""",
)
def memory_get(mem: Memory, caller: Caller, args: IdArgs) -> ToolResult:
    r = mem.get(args.id, caller=caller)
    facts = [f"id {r.id}", r.age, f"scope {r.scope}", f"importance {r.importance:g}"]
    if r.is_deleted:
        facts.append("deleted (memory_undelete restores it)")
    # the title and the tags are the writer's words too: inside the marked block, each one sanitised line
    said = [f"title: {shown(r.title, LINE_CHARS)}"] if r.title else []
    said += [f"tags: {shown(', '.join(r.tags), LINE_CHARS)}"] if r.tags else []
    text = f"[{r.category}]\n{untrusted([*said, shown(r.content, MAX_CONTENT_CHARS)])}\n\n({'; '.join(facts)})"
    return ToolResult(text, {"memory": r.model_dump(mode="json"), "path": memory_path(r), "age": r.age})


class WriteArgs(ToolArgs):
    content: str = Field(min_length=1, description="The knowledge to store, self-contained.")
    category: OptionalStr = Field(None, description="The record's category (default: other).")
    title: OptionalStr = Field(None, description="A short human-readable label.")
    tags: list[str] = Field(default_factory=list, description="Searchable tags.")
    importance: OptionalFloat01 = Field(None, description="How much it matters, 0 to 1 (default 0.7).")
    visibility: Literal["private", "shared", "secret"] | None = Field(
        None, description="private: only you; shared: every agent of this user (the master knowledge base); "
                          "secret: credentials, health, money (never shown to other agents, nor to you unless you ask). Default: your configured level.")


class Done(TypedDict):
    """A write's outcome: it names the record only, so repeating a call reports the same thing."""

    action: Literal["created", "updated", "deleted", "restored"]
    id: str
    path: str


@tool(
    label="Memory Write",
    details=Done,
    effects=Effects(writes=True, idempotent=False),  # never deduplicates: each call is a new record
    description="""Create a new long-term memory record; it is searchable at once. Write one self-contained piece of
    knowledge per record. To correct a record, use memory_update instead of writing a second one.""",
)
def memory_write(mem: Memory, caller: Caller, args: WriteArgs) -> ToolResult:
    result = mem.add(
        args.content, caller=caller, category=args.category,
        title=args.title, tags=args.tags, importance=args.importance, visibility=args.visibility,
        dedup=False,  # seed 001: no dedup on write
        source_type="tool", source_id="memory_write",
    )
    assert result.memory is not None
    return _done(result.memory, "created", f"Created {result.id[:8]} ({memory_path(result.memory)}).")


class UpdateArgs(IdArgs):
    content: OptionalStr = Field(None, description="New content; the record is re-embedded.")
    title: OptionalStr = Field(None, description="New title.")
    category: OptionalStr = Field(None, description="New category.")
    tags: OptionalStrList = Field(None, description="New tags; they replace the old ones.")
    importance: OptionalFloat01 = Field(None, description="New importance, 0 to 1.")
    visibility: Literal["private", "shared", "secret"] | None = Field(
        None, description="New visibility; you may make a record private or secret, never make a secret readable again.")


@tool(
    label="Memory Update",
    details=Done,
    effects=Effects(writes=True, destructive=True),  # replaces values (history keeps the old ones)
    description="""Change an existing long-term memory record. Only the fields you give change; everything else stays.
    New content is re-embedded, and the previous values are kept in the record's history. When the fact itself
    changed over time, use memory_supersede, which keeps the old fact as it was.""",
)
def memory_update(mem: Memory, caller: Caller, args: UpdateArgs) -> ToolResult:
    changes = args.model_dump(exclude={"id"}, exclude_none=True)
    if not changes:
        raise ValidationError("memory_update: nothing to update; give content, title, category, tags, importance or visibility")
    record = mem.update(args.id, caller=caller, **changes)
    return _done(record, "updated", f"Updated {record.id[:8]}.")


class SupersedeArgs(IdArgs):
    content: str = Field(min_length=1, description="The fact as it is now, self-contained; the record is re-embedded.")
    validFrom: OptionalStr = Field(None, description="An ISO date or time: since when the new fact is true (default: now).")


class Superseded(TypedDict):
    """A supersede's outcome: the new record, and the one it closed."""

    action: Literal["superseded"]
    id: str
    path: str
    supersedes: str


@tool(
    label="Memory Supersede",
    details=Superseded,
    effects=Effects(writes=True),  # adds a version; the old one stays, true until validFrom
    description="""Record that a fact changed (a new address, a new FTP, a moved deadline): the old record stays, true
    until validFrom and found by searches as of earlier dates, and a new record holds the fact as it is now. Use
    memory_update instead to fix how a record is written.""",
)
def memory_supersede(mem: Memory, caller: Caller, args: SupersedeArgs) -> ToolResult:
    record = mem.supersede(args.id, args.content, caller=caller, valid_from=args.validFrom)  # type: ignore[arg-type]
    assert record.supersedes is not None
    details: Superseded = {"action": "superseded", "id": record.id, "path": memory_path(record),
                           "supersedes": record.supersedes}
    return ToolResult(f"Superseded {record.supersedes[:8]} with {record.id[:8]}.", details)


@tool(
    label="Memory Delete",
    details=Done,
    effects=Effects(writes=True, destructive=True),  # hides the record; it is purged once the retention ends
    description="""Soft-delete a long-term memory record: it disappears from search at once but can be restored with
    memory_undelete until the retention period ends. Use it for records that are wrong or obsolete; write the
    correct version with memory_write.""",
)
def memory_delete(mem: Memory, caller: Caller, args: IdArgs) -> ToolResult:
    record = mem.delete(args.id, caller=caller)
    days = mem.config.writes.retention_days
    return _done(record, "deleted", f"Deleted {record.id[:8]}; memory_undelete restores it within {days:g} days.")


@tool(
    label="Memory Undelete",
    details=Done,
    effects=Effects(writes=True),  # brings back, loses nothing
    description="Restore a long-term memory record deleted with memory_delete; it becomes searchable again.",
)
def memory_undelete(mem: Memory, caller: Caller, args: IdArgs) -> ToolResult:
    record = mem.undelete(args.id, caller=caller)
    return _done(record, "restored", f"Restored {record.id[:8]}.")


def _done(record: MemoryRecord, action: Literal["created", "updated", "deleted", "restored"], text: str) -> ToolResult:
    details: Done = {"action": action, "id": record.id, "path": memory_path(record)}
    return ToolResult(text, details)


TOOLS = (memory_search, memory_get, memory_write, memory_update, memory_supersede, memory_delete, memory_undelete)
