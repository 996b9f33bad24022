"""Schema migrations as named sets: one set per feature, each an ordered list of named steps,
recorded in the store's `migrations` table (set, name, applied_at) alike on SQLite and PostgreSQL.

A set not yet in a store is *installed*: its tables are created as `schema.py` declares them now
(plus the backend's own objects: full-text tables, triggers, functions) and every one of its
steps is recorded as done. A store that has the set gets the steps it lacks, in order. A step's
name means the same change on both backends; each backend supplies its SQL (`Store.migration_steps`),
empty where the change never applied to it.

Stores written before named migrations kept one number in `meta.schema_version` (SQLite 1–7,
PostgreSQL 1–5, counting different things); `Store.legacy_versions` says which steps each
number stands for, and the first migration records them. From then on `meta.schema_version`
holds `REFUSED_BY_OLD_RELEASES`, which those releases read as "a newer clawrecall wrote this".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .._time import utcnow
from ..errors import StorageError
from .executor import Executor
from .schema import (
    API_TOKENS, FACT_OCCURRENCES, FILES, HISTORY, JOBS, MEMORIES, MESSAGES, META, MIGRATIONS, SEARCH_HITS, SEARCH_LOG,
    SEGMENTS, STAGED_VECTORS, STARTUP, Table,
)

REFUSED_BY_OLD_RELEASES = "1000"


@dataclass(frozen=True)
class MigrationSet:
    name: str
    tables: tuple[Table, ...]  # created as declared when the set is installed
    steps: tuple[str, ...]  # the first one is the installation itself
    # steps a store may have recorded that are nothing now (what they made, a later step removed):
    # known when a store lists them, never applied, not counted
    retired: tuple[str, ...] = ()


CORE = MigrationSet(
    "core",
    (META, MEMORIES, HISTORY, STARTUP, API_TOKENS),
    (
        "initial",  # memories, their history, full-text and trigram indexes, meta
        "startup",  # the startup entries table
        "partial-indexes",  # deleted, expiring and session rows indexed alone
        "text-index-scope",  # the scope joins the full-text (and PostgreSQL's trigram) index
        "text-index-scope-key",  # SQLite: the scope indexed as one token, hex(scope)
        "api-tokens",  # the API tokens table
        "text-index-bulk",  # SQLite: new rows indexed by one statement per insert, not a trigger
        "record-kinds",  # memories.kind (memory, message, chunk) and the index of rows awaiting a vector
        "validity",  # memories.valid_from, valid_to, superseded_by, supersedes: facts that stay true until superseded
        "fact-keys",  # memories.keys, indexed with the content: a message is found by the facts it gave
        "half-precision-vectors",  # PostgreSQL: memories.embedding as halfvec (SQLite keeps float32)
        "change-feed",  # PostgreSQL: memories.rev dropped (it made a change feed, which no-change-feed drops again)
        "drop-sql-api",  # PostgreSQL: the search_memories function and conversation_stats view go (no scope check)
        "message-windows",  # memories.kind 'window': a long message's parts, embedded; its long messages embedded again
        "no-change-feed",  # PostgreSQL: memories.wxid, its triggers and memory_departures dropped: servers hold no rows
        "sealed-secrets",  # memories.sealed: a secret's text encrypted; the secrets stored before it are sealed at open
        "scope-vectors",  # PostgreSQL: a scope's vectors in one index, read index-only by an exact search
        "list-indexes",  # memories listed by importance, and of one source_type, from an index
        "session-index-scope",  # the session index holds the scope (for stores whose record-kinds step made it without)
        "window-text",  # a long message's windows out of the keyword indexes: their text is the message's
    ),
    # PostgreSQL's memories.rev, which change-feed drops
    retired=("row-revisions",),
)
#: the conversation record: messages, their segments, ingested files (their rows live in `memories`)
CONVERSATIONS = MigrationSet(
    "conversations", (MESSAGES, SEGMENTS, FILES),
    ("initial", "segment-summary"),  # segments.summary: a sentence from the segment's extraction
)
#: the job queue: background work (extraction) enqueued with the data it is about (docs/jobs.md)
JOBS_SET = MigrationSet("jobs", (JOBS,), ("initial",))
#: facts extracted from conversations: each time one was stated (the facts are `memories` rows)
KNOWLEDGE = MigrationSet("knowledge", (FACT_OCCURRENCES,), ("initial",))
#: a re-embedding that survives a crash: the new model's vectors, staged until all are made
REEMBED = MigrationSet("reembed", (STAGED_VECTORS,), ("initial", "half-precision-staging"))  # PostgreSQL: halfvec
#: insight into memory: the search log and each search's hits (docs/insight.md)
INSIGHT = MigrationSet("insight", (SEARCH_LOG, SEARCH_HITS), ("initial",))
SETS: tuple[MigrationSet, ...] = (CORE, CONVERSATIONS, JOBS_SET, KNOWLEDGE, REEMBED, INSIGHT)


class Migrating(Executor, Protocol):
    """What migrating needs of a store (`sql.Store` meets it): where it is, what its old version
    numbers stand for, its schema lock and its SQL for each step."""

    location: str
    legacy_versions: dict[int, tuple[str, ...]]

    def table_exists(self, name: str) -> bool: ...

    def lock_schema(self) -> None: ...

    def migration_steps(self) -> dict[str, list[str]]: ...

    def migration_extras(self, migration_set: str) -> tuple[list[str], list[str]]: ...


@dataclass(frozen=True)
class Step:
    """A step to apply: `statements` empty when the step has nothing to do on this backend (or
    when an installation already made what it would)."""

    migration_set: str
    name: str
    statements: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.migration_set}/{self.name}"


def latest() -> int:
    """The schema version of a store with every step applied."""
    return sum(len(s.steps) for s in SETS)


def applied(store: Migrating) -> tuple[dict[str, set[str]], bool]:
    """The steps a store has, per set, and whether they are recorded (False: a store from before
    named migrations, read from its `meta.schema_version`; or an empty store)."""
    if store.table_exists(MIGRATIONS.name):
        done: dict[str, set[str]] = {}
        for set_name, name in store.run(f"SELECT migration_set, name FROM {MIGRATIONS.name}"):
            done.setdefault(set_name, set()).add(name)
        known = {(s.name, n) for s in SETS for n in s.steps}
        retired = {(s.name, n) for s in SETS for n in s.retired}
        unknown = sorted(f"{s}/{n}" for s, names in done.items() for n in names if (s, n) not in known | retired)
        if unknown:
            raise StorageError(f"{store.location} has migrations this clawrecall does not know "
                               f"({', '.join(unknown)}): upgrade clawrecall")
        return {s: {n for n in names if (s, n) not in retired} for s, names in done.items()}, True
    if not store.table_exists(META.name):
        return {}, False
    rows = store.run(f"SELECT value FROM meta WHERE key = {store.dialect.p}", ("schema_version",))
    if not rows:
        return {}, False
    number = int(rows[0][0])
    if rows[0][0] == REFUSED_BY_OLD_RELEASES and store.table_exists(MIGRATIONS.name):
        return applied(store)  # another process migrated between the two reads: its record is committed now
    if number not in store.legacy_versions:
        raise StorageError(f"{store.location} has schema version {number}, newer than this clawrecall: upgrade clawrecall")
    return {CORE.name: set(store.legacy_versions[number])}, False


def version(store: Migrating) -> int:
    """How many steps a store has (all sets): `latest()` when it is up to date."""
    return sum(len(names) for names in applied(store)[0].values())


def pending(store: Migrating, done: dict[str, set[str]] | None = None) -> list[Step]:
    """The steps `migrate` would apply, in order, with their SQL for this backend."""
    if done is None:
        done = applied(store)[0]
    steps = store.migration_steps()
    out: list[Step] = []
    for s in SETS:
        have = done.get(s.name, set())
        if not have:
            create = [sql for table in s.tables for sql in store.dialect.create_table(table)]
            before, after = store.migration_extras(s.name)
            out.append(Step(s.name, s.steps[0], (*before, *create, *after)))
            out.extend(Step(s.name, name, ()) for name in s.steps[1:])
        else:
            out.extend(Step(s.name, name, tuple(steps.get(name, ()))) for name in s.steps if name not in have)
    return out


def migrate(store: Migrating) -> list[str]:
    """Apply pending steps in one transaction, under the backend's schema lock, so several
    processes opening one store at once migrate it once. Returns the labels applied."""
    done, _ = applied(store)
    if not pending(store, done):
        return []
    return _apply(store)


def _apply(store: Migrating) -> list[str]:
    with store.transaction():
        store.lock_schema()
        done, recorded = applied(store)  # again, under the lock
        todo = pending(store, done)
        d = store.dialect
        now = d.ts(utcnow())
        record = f"INSERT INTO {MIGRATIONS.name} (migration_set, name, applied_at) VALUES ({d.marks(3)})"
        if not recorded:
            for sql in d.create_table(MIGRATIONS):
                store.run(sql)
            for set_name, names in done.items():  # what an older release applied
                for name in sorted(names, key=CORE.steps.index):
                    store.run(record, (set_name, name, now))
        for step in todo:
            for sql in step.statements:
                store.run(sql)
            store.run(record, (step.migration_set, step.name, now))
        store.run(
            f"INSERT INTO meta (key, value) VALUES ('schema_version', {d.p}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (REFUSED_BY_OLD_RELEASES,),
        )
    return [step.label for step in todo]


# Step SQL both backends share, as written when the step was added.
PARTIAL_INDEXES = [
    "DROP INDEX idx_memories_deleted_at",
    "DROP INDEX idx_memories_session_id",
    "CREATE INDEX idx_memories_deleted ON memories (deleted_at) WHERE deleted_at IS NOT NULL",
    "CREATE INDEX idx_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL",
    "CREATE INDEX idx_memories_session ON memories (session_id, created_at) WHERE session_id IS NOT NULL",
]


RECORD_KINDS = [
    "ALTER TABLE memories ADD COLUMN kind TEXT NOT NULL DEFAULT 'memory' CHECK (kind IN ('memory', 'message', 'chunk'))",
    "CREATE INDEX idx_memories_unembedded ON memories (created_at) WHERE embedding IS NULL",
    # stats count each kind from an index, as they counted memories before
    "DROP INDEX idx_memories_category",
    "CREATE INDEX idx_memories_kind_category ON memories (kind, category)",
    "CREATE INDEX idx_memories_kind_scope ON memories (kind, scope)",
]

# A session's turns next to a hit are one index range, the scope included (it was a bitmap AND of the
# session and scope indexes on PostgreSQL: 70 ms a search at 100k messages). Once appended to record-kinds,
# which the stores that had that step already never ran again: a step of its own reaches them too.
SESSION_INDEX_SCOPE = [
    "DROP INDEX IF EXISTS idx_memories_session",
    "CREATE INDEX idx_memories_session ON memories (session_id, scope, created_at) WHERE session_id IS NOT NULL",
]


#: the message-windows step after each backend has let the kind check take windows: their index, and every
#: message that may be longer than the embedding model's window back in the backfill's queue, which cuts it
#: into windows (`windows.py`; a text of at most `MAY_EXCEED` characters fits every model's window)
MAY_EXCEED = 256
OLD_KIND_CHECK = "kind IN ('memory', 'message', 'chunk')"
MESSAGE_WINDOWS = [
    "CREATE INDEX idx_memories_windows ON memories (source_id) WHERE kind = 'window'",
    "UPDATE memories SET embedding = NULL, embedding_model = NULL "
    f"WHERE kind = 'message' AND embedding IS NOT NULL AND length(content) > {MAY_EXCEED}",
]


#: the sealed-secrets step, alike on both backends: the column, and a note in `meta` when secrets were
#: stored in plain text before it, which the engine seals once it has the key (`engine/_secrets.py`)
UNSEALED_KEY = "secrets_unsealed"
SEALED_SECRETS = [
    "ALTER TABLE memories ADD COLUMN sealed TEXT",
    f"INSERT INTO meta (key, value) SELECT '{UNSEALED_KEY}', '1' "
    "WHERE EXISTS (SELECT 1 FROM memories WHERE visibility = 'secret' AND kind = 'memory')",
]


#: the list-indexes step, alike on both backends
LIST_INDEXES = ["CREATE INDEX idx_memories_importance ON memories (importance, created_at)",
                "CREATE INDEX idx_memories_source_type ON memories (source_type, created_at)"]

#: the segment-summary step, alike on both backends
SEGMENT_SUMMARY = ["ALTER TABLE segments ADD COLUMN summary TEXT"]


def validity(timestamp: str, uuid: str) -> list[str]:
    """The validity step in a backend's timestamp and UUID types. Columns only: existing rows keep
    NULL (valid from their `created_at`, still true), so no row is rewritten."""
    return [
        f"ALTER TABLE memories ADD COLUMN valid_from {timestamp}",
        f"ALTER TABLE memories ADD COLUMN valid_to {timestamp}",
        f"ALTER TABLE memories ADD COLUMN superseded_by {uuid}",
        f"ALTER TABLE memories ADD COLUMN supersedes {uuid}",
    ]


def api_tokens_table(timestamp: str) -> str:
    """The api-tokens step in a backend's timestamp type; IF NOT EXISTS: older SQLite stores have it."""
    return f"""CREATE TABLE IF NOT EXISTS api_tokens (
        id TEXT PRIMARY KEY,
        name TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'service')),
        user_id TEXT,
        agent_id TEXT,
        scopes TEXT,
        salt TEXT NOT NULL,
        hash TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        revoked_at {timestamp}
    )"""
