"""ShadowDB's PostgreSQL database: `memories` (record types, tags, soft deletes) and its startup
entries (`startup`, or `primer` in the plugin's own schema file)."""

from __future__ import annotations

from typing import Any

from ..models import DEFAULT_CATEGORIES
from .data import Options, Plan, item, utc, vector
from .pgsource import Source

SYSTEM = "shadowdb"
MAPPED = {
    "memories.content, title, tags": "content, title, tags",
    "memories.record_type": "category when it is one of clawrecall's (fact, decision, …), else other; the "
                            "original in metadata.shadowdb.record_type",
    "memories.category": "metadata.shadowdb.category (a folder: clawrecall files memories by scope and category)",
    "memories.created_at, updated_at": "created_at and valid_from, updated_at",
    "memories.deleted_at": "deleted_at: a soft-deleted memory stays deleted (undelete restores it; the "
                           "retention purge removes it)",
    "memories.embedding": "the vector, reused when --vectors-from names the store's model; else re-embedded",
    "memories (no owner)": "the importing caller's scope (--user/--agent), else global",
    "startup.key, content, priority, reinforce": "startup entries of the same key (`clawrecall startup`)",
    "primer.key, content, priority, always, enabled": "startup entries (always → reinforce); a disabled one "
                                                      "is left out",
}


def read(url: str, options: Options) -> Plan:
    with Source(url, "ShadowDB") as db:
        db.require("memories", {"id", "content", "record_type", "deleted_at"})
        plan = Plan(mapped=dict(MAPPED))
        columns = db.columns("memories", but={"embedding", "fts"})  # fts: its generated full-text column
        for row in db.rows(f"SELECT {columns}, vector_send(embedding) AS vector FROM memories ORDER BY id"):
            plan.items.append(_memory(row))
            if row["vector"] is not None:
                plan.vectors[plan.items[-1]["id"]] = vector(row["vector"])
        if "startup" in db.tables:
            for row in db.rows("SELECT * FROM startup ORDER BY priority, key"):
                _entry(plan, "startup", row, bool(row.get("reinforce")))
        if "primer" in db.tables:
            for row in db.rows("SELECT * FROM primer ORDER BY priority, key"):
                if row.get("enabled") is False:
                    plan.skipped.append({"table": "primer", "id": row["key"], "reason": "disabled there"})
                    continue
                _entry(plan, "primer", row, bool(row.get("always")))
    return plan


def _memory(row: dict[str, Any]) -> dict[str, Any]:
    kind = row["record_type"] or "fact"
    created = utc(row.get("created_at"))
    return item(
        SYSTEM, "memories", row["id"], row["content"], title=row.get("title") or None,
        category=kind if kind in DEFAULT_CATEGORIES else "other", tags=list(row.get("tags") or []),
        created_at=created, valid_from=created, updated_at=utc(row.get("updated_at")),
        deleted_at=utc(row.get("deleted_at")),
        metadata={"shadowdb": {"category": row.get("category"), "record_type": kind}},
    )


def _entry(plan: Plan, table: str, row: dict[str, Any], reinforce: bool) -> None:
    priority = row.get("priority")
    priority = 2 if priority is None else int(priority)
    if not 0 <= priority <= 9:
        plan.skipped.append({"table": table, "id": row["key"], "field": "priority",
                             "reason": f"priority {priority} is outside 0-9: imported as {min(max(priority, 0), 9)}"})
        priority = min(max(priority, 0), 9)
    plan.startup.append({"key": row["key"], "content": row["content"], "priority": priority, "reinforce": reinforce})
