"""clawrecall: long-term memory for AI agents.

    from clawrecall import Memory
    with Memory.open() as mem:
        mem.add("User prefers dark mode in every editor", user_id="alice", category="preference")
        for hit in mem.search("which theme does alice like?", user_id="alice"):
            print(hit.score, hit.memory.content)
"""

from .config import Config, load_config
from .engine import Memory
from .errors import (
    AmbiguousIdError,
    ClawrecallError,
    ConfigError,
    EmbeddingError,
    EmbeddingMismatchError,
    NotFoundError,
    ScopeError,
    StorageError,
    ValidationError,
    WritesDisabledError,
)
from .models import AddResult, EmbeddingFingerprint, HistoryEntry, MemoryRecord, NewMemory, SearchHit, StartupEntry, Stats, Visibility

__version__ = "0.1.0"

__all__ = [
    "AddResult", "AmbiguousIdError", "ClawrecallError", "Config", "ConfigError", "EmbeddingError",
    "EmbeddingFingerprint", "EmbeddingMismatchError", "HistoryEntry", "Memory", "MemoryRecord", "NewMemory",
    "NotFoundError", "ScopeError", "SearchHit", "StartupEntry", "Stats", "StorageError", "ValidationError", "Visibility",
    "WritesDisabledError", "load_config", "__version__",
]
