"""Domain objects: what a memory is, what a search returns, what history records.

These are pydantic models because they cross every boundary (Python API, CLI `--json`,
JSONL export, and later REST/MCP); inside the engine they are trusted as they are.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Literal, Mapping, Sequence, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from ._time import age_string, utcnow

DEFAULT_CATEGORIES: tuple[str, ...] = (
    "preference",
    "decision",
    "fact",
    "entity",
    "person",
    "experience",
    "action_item",
    "correction",
    "session_summary",
    "file_chunk",
    "other",
)


class Visibility(str, Enum):
    """Who may see a memory across agents: its own agent alone, every agent of its scope, or its own agent when it asks (docs/agents.md)."""

    private = "private"
    shared = "shared"
    secret = "secret"


class EmbeddingFingerprint(BaseModel):
    """Identifies the model that made a vector; vectors from different fingerprints never mix."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str
    dimensions: int

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimensions} dims)"


class ReembedState(BaseModel):
    """The store's vectors as `doctor` checks them: a re-embedding not finished (`target`, `staged`
    rows so far), and rows whose vector is not the store's model's (a mixed store)."""

    target: EmbeddingFingerprint | None = None
    staged: int = 0
    other_model: int = 0
    other_dimensions: int = 0


class BackupSummary(BaseModel):
    """A backup taken or restored (docs/backups.md): its file, the backend and schema it came from, rows per table."""

    path: str
    backend: str
    schema_version: int
    tables: dict[str, int] = Field(default_factory=dict)
    bytes: int = 0


class PurgeRun(BaseModel):
    """The last purge (`doctor` shows it): when, and how many memories it erased."""

    at: datetime
    purged: int


class Sweep(BaseModel):
    """What one pass of the server's upkeep (`mem.upkeep.sweep()`) did."""

    segments_closed: int
    messages_pruned: int
    memories_purged: int
    searches_pruned: int
    awaiting_vectors: int


#: what a stored row is: a memory, a conversation message, or a chunk of an ingested file (`KINDS`, what reads
#: name); or a window of a long message, which no read returns (`conversations/windows.py`)
Kind = Literal["memory", "message", "chunk", "window"]
KINDS: tuple[str, ...] = ("memory", "message", "chunk")
#: what a list shows by `source`: a kind of row, or `fact` (a memory the extraction made from a conversation)
LISTED: tuple[str, ...] = ("memory", "fact", "message", "chunk")
#: what a search finds and names a hit by: a window's hit is its message
Source = Literal["memory", "message", "chunk"]
STORED_KINDS: tuple[str, ...] = (*KINDS, "window")  # every row: what whole-store work (re-embedding) counts


def embedded_text(content: str, keys: str | None) -> str:
    """What a row's vector is made of: its content, and its keys when it has them."""
    return f"{content}\n{keys}" if keys else content


#: what a secret's content reads as wherever it is not asked for by its own agent (list, history, the dashboard)
MASK = "••••••••"


