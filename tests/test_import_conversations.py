"""Other systems' conversations imported into the conversation record, never as plain memories:
memento-local's conversations and messages (each conversation a segment) with its facts' occurrences
quoting them and its Markdown journal; openclaw-memory-pgvector's requests, reasoning and responses;
nova-memory's agent chats; mem0's last messages, and its default store, a Qdrant folder in local mode;
and ShadowDB's SQLite backend. Each source is built here from its documented schema with awkward rows, checked row by row, imported
twice (nothing the second time), and killed half-way then run again (nothing twice)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import psycopg

from clawrecall import Memory
from clawrecall.importers.data import stable_id

from test_import_systems import (  # noqa: F401  (source_pg is a fixture)
    HASH, MEM0_HISTORY, NOVA, STORE_MODEL, _import, _is_vector_of, _pgvector_schema, _stored, _vec, _vectors,
    source_pg,
)

T = 1_767_225_600_000  # 2026-01-01 in JavaScript milliseconds, as memento-local stores times
MIN = 60_000
DAY = 86_400_000
# memento-local's tables, exactly as its document gives them
MEMENTO = """
CREATE TABLE conversations (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_key TEXT NOT NULL, channel TEXT,
  started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL, turn_count INTEGER NOT NULL, raw_text TEXT NOT NULL,
  metadata TEXT);
CREATE TABLE messages (id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations(id),
  role TEXT NOT NULL, content TEXT NOT NULL, timestamp INTEGER NOT NULL, message_id TEXT, metadata TEXT);
CREATE TABLE facts (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, category TEXT NOT NULL, content TEXT NOT NULL,
  summary TEXT, visibility TEXT NOT NULL DEFAULT 'shared', confidence REAL DEFAULT 1.0, first_seen_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL, occurrence_count INTEGER DEFAULT 1, embedding TEXT, supersedes TEXT, metadata TEXT);
CREATE TABLE fact_occurrences (id TEXT PRIMARY KEY, fact_id TEXT NOT NULL REFERENCES facts(id),
  conversation_id TEXT NOT NULL REFERENCES conversations(id), timestamp INTEGER NOT NULL, context_snippet TEXT,
  sentiment TEXT);
