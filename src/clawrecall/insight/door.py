"""Which door a call came in by (python, cli, rest, mcp, hook), for the search log.

A context variable, set once where a door receives a call (the CLI's entry, the server's middleware,
MCP over stdio), so the engine and the tools every door shares need no parameter for it; a call
from Python is `python`. Work handed to a thread keeps it when run in a copy of the caller's context.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from ..models import Door

DOOR: ContextVar[Door] = ContextVar("clawrecall_door", default="python")


@contextmanager
def at_door(name: Door) -> Iterator[None]:
    """Calls made inside come in by `name`."""
    token = DOOR.set(name)
    try:
        yield
    finally:
        DOOR.reset(token)