class MemoryRecord(BaseModel):
    """One stored memory, as read back from the store (a message or file chunk is one too, of its `kind`)."""

    id: str
    content: str
    title: str | None = None
    category: str = "other"
    tags: list[str] = Field(default_factory=list)
    importance: float = 0.7
    confidence: float = 1.0
    scope: str = "global"
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: Visibility = Visibility.shared
    source_type: str | None = None
    source_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    expires_at: datetime | None = None
    embedding_model: str | None = None
    kind: Kind = "memory"
    # true from `valid_from` until `valid_to` (None: still true), when `superseded_by` replaced it (docs/time.md)
    valid_from: datetime = None  # type: ignore[assignment]  # filled from `created_at` when not given
    valid_to: datetime | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    # what else it is found by, never shown: the facts a message gave (docs/extraction.md)
    keys: str | None = None
    # a secret's text, encrypted (docs/agents.md): never shown, never in a dump; `content` is then `MASK`
    sealed: str | None = Field(default=None, exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _valid_from_creation(cls, data: Any) -> Any:
        """A memory is valid from when it was recorded unless a source said otherwise (a stored NULL)."""
        if isinstance(data, dict) and data.get("valid_from") is None:
            data = {**data, "valid_from": data.get("created_at")}
        return data

    @property
    def age(self) -> str:
        return age_string(self.created_at)

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def is_current(self) -> bool:
        """Not superseded (or superseded only from a time still to come)."""
        return self.valid_to is None or self.valid_to > utcnow()


class SecretsStatus(BaseModel):
    """Where a store's secret key comes from and what is sealed with it (`clawrecall secrets status`)."""

    source: str | None  # the key file, or the variable or config key that holds the keys; None: no key yet
    key: str | None  # the fingerprint of the key that seals (never the key)
    keys: int  # keys that open secrets: more than one while a rotation is under way
    store_key: str | None  # the fingerprint the store records for its sealing key
    sealed: int  # secret memories stored encrypted
    unsealed: int  # secret memories stored before encryption, still to seal


class SecretRotation(BaseModel):
    """What `mem.secrets.rotate()` did: every secret sealed again under `key`."""

    key: str  # the new sealing key's fingerprint
    resealed: int
    total: int
    dropped_keys: int  # old keys removed from the key file once nothing needed them


class Discussed(BaseModel):
    """How often and when a fact was stated in conversations (its occurrences)."""

    count: int
    first_at: datetime
    last_at: datetime


class SearchHit(BaseModel):
    """A memory returned by search, with its final score and (on request) how it was reached."""

    memory: MemoryRecord
    score: float
    age: str
    similarity: float | None = None  # cosine to the query, when the vector leg found this memory
    matched: list[str] = Field(default_factory=list)  # the candidate legs that found it
    explain: dict[str, Any] | None = None
    # where a message or file chunk came from: session, role and time; or file path and lines/pages
    origin: dict[str, Any] | None = None
    # a fact's occurrences: how often and when conversations stated it (None: never recorded)
    discussed: Discussed | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def source(self) -> Source:
        """memory, message or chunk (a window's hit is reported as its message)."""
        return cast(Source, self.memory.kind)

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content


class SearchHits(list[SearchHit]):
    """A search's hits, best first. `without_vectors` says why a hybrid search ran on its keyword legs only
    (the embedding provider failed); its scores are then ranking scores, not calibrated relevance."""

    without_vectors: str | None = None


class Occurrence(BaseModel):
    """One time a conversation stated a fact (memento-local's `fact_occurrences`)."""

    id: str
    memory_id: str
    scope: str
    segment_id: str | None = None
    session_id: str | None = None
    at: datetime
    snippet: str | None = None
    sentiment: Literal["neutral", "confirmation", "correction", "frustration", "reminder", "update"] | None = None
    message_ids: list[str] = Field(default_factory=list)


class AddResult(BaseModel):
    """Outcome of an add: `created`, or `duplicate` with the id of the memory it matched."""

    action: Literal["created", "duplicate"]
    id: str
    existing_id: str | None = None
    similarity: float | None = None
    memory: MemoryRecord | None = None


class HistoryEntry(BaseModel):
    """One change to a memory: what it was before, what it became, who did it and when."""

    id: int
    memory_id: str
    action: Literal["add", "update", "delete", "undelete", "forget", "purge", "import", "supersede"]
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    actor: str | None = None
    at: datetime


#: a history action as the change feed names it
CHANGE_TYPES = {"add": "added", "update": "updated", "supersede": "superseded", "delete": "deleted",
                "undelete": "restored", "forget": "forgotten", "purge": "purged", "import": "imported"}


class MemoryEvent(BaseModel):
    """One change to a memory, as the change feed tells it (`mem.changes`, REST `/v1/events`)."""

    id: int = Field(description="The history row's id: durable, in commit order; resume after it (`Last-Event-ID`).")
    type: Literal["added", "updated", "superseded", "deleted", "restored", "forgotten", "purged", "imported"]
    memory_id: str
    scope: str
    actor: str | None = None
    at: datetime
    memory: MemoryRecord | None = Field(None, description="The memory as it is now (not as it was then); none once erased.")


class ChangePage(BaseModel):
    """What the feed holds after a cursor for one caller: the events it may read, and the cursor to read on from
    (past rows it may not read too, so they are not read again)."""

    events: list[MemoryEvent]
    cursor: int
    more: bool = Field(description="More rows wait after `cursor`: read again at once.")


class Handlers(BaseModel):
    """Who handles what (`mem.upkeep.handlers()`), by name: each event's listeners in the order they run,
    and each job kind's one handler."""

    events: dict[str, list[str]]
    jobs: dict[str, str]


class Stats(BaseModel):
    """Counts for `clawrecall stats`; computed with plain SQL, no embedding model loaded."""

    total: int
    active: int
    deleted: int
    expired: int
    by_category: dict[str, int]
    by_scope: dict[str, int]
    by_kind: dict[str, int] = Field(default_factory=dict)  # live rows: memories, messages, file chunks
    users: int
    embedding: EmbeddingFingerprint | None
    schema_version: int
    backend: str
    location: str
    size_bytes: int | None = None
    oldest: datetime | None = None
    newest: datetime | None = None
    jobs: JobStats | None = None


class NewMemory(BaseModel):
    """A memory to add, validated at the boundary (`add`, `add_many`, JSONL import)."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(strict=True)  # not bytes
    title: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(default=None, ge=0, le=1, strict=True)  # not True, not "0.5"
    confidence: float | None = Field(default=None, ge=0, le=1, strict=True)
    scope: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    visibility: Visibility | None = None
    source_type: str | None = None
    source_id: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    valid_from: datetime | None = None  # when it became true, if the source says (default: when it is recorded)
    # Set only when importing an export: the record keeps its identity and life so far.
    id: str | None = None
    updated_at: datetime | None = None
    deleted_at: datetime | None = None
    embedding_model: str | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    supersedes: str | None = None


class Logged(BaseModel):
    """What `mem.conversations.log` kept of a transcript."""

    stored: int = Field(description="Messages stored now.")
    skipped: int = Field(description="Messages stored before (by provider id, time or position and content).")
    unstorable: int = 0  # left out by `skip_bad`
    ids: list[str]
    segment_id: str | None
    given_vectors: int = 0  # stored with the vector given for them (`log(vectors=…)`), not embedded again


class Conversation(BaseModel):
    """One conversation the caller may read (`mem.conversations.sessions`)."""

    scope: str
    session_id: str
    user_id: str | None
    agent_id: str | None
    channel: str | None
    messages: int
    first_at: datetime
    last_at: datetime


GroupBy = Literal["user", "agent", "session"]  # what `mem.conversations.stats` counts by
EndReason = Literal["session_end", "explicit"]  # why `mem.conversations.end` closes a segment
OnDuplicate = Literal["skip", "keep"]  # what `mem.import_jsonl` does with a near-duplicate


class StatsGroup(BaseModel):
    """Messages and tokens of one user, agent or session (`mem.conversations.stats`)."""

    key: str | None = Field(description="The user, agent or session the group counts.")
    messages: int
    by_role: dict[str, int]
    input_tokens: int
    output_tokens: int


class ConversationDeleted(BaseModel):
    """What `mem.conversations.delete` erased (with `dry_run`: would erase) of one conversation."""

    scope: str = Field(description="The conversation's scope: the one asked for, else the caller's own.")
    deleted: dict[str, int] = Field(description="Rows erased (with dry_run: that would be) per kind: messages, "
                                    "segments (each with its JSONL file), occurrences, jobs.")


class Pruned(BaseModel):
    """What `mem.conversations.prune` erased of the record past its retention."""

    messages: int
    segments: int
    files: int


class Erased(BaseModel):
    """What `mem.erase` erased of a person (with `dry_run`: would erase)."""

    erased: dict[str, int] = Field(description="Rows per kind: memories, history, history_actor, messages, segments, files, startup.")
    dry_run: bool


class Imported(BaseModel):
    """What `mem.import_jsonl` did: lines read, memories created (in a dry run: would be), and each line left out
    and why (`{"line", "reason": "id_exists", "id"}` or `{"line", "reason": "duplicate", "existing_id",
    "existing_line", "similarity"}`); `mem.import_items` names items as `item` and `existing_item`."""

    read: int
    created: int
    duplicates: int
    skipped: int
    dry_run: bool
    left_out: list[dict[str, Any]]


class Journal(BaseModel):
    """What `mem.export_journal` wrote: Markdown files, and the memories in them."""

    files: int
    memories: int


class Ingested(BaseModel):
    """What `mem.files.ingest` did with a file."""

    action: Literal["created", "replaced", "unchanged"]
    file_id: str
    path: str
    file_type: Literal["markdown", "text", "code", "pdf"]
    chunks: int
    size_bytes: int
    scope: str


class MemoryFields(TypedDict, total=False):
    """What `mem.add(content, **fields)` takes besides the content and the caller; a type checker checks the names."""

    session_id: str | None
    scope: str | None
    category: str | None
    title: str | None
    tags: Sequence[str] | None
    importance: float | None
    confidence: float | None
    visibility: str | None
    source_type: str | None
    source_id: str | None
    metadata: Mapping[str, Any] | None
    created_at: datetime | None
    expires_at: datetime | None
    valid_from: datetime | None
    dedup: bool | None
    embed_later: bool | None


class MemoryChanges(TypedDict, total=False):
    """What `mem.supersede(id, content, **fields)` sets on the new version besides its content, and what
    `mem.update` may change (`UpdateFields`); a type checker checks the names."""

    title: str | None
    category: str | None
    tags: Sequence[str] | None
    importance: float | None
    confidence: float | None
    visibility: str | None
    metadata: Mapping[str, Any] | None
    expires_at: datetime | None


class UpdateFields(MemoryChanges, total=False):
    """What `mem.update(id, **fields)` changes: the given fields only (a new content is re-embedded)."""

    content: str | None


SearchMode = Literal["hybrid", "vector", "bm25", "trigram"]
ListOrder = Literal["newest", "oldest", "updated", "importance", "recalls"]  # recalls: most found by logged searches


class MemoryFilters(TypedDict, total=False):
    """Which memories: the filters `search`, `list`, `count` and `delete_bulk` all take."""

    scope: str | list[str] | None
    category: str | list[str] | None
    tags: Sequence[str] | None
    session_id: str | None
    since: datetime | None
    until: datetime | None


class ReadFilters(MemoryFilters, total=False):
    """The filters every read (`search`, `list`, `count`) takes besides `MemoryFilters`."""

    include_deleted: bool
    as_of: datetime | None
    secrets: bool


class DeleteFilters(MemoryFilters, total=False):
    """What a bulk change (`mem.delete_bulk`, `undelete_bulk`, `set_visibility_bulk`) takes besides the caller and
    `dry_run`; `list` and `count` take them too."""

    user: str | None  # only this user's rows
    agent: str | None  # only the rows this agent wrote
    visibility: str | None  # only the rows at this level
    source_type: str | None
    source: str | None  # one of LISTED (a bulk change: memory or fact)


class SearchFilters(ReadFilters, total=False):
    """What `mem.search(query, **filters)` takes besides the query, the caller and `limit`."""

    mode: SearchMode
    explain: bool
    diverse: bool
    min_score: float | None
    threshold: float | None
    sources: Sequence[str] | None
    exclude_session: str | None
    message_roles: Sequence[str] | None


class CountFilters(ReadFilters, DeleteFilters, total=False):
    """What `mem.count(**filters)` takes besides the caller: it counts what `list` lists."""

    only_deleted: bool
    include_expired: bool
    include_superseded: bool
    source_id: str | Sequence[str] | None
    sources: Sequence[str] | None  # memory (default), message, chunk


class ListFilters(CountFilters, total=False):
    """What `mem.list(**filters)` takes besides the caller, `limit` and `offset`."""

    order: ListOrder


class StartupEntry(BaseModel):
    """Identity and rules injected on a session's first turn (seed 001's `startup` table).

    Lower priority is injected first (P0 critical … P3 reference); `reinforce` entries are
    injected on the session's later turns too, alone (its reinforcement turns).
    """

    scope: str = "global"
    key: str = Field(min_length=1, max_length=200)
    content: str = Field(min_length=1)
    priority: int = Field(default=2, ge=0, le=9)
    reinforce: bool = False
    updated_at: datetime


# -- the conversation record ---------------------------------------------------------------

Role = Literal["user", "assistant", "reasoning", "tool_call", "tool_result", "system"]


class Message(BaseModel):
    """One stored message of a conversation: its `messages` row with its text (its `memories` row)."""

    id: str
    scope: str
    session_id: str
    segment_id: str | None = None
    role: Role
    ordinal: int | None = None  # its position in the transcript it arrived in
    dedup_key: str
    provider_id: str | None = None
    channel: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    summary: str | None = None
    created_at: datetime
    content: str = ""
    user_id: str | None = None
    agent_id: str | None = None


class Segment(BaseModel):
    """A stretch of one conversation: it closes after a pause, at a size, on a topic shift or at the
    session's end; a closed one is also a JSONL file under the data directory's `conversations/`."""

    id: str
    scope: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str
    channel: str | None = None
    started_at: datetime
    ended_at: datetime
    closed_at: datetime | None = None
    close_reason: Literal["pause", "size", "topic", "session_end", "explicit"] | None = None
    turn_count: int = 0
    message_count: int = 0
    title: str | None = None
    file: str | None = None
    summary: str | None = None  # a sentence on what was said, from its extraction (an LLM's)


class FileRecord(BaseModel):
    """An ingested file: its chunks are `memories` rows of kind `chunk` whose `source_id` is this id."""

    id: str
    scope: str
    user_id: str | None = None
    agent_id: str | None = None
    path: str
    file_type: Literal["markdown", "text", "code", "pdf"]
    size_bytes: int
    content_hash: str
    chunk_count: int = 0
    message_id: str | None = None
    created_at: datetime
    updated_at: datetime


JobStatus = Literal["queued", "running", "done", "dead", "cancelled"]
JOB_STATUSES: tuple[str, ...] = ("queued", "running", "done", "dead", "cancelled")


class Job(BaseModel):
    """Background work on one subject (a segment to extract facts from), in the scope of the data it
    touches; run by a worker that holds its lease (docs/jobs.md)."""

    id: str
    kind: str
    scope: str
    subject_id: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: JobStatus = "queued"
    attempts: int = Field(0, description="Times a worker took the job (a RetryLaterError gives its attempt back).")
    max_attempts: int
    run_after: datetime = Field(description="Not run before this time (a retry's backoff, a RetryLaterError's `after`).")
    lease_until: datetime | None = None
    worker: str | None = None
    last_error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


class JobKindStats(BaseModel):
    jobs: dict[str, int] = Field(description="Jobs of this kind per status.")
    input_tokens: int
    output_tokens: int
    cost: float | None = Field(description="Summed over the jobs that reported one; None when none did.")


class JobStats(BaseModel):
    """The job queue at a glance: jobs per status, tokens and cost per kind, and how long the oldest ready job waits."""

    by_status: dict[str, int]
    by_kind: dict[str, JobKindStats]
    oldest_ready: datetime | None = Field(None, description="When the longest-waiting ready job became ready.")
    retrying: int = Field(0, description="Queued jobs that failed before and wait for their retry (an LLM down).")
    last_error: str | None = Field(None, description="The latest error of those.")


# -- insight into memory (docs/insight.md) ---------------------------------------------------

Door = Literal["python", "cli", "rest", "mcp", "hook"]


class LoggedSearch(BaseModel):
    """One search or recall as the search log keeps it."""

    id: str
    at: datetime
    door: str = Field(description="Where it came in: python, cli, rest, mcp or hook.")
    scope: str | None = Field(None, description="Whose search it was (user:<id>, agent:<id>; None: the administrator's).")
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    scopes: list[str] | None = Field(None, description="The scopes it searched (None: every scope).")
    query: str
    mode: str
    result_count: int
    top_score: float | None = None
    took_ms: float


class LoggedHit(BaseModel):
    """One hit of a logged search."""

    log_id: str
    rank: int
    memory_id: str
    score: float
    at: datetime


class QueryCount(BaseModel):
    """A query as the log's reports count it (queries equal but for case are one)."""

    query: str
    count: int
    last_at: datetime
    mean_results: float


