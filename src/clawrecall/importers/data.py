"""Another system's data brought in: one driver for every source (`import --from SYSTEM SOURCE`).

A source module turns its store into items for the write path (NewMemory fields, JSON-ready), each
with an id derived from the system and the source row's own id (`stable_id`), so an import run again
adds nothing and one interrupted resumes where it stopped (each chunk commits). What a source leaves
out it says, with why; what it maps it names (`Plan.mapped`), for the summary. Its vectors it hands
over beside the items: they are stored as they are when the model that made them is the store's
(`reusable`), and the store's model embeds the text otherwise.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from itertools import pairwise
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

import orjson

from .._gc import collector_paused
from .._urls import redacted_url
from ..conversations.transcript import check_message
from ..errors import NotFoundError, ValidationError
from ..scopes import Caller, may_write, write_scope

if TYPE_CHECKING:
    import numpy as np

    from ..embeddings.base import EmbeddingFingerprint
    from ..engine import Memory
    from ..files import FileType

CHAT_CHUNK = 1000  # messages logged per transaction (a request's transcript holds at most 5,000)
# Memories written per transaction (`run`'s default): an import that embeds nothing writes 4,096 at a time,
# since a transaction's fixed cost (its COMMIT rewriting the index pages its random ids touched, a full-text
# merge) is most of a small batch's (100k mem0 memories: 26.6 CPU s in batches of 512, 20.6 in 4,096); one
# that embeds writes 512, a few seconds of the model's work between two progress steps.
STORED_CHUNK = 4096
EMBEDDED_CHUNK = 512
_NAMESPACE = uuid.UUID("6f1c2a53-2d0e-4c55-9a7b-2f4b1f0c9e11")


def stable_id(system: str, table: str, source_id: str) -> str:
    """The same memory id for the same source row, every run: `uuid.uuid5(_NAMESPACE, "system:table:id")`,
    spelled from the hash directly (half the time of building a UUID object: one or more per source row)."""
    h = hashlib.sha1(_NAMESPACE.bytes + f"{system}:{table}:{source_id}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


@dataclass
class Options:
    """What the user tells an import beyond its source."""

    vectors_from: str | None = None  # the model that made the source's vectors, when the source does not record it
    history: str | None = None  # mem0: its history database (every ADD, UPDATE, DELETE; its last messages)
    markdown: str | None = None  # memento-local: an agent's workspace, whose memory/*.md is its journal
    agent: str | None = None  # whose workspace `markdown` is (--agent), else OpenClaw's first agent, main


@dataclass
class Chat:
    """One conversation of the source, for the record (`mem.conversations.log`): its messages as the record
    takes them, each with a provider id made from its source row (`stable_id`), so a message is stored once
    however often the import runs. No owner: the importing caller's. `key` names it for the occurrences
    that quote it (memento-local's conversation id)."""

    source: str  # "table:id", for the summary
    session_id: str
    messages: list[dict[str, Any]]
    user_id: str | None = None
    agent_id: str | None = None
    channel: str | None = None
    key: str | None = None
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # message id -> the source's vector of its text


@dataclass
class SourceFile:
    """One file of the source, for the files the store searches (`mem.files.bring`): where it is, its type,
    size, time and owner (none: the importing caller), and its text as the source cut it, each chunk with
    an id made from its source row (`stable_id`) and the source's vector of it, if any."""

    source: str  # "table:id", for the summary
    id: str
    path: str
    kind: FileType
    size_bytes: int
    created_at: datetime
    chunks: list[tuple[str, str]]  # (chunk id, text), in order
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # chunk id -> the source's vector of its text
    user_id: str | None = None


@dataclass
class Plan:
    """What a source yields: items to write, what became what, and what was left out and why."""

    items: list[dict[str, Any]] = field(default_factory=list)
    mapped: dict[str, str] = field(default_factory=dict)  # "facts.summary" -> "title"
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"table", "id", "reason"}
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # item id -> the source's vector of it
    vector_model: str | None = None  # the model the source records as having made its vectors
    startup: list[dict[str, Any]] = field(default_factory=list)  # {"key", "content", "priority", "reinforce"}
    chats: list[Chat] = field(default_factory=list)
    # {"id", "memory_id", "chat" (a Chat's key), "at", "snippet", "sentiment"}: each time a conversation said a fact
    occurrences: list[dict[str, Any]] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)


Reader = Callable[[str, Options], Plan]


