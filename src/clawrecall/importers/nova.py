"""nova-memory's PostgreSQL database: entity facts, events and lessons, each as the text nova-memory
embeds for it (so its `memory_embeddings` vectors fit the memory they are reused for); its agent
chats as the conversation record, a conversation per channel."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .data import Chat, Options, Plan, item, storable, unit, utc
from .pgsource import Source

SYSTEM = "nova-memory"
MAPPED = {
    "entity_facts + entities": "a memory \"<name> (<type>) - <key>: <value>\" (nova-memory's own wording), category "
                               "person for a person's fact, else entity; confidence; the entity in "
                               "metadata.nova (entity, entity_type, key, value)",
    "entity_facts.visibility": "public, trusted → shared; private → private",
    "events": "a memory \"On <date>: <event> (participants: …)\", category experience, valid_from the event's date",
    "lessons": "a memory \"Lesson (confidence: …): <lesson> Context: …\", category fact, tag lesson",
    "learned_at, created_at, updated_at": "created_at, updated_at",
    "memory_embeddings.embedding": "the vector of its source row's memory, reused when --vectors-from names the "
                                   "store's model (by default text-embedding-3-small, 1536-d); else re-embedded",
    "(no owner)": "the importing caller's scope (--user/--agent), else global",
    "agent_chat": "the conversation record of the importing caller (--user/--agent): a session per channel, each "
                  "message \"<sender>: <message>\" at its created_at; the caller's own agent's messages are the "
                  "assistant's, the others' the user's; their memory_embeddings are not kept: they embed "
                  "\"<sender> in #<channel>: <message>\", another text (the record embeds its messages itself)",
}
VISIBILITY = {"public": "shared", "trusted": "shared", "private": "private"}


def read(url: str, options: Options) -> Plan:
    with Source(url, "nova-memory") as db:
        db.require("memory_embeddings", {"source_type", "source_id", "content", "embedding"})
        plan = Plan(mapped=dict(MAPPED))
        if "entity_facts" in db.tables:
            for row in db.rows("SELECT f.*, e.name AS entity_name, e.type AS entity_type FROM entity_facts f "
                               "LEFT JOIN entities e ON e.id = f.entity_id ORDER BY f.id"):
                plan.items.append(_fact(row))
        if "events" in db.tables:
            plan.items += [_event(row) for row in db.rows("SELECT * FROM events ORDER BY id")]
        if "lessons" in db.tables:
            plan.items += [_lesson(row) for row in db.rows("SELECT * FROM lessons ORDER BY id")]
        by_source = {it["source_id"]: it["id"] for it in plan.items}
        orphans: dict[str, int] = {}
        for row in db.vector_rows("SELECT source_type, source_id, vector_send(embedding) AS vector FROM memory_embeddings "
                                  "ORDER BY id", binary=True):
            table = {"entity_fact": "entity_facts", "event": "events", "lesson": "lessons"}.get(row["source_type"])
            memory_id = by_source.get(f"{table}:{row['source_id']}") if table else None
            if memory_id is None:
                orphans[row["source_type"]] = orphans.get(row["source_type"], 0) + 1
            elif row["vector"] is not None:
                plan.vectors[memory_id] = row["vector"]
        if {"id", "sender", "channel", "message"} <= db.tables.get("agent_chat", set()):
            _chats(plan, db.rows("SELECT * FROM agent_chat ORDER BY created_at, id"), options.agent)
        for kind, n in orphans.items():
            if kind != "agent_chat":
                plan.skipped.append({"table": "memory_embeddings", "id": None, "rows": n,
                                     "reason": f"embeddings of {kind} rows that are not in their table"})
    return plan


def _fact(row: dict[str, Any]) -> dict[str, Any]:
    name, kind = row.get("entity_name"), row.get("entity_type")
    text = f"{name} ({kind}) - {row['key']}: {row['value']}" if name else f"{row['key']}: {row['value']}"
    return item(
        SYSTEM, "entity_facts", row["id"], text, category="person" if kind == "person" else "entity",
        confidence=unit(row.get("confidence")), visibility=VISIBILITY.get(row.get("visibility") or ""),
        created_at=utc(row.get("learned_at") or row.get("created_at")), updated_at=utc(row.get("updated_at")),
        metadata={"nova": {"entity": name, "entity_type": kind, "key": row["key"], "value": row["value"]}},
    )


def _event(row: dict[str, Any]) -> dict[str, Any]:
    when, what = row.get("date") or row.get("event_date"), row.get("event") or row.get("title")
    day = when.date() if isinstance(when, datetime) else when
    text = f"On {day}: {what}"
    if row.get("participants"):
        text += f" (participants: {', '.join(row['participants'])})"
    return item(SYSTEM, "events", row["id"], text, category="experience", valid_from=utc(when),
                created_at=utc(row.get("created_at")))


def _lesson(row: dict[str, Any]) -> dict[str, Any]:
    text = f"Lesson (confidence: {row['confidence']}): {row['lesson']}" if row.get("confidence") is not None \
        else f"Lesson: {row['lesson']}"
    if row.get("context"):
        text += f" Context: {row['context']}"
    return item(SYSTEM, "lessons", row["id"], text, category="fact", tags=["lesson"],
                confidence=unit(row.get("confidence")), created_at=utc(row.get("learned_at") or row.get("created_at")))



def _chats(plan: Plan, rows: list[dict[str, Any]], agent: str | None) -> None:
    chats: dict[str, Chat] = {}
    for row in rows:
        channel = row["channel"] or "agent_chat"
        said = {"role": "assistant" if agent is not None and row["sender"] == agent else "user",
                "content": f"{row['sender']}: {row['message']}", "id": f"{SYSTEM}:agent_chat:{row['id']}",
                "created_at": utc(row.get("created_at"))}
        if storable(plan, "agent_chat", row["id"], said):
            chats.setdefault(channel, Chat(source=f"agent_chat:#{channel}", session_id=channel, messages=[],
                                           channel=channel)).messages.append(said)
    plan.chats += chats.values()
