"""The systems `import --from` reads, each a reader of its store (`data.Reader`)."""

from __future__ import annotations

from . import lancedb_pro, mem0, memento, nova, pgvector, shadowdb
from .data import Reader

DATA_SOURCES: dict[str, Reader] = {m.SYSTEM: m.read for m in (memento, mem0, shadowdb, pgvector, nova, lancedb_pro)}
