"""PostgreSQL-only behaviour: no SQL-level search, connection loss, concurrent processes, filters."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from clawrecall import Caller, ConfigError, Memory, StorageError
from clawrecall.storage import Filters
from clawrecall.storage.migrations import latest
from conftest import _admin, with_database

pytestmark = pytest.mark.skipif("postgres" not in __import__("conftest").BACKENDS, reason="PostgreSQL not selected")


def test_no_sql_function_reads_past_the_scope_check(pg_url):
    """The database offers no search of its own: every read goes through the engine's one scope check."""
    with Memory.open(pg_url) as mem:
        mem.add("Alice prefers TypeScript over JavaScript", user_id="alice")
        assert mem._store.run("SELECT to_regprocedure('search_memories(vector, text, text, integer, real)'), "
                             "to_regclass('conversation_stats')") == [(None, None)]


def test_an_in_flight_call_fails_clearly_and_the_next_one_works(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add("survives connection loss")
        errors: list[BaseException] = []

        def long_query():
            try:
                mem._store.run("SELECT pg_sleep(10)")
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
        dims = mem.upkeep.embedder.ensure_dimensions()
        crowd = [{"content": f"crowd memory {i}", "scope": "custom:crowd"} for i in range(3000)]
        mem.add_many(crowd, embeddings=rng.normal(size=(len(crowd), dims)), dedup=False)
        few = [{"content": f"rare memory {i}", "scope": "custom:rare"} for i in range(25)]
        mem.add_many(few, embeddings=rng.normal(size=(len(few), dims)), dedup=False)
        candidates = mem._store.vector_candidates(
            mem.upkeep.embedder.embed_one("anything"), __import__("clawrecall.storage", fromlist=["Filters"]).Filters(scopes=["custom:rare"]), 20
        )
        assert len(candidates) == 20
        hits = mem.search("anything at all", scope="custom:rare", mode="vector", limit=20, min_score=0)
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
        assert set(mem._store.memories.fetch(ids)) == set(ids)
        assert {h.memory.content.split()[0] for h in mem.search("wrote note", limit=40)} == {"alpha", "beta"}


@pytest.mark.empty_db
def test_concurrent_first_opens_migrate_once(pg_url, tmp_path):
    script = tmp_path / "opener.py"
    script.write_text("import sys\nfrom clawrecall.storage import open_store\ns = open_store(sys.argv[1])\nprint(s.schema_version())\n")
    procs = [subprocess.Popen([sys.executable, str(script), pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [r[1] for r in results]
    assert {r[0].strip() for r in results} == {str(latest())}


def test_database_block_in_config(pg_server, pg_url, monkeypatch):
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(pg_url)
    socket_dir = parse_qs(parts.query)["host"][0]
    monkeypatch.setenv("PGPASSWORD_FOR_TEST", "")
    db = {"host": socket_dir, "database": parts.path.lstrip("/"), "user": "postgres", "password": "${PGPASSWORD_FOR_TEST}"}
    with Memory.open(None, database=db) as mem:
        assert mem._store.backend == "postgres"
        mem.add("configured through the database block")
        assert mem.count() == 1


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(StorageError, match="cannot open PostgreSQL database"):
        Memory.open("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=1")


# -- tuning, bulk loads and exact small-scope reads --------------------------------------------
def _unit(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    v = rng.normal(size=(n, dims)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _index_def(store) -> str | None:
    rows = store.run("SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_memories_embedding'")
    return rows[0][0] if rows else None


def test_hnsw_and_pool_settings_come_from_the_postgres_block(pg_url):
    postgres = {"hnsw_m": 8, "hnsw_ef_construction": 40, "hnsw_ef_search": 77, "maintenance_work_mem": "96MB",
                "pool_size": 3, "exact_search_rows": 0}
    with Memory.open(pg_url, postgres=postgres) as mem:
        assert mem._store._pool.max_size == 3
        dims = mem.upkeep.embedder.ensure_dimensions()
        with mem._store.transaction():  # SET LOCAL lasts to the end of the outer transaction
            mem.add_many([{"content": f"note {i}"} for i in range(50)], embeddings=_unit(np.random.default_rng(1), 50, dims))
            assert mem._store.run("SHOW maintenance_work_mem")[0][0] == "96MB"
        assert "m='8'" in _index_def(mem._store) and "ef_construction='40'" in _index_def(mem._store)
        query = mem.upkeep.embedder.embed_one("note")
        store, run = mem._store, mem._store.run
        for k, ef in ((10, 77), (300, 300), (5000, 1000)):
            with mem._store.transaction():
                issued = []
                store.run = lambda sql, params=(), **kw: (issued.append(sql), run(sql, params, **kw))[1]
                mem._store.vector_candidates(query, Filters(), k)
                del store.run
                assert len([sql for sql in issued if "hnsw." in sql]) == 1  # both settings in one round trip
                assert mem._store.run("SHOW hnsw.ef_search")[0][0] == str(ef)
                assert mem._store.run("SHOW hnsw.iterative_scan")[0][0] == "relaxed_order"
        assert mem._store.run("SHOW hnsw.iterative_scan")[0][0] == "off"  # for the search's transaction only
    with Memory.open(pg_url, postgres={"exact_search_rows": 0}) as mem:  # defaults: m 24, ef_c 128, ef_search 100
        mem._store.drop_vector_index()
        mem._store.build_vector_index()
        assert "m='24'" in _index_def(mem._store) and "ef_construction='128'" in _index_def(mem._store)
        assert mem._store._pool.max_size == 10
        with mem._store.transaction():
            mem._store.vector_candidates(query, Filters(), 10)
            assert mem._store.run("SHOW hnsw.ef_search")[0][0] == "100"


def test_binary_copy_round_trips_every_column(pg_url):
    from datetime import datetime, timezone

    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        vectors = _unit(np.random.default_rng(2), 2, dims)
        created = datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=timezone.utc)
        full = {"content": "Zoë's café ☕ — \"quoted\", tab\there\nnew line \\ backslash", "title": "Tïtle",
                "category": "preference", "tags": ["a b", "ü", "{brace}", "comma,tag"], "importance": 0.25,
                "confidence": 0.5, "scope": "user:zoe", "session_id": "s-1", "visibility": "private",
                "source_type": "chat", "source_id": "msg-9", "metadata": {"n": 1, "nested": {"x": [1, "two", None]}},
                "created_at": created, "expires_at": datetime(2999, 1, 1, tzinfo=timezone.utc)}
        bare = {"content": "plain"}
        ids = [r.id for r in mem.add_many([full, bare], embeddings=vectors, dedup=False)]
        got = mem._store.memories.fetch(ids)
        a, b = got[ids[0]], got[ids[1]]
        for key in ("content", "title", "category", "tags", "importance", "confidence", "scope", "session_id",
                    "source_type", "source_id", "metadata", "created_at", "expires_at"):
            assert getattr(a, key) == full[key], key
        assert a.visibility.value == "private" and b.title is None and b.tags == [] and b.metadata == {}
        stored = mem._store.vectors(ids)
        # stored in half precision: each component is its float16 rounding, exactly
        assert all(np.array_equal(stored[i], v.astype(np.float16).astype(np.float32)) for i, v in zip(ids, vectors))
        assert [h.memory.id for h in mem.search("café quoted", mode="bm25", min_score=0)] == [ids[0]]


def test_deferred_vector_index_builds_once_after_a_bulk_load(pg_url):
    rng = np.random.default_rng(3)
    with Memory.open(pg_url) as mem, Memory.open(pg_url) as other:
        dims = mem.upkeep.embedder.ensure_dimensions()
        with mem.upkeep.deferred_vector_index():
            mem.add_many([{"content": f"bulk {i}"} for i in range(300)], embeddings=_unit(rng, 300, dims), dedup=False)
            other.add_many([{"content": "another process writes meanwhile"}], embeddings=_unit(rng, 1, dims))
            assert not mem._store.has_vector_index()  # neither process built it
            query = mem._store.vectors([other.list(limit=1)[0].id])
            hits = other._store.vector_candidates(next(iter(query.values())), Filters(), 5)
            assert hits[0].score == pytest.approx(1.0, abs=1e-5)  # exact meanwhile
        assert mem._store.has_vector_index() and mem._store.get_meta("vector_index_deferred") is None
        analyzed = "SELECT reltuples FROM pg_class WHERE relname = 'memories'"
        assert mem._store.run(analyzed)[0][0] == 301  # the planner knows the new rows at once
        with mem.upkeep.deferred_vector_index(rebuild=True):  # an existing index is dropped for the load
            assert not mem._store.has_vector_index()
            mem.add_many([{"content": "one more"}], embeddings=_unit(rng, 1, dims))
        assert mem._store.has_vector_index()
        with pytest.raises(RuntimeError), mem.upkeep.deferred_vector_index(rebuild=True):
            raise RuntimeError("the load failed half way")
        assert mem._store.has_vector_index()  # what was loaded is indexed all the same
        assert mem.count() == 302


def test_import_defer_index_and_index_build_commands(pg_url, tmp_path):
    from click.testing import CliRunner

    from clawrecall.cli import cli

    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps({"content": f"imported fact number {i}"}) + "\n" for i in range(40)))
    runner = CliRunner()
    with Memory.open(pg_url) as mem:
        mem.add("already stored")
        assert mem._store.has_vector_index()
    result = runner.invoke(cli, ["--db", pg_url, "import", str(export), "--defer-index", "--json"])
    assert result.exit_code == 0, result.output
    with Memory.open(pg_url) as mem:
        assert mem.count() == 41 and mem._store.has_vector_index()
        with pytest.raises(KeyboardInterrupt), mem.upkeep.deferred_vector_index(rebuild=True):
            raise KeyboardInterrupt  # interrupted: nothing is built on the way out
        assert not mem._store.has_vector_index()
    result = runner.invoke(cli, ["--db", pg_url, "index", "build", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["built"] is True
    with Memory.open(pg_url) as mem:
        assert mem._store.has_vector_index() and mem._store.get_meta("vector_index_deferred") is None


def test_small_scopes_are_read_exactly_and_large_ones_through_hnsw(pg_url):
    rng = np.random.default_rng(4)
    # A deliberately poor graph, so that anything read through it misses neighbours.
    poor = {"hnsw_m": 2, "hnsw_ef_construction": 4, "hnsw_ef_search": 1}
    with Memory.open(pg_url, postgres={**poor, "exact_search_rows": 1000}) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        big, small = _unit(rng, 3000, dims), _unit(rng, 400, dims)
        mem.add_many([{"content": f"big {i}", "scope": "custom:big"} for i in range(3000)], embeddings=big, dedup=False)
        ids = [r.id for r in mem.add_many([{"content": f"small {i}", "scope": "custom:small"} for i in range(400)],
                                          embeddings=small, dedup=False)]
        mem._store.run("ANALYZE memories")
        queries = _unit(rng, 10, dims)

        def recall(store, scope: str, vectors: np.ndarray, scope_ids: list[str] | None) -> float:
            found = 0
            for q in queries:
                hits = store.vector_candidates(q, Filters(scopes=[scope]), 10)
                if scope_ids is None:
                    scope_ids = [str(r[0]) for r in store.run("SELECT id FROM memories WHERE scope = %s ORDER BY seq", (scope,))]
                truth = {scope_ids[i] for i in np.argsort(-(vectors @ q))[:10]}
                found += len({h.id for h in hits} & truth)
            return found / (10 * len(queries))

        assert recall(mem._store, "custom:small", small, ids) == 1.0
        assert recall(mem._store, "custom:big", big, None) < 0.9  # through the (poor) graph
    with Memory.open(pg_url, postgres={**poor, "exact_search_rows": 0}) as mem:
        assert recall(mem._store, "custom:small", small, ids) < 0.9  # the same scope through the graph


def test_a_reembed_to_other_dimensions_by_another_process_needs_no_restart(pg_url):
    rng = np.random.default_rng(5)
    with Memory.open(pg_url) as server, Memory.open(pg_url) as admin:
        dims = server.upkeep.embedder.ensure_dimensions()
        server.add_many([{"content": f"fact {i}"} for i in range(20)], embeddings=_unit(rng, 20, dims), dedup=False)
        assert len(server._store.vector_candidates(_unit(rng, 1, dims)[0], Filters(), 5)) == 5  # dims cached
        # another process moves every vector to a 16-d model, as `reembed` does
        admin._store.drop_vector_index()
        with admin._store.transaction():
            for record, _ in admin._store.memories.iter_all(Filters()):
                admin._store.memories.update(record, _unit(rng, 1, 16)[0])
        admin._store.build_vector_index()
        hits = server._store.vector_candidates(_unit(rng, 1, 16)[0], Filters(), 5)
        assert len(hits) == 5
        with pytest.raises(StorageError, match="16 dimensions"):
            server._store.vector_candidates(_unit(rng, 1, dims)[0], Filters(), 5)


@pytest.mark.parametrize("table", [
    "CREATE TABLE api_tokens (id TEXT PRIMARY KEY, name TEXT, kind TEXT, user_id TEXT, scopes TEXT, salt TEXT, "
    "hash TEXT, created_at TEXT, revoked_at TEXT)",  # no agent_id
    "CREATE TABLE something_else (id TEXT)",
])
def test_a_malformed_old_tokens_db_stops_the_server_with_one_line_naming_it(pg_url, table):
    """A tokens.db the server cannot read whole is an error that names the file, not a traceback
    (and not a silent start that rejects every token it held); the file is kept."""
    import sqlite3

    from clawrecall.auth import TokenStore
    from clawrecall.config import data_dir

    data_dir().mkdir(parents=True, exist_ok=True)
    legacy = data_dir() / "tokens.db"
    conn = sqlite3.connect(legacy)
    conn.execute(table)
    conn.commit()
    conn.close()
    with Memory.open(pg_url) as mem:
        with pytest.raises(StorageError, match=f"^cannot read the API tokens of {re.escape(str(legacy))} ") as caught:
            TokenStore.for_memory(mem)
        assert "\n" not in str(caught.value) and legacy.exists()


def test_api_tokens_live_in_the_database_and_every_server_shares_them(pg_url, tmp_path, monkeypatch):
    import sqlite3

    from clawrecall.auth import TokenStore

    # a token an older version kept in this server's own tokens.db
    home = tmp_path / "home"
    monkeypatch.setenv("CLAWRECALL_HOME", str(home))
    legacy = TokenStore(tmp_path / "old.db")
    old_info, old_secret = legacy.create(user_id="carol", name="old")
    gone, _ = legacy.create(kind="service")
    legacy.revoke(gone.id)
    legacy.close()
    home.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(tmp_path / "old.db"), sqlite3.connect(home / "tokens.db")
    src.backup(dst)
    src.close()
    dst.close()

    with Memory.open(pg_url) as one, Memory.open(pg_url) as two:
        first, second = TokenStore.for_memory(one), TokenStore.for_memory(two)
        assert not (home / "tokens.db").exists() and (home / "tokens.db.imported").exists()
        assert first.verify(old_secret).id == old_info.id  # adopted, and the revoked one stays revoked
        assert [t.id for t in second.list()] == [old_info.id]
        assert {t.id for t in second.list(include_revoked=True)} == {old_info.id, gone.id}
        info, secret = first.create(user_id="alice", name="laptop")
        seen = second.verify(secret)
        assert seen is not None and seen.user_id == "alice" and seen.scopes == ["global", "user:alice"]
        assert seen.created_at == info.created_at.replace(microsecond=seen.created_at.microsecond)
        assert second.any_active()
        second.revoke(info.id)
        assert first.verify(secret) is None  # a revocation counts at once, everywhere
        assert first.verify(secret.replace(secret[-4:], "xxxx")) is None
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM api_tokens").fetchone()[0] == 3


def test_scoped_text_legs_intersect_the_scope_inside_their_gin_indexes(pg_url):
    rng = np.random.default_rng(6)
    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        for scope in ("custom:a", "custom:b", "custom:c"):  # a third of the table: its scope narrows the index's answer
            items = [{"content": f"alice planned the hiking budget at the cafe number {i}", "scope": scope} for i in range(500)]
            mem.add_many(items, embeddings=_unit(rng, len(items), dims), dedup=False)
        mem._store.run("ANALYZE memories")
        issued: list[tuple[str, tuple]] = []
        run = mem._store.run

        def recording(sql: str, params=()):
            if "ts_rank" in sql or "word_similarity(?" in sql:
                issued.append((sql, tuple(params)))
            return run(sql, params)

        mem._store.run = recording
        text = mem._store.text_candidates("alice hiking", Filters(scopes=["custom:a"]), 10)
        fuzzy = mem._store.fuzzy_candidates("alice hikking", Filters(scopes=["custom:a"]), 10)
        del mem._store.run
        assert len(text) == 10 and len(fuzzy) == 10
        assert {r.scope for r in mem._store.memories.fetch([c.id for c in text + fuzzy]).values()} == {"custom:a"}
    # On 1,500 rows the planner rightly reads a scope through its btree; without that index (and
    # without sequential scans) the only way left to the scope must be the leg's own GIN index.
    with psycopg.connect(pg_url) as conn:
        conn.execute("DROP INDEX idx_memories_scope")
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL pg_trgm.word_similarity_threshold = 0.3")
        for (sql, params), index in zip(issued, ("idx_memories_fts_scope", "idx_memories_trgm_scope")):
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql.replace("?", "%s"), params))
            assert f"Bitmap Index Scan on {index}" in plan, plan
            assert "&&" in plan.split(index, 1)[1].splitlines()[1], plan  # the scope is in its Index Cond
        conn.rollback()


def test_keyword_ranking_weighs_rare_words_over_common_ones(pg_url):
    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        common = [{"content": f"alice ran {i}"} for i in range(20)]
        rare = {"content": "a zebra appeared near the old wooden bridge by the river yesterday evening"}
        ids = [r.id for r in mem.add_many([*common, rare], embeddings=_unit(np.random.default_rng(8), 21, dims), dedup=False)]
        hits = mem._store.text_candidates("alice zebra", Filters(), 5)
        assert hits[0].id == ids[-1]  # plain ts_rank puts the short "alice" memories first
        assert len(hits) == 5 and all(h.score > 0 for h in hits)


def test_an_unknown_text_search_configuration_is_refused_at_open(pg_url):
    with pytest.raises(ConfigError, match="no text search configuration 'klingon'"):
        Memory.open(pg_url, postgres={"text_search_config": "klingon"})


def test_a_role_that_may_not_install_pgvector_gets_one_clear_error_at_once(pg_server):
    """The extension was created by the pool's per-connection callback, whose failure the pool retried
    until its 10 s timeout, then reported as "couldn't get a connection"."""
    name, role = "t_" + uuid.uuid4().hex[:12], "r_" + uuid.uuid4().hex[:12]
    _admin(pg_server, f"CREATE ROLE {role} LOGIN")
    _admin(pg_server, f"CREATE DATABASE {name} OWNER {role}")
    try:
        _admin(with_database(pg_server, name), "DROP EXTENSION IF EXISTS vector CASCADE")  # as a fresh database has none
        parts = urlsplit(with_database(pg_server, name))
        url = urlunsplit(parts._replace(netloc=parts.netloc.replace(parts.username or "", role, 1)))
        with pytest.raises(StorageError, match="may not install it: have a superuser run CREATE EXTENSION vector"):
            Memory.open(url)  # the pool's retries ended in "couldn't get a connection"
    finally:
        _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        _admin(pg_server, f"DROP ROLE IF EXISTS {role}")


def test_integrity_problems_name_missing_extensions_and_invalid_indexes(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add("A sound store")
        assert mem._store.integrity_problems() == []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_memories_scope'::regclass")
            conn.execute("DROP EXTENSION pg_trgm CASCADE")
        assert mem._store.integrity_problems() == [
            "extension pg_trgm is missing",
            "index idx_memories_scope is invalid (REINDEX INDEX idx_memories_scope rebuilds it)",
        ]


def test_sql_with_question_marks_reaches_postgres_as_written(pg_url):
    """Parameters go to psycopg as they are: a `?` in SQL text (jsonb's operators, a string literal)
    is PostgreSQL's, not a placeholder."""
    with Memory.open(pg_url) as mem:
        asked = mem.add("Did Alice park the camper van by the mill?", metadata={"question": True})
        mem.add("Alice parked the camper van by the mill.", metadata={"answer": True})
        store = mem._store
        rows = store.run(
            "SELECT id FROM memories WHERE metadata ? 'question' AND metadata ?| %s AND content LIKE '%%?' "
            "AND position('?' in content) > %s",
            (["question", "other"], 0),
        )
        assert [str(r[0]) for r in rows] == [asked.id]
        assert store.run("SELECT '?'::text, %s::text", ("?",))[0] == ("?", "?")
        assert asked.id in {h.memory.id for h in mem.search("park the camper van?", mode="bm25")}


def test_tokens_of_an_old_per_server_tokens_db_move_into_the_database(pg_url, tmp_path):
    """Releases before tokens lived in the store kept them in `tokens.db` in the data directory."""
    import sqlite3

    from clawrecall.auth import TokenStore, _digest
    from clawrecall.config import data_dir

    data_dir().mkdir(parents=True, exist_ok=True)
    legacy = data_dir() / "tokens.db"
    conn = sqlite3.connect(legacy)
    conn.execute(
        "CREATE TABLE api_tokens (id TEXT PRIMARY KEY, name TEXT, kind TEXT NOT NULL, user_id TEXT, agent_id TEXT, "
        "scopes TEXT, salt TEXT NOT NULL, hash TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT)"
    )
    salt = "00" * 16
    conn.executemany("INSERT INTO api_tokens VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("aaaaaaaaaaaa", "laptop", "user", "alice", None, '["global", "user:alice"]', salt, _digest(salt, "s3cret"),
         "2025-01-01T00:00:00.000000+00:00", None),
        ("bbbbbbbbbbbb", "plugin", "service", None, None, None, salt, _digest(salt, "other"),
         "2025-01-02T00:00:00.000000+00:00", "2025-02-01T00:00:00.000000+00:00"),
    ])
    conn.commit()
    conn.close()
    with Memory.open(pg_url) as mem:
        tokens = TokenStore.for_memory(mem)
        assert not legacy.exists() and legacy.with_name("tokens.db.imported").exists()
        assert tokens.verify("cr_aaaaaaaaaaaa_s3cret").scopes == ["global", "user:alice"]
        assert tokens.verify("cr_bbbbbbbbbbbb_other") is None
        [revoked] = [t for t in tokens.list(include_revoked=True) if t.revoked_at is not None]
        assert revoked.id == "bbbbbbbbbbbb" and revoked.revoked_at.month == 2 and revoked.kind == "service"
        TokenStore.for_memory(mem)  # nothing left to adopt: the same two tokens
        assert len(tokens.list(include_revoked=True)) == 2


def test_a_search_borrows_one_pooled_connection_and_a_transaction_inside_it_is_real(pg_url):
    with Memory.open(pg_url, insight={"search_log": False}) as mem:  # the log writes later, on a connection of its own
        mem.add_many([{"content": f"note {i} about gardening and tomatoes", "user_id": "alice"} for i in range(30)])
        mem.conversations.log([{"role": "user", "content": "tomatoes need sun"}], caller=Caller("alice"), session_id="s1")
        mem.upkeep.runtime.drain()  # the message's vector is made in the background, on connections of its own
        borrowed = []
        lend = mem._store._pool.connection

        def counting(*args, **kwargs):
            borrowed.append(threading.current_thread().name)
            return lend(*args, **kwargs)

        mem._store._pool.connection = counting
        hits = mem.search("tomatoes gardening", user_id="alice", sources=["memory", "message"], exclude_session="s1")
        # the session's start, the vector query's common words, the keyword legs with their records (on a worker
        # thread, beside the embedding), the vector leg, then the reads and neighbours (one, taken after the
        # legs: 4+ without); none while the query is embedded
        assert hits and len(borrowed) == 5
        assert sum(name != threading.current_thread().name for name in borrowed) == 1
        # a write inside a pinned block is still one transaction: a failure undoes all of it
        with mem._store.pinned():
            with pytest.raises(RuntimeError), mem._store.transaction():
                mem._store.set_meta("pinned-check", "written")
                raise RuntimeError("undo")
            assert mem._store.get_meta("pinned-check") is None


def test_a_search_runs_its_keyword_legs_beside_its_vector_leg(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add_many([{"content": f"note {i} about gardening and tomatoes", "user_id": "alice"} for i in range(10)])
        store, seen = mem._store, {}
        vector_started, keyword_started = threading.Event(), threading.Event()
        vector, text = store.vector_candidates, store.text_candidates

        # each leg waits until the other has started: legs run one after the other (in either order)
        # would leave the first waiting in vain
        def vector_leg(*args, **kwargs):
            vector_started.set()
            seen["vector"] = (threading.current_thread().name, keyword_started.wait(10))
            return vector(*args, **kwargs)

        def keyword_leg(*args, **kwargs):
            keyword_started.set()
            seen["bm25"] = (threading.current_thread().name, vector_started.wait(10))
            return text(*args, **kwargs)

        store.vector_candidates, store.text_candidates = vector_leg, keyword_leg
        hits = mem.search("tomatoes gardening", user_id="alice")
        assert hits and set(hits[0].matched) >= {"vector", "bm25"}
        assert seen["vector"] == (threading.current_thread().name, True)
        assert seen["bm25"][1] is True and seen["bm25"][0] != threading.current_thread().name
        # without a vector leg there is nothing to run beside: the keyword leg stays on the calling thread
        vector_started.set()
        assert mem.search("tomatoes gardening", user_id="alice", mode="bm25")
        assert seen["bm25"][0] == threading.current_thread().name


def test_a_keyword_leg_that_outlasts_the_vector_leg_finds_its_records_read(pg_url):
    with Memory.open(pg_url) as mem:
        mem.add_many([{"content": f"note {i} about gardening and tomatoes", "user_id": "alice"} for i in range(10)])
        store = mem._store
        before = [(h.id, h.score) for h in mem.search("tomatoes gardening", user_id="alice")]
        text, fetch = store.text_candidates, store.memories.fetch
        read, waited, main = threading.Event(), [], threading.current_thread().name

        def fetching(ids):  # the records of the vector hits, read on the searching thread
            if threading.current_thread().name == main and ids:
                read.set()
            return fetch(ids)

        def slow_keyword_leg(*args, **kwargs):  # runs until the vector hits' records are read: without the
            waited.append(read.wait(10))        # early read, the searching thread would wait for it instead
            return text(*args, **kwargs)

        store.text_candidates, store.memories.fetch = slow_keyword_leg, fetching
        hits = mem.search("tomatoes gardening", user_id="alice")
        assert waited == [True]
        assert [(h.id, h.score) for h in hits] == before  # the same hits, records read earlier


def test_work_beside_a_transaction_waits_for_none_and_sees_its_writes(pg_url):
    with Memory.open(pg_url) as mem:
        store, here = mem._store, threading.current_thread().name
        with store.transaction():
            store.set_meta("beside-check", "uncommitted")
            assert store.beside(lambda: (threading.current_thread().name, store.get_meta("beside-check")), Filters()).result() == \
                (here, "uncommitted")
        assert store.beside(lambda: threading.current_thread().name, Filters()).result() != here

        def fails() -> None:
            raise StorageError("the read failed")

        result = store.beside(fails, Filters())  # the error reaches the caller when it asks for the value
        with pytest.raises(StorageError, match="the read failed"):
            result.result()
    with pytest.raises(StorageError):  # a closed store fails as it does for any call, in the caller's thread
        store.beside(lambda: store.get_meta("beside-check"), Filters()).result()


def test_concurrent_searches_on_a_pool_of_one_connection_all_answer(pg_url):
    # each search's keyword legs take a connection of their own; a search holding one while it
    # waited for them (its reads' connection taken before the legs' answer) would wait forever
    # (here: the pool's timeout) once the pool ran out
    from concurrent.futures import ThreadPoolExecutor

    with Memory.open(pg_url, postgres={"pool_size": 1}) as mem:
        mem.add_many([{"content": f"note {i} about gardening and tomatoes", "user_id": "alice"} for i in range(20)])
        with ThreadPoolExecutor(4) as pool:
            answers = [f.result(timeout=60) for f in [pool.submit(mem.search, f"tomatoes {i}", user_id="alice")
                                                      for i in range(16)]]
        assert all(len(hits) > 0 for hits in answers)


def test_the_exact_or_hnsw_question_is_asked_once_a_minute_per_filter(pg_url, monkeypatch):
    import clawrecall.storage.postgres as backend

    rng = np.random.default_rng(6)
    with Memory.open(pg_url, postgres={"exact_search_rows": 100}) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        mem.add_many([{"content": f"fact {i}", "scope": "custom:grows"} for i in range(50)],
                     embeddings=_unit(rng, 50, dims), dedup=False)
        mem._store.run("ANALYZE memories")
        store, asked = mem._store, []
        run = store.run

        def counting(sql, *args, **kwargs):
            if sql.startswith("EXPLAIN"):
                asked.append(sql)
            return run(sql, *args, **kwargs)

        store.run = counting
        grows = Filters(scopes=["custom:grows"])
        for _ in range(3):
            assert store.reads_exactly(grows)
        assert len(asked) == 1
        assert store.reads_exactly(Filters(scopes=["custom:other"])) and len(asked) == 2  # another filter
        # a time window is part of the filter, to the minute
        windowed = Filters(scopes=["custom:grows"], since=datetime(2020, 1, 1, tzinfo=timezone.utc))
        assert store.reads_exactly(windowed) and store.reads_exactly(windowed) and len(asked) == 3
        later = Filters(scopes=["custom:grows"], since=datetime(2021, 1, 1, tzinfo=timezone.utc))
        assert store.reads_exactly(later) and len(asked) == 4
        clock = time.monotonic()
        monkeypatch.setattr(backend, "_monotonic", lambda: clock + 61)
        assert store.reads_exactly(grows) and len(asked) == 5  # a minute later: asked again
        # a bulk load gives the planner new statistics, and the answers are asked again at once
        with mem.upkeep.deferred_vector_index():
            mem.add_many([{"content": f"more {i}", "scope": "custom:grows"} for i in range(300)],
                         embeddings=_unit(rng, 300, dims), dedup=False)
        assert not store.reads_exactly(grows)
        hits = store.vector_candidates(_unit(rng, 1, dims)[0], grows, 10)
        assert len(hits) == 10


def test_the_keyword_legs_word_estimates_are_asked_once_a_minute_per_word_and_filter(pg_url, monkeypatch):
    import clawrecall.storage.postgres as backend

    rng = np.random.default_rng(7)
    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        items = [{"content": f"the budget of the hiking trip {i}", "scope": "custom:a"} for i in range(30)]
        mem.add_many(items, embeddings=_unit(rng, len(items), dims), dedup=False)
        mem._store.run("ANALYZE memories")
        store, asked = mem._store, []
        run = store.run

        def counting(sql, *args, **kwargs):
            if sql.startswith("EXPLAIN"):
                asked.append(sql.count("to_tsquery"))  # the words asked about
            return run(sql, *args, **kwargs)

        store.run = counting
        scoped = Filters(scopes=["custom:a"])
        first = store.text_candidates("hiking budget", scoped, 10)
        assert len(first) == 10 and asked == [2]
        assert store.text_candidates("hiking budget", scoped, 10) == first and asked == [2]
        assert len(store.text_candidates("budget trip", scoped, 10)) == 10 and asked == [2, 1]  # only the new word
        assert store.text_candidates("hiking budget", Filters(scopes=["custom:b"]), 10) == [] and asked == [2, 1, 2]
        clock = time.monotonic()
        monkeypatch.setattr(backend, "_monotonic", lambda: clock + 61)
        assert store.text_candidates("hiking budget", scoped, 10) == first and asked == [2, 1, 2, 2]  # a minute later


def test_each_words_estimate_is_its_own_when_the_planner_would_read_them_in_parallel(pg_url):
    """Asked together, the words' statements could get one parallel plan: a Gather over them all, whose
    rows are every word's together. Each word must still get its own estimate, as when asked alone."""
    rng = np.random.default_rng(8)
    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        items = [{"content": ("budget " * (1 + i % 2)) + ("hiking " if i % 3 == 0 else "") + f"trip {i}",
                  "scope": "custom:a"} for i in range(600)]
        mem.add_many(items, embeddings=_unit(rng, len(items), dims), dedup=False)
        mem._store.run("ANALYZE memories")
        for setting in ("parallel_setup_cost = 0", "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0",
                        "min_parallel_index_scan_size = 0"):
            mem._store.run(f"ALTER DATABASE {urlsplit(pg_url).path[1:]} SET {setting}")
    with Memory.open(pg_url) as mem:
        where, params = mem._store.where(Filters(scopes=["custom:a"]), "m")
        one = f"SELECT 1 FROM memories m WHERE m.fts @@ to_tsquery('english', %s) AND {where}"
        words = ["budget", "hiking", "trip"]
        assert "Gather" in "\n".join(r[0] for r in mem._store.run(
            "EXPLAIN " + " UNION ALL ".join([one] * 3), [p for w in words for p in (w, *params)]))
        together = mem._store._estimates([(one, [w, *params]) for w in words])
        mem._store._plans.clear()
        alone = [mem._store._estimates([(one, [w, *params])])[0] for w in words]
        assert together == alone and alone[1] < alone[0]


def test_a_store_with_full_precision_vectors_moves_to_half_precision_with_its_index(pg_url):
    """A database made before half precision (`vector` columns, an HNSW index over `vector`) gets halfvec
    columns, the HNSW index made again over them and used, and its staged vectors kept."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(40, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with Memory.open(pg_url, embedding={"provider": "hash"}) as mem:
        ids = [r.id for r in mem.add_many([{"content": f"row {i}"} for i in range(40)], embeddings=vectors, dedup=False)]
        mem._store.staged.begin("another model")
        mem._store.staged.stage("another model", mem._store.staged.pending(0, 1), vectors[:1])
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as an older release left it
        conn.execute("DROP INDEX idx_memories_embedding")
        conn.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector USING embedding::vector")
        conn.execute("ALTER TABLE staged_vectors ALTER COLUMN embedding TYPE vector USING embedding::vector")
        conn.execute("CREATE INDEX idx_memories_embedding ON memories USING hnsw ((embedding::vector(384)) vector_cosine_ops)")
        conn.execute("DELETE FROM meta WHERE key = 'vector_dims'")  # taken from a row when the meta lacks it
        conn.execute("DELETE FROM migrations WHERE name IN ('half-precision-vectors', 'row-revisions', "
                     "'change-feed', 'no-change-feed', 'half-precision-staging')")
    with Memory.open(pg_url, embedding={"provider": "hash"}, postgres={"exact_search_rows": 0}) as mem:
        types = dict(mem._store.run("SELECT attrelid::regclass::text, format_type(atttypid, atttypmod) FROM pg_attribute "
                                    "WHERE attname = 'embedding' AND attrelid IN ('memories'::regclass, 'staged_vectors'::regclass)"))
        assert types == {"memories": "halfvec", "staged_vectors": "halfvec"}
        index = mem._store.run("SELECT pg_get_indexdef('idx_memories_embedding'::regclass)")[0][0]
        assert "(embedding)::halfvec(384)" in index and "halfvec_cosine_ops" in index
        assert not mem._store.reads_exactly(Filters())  # through the rebuilt HNSW index
        assert [c.id for c in mem._store.vector_candidates(vectors[3], Filters(), 5)][0] == ids[3]
        assert mem._store.staged.count() == 1 and mem._store.staged.target() == "another model"
        assert not mem._store.run("SELECT 1 FROM pg_attribute WHERE attrelid = 'memories'::regclass "
                                  "AND attname IN ('rev', 'wxid') AND NOT attisdropped")
        [scope] = [r[0] for r in mem._store.run("SELECT DISTINCT scope FROM memories")]
        mem.delete(ids[5])
        assert ids[5] not in _ids(mem._store.vector_candidates(vectors[5], Filters(scopes=[scope]), 5))


@pytest.mark.parametrize("version, too_old", [("0.8.0", False), ("0.8.2", False), ("0.10.1", False), ("1.0", False),
                                              ("0.7.4", True), ("0.5.1", True)])
def test_a_pgvector_too_old_for_the_store_is_named_with_what_to_do(version, too_old):
    from clawrecall.storage.postgres import pgvector_too_old

    problem = pgvector_too_old(version)
    assert (problem is not None) == too_old
    if too_old:
        assert problem == (f"pgvector 0.8 or later is needed, the database has {version} (install the newer package, "
                           "then ALTER EXTENSION vector UPDATE)")


def test_opening_a_database_whose_pgvector_is_too_old_is_a_clear_error(pg_url, monkeypatch):
    import clawrecall.storage.postgres as backend

    Memory.open(pg_url, embedding={"provider": "hash"}).close()
    monkeypatch.setattr(backend, "PGVECTOR_NEEDED", (99, 0))  # the server's real version, below the line
    with pytest.raises(StorageError, match=r"cannot open PostgreSQL database .*: pgvector 99.0 or later is needed, "
                                           r"the database has \d+\.\d+"):
        Memory.open(pg_url)


# -- every search reads the database ---------------------------------------------------------------

def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _ids(found: list) -> list[str]:
    return [c.id for c in found]


def test_a_search_sees_every_write_of_another_store_at_once(pg_url):
    """Another store on the database (as another process) inserts, changes a vector, deletes, erases, and
    commits a transaction begun before a later one committed: the next search sees each (nothing is held)."""
    rng = np.random.default_rng(12)
    base = _unit_rows(rng, 50)
    query = _unit_rows(rng, 1)[0]
    scope = Filters(scopes=["user:alice"])
    with Memory.open(pg_url, embedding={"provider": "hash"}) as reader, \
            Memory.open(pg_url, embedding={"provider": "hash"}) as writer, \
            Memory.open(pg_url, embedding={"provider": "hash"}) as other:
        writer.add_many([{"content": f"row {i}", "user_id": "alice"} for i in range(50)], embeddings=base, dedup=False)
        top = lambda: _ids(reader._store.vector_candidates(query, scope, 3))  # noqa: E731
        before = top()
        assert top() == before

        [near] = writer.add_many([{"content": "near", "user_id": "alice"}], embeddings=query[None, :], dedup=False)
        assert top()[0] == near.id  # an insert

        away = -query
        writer._store.run("UPDATE memories SET embedding = %s WHERE id = %s", (writer._store.dialect.to_db["vector"](away), near.id))
        assert near.id not in top() and top() == before  # a vector changed

        writer._store.run("UPDATE memories SET embedding = %s WHERE id = %s", (writer._store.dialect.to_db["vector"](query), near.id))
        assert top()[0] == near.id
        writer.delete(near.id, user_id="alice")
        assert top() == before  # a soft delete

        writer._store.run("DELETE FROM memories WHERE id = %s", (before[0],))
        assert top() == before[1:] + top()[2:3] and before[0] not in top()  # a row erased

        late_vector, early_vector = query * 0.9 + base[0] * 0.1, query * 0.8 + base[1] * 0.2
        early = before[1]
        with writer._store.transaction():  # begins first, commits last
            [late] = writer.add_many([{"content": "late", "user_id": "alice"}], embeddings=(late_vector / np.linalg.norm(late_vector))[None, :], dedup=False)
            # another connection's write that commits meanwhile (by SQL: a write through the store would wait for
            # the history lock the open transaction holds, which keeps the change feed's ids in commit order)
            other._store.run("UPDATE memories SET embedding = %s WHERE id = %s",
                             (other._store.dialect.to_db["vector"](early_vector / np.linalg.norm(early_vector)), early))
            assert top()[0] == early and late.id not in top()
        assert top()[:2] == [late.id, early]


def test_a_search_inside_a_transaction_reads_its_own_writes(pg_url):
    rng = np.random.default_rng(14)
    vectors = _unit_rows(rng, 20)
    scope = Filters(scopes=["user:alice"])
    with Memory.open(pg_url, embedding={"provider": "hash"}) as mem:
        mem.add_many([{"content": f"row {i}", "user_id": "alice"} for i in range(20)], embeddings=vectors, dedup=False)
        q = _unit_rows(rng, 1)[0]
        assert len(mem._store.vector_candidates(q, scope, 50)) == 20
        with pytest.raises(RuntimeError):
            with mem._store.transaction():
                [new] = mem.add_many([{"content": "new", "user_id": "alice"}], embeddings=q[None, :], dedup=False)
                assert _ids(mem._store.vector_candidates(q, scope, 1)) == [new.id]  # its own write, read in SQL
                raise RuntimeError("roll back")
        found = mem._store.vector_candidates(q, scope, 50)
        assert len(found) == 20 and new.id not in _ids(found)


def test_an_index_build_after_a_reembed_waits_for_a_transaction_that_still_sees_the_old_vectors(pg_url):
    """A plain CREATE INDEX reads the old versions of rows a transaction begun earlier may still see: after a
    swap to vectors of other dimensions, their casts fail. The build waits for that transaction and tries again;
    rows of other dimensions that are still current fail it at once."""
    rng = np.random.default_rng(18)
    with Memory.open(pg_url, embedding={"provider": "hash"}) as mem:
        ids = [r.id for r in mem.add_many([{"content": f"row {i}"} for i in range(10)], embeddings=_unit_rows(rng, 10),
                                          dedup=False)]
        store = mem._store
        store.run("DROP INDEX idx_memories_embedding")
        with psycopg.connect(pg_url) as older:  # a transaction whose snapshot predates the swap
            older.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            older.execute("SELECT count(*) FROM memories").fetchone()
            with store.transaction():
                small = store.dialect.to_db["vector"](np.ones(8, dtype=np.float32) / np.sqrt(8))
                store.run("UPDATE memories SET embedding = %s", (small,))
                store.run("UPDATE meta SET value = '8' WHERE key = 'vector_dims'")
            store._dims = None
            threading.Timer(1.0, older.rollback).start()
            started = time.monotonic()
            store.build_vector_index()
            assert time.monotonic() - started >= 0.9 and store.has_vector_index()
        with store.transaction():
            store.run("DROP INDEX idx_memories_embedding")
            store.run("UPDATE memories SET embedding = %s WHERE id = %s",
                       (store.dialect.to_db["vector"](_unit_rows(rng, 1)[0]), ids[0]))
        started = time.monotonic()
        with pytest.raises(psycopg.errors.DataException, match="expected 8 dimensions, not 384"):
            store.build_vector_index()
        assert time.monotonic() - started < 30 and not store.has_vector_index()  # not the 60 s wait for transactions


def _widest_id() -> str:
    """The longest id allowed, in the widest characters (4 bytes each in UTF-8), and ones that do not compress."""
    rng = np.random.default_rng(13)
    return "".join(chr(c) for c in rng.integers(0x20000, 0x2A6DF, 199))


def test_an_exact_read_of_a_scope_visits_only_the_index_of_scope_ordered_vectors(pg_url):
    """A scope's vectors sit together in their own index, beside the HNSW one: a caller's search reading its
    scopes exactly touches no heap page once vacuum has marked them (there its rows lie among every other
    scope's). The longest ids still fit an index entry; vectors too large for one get no such index."""
    rng = np.random.default_rng(11)
    widest = _widest_id()
    with Memory.open(pg_url) as mem:
        dims = mem.upkeep.embedder.ensure_dimensions()
        # the users' rows interleaved, as they arrive in use
        items = [{"content": f"note {i}", "scope": f"user:{('alice', 'bob', 'carol')[i % 3]}"} for i in range(1500)]
        items += [{"content": f"wide note {i}", "scope": f"agent:{widest}", "agent_id": widest} for i in range(20)]
        mem.add_many(items, embeddings=_unit(rng, len(items), dims), dedup=False)
        mem._store.run("VACUUM ANALYZE memories")
        issued: list[tuple[str, tuple]] = []
        run = mem._store.run

        def recording(sql: str, params=(), **kw):
            if "<=>" in sql and "OFFSET 0" in sql:
                issued.append((sql, tuple(params)))
            return run(sql, params, **kw)

        mem._store.run = recording
        mem.search("note 7", caller=Caller("alice", "main"), sources=["memory", "message", "chunk"])
        del mem._store.run
        [(sql, params)] = issued
        read = [str(r[0]) for r in mem._store.run(sql, params)]
        assert read and {r.scope for r in mem._store.memories.fetch(read).values()} == {"user:alice"}
    # On 1,500 rows the planner may well read the few heap pages; on 120,000 it takes the index (docs/scaling.md).
    # Without bitmap and sequential scans, what must be left is a read of that index alone.
    with psycopg.connect(pg_url) as conn:
        register_vector(conn)
        conn.execute("SET LOCAL enable_bitmapscan = off")
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params))
        conn.rollback()
        assert "Index Only Scan using idx_memories_scope_vectors" in plan, plan
        assert "Heap Fetches: 0" in plan, plan


def test_vectors_too_large_for_an_index_entry_beside_the_longest_ids_get_no_scope_ordered_index(pg_url):
    widest = _widest_id()
    with Memory.open(pg_url, embedding={"dimensions": 1024}) as mem:
        mem.add_many([{"content": f"wide {i}", "scope": f"agent:{widest}", "agent_id": widest} for i in range(5)],
                     embeddings=_unit(np.random.default_rng(12), 5, 1024), dedup=False)
        assert mem._store.has_vector_index()
        assert mem._store.run("SELECT to_regclass('idx_memories_scope_vectors')") == [(None,)]


def test_rows_removed_while_their_vectors_are_set_never_deadlock(pg_url):
    """The background embedding gives rows their vectors while a prune or an erasure removes them: each
    takes the rows in id order, whatever order a scan of the table meets them in (here the reverse)."""
    from clawrecall.models import MemoryRecord

    with Memory.open(pg_url) as mem:
        store, dims = mem._store, mem.upkeep.embedder.dimensions
        for _ in range(15):
            ids = sorted(str(uuid.uuid4()) for _ in range(60))
            now = datetime.now(timezone.utc)
            store.memories.insert([MemoryRecord(id=i, content=f"row {i}", scope="user:alice", created_at=now,
                                                updated_at=now) for i in reversed(ids)], None)
            start, failed = threading.Barrier(2), []

            def run(work):
                start.wait()
                try:
                    work()
                except Exception as exc:  # noqa: BLE001  # reported below
                    failed.append(exc)

            writers = [threading.Thread(target=run, args=(w,)) for w in (
                lambda: store.memories.set_vectors(ids, _unit(np.random.default_rng(1), len(ids), dims), "m"),
                lambda: store.memories.remove(list(reversed(ids))))]
            for t in writers:
                t.start()
            for t in writers:
                t.join()
            assert not failed, failed
            assert store.memories.fetch(ids) == {}


def test_a_transaction_postgres_rolls_back_is_said_so_not_called_a_connection_failure(pg_url):
    with Memory.open(pg_url) as mem, pytest.raises(StorageError, match="rolled the transaction back: deadlock"):
        mem._store.run("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40P01', MESSAGE = 'deadlock detected'; END $$")


def test_a_hits_session_neighbours_are_sought_from_its_own_turn_not_from_the_sessions_end(pg_url):
    """The turns just before and after a hit are two index seeks that start at the hit's time: a hit early in
    a long session does not walk back over every later turn to find the one before it."""
    from datetime import timedelta

    t0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    with Memory.open(pg_url) as mem:
        store = mem._store
        turns = mem.add_many([{"content": f"turn {i}", "user_id": "ann", "session_id": "s1",
                               "created_at": t0 + timedelta(seconds=i)} for i in range(400)], dedup=False)
        store.run("VACUUM ANALYZE memories")
        issued, run = [], store.run
        store.run = lambda sql, params=(), **kw: (issued.append((sql, params)), run(sql, params, **kw))[1]
        ann = Filters(scopes=["user:ann"])
        assert store.memories.session_neighbors([turns[5].id], ann) == {turns[5].id: [turns[4].id, turns[6].id]}
        del store.run
        [(sql, params)] = issued
        plan = store.run("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0]
        nodes, walked = [plan[0]["Plan"]], 0
        while nodes:
            node = nodes.pop()
            nodes += node.get("Plans", [])
            if node.get("Index Name", "memories_pkey") != "memories_pkey":  # the turns' index, by session or by time
                walked += node.get("Rows Removed by Filter", 0) + node["Actual Rows"]
        assert walked <= 8, plan  # each seek reads a few turns about the hit's time; not the 394 after it