class RecallCount(BaseModel):
    """A memory and how often searches found it."""

    memory: MemoryRecord
    count: int
    last_at: datetime


class PeriodCount(BaseModel):
    """How many in one day (`YYYY-MM-DD`) or month (`YYYY-MM`), UTC: memories added (of a category and
    source: memory, fact, message, chunk, window) or searches logged."""

    period: str
    count: int
    category: str | None = None
    source: str | None = None


class Recall(BaseModel):
    """One time a search found a memory: `query` is None when the caller may not read that search."""

    at: datetime
    score: float
    rank: int
    door: str | None = None
    query: str | None = None


class Provenance(BaseModel):
    """Why a memory is stored and why it was recalled: where it came from, what it came from, every change,
    and every logged search that found it. Each part is shown only as far as the caller may read it."""

    memory: MemoryRecord
    origin: str = Field(description="capture, extraction, session_summary, file, conversation, tool, import, add, "
                                    "or the source_type a caller gave.")
    explanation: str = Field(description="The origin in words.")
    added_by: str | None = Field(None, description="Who stored it (history's actor).")
    added_at: datetime | None = None
    history: list[HistoryEntry] = Field(default_factory=list)
    segment: Segment | None = Field(None, description="The conversation segment it was extracted from.")
    messages: list[Message] = Field(default_factory=list, description="The messages it was extracted from.")
    occurrences: list[Occurrence] = Field(default_factory=list, description="Each time a conversation stated it.")
    job: Job | None = Field(None, description="The extraction job that made it.")
    file: FileRecord | None = Field(None, description="The ingested file a chunk belongs to.")
    recalls: list[Recall] = Field(default_factory=list, description="Every logged search that found it, newest first.")


