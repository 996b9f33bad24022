"""What reads share with the writes that must first find a memory: the filters a caller's read
applies, and an id (or unique prefix) resolved in the scopes the caller may see."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Sequence, get_args

from ..config import AccessConfig, RetrievalConfig
from ..errors import AmbiguousIdError, NotFoundError, ValidationError
from ..models import KINDS, MemoryRecord, Role
from ..scopes import Caller, household, read_scopes
from ..storage import Filters, Store
from ._validate import check_category, check_text, check_visibility, check_when

_ID_PREFIX = re.compile(r"^[0-9a-f-]{8,36}$")


def read_filters(
    caller: Caller, scope: str | list[str] | None, categories: Sequence[str], *, access: AccessConfig,
    category: str | list[str] | None = None, tags: Sequence[str] | None = None, session_id: str | None = None,
    since: datetime | None = None, until: datetime | None = None, include_deleted: bool = False,
    only_deleted: bool = False, include_expired: bool = False, source_type: str | None = None,
    source_id: str | Sequence[str] | None = None, sources: Sequence[str] | None = None,
    exclude_session: str | None = None, exclude_since: datetime | None = None,
    message_roles: Sequence[str] | None = None, as_of: datetime | None = None, include_superseded: bool = False,
    secrets: bool = False, user: str | None = None, agent: str | None = None, visibility: str | None = None,
) -> Filters:
    """A read's checked filters, in the scopes the caller may read and the rows of them it sees
    (`categories`, `access`: the configured ones; `secrets`: its own secrets too, asked for; `user`,
    `agent`, `visibility`: only the rows of that user, by that agent, at that level)."""
    wanted = None if category is None else ([category] if isinstance(category, str) else list(category))
    for c in wanted or []:
        check_category(c, categories)
    check_text(list(tags or []), "a tag")
    check_text(session_id, "session_id")
    check_text(source_type, "source_type")
    source_ids = None if source_id is None else ([source_id] if isinstance(source_id, str) else list(source_id))
    check_text(source_ids or [], "a source_id")
    check_text(exclude_session, "exclude_session")
    check_text(user, "user")
    check_text(agent, "agent")
    if visibility is not None:
        check_visibility(visibility)
    return Filters(
        kinds=check_sources(sources), other_session=exclude_session, other_session_since=exclude_since,
        message_roles=None if message_roles is None else check_roles(message_roles),
        scopes=read_scopes(caller, scope, access=access), categories=wanted, tags=list(tags) if tags else None,
        session_id=session_id, source_type=source_type, source_ids=source_ids,
        since=check_when(since, "since") if since is not None else None,
        until=check_when(until, "until") if until is not None else None,
        include_deleted=include_deleted, only_deleted=only_deleted, include_expired=include_expired,
        as_of=check_when(as_of, "as_of") if as_of is not None else None, include_superseded=include_superseded,
        user_id=user, agent_id=agent, visibility=visibility,
        **household(caller, access=access, secrets=secrets),  # type: ignore[arg-type]
    )


def is_id_or_prefix(text: str) -> bool:
    """Whether `text` can name a memory: its id, or 8+ of its leading hex characters."""
    prefix = text.strip().lower()
    return bool(_ID_PREFIX.match(prefix)) and len(prefix.replace("-", "")) >= 8


def covered(
    sources: Sequence[str] | None, message_roles: Sequence[str] | None, config: RetrievalConfig, *, memory_only: bool,
) -> tuple[Sequence[str], Sequence[str] | None]:
    """The sources and message roles a search covers: those it names, else `retrieval.sources` (memories, what
    users and assistants said, file chunks) with `retrieval.message_roles`. A filter only memories carry
    (`memory_only`: a category, tags) narrows the default to memories."""
    if sources is not None:
        return sources, message_roles
    if memory_only:
        return ("memory",), message_roles
    return config.sources, config.message_roles if message_roles is None else message_roles


def check_sources(sources: Sequence[str] | str | None) -> tuple[str, ...]:
    """The kinds of row a read covers: memories unless it names others (memory, message, chunk)."""
    if sources is None:
        return ("memory",)
    names = [sources] if isinstance(sources, str) else list(sources)
    unknown = [s for s in names if s not in KINDS]
    if unknown or not names:
        what = f"unknown source {unknown[0]!r}" if unknown else "no source given"
        raise ValidationError(f"{what}: use {', '.join(KINDS)}")
    return tuple(k for k in KINDS if k in names)


def check_roles(roles: Sequence[str]) -> tuple[str, ...]:
    allowed = get_args(Role)
    if isinstance(roles, str) or any(r not in allowed for r in roles):
        raise ValidationError(f"message_roles must be a list of {', '.join(allowed)}")
    return tuple(roles)


def resolve(
    store: Store, memory_id: str, caller: Caller, scope: str | list[str] | None, access: AccessConfig,
    kinds: tuple[str, ...] = ("memory",),
) -> MemoryRecord:
    """Id or unique prefix → record of one of `kinds`, in the scopes and rows the caller reads (its own
    secrets too: an id is an explicit request). Other scopes' memories, and other agents' private ones,
    are "not found"."""
    if not isinstance(memory_id, str):
        raise ValidationError(f"memory id must be a string, got {type(memory_id).__name__}")
    if not is_id_or_prefix(memory_id):
        raise ValidationError(f"invalid memory id {memory_id!r}: give the id or at least 8 of its first hex characters")
    prefix = memory_id.strip().lower()
    filters = Filters(scopes=read_scopes(caller, scope, access=access), include_deleted=True, include_expired=True,
                      include_superseded=True, kinds=kinds,
                      **household(caller, access=access, secrets=True))  # type: ignore[arg-type]
    matches = store.memories.ids_with_prefix(prefix, filters)
    if not matches:
        raise NotFoundError(f"no memory with id {memory_id!r}")
    if len(matches) > 1 and prefix not in matches:
        raise AmbiguousIdError(memory_id, matches)
    found = prefix if prefix in matches else matches[0]
    return store.memories.fetch([found])[found]
