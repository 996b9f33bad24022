"""What a read may see (`Filters`), and each rule of it written once: as SQL for both backends
and as a test on the in-process vector index's columns (`vector_index.py`).

A rule names the memory columns it reads. Those the vector index holds (`INDEX_COLUMNS`: the
columns of every rule with `in_index`) are applied to its arrays; the others are checked in SQL
on the index's hits (`Store._filter_ids`). A new filter (visibility) is one `Rule` added to
`RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from .._time import as_utc, utcnow

if TYPE_CHECKING:
    import numpy as np

    from .dialect import Dialect


@dataclass(frozen=True)
class Filters:
    """What a read may see. `scopes=None` means every scope (already checked by `scopes.py`)."""

    scopes: list[str] | None = None
    categories: list[str] | None = None
    tags: list[str] | None = None  # any of these tags
    session_id: str | None = None
    source_type: str | None = None
    source_ids: list[str] | None = None  # any of these (an importer's own ids for what it wrote)
    user_id: str | None = None  # only the rows of this user (a list's filter, not the reader)
    agent_id: str | None = None  # only the rows this agent wrote
    visibility: str | None = None  # only the rows at this level (private, shared, secret)
    since: datetime | None = None
    until: datetime | None = None
    include_deleted: bool = False
    only_deleted: bool = False
    include_expired: bool = False
    now: datetime | None = None
    kinds: tuple[str, ...] = ("memory",)  # memories unless a read asks for messages or file chunks too
    other_session: str | None = None  # leave out this session's messages (recall: they are in the prompt already) …
    other_session_since: datetime | None = None  # … from this time on (its current transcript), if given
    message_roles: tuple[str, ...] | None = None  # only messages of these roles (a message row's source_id)
    as_of: datetime | None = None  # what was true at this time (valid time), instead of what is true now
    include_superseded: bool = False  # every version of a fact, not only the current one (reads by id, maintenance)
    # the household rule (docs/agents.md), set by `scopes.household` for a read on a caller's behalf:
    household: bool = False
    reader_agent: str | None = None  # the agent reading: another agent's private memories are not its
    master: bool = True  # it reads the other agents' shared memories (the master knowledge base)
    secrets: bool = False  # secrets too (asked for): an agent's own, a person's or the administrator's all
    only_sealed: bool = False  # only the secrets stored encrypted (a secret search decrypts these)


class Columns(Protocol):
    """The vector index's view of one scope's rows: each indexed column as an array (times as
    epoch seconds, NaN for NULL; text as integer codes)."""

    def __getitem__(self, column: str) -> np.ndarray: ...

    def codes(self, column: str, values: Sequence[str]) -> np.ndarray: ...


def epoch(value: datetime) -> float:
    return as_utc(value).timestamp()


class Rule:
    """One condition of a `Filters`; `in_index`: the vector index applies it to its own arrays."""

    columns: tuple[str, ...] = ()
    in_index = True

    def applies(self, f: Filters) -> bool:
        raise NotImplementedError

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        """The condition on table alias `a`, with its parameters."""
        raise NotImplementedError

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        """Which of the index's rows pass, as a function of their columns (only for rules
        `in_index`); made once per search, so values it needs (times, codes) are worked out once."""
        raise NotImplementedError


class Deleted(Rule):
    columns = ("deleted_at",)

    def applies(self, f: Filters) -> bool:
        return f.only_deleted or not f.include_deleted

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return f"{a}.deleted_at IS {'NOT ' if f.only_deleted else ''}NULL", []

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        import numpy as np

        if f.only_deleted:
            return lambda rows: ~np.isnan(rows["deleted_at"])
        return lambda rows: np.isnan(rows["deleted_at"])


class NotExpired(Rule):
    columns = ("expires_at",)

    def applies(self, f: Filters) -> bool:
        return not f.include_expired

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return f"({a}.expires_at IS NULL OR {a}.expires_at > {d.p})", [d.ts(f.as_of or f.now or utcnow())]

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        now = epoch(f.as_of or f.now or utcnow())
        return lambda rows: ~(rows["expires_at"] <= now)  # NULL (NaN) never expires


class Valid(Rule):
    """Facts stay true until superseded (docs/time.md). By default a read sees the current version:
    not closed, or closed only from a time to come. `as_of` T sees the version true at T: valid from
    T or before (a NULL `valid_from` is the row's `created_at`) and not closed by T.

    Valid time only, not also "recorded by T": a correction made today that is true since last
    week closes the old version last week, so "recorded by T" would leave a day in between with
    neither version."""

    columns = ("valid_from", "valid_to", "created_at")  # created_at: when valid_from is NULL

    def applies(self, f: Filters) -> bool:
        return f.as_of is not None or not f.include_superseded

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        if f.as_of is None:
            return f"({a}.valid_to IS NULL OR {a}.valid_to > {d.p})", [d.ts(f.now or utcnow())]
        at = d.ts(f.as_of)
        return (f"({a}.valid_from <= {d.p} OR ({a}.valid_from IS NULL AND {a}.created_at <= {d.p})) "
                f"AND ({a}.valid_to IS NULL OR {a}.valid_to > {d.p})"), [at, at, at]

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        if f.as_of is None:
            now = epoch(f.now or utcnow())
            return lambda rows: ~(rows["valid_to"] <= now)  # NULL (NaN): still true
        import numpy as np

        at = epoch(f.as_of)

        def test(rows: Columns) -> np.ndarray:
            start = rows["valid_from"]
            return (np.where(np.isnan(start), rows["created_at"], start) <= at) & ~(rows["valid_to"] <= at)

        return test


class Household(Rule):
    """What a reader sees of the rows of its scopes, by their visibility and author. An agent reads its
    own rows, the rows no agent wrote (its user's own words, imports) and, unless told not to, the
    other agents' shared memories and file chunks, never their messages (a conversation is its
    agent's, whatever level the row had when it was stored); a secret only when asked for, and then
    only its own. A reader that is no agent (a person, the administrator) sees every row of its
    scopes, secrets when asked for."""

    columns = ("visibility", "agent_id", "kind")

    def applies(self, f: Filters) -> bool:
        return f.household

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        if f.reader_agent is None:
            return ("1 = 1" if f.secrets else f"{a}.visibility <> 'secret'"), []
        secret = f"({a}.visibility <> 'secret' OR {a}.agent_id = {d.p})" if f.secrets else f"{a}.visibility <> 'secret'"
        shared = f"({a}.visibility = 'shared' AND {a}.kind <> 'message') OR " if f.master else ""
        return (f"({shared}{a}.agent_id IS NULL OR {a}.agent_id = {d.p}) AND {secret}",
                [f.reader_agent, *([f.reader_agent] if f.secrets else [])])

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        import numpy as np

        def test(rows: Columns) -> np.ndarray:
            level, agent = rows["visibility"], rows["agent_id"]
            secret = among(level, rows.codes("visibility", ["secret"]))
            if f.reader_agent is None:
                return np.ones_like(secret) if f.secrets else ~secret
            own = among(agent, rows.codes("agent_id", [f.reader_agent]))
            seen = own | among(agent, rows.codes("agent_id", [None]))  # type: ignore[list-item]
            if f.master:
                seen |= among(level, rows.codes("visibility", ["shared"])) & ~among(rows["kind"], rows.codes("kind", ["message"]))
            return seen & (~secret | own) if f.secrets else seen & ~secret

        return test


@dataclass(frozen=True)
class _OnColumn(Rule):
    """A rule on one column, set by one field of the filters (it applies when the field is set)."""

    column: str
    field: str

    @property
    def columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.column,)

    def applies(self, f: Filters) -> bool:
        return getattr(f, self.field) is not None


class OneOf(_OnColumn):
    """The column's value is one of a list (an empty list matches nothing)."""

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        values = getattr(f, self.field)
        return (f"{a}.{self.column} IN ({d.marks(len(values))})" if values else "1 = 0"), list(values)

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        column, values = self.column, getattr(f, self.field)
        return lambda rows: among(rows[column], rows.codes(column, values))


class OneOfInSql(OneOf):
    """`OneOf` on a column the vector index does not keep."""

    in_index = False


class Equals(_OnColumn):
    in_index = False

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return f"{a}.{self.column} = {d.p}", [getattr(f, self.field)]


class OtherSession(Rule):
    """Rows of kinds other than memory must be from another session than the one named (or from before
    its current transcript began)."""

    columns = ("kind", "session_id")
    in_index = False

    def applies(self, f: Filters) -> bool:
        return f.other_session is not None and f.kinds != ("memory",)

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        if f.other_session_since is None:
            return f"({a}.kind = 'memory' OR {a}.session_id IS NULL OR {a}.session_id <> {d.p})", [f.other_session]
        return (f"({a}.kind = 'memory' OR {a}.session_id IS NULL OR {a}.session_id <> {d.p} OR {a}.created_at < {d.p})",
                [f.other_session, d.ts(f.other_session_since)])


class MessageRoles(Rule):
    """Messages only of some roles (recall leaves reasoning and tool output out of the prompt)."""

    columns = ("kind", "source_id")
    in_index = False

    def applies(self, f: Filters) -> bool:
        return f.message_roles is not None and "message" in f.kinds

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        roles = list(f.message_roles or ())
        return f"({a}.kind <> 'message' OR {a}.source_id IN ({d.marks(len(roles)) if roles else 'NULL'}))", roles


class OnlySealed(Rule):
    columns = ("sealed",)
    in_index = False

    def applies(self, f: Filters) -> bool:
        return f.only_sealed

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return f"{a}.sealed IS NOT NULL", []


class AnyTag(Rule):
    columns = ("tags",)
    in_index = False

    def applies(self, f: Filters) -> bool:
        return bool(f.tags)

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return d.tags_any(a, list(f.tags or ()))


@dataclass(frozen=True)
class Bound(_OnColumn):
    """A time column at or after (`>=`), or at or before (`<=`), a time of the filters."""

    op: str = ">="

    def sql(self, f: Filters, d: Dialect, a: str) -> tuple[str, list[Any]]:
        return f"{a}.{self.column} {self.op} {d.p}", [d.ts(getattr(f, self.field))]

    def test(self, f: Filters) -> Callable[[Columns], np.ndarray]:
        at, column = epoch(getattr(f, self.field)), self.column
        if self.op == ">=":
            return lambda rows: rows[column] >= at
        return lambda rows: rows[column] <= at


#: The scope is the vector index's partition key: it reads only the named scopes' rows.
SCOPE = OneOf("scope", "scopes")
RULES: tuple[Rule, ...] = (
    Deleted(),
    NotExpired(),
    Valid(),
    Household(),
    SCOPE,
    OneOf("kind", "kinds"),
    OneOf("category", "categories"),
    AnyTag(),
    Equals("session_id", "session_id"),
    OtherSession(),
    MessageRoles(),
    Equals("source_type", "source_type"),
    OneOfInSql("source_id", "source_ids"),
    Equals("user_id", "user_id"),
    Equals("agent_id", "agent_id"),
    Equals("visibility", "visibility"),
    OnlySealed(),
    Bound("created_at", "since", ">="),
    Bound("created_at", "until", "<="),
)
_IN_INDEX = tuple(r for r in RULES if r.in_index and r is not SCOPE)
_IN_SQL = tuple(r for r in RULES if not r.in_index)
#: the columns the vector index keeps per row besides the scope
INDEX_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(c for r in _IN_INDEX for c in r.columns))


def where(f: Filters, d: Dialect, alias: str) -> tuple[str, list[Any]]:
    """The SQL of a `Filters`: every rule that applies, ANDed."""
    clauses: list[str] = []
    params: list[Any] = []
    for rule in RULES:
        if rule.applies(f):
            sql, extra = rule.sql(f, d, alias)
            clauses.append(sql)
            params.extend(extra)
    return (" AND ".join(clauses) or "1 = 1"), params


def among(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """`np.isin` for the few codes a filter names: one comparison each, where `np.isin` sorts (20k rows:
    5 µs against 110 µs, and a vector search applies several tests to a whole scope)."""
    import numpy as np

    if len(codes) > 8:
        return np.isin(values, codes)
    out = np.zeros(len(values), dtype=bool)
    for code in codes:
        out |= values == code
    return out


def index_tests(f: Filters) -> list[Callable[[Columns], np.ndarray]]:
    """The tests the vector index applies for these filters (the scope aside: its partitions)."""
    return [r.test(f) for r in _IN_INDEX if r.applies(f)]


def checked_in_sql(f: Filters) -> bool:
    """Whether these filters have rules the vector index does not apply (its hits are then
    checked in SQL)."""
    return any(r.applies(f) for r in _IN_SQL)
