"""The words of the scopes a process searches, held in its memory (storage/pg_text.py), and the change
feed that keeps them exact (storage/pg_changes.py): on a real PostgreSQL, against the SQL keyword leg."""

from __future__ import annotations

import random
from datetime import timedelta

import psycopg
import pytest

from clawrecall import Memory
from clawrecall._time import utcnow
from clawrecall.storage import pg_text
from clawrecall.storage.filters import Filters
from clawrecall.storage.pg_changes import read_changes
from clawrecall.storage.pg_text import _COLUMNS

pytestmark = pytest.mark.usefixtures("pg_url")

WORDS = ("granite project alice owns climbing trip budget deadline coffee oolong tea garden boat piano "
         "report review launch berlin paris meeting design kernel python rust memory").split()
QUERIES = ["granite project", "alice owns the boat", "coffee or tea", "review the launch report in berlin",
           "python rust kernel", "deadline", "oolong", "piano garden boat trip", "nothing matches this xyzzy",
           "don granite",  # "don" is a stopword to PostgreSQL's english configuration, not to the query's analysis
           "the"]
ALLOWED = Filters(scopes=["user:alice"])


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 30))]  # repeated words, lengths 1-30
        out.append(" ".join(words))
    return out


def _open(url: str, **postgres) -> Memory:
    return Memory.open(url, embedding={"provider": "hash"}, postgres=postgres)


def _pairs(found: list) -> list[tuple[str, float]]:
    return [(c.id, c.score) for c in found]


def _changes(mem: Memory, since, scope: str = "user:alice"):
    return read_changes(mem.store, {scope: since}, _COLUMNS)[scope]


def _same(held: Memory, plain: Memory, query: str, filters: Filters, k: int = 20) -> list[tuple[str, float]]:
    """The held answer, asserted equal (ids, order and scores to the bit) to the SQL leg's."""
    a = _pairs(held.store.text_candidates(query, filters, k))
    assert a == _pairs(plain.store.text_candidates(query, filters, k)), (query, filters)
    return a


def test_held_words_rank_exactly_as_the_sql_leg(pg_url):
    """For filters held in memory, several scopes, an unknown scope and deleted rows: the same ids in the same
    order with the same scores; a word PostgreSQL makes two lexemes of, or a filter only SQL checks, goes to SQL."""
    with _open(pg_url) as held, _open(pg_url, text_cache_mb=0) as plain:
        texts = _texts(240, 1)
        rows = held.add_many([{"content": t, "user_id": ("alice", "bob", "carol")[i % 3],
                               "category": ("fact", "preference")[i % 2], "tags": [f"t{i % 4}"],
                               "session_id": f"s{i % 5}"} for i, t in enumerate(texts)], dedup=False)
        held.delete(rows[0].id, user_id="alice")
        later = utcnow() - timedelta(days=1)
        held.store.run("UPDATE memories SET expires_at = %s WHERE id = %s", (later, rows[3].id))  # expired
        filters = [ALLOWED, Filters(scopes=["user:alice", "user:bob"], categories=["fact"]),
                   Filters(scopes=["user:alice"], include_deleted=True), Filters(scopes=["user:alice"], include_expired=True),
                   Filters(scopes=["user:carol"], since=held.get(rows[100].id).created_at), Filters(scopes=["user:nobody"]),
                   Filters(scopes=["user:alice", "user:alice"])]
        for f in filters:
            for query in QUERIES:
                for _ in range(2):  # held from the second search
                    _same(held, plain, query, f)
        text = held.store._held_text
        assert {"user:alice", "user:bob", "user:carol"} <= set(text._held)
        assert text.candidates(["granite"], ALLOWED, 5) is not None
        assert text.candidates(["foo_bar"], ALLOWED, 5) is None  # 'foo' & 'bar' to to_tsquery
        _same(held, plain, "foo_bar granite", ALLOWED)
        tagged = Filters(scopes=["user:alice"], tags=["t1"])  # tags are checked in SQL
        assert text.candidates(["granite"], tagged, 5) is None
        _same(held, plain, "granite", tagged)
        assert rows[0].id not in {i for i, _ in _same(held, plain, texts[0], ALLOWED, 240)}
        assert rows[0].id in {i for i, _ in _same(held, plain, texts[0], Filters(scopes=["user:alice"], include_deleted=True), 240)}
        twice = _pairs(held.store.text_candidates("granite project", Filters(scopes=["user:alice", "user:alice"]), 100))
        assert len(twice) == len({i for i, _ in twice})  # each row once


