"""memento-local's SQLite knowledge base imported row by row: scopes, supersede chains, visibility,
occurrence counts, master facts; a second import adds nothing; one killed half-way resumes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from clawrecall import Memory
from clawrecall.cli import cli
from clawrecall.importers.data import stable_id

T = 1_767_225_600_000  # 2026-01-01 in JavaScript milliseconds, as memento stores times
DAY = 86_400_000
SCHEMA = """
CREATE TABLE facts (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, category TEXT NOT NULL, content TEXT NOT NULL,
  summary TEXT, visibility TEXT NOT NULL DEFAULT 'shared', confidence REAL DEFAULT 1.0, first_seen_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL, occurrence_count INTEGER DEFAULT 1, embedding TEXT, supersedes TEXT, metadata TEXT);
CREATE TABLE master_facts (id TEXT PRIMARY KEY, source_agent_id TEXT NOT NULL, source_fact_id TEXT NOT NULL,
  category TEXT NOT NULL, content TEXT NOT NULL, summary TEXT, confidence REAL DEFAULT 1.0,
  first_seen_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL, occurrence_count INTEGER DEFAULT 1, embedding TEXT,
  metadata TEXT);
"""
FACTS = [
    ("f1", "main", "preference", "User's FTP is 250W", "FTP 250W", "shared", 0.9, T, T + DAY, 3, "[0.1, 0.2]", None),
    ("f2", "main", "correction", "User's FTP is 260W", "FTP 260W", "shared", 1.0, T + 5 * DAY, T + 6 * DAY, 1, None, "f1"),
    ("f3", "coder", "technical", "The repo uses pnpm workspaces", None, "private", 0.8, T + DAY, T + DAY, 1, None, None),
    ("f4", "main", "person", "User's bank PIN is 4821", None, "secret", 1.0, T + 2 * DAY, T + 2 * DAY, 1, None, None),
    ("f5", "main", "decision", "Ship on Fridays no more", None, "shared", 1.0, T + 3 * DAY, T + 3 * DAY, 2, None, "gone"),
]
MASTERS = [
    ("m1", "main", "f1", "preference", "User's FTP is 250W", None, 0.9, T, T + DAY, 3, None, None),
    ("m2", "old-agent", "x9", "fact", "The team standup is at 9:30", None, 1.0, T, T, 4, None, None),
]


def _memento(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.executemany(f"INSERT INTO facts VALUES ({', '.join('?' * 13)})", [(*f, None) for f in FACTS])
    db.executemany(f"INSERT INTO master_facts VALUES ({', '.join('?' * 12)})", MASTERS)
    db.commit()
    db.close()
    return path


def _import(db: str, source: Path, *extra: str) -> dict:
    result = CliRunner().invoke(cli, ["--db", db, "import", "--from", "memento-local", str(source), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _mid(table: str, source_id: str) -> str:
    return stable_id("memento-local", table, source_id)


def test_memento_facts_arrive_row_by_row_and_twice_adds_nothing(db_target, tmp_path):
    source = _memento(tmp_path / "memento.db")
    Memory.open(db_target).close()
    dry = _import(db_target, source, "--dry-run")
    assert dry["imported"] == 6 and dry["dry_run"]
    first = _import(db_target, source)
    assert first["imported"] == 6 and first["already_there"] == 0
    assert {(d["table"], d["id"]) for d in first["skipped"]} == {("facts", "f5"), ("master_facts", "m1")}
    assert "facts.supersedes" in first["mapped"]
    again = _import(db_target, source)
    assert again["imported"] == 0 and again["already_there"] == 6

    mem = Memory.open(db_target)
    got = {r.source_id: r for r in mem._store.memories.fetch([_mid(t, i) for t, i in
                                                    [("facts", f[0]) for f in FACTS] + [("master_facts", "m2")]]).values()}
    assert mem._store.run("SELECT count(*) FROM memories")[0][0] == 6
    old, new = got["facts:f1"], got["facts:f2"]
    assert (old.scope, old.agent_id, old.category, old.title) == ("agent:main", "main", "preference", "FTP 250W")
    assert old.created_at.isoformat().startswith("2026-01-01") and old.updated_at.isoformat().startswith("2026-01-02")
    assert old.superseded_by == new.id and new.supersedes == old.id and old.valid_to == new.created_at
    assert old.metadata["memento"]["occurrence_count"] == 3 and old.confidence == 0.9
    coder = got["facts:f3"]
    assert (coder.scope, coder.visibility, coder.category) == ("agent:coder", "private", "fact")
    assert coder.metadata["memento"]["category"] == "technical"
    assert got["facts:f4"].visibility == "secret"
    assert got["facts:f5"].supersedes is None
    master = got["master_facts:m2"]
    assert (master.scope, master.visibility, master.metadata["memento"]["source_agent_id"]) == ("global", "shared", "old-agent")
    hits = mem.search("what is the FTP now", agent_id="main")
    assert [h.memory.id for h in hits][:1] == [new.id]  # the superseded one is not current
    mem.close()


def test_an_import_killed_half_way_finishes_when_run_again(tmp_path):
    source = _memento(tmp_path / "memento.db")
    db = tmp_path / "m.db"
    Memory.open(db).close()
    args = ["--db", str(db), "import", "--from", "memento-local", str(source), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    helper = str(Path(__file__).with_name("kill_after.py"))
    # memories are written a chunk at a time: a small chunk makes the kill land between two
    killed = subprocess.run([sys.executable, helper, "3", *args], env=env, capture_output=True, text=True)
    assert killed.returncode == -9
    done = _import(str(db), source)
    mem = Memory.open(db)
    ids = [r[0] for r in mem._store.run("SELECT id FROM memories")]
    assert len(ids) == len(set(ids)) == 6 and done["imported"] + done["already_there"] == 6
    mem.close()


def test_memento_facts_vectors_are_read_as_their_json_text_says(tmp_path):
    """Each fact's vector (JSON text), read apart from the fact: by the fact's memory id, the numbers its
    text holds; none for a fact without one; a text that is no vector fails the import before anything."""
    import numpy as np
    import pytest

    from clawrecall.errors import ValidationError
    from clawrecall.importers import memento
    from clawrecall.importers.data import Options

    source = _memento(tmp_path / "memento.db")
    db = sqlite3.connect(source)
    db.execute("UPDATE facts SET embedding = ? WHERE id = 'f3'", (json.dumps([0.1234567890123456789, -2.5e-07, 3.0]),))
    db.execute("UPDATE facts SET embedding = '' WHERE id = 'f4'")
    db.commit()
    plan = memento.read(str(source), Options())
    assert {k: v.tolist() for k, v in plan.vectors.items()} == {
        _mid("facts", "f1"): np.float32([0.1, 0.2]).tolist(),
        _mid("facts", "f3"): np.float32([0.1234567890123456789, -2.5e-07, 3.0]).tolist()}
    assert all(v.dtype == np.float32 for v in plan.vectors.values())
    assert {i["id"] for i in plan.items} >= set(plan.vectors)
    db.execute("UPDATE facts SET embedding = '[0.1, \"x\"]' WHERE id = 'f2'")
    db.commit()
    db.close()
    with pytest.raises(ValidationError, match="not a list of numbers"):
        memento.read(str(source), Options())
