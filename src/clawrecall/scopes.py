"""The one scope check. Every read and every write of the engine passes through here.

A scope is `global`, `user:<id>`, `agent:<id>`, `project:<id>` or `custom:<name>` (memory-lancedb-pro's).
Who reaches which (docs/security.md):

- `user:<id>` and `agent:<id>` are their owner's alone: a caller identified as user `bob` never
  reads or writes `user:alice`, whatever it names;
- `global` is read by every caller, but added to, changed and erased only by the administrator and
  the users and agents `access.scopes.global.write` names: what lands there reaches every user's
  recall;
- `project:<id>` and `custom:<name>` belong to their members: those `access.scopes."<scope>"`
  names (`read`, or `write`, which includes reading) and the holders of a token whose allow-list
  names the scope;
- a caller may delete or forget a memory it wrote itself wherever it can still read it (its words
  are its own to take back), but not change it;
- the local administrator (no identity, no allow-list) reaches every scope.

A token's allow-list narrows every rule: its holder touches no scope outside the list.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Protocol, Sequence

from .errors import ScopeError, ValidationError

SCOPE_KINDS = ("user", "agent", "project", "custom")
SHARED_KINDS = ("global", "project", "custom")
# never part of an id: control characters (NUL cannot even be stored on PostgreSQL) and lone
# surrogates (bytes that were not UTF-8)
_FORBIDDEN = r"\x00-\x1f\x7f\ud800-\udfff"
MAX_ID_CHARS = 200
_SCOPE = re.compile(rf"^(global|(user|agent|project|custom):[^\s{_FORBIDDEN}:][^\s{_FORBIDDEN}]{{0,{MAX_ID_CHARS - 1}}})$")
ALL = "*"
_ID = re.compile(rf"^[^{_FORBIDDEN}]{{1,{MAX_ID_CHARS}}}$")


# scripts that one name may mix (Japanese, Chinese, Korean writing, each with Latin), as Unicode's "highly
# restrictive" profile (UTS #39) allows; any other script stands alone
_EAST_ASIAN = frozenset({"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "BOPOMOFO"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: letters that show nothing


@lru_cache(maxsize=4096)
def _lookalike_problem(ident: str) -> str | None:
    """Why an id could display as another one (None: it cannot, by these rules): it is not in NFKC form
    (fullwidth `ａｌｉｃｅ`), holds an invisible character (a zero-width space, a bidi control, a Hangul
    filler) or mixes scripts (a Cyrillic `с` in a Latin name)."""
    if (normal := unicodedata.normalize("NFKC", ident)) != ident:
        return f"it is not in Unicode NFKC form (use {_show(normal)})"
    scripts = set()
    for ch in ident:
        category = unicodedata.category(ch)
        if category in ("Cf", "Co", "Cn", "Zl", "Zp") or ch in _BLANK_LETTERS:
            return f"it holds an invisible or unassigned character (U+{ord(ch):04X})"
        if category.startswith("L"):
            scripts.add(unicodedata.name(ch, "UNKNOWN").split(" ")[0])
    if len(scripts - _EAST_ASIAN - {"LATIN"}) + bool(scripts & (_EAST_ASIAN | {"LATIN"})) > 1:
        return f"it mixes scripts ({', '.join(sorted(s.lower() for s in scripts))})"
    return None


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
    runtime) and passed down to the engine, which checks every scope against it here, with the
    store's access policy (`config.access`): the doors know who is calling, the engine what they
    may reach.

    `None` ids mean "not identified". `scopes` is the allow-list of a token bound to a user or
    agent; `None` means whatever the identity may reach under the scope rules. A caller with no
    identity and no allow-list is the local administrator.
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
            if value is not None and (problem := _lookalike_problem(value)) is not None:
                raise ValidationError(f"invalid {name} {_show(value)}: {problem}, so it could pass for another id")
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

    def may_hold(self, scope: str) -> bool:
        """Whether a memory of this identity may live in `scope`: a `user:` or `agent:` scope holds only
        its owner's, the shared ones anyone's (who may *use* a scope is `may_read`/`may_write`'s
        question); an unidentified owner's memory may live anywhere."""
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


