"""What changed in a PostgreSQL scope since this process last read it: the rows written since and
the ids that left, exactly, whichever process wrote them and whenever they committed.

Why: what a process holds of a scope (its vectors, `pg_vectors.py`; its words, `pg_text.py`) must
answer as the database would at every search, and reading the scope whole, or even counting and
summing its rows, costs what its rows cost (a user's 120,000: ~20 ms). Asking "what is new" by a
sequence number misses a transaction that took its number early and committed late; asking by
transaction id does not.

How: every row carries the id of the transaction that last wrote it (`memories.wxid`: the column's
default, and the update trigger's), and a row that leaves a scope, deleted or moved to another,
leaves a departure (`memory_departures`, by trigger). A read first notes the oldest transaction its
snapshot cannot see (`pg_snapshot_xmin`): a write it missed was made by that transaction or a later
one. The next read takes the rows and departures written by those transactions (`wxid` at or above
it), a few for a scope written a few times, and nothing older. Departures older than a day are
pruned at the next hard delete (`PRUNE_DEPARTURES`); a scope last read before the pruned ones is read
whole again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .postgres import PostgresStore

#: the change feed's objects: the column, its trigger, its index, the departures.
#: Rows written before the column have no `wxid` (NULL): a scope's first read is whole, and their next
#: write gives them one.
CHANGE_FEED = [
    "ALTER TABLE memories ADD COLUMN wxid xid8",
    "ALTER TABLE memories ALTER COLUMN wxid SET DEFAULT pg_current_xact_id()",
    """CREATE FUNCTION memories_written() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.wxid := pg_current_xact_id();
        RETURN NEW;
    END $$""",
    "CREATE TRIGGER memories_written BEFORE UPDATE ON memories FOR EACH ROW EXECUTE FUNCTION memories_written()",
    "CREATE INDEX idx_memories_scope_wxid ON memories (scope, wxid)",
    """CREATE TABLE memory_departures (
        scope TEXT NOT NULL,
        id UUID NOT NULL,
        wxid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        departed_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    "CREATE INDEX idx_memory_departures_scope_wxid ON memory_departures (scope, wxid)",
    "CREATE INDEX idx_memory_departures_departed_at ON memory_departures (departed_at)",
    """CREATE FUNCTION memories_departed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_LEVEL = 'STATEMENT' THEN
            INSERT INTO memory_departures (scope, id) SELECT scope, id FROM gone;
        ELSE
            INSERT INTO memory_departures (scope, id) VALUES (OLD.scope, OLD.id);
        END IF;
        RETURN NULL;
    END $$""",
    # one statement-level insert for a bulk delete (an erasure); a row-level one only for a scope change
    "CREATE TRIGGER memories_deleted AFTER DELETE ON memories REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION memories_departed()",
    "CREATE TRIGGER memories_moved AFTER UPDATE OF scope ON memories FOR EACH ROW "
    "WHEN (OLD.scope IS DISTINCT FROM NEW.scope) EXECUTE FUNCTION memories_departed()",
]

#: departures a day old, gone; the newest of them noted, so a read from before it knows to read whole
PRUNE_DEPARTURES = """WITH gone AS (
        DELETE FROM memory_departures WHERE departed_at < now() - interval '1 day' RETURNING wxid
    )
    INSERT INTO meta (key, value) SELECT 'departures_pruned', max(wxid)::text FROM gone HAVING count(*) > 0
    ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value::xid8, excluded.value::xid8)::text"""


@dataclass
class Changes:
    rows: list[tuple]  # the columns asked for, of the rows written since (of every row, when `whole`)
    departed: list[str]  # ids that left the scope since (empty when `whole`)
    whole: bool  # `rows` is the scope: what is held of it goes
    since: int  # where the next read starts


def read_changes(store: PostgresStore, scope: str, columns: str, since: int | None) -> Changes:
    """The rows of `scope` written since `since` (a previous read's `Changes.since`; None: the whole
    scope), with `columns` (SQL over `memories m`, in PostgreSQL's binary format), and the ids that left it."""
    with store.pinned():
        # first: every write a later statement misses was made by a transaction at or after this one
        now = int(store._run("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")[0][0])
        if since is not None:
            rows = _rows(store, columns, "m.scope = %s AND m.wxid >= %s::xid8", [scope, str(since)])
            # the departures and the pruning horizon in one snapshot: none at or after `since` is missing
            # unless the horizon says so
            pruned, departed = store._run(
                "SELECT (SELECT value FROM meta WHERE key = 'departures_pruned'), "
                "array(SELECT id::text FROM memory_departures WHERE scope = %s AND wxid >= %s::xid8)",
                (scope, str(since)))[0]
            if pruned is None or int(pruned) < since:
                return Changes(rows, list(departed), False, now)
        return Changes(_rows(store, columns, "m.scope = %s", [scope]), [], True, now)


def _rows(store: PostgresStore, columns: str, where: str, params: list[Any]) -> list[tuple]:
    return store._run(f"SELECT {columns} FROM memories m WHERE {where}", params, binary=True)
