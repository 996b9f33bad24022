"""Stores as earlier releases wrote them (tests/fixtures/): before named migrations (`make_legacy_stores.py`),
and one per schema version since (`fixtures/schema/`, made by `make_schema_stores.py`)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from pathlib import Path

from clawrecall.storage import is_postgres_url

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA_STORES = FIXTURES / "schema"
#: every schema version since named migrations: {"name", "commit", "steps": ["core/initial", …]}, oldest first
SCHEMA_VERSIONS: list[dict] = json.loads((SCHEMA_STORES / "versions.json").read_text())
#: the numbered versions before them, each of one backend: {"name", "backend", "commit", "schema_version"}
LEGACY_VERSIONS: list[dict] = json.loads((SCHEMA_STORES / "legacy.json").read_text())
# the API tokens `make_legacy_stores.py` created in the v7 SQLite file and the v5 PostgreSQL dump
TOKENS = {
    "sqlite": "cr_9858b1edd5b6_753UHGAJO6M7R7IGeaNykzgguEvxgqfanDH6VU9OSbM",
    "postgres": "cr_52ae8c5b773d_82IXiIrjI5kd9A13NSrHSnPUzUqdKNfIOpfEs0VXAqo",
}


def load(target: str, version: str) -> None:
    """Write the store of schema `version` ("v1", or "latest": v7 SQLite / v5 PostgreSQL) at `target`."""
    if is_postgres_url(target):
        import psycopg

        name = "legacy-v1-postgres.sql" if version == "v1" else "legacy-v5.sql"
        with psycopg.connect(target, autocommit=True) as conn:  # one script, no parameters: sent as it is
            assert conn.execute("SELECT to_regclass('memories')").fetchone()[0] is None, \
                "an old store goes into an empty database: mark the test `empty_db`"
            conn.execute((FIXTURES / name).read_text())
    elif version == "v1":
        conn = sqlite3.connect(target)
        conn.executescript((FIXTURES / "legacy-v1-sqlite.sql").read_text())
        conn.close()
    else:
        shutil.copyfile(FIXTURES / "legacy-v7.db", target)


def load_version(target: str, name: str) -> None:
    """Write the store of schema version `name` (a `SCHEMA_VERSIONS` or `LEGACY_VERSIONS` entry's) at `target`."""
    if is_postgres_url(target):
        import psycopg

        script = gzip.decompress((SCHEMA_STORES / f"{name}-postgres.sql.gz").read_bytes()).decode()
        with psycopg.connect(target, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('memories')").fetchone()[0] is None, \
                "an old store goes into an empty database: mark the test `empty_db`"
            conn.execute(script)
    else:
        Path(target).write_bytes(gzip.decompress((SCHEMA_STORES / f"{name}-sqlite.db.gz").read_bytes()))


def catalog(store) -> set[tuple]:
    """What a store's schema is made of, as comparable tuples (whitespace aside); the vector indexes
    left out, which follow the stored vectors rather than the schema."""
    if store.backend == "sqlite":
        rows = store.run("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        return {(kind, name, table, _squeeze(sql)) for kind, name, table, sql in rows}
    queries = [
        "SELECT 'column', table_name, column_name, data_type || coalesce(udt_name, ''), is_nullable, "
        "coalesce(column_default, ''), is_identity FROM information_schema.columns WHERE table_schema = 'public'",
        "SELECT 'constraint', conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'public'::regnamespace",
        "SELECT 'index', tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
        "AND indexname NOT IN ('idx_memories_embedding', 'idx_memories_scope_vectors')",
        "SELECT 'trigger', tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal",
        "SELECT 'function', proname, pg_get_functiondef(p.oid) FROM pg_proc p "
        "WHERE pronamespace = 'public'::regnamespace AND NOT EXISTS "
        "(SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')",
        "SELECT 'view', viewname, definition FROM pg_views WHERE schemaname = 'public'",
    ]
    return {tuple(_squeeze(v) if isinstance(v, str) else v for v in row) for q in queries for row in store.run(q)}


def _squeeze(sql: str | None) -> str | None:
    if sql is None:
        return None
    return re.sub(r"\s*([(),;])\s*", r"\1", " ".join(sql.split()))
