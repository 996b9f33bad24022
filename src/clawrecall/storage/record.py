"""The conversation record as the store keeps it: `store.messages`, `store.segments`, `store.files`.

A message's or file chunk's text, vector and scope live in its `memories` row (same id, of kind
`message` or `chunk`), so the one pipeline searches them and the one scope check guards them;
these tables hold what only the record has (role, order, tokens, segment, file).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence

from ..models import FileRecord, Message, Segment
from .base import chunks
from .executor import Executor, TableRows
from .schema import FILES, MESSAGES, SEGMENTS


class Messages(TableRows[Message]):
    table = MESSAGES
    model = Message

    def __init__(self, store: Executor, remove_memories: Callable[[list[str]], None]):
        """`remove_memories`: `store.memories.remove`, so a message's `memories` row goes with it."""
        super().__init__(store)
        self._remove_memories = remove_memories
        # a message with its text and owner, from its `memories` row
        self._select = (f"SELECT {', '.join(f't.{c}' for c in self._map.fields)}, m.content, m.user_id, m.agent_id "
                        "FROM messages t JOIN memories m ON m.id = t.id")
        # said order: time, place in the transcript, then the order the parts of one message were stored in
        self._order = f"t.created_at, t.ordinal, m.{store.dialect.order_column}"

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Message]:
        n = len(self._map.fields)
        out = []
        for row in self._store.run(f"{self._select} {sql}", params):
            fields = self._map.read(dict, row[:n])
            out.append(Message(**fields, content=row[n], user_id=row[n + 1], agent_id=row[n + 2]))
        return out

    def existing_keys(self, scope: str, session_id: str, keys: Sequence[str]) -> set[str]:
        p = self._store.dialect.p
        found: set[str] = set()
        for chunk in chunks(keys):
            rows = self._store.run(
                f"SELECT dedup_key FROM messages WHERE scope = {p} AND session_id = {p} "
                f"AND dedup_key IN ({self._store.dialect.marks(len(chunk))})",
                (scope, session_id, *chunk),
            )
            found.update(r[0] for r in rows)
        return found

    def of(self, ids: Sequence[str]) -> dict[str, Message]:
        out: dict[str, Message] = {}
        for chunk in chunks(ids):
            where, params = self._in("id", chunk)
            out.update((m.id, m) for m in self._read(f"WHERE {where}", params))
        return out

    def in_session(self, scopes: Sequence[str] | None, session_id: str, *, limit: int, offset: int,
                   agent: str | None = None) -> list[Message]:
        """`agent`: only the messages of that agent's conversations (or of none's): docs/agents.md."""
        p = self._store.dialect.p
        where, params = self._in_scopes(scopes)
        where, params = _of_agent(where, params, "m", agent, p)
        return self._read(f"WHERE {where} AND t.session_id = {p} ORDER BY {self._order} LIMIT {p} OFFSET {p}",
                          (*params, session_id, limit, offset))

    def stamped_between(self, scope: str, session_id: str, start: datetime, end: datetime) -> list[Message]:
        """A session's messages stamped from `start` to `end`, in said order."""
        d = self._store.dialect
        return self._read(
            f"WHERE t.scope = {d.p} AND t.session_id = {d.p} AND t.created_at >= {d.p} AND t.created_at <= {d.p} "
            f"ORDER BY {self._order}", (scope, session_id, d.ts(start), d.ts(end)),
        )

    def ids_in(self, segment_ids: Sequence[str]) -> list[str]:
        """Ids of the messages of these segments."""
        return self._ids_where("segment_id", segment_ids)

    def in_segment(self, segment_id: str) -> list[Message]:
        return self._read(f"WHERE t.segment_id = {self._store.dialect.p} ORDER BY {self._order}", (segment_id,))

    def ended_before(self, cutoff: datetime, limit: int) -> list[str]:
        """Ids of messages whose segment closed before `cutoff` (the open segment's are kept whole)."""
        d = self._store.dialect
        rows = self._store.run(
            f"SELECT t.id FROM messages t JOIN segments s ON s.id = t.segment_id "
            f"WHERE s.closed_at IS NOT NULL AND s.closed_at < {d.p} LIMIT {d.p}",
            (d.ts(cutoff), limit),
        )
        return [str(r[0]) for r in rows]

    def delete(self, ids: Sequence[str]) -> None:
        """Messages and their `memories` rows."""
        s = self._store
        with s.transaction():
            s.run_many(f"DELETE FROM messages WHERE id = {s.dialect.p}", [(i,) for i in ids])
            self._remove_memories(list(ids))

    def move(self, ids: Sequence[str], segment_id: str) -> None:
        s, p = self._store, self._store.dialect.p
        with s.transaction():
            s.run_many(f"UPDATE messages SET segment_id = {p} WHERE id = {p}", [(segment_id, i) for i in ids])

    def sessions(self, scopes: Sequence[str] | None, *, limit: int, offset: int,
                 agent: str | None = None) -> list[dict[str, Any]]:
        """One row per conversation (scope and session), the latest first; `agent`: its own only."""
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        where, params = _of_agent(where, params, "m", agent, d.p)
        rows = self._store.run(
            "SELECT t.scope, t.session_id, min(m.user_id), min(m.agent_id), min(t.channel), count(*), "
            "min(t.created_at), max(t.created_at) FROM messages t JOIN memories m ON m.id = t.id "
            f"WHERE {where} GROUP BY t.scope, t.session_id ORDER BY max(t.created_at) DESC, t.session_id "
            f"LIMIT {d.p} OFFSET {d.p}",
            (*params, limit, offset),
        )
        from_ts = d.from_db["time"]
        return [
            {"scope": r[0], "session_id": r[1], "user_id": r[2], "agent_id": r[3], "channel": r[4], "messages": r[5],
             "first_at": from_ts(r[6]), "last_at": from_ts(r[7])}
            for r in rows
        ]

    def stats(self, scopes: Sequence[str] | None, by: str) -> list[dict[str, Any]]:
        """Seed 000's `conversation_stats`, grouped by user, agent or session: messages per role,
        tokens, segments and files."""
        column = {"user": "m.user_id", "agent": "m.agent_id", "session": "t.session_id"}[by]
        where, params = self._in_scopes(scopes)
        rows = self._store.run(
            f"SELECT {column}, t.role, count(*), coalesce(sum(t.input_tokens), 0), coalesce(sum(t.output_tokens), 0) "
            f"FROM messages t JOIN memories m ON m.id = t.id WHERE {where} "
            f"GROUP BY {column}, t.role ORDER BY {column}, t.role",
            params,
        )
        groups: dict[Any, dict[str, Any]] = {}
        for key, role, n, tokens_in, tokens_out in rows:
            g = groups.setdefault(key, {"key": key, "messages": 0, "by_role": {}, "input_tokens": 0, "output_tokens": 0})
            g["messages"] += n
            g["by_role"][role] = n
            g["input_tokens"] += int(tokens_in)
            g["output_tokens"] += int(tokens_out)
        return list(groups.values())