"""
CONVERSATIONS = [
    # two segments of one telegram session of main's, a day apart; one of coder's; one with no messages rows
    ("c1", "main", "telegram:42", "telegram", T, T + MIN, 2, "raw", None),
    ("c2", "main", "telegram:42", "telegram", T + DAY, T + DAY + MIN, 1, "raw", None),
    ("c3", "coder", "cli", None, T + 2 * DAY, T + 2 * DAY + MIN, 1, "raw", None),
    ("c4", "main", "telegram:42", "telegram", T + 3 * DAY, T + 3 * DAY, 0, "only raw text", None),
]
MESSAGES = [
    ("m1", "c1", "user", "My FTP is 250W", T, "tg-1", None),
    ("m2", "c1", "assistant", "Noted: 250W.", T + 5_000, None, None),
    ("m3", "c1", "user", "And my bank PIN is 4821", T + 30_000, None, None),
    ("m4", "c2", "user", "Actually my FTP is 262W now", T + DAY, None, None),
    ("m5", "c2", "assistant", "Updated to 262W.", T + DAY + 4_000, None, None),
    ("m6", "c3", "user", "Use pnpm workspaces here", T + 2 * DAY, None, None),
    ("m7", "gone", "user", "a message of a conversation that is not there", T, None, None),
    ("m8", "c3", "narrator", "an unknown role", T + 2 * DAY + 1_000, None, None),
    ("m9", "c3", "assistant", "bad \x00 byte", T + 2 * DAY + 2_000, None, None),
]
FACTS = [
    ("f1", "main", "preference", "User's FTP is 250W", None, "shared", 0.9, T, T, 1, None, None, None),
    ("f2", "main", "correction", "User's FTP is 262W", None, "shared", 1.0, T + DAY, T + DAY, 1, None, "f1", None),
    ("f3", "main", "person", "User's bank PIN is 4821", None, "secret", 1.0, T, T, 1, None, None, None),
    ("f4", "coder", "technical", "The repo uses pnpm workspaces", None, "private", 0.8, T + 2 * DAY, T + 2 * DAY, 1,
     None, None, None),
]
OCCURRENCES = [
    ("o1", "f1", "c1", T, "My FTP is 250W", "neutral"),
    ("o2", "f2", "c2", T + DAY, "Actually my FTP is 262W now", "correction"),
    ("o3", "f3", "c1", T + 30_000, "And my bank PIN is 4821", None),
    ("o4", "f4", "c3", T + 2 * DAY, "Use pnpm workspaces here", "excited"),  # none of ours: kept without one
    ("o5", "gone", "c1", T, "of a fact not there", "neutral"),
]
JOURNAL = {
    "memory/2026-01-03.md": "# Jan 3\n\n- Rode 90 minutes at endurance pace.\n- Ordered a new chain.\n",
    "MEMORY.md": "## Bike\n\nThe road bike is a 2019 Canyon Endurace.\n",
    "memory/conversations/2026-01-01-00-00-ftp.jsonl": '{"not": "markdown"}\n',
}


def _memento(path: Path, workspace: Path | None = None) -> Path:
    db = sqlite3.connect(path)
    db.executescript(MEMENTO)
    for table, rows in (("conversations", CONVERSATIONS), ("messages", MESSAGES), ("facts", FACTS),
                        ("fact_occurrences", OCCURRENCES)):
        db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    db.commit()
    db.close()
    for name, text in JOURNAL.items() if workspace else ():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    return path


def _record(db: str) -> tuple[list, list, list]:
    """The record as stored: messages (with their text), segments, occurrences."""
    mem = Memory.open(db)
    s = mem._store
    messages = list(s.messages.of([str(r[0]) for r in s.run("SELECT id FROM messages")]).values())
    segments = s.segments.find(None, None, limit=1000, offset=0)
    occurrences = [o for mid in {r[0] for r in s.run("SELECT memory_id FROM fact_occurrences")}
                   for o in s.occurrences.of(str(mid))]
    mem.close()
    return messages, segments, occurrences


def test_memento_conversations_occurrences_and_journal_arrive_once(db_target, tmp_path):
    workspace = tmp_path / "workspace"
    source = _memento(tmp_path / "memento.db", workspace)
    Memory.open(db_target).close()
    dry = _import(db_target, "memento-local", str(source), "--markdown", str(workspace), "--dry-run")
    assert dry["conversations"] == {"conversations": 3, "messages": 6, "already_there": 0, "vectors_reused": 0}
    assert dry["occurrences"] == {"imported": 4, "already_there": 0} and not _stored(db_target)
    first = _import(db_target, "memento-local", str(source), "--markdown", str(workspace))
    assert first["conversations"] == {"conversations": 3, "messages": 6, "already_there": 0, "vectors_reused": 0}
    assert first["occurrences"] == {"imported": 4, "already_there": 0}
    assert first["imported"] == 4 + 3  # the facts, and the journal's three items
    assert {(d["table"], d["id"]) for d in first["skipped"]} >= {
        ("messages", "m7"), ("messages", "m8"), ("messages", "m9"), ("conversations", "c4"),
        ("fact_occurrences", "o4"), ("fact_occurrences", "o5")}
    assert {"conversations", "messages", "fact_occurrences", "memory/*.md (--markdown)"} <= set(first["mapped"])
    dry_again = _import(db_target, "memento-local", str(source), "--markdown", str(workspace), "--dry-run")
    assert dry_again["conversations"] == {"conversations": 3, "messages": 0, "already_there": 6, "vectors_reused": 0}
    assert dry_again["occurrences"] == {"imported": 0, "already_there": 4}
    again = _import(db_target, "memento-local", str(source), "--markdown", str(workspace))
    assert again["imported"] == 0 and again["already_there"] == 7
    assert again["conversations"] == {"conversations": 3, "messages": 0, "already_there": 6, "vectors_reused": 0}
    assert again["occurrences"] == {"imported": 0, "already_there": 4}

    messages, segments, occurrences = _record(db_target)
    by_text = {m.content: m for m in messages}
    assert len(messages) == 6 and set(by_text) == {m[3] for m in MESSAGES[:6]}  # never flattened into memories
    ftp = by_text["My FTP is 250W"]
    assert (ftp.scope, ftp.session_id, ftp.role, ftp.channel, ftp.agent_id) == (
        "agent:main", "telegram:42", "user", "telegram", "main")
    assert ftp.created_at.isoformat() == "2026-01-01T00:00:00+00:00"
    assert ftp.provider_id == "memento-local:messages:m1"
    assert by_text["Noted: 250W."].role == "assistant"
    assert by_text["Use pnpm workspaces here"].scope == "agent:coder"
    # each conversation one closed segment of its session, holding its own messages
    assert len(segments) == 3 and all(s.closed_at is not None for s in segments)
    segment_of = {m.content: m.segment_id for m in messages}
    assert segment_of["My FTP is 250W"] == segment_of["And my bank PIN is 4821"] != segment_of["Updated to 262W."]
    # occurrences quote the segment their conversation became, in their fact's scope
    by_fact = {o.memory_id: o for o in occurrences}
    assert len(occurrences) == 4
    first_ftp = by_fact[stable_id("memento-local", "facts", "f1")]
    assert (first_ftp.segment_id, first_ftp.session_id, first_ftp.scope) == (
        segment_of["My FTP is 250W"], "telegram:42", "agent:main")
    assert (first_ftp.snippet, first_ftp.sentiment) == ("My FTP is 250W", "neutral")
    assert first_ftp.at.isoformat() == "2026-01-01T00:00:00+00:00"
    assert by_fact[stable_id("memento-local", "facts", "f2")].segment_id == segment_of["Updated to 262W."]
    assert by_fact[stable_id("memento-local", "facts", "f2")].sentiment == "correction"
    assert by_fact[stable_id("memento-local", "facts", "f3")].segment_id == segment_of["My FTP is 250W"]
    pnpm = by_fact[stable_id("memento-local", "facts", "f4")]
    assert (pnpm.sentiment, pnpm.scope, pnpm.segment_id) == (None, "agent:coder", segment_of["Use pnpm workspaces here"])
    mem = Memory.open(db_target)
    assert [o.snippet for o in mem.insight.occurrences(stable_id("memento-local", "facts", "f1"))] == ["My FTP is 250W"]
    mem.close()

    # the journal: an item a memory in main's scope, dated by its daily note; the JSONL segments are not read
    got = _stored(db_target)
    journal = {r.content: r for r in got.values() if r.source_type == "openclaw-markdown"}
    assert set(journal) == {"Rode 90 minutes at endurance pace.", "Ordered a new chain.",
                            "The road bike is a 2019 Canyon Endurace."}
    ride = journal["Rode 90 minutes at endurance pace."]
    assert (ride.scope, ride.agent_id, ride.title) == ("agent:main", "main", "Jan 3")
    assert ride.created_at.isoformat().startswith("2026-01-03")
    assert journal["The road bike is a 2019 Canyon Endurace."].title == "Bike"


def test_a_memento_import_killed_anywhere_finishes_with_nothing_twice(tmp_path):
    source = _memento(tmp_path / "memento.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    helper = str(Path(__file__).with_name("kill_after.py"))

    def clawrecall(db: Path, kill_after: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, helper, str(kill_after), "--db", str(db), "import", "--from",
                               "memento-local", str(source), "--batch-size", "1", "--json"],
                              env=env, capture_output=True, text=True)

    Memory.open(tmp_path / "count.db").close()
    whole = clawrecall(tmp_path / "count.db", 0)
    assert whole.returncode == 0, whole.stderr
    statements = int(whole.stderr.strip().splitlines()[-1].rsplit(" ", 1)[1])
    expected = _record(str(tmp_path / "count.db"))
    for n, kill_after in enumerate((statements // 2, statements * 3 // 4, statements - 2)):
        db = tmp_path / f"m{n}.db"
        Memory.open(db).close()
        assert clawrecall(db, kill_after).returncode == -9
        done = _import(str(db), "memento-local", str(source))
        assert done["conversations"]["messages"] + done["conversations"]["already_there"] == 6
        messages, segments, occurrences = _record(str(db))
        assert sorted(m.content for m in messages) == sorted(m.content for m in expected[0])
        assert len(segments) == 3 and all(s.closed_at is not None for s in segments), kill_after
        assert sorted((o.memory_id, o.snippet) for o in occurrences) == sorted(
            (o.memory_id, o.snippet) for o in expected[2])
        assert {o.segment_id for o in occurrences} == {m.segment_id for m in messages}
        assert len(_stored(str(db))) == 4


# -- openclaw-memory-pgvector -------------------------------------------------------------------------
def _pgvector_chats(url: str) -> dict[str, str]:
    """Requests of user 42 (in session s1, with reasoning and a response) and of `default` (no session)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_pgvector_schema(HASH.dimensions))
        ids = {}
        for key, user, session, text, at in (
                ("r1", "42", "s1", "What's a good FTP test?", "2025-05-01T10:00:00Z"),
                ("r2", "42", "s1", "And how often?", "2025-05-01T10:01:00Z"),
                ("r3", "default", None, "hello", "2025-05-02T09:00:00Z")):
            ids[key] = conn.execute("INSERT INTO requests (user_id, session_id, message_text, created_at) "
                                    "VALUES (%s, %s, %s, %s) RETURNING id", (user, session, text, at)).fetchone()[0]
        conn.execute("INSERT INTO reasoning (request_id, reasoning_text, thinking_model, created_at) VALUES "
                     "(%s, 'They want a protocol.', 'think-1', '2025-05-01T10:00:02Z')", (ids["r1"],))
        conn.execute("INSERT INTO responses (request_id, response_text, model_used, input_tokens, output_tokens, "
                     "feedback, summary, created_at) VALUES (%s, 'A 20-minute test.', 'qwen2.5:7b', 812, 9, 1, 's', "
                     "'2025-05-01T10:00:05Z'), (%s, 'Every six weeks.', NULL, NULL, NULL, NULL, NULL, "
                     "'2025-05-01T10:01:04Z'), (%s, 'hi', NULL, NULL, NULL, NULL, NULL, '2025-05-02T09:00:01Z'), "
                     "(%s, '   ', NULL, NULL, NULL, NULL, NULL, '2025-05-01T10:01:05Z')",  # nothing said: not recorded
                     (ids["r1"], ids["r2"], ids["r3"], ids["r2"]))
    return {k: str(v) for k, v in ids.items()}


