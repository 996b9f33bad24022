"""mem0, ShadowDB and openclaw-memory-pgvector imported from real databases built here from their
documented schemas: row by row (content, owner, times, category, supersede chains, soft deletes,
startup entries), vectors reused only when made by the store's model, a second run adds nothing,
a run killed half-way finishes when run again, and a wrong source fails clearly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner

from clawrecall import Memory
from clawrecall.cli import cli
from clawrecall.importers.data import stable_id

from conftest import _admin, with_database
from import_sources import (  # noqa: F401  (built there: the docs' samples run on them too)
    BOB, CODER, DEC, EXPIRED, HASH, LISBON, MEM0_HISTORY, MEM0_TABLE, NOVA, PLANNER, PREF, SMALL, lancedb_pro,
)
from import_sources import mem0 as _mem0
from import_sources import nova as _nova
from import_sources import openclaw_pgvector as _pgvector
from import_sources import pgvector_schema as _pgvector_schema  # noqa: F401
from import_sources import shadowdb as _shadowdb
from import_sources import vec as _vec  # noqa: F401

STORE_MODEL = "hash/hashed-word-trigrams"  # the tests' store embeds with the hash provider's model


@pytest.fixture
def source_pg(pg_server):
    """An empty PostgreSQL database with pgvector: the other system's."""
    name = "src_" + uuid.uuid4().hex[:12]
    _admin(pg_server, f"CREATE DATABASE {name}")
    url = with_database(pg_server, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield url
    _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _import(db: str, system: str, source: str, *extra: str, code: int = 0) -> dict:
    result = CliRunner().invoke(cli, ["--db", db, "import", "--from", system, source, "--json", *extra])
    assert result.exit_code == code, result.output
    return json.loads(result.output) if code == 0 else result.output


def _stored(db: str) -> dict[str, object]:
    """The store's memories (not the conversation record's messages) by their source_id."""
    mem = Memory.open(db)
    ids = [r[0] for r in mem._store.run("SELECT id FROM memories WHERE kind = 'memory'")]
    rows = {r.source_id: r for r in mem._store.memories.fetch(ids).values()}
    mem.close()
    return rows


def _is_vector_of(stored: np.ndarray, text: str) -> bool:
    """Whether a stored vector is the store model's vector of `text` (PostgreSQL keeps half precision)."""
    own = HASH.embed([text], kind="passage")[0]
    return float(stored @ own / np.linalg.norm(own) / np.linalg.norm(stored)) > 0.999


def _vectors(db: str, ids: list[str]) -> dict[str, np.ndarray]:
    mem = Memory.open(db)
    out = mem._store.vectors(ids)
    mem.close()
    return out


# -- mem0 -------------------------------------------------------------------------------------------
def test_mem0_memories_history_and_deletions_arrive_row_by_row(db_target, source_pg, tmp_path):
    history = tmp_path / "history.db"
    _mem0(source_pg, history)
    Memory.open(db_target).close()
    dry = _import(db_target, "mem0", source_pg, "--history", str(history), "--dry-run")
    assert dry["imported"] == 6 and dry["dry_run"] and not _stored(db_target)
    first = _import(db_target, "mem0", source_pg, "--history", str(history), "--vectors-from", STORE_MODEL)
    # 4 current memories, Lisbon's earlier text, and Bob's deleted one (its one text, the ADD's)
    assert first["imported"] == 6 and first["already_there"] == 0, first
    again = _import(db_target, "mem0", source_pg, "--history", str(history), "--vectors-from", STORE_MODEL)
    assert again["imported"] == 0 and again["already_there"] == 6

    got = _stored(db_target)
    assert len(got) == 6
    porto, lisbon = got["history:h1"], got[f"mem0:{LISBON}"]
    assert (lisbon.content, lisbon.user_id, lisbon.scope, lisbon.category) == ("Alice lives in Lisbon", "alice",
                                                                               "user:alice", "fact")
    assert lisbon.created_at.isoformat() == "2025-03-01T18:00:00+00:00"  # -08:00 read as UTC
    assert lisbon.updated_at.isoformat() == "2025-06-01T09:00:00+00:00"
    assert porto.content == "Alice lives in Porto" and porto.user_id == "alice"
    assert porto.superseded_by == lisbon.id and lisbon.supersedes == porto.id
    assert porto.valid_to.isoformat() == "2025-06-01T09:00:00+00:00"
    planner = got[f"mem0:{PLANNER}"]
    assert (planner.user_id, planner.agent_id, planner.session_id) == ("alice", "planner", "trip-7")
    assert planner.tags == ["travel", "preferences"]
    assert planner.metadata["mem0"] == {"actor_id": "alice", "role": "user", "hash": "md5-Prefers ", "source": "chat"}
    assert (got[f"mem0:{CODER}"].agent_id, got[f"mem0:{CODER}"].scope) == ("coder", "agent:coder")
    assert got[f"mem0_small:{SMALL}"].user_id == "bob"
    bob = got["history:h4"]
    assert bob.id == stable_id("mem0", "deleted", BOB) and bob.is_deleted and bob.content == "Bob's birthday is on May 3"
    assert bob.deleted_at.isoformat() == "2025-02-01T00:00:00+00:00"  # no time recorded: its last change's

    # vectors: the 384-d ones made by the store's model kept as they are, the 4-d one and the NULL one embedded
    assert first["vectors"]["reused"] == 2 and "other dimensions" in first["vectors"]["why"]
    vectors = _vectors(db_target, [lisbon.id, got[f"mem0_small:{SMALL}"].id, planner.id])
    assert _is_vector_of(vectors[lisbon.id], "zebra xylophone quartet")
    assert vectors[got[f"mem0_small:{SMALL}"].id].shape == (HASH.dimensions,)
    assert _is_vector_of(vectors[planner.id], "Prefers aisle seats on long flights")


def test_mem0_vectors_of_an_unnamed_or_other_model_are_embedded_again(db_path, source_pg, tmp_path):
    _mem0(source_pg, tmp_path / "history.db")
    unnamed = _import(str(db_path), "mem0", source_pg)
    assert unnamed["vectors"]["reused"] == 0 and "--vectors-from" in unnamed["vectors"]["why"]
    lisbon = stable_id("mem0", "mem0", LISBON)
    stored = _vectors(str(db_path), [lisbon])[lisbon]
    assert _is_vector_of(stored, "Alice lives in Lisbon")  # its own text's, not the source's vector
    other = _import(str(tmp_path / "other.db"), "mem0", source_pg, "--vectors-from", "text-embedding-3-small")
    assert other["vectors"]["reused"] == 0 and "text-embedding-3-small" in other["vectors"]["why"]


def test_an_import_killed_half_way_resumes_and_finishes_with_nothing_twice(source_pg, tmp_path):
    history = tmp_path / "history.db"
    _mem0(source_pg, history)
    args = ["import", "--from", "mem0", source_pg, "--history", str(history), "--batch-size", "2", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    helper = str(Path(__file__).with_name("kill_after.py"))

    def clawrecall(db: Path, kill_after: int) -> subprocess.CompletedProcess:
        Memory.open(db).close()
        return subprocess.run([sys.executable, helper, str(kill_after), "--db", str(db), *args], env=env,
                              capture_output=True, text=True)

    whole = clawrecall(tmp_path / "count.db", 0)  # how many writing statements a whole import makes
    assert whole.returncode == 0, whole.stderr
    statements = int(whole.stderr.strip().splitlines()[-1].rsplit(" ", 1)[1])
    db = tmp_path / "m.db"
    killed = clawrecall(db, statements * 2 // 3)
    assert killed.returncode == -9
    partial = len(_stored(str(db)))
    assert 0 < partial < 6  # the batches committed before the kill stay
    done = _import(str(db), "mem0", source_pg, "--history", str(history))
    assert done["already_there"] == partial and done["imported"] == 6 - partial
    mem = Memory.open(db)
    ids = [r[0] for r in mem._store.run("SELECT id FROM memories")]
    assert len(ids) == len(set(ids)) == 6
    mem.close()


# -- ShadowDB ---------------------------------------------------------------------------------------
def test_shadowdb_memories_soft_deletes_and_startup_arrive(db_target, source_pg):
    _shadowdb(source_pg)
    Memory.open(db_target).close()
    first = _import(db_target, "shadowdb", source_pg, "--vectors-from", STORE_MODEL)
    assert first["imported"] == 4 and first["startup"] == {"imported": 3, "already_there": 0}
    assert {(d["table"], d["id"]) for d in first["skipped"]} == {("primer", "old"), ("primer", "style")}
    # 768-d vectors from a model of the store's name cannot be the store's 384-d ones: all embedded again
    assert first["vectors"]["reused"] == 0 and "other dimensions" in first["vectors"]["why"]
    again = _import(db_target, "shadowdb", source_pg)
    assert again["imported"] == 0 and again["startup"] == {"imported": 0, "already_there": 3}

    got = _stored(db_target)
    phone = got["memories:1"]
    assert (phone.title, phone.category, phone.tags, phone.scope) == ("Sarah phone", "fact", ["people"], "global")
    assert phone.metadata["shadowdb"] == {"category": "contacts", "record_type": "fact"}
    assert phone.created_at.isoformat() == "2025-01-10T08:00:00+00:00"
    assert phone.updated_at.isoformat() == "2025-01-11T08:00:00+00:00"
    assert got["memories:2"].category == "decision"
    research = got["memories:3"]
    assert (research.category, research.metadata["shadowdb"]["record_type"]) == ("other", "research")
    old = got["memories:4"]
    assert old.is_deleted and old.deleted_at.isoformat() == "2025-04-01T08:00:00+00:00"

    mem = Memory.open(db_target)
    entries = {e.key: e for e in mem.startup.list()}
    mem.close()
    assert (entries["soul"].priority, entries["soul"].reinforce, entries["soul"].scope) == (0, True, "global")
    assert entries["core-rules"].content == "Never share keys."
    assert (entries["style"].priority, entries["style"].reinforce) == (9, True)
    assert "old" not in entries


# -- openclaw-memory-pgvector -----------------------------------------------------------------------
def test_openclaw_pgvector_memories_arrive_and_its_conversations_are_accounted_for(db_target, source_pg):
    _pgvector(source_pg)
    Memory.open(db_target).close()
    dry = _import(db_target, "openclaw-memory-pgvector", source_pg, "--dry-run")
    assert dry["files"]["imported"] == 3 and not _stored(db_target)
    with Memory.open(db_target) as mem:
        assert not mem._store.files.find(None, limit=1, offset=0)  # a dry run writes no file
    first = _import(db_target, "openclaw-memory-pgvector", source_pg, "--vectors-from", "hashed-word-trigrams")
    assert first["imported"] == 3 and first["vectors"]["reused"] == 2
    # the conversation (a request, its reasoning and response) is `default`'s, so no one's until --user names it
    assert {d["table"]: d.get("rows") for d in first["skipped"]} == {"requests": 3, "files": None}  # files: the one without text
    assert first["files"] == {"imported": 3, "already_there": 0, "chunks": 4, "vectors_reused": 2}
    again = _import(db_target, "openclaw-memory-pgvector", source_pg)
    assert again["imported"] == 0 and again["files"] == {"imported": 0, "already_there": 3, "chunks": 0, "vectors_reused": 0}
    _check_pgvector_files(db_target)

    got = _stored(db_target)
    pref, dec, expired = got[f"memories:{PREF}"], got[f"memories:{DEC}"], got[f"memories:{EXPIRED}"]
    assert (pref.user_id, pref.scope, pref.category, pref.session_id) == (None, "global", "preference", "s1")
    assert pref.metadata["pgvector"] == {"metadata": {"trigger": "prefer"}, "source_type": "conversation",
                                         "source_id": "req-1", "user_id": "default"}
    assert (pref.importance, pref.source_type) == (pytest.approx(0.9), "openclaw-memory-pgvector")
    assert (dec.user_id, dec.scope, dec.category, dec.confidence) == ("42", "user:42", "decision", pytest.approx(0.8))
    assert dec.updated_at.isoformat() == "2025-05-03T10:00:00+00:00"
    assert expired.expires_at.isoformat() == "2025-05-05T00:00:00+00:00"
    vectors = _vectors(db_target, [pref.id])
    assert _is_vector_of(vectors[pref.id], "quartz lantern")


def _check_pgvector_files(db: str) -> None:
    """The plugin's files as the store's: path, type, size, time and owner, their chunks in order with the plugin's
    vectors where it had them (else embedded by the store), and found by a search."""
    with Memory.open(db) as mem:
        mem.upkeep.backfill()
        mem.upkeep.runtime.drain(60)
        files = {f.path: f for f in mem._store.files.find(None, limit=10, offset=0)}
        assert set(files) == {"/srv/files/runbook.md", "/tmp/a.txt", "/srv/files/cat.png"}
        big, small, image = files["/srv/files/runbook.md"], files["/tmp/a.txt"], files["/srv/files/cat.png"]
        assert (big.file_type, big.size_bytes, big.chunk_count, big.scope) == ("markdown", 20480, 2, "global")
        assert big.created_at.isoformat() == "2025-05-06T09:00:00+00:00"
        assert (small.file_type, small.chunk_count, image.file_type, image.scope) == ("text", 1, "text", "user:42")
        rows = mem._store.run("SELECT id, content, source_id, metadata FROM memories WHERE kind = 'chunk' ORDER BY content")
        chunks = {r[1]: (str(r[2]), json.loads(r[3]) if isinstance(r[3], str) else r[3]) for r in rows}
        assert chunks["The runbook for the orchid deployment pipeline"] == (big.id, {"path": big.path, "chunk": 1})
        assert chunks["Restart the ingest worker with systemctl restart ingest"] == (big.id, {"path": big.path, "chunk": 2})
        assert chunks["Pinecone invoice number 7731"][0] == small.id
        ids = {r[1]: str(r[0]) for r in rows}
        vectors = _vectors(db, list(ids.values()))
        assert _is_vector_of(vectors[ids["The runbook for the orchid deployment pipeline"]], "orchid deployment pipeline")
        assert _is_vector_of(vectors[ids["Pinecone invoice number 7731"]], "pinecone invoice")  # the file's own vector
        restart = ids["Restart the ingest worker with systemctl restart ingest"]
        assert _is_vector_of(vectors[restart], "Restart the ingest worker with systemctl restart ingest")  # embedded here
        hits = mem.search("restart the ingest worker", sources=["chunk"], limit=3)
        assert hits and hits[0].id == restart and hits[0].origin["file_id"] == big.id


# -- bad sources ------------------------------------------------------------------------------------
def test_a_wrong_source_fails_clearly_and_writes_nothing(db_path, source_pg, tmp_path):
    _shadowdb(source_pg)
    Memory.open(db_path).close()
    db = str(db_path)
    assert "is not a mem0 database: it has no mem0 table" in _import(db, "mem0", source_pg, code=1)
    assert "is not a openclaw-memory-pgvector database: it has a memories table without" in \
        _import(db, "openclaw-memory-pgvector", source_pg, code=1)
    assert "give its URL" in _import(db, "shadowdb", str(tmp_path / "shadow.db"), code=1)
    unreachable = source_pg.rsplit("/", 1)[0] + "/no_such_database"
    assert "cannot read" in _import(db, "shadowdb", unreachable, code=1)
    assert "history database" in _import(db, "mem0", source_pg, "--history", str(tmp_path / "nope.db"), code=1)
    unknown = CliRunner().invoke(cli, ["--db", db, "import", "--from", "chroma", source_pg])
    assert unknown.exit_code == 2 and "chroma" in unknown.output
    assert not _stored(db)


# -- nova-memory ------------------------------------------------------------------------------------
def test_nova_memory_facts_events_and_lessons_arrive(db_target, source_pg):
    _nova(source_pg)
    Memory.open(db_target).close()
    first = _import(db_target, "nova-memory", source_pg, "--vectors-from", "hashed-word-trigrams")
    assert first["imported"] == 5 and first["vectors"]["reused"] == 0
    assert "other dimensions" in first["vectors"]["why"]  # 1536-d, the store's are 384-d
    assert {(d["table"], d["rows"]) for d in first["skipped"]} == {("agent_chat", 1), ("memory_embeddings", 1)}
    assert _import(db_target, "nova-memory", source_pg)["imported"] == 0

    got = _stored(db_target)
    dana = got["entity_facts:1"]
    assert (dana.content, dana.category, dana.confidence) == ("Dana (person) - favorite_color: green", "person",
                                                              pytest.approx(0.9))
    assert dana.metadata["nova"] == {"entity": "Dana", "entity_type": "person", "key": "favorite_color",
                                     "value": "green"}
    assert got["entity_facts:2"].category == "entity"
    launch = got["events:1"]
    # the text nova-memory embedded for the row, so its vector fits the memory
    assert launch.content == "On 2025-07-04: Launch party (participants: Dana, Sam)" and launch.category == "experience"
    assert launch.valid_from.isoformat() == "2025-07-04T00:00:00+00:00"
    assert got["events:2"].content == "On 2025-08-01: Quarterly review"
    lesson = got["lessons:1"]
    assert lesson.content == ("Lesson (confidence: 0.8): Confirm time zones before scheduling "
                              "Context: missed call with Sam")
    assert lesson.tags == ["lesson"] and lesson.scope == "global"


# -- memory-lancedb-pro -----------------------------------------------------------------------------
def test_memory_lancedb_pro_table_arrives_with_scopes_and_chains(db_target, tmp_path):
    folder = tmp_path / "lancedb-pro"
    lancedb_pro(folder, HASH.dimensions)
    Memory.open(db_target).close()
    first = _import(db_target, "memory-lancedb-pro", str(folder), "--vectors-from", STORE_MODEL)
    assert first["imported"] == 6 and first["vectors"]["reused"] == 6
    assert [(d["id"], d["field"]) for d in first["skipped"]] == [("a5", "metadata")]
    assert _import(db_target, "memory-lancedb-pro", str(folder))["imported"] == 0

    got = _stored(db_target)
    tabs = got["memories:a1"]
    assert (tabs.scope, tabs.agent_id, tabs.category, tabs.importance) == ("agent:coder", "coder", "preference",
                                                                           pytest.approx(0.9))
    assert tabs.created_at.isoformat() == "2025-01-01T10:00:00+00:00"
    monday, tuesday = got["memories:a2"], got["memories:a3"]
    assert monday.superseded_by == tuesday.id and tuesday.supersedes == monday.id
    assert monday.valid_to == tuesday.valid_from and tuesday.scope == "project:atlas"
    assert monday.metadata["lancedb"] == {"l0_abstract": "sync day"}
    reflection = got["memories:a4"]
    assert (reflection.scope, reflection.tags, reflection.category) == ("agent:coder", ["reflection"], "other")
    assert reflection.metadata["lancedb"]["category"] == "cases"
    bob = got["memories:a5"]
    assert (bob.scope, bob.user_id, bob.metadata["lancedb"]) == ("user:bob", "bob", {"text": "not json"})
    assert got["memories:a6"].scope == "global"
    assert _is_vector_of(_vectors(db_target, [tabs.id])[tabs.id], "zebra xylophone quartet")


def test_a_lancedb_folder_of_another_dimension_is_embedded_again_and_a_wrong_one_fails(db_path, tmp_path):
    folder = tmp_path / "lancedb-pro"
    lancedb_pro(folder, 1024)
    summary = _import(str(db_path), "memory-lancedb-pro", str(folder), "--vectors-from", STORE_MODEL)
    assert summary["imported"] == 6 and summary["vectors"]["reused"] == 0
    assert "not a folder" in _import(str(db_path), "memory-lancedb-pro", str(tmp_path / "nope"), code=1)
    (tmp_path / "empty").mkdir()
    assert "has no memories table" in _import(str(db_path), "memory-lancedb-pro", str(tmp_path / "empty"), code=1)
