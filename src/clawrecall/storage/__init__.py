"""Storage backends behind one interface (`Store`): SQLite (embedded) and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .base import Candidate, HistoryDraft, StoreStats
from .filters import Filters
from .sql import Store
from .tokens import TokenRow

if TYPE_CHECKING:
    from ..config import PostgresConfig, SQLiteConfig


def is_postgres_url(target: str | Path) -> bool:
    return str(target).startswith(("postgres://", "postgresql://"))


def open_store(
    target: str | Path, *, migrate: bool = True, text_search_config: str | None = None,
    postgres: PostgresConfig | None = None, sqlite: SQLiteConfig | None = None, create: bool = True,
) -> Store:
    """Open the store a path or URL names: a file path or `sqlite:///path` is SQLite (tuned by the
    config's `sqlite` block), `postgresql://…` is PostgreSQL (by its `postgres` block). `create=False`
    refuses a SQLite file that does not exist (a PostgreSQL database is never created)."""
    text = str(target)
    if is_postgres_url(text):
        from .postgres import PostgresStore

        return PostgresStore(text, migrate=migrate, config=postgres, text_search_config=text_search_config)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise ConfigError(f"unsupported database URL {text!r}: use a file path, sqlite:///path or postgresql://…")
    from .sqlite import SQLiteStore

    return SQLiteStore(text, migrate=migrate, create=create, config=sqlite)


__all__ = ["Candidate", "Filters", "HistoryDraft", "Store", "StoreStats", "TokenRow", "is_postgres_url", "open_store"]
