"""Erasing a person (GDPR): every row that belongs to one user or one agent, in one transaction.

Why a table of kinds: erasure must reach every table that holds a person's data, and one that
is added later (conversations, files) must not be forgotten by a second erasure path. Each
`KINDS` entry counts, or removes, one kind of row for a person; a new table adds a line there,
and every door (Python, CLI, REST, MCP) reports its count with the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable, Literal, TypeVar

from ..errors import ScopeError, ValidationError
from ..scopes import Caller, Stored, may_erase, read_scopes
from ..storage import Store
from ._validate import require_writes
from ._writes import Writes, actor_of

R = TypeVar("R", bound=Stored)


@dataclass(frozen=True)
class Person:
    """Whom an erasure is about: a user or an agent, by id."""

    kind: Literal["user", "agent"]
    id: str

    @classmethod
    def named(cls, user_id: str | None, agent_id: str | None) -> "Person":
        if (user_id is None) == (agent_id is None):
            raise ValidationError("erase names one person: give user_id or agent_id (not both)")
        kind: Literal["user", "agent"] = "user" if user_id is not None else "agent"
        ident = user_id if user_id is not None else agent_id
        if not isinstance(ident, str) or not ident.strip():
            raise ValidationError(f"{kind}_id must be a non-empty string")
        Caller(user_id=ident) if kind == "user" else Caller(agent_id=ident)  # the same id rules as everywhere
        return cls(kind, ident)

    @property
    def scope(self) -> str:
        return f"{self.kind}:{self.id}"

    @property
    def column(self) -> str:
        return f"{self.kind}_id"

    def unnamed(self, actor: str) -> str | None:
        """A history actor (`user:alice agent:main`, as `actor_of` writes it) with this person's part
        replaced by `user:(erased)`; None when it does not name the person."""
        own, erased = self.scope, f"{self.kind}:(erased)"
        if actor == own:
            return erased
        if self.kind == "user" and actor.startswith(own + " agent:"):
            return erased + actor[len(own):]
        if self.kind == "agent" and actor.startswith("user:") and actor.endswith(" " + own):
            return actor[: -len(own)] + erased
        return None


@dataclass
class Erasing:
    """One erasure in progress: what each kind needs to count or remove its rows."""

    store: Store
    writes: Writes
    person: Person
    actor: str
    dry_run: bool
    folder: Path  # where closed segments' JSONL files are
    caller: Caller  # who erases: the administrator takes every row, the person itself what it may erase
    files: list[Path] = field(default_factory=list)  # to remove once the rows are gone for good (after COMMIT)
    segment_ids: list[str] = field(default_factory=list)  # the person's segments: their jobs go too

    @cached_property
    def memory_ids(self) -> list[str]:
        """The person's memories: owned by it in any scope, or in its scope; deleted ones included."""
        return self.owned_ids("memory")

    def owned_ids(self, kind: str) -> list[str]:
        return [r.id for r in self.taken(self.store.memories.owned, kind)]

    def taken(self, owned: Callable[..., Iterable[R]], *args: str) -> list[R]:
        """The rows a store's `owned(column, id, scope, *args)` finds for the person that this erasure removes."""
        return [r for r in owned(self.person.column, self.person.id, self.person.scope, *args) if self.takes(r)]

    def takes(self, row: Stored) -> bool:
        """Whether this erasure removes the row: any for the administrator; for the person itself, those in
        its own scope and those it may erase elsewhere (its own words where it reads: not what a user
        said through an agent, nor anything outside a token's list)."""
        caller = self.caller
        return caller.administrator or row.scope == self.person.scope or may_erase(caller, row, access=self.writes.config.access)

    @cached_property
    def history_rows(self) -> int:
        """History rows of those memories, counted before the erasure adds its own."""
        return self.store.history.count(self.memory_ids)


def _memories(e: Erasing) -> int:
    """The memories, their vectors and index entries; their history keeps only who erased them and when."""
    if not e.dry_run and e.memory_ids:
        e.history_rows  # noqa: B018 (counted first: the erasure adds a row per memory)
        e.writes.erase(e.memory_ids, "forget", e.actor, where=False)
    return len(e.memory_ids)


def _history(e: Erasing) -> int:
    """History rows of the person's memories, whose old values the memories' erasure blanked."""
    return e.history_rows


