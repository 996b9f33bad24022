"""ShadowDB's MySQL backend imported from a real MariaDB server (tests/mariadb_server.py, its zone +02:00) in
both of ShadowDB's layouts, built here as it builds them: row by row (content, times in UTC, record types,
tags, soft deletes, supersede chains, startup entries), vectors reused only when made by the store's model
and of its dimensions, a second run adds nothing, and a wrong source fails clearly."""

from __future__ import annotations

import uuid

import numpy as np
import pymysql
import pytest

from clawrecall import Memory

import mariadb_server
from test_import_systems import HASH, STORE_MODEL, _import, _is_vector_of, _stored, _vectors

# the tables the plugin's MySQL backend creates (mysql.ts): its `embedding VECTOR(N)` needs MySQL 9.2 (MariaDB
# 11.7), so it is the LONGBLOB of the repository's schema file here, holding what a VECTOR column hands a client
# (N float32s, little-endian); its second full-text index uses MySQL's ngram parser, which MariaDB lacks
PLUGIN = """
CREATE TABLE memories (
  id BIGINT AUTO_INCREMENT PRIMARY KEY, content TEXT NOT NULL, title VARCHAR(500),
  category VARCHAR(100) DEFAULT 'general', record_type VARCHAR(50) DEFAULT 'fact', tags JSON DEFAULT ('[]'),
  embedding LONGBLOB, created_at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), deleted_at DATETIME(3) NULL,
  FULLTEXT INDEX idx_ft_content (title, content), INDEX idx_category (category), INDEX idx_deleted (deleted_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE primer (
  `key` VARCHAR(255) PRIMARY KEY, content TEXT NOT NULL, priority INT DEFAULT 50, `always` TINYINT(1) DEFAULT 0,
  enabled TINYINT(1) DEFAULT 1, updated_at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
"""
# the repository's schema-mysql.sql: `startup`, supersede chains, TIMESTAMP times, no soft delete
SCHEMA_FILE = """
CREATE TABLE IF NOT EXISTS startup (
  `key` VARCHAR(128) PRIMARY KEY, content LONGTEXT NOT NULL, priority INT NOT NULL DEFAULT 0,
  reinforce TINYINT(1) NOT NULL DEFAULT 0,
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
CREATE TABLE IF NOT EXISTS memories (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, title TEXT, content LONGTEXT NOT NULL, content_pyramid MEDIUMTEXT,
  category VARCHAR(128) NOT NULL DEFAULT 'general', record_type VARCHAR(64) NOT NULL DEFAULT 'fact', summary TEXT,
  source_file VARCHAR(1024), tags JSON NULL, metadata JSON NULL, embedding LONGBLOB NULL,
  contradicted TINYINT(1) NOT NULL DEFAULT 0, superseded_by BIGINT UNSIGNED NULL,
  created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id), KEY memories_category_idx (category), KEY memories_created_at_idx (created_at),
  KEY memories_superseded_idx (superseded_by), KEY memories_contradicted_idx (contradicted),
  FULLTEXT KEY memories_fulltext_idx (title, summary, content, content_pyramid),
  CONSTRAINT memories_superseded_fk FOREIGN KEY (superseded_by) REFERENCES memories(id) ON DELETE SET NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
"""
PASSWORD = "s3cr@t:/pw"  # spelled %-encoded in the URL, as a connection string must


@pytest.fixture(scope="module")
def mariadb():
    with mariadb_server.server() as running:
        yield running


def _vec(text: str) -> bytes:
    return HASH.embed([text], kind="passage")[0].astype("<f4").tobytes()


def _database(mariadb, schema: str, rows: list[tuple[str, tuple]]) -> str:
    """A database as ShadowDB's connection writes it (over TCP as its user, in the server's zone, +02:00): its URL."""
    name = "shadow_" + uuid.uuid4().hex[:8]
    url = mariadb.database(name, "shadow", PASSWORD)
    conn = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="shadow", password=PASSWORD, database=name,
                           autocommit=True)
    with conn, conn.cursor() as cur:
        for statement in filter(str.strip, schema.split(";")):
            cur.execute(statement)
        for sql, params in rows:
            cur.execute(sql, params)
    return url


