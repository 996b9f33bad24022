"""Other systems' stores built as their documentation gives them, with realistic rows (the awkward ones
too): what tests/test_import_systems.py imports, and what docs/importing.md's samples are run on."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import psycopg
from psycopg.types.json import Json

from clawrecall.embeddings.hashing import HashEmbedder

HASH = HashEmbedder("hashed-word-trigrams")  # the tests' store embeds with it: its vectors are reusable there


def lancedb_pro(folder: Path, dims: int) -> None:
    """Its `memories` table as its store creates it (a JavaScript number is a float64 column)."""
    import lancedb
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), dims)),
                        ("category", pa.string()), ("scope", pa.string()), ("importance", pa.float64()),
                        ("timestamp", pa.float64()), ("metadata", pa.string())])

    def vec(text: str) -> list[float]:
        return [float(x) for x in HASH.embed([text], kind="passage")[0]] if dims == HASH.dimensions else [0.5] * dims

    rows = [
        ("a1", "Prefers tabs over spaces", vec("zebra xylophone quartet"), "preference", "agent:coder", 0.9,
         1_735_725_600_000, "{}"),
        ("a2", "Team sync is on Mondays", vec("Team sync is on Mondays"), "fact", "global", 0.7, 1_735_812_000_000,
         '{"l0_abstract": "sync day"}'),
        ("a3", "Team sync moved to Tuesdays", vec("Team sync moved to Tuesdays"), "fact", "project:atlas", 0.8,
         1_738_404_000_000, '{"supersedes": "a2"}'),
        ("a4", "Lost the thread when the build broke", vec("x"), "cases", "reflection:agent:coder", 0.5,
         1_738_490_400_000, "{}"),
        ("a5", "Bob is allergic to nuts", vec("Bob is allergic to nuts"), "entity", "user:bob", 0.7,
         1_738_576_800_000, "not json"),
        ("a6", "Old row from before scopes", vec("Old row"), "other", None, 0.7, 1_700_000_000_000, None),
    ]
    table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
    lancedb.connect(folder).create_table("memories", table)


def vec(text: str) -> str:
    """The store model's vector of `text`, as pgvector reads it."""
    return json.dumps([float(x) for x in HASH.embed([text], kind="passage")[0]])


# its pgvector store's table, exactly as mem0 creates it (one per collection), and its history database
MEM0_TABLE = "CREATE TABLE {name} (id UUID PRIMARY KEY, vector vector({dims}), payload JSONB)"
MEM0_HISTORY = """CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT,
  event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT);
CREATE TABLE messages (id TEXT PRIMARY KEY, session_scope TEXT, role TEXT, content TEXT, name TEXT, created_at DATETIME);"""
LISBON, PLANNER, CODER, SMALL, BOB = (str(uuid.UUID(int=i)) for i in range(1, 6))


def mem0(url: str, history_path: Path) -> None:
    def payload(data: str, created: str, updated: str | None = None, **more) -> Json:
        return Json({"data": data, "hash": "md5-" + data[:8], "created_at": created, "updated_at": updated or created,
                     "text_lemmatized": data.lower(), **more})

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(MEM0_TABLE.format(name="mem0", dims=HASH.dimensions))
        conn.execute("CREATE INDEX mem0_hnsw_idx ON mem0 USING hnsw (vector vector_cosine_ops)")
        conn.execute(MEM0_TABLE.format(name="mem0_small", dims=4))  # another collection, another model
        rows = [
            # updated once (the history has both texts); its stored vector is deliberately another text's
            (LISBON, vec("zebra xylophone quartet"), payload("Alice lives in Lisbon", "2025-03-01T10:00:00-08:00",
                                                             "2025-06-01T09:00:00+00:00", user_id="alice")),
            (PLANNER, None, payload("Prefers aisle seats on long flights", "2025-04-02T08:00:00+00:00",
                                    user_id="alice", agent_id="planner", run_id="trip-7", actor_id="alice", role="user",
                                    categories=["travel", "preferences"], source="chat")),
            (CODER, vec("The repo uses pnpm workspaces"), payload("The repo uses pnpm workspaces",
                                                                   "2025-05-05T12:00:00+00:00", agent_id="coder")),
        ]
        conn.cursor().executemany("INSERT INTO mem0 (id, vector, payload) VALUES (%s, %s, %s)", rows)
        conn.execute("INSERT INTO mem0_small VALUES (%s, %s, %s)",
                     (SMALL, "[0.1, 0.2, 0.3, 0.4]", payload("Standup is at 9:30", "2025-05-06T09:00:00+00:00",
                                                             user_id="bob")))
    db = sqlite3.connect(history_path)
    db.executescript(MEM0_HISTORY)
    db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("h1", LISBON, None, "Alice lives in Porto", "ADD", "2025-03-01T10:00:00-08:00", None, 0, None, None),
        ("h2", PLANNER, None, "Prefers aisle seats on long flights", "ADD", "2025-04-02T08:00:00+00:00", None, 0,
         None, None),
        ("h3", LISBON, "Alice lives in Porto", "Alice lives in Lisbon", "UPDATE", "2025-03-01T10:00:00-08:00",
         "2025-06-01T09:00:00+00:00", 0, None, None),
        ("h4", BOB, None, "Bob's birthday is on May 3", "ADD", "2025-02-01T00:00:00+00:00", None, 0, None, None),
        ("h5", BOB, "Bob's birthday is on May 3", None, "DELETE", None, None, 1, None, None),  # mem0 gives no time
    ])
    db.commit()
    db.close()