class Grant(Protocol):
    """The members of one shared scope (`config.ScopeAccess`): `user:<id>`, `agent:<id>` or `*`."""

    @property
    def read(self) -> Sequence[str]: ...

    @property
    def write(self) -> Sequence[str]: ...


class AgentSettings(Protocol):
    """One agent's household settings (`config.AgentAccess`)."""

    @property
    def visibility(self) -> str | None: ...

    @property
    def rules(self) -> Mapping[str, str]: ...

    @property
    def master(self) -> bool: ...


class AccessPolicy(Protocol):
    """The store's access policy (`config.AccessConfig`, declared with the rest of the config): the
    members of each shared scope, and each agent's household settings. A protocol, so the config may
    validate scopes with this module."""

    @property
    def scopes(self) -> Mapping[str, Grant]: ...

    def agent(self, agent_id: str | None) -> AgentSettings: ...


class Stored(Protocol):
    """What the check needs of a stored memory: where it is and who wrote it."""

    @property
    def scope(self) -> str: ...

    @property
    def user_id(self) -> str | None: ...

    @property
    def agent_id(self) -> str | None: ...


class Leveled(Stored, Protocol):
    """A stored memory with its level (`private`, `shared`, `secret`), for the household rule."""

    @property
    def visibility(self) -> str: ...


def as_caller(caller: Caller | None, user_id: str | None, agent_id: str | None) -> Caller:
    """The caller of an engine verb: `caller`, or one built from the `user_id`/`agent_id` convenience keywords."""
    if caller is None:
        return Caller(user_id, agent_id)
    if user_id is not None or agent_id is not None:
        raise ValidationError("give caller or user_id/agent_id, not both")
    if not isinstance(caller, Caller):
        raise ValidationError(f"caller must be a Caller, got {type(caller).__name__}")
    return caller


def may_read(caller: Caller, scope: str, *, access: AccessPolicy) -> bool:
    """Whether the caller may read the (valid) scope, its token's allow-list included."""
    return _listed(caller, scope) and _reaches(caller, scope, access, write=False)


def may_write(caller: Caller, scope: str | None = None, *, access: AccessPolicy) -> bool:
    """Whether `write_scope` accepts the scope (by default: where this caller's new memories go)."""
    try:
        write_scope(caller, scope, access=access)
    except ScopeError:
        return False
    return True


def write_scope(caller: Caller, scope: str | None, *, access: AccessPolicy) -> str:
    """The scope a new memory (or startup entry) goes to, checked for writing: the one named, else
    the caller's user, agent, or global."""
    scope = _default_scope(caller.user_id, caller.agent_id) if scope is None else scope
    validate_scope(scope)
    _require(caller, scope, access, write=True)
    return scope


def check_change(caller: Caller, memory: Stored, *, access: AccessPolicy, erase: bool = False) -> None:
    """A change to a stored memory: an update or undelete needs write access to its scope; a delete
    or forget (`erase`) also accepts its author, where the author can still read it."""
    if erase and _wrote(caller, memory) and may_read(caller, memory.scope, access=access):
        return
    _require(caller, memory.scope, access, write=True)


def may_erase(caller: Caller, memory: Stored, *, access: AccessPolicy) -> bool:
    """Whether `check_change(..., erase=True)` accepts the memory (the memories a purge may remove)."""
    return passes(check_change, caller, memory, access=access, erase=True)


def passes(check: Callable[..., None], *args: Any, **kwargs: Any) -> bool:
    """Whether a check accepts (a bulk change leaves what its verb would refuse, as a purge does)."""
    try:
        check(*args, **kwargs)
    except ScopeError:
        return False
    return True