def _plugin_database(mariadb) -> str:
    insert = ("INSERT INTO memories (content, title, category, record_type, tags, embedding, created_at, updated_at, "
              "deleted_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")
    return _database(mariadb, PLUGIN, [
        (insert, ("Sarah's phone is +1 555 0100", "Sarah phone", "contacts", "fact", '["people"]', _vec("quartz lantern"),
                  "2025-01-10 10:00:00.250", "2025-01-11 10:00:00", None)),
        (insert, ("We deploy with blue-green releases ✅", None, "general", "decision", "[]", None,
                  "2025-02-01 10:00:00", "2025-02-01 10:00:00", None)),
        (insert, ("Survey of vector databases", "DB survey", "research", "research", '["dbs", "survey"]',
                  np.full(768, 0.01, dtype="<f4").tobytes(), "2025-03-01 10:00:00", "2025-03-01 10:00:00", None)),
        (insert, ("The old office is on Main St", None, "general", "fact", "[]", _vec("The old office is on Main St"),
                  "2024-12-01 10:00:00", "2025-01-05 10:00:00", "2025-04-01 10:00:00")),  # soft-deleted
        (insert, ("A vector cut short", None, "general", "fact", "[]", b"\x00\x01\x02\x03\x04\x05",
                  "2025-05-01 10:00:00", "2025-05-01 10:00:00", None)),
        ("INSERT INTO primer (`key`, content, priority, `always`, enabled) VALUES (%s, %s, %s, %s, %s), "
         "(%s, %s, DEFAULT, %s, %s), (%s, %s, %s, %s, %s), (%s, %s, %s, %s, %s)",
         ("name", "I am Shadow.", 1, 1, 1, "style", "Be brief.", 0, 1, "old", "Retired.", 3, 0, 0,
          "quiet", "Speak softly.", 3, 0, None)),
    ])


def test_shadowdb_mysql_memories_soft_deletes_and_primer_arrive(db_target, mariadb):
    url = _plugin_database(mariadb)
    Memory.open(db_target).close()
    first = _import(db_target, "shadowdb", url, "--vectors-from", STORE_MODEL)
    assert first["imported"] == 5 and first["startup"] == {"imported": 3, "already_there": 0}, first
    assert {(d["table"], d["id"], d.get("field")) for d in first["skipped"]} == {
        ("memories", "5", "embedding"), ("primer", "old", None), ("primer", "style", "priority")}
    # Sarah's and the deleted one's are the store's; the 768-d one, the NULL one and the cut one are embedded
    assert (first["vectors"]["reused"], first["vectors"]["embedded"]) == (2, 3)
    # the summary names the source without its password
    assert first["source"] == "mysql://shadow:***@" + url.split("@", 1)[1] and "s3cr" not in first["source"]
    again = _import(db_target, "shadowdb", url, "--vectors-from", STORE_MODEL)
    assert (again["imported"], again["already_there"]) == (0, 5)
    assert again["startup"] == {"imported": 0, "already_there": 3}

    got = _stored(db_target)
    phone, deploy, survey, old, cut = (got[f"memories:{i}"] for i in range(1, 6))
    assert (phone.content, phone.title, phone.category, phone.tags, phone.scope) == (
        "Sarah's phone is +1 555 0100", "Sarah phone", "fact", ["people"], "global")
    assert phone.metadata["shadowdb"] == {"category": "contacts", "record_type": "fact"}
    # written at 10:00 in the server's zone, +02:00
    assert phone.created_at.isoformat() == "2025-01-10T08:00:00.250000+00:00"
    assert phone.updated_at.isoformat() == "2025-01-11T08:00:00+00:00"
    assert (deploy.content, deploy.category, deploy.tags) == ("We deploy with blue-green releases ✅", "decision", [])
    assert (survey.category, survey.tags, survey.metadata["shadowdb"]["record_type"]) == (
        "other", ["dbs", "survey"], "research")
    assert old.is_deleted and old.deleted_at.isoformat() == "2025-04-01T08:00:00+00:00"
    assert not phone.is_deleted and cut.content == "A vector cut short"
    vectors = _vectors(db_target, [phone.id, deploy.id, survey.id, cut.id])
    assert _is_vector_of(vectors[phone.id], "quartz lantern")  # reused as stored, not embedded again
    for memory in (deploy, survey, cut):
        assert _is_vector_of(vectors[memory.id], memory.content)

    mem = Memory.open(db_target)
    entries = {e.key: e for e in mem.startup.list()}
    mem.close()
    assert (entries["name"].content, entries["name"].priority, entries["name"].reinforce) == ("I am Shadow.", 1, True)
    assert (entries["style"].priority, entries["style"].reinforce) == (9, False)  # its default, 50, clamped
    assert (entries["quiet"].priority, entries["quiet"].reinforce) == (3, False)  # enabled NULL: the plugin reads it
    assert "old" not in entries


