"""memento-local's SQLite knowledge base: `facts` (with `supersedes` chains, visibility, occurrence
counts) and `master_facts`, each agent's facts in that agent's scope."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..errors import ValidationError
from .data import Options, Plan, stable_id, utc, vector

SYSTEM = "memento-local"
#: memento's categories that are not ours, as the closest of ours (the original kept in metadata)
CATEGORIES = {"technical": "fact", "emotional": "experience", "routine": "fact"}
MAPPED = {
    "facts.content": "content", "facts.summary": "title", "facts.category": "category (technical, routine → fact; "
    "emotional → experience)", "facts.agent_id": "agent_id (the agent's scope)", "facts.visibility": "visibility",
    "facts.confidence": "confidence", "facts.first_seen_at": "created_at, valid_from",
    "facts.last_seen_at": "updated_at", "facts.supersedes": "supersedes (and the old fact's superseded_by, valid_to)",
    "facts.occurrence_count": "metadata.memento.occurrence_count", "facts.embedding": "the vector, reused when --vectors-from names the store's model (BGE-M3 by default: re-embedded)",
    "master_facts": "shared facts of the global scope, unless the agent fact they copy was imported",
}


def read(path: str, options: Options) -> Plan:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        facts = db.execute("SELECT * FROM facts ORDER BY first_seen_at, id").fetchall()
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        masters = db.execute("SELECT * FROM master_facts ORDER BY first_seen_at, id").fetchall() \
            if "master_facts" in tables else []
    except sqlite3.Error as exc:
        raise ValidationError(f"{path} is not a memento-local database: {exc}") from None
    plan = Plan(mapped=dict(MAPPED))
    known = {f["id"] for f in facts}
    by_successor = {f["supersedes"]: f for f in facts if f["supersedes"] in known}
    for f in facts:
        if f["supersedes"] and f["supersedes"] not in known:
            plan.skipped.append({"table": "facts", "id": f["id"], "field": "supersedes",
                                 "reason": f"supersedes {f['supersedes']}, which is not in the database: imported alone"})
        plan.items.append(_fact(f, "facts", f["agent_id"], by_successor.get(f["id"]), known))
        if f["embedding"]:
            plan.vectors[plan.items[-1]["id"]] = vector(f["embedding"])
    for m in masters:
        if m["source_fact_id"] in known:
            plan.skipped.append({"table": "master_facts", "id": m["id"],
                                 "reason": f"a copy of facts.{m['source_fact_id']}, imported as that fact"})
            continue
        plan.items.append(_fact(m, "master_facts", None, None, set(), scope="global", visibility="shared",
                                agent=m["source_agent_id"]))
    return plan


def _fact(row: sqlite3.Row, table: str, agent_id: str | None, successor: sqlite3.Row | None, known: set[str],
          *, scope: str | None = None, visibility: str | None = None, agent: str | None = None) -> dict[str, Any]:
    keys = row.keys()
    category = row["category"]
    extra: dict[str, Any] = {"occurrence_count": row["occurrence_count"], "source_table": table}
    if category in CATEGORIES:
        extra["category"] = category
    if agent is not None:
        extra["source_agent_id"] = agent
    item: dict[str, Any] = {
        "id": stable_id(SYSTEM, table, row["id"]), "content": row["content"], "title": row["summary"],
        "category": CATEGORIES.get(category, category), "confidence": row["confidence"],
        "visibility": visibility or row["visibility"], "agent_id": agent_id, "scope": scope,
        "created_at": utc(row["first_seen_at"]), "valid_from": utc(row["first_seen_at"]),
        "updated_at": utc(row["last_seen_at"]), "source_type": SYSTEM, "source_id": f"{table}:{row['id']}",
        "metadata": {"memento": extra},
    }
    if "supersedes" in keys and row["supersedes"] in known:
        item["supersedes"] = stable_id(SYSTEM, table, row["supersedes"])
    if successor is not None:
        item["superseded_by"] = stable_id(SYSTEM, table, successor["id"])
        item["valid_to"] = utc(successor["first_seen_at"])
    return {k: v for k, v in item.items() if v is not None}
