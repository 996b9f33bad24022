"""mem0's memories: its pgvector store (one table per collection: `id`, `vector`, `payload`), its
default store, a Qdrant folder in local mode (one collection each), or a Chroma folder (one collection each,
the payload in each record's metadata), and, given `--history`, its SQLite
history of every ADD, UPDATE and DELETE, which becomes each memory's supersede chain and its deletion
(mem0 deletes the vector row; the history keeps the text), and the last messages it keeps there."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from .._time import utcnow
from ..errors import ValidationError
from .data import Chat, Options, Plan, chain, item, stable_id, storable, utc, vector
from .pgsource import Source

if TYPE_CHECKING:
    import numpy as np

SYSTEM = "mem0"
CHROMA_FILE = "chroma.sqlite3"  # what makes a folder a Chroma store
CHROMA_PAGE = 4096  # records read from Chroma a call
BOOKKEEPING = "mem0migrations"  # the collection mem0 keeps its telemetry user id in, beside the memories
#: payload keys mem0 sets itself; any other is the caller's metadata
OWN = {"data", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id", "actor_id", "role",
       "text_lemmatized", "categories"}
MAPPED = {
    "<collection>.payload.data": "content (category fact: mem0 stores extracted facts)",
    "<collection>.payload.user_id, agent_id": "user_id, agent_id (the user's scope, else the agent's)",
    "<collection>.payload.run_id": "session_id",
    "<collection>.payload.created_at, updated_at": "created_at, updated_at and valid_from (the current text's start)",
    "<collection>.payload.categories": "tags",
    "<collection>.payload.actor_id, role, hash, other keys": "metadata.mem0",
    "<collection>.vector": "the vector, reused when --vectors-from names the store's model; else re-embedded",
    "Chroma: <collection>.metadatas, embeddings": "the payload and the vector of each record, as above",
    "history ADD/UPDATE": "earlier versions, superseded by the next (valid_to its time)",
    "history DELETE": "a deleted memory (deleted_at the deletion's time) with its last text and earlier versions",
    "history.db messages": "the conversation record: session_scope's user_id and agent_id its owner (none: the "
                           "importing caller), run_id its session (none: the session `mem0`); role, content, "
                           "created_at (mem0 keeps the last 10 of each scope)",
}


def read(source: str, options: Options) -> Plan:
    plan = Plan(mapped=dict(MAPPED))
    history = _history(options.history) if options.history else {}
    current: set[str] = set()
    for table, memory_id, stored, payload in _store(source, plan):
        current.add(memory_id)
        if not isinstance(payload.get("data"), str) or not payload["data"].strip():
            plan.skipped.append({"table": table, "id": memory_id, "reason": "no text (payload.data)"})
            continue
        versions = _versions(table, memory_id, history.get(memory_id, []), payload)
        versions.append(_memory(table, memory_id, payload))
        chain(versions)
        plan.items += versions
        if stored is not None:
            plan.vectors[versions[-1]["id"]] = stored
    for memory_id, events in history.items():
        if memory_id not in current:
            _deleted(plan, memory_id, events)
    if options.history:
        _messages(plan, options.history)
    return plan


Row = tuple[str, str, "np.ndarray | None", dict[str, Any]]  # collection, memory id, its vector, its payload


def _store(source: str, plan: Plan) -> list[Row]:
    """The rows of the vector store SOURCE is: a folder Chroma's (its `chroma.sqlite3`) or Qdrant's, else
    pgvector's URL."""
    if (Path(source) / CHROMA_FILE).is_file():
        return _chroma(source, plan)
    if Path(source).is_dir():
        return _qdrant(source, plan)
    if not source.startswith(("postgres://", "postgresql://")):
        raise ValidationError(f"mem0's store is the PostgreSQL URL of its pgvector store or the folder of its Qdrant "
                              f"store (vector_store.config.path, by default /tmp/qdrant) or of its Chroma store, "
                              f"not {source!r}")
    return _pgvector(source)


def _pgvector(url: str) -> list[Row]:
    """Every table of the store shaped as mem0 makes a collection (`id`, `vector`, `payload`)."""
    out: list[Row] = []
    with Source(url, "mem0") as db:
        collections = sorted(t for t, cols in db.tables.items() if {"id", "vector", "payload"} <= cols)
        if not collections:
            db.require("mem0", {"id", "vector", "payload"})  # the default collection's name, for the message
        for table in collections:
            for row in db.vector_rows(f'SELECT id::text AS id, vector_send(vector) AS vector, payload FROM "{table}" '
                                      "ORDER BY payload->>'created_at', id", binary=True):
                out.append((table, row["id"], row["vector"], row["payload"] or {}))
    return out


