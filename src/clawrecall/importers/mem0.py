"""mem0's memories: its pgvector store (one table per collection: `id`, `vector`, `payload`) and,
given `--history`, its SQLite history of every ADD, UPDATE and DELETE, which becomes each memory's
supersede chain and its deletion (mem0 deletes the vector row; the history keeps the text)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .._time import utcnow
from ..errors import ValidationError
from .data import Options, Plan, chain, item, stable_id, utc, vector
from .pgsource import Source

SYSTEM = "mem0"
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
    "history ADD/UPDATE": "earlier versions, superseded by the next (valid_to its time)",
    "history DELETE": "a deleted memory (deleted_at the deletion's time) with its last text and earlier versions",
}


def read(url: str, options: Options) -> Plan:
    plan = Plan(mapped=dict(MAPPED))
    history = _history(options.history) if options.history else {}
    current: set[str] = set()
    with Source(url, "mem0") as db:
        collections = sorted(t for t, cols in db.tables.items() if {"id", "vector", "payload"} <= cols)
        if not collections:
            db.require("mem0", {"id", "vector", "payload"})  # the default collection's name, for the message
        for table in collections:
            for row in db.rows(f'SELECT id::text AS id, vector_send(vector) AS vector, payload FROM "{table}" '
                               "ORDER BY payload->>'created_at', id"):
                current.add(row["id"])
                payload = row["payload"] or {}
                if not isinstance(payload.get("data"), str) or not payload["data"].strip():
                    plan.skipped.append({"table": table, "id": row["id"], "reason": "no text (payload.data)"})
                    continue
                versions = _versions(table, row["id"], history.get(row["id"], []), payload)
                versions.append(_memory(table, row["id"], payload))
                chain(versions)
                plan.items += versions
                if row["vector"] is not None:
                    plan.vectors[versions[-1]["id"]] = vector(row["vector"])
    for memory_id, events in history.items():
        if memory_id not in current:
            _deleted(plan, memory_id, events)
    return plan


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
