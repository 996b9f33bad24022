"""Who is calling a hook, which session it is in, and the per-session state kept between turns."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from ..errors import ValidationError
from ..scopes import Caller, write_scope

T = TypeVar("T")


class HookContext(Protocol):
    """The caller's ids, from the runtime's trusted context (OpenClaw's hook `ctx`), never from the event body.

    A context may also carry `scopes`, a token's allow-list, which narrows reads and writes further.
    """

    user_id: str | None
    agent_id: str | None
    session_id: str | None


def read_scope(ctx: HookContext) -> str | list[str] | None:
    """The scopes a hook reads: a token's allow-list if the context has one, else the caller's own.

    An anonymous caller reads `global` only; the engine would otherwise give it every user's memories.
    """
    allowed = getattr(ctx, "scopes", None)
    if allowed is not None:
        return list(allowed)
    return None if ctx.user_id is not None or ctx.agent_id is not None else "global"


def may_write(ctx: HookContext) -> bool:
    """Whether the scope a new memory of this caller's would go to is on its token's allow-list (if any)."""
    allowed = getattr(ctx, "scopes", None)
    return allowed is None or write_scope(Caller(ctx.user_id, ctx.agent_id), None) in allowed


class SessionLRU(Generic[T]):
    """Per-session state in process memory, bounded: the least recently used session is forgotten first."""

    def __init__(self, factory: Callable[[], T], max_sessions: int = 4096):
        self._factory = factory
        self._max = max_sessions
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, *, reset: bool = False) -> T:
        """The session's state, created on first use; `reset` starts it afresh (a `/new` session)."""
        with self._lock:
            if reset or key not in self._items:
                self._items[key] = self._factory()
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)
            return self._items[key]


def session_key(store_location: str, ctx: HookContext) -> tuple[str, str | None, str | None, str] | None:
    """(store, agent, user, session), or None when the caller names no session and nothing can be remembered."""
    if ctx.session_id is None:
        return None
    return store_location, ctx.agent_id, ctx.user_id, ctx.session_id


def request_messages(request: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """`messages` as given (None when absent); an empty list means a fresh session."""
    messages = request.get("messages")
    if messages is None:
        return None
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise ValidationError("messages must be a list of objects with role and content")
    return messages


def request_str(request: Mapping[str, Any], name: str) -> str | None:
    value = request.get(name)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"{name} must be a string")
    return value


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: `content` as a string, or the `text` parts of a content list (no thinking, no tool calls)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"] for part in content
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""