@collector_paused()
def run(mem: Memory, system: str, read: Reader, source: str, *, caller: Caller, dry_run: bool,
        progress: Callable[[int, int], None] | None, options: Options | None = None,
        chunk: int | None = None) -> dict[str, Any]:
    """Read the source whole (a bad row fails before anything is written), then write its items through
    the import (`import_items`), `chunk` a transaction (by default `STORED_CHUNK` when every item keeps the
    source's vector, else `EMBEDDED_CHUNK`): ids stored already are skipped, so a second run or a resumed one
    adds nothing twice."""
    options = options or Options()
    plan = read(source, options)
    fingerprint = mem.upkeep.embedder.fingerprint
    vectors, vector_note = reusable(plan.vectors, len(plan.items), plan.vector_model, fingerprint, options.vectors_from)
    startup = _startup(mem, plan, caller, dry_run)  # few and replaced whole: before the memories
    chunk = chunk or (STORED_CHUNK if len(vectors) == len(plan.items) else EMBEDDED_CHUNK)
    result = mem.import_items(plan.items, caller=caller, on_duplicate="keep", dry_run=dry_run,
                              progress=progress, vectors=vectors, chunk=chunk)
    said = {k: v for chat in plan.chats for k, v in chat.vectors.items()}
    kept, _ = reusable(said, sum(len(c.messages) for c in plan.chats), plan.vector_model, fingerprint, options.vectors_from)
    conversations, segments = _chats(mem, plan, caller, dry_run, kept)
    occurrences = _occurrences(mem, plan, segments, caller, dry_run)
    chunks = {k: v for f in plan.files for k, v in f.vectors.items()}
    kept, _ = reusable(chunks, sum(len(f.chunks) for f in plan.files), plan.vector_model, fingerprint, options.vectors_from)
    files = _files(mem, plan, caller, dry_run, kept)
    return {"system": system, "source": redacted_url(source), "read": len(plan.items) + len(plan.skipped),
            "imported": result.created, "already_there": result.skipped, "dry_run": dry_run,
            "vectors": {"reused": len(vectors), "embedded": len(plan.items) - len(vectors), "why": vector_note},
            "startup": startup, "conversations": conversations, "occurrences": occurrences, "files": files,
            "mapped": plan.mapped, "skipped": plan.skipped}


def reusable(vectors: dict[str, np.ndarray], rows: int, vector_model: str | None, store: EmbeddingFingerprint,
             vectors_from: str | None) -> tuple[dict[str, np.ndarray], str]:
    """The source's vectors (of `rows` memories or messages) the store can keep, and why the others are
    embedded again.

    A vector is kept when the model that made it is the store's (by name: the source's record of it,
    else `--vectors-from`) and it has the store's dimensions; anything else would put two models'
    vectors side by side, whose cosines mean nothing together. A source that names no model is
    re-embedded: the dimension alone cannot tell two 768-d models apart."""
    if not vectors:
        return {}, "the source holds no vectors"
    model = vector_model or vectors_from
    if model is None:
        return {}, (f"the source does not record the model of its vectors, so the store's ({store.model}) "
                    "embeds them; --vectors-from names it, to reuse them")
    if _model_name(model) != _model_name(store.model):
        return {}, f"made by {model}, while the store embeds with {store.model}"
    kept = {k: v for k, v in vectors.items() if len(v) == store.dimensions}
    note = f"made by {model}, the store's model"
    if len(kept) < len(vectors):
        note += f"; {len(vectors) - len(kept)} of other dimensions than its {store.dimensions} embedded again"
    if len(kept) < rows:
        note += "; rows without a vector embedded"
    return kept, note


def _model_name(model: str) -> str:
    """`intfloat/multilingual-e5-small`, `local:multilingual-e5-small` and `hf:…` name one model."""
    return model.strip().rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()


def _startup(mem: Memory, plan: Plan, caller: Caller, dry_run: bool) -> dict[str, int]:
    """The source's startup entries, each set unless an entry of that key holds the same already."""
    if not plan.startup:
        return {"imported": 0, "already_there": 0}
    held = {(e.key, e.content, e.priority, e.reinforce) for e in mem.startup.list(caller=caller)}
    todo = [e for e in plan.startup if (e["key"], e["content"], e["priority"], e["reinforce"]) not in held]
    if not dry_run:
        for e in todo:
            mem.startup.set(e["key"], e["content"], priority=e["priority"], reinforce=e["reinforce"], caller=caller)
    return {"imported": len(todo), "already_there": len(plan.startup) - len(todo)}