def _qdrant(path: str, plan: Plan) -> list[Row]:
    """Every collection of a Qdrant folder in local mode (mem0's default store: `vector_store.config.path`, by
    default /tmp/qdrant), but mem0's own bookkeeping collection."""
    try:
        from qdrant_client import QdrantClient
    except ImportError:
        raise ValidationError("reading mem0's Qdrant folder takes the qdrant extra: "
                              "pip install 'clawrecall[qdrant]'") from None
    try:
        client = QdrantClient(path=path)
    except (RuntimeError, ValueError, OSError) as exc:  # another process (mem0 itself) holds the folder's lock
        raise ValidationError(f"cannot open the Qdrant folder {path}: {exc}") from None
    out: list[Row] = []
    try:
        names = sorted(c.name for c in client.get_collections().collections)
        if not names:
            raise ValidationError(f"{path} is not a Qdrant folder of mem0's: it holds no collection")
        for name in names:
            if name == BOOKKEEPING:
                _bookkeeping(plan, name, client.count(name).count)
                continue
            offset = None
            while True:
                points, offset = client.scroll(name, limit=1000, offset=offset, with_payload=True, with_vectors=True)
                out += [(name, str(p.id), _point_vector(p.vector), dict(p.payload or {})) for p in points]
                if offset is None:
                    break
    finally:
        client.close()
    return _in_order(out)


def _chroma(path: str, plan: Plan) -> list[Row]:
    """Every collection of a Chroma folder (`provider: "chroma"`, its `path`) but mem0's bookkeeping one, read
    by chromadb from a copy: chromadb writes to a folder it opens (it compacts its logs, and migrates a folder
    of an older release, which mem0's chromadb could then not read), and the source is only read."""
    try:
        import chromadb
        from chromadb.config import Settings
        from chromadb.errors import ChromaError
    except ImportError:
        raise ValidationError("reading mem0's Chroma folder takes the chroma extra: "
                              "pip install 'clawrecall[chroma]'") from None
    out: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="clawrecall-chroma-") as copy:
        try:
            shutil.copytree(path, copy, dirs_exist_ok=True)
            client = chromadb.PersistentClient(path=copy, settings=Settings(anonymized_telemetry=False))
            names = sorted(c.name for c in client.list_collections())
        except (ChromaError, ValueError, OSError) as exc:
            raise ValidationError(f"cannot read the Chroma folder {path}: {exc}") from None
        try:
            if not names:
                raise ValidationError(f"{path} is not a Chroma folder of mem0's: it holds no collection")
            for name in names:
                collection = client.get_collection(name)
                if name == BOOKKEEPING:
                    _bookkeeping(plan, name, collection.count())
                    continue
                for offset in itertools.count(0, CHROMA_PAGE):
                    page = collection.get(include=["embeddings", "metadatas"], limit=CHROMA_PAGE, offset=offset)
                    out += [(name, memory_id, vector(embedding), dict(metadata or {})) for memory_id, embedding, metadata
                            in zip(page["ids"], page["embeddings"], page["metadatas"], strict=True)]
                    if len(page["ids"]) < CHROMA_PAGE:
                        break
        finally:
            client.close()
    return _in_order(out)


def _bookkeeping(plan: Plan, name: str, rows: int) -> None:
    plan.skipped.append({"table": name, "id": None, "rows": rows,
                         "reason": "mem0's own bookkeeping (its telemetry user id), no memories"})


def _in_order(rows: list[Row]) -> list[Row]:
    """A folder's rows as pgvector's are read: by collection, then in the order mem0 wrote them."""
    rows.sort(key=lambda r: (r[0], str(r[3].get("created_at") or ""), r[1]))
    return rows


def _point_vector(value: Any) -> np.ndarray | None:
    """A point's vector: mem0 stores one, unnamed."""
    if isinstance(value, dict):
        value = next(iter(value.values()), None) if len(value) == 1 else None
    return vector(value) if isinstance(value, list) else None


