"""Reading another system's MySQL or MariaDB database (ShadowDB's MySQL backend): read-only, in one snapshot,
with the same checks and messages as a PostgreSQL source (`pgsource.Database`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from .._urls import redacted_url
from ..errors import ValidationError
from .pgsource import Database


class MySQLSource(Database):
    """A read-only connection to `url` (`mysql://user:password@host:3306/dbname`, as ShadowDB's
    `connectionString` names it), in the server's own zone: its times are read through `utc`."""

    quote = "`"
    scheme = "mysql://"  # what a URL it reads starts with

    def __init__(self, url: str, system: str):
        try:
            import pymysql
            import pymysql.cursors
        except ImportError:
            raise ValidationError("reading a MySQL source takes the mysql extra: pip install 'clawrecall[mysql]'") from None
        self.system = system
        self.url = redacted_url(url)
        parts = urlsplit(url)
        try:
            port = parts.port or 3306
        except ValueError:
            raise ValidationError(f"{self.url} has no valid port") from None
        database = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not database:
            raise ValidationError(f"{self.url} names no host or no database: mysql://user:password@host:3306/dbname")
        self._error = pymysql.MySQLError
        try:
            self.conn = pymysql.connect(
                host=parts.hostname, port=port, user=unquote(parts.username or ""),
                password=unquote(parts.password or ""), database=database, charset="utf8mb4",
                cursorclass=pymysql.cursors.DictCursor, connect_timeout=10, autocommit=False)
        except pymysql.MySQLError as exc:
            raise ValidationError(f"cannot read {self.url}: {_message(exc)}") from None
        for statement in ("SET SESSION TRANSACTION READ ONLY",
                          "START TRANSACTION WITH CONSISTENT SNAPSHOT"):  # every table as of one moment
            self.rows(statement)
        self.read_tables("DATABASE()")

    @staticmethod
    def utc(column: str) -> str:
        """A time column selected in UTC. Its value is in the session's zone, by default the server's: a
        TIMESTAMP is handed over in it, and a DATETIME that ShadowDB filled with CURRENT_TIMESTAMP was written
        in it; the server converts it by its zone's rules, summer time included."""
        return f"CONVERT_TZ(`{column}`, @@session.time_zone, '+00:00') AS `{column}`"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall())
        except self._error as exc:
            raise ValidationError(f"reading {self.url}: {_message(exc)}") from None


def _message(exc: BaseException) -> str:
    """The server's words, without PyMySQL's error code tuple."""
    return str(exc.args[-1] if exc.args else exc).strip().splitlines()[0]
