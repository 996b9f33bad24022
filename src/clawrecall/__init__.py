"""clawrecall: long-term memory for AI agents.

    from clawrecall import Memory
    with Memory.open() as mem:
        mem.add("User prefers dark mode in every editor", user_id="alice", category="preference")
        for hit in mem.search("which theme does alice like?", user_id="alice"):
            print(hit.score, hit.memory.content)

Everything here is the public API (pinned by tests/test_public_api.py); modules whose names
start with an underscore, and the names not listed in `__all__`, may change without notice.
"""

from .config import Config, load_config
from .engine import Memory
from .errors import (
    AmbiguousIdError,
    AuthError,
    ClawrecallError,
    ConfigError,
    EmbeddingError,
    EmbeddingMismatchError,
    ForbiddenError,
    InvalidRequestError,
    JobStateError,
    LLMError,
    LLMRefusedError,
    LLMUnavailableError,
    LeaseLostError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentJobError,
    RetryLaterError,
    ScopeError,
    SecretKeyError,
    ShuttingDownError,
    StorageError,
    UnknownToolError,
    ValidationError,
    WritesDisabledError,
)
from .models import (
    AddResult,
    BackupSummary,
    ChangePage,
    CleanupItem,
    CleanupReport,
    Cluster,
    Conversation,
    ConversationDeleted,
    Coverage,
    Discussed,
    EmbeddingFingerprint,
    Erased,
    FileRecord,
    HistoryEntry,
    Imported,
    Ingested,
    Job,
    Journal,
    JobKindStats,
    JobStats,
    ListFilters,
    Logged,
    LoggedHit,
    LoggedSearch,
    MemoryEvent,
    MemoryFields,
    MemoryFilters,
    MemoryRecord,
    Message,
    NewMemory,
    Occurrence,
    PeriodCount,
    Provenance,
    Pruned,
    PurgeRun,
    QueryCount,
    Recall,
    RecallCount,
    ReembedState,
    SearchFilters,
    SearchHit,
    SearchHits,
    SecretRotation,
    SecretsStatus,
    Segment,
    StartupEntry,
    Stats,
    StatsGroup,
    Sweep,
    Visibility,
)
from .scopes import Caller

__version__ = "0.1.0"

__all__ = [
    "AddResult", "AmbiguousIdError", "AuthError", "BackupSummary", "Caller", "ChangePage", "ClawrecallError",
    "CleanupItem", "CleanupReport", "Cluster", "Config", "ConfigError", "Conversation", "ConversationDeleted",
    "Coverage", "Discussed", "EmbeddingError", "EmbeddingFingerprint", "EmbeddingMismatchError", "Erased",
    "FileRecord", "ForbiddenError", "HistoryEntry", "Imported", "Ingested", "InvalidRequestError", "Job",
    "JobKindStats", "JobStateError", "JobStats", "Journal", "LLMError", "LLMRefusedError", "LLMUnavailableError",
    "LeaseLostError", "ListFilters", "Logged", "LoggedHit", "LoggedSearch", "Memory", "MemoryEvent", "MemoryFields",
    "MemoryFilters", "MemoryRecord", "Message", "NewMemory", "NotFoundError", "Occurrence", "PayloadTooLargeError",
    "PeriodCount", "PermanentJobError", "Provenance", "Pruned", "PurgeRun", "QueryCount", "Recall", "RecallCount", "ReembedState",
    "RetryLaterError", "ScopeError", "SearchFilters", "SearchHit", "SearchHits", "SecretKeyError", "SecretRotation",
    "SecretsStatus", "Segment", "ShuttingDownError", "StartupEntry", "Stats", "StatsGroup", "StorageError", "Sweep",
    "UnknownToolError", "ValidationError", "Visibility", "WritesDisabledError", "__version__", "load_config",
]
