"""Reading another system's database, PostgreSQL here (ShadowDB's MySQL one: `mysqlsource`): connecting
read-only, and what tables it holds."""

from __future__ import annotations

from typing import Any, Self

from .._urls import redacted_url
from ..errors import ValidationError
from .data import vectors


class Database:
    """A source database, connected read-only: its tables, checked and read (a PostgreSQL `Source`, or
    ShadowDB's MySQL one, `mysqlsource.MySQLSource`)."""

    quote = '"'  # how the server quotes a name
    system: str
    url: str  # without its password, for messages
    conn: Any
    tables: dict[str, set[str]]

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def read_tables(self, schema: str) -> None:
        """What tables the database holds, with their columns: those of `schema` (the SQL naming the
        connection's own)."""
        self.tables = {}
        for r in self.rows("SELECT table_name AS t, column_name AS c FROM information_schema.columns "
                           f"WHERE table_schema = {schema}"):
            self.tables.setdefault(r["t"], set()).add(r["c"])

    def require(self, table: str, columns: set[str]) -> None:
        """Fail clearly when the database is not the system's (another system's, or an empty one)."""
        missing = columns - self.tables.get(table, set())
        if missing:
            held = ", ".join(sorted(self.tables)) or "none"
            what = f"no {table} table" if table not in self.tables else f"a {table} table without {', '.join(sorted(missing))}"
            raise ValidationError(f"{self.url} is not a {self.system} database: it has {what} (its tables: {held})")

    def columns(self, table: str, *, but: set[str]) -> str:
        """The table's columns, quoted for a SELECT, but those named: a vector column read as text would be
        formatted by the server for nothing, when `vector_send` hands it over in binary."""
        return ", ".join(f"{self.quote}{c}{self.quote}" for c in sorted(self.tables.get(table, set()) - but))

    def count(self, table: str) -> int:
        name = f"{self.quote}{table}{self.quote}"
        return self.rows(f"SELECT count(*) AS n FROM {name}")[0]["n"] if table in self.tables else 0

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Source(Database):
    """A read-only connection to `url`, with a clear error for a URL that is none or a server that refuses."""

    def __init__(self, url: str, system: str):
        if not url.startswith(("postgres://", "postgresql://")):
            raise ValidationError(f"{system}'s store is a PostgreSQL database: give its URL "
                                  f"(postgresql://user:password@host:5432/dbname), not {redacted_url(url)!r}")
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError:
            raise ValidationError("reading a PostgreSQL source takes the postgres extra: "
                                  "pip install 'clawrecall[postgres]'") from None
        self.system = system
        self.url = redacted_url(url)
        try:
            self.conn = psycopg.connect(url, row_factory=dict_row, connect_timeout=10)
            self.conn.read_only = True
        except psycopg.Error as exc:
            raise ValidationError(f"cannot read {self.url}: {str(exc).strip().splitlines()[0]}") from None
        self._error = psycopg.Error
        self.read_tables("current_schema()")

    def rows(self, sql: str, params: tuple[Any, ...] = (), *, binary: bool = False) -> list[dict[str, Any]]:
        """`binary`: in PostgreSQL's binary form, a third less of the client's time for 100k rows, only where
        every column's type is a built-in one: any other (an enum, a `vector`) would come as bytes, not text."""
        try:
            return self.conn.cursor(binary=binary).execute(sql, params).fetchall()
        except self._error as exc:
            raise ValidationError(f"reading {self.url}: {str(exc).strip().splitlines()[0]}") from None

    def vector_rows(self, sql: str, *, binary: bool = False) -> list[dict[str, Any]]:
        """`rows` with their `vector` column (pgvector's binary form: `vector_send(col) AS vector`) decoded,
        all at once (`vectors`)."""
        rows = self.rows(sql, binary=binary)
        for row, decoded in zip(rows, vectors([row["vector"] for row in rows])):
            row["vector"] = decoded
        return rows
