"""What changed in PostgreSQL scopes since this process last read them: the rows written since and
the ids that left, exactly, whichever process wrote them and whenever they committed.

Why: what a process holds of a scope (its vectors, `pg_vectors.py`; its words, `pg_text.py`) must
answer as the database would at every search, and reading the scope whole, or even counting and
summing its rows, costs what its rows cost (a user's 120,000: ~20 ms). Asking "what is new" by a
sequence number misses a transaction that took its number early and committed late; asking by
transaction id does not.

How: every row carries the id of the transaction that last wrote it (`memories.wxid`: the column's
default, and the update trigger's), and a row that leaves a scope, deleted or moved to another,
leaves a departure (`memory_departures`, by trigger). A read (one statement, one snapshot) also keeps
that snapshot: which transactions it could not see (those running then, and every later one). The
next read takes the rows and departures those transactions wrote, a few for a scope written a few
times, nothing for one not written, and nothing of a transaction that has been running all along and
wrote elsewhere. Departures older than a day are pruned at the next hard delete, and an erasure
prunes its person's (`PRUNE_DEPARTURES`, `forget_departures`); a scope whose last read did not see
that transaction is read whole again. `ScopeGate`: when a scope not held yet is taken in."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Sequence

if TYPE_CHECKING:
    from .postgres import PostgresStore

_SEEN = 10_000  # scopes remembered as searched once
_RECOUNT_S = 60.0  # a scope not held is counted again after this long

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
    # a TRUNCATE leaves no departures: every scope held anywhere is read whole again
    """CREATE FUNCTION memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO meta (key, value) VALUES ('departures_pruned', pg_current_xact_id()::text)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER memories_truncated AFTER TRUNCATE ON memories FOR EACH STATEMENT EXECUTE FUNCTION memories_truncated()",
]

#: departures a day old, gone, and this transaction noted as the last that removed departures
#: (`meta.departures_pruned`): a read whose snapshot did not see it may have needed them. The last to
#: write that row committed last, so a snapshot that saw it saw every earlier one.
PRUNE_DEPARTURES = """WITH gone AS (
        DELETE FROM memory_departures WHERE departed_at < now() - interval '1 day' RETURNING 1
    )
    INSERT INTO meta (key, value) SELECT 'departures_pruned', pg_current_xact_id()::text FROM gone HAVING count(*) > 0
    ON CONFLICT (key) DO UPDATE SET value = excluded.value"""


@dataclass(frozen=True)
class Snapshot:
    """What a read saw, as PostgreSQL's `pg_current_snapshot()`: every transaction below `xmax` but those
    in `running`. A write it missed was made by one of those, or by one at or above `xmax`. `started`:
    when the server started; a server started since (a restart, a failover, a restore to a point in
    time) may have a history in which those numbers mean other transactions."""

    xmin: int
    xmax: int
    running: tuple[int, ...]
    started: str = ""

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        """`pg_current_snapshot()`, the server's start and whether it is a standby, joined by '/'. A
        standby's snapshot lists no running transaction (they are all in its sub-transactions' list, which
        SQL does not show): there every one from `xmin` on counts as running."""
        snapshot, started, standby = text.rsplit("/", 2)
        xmin, xmax, running = snapshot.split(":")
        if standby == "true":
            return cls(int(xmin), int(xmin), (), started)
        return cls(int(xmin), int(xmax), tuple(int(x) for x in running.split(",") if x), started)

    def saw(self, xid: int) -> bool:
        """Whether this snapshot saw transaction `xid` end."""
        return xid < self.xmax and xid not in self.running


@dataclass
class Changes:
    rows: list[tuple]  # the columns asked for, of the rows written since (of every row, when `whole`)
    departed: list[str]  # ids that left the scope since (empty when `whole`)
    whole: bool  # `rows` is the scope: what is held of it goes
    since: Snapshot  # where the next read starts
    stale: bool = False  # departures it may have needed were removed: what is held must be read whole again