def test_held_words_see_every_write_of_another_process(pg_url):
    """Another store inserts, edits, soft- and hard-deletes, moves a row to another scope and back, and commits a
    transaction that began before a search and ended after it: each next search answers as SQL does."""
    with _open(pg_url) as reader, _open(pg_url) as writer, _open(pg_url) as other, \
            _open(pg_url, text_cache_mb=0) as plain:
        writer.add_many([{"content": t, "user_id": "alice"} for t in _texts(60, 2)], dedup=False)
        for _ in range(2):
            _same(reader, plain, "oolong garden", ALLOWED)
        assert "user:alice" in reader.store._held_text._held

        [new] = writer.add_many([{"content": "oolong oolong oolong garden", "user_id": "alice"}], dedup=False)
        assert _same(reader, plain, "oolong garden", ALLOWED)[0][0] == new.id  # an insert
        writer.update(new.id, content="espresso", user_id="alice")
        assert new.id not in dict(_same(reader, plain, "oolong garden", ALLOWED, 100))  # an edit: its words changed
        assert _same(reader, plain, "espresso", ALLOWED)[0][0] == new.id
        writer.delete(new.id, user_id="alice")
        assert _same(reader, plain, "espresso", ALLOWED) == []  # a soft delete
        [gone] = writer.add_many([{"content": "zither zither", "user_id": "alice"}], dedup=False)
        assert _same(reader, plain, "zither", ALLOWED)[0][0] == gone.id
        writer.store.run("DELETE FROM memories WHERE id = %s", (gone.id,))
        assert _same(reader, plain, "zither", ALLOWED) == []  # a hard delete

        [moving] = writer.add_many([{"content": "marimba", "user_id": "alice"}], dedup=False)
        assert _same(reader, plain, "marimba", ALLOWED)[0][0] == moving.id
        bob = Filters(scopes=["user:bob"])
        for _ in range(2):
            _same(reader, plain, "marimba", bob)
        writer.store.run("UPDATE memories SET scope = 'user:bob' WHERE id = %s", (moving.id,))
        assert _same(reader, plain, "marimba", ALLOWED) == []
        assert _same(reader, plain, "marimba", bob)[0][0] == moving.id
        writer.store.run("UPDATE memories SET scope = 'user:alice' WHERE id = %s", (moving.id,))
        assert _same(reader, plain, "marimba", ALLOWED)[0][0] == moving.id  # back, bob's scope not searched since
        assert _same(reader, plain, "marimba", bob) == []

        with writer.store.transaction():  # writes first, commits last
            [late] = writer.add_many([{"content": "harpsichord", "user_id": "alice"}], dedup=False)
            [early] = other.add_many([{"content": "harpsichord harpsichord", "user_id": "alice"}], dedup=False)
            assert [i for i, _ in _same(reader, plain, "harpsichord", ALLOWED)] == [early.id]
        assert {i for i, _ in _same(reader, plain, "harpsichord", ALLOWED)} == {late.id, early.id}


