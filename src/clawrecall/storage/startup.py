"""`store.startup`: the entries a session starts with (a scope's identity), keyed by (scope, key)."""

from __future__ import annotations

from typing import Sequence

from ..models import StartupEntry
from .dialect import RowMap
from .executor import Executor
from .schema import STARTUP


class StartupEntries:
    """The startup table's reads and writes."""

    def __init__(self, store: Executor):
        self._store = store
        self._map = RowMap(store.dialect, STARTUP)

    def of(self, scopes: Sequence[str] | None) -> list[StartupEntry]:
        """Entries of these scopes (all when None), by priority then key."""
        where = "1 = 1" if scopes is None else f"scope IN ({self._store.dialect.marks(len(scopes))})"
        rows = self._store.run(f"SELECT {self._map.columns} FROM startup WHERE {where} ORDER BY priority, key", scopes or [])
        return [self._map.read(StartupEntry, r) for r in rows]

    def put(self, entry: StartupEntry) -> None:
        """The entry of its (scope, key), in place of any there was."""
        s, fields = self._store, self._map.fields
        updates = ", ".join(f"{c} = excluded.{c}" for c in fields if c not in STARTUP.key)
        with s.transaction():
            s.run(f"INSERT INTO startup ({self._map.columns}) VALUES ({s.dialect.marks(len(fields))}) "
                  f"ON CONFLICT ({', '.join(STARTUP.key)}) DO UPDATE SET {updates}", self._map.row(entry))

    def count(self, scope: str) -> int:
        return self._store.run(f"SELECT count(*) FROM startup WHERE scope = {self._store.dialect.p}", (scope,))[0][0]

    def delete_scope(self, scope: str) -> int:
        """Remove every startup entry of a scope; how many there were."""
        s = self._store
        with s.transaction():
            return s.rowcount(f"DELETE FROM startup WHERE scope = {s.dialect.p}", (scope,))

    def delete(self, scope: str, key: str) -> bool:
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            return s.rowcount(f"DELETE FROM startup WHERE scope = {p} AND key = {p}", (scope, key)) > 0