def new_memory_owner(
    caller: Caller, user_id: str | None, agent_id: str | None, scope: str | None, *, access: AccessPolicy
) -> tuple[str, str | None, str | None]:
    """`(scope, user_id, agent_id)` of a new memory whose item names `user_id`/`agent_id` (or not).

    The ids default to the caller's. Only the administrator may name another owner (imports of
    other users' memories), in any scope that may hold that owner's memories; any other caller, a
    token's included, may name only its own ids, so an item cannot plant a memory in another user's
    or agent's scope, and writes where `write_scope` lets it."""
    if not caller.administrator:
        for name, named, own in (("user_id", user_id, caller.user_id), ("agent_id", agent_id, caller.agent_id)):
            if named is not None and named != own:
                raise ScopeError(
                    f"{name} {_show(named)} is not the caller's own ({_who(caller)}); only the local administrator"
                    " may name another owner"
                )
        return write_scope(caller, scope, access=access), caller.user_id, caller.agent_id
    if _text_or_none(user_id) and _text_or_none(agent_id) and _text_or_none(scope):
        return _owned_scope(user_id, agent_id, scope), user_id, agent_id
    return _held_scope(Caller(user_id, agent_id), scope), user_id, agent_id  # raises the usual error


def _text_or_none(value: object) -> bool:
    return value is None or type(value) is str


@lru_cache(maxsize=4096)
def _owned_scope(user_id: str | None, agent_id: str | None, scope: str | None) -> str:
    """Memoised for text ids: the items of an import name a handful of (owner, scope) combinations,
    and checking each again cost more than the rest of its record."""
    return _held_scope(Caller(user_id, agent_id), scope)


def _held_scope(owner: Caller, scope: str | None) -> str:
    """The scope of a memory the administrator writes for `owner`: named, else the owner's default."""
    scope = _default_scope(owner.user_id, owner.agent_id) if scope is None else scope
    validate_scope(scope)
    if not owner.may_hold(scope):
        raise ScopeError(f"scope {scope!r} does not hold memories of {_who(owner)}")
    return scope


def read_scopes(caller: Caller, scope: str | list[str] | None, *, access: AccessPolicy) -> list[str] | None:
    """The scopes a read may touch; `None` means every scope (only for the administrator).

    With no scope named (or `*`), a caller with a token reads its allow-list, another identified
    caller `global`, its own user/agent scopes and the shared scopes it is a member of, and the
    administrator everything. A named scope the caller may not read is an error, not an empty
    result, so a mistake is visible.
    """
    if scope is None and caller.scopes is not None:
        return list(caller.scopes)
    names = None if scope is None else [scope] if isinstance(scope, str) else list(scope)
    if names is None or (names == [ALL] and caller.scopes is None):
        return None if caller.administrator else _default_reads(caller, access)
    for name in names:
        _listed_or_raise(caller, name)
        validate_scope(name)
        _require(caller, name, access, write=False)
    return names


def household(caller: Caller, *, access: AccessPolicy, secrets: bool = False) -> dict[str, object]:
    """The household rule of a read on the caller's behalf (`Filters` fields; docs/agents.md): an
    agent sees its own memories, those no agent wrote and the other agents' shared ones (the master
    knowledge base, unless `access.agents` turns it off), never another agent's private or secret
    ones; a secret only when asked for (`secrets`), and only by its own agent (a caller that is no
    agent, a person or the administrator: every secret of its scopes)."""
    return {"household": True, "reader_agent": caller.agent_id, "master": access.agent(caller.agent_id).master,
            "secrets": secrets}


def sees(agent_id: str | None, memory: Leveled) -> bool:
    """Whether an agent's reads (`household`, without secrets) include a stored memory of its scope:
    what deduplication may match a new memory against, so a duplicate never names another agent's
    private memory."""
    if memory.visibility == "secret":
        return memory.agent_id == agent_id
    return agent_id is None or memory.agent_id in (None, agent_id) or memory.visibility == "shared"


def new_visibility(caller: Caller, agent_id: str | None, category: str, given: str | None, *, access: AccessPolicy,
                   default: str, rules: Mapping[str, str]) -> str:
    """The level of a new memory: the one given, else its agent's rule for the category or default
    level (`access.agents`), else the store's (`default`, `rules`: extraction.visibility)."""
    if given is not None:
        return given
    settings = access.agent(agent_id if agent_id is not None else caller.agent_id)
    return settings.rules.get(category) or rules.get(category) or settings.visibility or default


