"""openclaw-memory-pgvector's PostgreSQL database: its `memories` table, and its conversation tables
(requests, responses, reasoning) as the conversation record, one conversation per user and session.
Its files are counted and left out, with why."""

from __future__ import annotations

from typing import Any

from .data import Chat, Options, Plan, item, storable, unit, utc
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
    "requests.message_text": "the user's messages of the conversation record, in the user's record (`default`: the "
                             "importing caller's), session_id → session (none: the session `openclaw-memory-pgvector`)",
    "responses.response_text, model_used, input_tokens, output_tokens": "the assistant's messages, after their "
                                                                        "request and its reasoning",
    "reasoning.reasoning_text, thinking_model": "reasoning messages",
    "requests/responses/reasoning.embedding": "the message's vector, reused when --vectors-from names the store's "
                                              "model (not a long message's: the record embeds it as windows); "
                                              "else the record embeds the message",
    "responses.summary, summary_embedding, feedback": "not kept: the record summarises its messages itself",
}
NO_SESSION = SYSTEM  # the session of requests stored without one
LEFT_OUT = {
    "files": "file records: add the files themselves with `clawrecall files add` (their storage_path)",
    "file_chunks": "chunks of those files: `clawrecall files add` chunks the file again",
}


def read(url: str, options: Options) -> Plan:
    with Source(url, "openclaw-memory-pgvector") as db:
        db.require("memories", {"id", "user_id", "content", "memory_type", "importance", "expires_at"})
        plan = Plan(mapped=dict(MAPPED))
        columns = db.columns("memories", but={"embedding"})
        for row in db.vector_rows(f"SELECT {columns}, vector_send(embedding) AS vector FROM memories ORDER BY created_at, id"):
            plan.items.append(_memory(row))
            if row["vector"] is not None:
                plan.vectors[plan.items[-1]["id"]] = row["vector"]
        if {"id", "user_id", "message_text"} <= db.tables.get("requests", set()):
            _conversations(db, plan)
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



def _conversations(db: Source, plan: Plan) -> None:
    """Each request, its reasoning and its responses, in order, grouped by user and session, with the
    vector the plugin made of each message's text (`embedding`; a response's `summary_embedding` is of
    another text)."""
    later: dict[str, list[dict[str, Any]]] = {}
    said: dict[str, Any] = {}  # message id -> its vector

    def rows(table: str) -> list[dict[str, Any]]:
        vec = ", vector_send(embedding) AS vector" if "embedding" in db.tables[table] else ""
        sql = f"SELECT {db.columns(table, but={'embedding', 'summary_embedding'})}{vec} FROM {table} ORDER BY created_at, id"
        return db.vector_rows(sql) if vec else db.rows(sql)

    def keep(row: dict[str, Any], message: dict[str, Any]) -> None:
        if row.get("vector") is not None:
            said[message["id"]] = row["vector"]

    def answer(table: str, row: dict[str, Any], message: dict[str, Any]) -> None:
        message = {k: v for k, v in message.items() if v is not None}
        if storable(plan, table, row["id"], message):
            later.setdefault(str(row["request_id"]), []).append(message)
            keep(row, message)

    if "reasoning" in db.tables:
        for r in rows("reasoning"):
            answer("reasoning", r, {"role": "reasoning", "content": r["reasoning_text"], "id": f"{SYSTEM}:reasoning:{r['id']}",
                                    "created_at": utc(r.get("created_at")), "model": r.get("thinking_model")})
    if "responses" in db.tables:
        for r in rows("responses"):
            answer("responses", r, {"role": "assistant", "content": r["response_text"],
                                    "id": f"{SYSTEM}:responses:{r['id']}", "created_at": utc(r.get("created_at")),
                                    "model": r.get("model_used"), "input_tokens": r.get("input_tokens"),
                                    "output_tokens": r.get("output_tokens")})
    chats: dict[tuple[str, str], Chat] = {}
    for r in rows("requests"):
        session = r.get("session_id") or NO_SESSION
        chat = chats.setdefault((r["user_id"], session), Chat(
            source=f"requests:{r['user_id']}/{session}", session_id=session, messages=[],
            user_id=None if r["user_id"] == NO_USER else r["user_id"]))
        asked = {"role": "user", "content": r["message_text"], "id": f"{SYSTEM}:requests:{r['id']}",
                 "created_at": utc(r.get("created_at"))}
        if storable(plan, "requests", r["id"], asked):
            chat.messages.append(asked)
            keep(r, asked)
        chat.messages += later.get(str(r["id"]), [])
    for chat in chats.values():
        chat.vectors = {m["id"]: said[m["id"]] for m in chat.messages if m["id"] in said}
    plan.chats += chats.values()