def test_openclaw_pgvector_requests_reasoning_and_responses_become_the_record(db_target, source_pg):
    _pgvector_chats(source_pg)
    Memory.open(db_target).close()
    first = _import(db_target, "openclaw-memory-pgvector", source_pg)
    # user 42's conversation is 42's; `default`'s has no owner until the import names one
    assert first["conversations"] == {"conversations": 1, "messages": 5, "already_there": 0, "vectors_reused": 0}
    assert [(d["table"], d["rows"]) for d in first["skipped"]] == [("requests", 2)]
    messages, segments, _ = _record(db_target)
    ordered = sorted(messages, key=lambda m: (m.created_at, m.ordinal or 0))
    assert [(m.role, m.content) for m in ordered] == [
        ("user", "What's a good FTP test?"), ("reasoning", "They want a protocol."),
        ("assistant", "A 20-minute test."), ("user", "And how often?"), ("assistant", "Every six weeks.")]
    answer = ordered[2]
    assert (answer.scope, answer.session_id, answer.model, answer.input_tokens, answer.output_tokens) == (
        "user:42", "s1", "qwen2.5:7b", 812, 9)
    assert ordered[1].model == "think-1" and answer.created_at.isoformat() == "2025-05-01T10:00:05+00:00"
    assert len(segments) == 1 and segments[0].turn_count == 2

    # as alice: the `default` conversation is hers; 42's is not hers to import
    mine = _import(db_target, "openclaw-memory-pgvector", source_pg, "--user", "alice")
    assert mine["conversations"] == {"conversations": 1, "messages": 2, "already_there": 0, "vectors_reused": 0}
    assert any(d["table"] == "requests" and "another's conversation" in d["reason"] for d in mine["skipped"])
    messages, _, _ = _record(db_target)
    hers = sorted((m for m in messages if m.scope == "user:alice"), key=lambda m: m.created_at)
    assert [(m.role, m.content, m.session_id) for m in hers] == [
        ("user", "hello", "openclaw-memory-pgvector"), ("assistant", "hi", "openclaw-memory-pgvector")]
    again = _import(db_target, "openclaw-memory-pgvector", source_pg)
    assert again["conversations"] == {"conversations": 1, "messages": 0, "already_there": 5, "vectors_reused": 0}
    assert len(_record(db_target)[0]) == 7 and not _stored(db_target)  # messages, no memories


