"""The small value types the store's methods take and return (the store itself: `sql.Store`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator, Sequence

from ..models import ListOrder

Order = ListOrder


def chunks(items: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    """`items` in lists of at most `size`: the values one `IN (…)` takes."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass(slots=True)
class Candidate:
    """One hit from one candidate leg: the memory id and the leg's raw score (higher is better); `via`:
    the window of a long message that scored it (the vector leg), and `via_chars` that window's length."""

    id: str
    score: float
    via: str | None = None
    via_chars: int | None = None


@dataclass(frozen=True, slots=True)
class Owned:
    """A row of a person's, as erasure weighs it: where it is and who wrote it (`scopes.Stored`)."""

    id: str
    scope: str
    user_id: str | None
    agent_id: str | None


@dataclass(slots=True)
class HistoryDraft:
    memory_id: str
    action: str
    before: str | None  # JSON text (a snapshot is serialised once, by pydantic: the add path's biggest cost)
    after: str | None
    actor: str | None
    at: datetime


@dataclass
class StoreStats:
    total: int
    deleted: int
    expired: int
    by_category: dict[str, int] = field(default_factory=dict)
    by_scope: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)  # live rows of each kind (memories are `total`)
    users: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    size_bytes: int | None = None