def _chats(mem: Memory, plan: Plan, caller: Caller, dry_run: bool,
           vectors: dict[str, np.ndarray]) -> tuple[dict[str, int], dict[str, str]]:
    """Each conversation logged in the record as its owner (one transaction each: an interrupted import
    keeps the conversations it logged, and a message stored before is skipped by its id), with the
    source's `vectors` of its messages that the store keeps, then its segment closed, so the next
    conversation of the session is a segment of its own as it was in the source. Answers the counts,
    and the segment each keyed conversation's messages are in."""
    counts = {"conversations": 0, "messages": 0, "already_there": 0, "vectors_reused": 0}
    segments: dict[str, str] = {}
    for chat in plan.chats:
        owner = Caller(user_id=chat.user_id, agent_id=chat.agent_id) if chat.user_id or chat.agent_id else caller
        table, _, row = chat.source.partition(":")
        if not owner.identified:
            plan.skipped.append({"table": table, "id": row, "rows": len(chat.messages), "reason": "a conversation "
                                 "with no owner in the source: name whose it is with --user or --agent"})
            continue
        if not may_write(caller, write_scope(owner, None, access=mem.config.access), access=mem.config.access):
            plan.skipped.append({"table": table, "id": row, "rows": len(chat.messages), "reason": "another's "
                                 "conversation: import as the administrator (no --user/--agent) or as its owner"})
            continue
        counts["conversations"] += 1
        if dry_run:
            known = len(_recorded(mem, owner, chat))
            counts["messages"] += len(chat.messages) - known
            counts["already_there"] += known
            continue
        for at in range(0, len(chat.messages), CHAT_CHUNK):
            part = chat.messages[at: at + CHAT_CHUNK]
            logged = mem.conversations.log(part, caller=owner, session_id=chat.session_id, channel=chat.channel,
                                           vectors={m["id"]: vectors[m["id"]] for m in part if m.get("id") in vectors})
            counts["messages"] += logged.stored
            counts["already_there"] += logged.skipped
            counts["vectors_reused"] += logged.given_vectors
        try:  # closed even when nothing was new: a run killed between the two left it open
            mem.conversations.end(chat.session_id, caller=owner, reason="explicit")
        except NotFoundError:  # its messages were all empty: nothing was recorded
            continue
        if chat.key is not None:
            segments.update((chat.key, s) for s in _recorded(mem, owner, chat).values() if s)
    return counts, segments


def _files(mem: Memory, plan: Plan, caller: Caller, dry_run: bool, vectors: dict[str, np.ndarray]) -> dict[str, int]:
    """Each file with its chunks as its owner's, one transaction each (a file stored before is skipped by
    its id), with the source's `vectors` of its chunks that the store keeps."""
    counts = {"imported": 0, "already_there": 0, "chunks": 0, "vectors_reused": 0}
    for f in plan.files:
        owner = Caller(user_id=f.user_id) if f.user_id else caller
        table, _, row = f.source.partition(":")
        if not may_write(caller, write_scope(owner, None, access=mem.config.access), access=mem.config.access):
            plan.skipped.append({"table": table, "id": row, "rows": 1, "reason": "another's file: import as the "
                                 "administrator (no --user/--agent) or as its owner"})
            continue
        if dry_run:
            try:
                there = bool(mem.files.get(f.id, caller=owner))
            except NotFoundError:
                there = False
        else:
            given = {cid: vectors[cid] for cid, _ in f.chunks if cid in vectors}
            there = not mem.files.bring(f.id, f.path, f.kind, f.size_bytes, f.created_at, f.chunks, given, caller=owner)
            counts["vectors_reused"] += 0 if there else len(given)
        counts["already_there" if there else "imported"] += 1
        counts["chunks"] += 0 if there else len(f.chunks)
    return counts


def _recorded(mem: Memory, owner: Caller, chat: Chat) -> dict[str, str | None]:
    """The chat's messages the record holds already: their keys (a message with an id is keyed by it), and
    the segment each is in."""
    keys = {f"id:{m['id']}" for m in chat.messages}
    try:
        held = mem.conversations.show(chat.session_id, caller=owner, limit=100_000)
    except NotFoundError:
        return {}
    return {m.dedup_key: m.segment_id for m in held if m.dedup_key in keys}


def _occurrences(mem: Memory, plan: Plan, segments: dict[str, str], caller: Caller, dry_run: bool) -> dict[str, int]:
    """The source's occurrences of its facts, each quoting the segment its conversation became."""
    if not plan.occurrences:
        return {"imported": 0, "already_there": 0}
    sessions = {c.key: c.session_id for c in plan.chats if c.key is not None}
    rows = [{**{k: v for k, v in o.items() if k != "chat"}, "segment_id": segments.get(o["chat"]),
             "session_id": sessions.get(o["chat"])} for o in plan.occurrences]
    stored = mem.conversations.import_occurrences(rows, caller=caller, dry_run=dry_run)
    return {"imported": stored, "already_there": len(rows) - stored}


