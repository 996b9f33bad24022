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
    """Who is asking, built once at the door (server authentication, MCP stdio, the CLI, a hook's
    runtime) and passed down to the engine, which checks every scope against it here.

    `None` ids mean "not identified". `scopes` is the allow-list of a token bound to a user or
    agent; `None` means whatever the identity may reach under the scope rules. A caller with no
    identity and no allow-list is the local administrator. Groups and keys belong here too.
    """

    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    scopes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name, value in (("user_id", self.user_id), ("agent_id", self.agent_id)):
            if value is not None and (not isinstance(value, str) or not _ID.match(value)):
                raise ValidationError(
                    f"invalid {name} {_show(value)}: ids are strings of 1–{MAX_ID_CHARS} characters without control characters"
                )
        if self.session_id is not None and not isinstance(self.session_id, str):
            raise ValidationError(f"session_id must be a string, got {type(self.session_id).__name__}")
        if self.scopes is not None and not isinstance(self.scopes, tuple):
            object.__setattr__(self, "scopes", tuple(self.scopes))

    @property
    def identified(self) -> bool:
        return self.user_id is not None or self.agent_id is not None

    @property
    def administrator(self) -> bool:
        """No identity and no allow-list: the local administrator, who reaches every scope."""
        return not self.identified and self.scopes is None

    def may_access(self, scope: str) -> bool:
        """An unidentified caller may touch any scope; an identified one only its own user and agent
        scopes, besides the shared global/project/custom ones. (A token's allow-list narrows this
        further: `read_scopes` and `write_scope` apply it.)"""
        kind, _, ident = scope.partition(":")
        if not self.identified:
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


def as_caller(caller: Caller | None, user_id: str | None, agent_id: str | None) -> Caller:
    """The caller of an engine verb: `caller`, or one built from the `user_id`/`agent_id` convenience keywords."""
    if caller is None:
        return Caller(user_id, agent_id)
    if user_id is not None or agent_id is not None:
        raise ValidationError("give caller or user_id/agent_id, not both")
    if not isinstance(caller, Caller):
        raise ValidationError(f"caller must be a Caller, got {type(caller).__name__}")
    return caller


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
    _allow(caller, scope)
    return scope


def may_write(caller: Caller, scope: str | None = None) -> bool:
    """Whether `write_scope` accepts the scope (by default: where this caller's new memories go)."""
    try:
        write_scope(caller, scope)
    except ScopeError:
        return False
    return True


def new_memory_owner(
    caller: Caller, user_id: str | None, agent_id: str | None, scope: str | None
) -> tuple[str, str | None, str | None]:
    """`(scope, user_id, agent_id)` of a new memory whose item names `user_id`/`agent_id` (or not).

    The ids default to the caller's. Only the administrator may name another owner (imports of
    other users' memories); any other caller, a token's included, may name only its own ids, so an
    item cannot plant a memory in another user's or agent's scope. The scope is then `write_scope`'s
    for the owner: the caller itself unless the administrator named one. Memoised for text ids: the
    items of a batch name a handful of (caller, owner, scope) combinations, and checking each again
    cost more than the rest of its record."""
    if not caller.administrator:
        for name, named, own in (("user_id", user_id, caller.user_id), ("agent_id", agent_id, caller.agent_id)):
            if named is not None and named != own:
                raise ScopeError(
                    f"{name} {_show(named)} is not the caller's own ({_who(caller)}); only the local administrator"
                    " may name another owner"
                )
    uid = caller.user_id if user_id is None else user_id
    aid = caller.agent_id if agent_id is None else agent_id
    if _text_or_none(uid) and _text_or_none(aid) and _text_or_none(scope):
        return _new_memory_scope(uid, aid, scope, caller.scopes), uid, aid
    return write_scope(Caller(user_id=uid, agent_id=aid, scopes=caller.scopes), scope), uid, aid  # raises the usual error


def _text_or_none(value: object) -> bool:
    return value is None or type(value) is str


@lru_cache(maxsize=4096)
def _new_memory_scope(user_id: str | None, agent_id: str | None, scope: str | None, allowed: tuple[str, ...] | None) -> str:
    return write_scope(Caller(user_id=user_id, agent_id=agent_id, scopes=allowed), scope)


def read_scopes(caller: Caller, scope: str | list[str] | None) -> list[str] | None:
    """The scopes a read may touch; `None` means every scope (only for the administrator).

    With no scope named, a caller with a token reads its allow-list, another identified caller
    `global` plus its own user/agent scopes, and the administrator everything. A named scope the
    caller may not see is an error, not an empty result, so a mistake is visible.
    """
    if caller.scopes is not None:
        if scope is None:
            scope = list(caller.scopes)
        else:
            for name in [scope] if isinstance(scope, str) else scope:
                _allow(caller, name)
    if scope is None:
        return None if caller.administrator else caller.own_scopes()
    names = [scope] if isinstance(scope, str) else list(scope)
    if names == [ALL]:
        return None if caller.administrator else caller.own_scopes()
    for name in names:
        validate_scope(name)
        if not caller.may_access(name):
            raise ScopeError(f"scope {name!r} is not accessible to {_who(caller)}")
    return names


def _allow(caller: Caller, scope: str) -> None:
    """A token's allow-list, when the caller has one, must name the scope."""
    if caller.scopes is not None and scope not in caller.scopes:
        raise ScopeError(f"scope {scope!r} is not among this token's scopes ({', '.join(caller.scopes)})")


def _who(caller: Caller) -> str:
    parts = [f"user {caller.user_id!r}" if caller.user_id else "", f"agent {caller.agent_id!r}" if caller.agent_id else ""]
    return " and ".join(p for p in parts if p) or "this caller"
