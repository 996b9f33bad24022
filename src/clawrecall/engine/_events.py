"""The engine's events, declared in one place: each event's name, when it fires, its payload model,
and the handlers registered for it (docs/architecture.md#events).

The parts of `Memory` do not reach into each other to hang work on one another's moments: a part
emits an event (`segment_closed`, `vectors_stored`) and `wire` below is the one place that says who
handles it. A job kind is an event too, run later by a worker: one handler per kind (`extract`,
`summarize`, and kinds of your own). Handler modules (`clawrecall serve|worker --handlers MODULE`)
register more through `mem.upkeep.on` and `mem.upkeep.job`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from pydantic import BaseModel

from ..errors import ValidationError
from ..models import Handlers, Job, Segment
from ._jobs import Handler, Lease


class SegmentClosed(BaseModel):
    """A conversation's segment closed (pause, session end, topic shift). Handled inside the closing
    transaction: work a handler queues (the extraction job) commits with the close or not at all, and a
    handler that raises undoes the close."""

    segment: Segment


class VectorsStored(BaseModel):
    """The backfill stored vectors for rows written without one (messages, file chunks), committed."""

    ids: list[str]


@dataclass(frozen=True)
class Event:
    payload: type[BaseModel]
    when: str


#: every event a part of the engine emits: name -> its payload model and when it fires
EVENTS: Mapping[str, Event] = {
    "segment_closed": Event(SegmentClosed, "inside the transaction that closes a segment"),
    "vectors_stored": Event(VectorsStored, "after the backfill committed a batch of vectors"),
}

#: the job kinds the engine makes (a job's payload model is `Job`; its handler gets the `Lease` too)
JOB_KINDS: Mapping[str, str] = {
    "extract": "facts from a closed segment by the configured LLM (engine/_extraction.py)",
    "summarize": "a session's summary once its last segment closed (engine/_extraction.py)",
}

Listener = Callable[[Any], None]


class Events:
    """The registry: listeners per event (run in the order registered) and one handler per job kind."""

    def __init__(self) -> None:
        self._listeners: dict[str, list[tuple[str, Listener]]] = {name: [] for name in EVENTS}
        self.jobs: dict[str, Handler] = {}  # kind -> handler, read by the job queue's workers

    def on(self, event: str, listener: Listener, *, name: str | None = None) -> None:
        """Run `listener(payload)` each time `event` fires; `name` (default: the function's) says who it is."""
        if event not in EVENTS:
            raise ValidationError(f"unknown event {event!r}: the events are {', '.join(EVENTS)} "
                                  "(a job kind is registered with mem.upkeep.job(kind, handler))")
        self._listeners[event].append((name or _name(listener), listener))

    def job(self, kind: str, handler: Handler) -> None:
        """Run jobs of `kind` with `handler(job, lease)` in this process's workers (one handler per kind)."""
        if not isinstance(kind, str) or not kind.strip():
            raise ValidationError("a job kind must be a non-empty string")
        if kind in EVENTS:
            raise ValidationError(f"{kind!r} is an event, not a job kind: mem.upkeep.on({kind!r}, listener)")
        self.jobs[kind] = handler

    def emit(self, event: str, payload: BaseModel) -> None:
        """Tell every listener of `event`, in order; a listener's exception reaches the part that emitted it."""
        assert isinstance(payload, EVENTS[event].payload), f"{event} carries {EVENTS[event].payload.__name__}"
        for _, listener in self._listeners[event]:
            listener(payload)

    def handlers(self) -> Handlers:
        """Who handles what, by name: each event's listeners, and each job kind's handler."""
        return Handlers(events={event: [name for name, _ in listeners] for event, listeners in self._listeners.items()},
                        jobs={kind: _name(handler) for kind, handler in self.jobs.items()})


class Warming(Protocol):
    """What warms the searches of new rows' owners (`Memory._warm_searches`), as the wiring needs it."""

    def __call__(self, ids: list[str]) -> None: ...


class Extracting(Protocol):
    """Extraction (engine/_extraction.py), as the wiring needs it (a protocol: the parts import this module,
    not the reverse)."""

    @property
    def active(self) -> bool: ...
    def queue(self, segment: Segment) -> None: ...
    def extract(self, job: Job, lease: Lease) -> None: ...
    def summarize(self, job: Job, lease: Lease) -> None: ...


def wire(events: Events, check_topics: Callable[[list[str]], None], extraction: Extracting, warm: Warming) -> None:
    """The engine's own handlers, all of them: the conversations' topic check and the searches warmed after new
    vectors, and (with an LLM configured) the extraction job queued as a segment closes and the handlers of its
    job kinds."""
    events.on("vectors_stored", lambda e: check_topics(e.ids), name="conversations.check_topics")
    events.on("vectors_stored", lambda e: warm(e.ids), name="retrieval.warm")
    if extraction.active:
        events.on("segment_closed", lambda e: extraction.queue(e.segment), name="extraction.queue")
        events.job("extract", extraction.extract)
        events.job("summarize", extraction.summarize)


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