def item(system: str, table: str, row_id: Any, content: str, **fields: Any) -> dict[str, Any]:
    """A source row as an item: its stable id, its origin (`source_type` the system, `source_id`
    `table:id`), and the fields it has (a None is left out: the write path's default applies)."""
    fields = {k: v for k, v in fields.items() if v is not None and v != {} and v != []}
    return {"id": stable_id(system, table, str(row_id)), "content": content, "source_type": system,
            "source_id": f"{table}:{row_id}", **fields}


def storable(plan: Plan, table: str, row_id: Any, message: dict[str, Any]) -> bool:
    """Whether the record can store a source's message (its role, its text); one it cannot is said, and left out,
    so one bad row does not fail the conversation it is in."""
    try:
        check_message(message)
    except ValidationError as exc:
        plan.skipped.append({"table": table, "id": str(row_id), "reason": f"not storable: {exc}"})
        return False
    return True


def chain(versions: list[dict[str, Any]]) -> None:
    """Link a memory's versions, oldest first: each superseded by the next from the next's start."""
    for old, new in pairwise(versions):
        old["superseded_by"], new["supersedes"] = new["id"], old["id"]
        end = new.get("valid_from") or new.get("created_at")
        if end and (not old.get("valid_from") or datetime.fromisoformat(end) > datetime.fromisoformat(old["valid_from"])):
            old["valid_to"] = end  # a source's times can tie or run backwards: the link stays, without an end


def utc(value: Any) -> str | None:
    """A source's time (a datetime, ISO text, or seconds or JavaScript milliseconds since 1970) as ISO UTC."""
    kind = type(value)  # the common cases first, each tested once: an import converts two or three a row
    if kind is str:
        if not value:
            return None
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(f"{value!r} is not a time") from None
    elif value is None:
        return None
    elif isinstance(value, (int, float)):
        seconds = value / 1000 if value > 100_000_000_000 else value
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat()
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if isinstance(value, datetime):
        if value.tzinfo is not timezone.utc:
            value = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        return value.isoformat()
    raise ValidationError(f"{value!r} is not a time")


def unit(value: Any) -> float | None:
    """A score (importance, confidence) as clawrecall keeps it: 0 to 1."""
    return None if value is None else min(max(float(value), 0.0), 1.0)


def vectors(values: list[Any]) -> list[np.ndarray | None]:
    """`vector` of each value: pgvector's binary vectors of one length (a source's are) decoded in one numpy
    call (one call each took ~3 µs a row: 0.3 s of an import of 100k), any other value by `vector`."""
    import numpy as np

    out: list[np.ndarray | None] = [None] * len(values)
    by_size: dict[int, list[int]] = {}
    for n, value in enumerate(values):
        if type(value) is bytes and len(value) >= 4:
            by_size.setdefault(len(value), []).append(n)
        elif value is not None:
            out[n] = vector(value)
    for size, rows in by_size.items():
        joined = b"".join([values[n] for n in rows])
        heads = np.frombuffer(joined, dtype=">u2").reshape(len(rows), size // 2)[:, 0] if size % 4 == 0 else None
        if heads is None or not (heads == size // 4 - 1).all():  # not pgvector's form: `vector` says why
            for n in rows:
                out[n] = vector(values[n])
            continue
        decoded = np.frombuffer(joined, dtype=">f4").reshape(len(rows), size // 4)[:, 1:].astype(np.float32)
        for n, row in zip(rows, decoded):
            out[n] = row
    return out


def vector(value: Any) -> np.ndarray | None:
    """A source's vector as float32: pgvector's binary form (`vector_send(col)`: 2-byte dimensions, 2
    unused, big-endian float32s, read in one numpy call: decoding its text took most of an import's time),
    JSON text (`'[0.1,0.2]'`), or a list."""
    import numpy as np

    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if len(data) < 4 or len(data) != 4 + 4 * int.from_bytes(data[:2], "big"):
            raise ValidationError(f"a vector that is not pgvector's binary form ({len(data)} bytes)")
        return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)
    try:
        return np.asarray(orjson.loads(value) if isinstance(value, str) else value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        raise ValidationError(f"a vector that is not a list of numbers: {str(value)[:60]!r}") from None
