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
    DeleteFilters,
    CountFilters,
    Discussed,
    EmbeddingFingerprint,
    Erased,
    FileRecord,
    Handlers,
    HistoryEntry,
    Imported,
    Ingested,
    Job,
    Journal,
    JobKindStats,
    JobStats,
    ListFilters,
    ListOrder,
    Logged,
    LoggedHit,
    LoggedSearch,
    MemoryEvent,
    MemoryChanges,
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
    ReadFilters,
    ReembedState,
    SearchFilters,
    SearchHit,
    SearchHits,
    SearchMode,
    SecretRotation,
    SecretsStatus,
    Segment,
    StartupEntry,
    Stats,
    StatsGroup,
    Sweep,
    UpdateFields,
    Visibility,
)
from .scopes import Caller

__version__ = "0.1.0"

__all__ = [
    "AddResult", "AmbiguousIdError", "AuthError", "BackupSummary", "Caller", "ChangePage", "ClawrecallError",
    "CleanupItem", "CleanupReport", "Cluster", "Config", "ConfigError", "Conversation", "ConversationDeleted",
    "CountFilters", "Coverage", "DeleteFilters", "Discussed", "EmbeddingError", "EmbeddingFingerprint",
    "EmbeddingMismatchError", "Erased", "FileRecord", "ForbiddenError", "Handlers", "HistoryEntry", "Imported",
    "Ingested", "InvalidRequestError", "Job", "JobKindStats", "JobStateError", "JobStats", "Journal", "LLMError",
    "LLMRefusedError", "LLMUnavailableError", "LeaseLostError", "ListFilters", "ListOrder", "Logged", "LoggedHit",
    "LoggedSearch", "Memory", "MemoryChanges", "MemoryEvent", "MemoryFields", "MemoryFilters", "MemoryRecord",
    "Message", "NewMemory", "NotFoundError", "Occurrence", "PayloadTooLargeError", "PeriodCount",
    "PermanentJobError", "Provenance", "Pruned", "PurgeRun", "QueryCount", "ReadFilters", "Recall", "RecallCount",
    "ReembedState", "RetryLaterError", "ScopeError", "SearchFilters", "SearchHit", "SearchHits", "SearchMode",
    "SecretKeyError", "SecretRotation", "SecretsStatus", "Segment", "ShuttingDownError", "StartupEntry", "Stats",
    "StatsGroup", "StorageError", "Sweep", "UnknownToolError", "UpdateFields", "ValidationError", "Visibility",
    "WritesDisabledError", "__version__", "load_config",
]
