"""REST `/v1/events`: the change feed (`mem.changes`) as Server-Sent Events, in the scopes the caller reads
(docs/insight.md#live-updates).

Each event is one change to a memory; its SSE `id` is its history id, so a client that reconnects with
`Last-Event-ID` (browsers' EventSource does it by itself) gets every change after it, none twice. The
stream waits on the store's wake-ups (PostgreSQL NOTIFY from every server; SQLite's own commits and a
poll), never on a timer of its own, and sends a comment line every `insight.events_keepalive_s` (15 s) so proxies and clients
see it is alive.
"""

from __future__ import annotations

import asyncio
import re
from typing import AsyncIterator

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from ..engine import Memory
from ..errors import ScopeError, ValidationError
from ..models import ChangePage, MemoryEvent
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1", tags=["insight"])
RETRY_MS = 1000  # how soon a client reconnects after the stream broke
PAGE = 100  # events read at once


def _start(last_event_id: str | None, after: int | None) -> int | None:
    """Where the stream starts: after `Last-Event-ID` (a reconnect), else after `after`, else now (None)."""
    if last_event_id is None or not last_event_id.strip():
        return after
    if not re.fullmatch(r"[0-9]+", last_event_id.strip()):
        raise ValidationError(f"Last-Event-ID must be an event id (a whole number), not {last_event_id!r}")
    return int(last_event_id)


def _frame(event: MemoryEvent) -> str:
    """One event as SSE: its id (to resume after), its type, and its JSON."""
    return f"id: {event.id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"


class EventStream(StreamingResponse):
    media_type = "text/event-stream"  # what the API's description names as the 200's content


@router.get(
    "/events", response_class=EventStream, responses={
        **errors(ValidationError, ScopeError),
        200: {"model": MemoryEvent, "description": "One event per change: `id`, `event` (its type), `data` (this, as JSON)."},
    },
)
async def events(
    scope: list[str] | None = Query(None, description="Only these scopes (default: every scope the caller reads)."),
    after: int | None = Query(None, ge=0, description="Start after this event id (default: now)."),
    last_event_id: str | None = Header(None, description="Resume after this event id (wins over `after`)."),
    mem: Memory = Depends(memory), ctx: Caller = Depends(caller),
) -> EventStream:
    """Memory changes as they commit (added, updated, superseded, deleted, restored, forgotten, purged,
    imported), of the memories the caller may read, through any server on the store."""
    return await event_stream(mem, ctx, scope, _start(last_event_id, after))


async def event_stream(mem: Memory, ctx: Caller, scope: list[str] | None, start: int | None) -> EventStream:
    """The caller's events after `start` (None: from now) as a stream; the first page is read before it
    answers, so a scope the caller may not read is refused with an error, not an empty stream."""

    def first_page() -> ChangePage:
        return mem.changes.after(mem.changes.last() if start is None else start, caller=ctx, scope=scope, limit=PAGE)

    page = await asyncio.to_thread(first_page)
    return EventStream(_stream(mem, ctx, scope, page), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(mem: Memory, ctx: Caller, scope: list[str] | None, page: ChangePage) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:  # from the store's watching thread
        loop.call_soon_threadsafe(woken.set)

    subscription = mem.changes.subscribe(wake)
    woken.set()  # the first page was read before subscribing: what committed since is read at once
    try:
        yield f"retry: {RETRY_MS}\n\n"
        while True:
            for event in page.events:
                yield _frame(event)
            if not page.more:
                try:
                    await asyncio.wait_for(woken.wait(), mem.config.insight.events_keepalive_s)
                except TimeoutError:
                    yield ": keepalive\n\n"
            woken.clear()  # before reading: a wake-up during the read is not lost
            if subscription.closed:  # the server is shutting down
                return
            page = await asyncio.to_thread(mem.changes.after, page.cursor, caller=ctx, scope=scope, limit=PAGE)
    finally:
        subscription.cancel()