SHADOWDB = """
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE startup (key TEXT PRIMARY KEY, content TEXT NOT NULL, priority INTEGER DEFAULT 2,
  reinforce BOOLEAN DEFAULT FALSE, updated_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE primer (key TEXT PRIMARY KEY, content TEXT NOT NULL, priority INTEGER DEFAULT 2,
  always BOOLEAN DEFAULT FALSE, enabled BOOLEAN DEFAULT TRUE);
CREATE TABLE memories (
  id BIGSERIAL PRIMARY KEY, content TEXT NOT NULL, title TEXT, category TEXT DEFAULT 'general',
  record_type TEXT DEFAULT 'fact', tags TEXT[] DEFAULT '{}', embedding VECTOR(768),
  fts TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', coalesce(title, '') || ' ' || content)) STORED,
  created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW(), deleted_at TIMESTAMPTZ);
CREATE INDEX memories_fts ON memories USING gin (fts);
CREATE INDEX memories_trgm ON memories USING gin (content gin_trgm_ops);
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops);
"""


def shadowdb(url: str) -> None:
    v768 = json.dumps([0.01] * 768)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SHADOWDB)
        conn.cursor().executemany(
            "INSERT INTO memories (content, title, category, record_type, tags, embedding, created_at, updated_at, "
            "deleted_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", [
                ("Sarah's phone is +1 555 0100", "Sarah phone", "contacts", "fact", ["people"], v768,
                 "2025-01-10T08:00:00Z", "2025-01-11T08:00:00Z", None),
                ("We deploy with blue-green releases", None, "general", "decision", [], None,
                 "2025-02-01T08:00:00Z", "2025-02-01T08:00:00Z", None),
                ("Survey of vector databases", "DB survey", "research", "research", ["dbs", "survey"], v768,
                 "2025-03-01T08:00:00Z", "2025-03-01T08:00:00Z", None),
                ("The old office is on Main St", None, "general", "fact", [], v768,
                 "2024-12-01T08:00:00Z", "2025-01-05T08:00:00Z", "2025-04-01T08:00:00Z"),  # soft-deleted
            ])
        conn.execute("INSERT INTO startup (key, content, priority, reinforce) VALUES "
                     "('soul', 'You are Shadow, a terse assistant.', 0, true), ('core-rules', 'Never share keys.', 1, false)")
        conn.execute("INSERT INTO primer (key, content, priority, always, enabled) VALUES "
                     "('style', 'Answer in English.', 12, true, true), ('old', 'Obsolete.', 3, false, false)")