def _actor(e: Erasing) -> int:
    """History rows, of any memory, that name the person as who made the change: the person's part
    of the actor becomes `user:(erased)` (or `agent:(erased)`), the rest stays; and the rows of memories
    erased before that name it as where they were (their scope, or their agent), which lose that."""
    renamed = {actor: new for actor in e.store.history.actors() if (new := e.person.unnamed(actor)) is not None}
    where = e.store.history.unname_erasures(e.person.scope, e.person.id if e.person.kind == "agent" else None,
                                            dry_run=e.dry_run)
    if e.dry_run:
        return e.store.history.count_by_actor(list(renamed)) + where
    return sum(e.store.history.rename_actor(old, new) for old, new in renamed.items()) + where


def _occurrences(e: Erasing) -> int:
    """Occurrences of the person's facts, and any in its scope: what was said, when, and its snippet."""
    ids = e.store.occurrences.owned(e.memory_ids, e.person.scope)
    if not e.dry_run and ids:
        e.store.occurrences.delete(ids)
    return len(ids)


def _messages(e: Erasing) -> int:
    """The person's conversation messages: their text, vectors and index entries, and their rows."""
    ids = e.owned_ids("message")
    if not e.dry_run and ids:
        e.store.messages.delete(ids)
    if not e.dry_run and (left := e.owned_ids("window")):  # a message's windows go with it; these outlived theirs
        e.store.memories.remove(left)
    return len(ids)


def _segments(e: Erasing) -> int:
    """The person's conversation segments, and each closed one's JSONL file."""
    found = e.taken(e.store.segments.owned)
    e.segment_ids = [s.id for s in found]
    if not e.dry_run and found:
        e.store.segments.delete([s.id for s in found])
        e.files += [e.folder / s.file for s in found if s.file]
    return len(found)


def _files(e: Erasing) -> int:
    """The person's ingested files: their chunks (text, vectors, index entries) and their rows."""
    found = e.taken(e.store.files.owned)
    if not e.dry_run:
        chunks = e.owned_ids("chunk")
        if chunks:
            e.store.memories.remove(chunks)
        for f in found:
            e.store.files.delete(f.id)
    return len(found)


def _startup(e: Erasing) -> int:
    """Startup identity entries of the person's scope."""
    if e.dry_run:
        return e.store.startup.count(e.person.scope)
    return e.store.startup.delete_scope(e.person.scope)


def _jobs(e: Erasing) -> int:
    """Jobs in the person's scope (their payloads may quote what the person said), and the extraction jobs of
    its segments in other scopes: a job running one loses its lease, so nothing it extracted is written."""
    return e.store.jobs.in_scope(e.person.scope, e.segment_ids, delete=not e.dry_run)


def _searches(e: Erasing) -> int:
    """The person's logged searches (made by it, or under its scope) with their hits, and every logged hit
    on its memories: what it asked and what was found of it."""
    return e.store.search_log.of_person(e.person.column, e.person.id, e.person.scope, e.memory_ids,
                                        delete=not e.dry_run)


#: what an erasure removes, in order, by the name its count is reported under
KINDS: tuple[tuple[str, Callable[[Erasing], int]], ...] = (
    ("memories", _memories),
    ("history", _history),
    ("history_actor", _actor),
    ("occurrences", _occurrences),
    ("messages", _messages),
    ("segments", _segments),
    ("files", _files),
    ("startup", _startup),
    ("jobs", _jobs),
    ("searches", _searches),
)


def erase_person(
    store: Store, writes: Writes, person: Person, caller: Caller, *, dry_run: bool, folder: Path
) -> dict[str, int]:
    """Remove (or with `dry_run`, count) every row of `person`; rows per kind.

    Only the administrator, or the person itself (a user through any agent; an agent acting for no user),
    may erase it; the person takes its own scope and what it may erase elsewhere (`Erasing.takes`). One
    transaction: all of it is gone, or nothing."""
    read_scopes(caller, person.scope, access=writes.config.access)  # raises ScopeError for anyone who may not reach it
    itself = caller.user_id == person.id if person.kind == "user" else (caller.user_id, caller.agent_id) == (None, person.id)
    if not (caller.administrator or itself):
        raise ScopeError(f"only the administrator or {person.kind} {person.id!r} itself may erase {person.kind} {person.id!r}")
    actor = actor_of(caller)
    e = Erasing(store, writes, person, person.unnamed(actor) or actor, dry_run, folder, caller)  # a self-erasure is signed anonymously
    if dry_run:
        return {name: kind(e) for name, kind in KINDS}
    require_writes(writes.config)
    with store.transaction():
        counts = {name: kind(e) for name, kind in KINDS}
        store.erased(person.scope)
    for path in e.files:
        path.unlink(missing_ok=True)
    return counts
