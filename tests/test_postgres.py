"""PostgreSQL-only behaviour: the SQL-level API, connection loss, concurrent processes, filters."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import psycopg
import pytest

from clawrecall import Memory, StorageError
from clawrecall.storage.postgres import _migrations

pytestmark = pytest.mark.skipif("postgres" not in __import__("conftest").BACKENDS, reason="PostgreSQL not selected")


def test_sql_api_search_memories_and_conversation_stats(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add("Alice prefers TypeScript over JavaScript", user_id="alice", category="preference")
        mem.add("Bob prefers Go", user_id="bob", category="preference")
        mem.add("Alice's deploys run on Fridays", user_id="alice", category="fact")
        query = mem.embedder.embed_one("what language does alice like")
    with psycopg.connect(pg_url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        rows = conn.execute(
            "SELECT content, memory_type, similarity FROM search_memories(%s, 'alice', 'preference', 5, 0.1)", (query,)
        ).fetchall()
        assert [r[0] for r in rows] == ["Alice prefers TypeScript over JavaScript"]
        assert rows[0][1] == "preference" and 0.1 <= rows[0][2] <= 1
        defaults = conn.execute("SELECT count(*) FROM search_memories(%s)", (query,)).fetchone()[0]
        assert defaults >= 1
        stats = conn.execute("SELECT total_memories, total_requests, unique_users FROM conversation_stats").fetchone()
        assert stats == (3, 0, 2)


def test_an_in_flight_call_fails_clearly_and_the_next_one_works(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add("survives connection loss")
        errors: list[BaseException] = []

        def long_query():
            try:
                mem.store._run("SELECT pg_sleep(10)")
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                errors.append(exc)

        worker = threading.Thread(target=long_query)
        worker.start()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            deadline = time.time() + 5
            while time.time() < deadline:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%%' "
                    "AND pid <> pg_backend_pid()"
                ).fetchall()
                if killed:
                    break
                time.sleep(0.05)
        worker.join(15)
        assert len(errors) == 1 and isinstance(errors[0], StorageError)
        assert "PostgreSQL connection failed" in str(errors[0])
        assert mem.count() == 1  # the pool replaced the dead connection
        assert mem.search("connection loss")[0].memory.content == "survives connection loss"


def test_scope_filters_never_starve_the_vector_leg(pg_url):
    rng = np.random.default_rng(7)
    with Memory.open(pg_url) as mem:
        dims = mem.embedder.ensure_dimensions()
        crowd = [{"content": f"crowd memory {i}", "scope": "custom:crowd"} for i in range(3000)]
        mem.add_many(crowd, embeddings=rng.normal(size=(len(crowd), dims)), dedup=False)
        few = [{"content": f"rare memory {i}", "scope": "custom:rare"} for i in range(25)]
        mem.add_many(few, embeddings=rng.normal(size=(len(few), dims)), dedup=False)
        candidates = mem.store.vector_candidates(
            mem.embedder.embed_one("anything"), __import__("clawrecall.storage", fromlist=["Filters"]).Filters(scopes=["custom:rare"]), 20
        )
        assert len(candidates) == 20
        hits = mem.search("anything at all", scope="custom:rare", mode="vector", limit=20)
        assert len(hits) == 20 and {h.memory.scope for h in hits} == {"custom:rare"}


_WORKER = textwrap.dedent(
    """
    import json, sys
    from clawrecall import Memory
    url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Memory.open(url) as mem:
        ids = []
        for i in range(n):
            ids.append(mem.add(f"{name} wrote note {i} about topic {i * 7919 % 101}", dedup=False).id)
            mem.search(f"note {i} topic", limit=5)
        print(json.dumps(ids))
    """
)


def test_two_processes_write_and_search_one_database_concurrently(pg_url, tmp_path):
    with Memory.open(pg_url) as mem:  # migrate first, as a deployment would
        pass
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    procs = [subprocess.Popen([sys.executable, str(script), pg_url, name, "40"], stdout=subprocess.PIPE, text=True)
             for name in ("alpha", "beta")]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    ids = [i for out in outputs for i in json.loads(out.strip().splitlines()[-1])]
    assert len(ids) == 80 and len(set(ids)) == 80
    with Memory.open(pg_url) as mem:
        assert mem.count() == 80
        assert set(mem.store.fetch(ids)) == set(ids)
        assert {h.memory.content.split()[0] for h in mem.search("wrote note", limit=40)} == {"alpha", "beta"}


def test_concurrent_first_opens_migrate_once(pg_url, tmp_path):
    script = tmp_path / "opener.py"
    script.write_text("import sys\nfrom clawrecall.storage import open_store\ns = open_store(sys.argv[1])\nprint(s.schema_version())\n")
    procs = [subprocess.Popen([sys.executable, str(script), pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [r[1] for r in results]
    assert {r[0].strip() for r in results} == {str(_migrations("english")[-1][0])}


def test_database_block_in_config(pg_server, pg_url, monkeypatch):
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(pg_url)
    socket_dir = parse_qs(parts.query)["host"][0]
    monkeypatch.setenv("PGPASSWORD_FOR_TEST", "")
    db = {"host": socket_dir, "database": parts.path.lstrip("/"), "user": "postgres", "password": "${PGPASSWORD_FOR_TEST}"}
    with Memory.open(None, database=db) as mem:
        assert mem.store.backend == "postgres"
        mem.add("configured through the database block")
        assert mem.count() == 1


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(StorageError, match="cannot open PostgreSQL database"):
        Memory.open("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=1")
