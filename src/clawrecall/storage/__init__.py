"""Storage backends behind one interface (`Store`). SQLite is embedded; PostgreSQL comes next."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .base import Candidate, Filters, HistoryDraft, Store, StoreStats


def open_store(target: str | Path) -> Store:
    """Open the store a path or URL names: a file path or `sqlite:///path` is SQLite."""
    text = str(target)
    if text.startswith(("postgres://", "postgresql://")):
        raise ConfigError("the postgres backend is not available in this version; use a SQLite path")
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise ConfigError(f"unsupported database URL {text!r}: use a file path or sqlite:///path")
    from .sqlite import SQLiteStore

    return SQLiteStore(text)


__all__ = ["Candidate", "Filters", "HistoryDraft", "Store", "StoreStats", "open_store"]