def pgvector_schema(dims: int) -> str:
    """The plugin's tables, as its documentation gives them (the vector size is the configured model's)."""
    v = f"vector({dims})"
    return f"""
CREATE TABLE memories (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), user_id TEXT NOT NULL, session_id TEXT,
  content TEXT NOT NULL, memory_type TEXT NOT NULL DEFAULT 'fact', embedding {v}, importance REAL DEFAULT 0.7,
  confidence REAL DEFAULT 1.0, metadata JSONB DEFAULT '{{}}', source_type TEXT, source_id TEXT,
  created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW(), expires_at TIMESTAMPTZ,
  CONSTRAINT valid_memory_type CHECK (memory_type IN ('preference', 'decision', 'fact', 'entity',
    'experience', 'session_summary', 'file_chunk', 'other')),
  CONSTRAINT valid_importance CHECK (importance >= 0 AND importance <= 1),
  CONSTRAINT valid_confidence CHECK (confidence >= 0 AND confidence <= 1));
CREATE TABLE requests (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), user_id TEXT NOT NULL, session_id TEXT,
  message_text TEXT NOT NULL, embedding {v}, has_files BOOLEAN DEFAULT FALSE, telegram_message_id BIGINT,
  telegram_chat_id BIGINT, created_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE responses (id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id UUID NOT NULL REFERENCES requests(id) ON DELETE CASCADE, response_text TEXT NOT NULL, embedding {v},
  summary TEXT, summary_embedding {v}, feedback SMALLINT, model_used TEXT, input_tokens INTEGER,
  output_tokens INTEGER, created_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE reasoning (id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id UUID NOT NULL REFERENCES requests(id) ON DELETE CASCADE, reasoning_text TEXT NOT NULL, embedding {v},
  thinking_model TEXT, thinking_tokens INTEGER, created_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE files (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), request_id UUID REFERENCES requests(id)
  ON DELETE SET NULL, user_id TEXT NOT NULL, file_type TEXT NOT NULL, original_name TEXT NOT NULL,
  storage_path TEXT NOT NULL, extracted_text TEXT, embedding {v}, chunk_count INTEGER DEFAULT 0, file_size INTEGER,
  mime_type TEXT, created_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE file_chunks (id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  file_id UUID NOT NULL REFERENCES files(id) ON DELETE CASCADE, chunk_index INTEGER NOT NULL,
  chunk_text TEXT NOT NULL, embedding {v}, created_at TIMESTAMPTZ DEFAULT NOW(), UNIQUE(file_id, chunk_index));
CREATE INDEX idx_memories_embedding ON memories USING hnsw (embedding vector_cosine_ops);
"""


PREF, DEC, EXPIRED, BIG_FILE, SMALL_FILE, IMAGE_FILE, EMPTY_FILE = (str(uuid.UUID(int=i)) for i in range(11, 18))


