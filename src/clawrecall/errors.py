"""Exception classes. Every error clawrecall raises on purpose is a `ClawrecallError`.

Each class carries a stable `code` so the CLI, and later the REST and MCP doors, can
report the same failure the same way.
"""

from __future__ import annotations


class ClawrecallError(Exception):
    """Base class of every deliberate clawrecall error."""

    code = "error"


class ConfigError(ClawrecallError):
    """The configuration (file, environment or keyword arguments) is invalid."""

    code = "config_error"


class ValidationError(ClawrecallError, ValueError):
    """An argument is invalid (empty content, importance outside 0–1, unknown category…)."""

    code = "invalid_input"


class ScopeError(ClawrecallError, PermissionError):
    """The caller asked for a scope it may not read or write."""

    code = "scope_denied"


class NotFoundError(ClawrecallError, LookupError):
    """No memory has that id (or id prefix) in the scopes the caller can see."""

    code = "not_found"


class AmbiguousIdError(ClawrecallError, LookupError):
    """An id prefix matches more than one memory."""

    code = "ambiguous_id"

    def __init__(self, prefix: str, matches: list[str]):
        self.prefix = prefix
        self.matches = matches
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        super().__init__(f"id prefix {prefix!r} is ambiguous: it matches {len(matches)} memories ({shown})")


class WritesDisabledError(ClawrecallError):
    """`writes.enabled` is false, so the store is read-only."""

    code = "writes_disabled"


class EmbeddingError(ClawrecallError):
    """The embedding provider failed (unreachable, bad response, wrong dimensions)."""

    code = "embedding_error"


class EmbeddingMismatchError(ClawrecallError):
    """The configured embedding model differs from the one that made the stored vectors."""

    code = "embedding_mismatch"


class StorageError(ClawrecallError):
    """The database cannot be opened, migrated or written."""

    code = "storage_error"
