"""The public API is what `clawrecall.__all__` names: pinned here, so a name cannot appear or vanish by accident."""

from __future__ import annotations

import inspect

from pydantic import BaseModel

import clawrecall
from clawrecall import errors, models

PUBLIC = [
    "AddResult", "AmbiguousIdError", "AuthError", "BackupSummary", "Caller", "ClawrecallError", "CleanupItem",
    "CleanupReport", "Cluster", "Config", "ConfigError", "Coverage", "Discussed", "EmbeddingError", "EmbeddingFingerprint", "EmbeddingMismatchError",
    "FileRecord", "ForbiddenError", "HistoryEntry", "InvalidRequestError", "Job", "JobKindStats", "JobStateError",
    "JobStats", "LLMError", "LLMRefusedError", "LLMUnavailableError", "LeaseLostError", "LoggedHit", "LoggedSearch",
    "Memory", "MemoryRecord", "Message", "NewMemory", "NotFoundError", "Occurrence", "PayloadTooLargeError",
    "PermanentJobError", "Provenance", "PurgeRun", "QueryCount", "Recall", "RecallCount", "ReembedState",
    "RetryLaterError", "ScopeError", "SearchHit", "SearchHits", "SecretKeyError", "SecretRotation", "SecretsStatus",
    "Segment", "ShuttingDownError", "StartupEntry", "Stats",
    "StorageError",
    "UnknownToolError", "ValidationError", "Visibility", "WritesDisabledError", "__version__", "load_config",
]


def test_all_is_sorted_and_exactly_the_pinned_names():
    assert clawrecall.__all__ == sorted(clawrecall.__all__)
    assert clawrecall.__all__ == PUBLIC


def test_every_exported_name_exists_and_star_import_gives_exactly_them():
    namespace: dict[str, object] = {}
    exec("from clawrecall import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_every_error_and_model_a_caller_meets_is_exported():
    """What `Memory`'s verbs raise and return must be importable from the package itself."""
    raised = {n for n, c in vars(errors).items() if inspect.isclass(c) and issubclass(c, errors.ClawrecallError)}
    returned = {
        n for n, c in vars(models).items()
        if inspect.isclass(c) and c.__module__ == models.__name__ and (issubclass(c, BaseModel) or n == "Visibility")
    }
    assert raised <= set(PUBLIC)
    assert returned <= set(PUBLIC)


def test_a_memory_is_built_from_exported_names_only(tmp_path):
    """Config, the caller, the models and the errors: enough to open a store, write, read and fail as a user."""
    config = clawrecall.load_config(None, overrides={"writes": {"enabled": False}})
    assert isinstance(config, clawrecall.Config)
    with clawrecall.Memory.open(tmp_path / "memory.db", writes={"enabled": False}) as mem:
        assert mem.config.writes.enabled is False
        alice = clawrecall.Caller("alice")
        assert mem.list(caller=alice) == []
        try:
            mem.add("x", caller=alice)
        except clawrecall.WritesDisabledError as exc:
            assert isinstance(exc, clawrecall.ClawrecallError)
        else:
            raise AssertionError("a read-only store accepted a write")