def test_a_search_reads_only_what_changed_since_the_last_one(pg_url):
    with _open(pg_url) as mem:
        rows = mem.add_many([{"content": t, "user_id": "alice"} for t in _texts(30, 3)], dedup=False)
        first = _changes(mem, None)
        assert first.whole and len(first.rows) == 30
        assert _changes(mem, first.since).rows == []  # nothing written since
        mem.update(rows[4].id, importance=0.9, user_id="alice")
        mem.store.run("DELETE FROM memories WHERE id = %s", (rows[5].id,))
        changes = _changes(mem, first.since)
        assert not changes.whole and [r[0] for r in changes.rows] == [rows[4].id] and changes.departed == [rows[5].id]
        assert changes.since.xmax > first.since.xmax and not changes.stale

        for _ in range(2):
            mem.store.text_candidates("granite", ALLOWED, 5)
        held = mem.store._held_text._held["user:alice"]
        mem.update(rows[6].id, importance=0.8, user_id="alice")  # the same words: the row keeps its slot
        slot = held.slots[rows[6].id]
        mem.store.text_candidates("granite", ALLOWED, 5)
        assert held.slots[rows[6].id] == slot and held.dead == 0


def test_a_scope_last_read_before_pruned_departures_is_read_whole(pg_url):
    """Departures a day old go at the next hard delete; a read from before them cannot trust the rest: the held
    words and the held vectors read the scope again."""
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0, vector_cache_mb=0) as plain:
        rows = mem.add_many([{"content": f"kettle {i}", "user_id": "alice"} for i in range(10)], dedup=False)
        query = mem.embedder.embed_one("kettle")
        before = _changes(mem, None)
        for _ in range(2):
            _same(mem, plain, "kettle", ALLOWED)
            mem.store.vector_candidates(query, ALLOWED, 10)
        assert mem.store._held_vectors._index.rows(["user:alice"]) == 10
        mem.store.run("DELETE FROM memories WHERE id = %s", (rows[1].id,))
        mem.store.run("UPDATE memory_departures SET departed_at = now() - interval '2 days'")
        mem.store.remove([rows[2].id])  # prunes the old departure (rows[1]'s), keeps its own
        assert [r[0] for r in mem.store.run("SELECT id::text FROM memory_departures")] == [rows[2].id]
        assert int(mem.store.get_meta("departures_pruned")) >= before.since.xmax  # the pruning transaction
        assert _changes(mem, before.since).stale
        found = {i for i, _ in _same(mem, plain, "kettle", ALLOWED)}
        assert len(found) == 8 and not found & {rows[1].id, rows[2].id}
        mem.store._held_vectors._held["user:alice"] = before.since  # as if its last read came before the pruning
        nearest = {c.id for c in mem.store.vector_candidates(query, ALLOWED, 10)}
        assert nearest == {c.id for c in plain.store.vector_candidates(query, ALLOWED, 10)} and len(nearest) == 8


def test_held_words_make_room_and_a_scope_too_large_stays_in_sql(pg_url):
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        mem.add_many([{"content": t, "user_id": ("alice", "bob", "carol")[i % 3]} for i, t in enumerate(_texts(300, 4))],
                     dedup=False)
        text = mem.store._held_text
        for _ in range(2):
            mem.store.text_candidates("granite", ALLOWED, 5)
        one = text._held["user:alice"].nbytes()
        text.max_mb = 2.5 * one / 1_000_000  # room for two scopes of 100 rows
        for user in ("alice", "bob", "alice", "carol"):
            f = Filters(scopes=[f"user:{user}"])
            for _ in range(2):
                _same(mem, plain, "granite project", f)
            assert list(text._held)[-1] == f"user:{user}"
        assert set(text._held) == {"user:alice", "user:carol"}  # bob's, searched least recently, made room
        text.max_mb = 100 * pg_text._ROW_BYTES * 2 / 1_000_000 - 1e-6  # less than a 100-row scope may take
        text._held.clear()
        for _ in range(2):
            _same(mem, plain, "granite project", ALLOWED)
        assert text._held == {}