def check_visibility_change(caller: Caller, memory: Leveled, level: str) -> None:
    """Who changes a memory's level: its own agent, or a caller acting for no agent (a person, the
    administrator). An agent may make a memory stricter (private, secret) but never make a secret
    readable again: a model told to leak a credential cannot do it by changing its level."""
    if caller.agent_id is None:
        return
    if memory.agent_id not in (None, caller.agent_id):
        raise ScopeError(f"the visibility of agent {memory.agent_id!r}'s memory is not {_who(caller)}'s to change")
    if memory.visibility == "secret" and level != "secret":
        raise ScopeError("an agent may not make a secret readable: ask the user to change it (clawrecall update --visibility)")


def _default_reads(caller: Caller, access: AccessPolicy) -> list[str]:
    own = caller.own_scopes()
    return own + [s for s in access.scopes if s not in own and _reaches(caller, s, access, write=False)]


def _default_scope(user_id: str | None, agent_id: str | None) -> str:
    return f"user:{user_id}" if user_id is not None else f"agent:{agent_id}" if agent_id is not None else "global"


def _reaches(caller: Caller, scope: str, access: AccessPolicy, *, write: bool) -> bool:
    """The scope rules above, before a token's allow-list narrows them."""
    if not caller.identified:  # the administrator, or an in-process caller held to its allow-list alone
        return True
    kind, _, ident = scope.partition(":")
    if kind == "user":
        return ident == caller.user_id
    if kind == "agent":
        return ident == caller.agent_id
    if kind == "global" and not write:
        return True
    if kind != "global" and caller.scopes is not None and scope in caller.scopes:
        return True  # a token that lists a project or custom scope makes its holder a member
    grant = access.scopes.get(scope)
    if grant is None:
        return False
    return _names(grant.write, caller) or (not write and _names(grant.read, caller))


def _names(members: Sequence[str], caller: Caller) -> bool:
    """Whether a member list names the caller: `*`, its `user:<id>` or its `agent:<id>`."""
    return (
        ALL in members
        or (caller.user_id is not None and f"user:{caller.user_id}" in members)
        or (caller.agent_id is not None and f"agent:{caller.agent_id}" in members)
    )


def _wrote(caller: Caller, memory: Stored) -> bool:
    """The memory is the caller's own words: its user's, or (for an agent acting for no user) its agent's."""
    if caller.user_id is not None:
        return memory.user_id == caller.user_id
    return caller.agent_id is not None and memory.user_id is None and memory.agent_id == caller.agent_id


def _require(caller: Caller, scope: str, access: AccessPolicy, *, write: bool) -> None:
    _listed_or_raise(caller, scope)
    if _reaches(caller, scope, access, write=write):
        return
    kind = scope.partition(":")[0]
    key = scope if kind == "global" else f'"{scope}"'
    if kind not in SHARED_KINDS:
        raise ScopeError(f"scope {scope!r} is not accessible to {_who(caller)}")
    if write and _reaches(caller, scope, access, write=False):
        raise ScopeError(
            f"scope {scope!r} is read-only for {_who(caller)}: adding to it, changing or erasing its memories takes "
            f"the administrator or a grant in access.scopes.{key}.write"
        )
    raise ScopeError(
        f"scope {scope!r} is not accessible to {_who(caller)}: it is shared only with the members "
        f"access.scopes.{key} names and the tokens that list it"
    )


def _listed(caller: Caller, scope: str) -> bool:
    return caller.scopes is None or scope in caller.scopes


def _listed_or_raise(caller: Caller, scope: str) -> None:
    """A token's allow-list, when the caller has one, must name the scope."""
    if not _listed(caller, scope):
        assert caller.scopes is not None
        raise ScopeError(f"scope {scope!r} is not among this token's scopes ({', '.join(caller.scopes)})")


def _who(caller: Caller) -> str:
    parts = [f"user {caller.user_id!r}" if caller.user_id else "", f"agent {caller.agent_id!r}" if caller.agent_id else ""]
    return " and ".join(p for p in parts if p) or "this caller"