def test_openclaw_pgvector_message_vectors_of_the_store_model_are_kept(db_target, source_pg, tmp_path):
    """Each message's `embedding`, when --vectors-from names the store's model, is the message's vector in the
    record (each here is of other words than its message, so a vector made again would differ); a message
    the model's window cannot hold whole is embedded again, as windows. No model named: all embedded."""
    ids = _pgvector_chats(source_pg)
    long = " ".join(f"lap{n} at threshold" for n in range(1500))
    with psycopg.connect(source_pg, autocommit=True) as conn:
        conn.execute("UPDATE requests SET embedding = %s WHERE id = %s", (_vec("zebra xylophone quartet"), ids["r1"]))
        conn.execute("UPDATE reasoning SET embedding = %s", (_vec("amber violin harbour"),))
        conn.execute("UPDATE responses SET embedding = %s WHERE response_text = 'A 20-minute test.'",
                     (_vec("copper meadow lantern"),))
        conn.execute("INSERT INTO responses (request_id, response_text, embedding, created_at) VALUES "
                     "(%s, %s, %s, '2025-05-01T10:01:06Z')", (ids["r2"], long, _vec("granite tulip")))
    Memory.open(db_target).close()
    first = _import(db_target, "openclaw-memory-pgvector", source_pg, "--vectors-from", "hashed-word-trigrams")
    assert first["conversations"] == {"conversations": 1, "messages": 6, "already_there": 0, "vectors_reused": 3}
    messages = {m.content: m.id for m in _record(db_target)[0]}
    vectors = _vectors(db_target, [messages["What's a good FTP test?"], messages["They want a protocol."],
                                   messages["A 20-minute test."]])
    assert _is_vector_of(vectors[messages["What's a good FTP test?"]], "zebra xylophone quartet")
    assert _is_vector_of(vectors[messages["They want a protocol."]], "amber violin harbour")
    assert _is_vector_of(vectors[messages["A 20-minute test."]], "copper meadow lantern")
    with Memory.open(db_target) as mem:
        mem.upkeep.backfill()
        windows = mem._store.run("SELECT count(*) FROM memories WHERE kind = 'window' AND source_id = "
                                 f"{mem._store.dialect.p}", (messages[long],))[0][0]
    assert windows > 1 and not _is_vector_of(_vectors(db_target, [messages[long]])[messages[long]], "granite tulip")
    again = _import(db_target, "openclaw-memory-pgvector", source_pg, "--vectors-from", "hashed-word-trigrams")
    assert again["conversations"] == {"conversations": 1, "messages": 0, "already_there": 6, "vectors_reused": 0}

    other = str(tmp_path / "other.db")
    Memory.open(other).close()
    assert _import(other, "openclaw-memory-pgvector", source_pg)["conversations"]["vectors_reused"] == 0
    with Memory.open(other) as mem:
        mem.upkeep.backfill()
    [asked] = [m.id for m in _record(other)[0] if m.content == "What's a good FTP test?"]
    assert _is_vector_of(_vectors(other, [asked])[asked], "What's a good FTP test?")


