"""REST `/v1/conversations`: record messages, end a session, read the record back, erase a conversation
(`mem.conversations`).

The messages' owner is the authenticated caller, as for every route; the session is the body's
`session_id`, else the caller's (the `x-clawrecall-session` header).
"""

from __future__ import annotations

import io
from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from ..engine import Memory
from ..errors import NotFoundError, ScopeError, ValidationError, WritesDisabledError
from ..models import Conversation, ConversationDeleted, EndReason, GroupBy, Logged, Message, Segment, StatsGroup
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])
READ = errors(ValidationError, ScopeError)
# a session id names one conversation per scope (alice's "chat" and bob's are two)
SCOPE = Query(None, description="Only the conversation(s) in this scope (default: every scope the caller reads).")
WRITE = errors(ValidationError, ScopeError, WritesDisabledError)


class MessagesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(
        description="The transcript, or its new part: {role, content, id?, timestamp?, model?, usage?} each "
        "(OpenClaw's and OpenAI's message shapes are read too). Messages stored before are skipped: known by "
        "id, else by role, timestamp and content, else by role, place in this list and content (so messages "
        "with neither id nor timestamp are sent from the transcript's start)."
    )
    session_id: str | None = Field(None, description="Default: the caller's session (x-clawrecall-session).")
    channel: str | None = None


class EndIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: EndReason = "session_end"


class Conversations(BaseModel):
    conversations: list[Conversation]


class ConversationStats(BaseModel):
    by: GroupBy
    groups: list[StatsGroup]


class Transcript(BaseModel):
    session_id: str
    messages: list[Message]


class Segments(BaseModel):
    segments: list[Segment]


class Ended(BaseModel):
    closed: Segment | None


class Deleted(ConversationDeleted):
    session_id: str
    dry_run: bool


@router.post("/messages", responses=WRITE)
def log_messages(body: MessagesIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Logged:
    """Store the messages not stored yet; they are in the database when this answers (embedded just after)."""
    return mem.conversations.log(body.messages, caller=ctx, session_id=body.session_id, channel=body.channel)


@router.get("", responses=READ)
def list_conversations(
    scope: str | None = SCOPE, limit: int = Query(50, ge=1, le=10_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Conversations:
    """The conversations the caller may read, the latest first."""
    return Conversations(conversations=mem.conversations.sessions(caller=ctx, scope=scope, limit=limit, offset=offset))


@router.get("/stats", responses=READ)
def conversation_stats(
    by: GroupBy = "user", mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> ConversationStats:
    """Messages per role and tokens, per user, agent or session (openclaw-memory-pgvector's conversation_stats)."""
    return ConversationStats(by=by, groups=mem.conversations.stats(caller=ctx, by=by))


@router.get("/{session_id:path}/segments", responses={**READ, **errors(NotFoundError)})
def conversation_segments(
    session_id: str, scope: str | None = SCOPE, limit: int = Query(50, ge=1, le=10_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Segments:
    """The conversation's segments, the latest first."""
    return Segments(segments=mem.conversations.segments(caller=ctx, session_id=session_id, scope=scope, limit=limit,
                                                        offset=offset))


@router.get("/{session_id:path}/export", response_class=PlainTextResponse, responses={
    **READ, **errors(NotFoundError), 200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "JSONL, one message a line."}})
def export_conversation(
    session_id: str, scope: str | None = SCOPE, mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> str:
    """The conversation as JSONL, one message a line."""
    out = io.StringIO()
    mem.conversations.export(out, caller=ctx, session_id=session_id, scope=scope)
    return out.getvalue()


@router.post("/{session_id:path}/end", responses={**WRITE, **errors(NotFoundError)})
def end_conversation(
    session_id: str, body: EndIn | None = None, mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Ended:
    """Close the session's open segment now (a `/new`, a reset, an explicit end)."""
    return Ended(closed=mem.conversations.end(session_id, caller=ctx, reason=(body or EndIn()).reason))


@router.delete("/{session_id:path}", responses={**WRITE, **errors(NotFoundError)})
def delete_conversation(
    session_id: str,
    scope: str | None = Query(None, description="The conversation in this scope (default: the caller's own)."),
    dry_run: bool = Query(False, description="Count what would be erased; change nothing."),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Deleted:
    """Erase the conversation for good: its messages, segments and their files, the extraction jobs of its
    segments and the fact occurrences quoting them (the facts stay)."""
    return Deleted(session_id=session_id, dry_run=dry_run,
                   **mem.conversations.delete(session_id, caller=ctx, scope=scope, dry_run=dry_run).model_dump())


# last: a session id may hold "/", so this route would take the ones above for its own
@router.get("/{session_id:path}", responses={**READ, **errors(NotFoundError)}, response_model_exclude={"messages": {"__all__": {"dedup_key"}}})
def show_conversation(
    session_id: str, scope: str | None = SCOPE, limit: int = Query(1000, ge=1, le=100_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> Transcript:
    """A conversation's messages in order."""
    return Transcript(session_id=session_id, messages=mem.conversations.show(session_id, caller=ctx, scope=scope,
                                                                             limit=limit, offset=offset))
