"""openclaw-memory-pgvector's PostgreSQL database: its `memories` table, its conversation tables
(requests, responses, reasoning) as the conversation record, one conversation per user and session,
and its files with their chunks as the files the store searches."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._time import utcnow
from ..files import FileType
from .data import Chat, Options, Plan, SourceFile, item, stable_id, storable, unit, utc
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
    "files.storage_path, file_type, file_size, created_at, user_id": "a file: its path, type (an image's text: "
                                                                    "text), size, time and owner (`default`: the importing caller)",
    "file_chunks.chunk_text, chunk_index": "the file's chunks, in order (`metadata.chunk`), as the plugin cut them",
    "files.extracted_text": "the one chunk of a file stored without chunks",
    "file_chunks.embedding, files.embedding": "the chunk's vector, reused when --vectors-from names the store's "
                                              "model; else the store embeds the chunk",
    "files.original_name, mime_type, request_id": "not kept (the path is its storage_path)",
}
NO_SESSION = SYSTEM  # the session of requests stored without one
_KINDS: dict[str, FileType] = {"markdown": "markdown", "pdf": "pdf", "code": "code", "text": "text"}  # image: text


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
        if {"id", "user_id", "storage_path"} <= db.tables.get("files", set()):
            _files(db, plan)
    return plan


def _files(db: Source, plan: Plan) -> None:
    """Each file with its chunks in order (one chunk of its `extracted_text` when it has none: the plugin cuts
    only large files), and the plugin's vectors of them. A file with no text at all is left out."""
    chunked: dict[str, list[dict[str, Any]]] = {}
    if {"file_id", "chunk_index", "chunk_text"} <= db.tables.get("file_chunks", set()):
        for row in db.vector_rows("SELECT file_id, chunk_index, chunk_text, vector_send(embedding) AS vector "
                                  "FROM file_chunks ORDER BY file_id, chunk_index"):
            chunked.setdefault(str(row["file_id"]), []).append(row)
    columns = db.columns("files", but={"embedding"})
    for row in db.vector_rows(f"SELECT {columns}, vector_send(embedding) AS vector FROM files ORDER BY created_at, id"):
        file_id = str(row["id"])
        parts = [(stable_id(SYSTEM, "file_chunks", f"{file_id}:{c['chunk_index']}"), c["chunk_text"], c["vector"])
                 for c in chunked.get(file_id, []) if (c["chunk_text"] or "").strip()]
        if not parts and (row.get("extracted_text") or "").strip():
            parts = [(stable_id(SYSTEM, "files", file_id), row["extracted_text"], row["vector"])]
        if not parts:
            plan.skipped.append({"table": "files", "id": file_id, "reason": "no text: neither chunks nor extracted text"})
            continue
        created = utc(row.get("created_at"))
        plan.files.append(SourceFile(
            source=f"files:{file_id}", id=stable_id(SYSTEM, "files", f"file:{file_id}"), path=row["storage_path"],
            kind=_KINDS.get(row.get("file_type") or "", "text"), size_bytes=max(int(row.get("file_size") or 0), 0),
            created_at=datetime.fromisoformat(created) if created else utcnow(),
            chunks=[(cid, text) for cid, text, _ in parts], vectors={cid: v for cid, _, v in parts if v is not None},
            user_id=None if row["user_id"] == NO_USER else row["user_id"],
        ))


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