def read_changes(store: PostgresStore, scopes: dict[str, Snapshot | None],
                 columns: Sequence[str]) -> dict[str, Changes]:
    """For each scope, the rows written since its `Snapshot` (a previous read's `Changes.since`; None:
    the whole scope), with `columns` (SQL over `memories m`, the first the id as text; values in
    PostgreSQL's binary format), and the ids that left it.

    One statement for every scope, so one snapshot and one round trip (~1 ms on a busy server). A scope
    whose departures since were pruned comes back `stale`: the caller reads it whole again.
    Departures of rows that are back in the scope are left out: the row was read when it came back,
    and its departure may be read again later. Writes numbered at or above this snapshot's `xmax`
    come from another cluster (a database restored from a dump keeps its old transaction ids): they
    were read whole here, and only a write made here can change them."""
    nulls = ", NULL" * (len(columns) - 1)
    branches, params = [], []
    for n, (scope, since) in enumerate(scopes.items()):
        branches.append(f"SELECT 0, {n}, {', '.join(columns)} FROM memories m WHERE m.scope = %s"
                        + ("" if since is None else f" AND {_WRITTEN_SINCE.format(t='m')}"))
        params += [scope] if since is None else [scope, *_since(since)]
        if since is not None:
            branches.append(f"SELECT 1, {n}, d.id::text{nulls} FROM memory_departures d WHERE d.scope = %s "
                            f"AND {_WRITTEN_SINCE.format(t='d')} AND NOT EXISTS "
                            "(SELECT 1 FROM memories m WHERE m.id = d.id AND m.scope = d.scope)")
            params += [scope, *_since(since)]
    branches.append("SELECT 2, 0, pg_current_snapshot()::text || '/' || pg_postmaster_start_time()::text || '/' || "
                    f"pg_is_in_recovery()::text{nulls}")
    branches.append(f"SELECT 3, 0, (SELECT value FROM meta WHERE key = 'departures_pruned'){nulls}")
    names = list(scopes)
    found = {scope: Changes([], [], scopes[scope] is None, Snapshot(0, 0, ())) for scope in names}
    now, pruned = Snapshot(0, 0, ()), None
    for row in store.run(" UNION ALL ".join(branches), params, binary=True):
        if row[0] == 0:
            found[names[row[1]]].rows.append(row[2:])
        elif row[0] == 1:
            found[names[row[1]]].departed.append(row[2])
        elif row[0] == 2:
            now = Snapshot.parse(row[2])
        else:
            pruned = row[2]
    for scope, changes in found.items():
        changes.since = now
        since = scopes[scope]
        if since is not None:
            # departures removed by a transaction its last read did not see (one of another cluster, at or
            # above `xmax`, is not of this history), or another history since
            changes.stale = ((pruned is not None and int(pruned) < now.xmax and not since.saw(int(pruned)))
                             or since.started != now.started or since.xmax > now.xmax)
    return found


# written by a transaction the previous snapshot could not see, and not from another cluster
_WRITTEN_SINCE = ("({t}.wxid >= %s::xid8 OR {t}.wxid = ANY(%s::xid8[])) "
                  "AND {t}.wxid < pg_snapshot_xmax(pg_current_snapshot())")


def _since(snapshot: Snapshot) -> list[Any]:
    return [str(snapshot.xmax), [str(x) for x in snapshot.running]]


def forget_departures(store: PostgresStore, scope: str) -> None:
    """In an erasure's transaction: the departures that name the erased scope go (theirs, and those
    of older deletes there), and the transaction is noted as the last that removed departures, so
    every process reads the scopes it held before it whole once."""
    store.run("""WITH gone AS (
            DELETE FROM memory_departures WHERE scope = %s OR wxid = pg_current_xact_id() RETURNING wxid
        )
        INSERT INTO meta (key, value) SELECT 'departures_pruned', pg_current_xact_id()::text
        ON CONFLICT (key) DO UPDATE SET value = excluded.value""", (scope,))


class ScopeGate:
    """What a held structure (`pg_vectors.py`, `pg_text.py`) asks of a scope it does not hold: was it
    searched before in this process (a scope is held from its second search: a one-off command, which
    searches once, reads in SQL rather than reading every row to hold it), and how many rows has it
    (counted at most once a minute while it is not held)."""

    def __init__(self, store: PostgresStore):
        self._store = store
        self._seen: OrderedDict[str, None] = OrderedDict()  # searched once, not held (yet)
        self._sizes: dict[str, tuple[float, int]] = {}  # scope -> (when counted, rows)

    def first_search(self, scopes: Sequence[str], held: Collection[str]) -> bool:
        """Whether any of `scopes`, not `held`, is searched for the first time (it is noted as searched)."""
        new = [s for s in scopes if s not in held and s not in self._seen]
        for scope in new:
            self._seen[scope] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        return bool(new)

    def rows(self, scope: str) -> int:
        when, rows = self._sizes.get(scope, (-_RECOUNT_S, 0))
        if time.monotonic() - when >= _RECOUNT_S:
            rows = int(self._store.run("SELECT count(*) FROM memories WHERE scope = %s", (scope,))[0][0])
            self._sizes[scope] = (time.monotonic(), rows)
        return rows

    def holding(self, scope: str) -> None:
        """The scope is to be held: its count goes (counted afresh if it is let go)."""
        self._sizes.pop(scope, None)
