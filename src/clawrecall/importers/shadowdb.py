"""ShadowDB's PostgreSQL or MySQL database, or its SQLite backend's file: `memories` (record types, tags, soft
deletes; on SQLite and MySQL, `superseded_by` chains; the vectors of its pgvector or MySQL `VECTOR` column or
of its sqlite-vec table) and its startup entries (`startup`, or `primer` in the plugin's own schema files):
one mapping for the three."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..models import DEFAULT_CATEGORIES
from .data import Options, Plan, chain, item, utc
from .mysqlsource import MySQLSource
from .pgsource import Source

if TYPE_CHECKING:
    import numpy as np

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
    "SQLite: memories.tags, superseded_by": "tags (its JSON text); a supersede chain",
    "MySQL: memories.tags, superseded_by, embedding": "tags (its JSON); a supersede chain; the vector (a VECTOR "
                                                      "column's float32s), reused when --vectors-from names the "
                                                      "store's model, else re-embedded",
    "SQLite: memories_vec (sqlite-vec)": "the vector of the memory whose id is its rowid, read from the table's "
                                         "own storage; reused when --vectors-from names the store's model, else "
                                         "re-embedded",
}
VEC_TABLE = "memories_vec"
TIMES = {"created_at", "updated_at", "deleted_at"}  # the memories' times, read in UTC from MySQL


def read(source: str, options: Options) -> Plan:
    plan = Plan(mapped=dict(MAPPED))
    memories, startup, primer = _backend(source, plan)
    for row in memories:
        plan.items.append(_memory(row))
        if row.get("vector") is not None:
            plan.vectors[plan.items[-1]["id"]] = row["vector"]
    by_id = {str(row["id"]): it for it, row in zip(plan.items, memories)}
    for it, row in zip(plan.items, memories):  # the SQLite schema's chains: a row names its successor
        if row.get("superseded_by") is None:
            continue
        if str(row["superseded_by"]) in by_id:
            chain([it, by_id[str(row["superseded_by"])]])
        else:
            plan.skipped.append({"table": "memories", "id": str(row["id"]), "field": "superseded_by",
                                 "reason": f"superseded by {row['superseded_by']}, which is not in the database"})
    for row in startup:
        _entry(plan, "startup", row, bool(row.get("reinforce")))
    for row in primer:
        if row.get("enabled") in (False, 0):
            plan.skipped.append({"table": "primer", "id": row["key"], "reason": "disabled there"})
            continue
        _entry(plan, "primer", row, bool(row.get("always")))
    return plan


Rows = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]  # memories, startup, primer


def _backend(source: str, plan: Plan) -> Rows:
    """The rows of the backend SOURCE is: a file its SQLite backend's, a mysql:// URL its MySQL one's."""
    if Path(source).is_file():
        return _sqlite(source, plan)
    if source.startswith(MySQLSource.scheme):
        return _mysql(source, plan)
    if not source.startswith(("postgres://", "postgresql://")):
        raise ValidationError("ShadowDB's store is its database: give its URL (postgresql://user:password@host:5432/"
                              f"dbname or mysql://user:password@host:3306/dbname) or its SQLite file, not {source!r}")
    return _postgres(source)


def _postgres(url: str) -> Rows:
    with Source(url, "ShadowDB") as db:
        db.require("memories", {"id", "content", "record_type", "deleted_at"})
        columns = db.columns("memories", but={"embedding", "fts"})  # fts: its generated full-text column
        return (db.vector_rows(f"SELECT {columns}, vector_send(embedding) AS vector FROM memories ORDER BY id"),
                db.rows("SELECT * FROM startup ORDER BY priority, key") if "startup" in db.tables else [],
                db.rows("SELECT * FROM primer ORDER BY priority, key") if "primer" in db.tables else [])


def _mysql(url: str, plan: Plan) -> Rows:
    """Its MySQL backend (`mysql.ts`, or the repository's `schema-mysql.sql`): tags as JSON text, the
    `embedding` column as MySQL hands a `VECTOR(N)` over (N float32s, little-endian; the schema file's
    LONGBLOB holds the same), its times in the server's zone."""
    with MySQLSource(url, "ShadowDB") as db:
        db.require("memories", {"id", "content", "record_type"})
        columns = db.tables["memories"]
        select = [db.utc(c) if c in TIMES else f"`{c}`" for c in sorted(columns - {"embedding"})]
        select += ["`embedding` AS vector"] if "embedding" in columns else []
        memories = db.rows(f"SELECT {', '.join(select)} FROM memories ORDER BY id")
        startup = db.rows("SELECT * FROM startup ORDER BY priority, `key`") if "startup" in db.tables else []
        primer = db.rows("SELECT * FROM primer ORDER BY priority, `key`") if "primer" in db.tables else []
    for row in memories:
        row["tags"] = _tags(row.get("tags"))
        row["vector"] = _float32s(plan, row)
    return memories, startup, primer


def _float32s(plan: Plan, row: dict[str, Any]) -> np.ndarray | None:
    """A MySQL row's vector: its float32s, little-endian (what a `VECTOR` column holds); other bytes are said,
    and the memory embedded."""
    import numpy as np

    blob = row.get("vector")
    if blob is None:
        return None
    if not blob or len(blob) % 4:
        plan.skipped.append({"table": "memories", "id": str(row["id"]), "field": "embedding",
                             "reason": f"not a vector of float32s ({len(blob)} bytes): embedded again"})
        return None
    return np.frombuffer(blob, dtype="<f4").copy()


def _sqlite(path: str, plan: Plan) -> Rows:
    """Its SQLite backend's file: `memories` (tags as JSON text, times as ISO text), `primer`, and the
    vectors of its sqlite-vec table (`_sqlite_vectors`)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {r[1] for r in db.execute("PRAGMA table_info(memories)")}
        if not {"id", "content", "record_type"} <= columns:
            raise ValidationError(f"{path} is not a ShadowDB database: it has no memories table with id, content "
                                  f"and record_type (its tables: {', '.join(sorted(tables)) or 'none'})")
        memories = [{k: r[k] for k in r.keys() if k != "embedding"} for r in db.execute("SELECT * FROM memories ORDER BY id")]
        primer = [dict(r) for r in db.execute("SELECT * FROM primer ORDER BY priority, key")] if "primer" in tables else []
        vectors = _sqlite_vectors(db, tables, plan) if VEC_TABLE in tables else {}
        db.close()
    except sqlite3.Error as exc:
        raise ValidationError(f"{path} is not a ShadowDB database: {exc}") from None
    for row in memories:
        row["tags"] = _tags(row.get("tags"))
        row["vector"] = vectors.get(str(row["id"]))
    return memories, [], primer


# sqlite-vec's `vec0` table keeps its vectors in ordinary tables beside it, which SQLite reads without the
# extension (Python's `sqlite3` is often built unable to load one): `<name>_rowids` places each rowid at a
# chunk and an offset, `<name>_vector_chunks00` holds a chunk's float32 vectors end to end (its first vector
# column; sqlite-vec 0.1's layout, checked here against the extension itself by the tests).
_VEC_COLUMN = re.compile(r"[(,]\s*\w+\s+float\s*\[\s*(\d+)\s*\]", re.IGNORECASE)


def _sqlite_vectors(db: sqlite3.Connection, tables: set[str], plan: Plan) -> dict[str, Any]:
    """The vector of each memory (by its id: the vec0 row's primary key, else its rowid) that the sqlite-vec table holds; none, with
    why, when the table is not laid out as sqlite-vec 0.1 lays a `float[N]` column out."""
    import numpy as np

    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()[0] or ""
    dims = _VEC_COLUMN.search(sql)
    rowids, chunks = f"{VEC_TABLE}_rowids", f"{VEC_TABLE}_vector_chunks00"
    if dims is None or not {rowids, chunks} <= tables:
        rows = db.execute(f'SELECT count(*) FROM "{rowids}"').fetchone()[0] if rowids in tables else 0
        plan.skipped.append({"table": VEC_TABLE, "id": None, "rows": rows, "reason": "not a sqlite-vec table of "
                             "one float[N] column as this reader knows it: the memories are embedded again"})
        return {}
    size = 4 * int(dims.group(1))
    out: dict[str, Any] = {}
    for rowid, offset, blob in db.execute(f'SELECT coalesce(r.id, r.rowid), r.chunk_offset, c.vectors FROM "{rowids}" r '
                                          f'JOIN "{chunks}" c ON c.rowid = r.chunk_id'):
        if blob is not None and 0 <= offset and (offset + 1) * size <= len(blob):
            out[str(rowid)] = np.frombuffer(blob, dtype="<f4", count=size // 4, offset=offset * size).copy()
    return out


def _tags(value: Any) -> list[str]:
    """Tags as the SQLite backend keeps them: a JSON array in text."""
    try:
        tags = json.loads(value) if isinstance(value, str) and value else []
    except ValueError:
        return [t.strip() for t in str(value).split(",") if t.strip()]
    return [str(t) for t in tags] if isinstance(tags, list) else []


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
