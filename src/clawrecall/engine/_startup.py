"""Startup entries (`mem.startup`): short texts an agent runtime injects on a session's first turn
(who the agent is, standing rules), by key and priority, in the scopes the caller may use."""

from __future__ import annotations

from pydantic import ValidationError as PydanticValidationError

from .._time import utcnow
from ..config import Config
from ..errors import NotFoundError, ValidationError, pydantic_message
from ..models import StartupEntry
from ..scopes import Caller, as_caller, read_scopes, write_scope
from ..storage import Store
from ._validate import check_content, check_text, require_writes


class Startup:
    """The startup-entry namespace of a `Memory`: `mem.startup.set/list/delete`."""

    def __init__(self, store: Store, config: Config):
        self._store = store
        self._config = config

    def set(
        self, key: str, content: str, *, priority: int = 2, reinforce: bool = False, scope: str | None = None,
        caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
    ) -> StartupEntry:
        """Create or replace the entry `key` in `scope` (default: the caller's user, agent, or global)."""
        require_writes(self._config)
        target = write_scope(as_caller(caller, user_id, agent_id), scope, access=self._config.access)
        check_text(key, "key")
        try:
            entry = StartupEntry(
                scope=target, key=key, content=check_content(content), priority=priority, reinforce=reinforce,
                updated_at=utcnow(),
            )
        except PydanticValidationError as exc:
            raise ValidationError(pydantic_message(exc, StartupEntry)) from None
        self._store.startup.put(entry)
        return entry

    def list(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | list[str] | None = None,
    ) -> list[StartupEntry]:
        """The entries in the scopes the caller reads, by priority then key."""
        scopes = read_scopes(as_caller(caller, user_id, agent_id), scope, access=self._config.access)
        return self._store.startup.of(scopes)

    def delete(
        self, key: str, *, scope: str | None = None, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Remove the entry `key` from `scope`, by default the one `set` writes to (the caller's user,
        agent, or global): a caller deletes its own entry, not a shared one of the same key."""
        require_writes(self._config)
        target = write_scope(as_caller(caller, user_id, agent_id), scope, access=self._config.access)
        check_text(key, "key")
        if not self._store.startup.delete(target, key):
            raise NotFoundError(f"no startup entry {key!r} in scope {target!r}")