def test_shadowdb_mysql_schema_file_layout_arrives_with_chains_and_startup(db_path, mariadb):
    insert = ("INSERT INTO memories (id, content, title, category, record_type, tags, metadata, summary, created_at, "
              "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
    url = _database(mariadb, SCHEMA_FILE, [
        (insert, (2, "The office moved to Pier 17", "Office", "places", "fact", '["office"]', None, None,
                  "2025-03-01 12:00:00", "2025-03-01 12:00:00")),
        (insert, (1, "The office moved to Pier 9", "Office", "places", "fact", '["office", "move"]', None, None,
                  "2025-01-01 12:00:00", "2025-01-01 12:00:00")),
        (insert, (3, "Never deploy on Fridays", None, "rules", "directive", None, '{"source": "chat"}',
                  "No Friday deploys", "2025-02-01 09:00:00", "2025-02-01 09:00:00")),
        ("UPDATE memories SET superseded_by = 2, updated_at = updated_at WHERE id = 1", ()),
        ("INSERT INTO startup (`key`, content, priority, reinforce) VALUES ('soul', 'You are Shadow.', 0, 1), "
         "('rules', 'Never share keys.', 12, 0)", ()),
    ])
    Memory.open(db_path).close()
    first = _import(str(db_path), "shadowdb", url)
    assert first["imported"] == 3 and first["startup"] == {"imported": 2, "already_there": 0}
    assert [(d["table"], d["id"]) for d in first["skipped"]] == [("startup", "rules")]
    assert _import(str(db_path), "shadowdb", url)["imported"] == 0

    got = _stored(str(db_path))
    pier9, pier17, rule = (got[f"memories:{i}"] for i in range(1, 4))
    assert (pier9.superseded_by, pier17.supersedes, pier9.tags) == (pier17.id, pier9.id, ["office", "move"])
    assert pier9.valid_to.isoformat() == "2025-03-01T10:00:00+00:00"  # TIMESTAMPs of a +02:00 session
    assert pier9.created_at.isoformat() == "2025-01-01T10:00:00+00:00"
    assert (rule.category, rule.tags, rule.metadata["shadowdb"]) == (
        "other", [], {"category": "rules", "record_type": "directive"})
    mem = Memory.open(db_path)
    entries = {e.key: e for e in mem.startup.list()}
    mem.close()
    assert (entries["soul"].priority, entries["soul"].reinforce) == (0, True)
    assert (entries["rules"].priority, entries["rules"].reinforce) == (9, False)


def test_a_mysql_source_that_is_wrong_fails_clearly_and_writes_nothing(db_path, mariadb):
    Memory.open(db_path).close()
    db = str(db_path)
    empty = mariadb.database("other_" + uuid.uuid4().hex[:8], "shadow", PASSWORD)
    said = _import(db, "shadowdb", empty, code=1)
    assert "is not a ShadowDB database: it has no memories table (its tables: none)" in said
    wrong = empty.replace("s3cr%40t", "guess")
    said = _import(db, "shadowdb", wrong, code=1)
    assert "cannot read mysql://shadow:***@127.0.0.1" in said and "Access denied" in said and "guess" not in said
    assert "names no host or no database" in _import(db, "shadowdb", f"mysql://127.0.0.1:{mariadb.port}/", code=1)
    assert not _stored(db)