def _memory(table: str, memory_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    created, updated = utc(payload.get("created_at")), utc(payload.get("updated_at"))
    theirs = {k: v for k, v in payload.items() if k not in OWN or k in ("actor_id", "role", "hash")}
    categories = payload.get("categories")
    return item(
        SYSTEM, table, memory_id, payload["data"], category="fact", user_id=payload.get("user_id"),
        agent_id=payload.get("agent_id"), session_id=payload.get("run_id"), created_at=created,
        valid_from=updated or created, updated_at=updated,  # mem0 moves updated_at only when the text changes
        tags=[str(c) for c in categories] if isinstance(categories, list) else None,
        metadata={"mem0": theirs} if theirs else None,
    )


def _versions(table: str, memory_id: str, events: list[dict[str, Any]], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The texts a memory had before its current one: each ADD and UPDATE but the one that wrote it."""
    writes = [e for e in events if e["event"] in ("ADD", "UPDATE") and e["new_memory"]]
    if writes and writes[-1]["new_memory"] == payload["data"]:
        writes.pop()
    owner = {k: payload.get(k) for k in ("user_id", "agent_id")}
    return [_version(e, owner) for e in writes]


def _version(event: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    when = utc(event["updated_at"] if event["event"] == "UPDATE" and event["updated_at"] else event["created_at"])
    return item(SYSTEM, "history", event["id"], event["new_memory"], category="fact", created_at=when,
                valid_from=when, metadata={"mem0": {"memory_id": event["memory_id"], "event": event["event"]}},
                **owner)


def _deleted(plan: Plan, memory_id: str, events: list[dict[str, Any]]) -> None:
    """A memory mem0 deleted: its versions, the last one deleted when mem0 deleted it."""
    deletion = next((e for e in reversed(events) if e["event"] == "DELETE"), None)
    if deletion is None:
        plan.skipped.append({"table": "history", "id": memory_id,
                             "reason": "its memory is in no collection read, and the history records no deletion"})
        return
    versions = [_version(e, {}) for e in events if e["event"] in ("ADD", "UPDATE") and e["new_memory"]]
    if not versions or versions[-1]["content"] != deletion["old_memory"]:
        if not deletion["old_memory"]:
            plan.skipped.append({"table": "history", "id": memory_id, "reason": "deleted, and no text of it is kept"})
            return
        versions.append(_version({**deletion, "event": "ADD", "new_memory": deletion["old_memory"]}, {}))
    versions[-1]["id"] = stable_id(SYSTEM, "deleted", memory_id)
    # mem0 records no time for a deletion: the time of the last change it records, else now
    versions[-1]["deleted_at"] = (utc(deletion["updated_at"] or deletion["created_at"]) or versions[-1].get("created_at")
                                  or utc(utcnow()))
    chain(versions)
    plan.items += versions


def _messages(plan: Plan, path: str) -> None:
    """The last messages mem0 keeps per session scope (`user_id=…&agent_id=…&run_id=…`, 10 of each, to give its
    extraction context) as the conversation record: the scope's user and agent, its run as the session."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = db.execute("SELECT * FROM messages ORDER BY created_at, rowid").fetchall() if "messages" in tables else []
        db.close()
    except sqlite3.Error as exc:
        raise ValidationError(f"{path} is not mem0's history database: {exc}") from None
    chats: dict[str, Chat] = {}
    for m in rows:
        scope = {k: unquote(v) for k, _, v in (part.partition("=") for part in (m["session_scope"] or "").split("&"))
                 if k in ("user_id", "agent_id", "run_id") and v}
        said = {"role": m["role"], "content": m["content"], "id": f"{SYSTEM}:messages:{m['id']}",
                "created_at": utc(m["created_at"])}
        if storable(plan, "messages", m["id"], said):
            chats.setdefault(m["session_scope"] or "", Chat(
                source=f"messages:{m['session_scope']}", session_id=scope.get("run_id") or SYSTEM, messages=[],
                user_id=scope.get("user_id"), agent_id=scope.get("agent_id"))).messages.append(said)
    plan.chats += chats.values()


def _history(path: str) -> dict[str, list[dict[str, Any]]]:
    """mem0's history rows by memory, oldest first."""
    if not Path(path).is_file():
        raise ValidationError(f"mem0's history database {path} does not exist (mem0 keeps it at ~/.mem0/history.db)")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        # in the order mem0 wrote them: the times it records are partial
        rows = [dict(r) for r in db.execute("SELECT id, memory_id, old_memory, new_memory, event, created_at, "
                                            "updated_at, is_deleted FROM history ORDER BY rowid")]
        db.close()
    except sqlite3.Error as exc:
        raise ValidationError(f"{path} is not mem0's history database: {exc}") from None
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["memory_id"], []).append(r)
    return out