def test_a_search_inside_a_transaction_reads_its_own_writes_and_holds_nothing_of_them(pg_url):
    with _open(pg_url) as mem:
        mem.add_many([{"content": t, "user_id": "alice"} for t in _texts(20, 5)], dedup=False)
        for _ in range(2):
            mem.store.text_candidates("granite", ALLOWED, 5)
        with pytest.raises(RuntimeError):
            with mem.store.transaction():
                [new] = mem.add_many([{"content": "theremin", "user_id": "alice"}], dedup=False)
                assert [c.id for c in mem.store.text_candidates("theremin", ALLOWED, 5)] == [new.id]
                raise RuntimeError("roll back")
        assert mem.store.text_candidates("theremin", ALLOWED, 5) == []
        assert new.id not in mem.store._held_text._held["user:alice"].slots


def test_many_edits_compact_the_held_scope_and_it_still_ranks_as_sql(pg_url):
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        rows = mem.add_many([{"content": t, "user_id": "alice"} for t in _texts(40, 6)], dedup=False)
        for _ in range(2):
            _same(mem, plain, "granite", ALLOWED)
        held = mem.store._held_text._held["user:alice"]
        rng = random.Random(7)
        dead = compacted = False
        for _ in range(80):  # an edit takes a new slot; dead slots and new postings past a share compact them
            mem.update(rows[rng.randrange(40)].id, content=" ".join(rng.choice(WORDS) for _ in range(5)), user_id="alice")
            for query in ("granite project", "oolong tea"):
                _same(mem, plain, query, ALLOWED, 40)
            compacted |= dead and held.dead == 0
            dead |= held.dead > 0
        assert compacted and held.size == len(held.slots) + held.dead


def test_a_scope_with_weighted_words_is_ranked_in_sql(pg_url):
    """The store's trigger never weighs words; a tsvector set by hand with weights stays exact, through SQL."""
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        rows = mem.add_many([{"content": t, "user_id": "alice"} for t in _texts(20, 8)], dedup=False)
        mem.store.run("UPDATE memories SET fts = setweight(fts, 'A') WHERE id = %s", (rows[0].id,))
        for _ in range(3):
            _same(mem, plain, "granite project", ALLOWED)
        assert "user:alice" in mem.store._held_text._unheld


def test_the_change_feed_survives_a_writer_that_is_still_open_when_the_reader_looks(pg_url):
    """A transaction that wrote before a read and commits after it: the next read takes its row, though
    rows written and committed later were read in between."""
    with _open(pg_url) as mem, psycopg.connect(pg_url) as slow:
        mem.add_many([{"content": "first", "user_id": "alice"}], dedup=False)
        start = _changes(mem, None)
        slow.execute("INSERT INTO memories (id, scope, content, kind, category, importance, confidence, created_at, updated_at) "
                     "SELECT gen_random_uuid(), 'user:alice', 'slow', 'memory', 'fact', 0.5, 1, now(), now()")
        [quick] = mem.add_many([{"content": "quick", "user_id": "alice"}], dedup=False)
        seen = _changes(mem, start.since)
        assert [r[0] for r in seen.rows] == [quick.id]
        slow.commit()
        after = _changes(mem, seen.since)
        [slow_id] = [r[0] for r in mem.store.run("SELECT id::text FROM memories WHERE content = 'slow'")]
        assert not after.whole and slow_id in [r[0] for r in after.rows]


def test_a_large_scope_is_read_in_the_background_while_sql_answers(pg_url, monkeypatch):
    import threading

    monkeypatch.setattr(pg_text, "_READ_NOW", 10)  # 30 rows: "large"
    go = threading.Event()
    read = pg_text._read
    monkeypatch.setattr(pg_text, "_read", lambda store, scope: go.wait(30) and read(store, scope))
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        mem.add_many([{"content": t, "user_id": "alice"} for t in _texts(30, 9)], dedup=False)
        text = mem.store._held_text
        for _ in range(2):
            _same(mem, plain, "granite project", ALLOWED)
        reading = text._loading["user:alice"]  # started by the second search, which SQL answered
        assert text.candidates(["granite"], ALLOWED, 5) is None  # still reading: SQL
        [new] = mem.add_many([{"content": "granite granite granite", "user_id": "alice"}], dedup=False)
        go.set()
        reading.join(timeout=30)
        assert "user:alice" in text._held and not text._loading
        assert text.candidates(["granite"], ALLOWED, 5) is not None
        assert _same(mem, plain, "granite", ALLOWED)[0][0] == new.id  # written before it read: in what it read