def openclaw_pgvector(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(pgvector_schema(HASH.dimensions))
        conn.cursor().executemany(
            "INSERT INTO memories (id, user_id, session_id, content, memory_type, embedding, importance, confidence, "
            "metadata, source_type, source_id, created_at, updated_at, expires_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", [
                (PREF, "default", "s1", "I prefer dark roast coffee", "preference", vec("quartz lantern"), 0.9, 1.0,
                 Json({"trigger": "prefer"}), "conversation", "req-1", "2025-05-01T10:00:00Z", "2025-05-01T10:00:00Z",
                 None),
                (DEC, "42", None, "We decided to use Postgres 16", "decision", None, 0.7, 0.8, Json({}), "manual", None,
                 "2025-05-02T10:00:00Z", "2025-05-03T10:00:00Z", None),
                (EXPIRED, "default", None, "Meeting room B is booked today", "other", vec("Meeting room B"), 0.5, 1.0,
                 Json({}), None, None, "2025-05-04T10:00:00Z", "2025-05-04T10:00:00Z", "2025-05-05T00:00:00Z"),
            ])
        request = conn.execute("INSERT INTO requests (user_id, message_text) VALUES ('default', 'hello') "
                               "RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO responses (request_id, response_text) VALUES (%s, 'hi')", (request,))
        conn.execute("INSERT INTO reasoning (request_id, reasoning_text) VALUES (%s, 'greet back')", (request,))
        # files: a large one cut in chunks (one with the plugin's vector, one without), a small one whose text is
        # its extracted_text, another user's image (its text: a description), and one with no text at all
        big = conn.execute("INSERT INTO files (id, user_id, file_type, original_name, storage_path, file_size, chunk_count, "
                           "created_at) VALUES (%s, 'default', 'markdown', 'runbook.md', '/srv/files/runbook.md', 20480, 2, "
                           "'2025-05-06T09:00:00Z') RETURNING id", (BIG_FILE,)).fetchone()[0]
        conn.cursor().executemany("INSERT INTO file_chunks (file_id, chunk_index, chunk_text, embedding) VALUES (%s, %s, %s, %s)", [
            (big, 1, "Restart the ingest worker with systemctl restart ingest", None),
            (big, 0, "The runbook for the orchid deployment pipeline", vec("orchid deployment pipeline")),
        ])
        conn.execute("INSERT INTO files (id, user_id, file_type, original_name, storage_path, extracted_text, embedding, "
                     "file_size, created_at) VALUES (%s, 'default', 'text', 'a.txt', '/tmp/a.txt', 'Pinecone invoice number 7731', "
                     "%s, 28, '2025-05-07T09:00:00Z')", (SMALL_FILE, vec("pinecone invoice")))
        conn.execute("INSERT INTO files (id, user_id, file_type, original_name, storage_path, extracted_text, file_size) "
                     "VALUES (%s, '42', 'image', 'cat.png', '/srv/files/cat.png', 'A grey cat asleep on a keyboard', 5000)",
                     (IMAGE_FILE,))
        conn.execute("INSERT INTO files (id, user_id, file_type, original_name, storage_path) VALUES "
                     "(%s, 'default', 'pdf', 'scan.pdf', '/srv/files/scan.pdf')", (EMPTY_FILE,))


# the tables as nova-memory's documentation uses them, its embedding table and chat trigger verbatim
NOVA = """
CREATE TABLE entities (id SERIAL PRIMARY KEY, name VARCHAR(255) NOT NULL, type VARCHAR(50) NOT NULL,
  created_at TIMESTAMP DEFAULT NOW());
CREATE TABLE entity_facts (id SERIAL PRIMARY KEY, entity_id INTEGER REFERENCES entities(id), key VARCHAR(255) NOT NULL,
  value TEXT NOT NULL, confidence DOUBLE PRECISION DEFAULT 1.0);
CREATE TABLE events (id SERIAL PRIMARY KEY, date DATE NOT NULL, event TEXT NOT NULL, participants TEXT[]);
CREATE TABLE lessons (id SERIAL PRIMARY KEY, lesson TEXT NOT NULL, context TEXT, confidence DOUBLE PRECISION);
CREATE TABLE agent_chat (id SERIAL PRIMARY KEY, sender TEXT, channel TEXT, message TEXT,
  created_at TIMESTAMP DEFAULT NOW());
CREATE TABLE memory_embeddings (
    id SERIAL PRIMARY KEY,
    source_type VARCHAR(50), -- 'entity_fact', 'event', 'agent_chat', 'lesson'
    source_id TEXT, -- ID in the source table
    content TEXT, -- The text that was embedded
    embedding VECTOR(1536), -- OpenAI embedding (1536 dimensions)
    metadata JSONB, -- Additional context (confidence, tags, etc.)
    created_at TIMESTAMP DEFAULT NOW(),
    updated_at TIMESTAMP DEFAULT NOW()
);
CREATE FUNCTION embed_chat_message() RETURNS TRIGGER AS $$
BEGIN
    INSERT INTO memory_embeddings (source_type, source_id, content)
    VALUES ('agent_chat', NEW.id::text, NEW.sender || ' in #' || NEW.channel || ': ' || NEW.message);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER embed_chat_message_trigger AFTER INSERT ON agent_chat
    FOR EACH ROW EXECUTE FUNCTION embed_chat_message();
"""


def nova(url: str) -> None:
    v1536 = json.dumps([0.02] * 1536)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(NOVA)
        conn.execute("INSERT INTO entities (name, type) VALUES ('Dana', 'person'), ('Acme', 'organization')")
        conn.execute("INSERT INTO entity_facts (entity_id, key, value, confidence) VALUES "
                     "(1, 'favorite_color', 'green', 0.9), (2, 'hq', 'Berlin', 1.0)")
        conn.execute("INSERT INTO events (date, event, participants) VALUES "
                     "('2025-07-04', 'Launch party', ARRAY['Dana', 'Sam']), ('2025-08-01', 'Quarterly review', NULL)")
        conn.execute("INSERT INTO lessons (lesson, context, confidence) VALUES "
                     "('Confirm time zones before scheduling', 'missed call with Sam', 0.8)")
        conn.execute("INSERT INTO agent_chat (sender, channel, message) VALUES ('dana', 'general', 'hi all')")
        # the embedding queue: two rows embedded, the others still waiting (NULL), and one whose row is gone
        conn.execute("INSERT INTO memory_embeddings (source_type, source_id, content, embedding) VALUES "
                     "('entity_fact', '1', 'Dana (person) - favorite_color: green', %s), "
                     "('event', '1', 'On 2025-07-04: Launch party (participants: Dana, Sam)', %s), "
                     "('lesson', '1', 'Lesson (confidence: 0.8): Confirm time zones before scheduling', NULL), "
                     "('entity_fact', '99', 'Gone (person) - x: y', NULL)", (v1536, v1536))
