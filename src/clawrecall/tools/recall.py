"""Seed 000's tools: memory_recall, memory_store, memory_forget, search_context."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, model_validator
from typing_extensions import NotRequired, TypedDict

from ..engine import Memory
from ..errors import NotFoundError
from ..hooks.recall import evidence, label, select_lines, via
from ..models import KINDS, SearchHit, SearchHits
from ..scopes import Caller
from .base import Effects, OptionalStr, ToolArgs, ToolResult, tool
from .render import LINE_CHARS, MemoryEntry, degraded, entry, keywords_only, line, memory_path, plural, shown, untrusted

# memory_forget erases on its own only when one hit clearly is the memory meant: its absolute score
# is high (≥ 0.875: a cosine of 0.7 to the query for all-MiniLM-L6-v2, under each model's own
# calibration) and the runner-up's ranking score is at most half its own. "Clearly ahead of the
# runner-up" compares two hits of one query, which is what the ranking score is for. The absolute
# score also decides which hits are candidates at all (≥ 0.26: MiniLM's cosine 0.3, below which it
# puts unrelated text). Raw cosines would not do: multilingual-e5-small puts unrelated text near
# 0.72. A store whose model has no calibration (its hits carry no `similarity`) never erases by
# query: it lists candidates.
FORGET_MIN_RELEVANCE = 0.875
FORGET_MAX_RUNNER_UP = 0.5
FORGET_CANDIDATE_RELEVANCE = 0.26
FORGET_CANDIDATES = 5


class RecallArgs(ToolArgs):
    query: str = Field(min_length=1, description="What to look for, in natural language.")
    limit: int = Field(5, ge=1, le=50, description="Most memories to return.")
    type: OptionalStr = Field(None, description="Only memories of this category.")
    as_of: OptionalStr = Field(None, description="An ISO date or time: recall what was true then (default: now).")


class RecalledEntry(MemoryEntry):
    """A memory, or an earlier session's message or a file's chunk, with where it came from."""

    source: NotRequired[Literal["message", "chunk"]]
    origin: NotRequired[dict[str, Any] | None]
    discussed: NotRequired[dict[str, Any]]  # a fact's occurrences: count, first_at, last_at


class RecallDetails(TypedDict):
    count: int
    memories: list[RecalledEntry]
    without_vectors: NotRequired[str]  # why the search could only match words (the embedding provider failed)


@tool(
    label="Memory Recall",
    details=RecallDetails,
    description="""Search long-term memory for what is known about the user, their preferences, past decisions and
    earlier conversations. Use it before answering anything that depends on earlier sessions. Each memory comes with
    a relevance score (an estimated probability, 0 to 1, that it is about the question) and its age; old memories may
    be out of date. When nothing stored is relevant, it says so.""",
)
def memory_recall(mem: Memory, caller: Caller, args: RecallArgs) -> ToolResult:
    hits = _recalled(mem, caller, args)
    if not hits:
        return ToolResult("No relevant memories." + keywords_only(hits), {"count": 0, "memories": [], **degraded(hits)})
    text = f"Found {plural(len(hits), 'memory', 'memories')}:\n\n" + untrusted(
        [line(n, h.memory, h.score, label=None if h.source == "memory" else label(h), discussed=h.discussed,
              via=via(h.memory, caller)) for n, h in enumerate(hits, 1)]
    ) + keywords_only(hits)
    return ToolResult(text, {"count": len(hits), "memories": [_entry(h) for h in hits], **degraded(hits)})


def _recalled(mem: Memory, caller: Caller, args: RecallArgs) -> SearchHits:
    """What recall draws on (memories, earlier sessions' messages, files), as the recall hook does (a category
    is a memory's, and narrows the search to memories). First the lines the hook's block would show for the
    same query (`select_lines`: by their own score, which can rank a line above hits a session neighbour
    lends a better one), so the tool never misses what recall put before the prompt; then the rest, those
    sharing a word with the query first: in a language the embedding model does not read, it ranks lines it
    calls alike at random. The others follow, for the agent to judge."""
    evident = evidence(args.query, mem.upkeep.embedder, mem.config.hooks.recall.min_known_words)

    def search(limit: int) -> SearchHits:
        return mem.search(args.query, caller=caller, limit=limit, category=args.type,
                          sources=None if args.type is not None else mem.config.hooks.recall.sources,
                          exclude_session=caller.session_id, message_roles=mem.config.retrieval.message_roles,
                          as_of=args.as_of, explain=True)  # type: ignore[arg-type]  # ISO text, read by the engine

    width = max(args.limit, mem.config.hooks.recall.max_items * 2)  # at least the hook's own search width
    found = search(width)
    if (wider := max(width, min(args.limit * 3, 100))) > width and not all(evident(h.content) for h in found[: args.limit]):
        found = search(wider)
    shown, _ = select_lines(mem, found, caller, evident)
    first = {h.id for h in shown}
    rest = sorted((h for h in found if h.id not in first), key=lambda h: not evident(h.content))  # stable
    hits = SearchHits([*shown, *rest][: args.limit])
    hits.without_vectors = found.without_vectors
    return hits


def _entry(hit: SearchHit) -> RecalledEntry:
    """A hit's entry, with its source and, for a message or file chunk, where it came from."""
    out: RecalledEntry = {**entry(hit.memory, hit.score)}
    if hit.source != "memory":
        out["source"] = hit.source
        out["origin"] = hit.origin
    if hit.discussed is not None:
        out["discussed"] = hit.discussed.model_dump(mode="json")
    return out


class StoreArgs(ToolArgs):
    content: str = Field(
        min_length=1,
        description="One self-contained statement to remember, e.g. 'The user prefers dark mode in every editor'.",
    )
    importance: float = Field(0.7, ge=0, le=1, description="How much it matters, 0 to 1.")
    type: str = Field("other", description="The memory's category.")


class Stored(TypedDict):
    action: Literal["created"]
    id: str
    path: str


class Duplicate(TypedDict):
    """Nothing stored: `existing_id` already says it (`similarity`: the two texts' cosine)."""

    action: Literal["duplicate"]
    existing_id: str
    similarity: float | None


@tool(
    label="Memory Store",
    details=Union[Stored, Duplicate],
    # only adds; the same content again is a duplicate, stored once, while the store deduplicates
    effects=Effects(writes=True, idempotent=lambda config: config.dedup.enabled),
    description="""Save one durable piece of information (a preference, fact, decision, person or to-do) in long-term
    memory so that later conversations can recall it. Store a short, self-contained statement, not a transcript. If a
    nearly identical memory already exists nothing is stored and the existing one is returned.""",
)
def memory_store(mem: Memory, caller: Caller, args: StoreArgs) -> ToolResult:
    result = mem.add(
        args.content, caller=caller, category=args.type,
        importance=args.importance, source_type="tool", source_id="memory_store",
    )
    if result.action == "duplicate":
        existing = mem.get(result.id, caller=caller)
        return ToolResult(
            f"Similar memory already exists (id {existing.id[:8]}):\n{untrusted([shown(existing.content, LINE_CHARS)])}",
            {"action": "duplicate", "existing_id": existing.id, "similarity": result.similarity},
        )
    assert result.memory is not None
    return ToolResult(
        f'Stored: "{shown(result.memory.content, LINE_CHARS)}" (id {result.id[:8]})',
        {"action": "created", "id": result.id, "path": memory_path(result.memory)},
    )


class ForgetArgs(ToolArgs):
    query: OptionalStr = Field(None, description="Words to find the memory to erase.")
    memoryId: OptionalStr = Field(
        None, description="The id (or its first 8+ characters) of the memory to erase; wins over query."
    )

    @model_validator(mode="after")
    def _one_given(self) -> "ForgetArgs":
        if not (self.query or "").strip() and not (self.memoryId or "").strip():
            raise ValueError("give query or memoryId")
        return self


class Forgot(TypedDict):
    action: Literal["deleted"]
    id: str


class NothingFound(TypedDict):
    action: Literal["not_found"]
    found: Literal[0]


class Candidates(TypedDict):
    """No clear match: nothing erased; call again with one of these as memoryId."""

    action: Literal["candidates"]
    found: int
    candidates: list[MemoryEntry]


@tool(
    label="Memory Forget",
    details=Union[Forgot, NothingFound, Candidates],
    # by query, a second call may erase the next clear match
    effects=Effects(writes=True, destructive=True, idempotent=False),
    description="""Erase a memory for good (GDPR): its content, its vector and the old values its history kept
    are gone and cannot be restored. Give memoryId to erase that memory, or query to find it: when exactly one memory clearly matches it is erased,
    otherwise the candidates are listed and nothing is erased; call again with the chosen memoryId.""",
)
def memory_forget(mem: Memory, caller: Caller, args: ForgetArgs) -> ToolResult:
    if args.memoryId is not None and args.memoryId.strip():
        try:  # forget resolves memories only: a recorded message or a file's chunk is not erased one by one
            return _forget(mem, caller, args.memoryId.strip())
        except NotFoundError:
            return ToolResult(f"No memory with id {args.memoryId!r}.", {"action": "not_found", "found": 0})
    assert args.query is not None
    # Not diverse: a copy of the best match must stay in the list, as its runner-up.
    found = mem.search(args.query, caller=caller, limit=FORGET_CANDIDATES, diverse=False, explain=True, min_score=0.0,
                       sources=["memory"])  # what was said and files are not erased one by one
    hits = [h for h in found if h.similarity is None or h.score >= FORGET_CANDIDATE_RELEVANCE]
    if not hits:
        return ToolResult("No matching memory found.", {"action": "not_found", "found": 0})
    if _confident(hits):
        return _forget(mem, caller, hits[0].id)
    text = f"Found {plural(len(hits), 'candidate', 'candidates')}. Specify memoryId:\n" + untrusted(
        [line(n, h.memory, h.score) for n, h in enumerate(hits, 1)]
    )
    return ToolResult(
        text, {"action": "candidates", "found": len(hits), "candidates": [entry(h.memory, h.score) for h in hits]}
    )


def _confident(hits: list[SearchHit]) -> bool:
    ranking = [h.explain["ranking"] for h in hits if h.explain is not None]
    runner_up = ranking[1] if len(ranking) > 1 else 0.0
    first = hits[0]
    # its own score: not one a session neighbour lent it (`from_neighbor`), and calibrated (a similarity)
    own = first.similarity is not None and "from_neighbor" not in ((first.explain or {}).get("relevance") or {})
    return own and first.score >= FORGET_MIN_RELEVANCE and runner_up <= FORGET_MAX_RUNNER_UP * ranking[0]


def _forget(mem: Memory, caller: Caller, memory_id: str) -> ToolResult:
    forgotten = mem.forget(memory_id, caller=caller)
    text = f"Forgot {forgotten[:8]}: its content is erased for good."
    return ToolResult(text, {"action": "deleted", "id": forgotten})


class ContextArgs(ToolArgs):
    query: str = Field(min_length=1, description="What to look for, in natural language.")
    limit: int = Field(10, ge=1, le=50, description="Most items to return.")


class ContextItem(TypedDict):
    source: str  # memory, file, request, response, or another role of a recorded message (`_source`)
    content: str
    id: str
    category: str
    age: str
    similarity: float | None
    score: float
    origin: dict[str, Any] | None


class ContextDetails(TypedDict):
    count: int
    results: list[ContextItem]
    without_vectors: NotRequired[str]  # why the search could only match words (the embedding provider failed)


@tool(
    label="Search Context",
    details=ContextDetails,
    description="""Search everything in long-term memory (facts, preferences, decisions, conversation summaries and
    file excerpts) and return the most relevant items with their source and similarity. Use it for broad questions
    about earlier work when memory_recall's few results are not enough.""",
)
def search_context(mem: Memory, caller: Caller, args: ContextArgs) -> ToolResult:
    hits = mem.search(args.query, caller=caller, limit=args.limit, sources=KINDS)
    if not hits:
        return ToolResult("No relevant context found." + keywords_only(hits), {"count": 0, "results": [], **degraded(hits)})
    results: list[ContextItem] = [
        {
            "source": _source(h), "content": h.content, "id": h.id, "category": h.memory.category, "age": h.age,
            # seed 000's cosine to the query (None when only a keyword leg found it), and the pipeline's score
            "similarity": None if h.similarity is None else round(h.similarity, 4), "score": round(h.score, 4),
            "origin": h.origin,
        }
        for h in hits
    ]
    text = f"Found {plural(len(hits), 'context item', 'context items')}:\n\n" + untrusted(
        [line(n, h.memory, h.score, label=_source(h)) for n, h in enumerate(hits, 1)]
    ) + keywords_only(hits)
    return ToolResult(text, {"count": len(hits), "results": results, **degraded(hits)})


def _source(hit: SearchHit) -> str:
    """openclaw-memory-pgvector's sources: memory, request (a user's message), response (the assistant's),
    file; and reasoning, tool_call, tool_result for the record's other messages."""
    if hit.source == "chunk":
        return "file"
    if hit.source == "message":
        role = hit.memory.source_id or "message"
        return {"user": "request", "assistant": "response"}.get(role, role)
    return "file" if hit.memory.category == "file_chunk" else "memory"


TOOLS = (memory_recall, memory_store, memory_forget, search_context)
