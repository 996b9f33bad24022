"""Which session a hook is in, what it reads, and what its request says (the per-session state itself
belongs to the store's runtime, `mem.upkeep.runtime`).

Who is calling is a `Caller`, from the runtime's trusted context (OpenClaw's hook `ctx`),
never from the event body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ..scopes import Caller


def read_scope(caller: Caller) -> str | None:
    """The scope a hook reads: by default what the caller reads unasked, its own scopes and the shared
    ones it is a member of (a token's allow-list, if it has one).

    An anonymous caller reads `global` only; the engine would otherwise give it every user's memories.
    """
    return "global" if caller.administrator else None


def session_key(caller: Caller) -> tuple[str | None, str | None, str] | None:
    """(agent, user, session) within a store's runtime, or None when the caller names no session and nothing
    can be remembered."""
    if caller.session_id is None:
        return None
    return caller.agent_id, caller.user_id, caller.session_id


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
