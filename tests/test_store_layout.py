"""The store's layout (docs/architecture.md, "The store"): the backend is its connection, its candidate
legs and a few named hooks; each entity's rows go through an accessor of their own, and the SQL of
every accessor runs alike on both backends."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np

from clawrecall.models import MemoryRecord, StartupEntry
from clawrecall.storage import HistoryDraft, open_store
from clawrecall.storage.filters import Filters
from clawrecall.storage.history import History
from clawrecall.storage.memories import Memories
from clawrecall.storage.postgres import PostgresStore
from clawrecall.storage.sql import Store
from clawrecall.storage.sqlite import SQLiteStore
from clawrecall.storage.startup import StartupEntries

#: what a backend is: statements, the candidate legs, the vector index, migrations, meta, and the
#: hooks `memories.MemoryStore` and `history.HistoryStore` name. A row of an entity is not read or written here.
STORE_SURFACE = {
    "beside", "close", "copy_in", "pinned", "rowcount", "run", "run_many", "snapshot", "transaction",
    "fuzzy_candidates", "nearest", "text_candidates", "vector_candidates", "vectors", "where",
    "build_vector_index", "deferred_vector_index", "drop_vector_index", "lock_writes", "swap_staged_vectors",
    "lock_schema", "migrate", "migration_extras", "migration_steps", "pending_migrations", "schema_version",
    "table_exists", "get_meta", "set_meta", "integrity_problems", "is_conflict", "local_folder",
    "after_insert", "after_remove", "after_vectors", "before_insert", "erased", "size_bytes",
    "before_history", "after_history", "watch_history",
}
ACCESSORS = {"memories", "history", "startup", "messages", "segments", "files", "jobs", "occurrences",
             "search_log", "api_tokens", "staged"}
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_a_backend_is_its_connection_legs_and_hooks_and_nothing_more():
    assert public_methods(Store) == STORE_SURFACE
    assert public_methods(SQLiteStore) == STORE_SURFACE
    assert public_methods(PostgresStore) - STORE_SURFACE == {"has_vector_index", "reads_exactly"}


def record(content: str, at: datetime, **fields) -> MemoryRecord:
    return MemoryRecord(id=str(uuid.uuid4()), content=content, created_at=at, updated_at=at, **fields)


def test_each_entity_is_read_and_written_through_its_accessor_on_both_backends(db_target):
    store = open_store(db_target)
    try:
        assert {n for n in ACCESSORS if hasattr(store, n)} == ACCESSORS
        assert isinstance(store.memories, Memories) and isinstance(store.history, History)
        assert isinstance(store.startup, StartupEntries)

        # memories: the backend's bulk write (binary COPY on PostgreSQL), vectors included
        rows = [record(f"note {i}", T0 + timedelta(seconds=i), scope="user:ann", user_id="ann", session_id="s")
                for i in range(3)]
        vectors = np.eye(3, 384, dtype=np.float32)
        store.memories.insert(rows, vectors)
        found = store.memories.fetch([r.id for r in rows])
        assert [found[r.id].content for r in rows] == ["note 0", "note 1", "note 2"]
        assert store.memories.count(Filters(scopes=["user:ann"])) == 3
        assert store.memories.ids(Filters(scopes=["user:ann"])) == [r.id for r in rows]
        assert store.memories.session_neighbors([rows[1].id], Filters(scopes=["user:ann"])) == {
            rows[1].id: [rows[0].id, rows[2].id]}
        assert [o.id for o in store.memories.owned("user_id", "ann", "user:ann")] == [r.id for r in rows]
        assert np.allclose(store.vectors([rows[2].id])[rows[2].id], vectors[2], atol=1e-3)

        # history: drafts hold their snapshots as JSON text already; the bulk write keeps them as they are
        snapshot = json.dumps({"content": "note 0", "tags": ["a"]})
        store.history.add([HistoryDraft(rows[0].id, "add", None, snapshot, "user:ann", T0),
                           HistoryDraft(rows[0].id, "delete", snapshot, None, "user:ann", T0 + timedelta(hours=1))])
        events = store.history.of(rows[0].id)
        assert [(e.action, e.before, e.after, e.at) for e in events] == [
            ("add", None, {"content": "note 0", "tags": ["a"]}, T0),
            ("delete", {"content": "note 0", "tags": ["a"]}, None, T0 + timedelta(hours=1))]
        assert store.history.ids_with_prefix(rows[0].id[:6]) == [rows[0].id]
        assert store.history.count([rows[0].id, rows[1].id]) == 2
        assert store.history.rename_actor("user:ann", "user:erased") == 2 and store.history.actors() == ["user:erased"]
        store.history.erase([rows[0].id])
        assert [(e.before, e.after) for e in store.history.of(rows[0].id)] == [(None, None), (None, None)]

        # a hard delete takes the row, and no later read finds it
        store.memories.remove([rows[0].id])
        assert rows[0].id not in store.memories.fetch([r.id for r in rows])

        # startup entries, keyed by (scope, key)
        store.startup.put(StartupEntry(scope="user:ann", key="name", content="Ann", updated_at=T0))
        store.startup.put(StartupEntry(scope="user:ann", key="name", content="Ann B.", priority=0, updated_at=T0))
        store.startup.put(StartupEntry(scope="user:ann", key="tone", content="brief", updated_at=T0))
        assert [(e.key, e.content) for e in store.startup.of(["user:ann"])] == [("name", "Ann B."), ("tone", "brief")]
        assert store.startup.count("user:ann") == 2
        assert store.startup.delete("user:ann", "tone") and not store.startup.delete("user:ann", "tone")
        assert store.startup.delete_scope("user:ann") == 1 and store.startup.of(None) == []
    finally:
        store.close()
