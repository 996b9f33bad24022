"""Exception classes: every error clawrecall raises on purpose is a `ClawrecallError`, defined here.

Each class carries a stable `code` and the HTTP `status` it is served with, so every door reports
the same failure the same way (the REST server reads `status`; the CLI, the tools and MCP report
`code`), and a new error cannot fall through a lookup table into a 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, Field


class ClawrecallError(Exception):
    """Base class of every deliberate clawrecall error."""

    code = "error"
    status = 500


class ConfigError(ClawrecallError):
    """The configuration (file, environment or keyword arguments) is invalid."""

    code = "config_error"
    status = 500  # the server's own configuration: nothing the client can change


class ValidationError(ClawrecallError, ValueError):
    """An argument is invalid (empty content, importance outside 0–1, unknown category…)."""

    code = "invalid_input"
    status = 400


class InvalidRequestError(ClawrecallError):
    """An HTTP request that does not match the route's declared body, query or path parameters."""

    code = "invalid_request"
    status = 422


class AuthError(ClawrecallError):
    """No valid credentials: a missing, malformed, unknown or revoked token."""

    code = "unauthenticated"
    status = 401


class ForbiddenError(ClawrecallError, PermissionError):
    """Valid credentials that do not allow this request."""

    code = "forbidden"
    status = 403


class ScopeError(ClawrecallError, PermissionError):
    """The caller asked for a scope it may not read or write."""

    code = "scope_denied"
    status = 403


class WritesDisabledError(ClawrecallError):
    """`writes.enabled` is false, so the store is read-only."""

    code = "writes_disabled"
    status = 403


class NotFoundError(ClawrecallError, LookupError):
    """No memory has that id (or id prefix) in the scopes the caller can see."""

    code = "not_found"
    status = 404


class UnknownToolError(ClawrecallError, LookupError):
    """No tool of that name is offered (unknown, or a write tool while writes are disabled)."""

    code = "unknown_tool"
    status = 404


class AmbiguousIdError(ClawrecallError, LookupError):
    """An id prefix matches more than one memory."""

    code = "ambiguous_id"
    status = 409

    def __init__(self, prefix: str, matches: list[str]):
        self.prefix = prefix
        self.matches = matches
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        super().__init__(f"id prefix {prefix!r} is ambiguous: it matches {len(matches)} memories ({shown})")


class PayloadTooLargeError(ClawrecallError):
    """A request body over the server's limit."""

    code = "payload_too_large"
    status = 413


class EmbeddingError(ClawrecallError):
    """The embedding provider failed (unreachable, bad response, wrong dimensions)."""

    code = "embedding_error"
    status = 503


class EmbeddingMismatchError(ClawrecallError):
    """The configured embedding model differs from the one that made the stored vectors."""

    code = "embedding_mismatch"
    status = 503


class LLMError(ClawrecallError):
    """The configured LLM failed: a rejected request (bad key, bad model, a schema it refused), or an
    answer that cannot be read."""

    code = "llm_error"
    status = 502


class LLMUnavailableError(LLMError):
    """The LLM could not be reached or kept failing (connection, timeout, 5xx, 429) after the retries;
    `retry_after` is the wait in seconds the provider last asked for, when it named one."""

    code = "llm_unavailable"
    status = 503

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LLMRefusedError(LLMError):
    """The model refused to answer, or the provider's content filter stopped it; `completion` holds
    the refusal and the tokens it still cost, when the provider answered."""

    code = "llm_refused"
    status = 502

    def __init__(self, message: str, *, completion: Any = None):
        super().__init__(message)
        self.completion = completion


class StorageError(ClawrecallError):
    """The database cannot be opened, migrated or written."""

    code = "storage_error"
    status = 503


class SecretKeyError(ClawrecallError):
    """No key to seal or open secret memories with, or not the key the store's secrets were sealed with."""

    code = "secret_key_error"
    status = 503  # the server's own key: nothing the client can change


class ShuttingDownError(ClawrecallError, RuntimeError):
    """The store is closing (the server is shutting down): it takes no more background work; retry elsewhere or later."""

    code = "shutting_down"
    status = 503


class JobStateError(ClawrecallError):
    """A job cannot make this change in its state (cancelling a running job, retrying a queued one)."""

    code = "job_state"
    status = 409


class LeaseLostError(ClawrecallError):
    """A job handler's lease is no longer its own (it expired and another worker took the job, or the job
    was finished or cancelled meanwhile): nothing of this run is written."""

    code = "lease_lost"
    status = 409


class RetryLaterError(ClawrecallError):
    """Raised by a job handler: run the job again in `after` seconds (an LLM's Retry-After, a provider
    down; None: after the usual backoff), without counting this run against its `max_attempts`."""

    code = "retry_later"
    status = 503

    def __init__(self, message: str = "retry later", *, after: float | None = None):
        if after is not None and not after >= 0:
            raise ValueError("after must be a number of seconds, 0 or more")
        self.after = None if after is None else float(after)
        super().__init__(message)


class PermanentJobError(ClawrecallError):
    """Raised by a job handler: the job can never succeed (its subject is gone, its input is invalid), so
    it is dead at once, with this reason, instead of being retried."""

    code = "permanent_job_error"
    status = 500


class _HasErrors(Protocol):
    def errors(self) -> Any: ...


def pydantic_message(exc: _HasErrors | Iterable[Mapping[str, Any]], model: type[BaseModel] | None = None) -> str:
    """One line for a pydantic (or FastAPI request) validation error: `where: what; where: what`.

    With `model`, a value outside a field's bounds reads "must be between <ge> and <le>, got <value>",
    naming both bounds the field declares, which pydantic's message for the one bound broken does not.
    """
    errors = exc.errors() if hasattr(exc, "errors") else exc
    parts = []
    for err in errors:
        loc = err.get("loc", ())
        where = ".".join(str(p) for p in loc)
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        bounds = _bounds(model, loc) if err.get("type") in _BOUND_ERRORS and "input" in err else None
        if bounds is not None:
            message = f"must be between {bounds[0]} and {bounds[1]}, got {err['input']!r}"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


_BOUND_ERRORS = ("less_than_equal", "greater_than_equal")


def _bounds(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[Any, Any] | None:
    """A top-level field's (ge, le), when it declares both."""
    field = model.model_fields.get(loc[0]) if model is not None and len(loc) == 1 else None
    if field is None:
        return None
    ge = next((m.ge for m in field.metadata if hasattr(m, "ge")), None)
    le = next((m.le for m in field.metadata if hasattr(m, "le")), None)
    return None if ge is None or le is None else (ge, le)


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. `not_found`: a `ClawrecallError`'s `code`.")
    message: str = Field(description="One line for a person.")


class ErrorBody(BaseModel):
    """How every door reports an error as JSON: an HTTP error's body, a failed tool result's `details`."""

    error: ErrorDetail

    @classmethod
    def of(cls, code: str, message: str) -> dict[str, dict[str, str]]:
        return {"error": {"code": code, "message": " ".join(message.split())}}