class Segments(TableRows[Segment]):
    table = SEGMENTS
    model = Segment

    def open_for(self, scope: str, session_id: str) -> Segment | None:
        """The session's open segment, locked until the transaction ends (PostgreSQL)."""
        d = self._store.dialect
        rows = self._read(f"WHERE t.scope = {d.p} AND t.session_id = {d.p} AND t.closed_at IS NULL{d.for_update}",
                          (scope, session_id))
        return rows[0] if rows else None

    def due(self, idle_since: datetime, limit: int = 100) -> list[Segment]:
        """Open segments whose last message is older than `idle_since`."""
        d = self._store.dialect
        return self._read(f"WHERE t.closed_at IS NULL AND t.ended_at < {d.p} ORDER BY t.ended_at LIMIT {d.p}",
                          (d.ts(idle_since), limit))

    def last_end(self, scope: str, session_id: str) -> datetime | None:
        """When the session last ended (its latest segment closed by `session_end`)."""
        d = self._store.dialect
        rows = self._store.run(
            f"SELECT max(closed_at) FROM segments WHERE scope = {d.p} AND session_id = {d.p} AND close_reason = 'session_end'",
            (scope, session_id),
        )
        return d.from_db["time"](rows[0][0]) if rows and rows[0][0] is not None else None


    def closed_before(self, cutoff: datetime, limit: int) -> list[Segment]:
        d = self._store.dialect
        return self._read(f"WHERE t.closed_at IS NOT NULL AND t.closed_at < {d.p} ORDER BY t.closed_at LIMIT {d.p}",
                          (d.ts(cutoff), limit))

    def delete(self, ids: Sequence[str]) -> None:
        s = self._store
        with s.transaction():
            s.run_many(f"DELETE FROM segments WHERE id = {s.dialect.p}", [(i,) for i in ids])

    def scopes_of(self, scopes: Sequence[str] | None, session_id: str) -> list[str]:
        """The scopes, of these, holding a conversation of this session id."""
        where, params = self._in_scopes(scopes)
        rows = self._store.run(f"SELECT DISTINCT t.scope FROM segments t WHERE {where} AND t.session_id = "
                                f"{self._store.dialect.p} ORDER BY t.scope", (*params, session_id))
        return [r[0] for r in rows]

    def find(self, scopes: Sequence[str] | None, session_id: str | None, *, limit: int, offset: int,
             for_update: bool = False, agent: str | None = None) -> list[Segment]:
        """`for_update`: locked until the transaction ends (PostgreSQL), as `open_for` locks one; `agent`:
        that agent's segments only (and those of no agent)."""
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        where, params = _of_agent(where, params, "t", agent, d.p)
        if session_id is not None:
            where += f" AND t.session_id = {d.p}"
            params.append(session_id)
        return self._read(f"WHERE {where} ORDER BY t.started_at DESC, t.id LIMIT {d.p} OFFSET {d.p}"
                          f"{d.for_update if for_update else ''}", (*params, limit, offset))


class Files(TableRows[FileRecord]):
    table = FILES
    model = FileRecord

    def at(self, scope: str, path: str) -> FileRecord | None:
        d = self._store.dialect
        rows = self._read(f"WHERE t.scope = {d.p} AND t.path = {d.p}", (scope, path))
        return rows[0] if rows else None

    def find(self, scopes: Sequence[str] | None, *, limit: int, offset: int) -> list[FileRecord]:
        d = self._store.dialect
        where, params = self._in_scopes(scopes)
        return self._read(f"WHERE {where} ORDER BY t.path LIMIT {d.p} OFFSET {d.p}", (*params, limit, offset))

    def delete(self, file_id: str) -> None:
        s = self._store
        with s.transaction():
            s.run(f"DELETE FROM files WHERE id = {s.dialect.p}", (file_id,))


def _of_agent(where: str, params: list[Any], alias: str, agent: str | None, p: str) -> tuple[str, list[Any]]:
    """A conversation is its agent's (docs/agents.md): with `agent`, rows of another agent are left out."""
    if agent is None:
        return where, params
    return f"{where} AND ({alias}.agent_id IS NULL OR {alias}.agent_id = {p})", [*params, agent]