def test_a_row_back_in_its_scope_is_not_dropped_by_its_old_departure_read_again(pg_url):
    """X leaves alice (a transaction that took its id later), then comes back (one that took its id earlier),
    while a third stays open: the departure is read again after the return was applied. It must not drop X."""
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0, vector_cache_mb=0) as plain, \
            psycopg.connect(pg_url) as t1, psycopg.connect(pg_url) as t2, psycopg.connect(pg_url) as t3:
        rows = mem.add_many([{"content": f"ocarina {i}", "user_id": "alice"} for i in range(6)], dedup=False)
        x = rows[0].id
        query = mem.embedder.embed_one("ocarina 0")
        for _ in range(2):
            _same(mem, plain, "ocarina", ALLOWED)
            mem.store.vector_candidates(query, ALLOWED, 10)
        t1.execute("SELECT pg_current_xact_id()")  # takes its id first
        t3.execute("SELECT pg_current_xact_id()")  # and this one stays open throughout
        t2.execute("UPDATE memories SET scope = 'user:bob' WHERE id = %s", (x,))
        t2.commit()
        assert x not in dict(_same(mem, plain, "ocarina", ALLOWED))
        t1.execute("UPDATE memories SET scope = 'user:alice' WHERE id = %s", (x,))
        t1.commit()
        for _ in range(3):  # while t3 is open, and after
            assert x in dict(_same(mem, plain, "ocarina", ALLOWED))
            assert x in {c.id for c in mem.store.vector_candidates(query, ALLOWED, 10)}
        t3.rollback()
        assert x in dict(_same(mem, plain, "ocarina", ALLOWED))


def test_a_transaction_left_open_does_not_make_every_read_take_every_row_since(pg_url):
    with _open(pg_url) as mem, psycopg.connect(pg_url) as idle:
        mem.add_many([{"content": "first", "user_id": "alice"}], dedup=False)
        idle.execute("SELECT pg_current_xact_id()")  # holds an id, writes nothing, stays open
        start = _changes(mem, None)
        mem.add_many([{"content": f"row {i}", "user_id": "alice"} for i in range(20)], dedup=False)
        seen = _changes(mem, start.since)
        assert len(seen.rows) == 20
        assert _changes(mem, seen.since).rows == []  # not the 20 again: only what the open transaction writes
        idle.rollback()


def test_ids_from_another_cluster_neither_hide_a_write_nor_force_whole_reads(pg_url):
    """A store restored from a dump keeps the old cluster's transaction ids, which may be above this one's:
    those rows, departures and pruning horizon are read whole once and never make a read stale."""
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0, vector_cache_mb=0) as plain:
        rows = mem.add_many([{"content": f"bassoon {i}", "user_id": "alice"} for i in range(8)], dedup=False)
        future = str(10**12)
        mem.store.run("ALTER TABLE memories DISABLE TRIGGER memories_written")
        mem.store.run("UPDATE memories SET wxid = %s::xid8 WHERE id = %s", (future, rows[0].id))
        mem.store.run("ALTER TABLE memories ENABLE TRIGGER memories_written")
        mem.store.run("INSERT INTO memory_departures (scope, id, wxid) VALUES ('user:alice', %s, %s::xid8)", (rows[1].id, future))
        mem.store.set_meta("departures_pruned", future)
        for _ in range(2):
            _same(mem, plain, "bassoon", ALLOWED)
        since = mem.store._held_text._held["user:alice"].since
        changes = _changes(mem, since)
        assert not changes.stale and changes.rows == [] and changes.departed == []
        mem.update(rows[0].id, content="bassoon bassoon", user_id="alice")  # written here: read
        assert _same(mem, plain, "bassoon", ALLOWED)[0][0] == rows[0].id
        assert rows[1].id in dict(_same(mem, plain, "bassoon", ALLOWED))
        # a departure of the old cluster's that this one's ids reach: its row is here, and stays
        soon = int(mem.store.run("SELECT pg_current_xact_id()::text")[0][0]) + 3
        mem.store.run("INSERT INTO memory_departures (scope, id, wxid) VALUES ('user:alice', %s, %s::xid8)",
                       (rows[2].id, str(soon)))
        for i in range(5):
            mem.add_many([{"content": f"filler {i}", "user_id": "bob"}], dedup=False)
        assert rows[2].id in dict(_same(mem, plain, "bassoon", ALLOWED))


