"""openclaw-memory-pgvector's PostgreSQL database: its `memories` table. Its conversation tables
(requests, responses, reasoning) and files are counted and left out, each with why."""

from __future__ import annotations

from typing import Any

from .data import Options, Plan, item, unit, utc, vector
from .pgsource import Source

SYSTEM = "openclaw-memory-pgvector"
#: the user id the plugin stores every row under (it reads a sender id OpenClaw never sends)
NO_USER = "default"
MAPPED = {
    "memories.content, memory_type": "content, category (its types are clawrecall's categories)",
    "memories.user_id": "user_id (the user's scope); `default`, the id the plugin stores every row under, "
                        "→ the importing caller's scope (--user/--agent), else global",
    "memories.session_id": "session_id",
    "memories.importance, confidence": "importance, confidence",
    "memories.created_at, updated_at, expires_at": "created_at and valid_from, updated_at, expires_at",
    "memories.metadata, source_type, source_id": "metadata.pgvector",
    "memories.embedding": "the vector, reused when --vectors-from names the store's model (by default "
                          "multilingual-e5-large, 1024-d); else re-embedded",
}
LEFT_OUT = {
    "requests": "the user's messages: not imported yet (clawrecall records conversations itself from now on)",
    "responses": "the assistant's replies: not imported yet",
    "reasoning": "the model's thinking: not imported yet",
    "files": "file records: add the files themselves with `clawrecall files add` (their storage_path)",
    "file_chunks": "chunks of those files: `clawrecall files add` chunks the file again",
}


def read(url: str, options: Options) -> Plan:
    with Source(url, "openclaw-memory-pgvector") as db:
        db.require("memories", {"id", "user_id", "content", "memory_type", "importance", "expires_at"})
        plan = Plan(mapped=dict(MAPPED))
        columns = db.columns("memories", but={"embedding"})
        for row in db.rows(f"SELECT {columns}, vector_send(embedding) AS vector FROM memories ORDER BY created_at, id"):
            plan.items.append(_memory(row))
            if row["vector"] is not None:
                plan.vectors[plan.items[-1]["id"]] = vector(row["vector"])
        for table, reason in LEFT_OUT.items():
            if n := db.count(table):
                plan.skipped.append({"table": table, "id": None, "rows": n, "reason": reason})
    return plan


def _memory(row: dict[str, Any]) -> dict[str, Any]:
    created = utc(row.get("created_at"))
    theirs = {k: row.get(k) for k in ("metadata", "source_type", "source_id") if row.get(k)}
    if row["user_id"] == NO_USER:
        theirs["user_id"] = NO_USER
    return item(
        SYSTEM, "memories", row["id"], row["content"], category=row["memory_type"],
        user_id=None if row["user_id"] == NO_USER else row["user_id"], session_id=row.get("session_id"),
        importance=unit(row.get("importance")), confidence=unit(row.get("confidence")),
        created_at=created, valid_from=created, updated_at=utc(row.get("updated_at")),
        expires_at=utc(row.get("expires_at")), metadata={"pgvector": theirs} if theirs else None,
    )

