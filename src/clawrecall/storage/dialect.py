"""What differs between SQLite and PostgreSQL in SQL text and values: the parameter mark, the
column types, and how a logical value (a time, JSON, tags, a vector) is stored and read back.

Shared SQL is composed with the dialect's mark (`d.p`, `d.marks(n)`) and sent to the driver as
written: PostgreSQL receives `%s` placeholders and its own operators (jsonb's `?`, a literal
'?') untouched. A literal `%` in PostgreSQL SQL is written `%%` (psycopg's rule).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .._time import from_db, to_db
from .schema import Column, ColumnType, Index, Table

if TYPE_CHECKING:
    import numpy as np

Convert = Callable[[Any], Any]


_JSON = json.JSONEncoder(default=str)  # one encoder: `json.dumps(default=…)` builds one a call


def _dumps(value: Any) -> str:
    return _JSON.encode(value) if value != {} else "{}"


def _loads(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    return {} if raw == "{}" else json.loads(raw)  # most memories have no metadata: skip the parser


class Dialect:
    name: str
    #: the parameter placeholder
    p: str
    #: the column that orders rows by insertion
    order_column: str
    #: appended to a SELECT that reads a row in a write transaction to lock it
    for_update: str
    #: appended to the SELECT that picks a job to claim: rows other workers hold are passed over, not waited for
    skip_locked: str
    #: a stored vector's dimensions, as SQL (`{}` is the column)
    vector_dims: str
    types: dict[ColumnType, str]
    #: value -> stored value (absent: stored as it is)
    to_db: dict[ColumnType, Convert]
    #: stored value -> value (absent: read as it is)
    from_db: dict[ColumnType, Convert]
    #: JSON text -> stored value of a JSON column (None: stored as it is)
    json_text: Convert | None = None

    def marks(self, n: int) -> str:
        return ", ".join([self.p] * n)

    def one_of(self, column: str, values: Sequence[Any], type: ColumnType) -> tuple[str, list[Any]]:
        """SQL saying `column` (of logical `type`) is one of `values` (at least one), and its parameters."""
        return f"{column} IN ({self.marks(len(values))})", list(values)

    def ts(self, value: datetime | None) -> Any:
        convert = self.to_db.get("time")
        return value if convert is None else convert(value)

    # -- DDL ------------------------------------------------------------------------------
    def create_table(self, table: Table) -> list[str]:
        """CREATE TABLE and CREATE INDEX statements for a table as declared now."""
        lines = [self._order_column()] if table.ordered else []
        single_key = table.key[0] if len(table.key) == 1 else None
        for col in table.columns:
            if col.only in (None, self.name):
                lines.append(self.column_sql(col, key=col.name == single_key, ordered=table.ordered))
        if single_key is None:
            lines.append(f"PRIMARY KEY ({', '.join(table.key)})")
        body = ",\n    ".join(lines)
        return [f"CREATE TABLE {table.name} (\n    {body}\n)", *(self.create_index(table, i) for i in table.indexes)]

    def create_index(self, table: Table, index: Index) -> str:
        where = "" if index.where is None else f" WHERE {index.where}"
        return f"CREATE {'UNIQUE ' if index.unique else ''}INDEX {index.name} ON {table.name} ({index.columns}){where}"

    def column_sql(self, col: Column, *, key: bool = False, ordered: bool = False) -> str:
        """One column's definition. In an ordered table the insertion order is the SQLite primary
        key, so there the declared key is a NOT NULL UNIQUE column (see `_order_column`)."""
        parts = [col.name, self.types[col.type]]
        if key and not (ordered and self.name == "sqlite"):
            parts.append("PRIMARY KEY")
        else:
            if not col.nullable:
                parts.append("NOT NULL")
            if key:
                parts.append("UNIQUE")
        if col.default is not None:
            parts.append("DEFAULT " + self.literal(col))
        if col.check is not None:
            parts.append(f"CHECK ({col.check})")
        return " ".join(parts)

    def literal(self, col: Column) -> str:
        value = col.default
        if col.type in ("tags", "json"):
            if value not in ([], {}):
                raise ValueError(f"{col.name}: only an empty default is supported")
            return "'[]'" if col.type == "tags" and self.name == "sqlite" else "'{}'"
        if isinstance(value, bool):
            return self.bool_literal(value)
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return str(value)

    def bool_literal(self, value: bool) -> str:
        raise NotImplementedError

    def _order_column(self) -> str:
        raise NotImplementedError

    def period(self, column: str, bucket: str) -> str:
        """SQL for the UTC day (`YYYY-MM-DD`) or month (`YYYY-MM`) a time column falls in, as text."""
        raise NotImplementedError

    def tags_any(self, alias: str, tags: list[str]) -> tuple[str, list[Any]]:
        """The rows of `alias` with any of `tags`: SQL and its parameters."""
        raise NotImplementedError


class SQLiteDialect(Dialect):
    name = "sqlite"
    p = "?"
    order_column = "rowid"
    for_update = ""  # BEGIN IMMEDIATE holds the whole file
    skip_locked = ""  # one writer at a time: a claim is alone in its BEGIN IMMEDIATE
    vector_dims = "length({}) / 4"  # float32 bytes
    types = {
        "uuid": "TEXT", "text": "TEXT", "real": "REAL", "int": "INTEGER", "bool": "INTEGER", "time": "TEXT",
        "json": "TEXT", "tags": "TEXT", "vector": "BLOB", "serial": "INTEGER",
    }

    def __init__(self) -> None:
        self.to_db = {"time": to_db, "json": _dumps, "tags": _sqlite_tags, "vector": _sqlite_vector}
        self.from_db = {"time": from_db, "json": _loads, "tags": _sqlite_from_tags, "bool": bool,
                        "vector": _sqlite_from_vector}

    def bool_literal(self, value: bool) -> str:
        return "1" if value else "0"

    def _order_column(self) -> str:
        return "rowid INTEGER PRIMARY KEY"

    def period(self, column: str, bucket: str) -> str:  # stored as UTC ISO text
        return f"substr({column}, 1, {10 if bucket == 'day' else 7})"

    def tags_any(self, alias: str, tags: list[str]) -> tuple[str, list[Any]]:
        return f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE value IN ({self.marks(len(tags))}))", list(tags)


class PostgresDialect(Dialect):
    name = "postgres"
    p = "%s"
    order_column = "seq"
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    vector_dims = "vector_dims({})"
    types = {
        "uuid": "UUID", "text": "TEXT", "real": "REAL", "int": "INTEGER", "bool": "BOOLEAN", "time": "TIMESTAMPTZ",
        # vectors in half precision: a scope's exact read costs a third less (it is the heap rows it reads) and the
        # HNSW index half the memory; cosines move by ~1e-4 (docs/scaling.md)
        "json": "JSONB", "tags": "TEXT[]", "vector": "halfvec", "serial": "BIGINT GENERATED ALWAYS AS IDENTITY",
        "tsvector": "tsvector",
    }
    #: binary COPY needs each column's type named
    copy_types = {
        "uuid": "uuid", "text": "text", "real": "real", "int": "int4", "bool": "bool", "time": "timestamptz",
        "json": "jsonb", "tags": "text[]", "vector": "halfvec",
    }

    def __init__(self) -> None:
        self.json_text = _pg_jsonb_text
        self.to_db = {"uuid": uuid.UUID, "json": _pg_jsonb, "tags": list, "vector": _pg_vector}
        self.from_db = {"uuid": str, "time": _pg_utc, "tags": _pg_from_tags, "json": _loads, "vector": _pg_from_vector}

    def bool_literal(self, value: bool) -> str:
        return "true" if value else "false"

    def one_of(self, column: str, values: Sequence[Any], type: ColumnType) -> tuple[str, list[Any]]:
        # one array parameter whatever the count: the statement's text stays the same, so psycopg prepares
        # it once per connection instead of the server planning it at every call
        return f"{column} = ANY({self.p}::{self.types[type]}[])", [list(values)]

    def _order_column(self) -> str:
        return "seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE"

    def period(self, column: str, bucket: str) -> str:
        return f"to_char({column} AT TIME ZONE 'UTC', '{'YYYY-MM-DD' if bucket == 'day' else 'YYYY-MM'}')"

    def tags_any(self, alias: str, tags: list[str]) -> tuple[str, list[Any]]:
        return f"{alias}.tags && {self.p}::text[]", [list(tags)]


def _sqlite_tags(tags: list[str]) -> str:
    return json.dumps(tags) if tags else "[]"


def _sqlite_from_tags(raw: str) -> list[str]:
    return [] if raw == "[]" else json.loads(raw)


def _sqlite_vector(vector: np.ndarray) -> bytes:
    return vector.astype("float32", copy=False).tobytes()


def _sqlite_from_vector(raw: bytes | None) -> np.ndarray | None:
    import numpy as np

    return None if raw is None else np.frombuffer(raw, dtype=np.float32)


def _pg_jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def _pg_jsonb_text(text: str) -> Any:
    """Already-serialised JSON for a jsonb column (as is: not serialised again as a string)."""
    from psycopg.types.json import Jsonb

    return Jsonb(text, dumps=str)


def _pg_utc(raw: datetime | None) -> datetime | None:
    return None if raw is None else raw.astimezone(timezone.utc)


def _pg_from_tags(raw: list[str] | None) -> list[str]:
    return list(raw or [])


def _pg_vector(vector: np.ndarray) -> Any:
    from pgvector import HalfVector

    return HalfVector(vector)


def _pg_from_vector(raw: Any) -> np.ndarray | None:
    import numpy as np

    if raw is None:
        return None
    return np.asarray(raw.to_numpy() if hasattr(raw, "to_numpy") else raw, dtype=np.float32)


class RowMap:
    """A table's row <-> object mapping in one dialect, derived from its declaration: the row
    object's attributes are named as the columns (`Table.fields`, or the `fields` given).

    `row` and `read` are generated from the declaration as straight-line functions (as
    `dataclasses` generates `__init__`): they are on every add and every search, and a loop over
    the columns cost ~10 % more per row than writing each column out."""

    def __init__(self, d: Dialect, table: Table, fields: tuple[str, ...] | None = None, *, json_text: bool = False):
        """`json_text`: the object holds its JSON fields serialised already (written as they are)."""
        self.fields = fields or table.fields
        self.columns = ", ".join(self.fields)
        cols = [table.column(f) for f in self.fields]
        if not all(c.name.isidentifier() for c in cols):
            raise ValueError(f"{table.name}: a column name is not an identifier")
        to_db = {**d.to_db, "json": d.json_text} if json_text else d.to_db
        convert: dict[str, Any] = {}  # the converters, then what exec defines: row() and read()
        out, read = [], []
        for i, c in enumerate(cols):
            if (fn := _keep_none(to_db.get(c.type), c)) is not None:
                convert[f"w{i}"] = fn
                out.append(f"w{i}(obj.{c.name})")
            else:
                out.append(f"obj.{c.name}")
            if (fn := _keep_none(d.from_db.get(c.type), c)) is not None:
                convert[f"r{i}"] = fn
                read.append(f"{c.name}=r{i}(row[{i}])")
            else:
                read.append(f"{c.name}=row[{i}]")
        source = (f"def row(obj):\n    return [{', '.join(out)}]\n"
                  f"def read(model, row):\n    return model({', '.join(read)})\n")
        exec(source, convert)  # names and converters from the declaration only
        self.row: Callable[[Any], list[Any]] = convert["row"]
        """The stored values of an object's fields, in `fields` order."""
        self.read: Callable[[Callable[..., Any], Sequence[Any]], Any] = convert["read"]
        """An object of `model` from a row selected as `columns`."""


def _keep_none(convert: Convert | None, col: Column) -> Convert | None:
    """A nullable column's converter passes NULL through (a jsonb NULL is not JSON null)."""
    if convert is None or not col.nullable or convert in (to_db, from_db):  # the time helpers keep None already
        return convert
    return lambda v: None if v is None else convert(v)


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """The smallest and largest canonical UUIDs starting with a hex prefix (dashes optional).

    A range works on a UUID column and on canonical UUID text alike, and uses the index.
    """
    digits = prefix.replace("-", "")
    lo = uuid.UUID(digits.ljust(32, "0"))
    hi = uuid.UUID(digits.ljust(32, "f"))
    return str(lo), str(hi)
