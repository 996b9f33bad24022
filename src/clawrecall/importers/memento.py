"""memento-local's SQLite knowledge base: `facts` (with `supersedes` chains, visibility, occurrence
counts) and `master_facts`, each agent's facts in that agent's scope; its `conversations` and their
`messages` as the conversation record (each conversation a segment of its session); its
`fact_occurrences` as the record's occurrences, quoting those segments; and, given `--markdown`,
an agent workspace's `memory/*.md` journal."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ..openclaw.markdown import MarkdownFile, markdown_items
from .data import Chat, Options, Plan, stable_id, storable, utc, vector

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
    "conversations": "a segment of the conversation record: session_key → session, agent_id → its agent's "
                     "record, channel; closed as the conversation ended",
    "messages": "the record's messages (role, content, timestamp), each once by its id",
    "fact_occurrences": "occurrences of the fact (when, context_snippet → snippet, sentiment), quoting the "
                        "segment its conversation became",
    "memory/*.md (--markdown)": "a memory per paragraph or list item in the agent's scope, titled by its heading, "
                                "dated by a daily note's name (as the OpenClaw plugin's Markdown import)",
}
SENTIMENTS = {"neutral", "confirmation", "correction", "frustration", "reminder", "update"}


def read(path: str, options: Options) -> Plan:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        # without their vectors (JSON text, ~8 KB each): those are read and parsed one row at a time below,
        # not held all at once (100k facts: 800 MB of text the process faulted its pages in for)
        columns = ", ".join(f'"{c[1]}"' for c in db.execute("PRAGMA table_info(facts)") if c[1] != "embedding")
        facts = db.execute(f"SELECT {columns} FROM facts ORDER BY first_seen_at, id").fetchall()
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        masters = db.execute("SELECT * FROM master_facts ORDER BY first_seen_at, id").fetchall() \
            if "master_facts" in tables else []
        conversations = db.execute("SELECT * FROM conversations ORDER BY started_at, id").fetchall() \
            if "conversations" in tables else []
        messages = db.execute("SELECT * FROM messages ORDER BY timestamp, rowid").fetchall() \
            if "messages" in tables else []
        occurrences = db.execute("SELECT * FROM fact_occurrences ORDER BY timestamp, id").fetchall() \
            if "fact_occurrences" in tables else []
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
    try:
        for fact_id, text in db.execute("SELECT id, embedding FROM facts"):
            if text:
                plan.vectors[stable_id(SYSTEM, "facts", fact_id)] = vector(text)  # type: ignore[assignment]
    except sqlite3.Error as exc:
        raise ValidationError(f"{path} is not a memento-local database: {exc}") from None
    for m in masters:
        if m["source_fact_id"] in known:
            plan.skipped.append({"table": "master_facts", "id": m["id"],
                                 "reason": f"a copy of facts.{m['source_fact_id']}, imported as that fact"})
            continue
        plan.items.append(_fact(m, "master_facts", None, None, set(), scope="global", visibility="shared",
                                agent=m["source_agent_id"]))
    _conversations(plan, conversations, messages)
    _occurrences(plan, occurrences, known, {c.key for c in plan.chats})
    if options.markdown:
        _markdown(plan, Path(options.markdown), options.agent or "main")
    return plan


def _conversations(plan: Plan, conversations: list[sqlite3.Row], messages: list[sqlite3.Row]) -> None:
    """Each conversation (a segment there) with its messages, in its agent's record."""
    by_conversation: dict[str, list[dict[str, Any]]] = {c["id"]: [] for c in conversations}
    for m in messages:
        said = {"role": m["role"], "content": m["content"], "id": f"{SYSTEM}:messages:{m['id']}",
                "created_at": utc(m["timestamp"])}
        if m["conversation_id"] not in by_conversation:
            plan.skipped.append({"table": "messages", "id": m["id"],
                                 "reason": f"of conversation {m['conversation_id']}, which is not in the database"})
            continue
        if not storable(plan, "messages", m["id"], said):
            continue
        by_conversation[m["conversation_id"]].append(said)
    for c in conversations:
        if not by_conversation[c["id"]]:
            plan.skipped.append({"table": "conversations", "id": c["id"],
                                 "reason": "no messages rows (only its raw_text): nothing to record"})
            continue
        plan.chats.append(Chat(source=f"conversations:{c['id']}", session_id=c["session_key"],
                               messages=by_conversation[c["id"]], agent_id=c["agent_id"], channel=c["channel"],
                               key=c["id"]))


