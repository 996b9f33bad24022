"""The one scope check. Every read and every write of the engine passes through here.

A scope is `global`, `user:<id>`, `agent:<id>`, `project:<id>` or `custom:<name>` (seed 002).
Scopes are hard partitions: a caller identified as user `bob` can never read or write
`user:alice`, whatever scope it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .errors import ScopeError, ValidationError

SCOPE_KINDS = ("user", "agent", "project", "custom")
# never part of an id: control characters (NUL cannot even be stored on PostgreSQL) and lone
# surrogates (bytes that were not UTF-8)
_FORBIDDEN = r"\x00-\x1f\x7f\ud800-\udfff"
MAX_ID_CHARS = 200
_SCOPE = re.compile(rf"^(global|(user|agent|project|custom):[^\s{_FORBIDDEN}:][^\s{_FORBIDDEN}]{{0,{MAX_ID_CHARS - 1}}})$")
ALL = "*"
_ID = re.compile(rf"^[^{_FORBIDDEN}]{{1,{MAX_ID_CHARS}}}$")


def validate_scope(scope: str) -> str:
    if not isinstance(scope, str) or not _SCOPE.match(scope):
        raise ValidationError(
            f"invalid scope {_show(scope)}: use global, user:<id>, agent:<id>, project:<id> or custom:<name>"
            f" (an id of 1–{MAX_ID_CHARS} characters, no spaces or control characters)"
        )
    return scope


def _show(value: object) -> str:
    """A caller's value in an error, cut short: the message must stay one line, not echo 100k characters."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


@dataclass(frozen=True)
class Caller:
    """Who is asking. `None` fields mean "not identified" (a local administrator using the CLI)."""

    user_id: str | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        for name, value in (("user_id", self.user_id), ("agent_id", self.agent_id)):
            if value is not None and (not isinstance(value, str) or not _ID.match(value)):
                raise ValidationError(
                    f"invalid {name} {_show(value)}: ids are strings of 1–{MAX_ID_CHARS} characters without control characters"
                )

    def may_access(self, scope: str) -> bool:
        """An unidentified caller (the local administrator) may touch any scope; an identified one
        only its own user and agent scopes, besides the shared global/project/custom ones."""
        kind, _, ident = scope.partition(":")
        if self.user_id is None and self.agent_id is None:
            return True
        if kind == "user":
            return ident == self.user_id
        if kind == "agent":
            return ident == self.agent_id
        return True

    def own_scopes(self) -> list[str]:
        scopes = ["global"]
        if self.user_id is not None:
            scopes.append(f"user:{self.user_id}")
        if self.agent_id is not None:
            scopes.append(f"agent:{self.agent_id}")
        return scopes


def write_scope(caller: Caller, scope: str | None) -> str:
    """The scope a new memory goes to: the one named, else the caller's user, agent, or global."""
    if scope is None:
        if caller.user_id is not None:
            scope = f"user:{caller.user_id}"
        elif caller.agent_id is not None:
            scope = f"agent:{caller.agent_id}"
        else:
            scope = "global"
    validate_scope(scope)
    if not caller.may_access(scope):
        raise ScopeError(f"scope {scope!r} is not accessible to {_who(caller)}")
    return scope


def new_memory_scope(user_id: str | None, agent_id: str | None, scope: str | None) -> str:
    """`write_scope` for a caller given by its ids. Memoised for text ids: the items of a batch name
    a handful of (caller, scope) pairs, and checking each again cost more than the rest of its record."""
    if _text_or_none(user_id) and _text_or_none(agent_id) and _text_or_none(scope):
        return _new_memory_scope(user_id, agent_id, scope)
    return write_scope(Caller(user_id=user_id, agent_id=agent_id), scope)  # raises the usual error


def _text_or_none(value: object) -> bool:
    return value is None or type(value) is str


@lru_cache(maxsize=4096)
def _new_memory_scope(user_id: str | None, agent_id: str | None, scope: str | None) -> str:
    return write_scope(Caller(user_id=user_id, agent_id=agent_id), scope)


def read_scopes(caller: Caller, scope: str | list[str] | None) -> list[str] | None:
    """The scopes a read may touch; `None` means every scope (only for an unidentified caller).

    With no scope named, an identified caller reads `global` plus its own user/agent scopes;
    an unidentified caller reads everything. A named scope the caller may not see is an error,
    not an empty result, so a mistake is visible.
    """
    if scope is None:
        if caller.user_id is None and caller.agent_id is None:
            return None
        return caller.own_scopes()
    names = [scope] if isinstance(scope, str) else list(scope)
    if names == [ALL]:
        if caller.user_id is None and caller.agent_id is None:
            return None
        return caller.own_scopes()
    for name in names:
        validate_scope(name)
        if not caller.may_access(name):
            raise ScopeError(f"scope {name!r} is not accessible to {_who(caller)}")
    return names


def _who(caller: Caller) -> str:
    parts = [f"user {caller.user_id!r}" if caller.user_id else "", f"agent {caller.agent_id!r}" if caller.agent_id else ""]
    return " and ".join(p for p in parts if p) or "this caller"
