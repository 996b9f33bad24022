"""REST `/v1/conversations`: record messages, end a session, read the record back (`mem.conversations`).

The messages' owner is the authenticated caller, as for every route; the session is the body's
`session_id`, else the caller's (the `x-clawrecall-session` header).
"""

from __future__ import annotations

import io
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from ..engine import Memory
from ..errors import NotFoundError
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


class MessagesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(
        description="The transcript, or its new part: {role, content, id?, timestamp?, model?, usage?} each "
        "(OpenClaw's and OpenAI's message shapes are read too). Messages stored before are skipped."
    )
    session_id: str | None = Field(None, description="Default: the caller's session (x-clawrecall-session).")
    channel: str | None = None


class EndIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Literal["session_end", "explicit"] = "session_end"


@router.post("/messages")
def log_messages(body: MessagesIn, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> dict[str, Any]:
    """Store the messages not stored yet; they are in the database when this answers (embedded just after)."""
    return dict(mem.conversations.log(body.messages, caller=ctx, session_id=body.session_id, channel=body.channel))


@router.get("")
def list_conversations(
    limit: int = Query(50, ge=1, le=10_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """The conversations the caller may read, the latest first."""
    return {"conversations": mem.conversations.sessions(caller=ctx, limit=limit, offset=offset)}


@router.get("/stats")
def conversation_stats(
    by: Literal["user", "agent", "session"] = "user", mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """Messages per role and tokens, per user, agent or session (openclaw-memory-pgvector's conversation_stats)."""
    return {"by": by, "groups": mem.conversations.stats(caller=ctx, by=by)}


@router.get("/{session_id}", responses=errors(NotFoundError))
def show_conversation(
    session_id: str, limit: int = Query(1000, ge=1, le=100_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """A conversation's messages in order."""
    found = mem.conversations.show(session_id, caller=ctx, limit=limit, offset=offset)
    return {"session_id": session_id, "messages": [m.model_dump(mode="json", exclude={"dedup_key"}) for m in found]}


@router.get("/{session_id}/segments")
def conversation_segments(
    session_id: str, limit: int = Query(50, ge=1, le=10_000), offset: int = Query(0, ge=0),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """The conversation's segments, the latest first."""
    found = mem.conversations.segments(caller=ctx, session_id=session_id, limit=limit, offset=offset)
    return {"segments": [s.model_dump(mode="json") for s in found]}


@router.get("/{session_id}/export", response_class=PlainTextResponse)
def export_conversation(session_id: str, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> str:
    """The conversation as JSONL, one message a line."""
    out = io.StringIO()
    mem.conversations.export(out, caller=ctx, session_id=session_id)
    return out.getvalue()


@router.post("/{session_id}/end")
def end_conversation(
    session_id: str, body: EndIn | None = None, mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> dict[str, Any]:
    """Close the session's open segment now (a `/new`, a reset, an explicit end)."""
    closed = mem.conversations.end(session_id, caller=ctx, reason=(body or EndIn()).reason)
    return {"closed": None if closed is None else closed.model_dump(mode="json")}