def _occurrences(plan: Plan, rows: list[sqlite3.Row], facts: set[str], chats: set[str | None]) -> None:
    for o in rows:
        if o["fact_id"] not in facts:
            plan.skipped.append({"table": "fact_occurrences", "id": o["id"],
                                 "reason": f"of fact {o['fact_id']}, which is not in the database"})
            continue
        sentiment = o["sentiment"] if o["sentiment"] in SENTIMENTS else None
        if o["sentiment"] and sentiment is None:
            plan.skipped.append({"table": "fact_occurrences", "id": o["id"], "field": "sentiment",
                                 "reason": f"sentiment {o['sentiment']!r} is none of {', '.join(sorted(SENTIMENTS))}: "
                                           "imported without one"})
        plan.occurrences.append({
            "id": stable_id(SYSTEM, "fact_occurrences", o["id"]), "memory_id": stable_id(SYSTEM, "facts", o["fact_id"]),
            "chat": o["conversation_id"] if o["conversation_id"] in chats else None, "at": utc(o["timestamp"]),
            "snippet": o["context_snippet"] or None, "sentiment": sentiment,
        })


def _markdown(plan: Plan, folder: Path, agent: str) -> None:
    """An agent workspace's journal: `MEMORY.md` and `memory/*.md` (not `memory/conversations/`, whose JSONL
    segments are the conversations table's copy)."""
    workspace = folder.parent if folder.name == "memory" and not (folder / "memory").is_dir() else folder
    paths = sorted((workspace / "memory").glob("*.md")) + [p for p in [workspace / "MEMORY.md"] if p.is_file()]
    if not paths:
        raise ValidationError(f"{folder} holds no memory/*.md or MEMORY.md: give the agent's workspace folder")
    try:
        files = [MarkdownFile(p.relative_to(workspace).as_posix(), p.read_text(encoding="utf-8")) for p in paths]
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read the journal in {workspace}: {exc}") from None
    read = markdown_items(files, f"agent:{agent}")
    for source_id, it in read.items.items():
        plan.items.append({**{k: v for k, v in it.items() if k != "scope" and v is not None},
                           "id": stable_id(SYSTEM, "memory", source_id), "agent_id": agent})
    if read.templates:
        plan.skipped.append({"table": "memory/*.md", "id": None, "rows": read.templates,
                             "reason": "OpenClaw's template text and placeholders"})


def _fact(row: sqlite3.Row, table: str, agent_id: str | None, successor: sqlite3.Row | None, known: set[str],
          *, scope: str | None = None, visibility: str | None = None, agent: str | None = None) -> dict[str, Any]:
    keys = row.keys()
    category = row["category"]
    extra: dict[str, Any] = {"occurrence_count": row["occurrence_count"], "source_table": table}
    if category in CATEGORIES:
        extra["category"] = category
    if agent is not None:
        extra["source_agent_id"] = agent
    first_seen = utc(row["first_seen_at"])
    item: dict[str, Any] = {
        "id": stable_id(SYSTEM, table, row["id"]), "content": row["content"], "title": row["summary"],
        "category": CATEGORIES.get(category, category), "confidence": row["confidence"],
        "visibility": visibility or row["visibility"], "agent_id": agent_id, "scope": scope,
        "created_at": first_seen, "valid_from": first_seen,
        "updated_at": utc(row["last_seen_at"]), "source_type": SYSTEM, "source_id": f"{table}:{row['id']}",
        "metadata": {"memento": extra},
    }
    if "supersedes" in keys and row["supersedes"] in known:
        item["supersedes"] = stable_id(SYSTEM, table, row["supersedes"])
    if successor is not None:
        item["superseded_by"] = stable_id(SYSTEM, table, successor["id"])
        item["valid_to"] = utc(successor["first_seen_at"])
    return {k: v for k, v in item.items() if v is not None}