# -- nova-memory ------------------------------------------------------------------------------------
def test_nova_agent_chats_become_a_conversation_per_channel(db_target, source_pg):
    with psycopg.connect(source_pg, autocommit=True) as conn:
        conn.execute(NOVA)
        conn.execute("INSERT INTO agent_chat (sender, channel, message, created_at) VALUES "
                     "('dana', 'general', 'Who has the launch checklist?', '2025-07-01T09:00:00'), "
                     "('nova', 'general', 'I do: it is in the shared drive.', '2025-07-01T09:00:30'), "
                     "('sam', 'ops', 'Deploy at 5pm.', '2025-07-02T16:00:00')")
    Memory.open(db_target).close()
    unowned = _import(db_target, "nova-memory", source_pg)
    assert unowned["conversations"]["conversations"] == 0
    assert sorted((d["table"], d["rows"]) for d in unowned["skipped"] if d["table"] == "agent_chat") == [
        ("agent_chat", 1), ("agent_chat", 2)]
    first = _import(db_target, "nova-memory", source_pg, "--agent", "nova")
    assert first["conversations"] == {"conversations": 2, "messages": 3, "already_there": 0, "vectors_reused": 0}
    messages, segments, _ = _record(db_target)
    said = {m.content: m for m in messages}
    assert set(said) == {"dana: Who has the launch checklist?", "nova: I do: it is in the shared drive.",
                         "sam: Deploy at 5pm."}
    checklist = said["dana: Who has the launch checklist?"]
    assert (checklist.role, checklist.scope, checklist.session_id, checklist.channel) == (
        "user", "agent:nova", "general", "general")
    assert said["nova: I do: it is in the shared drive."].role == "assistant"  # the importing agent's own words
    assert checklist.created_at.isoformat() == "2025-07-01T09:00:00+00:00"
    assert len(segments) == 2
    again = _import(db_target, "nova-memory", source_pg, "--agent", "nova")
    assert again["conversations"] == {"conversations": 2, "messages": 0, "already_there": 3, "vectors_reused": 0}


# -- mem0: its default store (Qdrant, local mode) and its messages -------------------------------------
LISBON, PLANNER, SMALL, EMPTY = (str(uuid.UUID(int=i)) for i in range(21, 25))