class Cluster(BaseModel):
    """Memories of one scope that say nearly the same thing (every one at cosine ≥ the threshold to another
    of them), with a suggested clean-up: keep one, soft-delete the rest (`insight cleanup --apply`)."""

    scope: str
    size: int
    min_similarity: float = Field(description="The lowest cosine of the pairs that join the group.")
    mean_similarity: float = Field(description="The mean cosine of those pairs.")
    memories: list[MemoryRecord] = Field(description="The group's memories, the one to keep first.")
    keep: str = Field(description="The suggested survivor: the most important, then the most recently changed.")
    remove: list[str] = Field(description="The others: restorable after a soft delete, until purged.")


class CleanupItem(BaseModel):
    """A memory the clean-up report suggests deleting, and why."""

    memory: MemoryRecord
    reasons: list[str] = Field(description="noise, near_empty, placeholder, question, duplicate (of `duplicate_of`) "
                                           "or never_recalled.")
    duplicate_of: str | None = None


class CleanupReport(BaseModel):
    """Low-quality memories in the caller's scopes (nova-memory's maintenance report), oldest first."""

    items: list[CleanupItem]
    counts: dict[str, int] = Field(description="Memories per reason.")
    scanned: int = Field(description="Current memories read.")


class Coverage(BaseModel):
    """Embedding coverage of one kind of row (memory, fact, message, chunk, window) in the caller's scopes."""

    kind: str = Field(description="memory, fact (a memory extracted from a conversation), message, chunk or window.")
    total: int = Field(description="Rows not deleted.")
    embedded: int = Field(description="Rows with a vector by the store's model.")
    percent: float = Field(description="embedded / total, in percent (100 when there are none).")
    waiting: int = Field(description="Rows without a vector: the backfill embeds them.")
    other_model: int = Field(description="Rows whose vector another model made: their vector no longer matches "
                                         "what a search compares it with (`reembed` makes them again).")
    models: dict[str, int] = Field(default_factory=dict, description="Rows with a vector, by the model that made it.")
