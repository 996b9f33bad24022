"""`mem.conversations`: the record of what was said, as it was said (openclaw-memory-pgvector's
requests/responses/reasoning, memento-local's capture buffer and segments).

`log` stores each message of a transcript once, in the database, before it answers: the buffer is
the database, so an acknowledged message survives a kill -9. Each message is a `memories` row of
kind `message` (searchable with memories, guarded by the same scope check) plus a `messages` row.
Vectors come after the answer (`_backfill.py`); the topic check runs once they have.
Closing a segment is the event the extraction of facts hangs on (`segment_closed`, emitted in the
closing transaction: the job it queues commits with the close); `_check_topics` handles `vectors_stored`.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from datetime import datetime, timedelta
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Mapping, Sequence

from .._time import utcnow
from ..config import Config, data_dir
from ..conversations import segments as rules
from ..conversations.transcript import RESTAMPED_WITHIN, Entry, entries, resent
from ..errors import NotFoundError, ScopeError, ValidationError
from ..models import (
    Conversation, ConversationDeleted, EndReason, GroupBy, Logged, MemoryRecord, Message, Occurrence, Pruned, Segment,
    StatsGroup,
)
from ..scopes import ALL, MAX_ID_CHARS, Caller, as_caller, may_write, read_scopes, write_scope
from ..storage import Store
from ._backfill import Backfill
from ._events import Events, SegmentClosed
from ._validate import check_int, check_text, new_ids, require_writes
from ._writes import Writes

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("clawrecall.conversations")

_ROW_IMPORTANCE = 0.5  # a message's weight in ranking (memories default to 0.7): said, not chosen to be kept
MAX_CHANNEL_CHARS = 200


def _session_id(session_id: object, where: str = "") -> str:
    """A session id as every verb takes it: 1 to MAX_ID_CHARS characters of text (`where`: where it may come from)."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValidationError(f"a conversation needs a session id{where}")
    if len(session_id) > MAX_ID_CHARS:
        raise ValidationError(f"a session id is 1 to {MAX_ID_CHARS} characters, this one {len(session_id)}")
    check_text(session_id, "session_id")
    return session_id