def _qdrant(folder: Path) -> None:
    """A Qdrant folder as mem0 leaves it with its default vector store (local mode, on_disk): its collection,
    one of another model's size, and mem0's bookkeeping collection."""
    from qdrant_client import QdrantClient
    from qdrant_client.models import Distance, PointStruct, VectorParams

    client = QdrantClient(path=str(folder))
    client.create_collection("mem0", vectors_config=VectorParams(size=HASH.dimensions, distance=Distance.COSINE))
    client.create_collection("mem0_small", vectors_config=VectorParams(size=4, distance=Distance.COSINE))
    client.create_collection("mem0migrations", vectors_config=VectorParams(size=128, distance=Distance.COSINE))

    def vec(text: str) -> list[float]:
        return [float(x) for x in HASH.embed([text], kind="passage")[0]]

    client.upsert("mem0", [
        PointStruct(id=LISBON, vector=vec("Alice lives in Lisbon"), payload={
            "data": "Alice lives in Lisbon", "hash": "h1", "created_at": "2025-03-01T10:00:00-08:00",
            "updated_at": "2025-06-01T09:00:00+00:00", "user_id": "alice"}),
        PointStruct(id=PLANNER, vector=vec("quartz lantern"), payload={
            "data": "Prefers aisle seats on long flights", "created_at": "2025-04-02T08:00:00+00:00",
            "user_id": "alice", "agent_id": "planner", "run_id": "trip-7", "categories": ["travel"]}),
        PointStruct(id=EMPTY, vector=vec("nothing"), payload={"hash": "h3", "user_id": "alice"}),
    ])
    client.upsert("mem0_small", [PointStruct(id=SMALL, vector=[0.1, 0.2, 0.3, 0.4], payload={
        "data": "Standup is at 9:30", "created_at": "2025-05-06T09:00:00+00:00", "user_id": "bob"})])
    client.upsert("mem0migrations", [PointStruct(id=str(uuid.UUID(int=99)), vector=[0.0] * 127 + [1.0],
                                                 payload={"user_id": "telemetry-id"})])
    client.close()


def _mem0_history(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(MEM0_HISTORY)
    db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("h1", LISBON, None, "Alice lives in Porto", "ADD", "2025-03-01T10:00:00-08:00", None, 0, None, None),
        ("h2", LISBON, "Alice lives in Porto", "Alice lives in Lisbon", "UPDATE", "2025-03-01T10:00:00-08:00",
         "2025-06-01T09:00:00+00:00", 0, None, None),
    ])
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?)", [
        ("x1", "run_id=trip-7&user_id=alice", "user", "I always take the aisle.", None, "2025-04-02T08:00:00+00:00"),
        ("x2", "run_id=trip-7&user_id=alice", "assistant", "Aisle it is.", None, "2025-04-02T08:00:00+00:00"),
        ("x3", "agent_id=coder", "user", "We use pnpm.", None, "2025-05-05T12:00:00+00:00"),
        ("x4", "user_id=a%26b", "user", "An id with an ampersand.", "ab", "2025-05-06T12:00:00+00:00"),
        ("x5", "user_id=alice", "narrator", "An unknown role.", None, "2025-05-06T12:00:00+00:00"),
    ])
    db.commit()
    db.close()


def test_mem0_qdrant_folder_and_its_messages_arrive(db_target, tmp_path):
    folder, history = tmp_path / "qdrant", tmp_path / "history.db"
    _qdrant(folder)
    _mem0_history(history)
    Memory.open(db_target).close()
    first = _import(db_target, "mem0", str(folder), "--history", str(history), "--vectors-from", STORE_MODEL)
    # Lisbon, its earlier text, the planner's; bob's of another collection (another model's size: embedded)
    assert first["imported"] == 4 and first["vectors"]["reused"] == 2, first
    assert {(d["table"], d["id"]) for d in first["skipped"]} == {
        ("mem0", EMPTY), ("mem0migrations", None), ("messages", "x5")}
    assert first["conversations"] == {"conversations": 3, "messages": 4, "already_there": 0, "vectors_reused": 0}
    again = _import(db_target, "mem0", str(folder), "--history", str(history), "--vectors-from", STORE_MODEL)
    assert (again["imported"], again["already_there"]) == (0, 4)
    assert again["conversations"] == {"conversations": 3, "messages": 0, "already_there": 4, "vectors_reused": 0}

    got = _stored(db_target)
    lisbon, porto, planner = got[f"mem0:{LISBON}"], got["history:h1"], got[f"mem0:{PLANNER}"]
    assert (lisbon.content, lisbon.scope, lisbon.supersedes) == ("Alice lives in Lisbon", "user:alice", porto.id)
    assert (planner.agent_id, planner.session_id, planner.tags) == ("planner", "trip-7", ["travel"])
    assert got[f"mem0_small:{SMALL}"].scope == "user:bob"
    vectors = _vectors(db_target, [lisbon.id, planner.id])
    assert _is_vector_of(vectors[lisbon.id], "Alice lives in Lisbon")
    assert _is_vector_of(vectors[planner.id], "quartz lantern")  # reused as stored, not embedded again

    messages, _, _ = _record(db_target)
    said = {m.content: m for m in messages}
    assert (said["I always take the aisle."].scope, said["I always take the aisle."].session_id) == (
        "user:alice", "trip-7")
    assert said["Aisle it is."].role == "assistant"
    assert (said["We use pnpm."].scope, said["We use pnpm."].session_id) == ("agent:coder", "mem0")
    mem = Memory.open(db_target)
    assert [m.content for m in mem.conversations.show("mem0", user_id="a&b")] == ["An id with an ampersand."]
    mem.close()


