"""memory-lancedb-pro's LanceDB folder: its `memories` table (text, vector, category, scope,
importance, a millisecond timestamp, JSON metadata). Reading it takes the `lancedb` extra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ..models import DEFAULT_CATEGORIES
from .data import Options, Plan, chain, item, unit, utc

SYSTEM = "memory-lancedb-pro"
TABLE = "memories"
MAPPED = {
    "memories.text, category": "content, category (one clawrecall lacks → other, the original in "
                               "metadata.lancedb.category)",
    "memories.scope": "scope: global, agent:<id>, user:<id>, project:<id> and custom:<name> as they are; "
                      "reflection:agent:<id> → agent:<id> tagged reflection; none → global",
    "memories.importance": "importance",
    "memories.timestamp": "created_at and valid_from (JavaScript milliseconds)",
    "memories.metadata": "metadata.lancedb (its JSON); a `supersedes` naming another row → a supersede chain",
    "memories.vector": "the vector, reused when --vectors-from names the store's model; else re-embedded",
}


def read(path: str, options: Options) -> Plan:
    rows = _rows(path)
    plan = Plan(mapped=dict(MAPPED))
    ids = {r["id"] for r in rows}
    items = {}
    for row in sorted(rows, key=lambda r: (r.get("timestamp") or 0, r["id"])):
        if not isinstance(row.get("text"), str) or not row["text"].strip():
            plan.skipped.append({"table": TABLE, "id": row["id"], "reason": "no text"})
            continue
        items[row["id"]] = _memory(row, plan)
        if row.get("vector") is not None:
            plan.vectors[items[row["id"]]["id"]] = row["vector"]
    for row in rows:  # chains: a memory naming the one it replaced
        old = (items[row["id"]].get("metadata") or {}).get("lancedb", {}).get("supersedes") if row["id"] in items else None
        if isinstance(old, str) and old in ids and old in items:
            chain([items[old], items[row["id"]]])
    plan.items = list(items.values())
    return plan


def _rows(path: str) -> list[dict[str, Any]]:
    if not Path(path).is_dir():
        raise ValidationError(f"{path} is not a folder: memory-lancedb-pro's store is its LanceDB folder "
                              "(its dbPath, by default ~/.openclaw/memory/lancedb-pro)")
    try:
        import lancedb
    except ImportError:
        raise ValidationError("reading a LanceDB folder takes the lancedb extra: pip install 'clawrecall[lancedb]'") from None
    try:
        db = lancedb.connect(path)
        names = list(db.table_names())
        if TABLE not in names:
            raise ValidationError(f"{path} is not a memory-lancedb-pro store: it has no {TABLE} table "
                                  f"(its tables: {', '.join(names) or 'none'})")
        table = db.open_table(TABLE).to_arrow()
        has = "vector" in table.column_names
        rows: list[dict[str, Any]] = (table.drop_columns(["vector"]) if has else table).to_pylist()
        for row, v in zip(rows, _vectors(table.column("vector")) if has else []):
            row["vector"] = v
    except ValidationError:
        raise
    except Exception as exc:  # lancedb raises its own errors, and OSError, for a folder it cannot read
        raise ValidationError(f"cannot read the LanceDB folder {path}: {exc}") from None
    if rows and not {"id", "text"} <= set(rows[0]):
        raise ValidationError(f"{path} is not a memory-lancedb-pro store: its {TABLE} table has no id and text columns")
    return rows


def _vectors(column: Any) -> list[Any]:
    """The vector column as float32 rows, in one numpy call for a fixed-size column (memory-lancedb-pro's):
    as Python lists, 100k vectors took longer than the rest of the import."""
    import numpy as np
    import pyarrow as pa

    column = column.combine_chunks()
    if not pa.types.is_fixed_size_list(column.type):
        return [None if v is None else np.asarray(v, dtype=np.float32) for v in column.to_pylist()]
    size = column.type.list_size
    values = column.values.slice(column.offset * size, len(column) * size).to_numpy(zero_copy_only=False)
    matrix = values.astype(np.float32).reshape(len(column), size)
    return [None if null else v for v, null in zip(matrix, column.is_null().to_pylist())]


def _memory(row: dict[str, Any], plan: Plan) -> dict[str, Any]:
    scope, tags = row.get("scope") or "global", []
    if scope.startswith("reflection:"):
        scope, tags = scope.removeprefix("reflection:"), ["reflection"]
    kind, _, owner = scope.partition(":")
    try:
        metadata = json.loads(row.get("metadata") or "{}")
    except ValueError:
        plan.skipped.append({"table": TABLE, "id": row["id"], "field": "metadata",
                             "reason": "its metadata is not JSON: kept as text"})
        metadata = {"text": row["metadata"]}
    category = row.get("category") or "other"
    if category not in DEFAULT_CATEGORIES:
        metadata["category"], category = category, "other"
    created = utc(row.get("timestamp"))
    return item(
        SYSTEM, TABLE, row["id"], row["text"], category=category, scope=scope, tags=tags,
        user_id=owner if kind == "user" else None, agent_id=owner if kind == "agent" else None,
        importance=unit(row.get("importance")), created_at=created, valid_from=created,
        metadata={"lancedb": metadata} if metadata else None,
    )