class Conversations:
    def __init__(self, store: Store, config: Config, writes: Writes, backfill: Backfill, events: Events):
        self._store = store
        self._config = config
        self._writes = writes
        self._backfill = backfill
        self._events = events

    # -- recording ----------------------------------------------------------------------------
    def log(
        self, messages: Sequence[Any], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, session_id: str | None = None, channel: str | None = None,
        now: datetime | None = None, skip_bad: bool = False,
        vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Logged:
        """Store the messages of a transcript not stored yet (by provider id, else role, time or position and
        content), in order, in the session's open segment. Durable when it returns; embedded after.

        A message that cannot be stored (NUL, bytes that are not UTF-8, an unknown role) is an error,
        unless `skip_bad` leaves it out and counts it (`unstorable`). `vectors` (by a message's provider id)
        are the store's model's vectors of those messages, made elsewhere (an imported system's): each is
        stored with its message instead of being embedded again, but for a message the model's window
        cannot hold whole, whose windows the backfill makes with its vector."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        if not caller.identified:  # its scope would be global: every user's to read
            raise ValidationError("a conversation is a user's or an agent's: name one (user_id or agent_id)")
        session = _session_id(session_id if session_id is not None else caller.session_id,
                              " (session_id, or the caller's session)")
        if channel is not None and (not isinstance(channel, str) or len(channel) > MAX_CHANNEL_CHARS):
            raise ValidationError(f"channel must be a string of at most {MAX_CHANNEL_CHARS} characters")
        check_text(channel, "channel")
        items, unstorable = entries(list(messages) if not isinstance(messages, list) else messages, skip_bad=skip_bad)
        scope = self._own(caller)
        now = now or utcnow()
        if not items:
            return Logged(stored=0, skipped=0, unstorable=unstorable, ids=[], segment_id=None)
        given = self._given(items, vectors) if vectors else {}
        for attempt in (1, 2):
            try:
                logged = self._store_new(items, caller, scope, session, channel, now, given)
                return logged.model_copy(update={"unstorable": unstorable})
            except Exception as exc:  # another writer stored the same messages between our read and insert
                if attempt == 2 or not self._store.is_conflict(exc):
                    raise
        raise AssertionError("unreachable")

    def _given(self, items: list[Entry], vectors: Mapping[str, Sequence[float] | np.ndarray]) -> dict[str, np.ndarray]:
        """The given vectors the messages keep (checked and normalised), by provider id: not a long message's."""
        keep = [e.provider_id for e in items if e.provider_id is not None and e.provider_id in vectors
                and not self._backfill.cuts(e.text, e.role)]
        if not keep:
            return {}
        import numpy as np

        try:
            raw = np.array([np.asarray(vectors[i], dtype=np.float32) for i in keep])
        except (TypeError, ValueError):
            raise ValidationError("vectors must be lists of numbers of the store model's dimensions") from None
        return dict(zip(keep, self._backfill.embedding.given(raw, len(keep))))

    def _store_new(
        self, items: list[Entry], caller: Caller, scope: str, session: str, channel: str | None, now: datetime,
        given: dict[str, np.ndarray],
    ) -> Logged:
        cfg = self._config.conversations
        with self._store.transaction():
            known = self._store.messages.existing_keys(scope, session, [e.dedup_key for e in items])
            seen: set[str] = set(known)
            fresh: list[Entry] = []
            for e in items:
                if e.dedup_key not in seen:
                    seen.add(e.dedup_key)
                    fresh.append(e)
            fresh = self._not_resent(fresh, known, scope, session, now)
            if not fresh:
                return Logged(stored=0, skipped=len(items), ids=[], segment_id=None)
            segment = self._store.segments.open_for(scope, session)
            ids = new_ids(len(fresh))
            records: list[MemoryRecord] = []
            rows: list[Message] = []
            changed: dict[str, Segment] = {}
            vectors: dict[str, np.ndarray] = {}  # by memory id: the given vectors of the rows in `records`

            def flush() -> None:
                """Write what the loop has made so far (a segment about to close reads its messages back)."""
                embedded = [r for r in records if r.id in vectors]
                self._writes.record([r for r in records if r.id not in vectors])
                if embedded:
                    import numpy as np

                    self._writes.record(embedded, np.array([vectors[r.id] for r in embedded], dtype=np.float32))
                self._store.messages.insert(rows)
                for s in changed.values():
                    self._store.segments.replace(s)
                records.clear()
                rows.clear()
                changed.clear()

            for memory_id, e in zip(ids, fresh):
                at = min(e.created_at or now, now)
                turn = e.role == "user"
                reason = None if segment is None else (
                    "pause" if rules.pause_closes(segment, at, cfg)
                    else "size" if turn and segment.turn_count >= cfg.max_turns else None
                )
                if segment is not None and reason is not None:
                    flush()
                    self._close(segment, reason, now)
                    segment = None
                if segment is None:
                    segment = Segment(
                        id=new_ids(1)[0], scope=scope, user_id=caller.user_id, agent_id=caller.agent_id, session_id=session,
                        channel=channel, started_at=at, ended_at=at,
                    )
                    self._store.segments.insert([segment])
                segment = segment.model_copy(update={
                    "ended_at": max(segment.ended_at, at), "message_count": segment.message_count + 1,
                    "turn_count": segment.turn_count + turn, "title": segment.title or (rules.cut(e.text) if turn else None),
                })
                changed[segment.id] = segment
                records.append(MemoryRecord(
                    id=memory_id, content=e.text, category="other", importance=_ROW_IMPORTANCE, scope=scope,
                    user_id=caller.user_id, agent_id=caller.agent_id, session_id=session, source_type="conversation",
                    source_id=e.role, metadata={}, created_at=at, updated_at=now, kind="message",
                    embedding_model=self._backfill.embedding.model_name if e.provider_id in given else None,
                ))
                if e.provider_id in given:
                    vectors[memory_id] = given[e.provider_id]
                rows.append(Message(
                    id=memory_id, scope=scope, session_id=session, segment_id=segment.id, role=e.role,
                    ordinal=e.ordinal, dedup_key=e.dedup_key, provider_id=e.provider_id, channel=channel, model=e.model,
                    input_tokens=e.input_tokens, output_tokens=e.output_tokens, summary=e.summary, created_at=at,
                ))
            flush()
        self._backfill.kick()
        return Logged(stored=len(fresh), skipped=len(items) - len(fresh), ids=ids,
                      segment_id=segment.id if segment is not None else None,
                      given_vectors=sum(e.provider_id in given for e in fresh))

    def _not_resent(self, fresh: list[Entry], known: set[str], scope: str, session: str, now: datetime) -> list[Entry]:
        """`fresh` without the messages the record holds under another time stamp (`transcript.resent`). Only
        messages without a provider's id are compared: one with an id is known by it, so two equal messages
        sent out of order (a client's retry, an import newest first) are both kept. A stamp ahead of now (a
        client's clock ahead of ours) was stored as now, so its copy is compared with the last
        `RESTAMPED_WITHIN` before now."""
        candidates = [(i, e if e.created_at <= now else replace(e, created_at=now - RESTAMPED_WITHIN))
                      for i, e in enumerate(fresh) if e.provider_id is None and e.created_at is not None]
        if not candidates:
            return fresh
        stamps = [e.created_at for _, e in candidates if e.created_at is not None]
        stored = [
            (m.dedup_key, m.role, m.content, m.created_at)
            for m in self._store.messages.stamped_between(scope, session, min(stamps), max(stamps) + RESTAMPED_WITHIN)
            if m.dedup_key not in known and m.provider_id is None  # matched by its own key, or known by its id
        ]
        again = {candidates[n][0] for n in resent([e for _, e in candidates], stored)}
        return [e for i, e in enumerate(fresh) if i not in again]

    def import_occurrences(
        self, rows: Sequence[dict[str, Any]], *, caller: Caller | None = None, user_id: str | None = None,
        agent_id: str | None = None, dry_run: bool = False,
    ) -> int:
        """Another system's record of each time a conversation stated a fact (memento-local's `fact_occurrences`):
        `{id, memory_id, at, snippet, sentiment, segment_id, session_id}`, each stored in its fact's scope unless
        its id is stored, its fact is not, or the caller may not write there. Answers how many were (would be) stored."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        with self._store.transaction():
            held = self._store.occurrences.stored([r["id"] for r in rows])
            fresh = [r for r in rows if r["id"] not in held]
            if dry_run:
                return len(fresh)
            facts = self._store.memories.fetch(list({r["memory_id"] for r in fresh}))
            keep = [Occurrence(**{**r, "scope": facts[r["memory_id"]].scope}) for r in fresh if r["memory_id"] in facts
                    and may_write(caller, facts[r["memory_id"]].scope, access=self._config.access)]
            if keep:
                self._store.occurrences.insert(keep)
        return len(keep)

    # -- segments ------------------------------------------------------------------------------
    def end(
        self, session_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        reason: EndReason = "session_end",
    ) -> Segment | None:
        """Close the session's open segment now (`/new`, a reset, or an explicit call); None when none is open,
        "not found" when the caller has no conversation of that id."""
        caller = as_caller(caller, user_id, agent_id)
        require_writes(self._config)
        if reason not in ("session_end", "explicit"):
            raise ValidationError("reason must be session_end or explicit")
        _session_id(session_id)
        scope = self._own(caller)
        with self._store.transaction():
            segment = self._store.segments.open_for(scope, session_id)
            if segment is None:
                if not self._store.messages.in_session([scope], session_id, limit=1, offset=0):
                    raise NotFoundError(f"no conversation with session id {session_id!r}")
                return None
            return self._close(segment, reason, utcnow())

    def close_due(self, *, now: datetime | None = None) -> list[Segment]:
        """Close every open segment whose pause has passed: run on a timer by the server, and at its start
        (segments that should have closed while it was down)."""
        if not self._config.writes.enabled:
            return []
        now = now or utcnow()
        idle = now - timedelta(minutes=self._config.conversations.pause_minutes)
        out: list[Segment] = []
        while due := self._store.segments.due(idle):
            for segment in due:
                with self._store.transaction():
                    current = self._store.segments.get(segment.id, for_update=True)
                    if current is None or current.closed_at is not None:
                        continue
                    out.append(self._close(current, "pause", now))
        return out

    def prune(self, *, older_than_days: float | None = None, now: datetime | None = None) -> Pruned:
        """Erase the messages and segments (rows and JSONL files) of segments closed longer ago than
        `conversations.retention_days` (or `older_than_days`); an open segment is kept whole. The server's
        sweep runs it when retention is set."""
        require_writes(self._config)
        days = self._config.conversations.retention_days if older_than_days is None else older_than_days
        if days is None:
            return Pruned(messages=0, segments=0, files=0)
        if not 0 <= days <= 365_000:
            raise ValidationError(f"older_than_days must be between 0 and 365000, got {days}")
        cutoff = (now or utcnow()) - timedelta(days=days)
        counts = {"messages": 0, "segments": 0, "files": 0}
        while ids := self._store.messages.ended_before(cutoff, 1000):
            self._store.messages.delete(ids)
            counts["messages"] += len(ids)
        while old := self._store.segments.closed_before(cutoff, 1000):
            counts["files"] += self._remove_files(old)
            self._store.segments.delete([s.id for s in old])
            counts["segments"] += len(old)
        return Pruned(**counts)

    def delete(
        self, session_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | None = None, dry_run: bool = False,
    ) -> ConversationDeleted:
        """Erase one conversation for good: its messages (text, vectors, index entries), its segments and their
        JSONL files, the extraction jobs of those segments and the fact occurrences that quote them. What was
        made of it (facts, a session summary) is memories of its own and stays.

        The conversation is the session in the caller's own scope (where `log` records it), or in `scope`
        (another user's for the administrator, `global` for one an earlier release recorded there): "not
        found" when the caller reads none of it there; refused unless it may erase every message of it (the
        rule of deleting a memory). Returns the scope and the rows per kind; `dry_run` counts and
        changes nothing."""
        caller = as_caller(caller, user_id, agent_id)
        _session_id(session_id)
        if not dry_run:
            require_writes(self._config)
        if scope == ALL:
            raise ValidationError("a delete takes one conversation: name one scope, not *")
        scopes = read_scopes(caller, scope if scope is not None else self._own(caller), access=self._config.access)
        assert scopes is not None  # one scope named: None would be every scope
        [where] = scopes
        with nullcontext() if dry_run else self._store.transaction():
            # its segments first, locked: a message logged meanwhile waits for them, or starts a segment of its own
            segments = self._store.segments.find([where], session_id, limit=1_000_000, offset=0, for_update=not dry_run)
            if not segments:
                elsewhere = self._store.segments.scopes_of(self._reads(caller), session_id)
                hint = f" in {where} (there is one in {', '.join(elsewhere)}: name its scope)" if elsewhere else (
                    f" in {where}" if scope else "")
                raise NotFoundError(f"no conversation with session id {session_id!r}{hint}")
            segment_ids = [seg.id for seg in segments]
            ids = self._store.messages.ids_in(segment_ids)
            if len(self._writes.erasable(ids, caller)) < len(ids):
                raise ScopeError(f"conversation {session_id!r} in {where} may be read but not erased by this caller")
            quoting = self._store.occurrences.in_segments(segment_ids)
            counts = {"messages": len(ids), "segments": len(segments), "occurrences": len(quoting),
                      "jobs": self._store.jobs.about(segment_ids, delete=not dry_run)}
            if not dry_run:
                self._store.occurrences.delete(quoting)
                self._store.messages.delete(ids)
                self._store.segments.delete(segment_ids)
        if not dry_run:
            self._remove_files(segments)
        return ConversationDeleted(scope=where, deleted=counts)

    def _remove_files(self, segments: Sequence[Segment]) -> int:
        removed = 0
        for segment in segments:
            if segment.file:
                try:
                    (self.folder() / segment.file).unlink()
                    removed += 1
                except FileNotFoundError:
                    pass
        return removed

    def _close(self, segment: Segment, reason: str, now: datetime) -> Segment:
        """Inside the caller's transaction: write the segment's JSONL, then mark it closed."""
        messages = self._store.messages.in_segment(segment.id)
        done = segment.model_copy(update={"closed_at": now, "close_reason": reason, "title": rules.title(messages) or None})
        try:
            name = rules.write_file(self.folder(), done, messages)
            done = done.model_copy(update={"file": name})
        except OSError as exc:  # the record is in the database; the file is a copy, not worth losing the close over
            log.error("could not write the JSONL of segment %s: %s", segment.id, exc)
        self._store.segments.replace(done)
        self._events.emit("segment_closed", SegmentClosed(segment=done))
        return done

    def _check_topics(self, ids: list[str]) -> None:
        """After new vectors: split an open segment where the topic shifted (`segments.topic_shift`)."""
        cfg = self._config.conversations
        if cfg.topic_threshold <= 0:
            return
        segment_ids = {m.segment_id for m in self._store.messages.of(ids).values() if m.segment_id is not None}
        for segment_id in segment_ids:
            current: str | None = segment_id
            while current is not None:  # the part after a shift may shift again
                current = self._split_on_topic(current)

    def _split_on_topic(self, segment_id: str) -> str | None:
        """Close the open segment before its first topic shift; the id of the segment opened at the shift."""
        import numpy as np

        cfg = self._config.conversations
        with self._store.transaction():
            segment = self._store.segments.get(segment_id, for_update=True)
            if segment is None or segment.closed_at is not None:
                return None
            messages = [m for m in self._store.messages.in_segment(segment_id) if m.role in ("user", "assistant")]
            vectors = self._store.vectors([m.id for m in messages])
            if len(vectors) < len(messages) or len(messages) < 2 * cfg.topic_window:
                return None  # wait until every message has its vector
            at = rules.topic_shift(
                np.stack([vectors[m.id] for m in messages]), [m.role == "user" for m in messages],
                cfg.topic_window, cfg.topic_threshold,
            )
            if at is None:
                return None
            everything = self._store.messages.in_segment(segment_id)
            cut = everything.index(next(m for m in everything if m.id == messages[at].id))
            before, after = everything[:cut], everything[cut:]
            fresh = Segment(
                id=new_ids(1)[0], scope=segment.scope, user_id=segment.user_id, agent_id=segment.agent_id,
                session_id=segment.session_id, channel=segment.channel, started_at=after[0].created_at,
                ended_at=segment.ended_at, message_count=len(after), turn_count=sum(m.role == "user" for m in after),
                title=rules.title(after),
            )
            shortened = segment.model_copy(update={
                "ended_at": before[-1].created_at, "message_count": len(before),
                "turn_count": sum(m.role == "user" for m in before),
            })
            # one open segment per session: the first closes before the second opens
            self._store.messages.move([m.id for m in after], fresh.id)
            self._close(shortened, "topic", utcnow())
            self._store.segments.insert([fresh])
        return fresh.id

    def _transcript_start(self, caller: Caller, session_id: str) -> datetime | None:
        """When the session's current transcript began: its last end (`/new`, a reset), None if it never ended."""
        if not may_write(caller, access=self._config.access):  # a read-only caller has recorded no transcript of its own
            return None
        return self._store.segments.last_end(self._own(caller), session_id)

    def folder(self) -> Path:
        """Where closed segments are written: the configured folder, else `conversations/` beside a
        SQLite store, else in the data directory."""
        configured = self._config.conversations.dir
        if configured:
            return Path(configured).expanduser()
        local = self._store.local_folder()
        return (local if local is not None else data_dir()) / "conversations"

    # -- reading --------------------------------------------------------------------------------
    # A session id names one conversation per scope (alice's "chat" and bob's are two): `scope` reads the
    # one in that scope, else every scope the caller reads.
    def sessions(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | None = None, limit: int = 50, offset: int = 0,
    ) -> list[Conversation]:
        """The conversations the caller may read, the latest first."""
        caller = as_caller(caller, user_id, agent_id)
        check_int(limit, "limit", 1, 10_000)
        check_int(offset, "offset", 0, 1_000_000_000)
        found = self._store.messages.sessions(self._reads(caller, scope), limit=limit, offset=offset, agent=caller.agent_id)
        return [Conversation(**c) for c in found]

    def show(
        self, session_id: str, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        scope: str | None = None, limit: int = 1000, offset: int = 0,
    ) -> list[Message]:
        """A conversation's messages in order; "not found" when the caller may read none of it."""
        caller = as_caller(caller, user_id, agent_id)
        _session_id(session_id)
        check_int(limit, "limit", 1, 100_000)
        check_int(offset, "offset", 0, 1_000_000_000)
        found = self._store.messages.in_session(self._reads(caller, scope), session_id, limit=limit, offset=offset,
                                               agent=caller.agent_id)
        if not found and offset == 0:
            raise NotFoundError(f"no conversation with session id {session_id!r}")
        return found

    def segments(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        session_id: str | None = None, scope: str | None = None, limit: int = 50,
        offset: int = 0,
    ) -> list[Segment]:
        """Segments, the latest first (of one session: "not found" when the caller may read none of it)."""
        caller = as_caller(caller, user_id, agent_id)
        if session_id is not None:
            _session_id(session_id)
        check_int(limit, "limit", 1, 10_000)
        check_int(offset, "offset", 0, 1_000_000_000)
        found = self._store.segments.find(self._reads(caller, scope), session_id, limit=limit, offset=offset,
                                         agent=caller.agent_id)
        if session_id is not None and not found and offset == 0:
            raise NotFoundError(f"no conversation with session id {session_id!r}")
        return found

    def export(
        self, out: IO[str], *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        session_id: str | None = None, scope: str | None = None,
    ) -> int:
        """One JSON object per message (of one session, or of every conversation the caller may read), each
        conversation whole and once; a session the caller may read none of is "not found", before anything
        is written."""
        caller = as_caller(caller, user_id, agent_id)
        reads = self._reads(caller, scope)
        if session_id is not None:
            self.show(session_id, caller=caller, scope=scope, limit=1)
            conversations = [(where, session_id) for where in self._store.segments.scopes_of(reads, session_id)]
        else:
            conversations = [(c["scope"], c["session_id"])
                             for c in self._store.messages.sessions(reads, limit=1_000_000, offset=0, agent=caller.agent_id)]
        n = 0
        for where, session in conversations:
            offset = 0
            while batch := self._store.messages.in_session([where], session, limit=1000, offset=offset, agent=caller.agent_id):
                for m in batch:
                    out.write(json.dumps(m.model_dump(mode="json", exclude={"dedup_key"}), ensure_ascii=False) + "\n")
                n += len(batch)
                offset += len(batch)
        return n

    def stats(
        self, *, caller: Caller | None = None, user_id: str | None = None, agent_id: str | None = None,
        by: GroupBy = "user",
    ) -> list[StatsGroup]:
        """openclaw-memory-pgvector's `conversation_stats`, per user, agent or session."""
        caller = as_caller(caller, user_id, agent_id)
        if by not in ("user", "agent", "session"):
            raise ValidationError("by must be user, agent or session")
        return [StatsGroup(**g) for g in self._store.messages.stats(self._reads(caller), by)]

    def _own(self, caller: Caller) -> str:
        """The scope the caller's transcript is recorded in (its user's, else its agent's), checked for writing."""
        return write_scope(caller, None, access=self._config.access)

    def _reads(self, caller: Caller, scope: str | None = None) -> list[str] | None:
        """`scope` checked for reading, else the scopes the caller reads unasked (None: every scope, for the
        administrator)."""
        return read_scopes(caller, scope, access=self._config.access)
