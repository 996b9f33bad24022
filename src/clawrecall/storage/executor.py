"""What the modules that keep one table each (memories.py, history.py, startup.py, record.py,
jobs.py, tokens.py, knowledge.py, insight.py, staging.py, migrations.py) need of a store:
`Executor`, a protocol `sql.Store` meets, so they import no store and the store imports them; and `TableRows`, a declared table's rows as models.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Generic, Iterable, Protocol, Sequence, TypeVar

from pydantic import BaseModel

from .base import chunks
from .dialect import Dialect, RowMap
from .schema import Table


class Executor(Protocol):
    """Statements in the store's dialect, joining its current transaction (`Store.run` and the rest)."""

    @property
    def dialect(self) -> Dialect: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def rowcount(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def copy_in(self, table: Table, fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> None: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


M = TypeVar("M", bound=BaseModel)


class TableRows(Generic[M]):
    """Insert, replace and read whole rows of one declared table as models."""

    table: Table
    model: type[M]

    def __init__(self, store: Executor):
        self._store = store
        self._map = RowMap(store.dialect, self.table)
        self._select = f"SELECT {', '.join(f't.{c}' for c in self._map.fields)} FROM {self.table.name} t"

    def insert(self, rows: Sequence[M]) -> None:
        s = self._store
        with s.transaction():
            s.run_many(
                f"INSERT INTO {self.table.name} ({self._map.columns}) VALUES ({s.dialect.marks(len(self._map.fields))})",
                (self._map.row(r) for r in rows),
            )

    def replace(self, row: M) -> None:
        """Every column of the row with this id (a table's first column)."""
        s, p = self._store, self._store.dialect.p
        assignments = ", ".join(f"{c} = {p}" for c in self._map.fields[1:])
        row_id, *values = self._map.row(row)
        with s.transaction():
            s.run(f"UPDATE {self.table.name} SET {assignments} WHERE id = {p}", (*values, row_id))

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[M]:
        """Rows selected as `self._select` + `sql`."""
        return [self._map.read(self.model, r) for r in self._store.run(f"{self._select} {sql}", params)]

    def get(self, row_id: str, *, for_update: bool = False) -> M | None:
        d = self._store.dialect
        rows = self._read(f"WHERE t.id = {d.p}{d.for_update if for_update else ''}", (row_id,))
        return rows[0] if rows else None

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if not values:
            return "1 = 0", []
        return self._store.dialect.one_of(f"t.{column}", values, self.table.column(column).type)

    def _ids_where(self, column: str, values: Sequence[Any]) -> list[str]:
        """Ids of the rows whose `column` is one of `values`, 500 values a query."""
        out: list[str] = []
        for chunk in chunks(values):
            where, params = self._in(column, chunk)
            out += [str(r[0]) for r in self._store.run(f"SELECT t.id FROM {self.table.name} t WHERE {where}", params)]
        return out

    def _in_scopes(self, scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
        """Rows of these scopes; `None` (the administrator's reads) is every scope."""
        return self._in("scope", scopes) if scopes is not None else ("1 = 1", [])

    def owned(self, column: str, owner: str, scope: str) -> list[M]:
        """One person's rows, in a table with owner columns (segments, files): those it owns (`column` is
        user_id or agent_id), and any in its scope."""
        if column not in ("user_id", "agent_id"):
            raise ValueError(f"not an owner column: {column}")
        p = self._store.dialect.p
        return self._read(f"WHERE t.{column} = {p} OR t.scope = {p}", (owner, scope))