def test_a_qdrant_folder_held_or_empty_fails_clearly(db_path, tmp_path):
    from qdrant_client import QdrantClient

    Memory.open(db_path).close()
    empty = tmp_path / "empty"
    QdrantClient(path=str(empty)).close()
    assert "holds no collection" in _import(str(db_path), "mem0", str(empty), code=1)
    folder = tmp_path / "qdrant"
    _qdrant(folder)
    held = QdrantClient(path=str(folder))  # mem0 running: local mode locks its folder
    try:
        assert "cannot open the Qdrant folder" in _import(str(db_path), "mem0", str(folder), code=1)
    finally:
        held.close()
    assert "not 'nowhere'" in _import(str(db_path), "mem0", "nowhere", code=1)
    assert not _stored(str(db_path))



# -- ShadowDB's SQLite backend ----------------------------------------------------------------------
# the tables its SQLite backend creates (sqlite.ts; its vec0 vector table needs the sqlite-vec extension,
# which only that extension reads), and the superseded_by chain of the repository's schema-sqlite.sql
SHADOW_SQLITE = """
CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, content TEXT NOT NULL, title TEXT,
  category TEXT DEFAULT 'general', record_type TEXT DEFAULT 'fact', tags TEXT DEFAULT '[]',
  created_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), deleted_at TEXT,
  superseded_by INTEGER REFERENCES memories(id) ON DELETE SET NULL);
CREATE VIRTUAL TABLE memories_fts USING fts5(title, content, content=memories, content_rowid=id);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
END;
CREATE TABLE primer (key TEXT PRIMARY KEY, content TEXT NOT NULL, priority INTEGER DEFAULT 50,
  always INTEGER DEFAULT 0, enabled INTEGER DEFAULT 1,
  updated_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
INSERT INTO memories (id, content, title, category, record_type, tags, created_at, updated_at, deleted_at,
  superseded_by) VALUES
  (1, 'The office moved to Pier 9', 'Office', 'places', 'fact', '["office", "move"]', '2025-01-01T10:00:00.000Z',
   '2025-01-01T10:00:00.000Z', NULL, 2),
  (2, 'The office moved to Pier 17', 'Office', 'places', 'fact', '["office"]', '2025-03-01T10:00:00.000Z',
   '2025-03-01T10:00:00.000Z', NULL, NULL),
  (3, 'Never deploy on Fridays', NULL, 'rules', 'directive', '[]', '2025-02-01 09:00:00', '2025-02-01 09:00:00',
   '2025-04-01T00:00:00.000Z', NULL),
  (4, 'Replaced by a row that is gone', NULL, 'general', 'fact', 'ops, infra', '2025-02-02T00:00:00Z',
   '2025-02-02T00:00:00Z', NULL, 99);
INSERT INTO primer (key, content, priority, always, enabled) VALUES ('name', 'I am Shadow.', 1, 1, 1),
  ('style', 'Be brief.', 50, 0, 1), ('old', 'Retired.', 3, 0, 0);
"""


def test_shadowdb_sqlite_file_arrives_with_soft_deletes_chains_and_primer(db_target, tmp_path):
    source = tmp_path / "shadowdb.sqlite"
    db = sqlite3.connect(source)
    db.executescript(SHADOW_SQLITE)
    db.commit()
    db.close()
    Memory.open(db_target).close()
    first = _import(db_target, "shadowdb", str(source))
    assert first["imported"] == 4 and first["startup"] == {"imported": 2, "already_there": 0}
    assert {(d["table"], d["id"]) for d in first["skipped"]} == {("memories", "4"), ("primer", "old"),
                                                                   ("primer", "style")}
    assert _import(db_target, "shadowdb", str(source))["imported"] == 0

    got = _stored(db_target)
    pier9, pier17, rule, orphan = (got[f"memories:{i}"] for i in range(1, 5))
    assert (pier9.tags, pier9.title, pier9.superseded_by, pier17.supersedes) == (
        ["office", "move"], "Office", pier17.id, pier9.id)
    assert pier9.valid_to.isoformat() == "2025-03-01T10:00:00+00:00"
    assert (rule.category, rule.metadata["shadowdb"]) == ("other", {"category": "rules", "record_type": "directive"})
    assert rule.deleted_at.isoformat() == "2025-04-01T00:00:00+00:00"
    assert rule.created_at.isoformat() == "2025-02-01T09:00:00+00:00"
    assert (orphan.tags, orphan.supersedes, orphan.superseded_by) == (["ops", "infra"], None, None)
    mem = Memory.open(db_target)
    entries = {e.key: e for e in mem.startup.list()}
    mem.close()
    assert (entries["name"].content, entries["name"].priority, entries["name"].reinforce) == ("I am Shadow.", 1, True)
    assert entries["style"].priority == 9 and "old" not in entries