def test_a_server_restarted_or_gone_back_in_time_and_a_truncate_make_held_scopes_read_whole(pg_url):
    from dataclasses import replace

    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        mem.add_many([{"content": f"tuba {i}", "user_id": "alice"} for i in range(5)], dedup=False)
        now = _changes(mem, None).since
        assert _changes(mem, replace(now, started="another start")).stale  # the server started since
        assert _changes(mem, replace(now, xmax=now.xmax + 1000)).stale  # its ids went back
        assert not _changes(mem, now).stale
        for _ in range(2):
            _same(mem, plain, "tuba", ALLOWED)
        mem.store.run("TRUNCATE memories CASCADE")
        assert _same(mem, plain, "tuba", ALLOWED) == []


def test_an_erasure_leaves_no_departure_naming_the_person_and_held_scopes_follow(pg_url):
    with _open(pg_url) as mem, _open(pg_url, text_cache_mb=0) as plain:
        mem.add_many([{"content": f"cello {i}", "user_id": "carol"} for i in range(5)], dedup=False)
        mem.add_many([{"content": f"cello {i}", "user_id": "dave"} for i in range(3)], dedup=False)
        carol, dave = Filters(scopes=["user:carol"]), Filters(scopes=["user:dave"])
        for _ in range(2):
            _same(mem, plain, "cello", carol)
            _same(mem, plain, "cello", dave)
        mem.store.run("DELETE FROM memories WHERE content = 'cello 4' AND scope = 'user:carol'")  # a departure of its own
        mem.erase(user_id="carol")
        assert mem.store.run("SELECT count(*) FROM memory_departures WHERE scope = 'user:carol'")[0][0] == 0
        assert _same(mem, plain, "cello", carol) == []
        assert len(_same(mem, plain, "cello", dave)) == 3


def test_after_an_erasure_a_scope_is_read_whole_once_though_an_older_transaction_stays_open(pg_url):
    """The erasure removed departures: a read that did not see it reads whole; one after it does not, even while
    a transaction older than the erasure keeps every snapshot's xmin below it."""
    with _open(pg_url) as mem, psycopg.connect(pg_url) as idle:
        mem.add_many([{"content": f"harp {i}", "user_id": "carol"} for i in range(4)], dedup=False)
        mem.add_many([{"content": "harp", "user_id": "dave"}], dedup=False)
        before = _changes(mem, None, "user:carol").since
        idle.execute("SELECT pg_current_xact_id()")  # older than the erasure, open throughout
        mem.erase(user_id="dave")
        assert _changes(mem, before, "user:carol").stale
        after = _changes(mem, None, "user:carol").since
        assert after.xmin <= int(mem.store.get_meta("departures_pruned"))  # the open transaction holds xmin back
        assert not _changes(mem, after, "user:carol").stale
        idle.rollback()


def test_a_standby_snapshot_counts_every_transaction_from_its_xmin_as_running():
    from clawrecall.storage.pg_changes import Snapshot

    primary = Snapshot.parse("761:763:761/2026-11-27 15:22:50+00/false")
    assert (primary.xmin, primary.xmax, primary.running) == (761, 763, (761,)) and primary.saw(762)
    standby = Snapshot.parse("761:763:/2026-11-27 15:22:50+00/true")  # 761 running, not listed on a standby
    assert (standby.xmin, standby.xmax, standby.running) == (761, 761, ()) and not standby.saw(761) and not standby.saw(762)
