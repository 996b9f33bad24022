"""The systems `import --from` reads, each a reader of its store (`data.Reader`)."""

from __future__ import annotations

from . import memento
from .data import Reader

DATA_SOURCES: dict[str, Reader] = {memento.SYSTEM: memento.read}