def _shadowdb_with_vec_table(path: Path, table_sql: str):
    """ShadowDB's SQLite file and its sqlite-vec table, made by the extension itself (through apsw, which loads
    extensions where Python's sqlite3 may not): the open connection."""
    import apsw
    import sqlite_vec

    db = sqlite3.connect(path)
    db.executescript(SHADOW_SQLITE)
    db.commit()
    db.close()
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(table_sql)
    return conn


def test_shadowdb_sqlite_vectors_are_read_from_its_sqlite_vec_table(db_path, tmp_path):
    source, dims = tmp_path / "shadowdb.sqlite", HASH.dimensions
    conn = _shadowdb_with_vec_table(source, f"CREATE VIRTUAL TABLE memories_vec USING vec0("
                                            f"embedding float[{dims}] distance_metric=cosine, chunk_size=8)")
    rng = np.random.default_rng(3)
    vectors = {i: rng.standard_normal(dims).astype(np.float32) for i in range(1, 13)}
    for i in range(12, 0, -1):  # 12 rows of other memories too: two chunks of 8, placed out of id order
        conn.execute("INSERT INTO memories_vec (rowid, embedding) VALUES (?, ?)", (i, vectors[i].tobytes()))
    conn.execute("DELETE FROM memories_vec WHERE rowid = 4")  # memory 4 has none: embedded
    vectors[2] = rng.standard_normal(dims).astype(np.float32)
    conn.execute("UPDATE memories_vec SET embedding = ? WHERE rowid = 2", (vectors[2].tobytes(),))
    assert conn.execute("SELECT count(*) FROM memories_vec").fetchall() == [(11,)]
    conn.close()
    Memory.open(db_path).close()
    done = _import(str(db_path), "shadowdb", str(source), "--vectors-from", STORE_MODEL)
    assert done["imported"] == 4 and done["vectors"]["reused"] == 3 and done["vectors"]["embedded"] == 1
    got = _stored(str(db_path))
    stored = _vectors(str(db_path), [got[f"memories:{i}"].id for i in (1, 2, 3, 4)])
    for i in (1, 2, 3):
        want = vectors[i] / np.linalg.norm(vectors[i])
        assert np.allclose(stored[got[f"memories:{i}"].id], want, atol=1e-6), i
    assert _is_vector_of(stored[got["memories:4"].id], "Replaced by a row that is gone")
    assert _import(str(tmp_path / "other.db"), "shadowdb", str(source))["vectors"]["reused"] == 0  # no model named


def test_a_sqlite_vec_table_of_another_kind_is_said_and_its_memories_embedded(db_path, tmp_path):
    source = tmp_path / "shadowdb.sqlite"
    conn = _shadowdb_with_vec_table(source, "CREATE VIRTUAL TABLE memories_vec USING vec0(embedding bit[8])")
    conn.execute("INSERT INTO memories_vec (rowid, embedding) VALUES (1, vec_bit(X'F0'))")
    conn.close()
    Memory.open(db_path).close()
    done = _import(str(db_path), "shadowdb", str(source), "--vectors-from", STORE_MODEL)
    assert done["imported"] == 4 and done["vectors"]["reused"] == 0
    assert {"table": "memories_vec", "id": None, "rows": 1, "reason": "not a sqlite-vec table of one float[N] column "
            "as this reader knows it: the memories are embedded again"} in done["skipped"]


def test_a_file_that_is_not_shadowdb_fails_clearly(db_path, tmp_path):
    Memory.open(db_path).close()
    source = _memento(tmp_path / "memento.db")
    assert "is not a ShadowDB database" in _import(str(db_path), "shadowdb", str(source), code=1)
    assert "--markdown goes with --from memento-local" in _import(str(db_path), "shadowdb", str(source), "--markdown",
                                                                  str(tmp_path), code=2)
    assert not _stored(str(db_path))
