"""REST `/v1`: erasing a person, soft-deleting by filter, and startup identity entries.

Thin like the other routes: the caller comes from authentication, and the engine's one scope
check decides. Erasure is the administrator's, or the user's own token's; there is no MCP tool
for it, since one prompt-injected call would wipe a person's memory.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field, model_validator

from ..engine import Memory
from ..errors import NotFoundError, ScopeError, ValidationError, WritesDisabledError
from ..models import Erased, StartupEntry
from ..scopes import Caller
from .deps import caller, memory
from .memories import When, _Body
from .openapi import errors

CHANGE = errors(ValidationError, ScopeError, WritesDisabledError)

router = APIRouter(prefix="/v1")


class EraseIn(_Body):
    user_id: str | None = Field(None, description="Erase this user (give user_id or agent_id).")
    agent_id: str | None = Field(None, description="Erase this agent.")
    dry_run: bool = Field(False, description="Count what would be erased; change nothing.")

    @model_validator(mode="after")
    def _one_person(self) -> "EraseIn":
        if (self.user_id is None) == (self.agent_id is None):
            raise ValueError("give user_id or agent_id (one person)")
        return self


class DeleteBulkIn(_Body):
    scope: str | list[str] | None = None
    category: str | list[str] | None = None
    tags: list[str] | None = None
    session: str | None = None
    since: When | None = Field(None, description="Only memories created at or after this time (newer than).")
    until: When | None = Field(None, description="Only memories created at or before this time (older than).")
    dry_run: bool = Field(False, description="Count the matches; delete nothing.")

    @model_validator(mode="after")
    def _a_filter(self) -> "DeleteBulkIn":
        if all(v is None for v in (self.scope, self.category, self.tags, self.session, self.since, self.until)):
            raise ValueError("delete-bulk needs a filter: scope, category, tags, session, since or until")
        return self


class StartupIn(_Body):
    content: str = Field(min_length=1)
    priority: int = Field(2, ge=0, le=9, description="0 is injected first.")
    reinforce: bool = Field(False, description="Injected on every later turn of a session too (alone, in the budget).")
    scope: str | None = Field(None, description="Default: user:<caller>, else agent:<caller>, else global.")


class BulkDeleted(BaseModel):
    matched: int
    deleted: int
    dry_run: bool


class StartupEntries(BaseModel):
    entries: list[StartupEntry]


@router.post("/erase", tags=["memories"], responses=CHANGE)
def erase(body: EraseIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Erased:
    """Erase a person for good (GDPR): the user's or agent's memories, their history's old values and its
    startup entries. The administrator may erase anyone; a token only its own user (or agent)."""
    return mem.erase(user_id=body.user_id, agent_id=body.agent_id, caller=ctx, dry_run=body.dry_run)


@router.post("/memories/delete-bulk", tags=["memories"], responses=CHANGE)
def delete_bulk(body: DeleteBulkIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> BulkDeleted:
    """Soft-delete every memory that matches the filters (at least one), in the caller's scopes, that the caller may
    erase (its own words, or any in a scope it may write); `dry_run` counts."""
    n = mem.delete_bulk(
        caller=ctx, scope=body.scope, category=body.category, tags=body.tags, session_id=body.session,
        since=body.since, until=body.until, dry_run=body.dry_run,
    )
    return BulkDeleted(matched=n, deleted=0 if body.dry_run else n, dry_run=body.dry_run)


@router.get("/startup", tags=["startup"], responses=errors(ValidationError, ScopeError))
def startup_list(mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> StartupEntries:
    """The startup entries in the caller's scopes, by priority then key."""
    return StartupEntries(entries=mem.startup.list(caller=ctx))


@router.put("/startup/{key}", tags=["startup"], responses=CHANGE)
def startup_set(key: str, body: StartupIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> StartupEntry:
    """Create or replace the entry `key` (in the caller's own scope unless `scope` names another it may write)."""
    entry = mem.startup.set(
        key, body.content, priority=body.priority, reinforce=body.reinforce, scope=body.scope, caller=ctx,
    )
    return entry


@router.delete("/startup/{key}", tags=["startup"], status_code=204, responses={**CHANGE, **errors(NotFoundError)})
def startup_delete(
    key: str, scope: str | None = None, mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Response:
    """Remove the entry `key` from `scope` (default: the caller's own)."""
    mem.startup.delete(key, scope=scope, caller=ctx)
    return Response(status_code=204)
