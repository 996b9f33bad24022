"""The tables, declared once: each column's name, logical type, nullability, default and check.

Both dialects' DDL (`Dialect.create_table`), PostgreSQL's COPY types and the row <-> model
mapping (`dialect.RowMap`) are derived from these declarations, so a new column is one line
here plus a named migration step for existing stores (its `ALTER TABLE … ADD COLUMN` spelled by
`Dialect.column_sql`; a new store is created with it). Virtual tables, triggers and other
engine specifics stay dialect SQL in the backends.

A column's name is its model's field name: `Table.fields` are the columns a row object has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: the logical types a dialect knows how to declare, store and read back
ColumnType = Literal["uuid", "text", "real", "int", "bool", "time", "json", "tags", "vector", "serial", "tsvector"]


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True
    default: object = None  # as the model holds it ("shared", 2, False, [], {}); each dialect spells it
    check: str | None = None
    only: Literal["sqlite", "postgres"] | None = None  # a column one backend needs for its own indexing
    field: bool = True  # read into, and written from, the row object (not: the vector, the tsvector)


@dataclass(frozen=True)
class Index:
    name: str
    columns: str  # the indexed expression list, as in CREATE INDEX … (columns)
    where: str | None = None
    unique: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # the primary key (the identity of a row, for both dialects)
    ordered: bool = False  # rows carry their insertion order (SQLite `rowid`, PostgreSQL `seq`)
    indexes: tuple[Index, ...] = ()

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def fields(self) -> tuple[str, ...]:
        """The columns read into and written from a row object, in declaration order."""
        return tuple(c.name for c in self.columns if c.field and c.only is None)


def _unit(name: str) -> str:
    return f"{name} >= 0 AND {name} <= 1"


KIND_CHECK = "kind IN ('memory', 'message', 'chunk', 'window')"

META = Table("meta", (Column("key", "text", False), Column("value", "text", False)), key=("key",))

MEMORIES = Table(
    "memories",
    (
        Column("id", "uuid", False),
        Column("content", "text", False, check="length(content) > 0"),
        Column("title", "text"),
        Column("category", "text", False),
        Column("tags", "tags", False, default=[]),
        Column("importance", "real", False, check=_unit("importance")),
        Column("confidence", "real", False, check=_unit("confidence")),
        Column("scope", "text", False),
        Column("user_id", "text"),
        Column("agent_id", "text"),
        Column("session_id", "text"),
        Column("visibility", "text", False, default="shared", check="visibility IN ('private', 'shared', 'secret')"),
        Column("source_type", "text"),
        Column("source_id", "text"),
        Column("metadata", "json", False, default={}),
        Column("created_at", "time", False),
        Column("updated_at", "time", False),
        Column("deleted_at", "time"),
        Column("expires_at", "time"),
        Column("embedding_model", "text"),
        Column("embedding", "vector", field=False),
        Column("fts", "tsvector", only="postgres"),  # kept by a trigger (postgres.py)
        # what the row is: a memory, a conversation message or a file chunk (`record.py`). All three
        # are searched by one pipeline, through one scope check; reads name the kinds they want. A
        # `window` is never read as itself: a part of a message too long for the embedding model, its
        # `source_id` the message's id, whose vector finds the message (`windows.py`)
        Column("kind", "text", False, default="memory", check=KIND_CHECK),
        # when it is true (docs/time.md): from `valid_from` (NULL: from `created_at`, so old rows need no
        # rewrite) until `valid_to` (NULL: still true), when the memory `superseded_by` replaced it
        Column("valid_from", "time"),
        Column("valid_to", "time"),
        Column("superseded_by", "uuid"),
        Column("supersedes", "uuid"),
        # what else a row is found by, never shown: the facts extracted from a message (LongMemEval's
        # key = value + fact); the keyword legs index it with the content, the vector is made of both
        Column("keys", "text"),
        # a secret's content, title and keys, encrypted (`sealing.py`); its `content` is then the mask
        # and its title and keys NULL, so no index, vector or history holds the text
        Column("sealed", "text"),
    ),
    key=("id",),
    ordered=True,
    indexes=(
        Index("idx_memories_scope", "scope, created_at"),
        Index("idx_memories_kind_category", "kind, category"),
        Index("idx_memories_kind_scope", "kind, scope"),
        Index("idx_memories_created_at", "created_at"),
        Index("idx_memories_user_id", "user_id"),
        # the dashboard's list by importance, and of one source (extracted facts), reads its first page in
        # index order, not by sorting or scanning every row
        Index("idx_memories_importance", "importance, created_at"),
        Index("idx_memories_source_type", "source_type, created_at"),
        Index("idx_memories_deleted", "deleted_at", where="deleted_at IS NOT NULL"),
        Index("idx_memories_expires", "expires_at", where="expires_at IS NOT NULL"),
        Index("idx_memories_session", "session_id, scope, created_at", where="session_id IS NOT NULL"),
        # rows written before their vector (messages, chunks, a write while the provider was down)
        Index("idx_memories_unembedded", "created_at", where="embedding IS NULL"),
        # a message's windows, found by its id (search, removal)
        Index("idx_memories_windows", "source_id", where="kind = 'window'"),
    ),
)

HISTORY = Table(
    "history",
    (
        Column("id", "serial", False),
        Column("memory_id", "uuid", False),
        Column("action", "text", False),
        Column("before", "json"),
        Column("after", "json"),
        Column("actor", "text"),
        Column("at", "time", False),
    ),
    key=("id",),
    indexes=(Index("idx_history_memory", "memory_id, id"),),
)

STARTUP = Table(
    "startup",
    (
        Column("scope", "text", False),
        Column("key", "text", False),
        Column("content", "text", False),
        Column("priority", "int", False, default=2),
        Column("reinforce", "bool", False, default=False),
        Column("updated_at", "time", False),
    ),
    key=("scope", "key"),
)

API_TOKENS = Table(
    "api_tokens",
    (
        Column("id", "text", False),
        Column("name", "text"),
        Column("kind", "text", False, check="kind IN ('user', 'service')"),
        Column("user_id", "text"),
        Column("agent_id", "text"),
        Column("scopes", "text"),  # JSON text of the allowed scopes; NULL for a service token
        Column("salt", "text", False),
        Column("hash", "text", False),
        Column("created_at", "time", False),
        Column("revoked_at", "time"),
    ),
    key=("id",),
)

MIGRATIONS = Table(
    "migrations",
    (Column("migration_set", "text", False), Column("name", "text", False), Column("applied_at", "time", False)),
    key=("migration_set", "name"),
)

# -- the conversation record (`record.py`): each message and file chunk is also a `memories` row
# of its kind, with the same id, so search, scopes and erasure need nothing of their own.

MESSAGES = Table(
    "messages",
    (
        Column("id", "uuid", False),  # the message's `memories` row
        Column("scope", "text", False),
        Column("session_id", "text", False),
        Column("segment_id", "uuid"),
        Column("role", "text", False, check="role IN ('user', 'assistant', 'reasoning', 'tool_call', 'tool_result', 'system')"),
        Column("ordinal", "int"),  # its position in the transcript it came in
        Column("dedup_key", "text", False),  # the provider's id, else role + time or position + content hash
        Column("provider_id", "text"),
        Column("channel", "text"),
        Column("model", "text"),
        Column("input_tokens", "int"),
        Column("output_tokens", "int"),
        Column("summary", "text"),
        Column("created_at", "time", False),
    ),
    key=("id",),
    indexes=(
        Index("idx_messages_key", "scope, session_id, dedup_key", unique=True),
        Index("idx_messages_segment", "segment_id, created_at"),
        Index("idx_messages_session", "scope, session_id, created_at"),
    ),
)

SEGMENTS = Table(
    "segments",
    (
        Column("id", "uuid", False),
        Column("scope", "text", False),
        Column("user_id", "text"),
        Column("agent_id", "text"),
        Column("session_id", "text", False),
        Column("channel", "text"),
        Column("started_at", "time", False),
        Column("ended_at", "time", False),  # its last message
        Column("closed_at", "time"),  # NULL while open: a session has at most one open segment
        Column("close_reason", "text", check="close_reason IN ('pause', 'size', 'topic', 'session_end', 'explicit')"),
        Column("turn_count", "int", False, default=0),
        Column("message_count", "int", False, default=0),
        Column("title", "text"),
        Column("file", "text"),  # the closed segment's JSONL, relative to the data directory
        Column("summary", "text"),  # a sentence on what was said, from its extraction (the session's summary joins them)
    ),
    key=("id",),
    indexes=(
        Index("idx_segments_open", "scope, session_id", where="closed_at IS NULL", unique=True),
        Index("idx_segments_session", "scope, session_id, started_at"),
        Index("idx_segments_closed", "closed_at"),
    ),
)

FILES = Table(
    "files",
    (
        Column("id", "uuid", False),
        Column("scope", "text", False),
        Column("user_id", "text"),
        Column("agent_id", "text"),
        Column("path", "text", False),  # absolute, resolved
        Column("file_type", "text", False, check="file_type IN ('markdown', 'text', 'code', 'pdf')"),
        Column("size_bytes", "int", False),
        Column("content_hash", "text", False),
        Column("chunk_count", "int", False, default=0),
        Column("message_id", "uuid"),  # the message it came attached to, if any
        Column("created_at", "time", False),
        Column("updated_at", "time", False),
    ),
    key=("id",),
    indexes=(Index("idx_files_path", "scope, path", unique=True),),
)

# -- the job queue (`jobs.py`, docs/jobs.md): background work, enqueued in the transaction that makes it due

JOBS = Table(
    "jobs",
    (
        Column("id", "uuid", False),
        Column("kind", "text", False),  # the handler that runs it ("extract", "summarize")
        Column("scope", "text", False),  # the scope of the data it touches: reads, retries and erasure go by it
        Column("subject_id", "text", False),  # what it works on (a segment's id): one job per kind and subject
        Column("payload", "json", False, default={}),
        Column("status", "text", False, default="queued",
               check="status IN ('queued', 'running', 'done', 'dead', 'cancelled')"),
        Column("attempts", "int", False, default=0),
        Column("max_attempts", "int", False),
        Column("run_after", "time", False),
        Column("lease_until", "time"),  # while running: another worker may take it after this
        Column("worker", "text"),  # who holds (or last held) it
        Column("last_error", "text"),
        Column("input_tokens", "int", False, default=0),
        Column("output_tokens", "int", False, default=0),
        Column("cost", "real"),
        Column("created_at", "time", False),
        Column("updated_at", "time", False),
        Column("finished_at", "time"),
    ),
    key=("id",),
    indexes=(
        Index("idx_jobs_subject", "kind, subject_id", unique=True),
        Index("idx_jobs_ready", "run_after", where="status = 'queued'"),
        Index("idx_jobs_leased", "lease_until", where="status = 'running'"),
        Index("idx_jobs_scope", "scope, created_at"),
        Index("idx_jobs_status", "status, kind"),
    ),
)

# -- knowledge (`knowledge.py`): a fact is a `memories` row; each time a conversation states it is an occurrence

FACT_OCCURRENCES = Table(
    "fact_occurrences",
    (
        Column("id", "uuid", False),
        Column("memory_id", "uuid", False),  # the fact
        Column("scope", "text", False),
        Column("segment_id", "uuid"),
        Column("session_id", "text"),
        Column("at", "time", False),  # when it was said
        Column("snippet", "text"),  # what was said, cut
        Column("sentiment", "text", check="sentiment IN ('neutral', 'confirmation', 'correction', 'frustration', 'reminder', 'update')"),
        Column("message_ids", "json", False),
    ),
    key=("id",),
    indexes=(
        Index("idx_fact_occurrences_memory", "memory_id, at"),
        Index("idx_fact_occurrences_scope", "scope"),
        Index("idx_fact_occurrences_segment", "segment_id"),
    ),
)

# -- a re-embedding under way (`engine/_maintenance.py`): each row's vector from the new model, kept
# apart until every row has one, then swapped into `memories` in one transaction. The row's
# `updated_at` when it was embedded tells a vector made from text changed since.

STAGED_VECTORS = Table(
    "staged_vectors",
    (
        Column("id", "uuid", False),  # the `memories` row
        Column("updated_at", "time", False),  # that row's, when its text was embedded
        Column("embedding", "vector", False),
    ),
    key=("id",),
)

# -- insight into memory (`insight.py`, docs/insight.md): each search and what it found, for the
# search log's reports and a memory's "why recalled". A search is logged under its caller's own
# scope (`user:<id>`, else `agent:<id>`; NULL for the administrator), which decides who reads it.

SEARCH_LOG = Table(
    "search_log",
    (
        Column("id", "uuid", False),
        Column("at", "time", False),
        Column("door", "text", False),  # python, cli, rest, mcp, hook
        Column("scope", "text"),  # whose search it was: who may read the row
        Column("user_id", "text"),
        Column("agent_id", "text"),
        Column("session_id", "text"),
        Column("scopes", "json"),  # the scopes it searched (NULL: every scope)
        Column("query", "text", False),
        Column("mode", "text", False),
        Column("result_count", "int", False),
        Column("top_score", "real"),
        Column("took_ms", "real", False),
    ),
    key=("id",),
    indexes=(
        Index("idx_search_log_scope", "scope, at"),
        Index("idx_search_log_at", "at"),
    ),
)

SEARCH_HITS = Table(
    "search_hits",
    (
        Column("log_id", "uuid", False),  # the `search_log` row
        Column("rank", "int", False),  # 1 for the best hit
        Column("memory_id", "uuid", False),
        Column("score", "real", False),
        Column("at", "time", False),  # the search's, kept here so "recalled since" needs no join
    ),
    key=("log_id", "rank"),
    indexes=(Index("idx_search_hits_memory", "memory_id, at"),),
)
