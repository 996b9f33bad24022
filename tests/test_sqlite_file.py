"""The SQLite file: WAL checkpoints run on the store's own thread, never inside a commit, and stop
with the store; a write the file refuses, or a damaged file, is a clear error."""

import sqlite3
import threading
import time

import pytest

from clawrecall import Memory, StorageError
from clawrecall.storage.checkpoint import WRITER_AUTOCHECKPOINT


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "clawrecall-checkpoint"]


def test_writes_are_checkpointed_in_the_background_and_the_thread_stops_on_close(tmp_path):
    path = tmp_path / "wal.db"
    before = len(_checkpoint_threads())
    mem = Memory.open(path)
    assert path.stat().st_size < 50 * 1536
    assert mem._store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WRITER_AUTOCHECKPOINT
    mem.add_many([{"content": f"Checkpointed note {i}"} for i in range(50)], dedup=False)
    deadline = time.monotonic() + 10
    while mem._store._checkpointer.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mem._store._checkpointer.runs >= 1
    # the pages reached the database file itself (before, all of them were in the WAL)
    assert path.stat().st_size > 50 * 1536
    mem.close()
    assert len(_checkpoint_threads()) == before
    assert not path.with_name("wal.db-wal").exists()  # the last close checkpointed and removed it
    with Memory.open(path) as again:
        assert again.count() == 50


def test_a_store_that_only_reads_starts_no_thread(tmp_path):
    path = tmp_path / "read.db"
    with Memory.open(path) as mem:
        mem.add("One memory")
    before = len(_checkpoint_threads())
    with Memory.open(path) as mem:
        assert mem.count() == 1
        assert len(_checkpoint_threads()) == before


def test_the_checkpoint_thread_follows_the_file_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    Memory.open("relative.db").close()  # created and migrated: opening it again writes nothing
    mem = Memory.open("relative.db")
    monkeypatch.chdir(tmp_path / "elsewhere")  # before the first write starts the thread
    mem.add("Written after the working directory changed")
    deadline = time.monotonic() + 10
    while mem._store._checkpointer.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    mem.close()
    assert mem._store._checkpointer.runs >= 1
    assert not (tmp_path / "elsewhere" / "relative.db").exists()


def test_a_write_the_file_refuses_is_one_clear_error_and_the_store_stays_usable(tmp_path):
    with Memory.open(tmp_path / "m.db") as mem:
        kept = mem.add("A memory written before the file became read-only")
        mem._store._conn.execute("PRAGMA query_only = ON")  # SQLite refuses writes as for a read-only file
        with pytest.raises(StorageError, match=r"^cannot write to SQLite database .*m\.db: attempt to write a readonly database \(is the file, or its folder, read-only\?\)$"):
            mem.add("refused")
        assert [r.id for r in mem.list()] == [kept.id]
        mem._store._conn.execute("PRAGMA query_only = OFF")
        assert mem.add("accepted again").action == "created"


def test_a_forgotten_text_is_nowhere_in_the_files(tmp_path):
    """GDPR: after forget, no byte of the file or its WAL spells the text, and neither full-text index
    keeps its terms (FTS5 keeps a deleted row's terms in its segments until they are merged)."""
    path = tmp_path / "gdpr.db"
    secret = "Diagnosis qzxvwk pending for the patient"
    with Memory.open(path) as mem:
        mem.add_many([{"content": f"Ordinary note {i} about the weather"} for i in range(200)], dedup=False)
        doomed = mem.add(secret, user_id="alice").id
        mem.add("Another note written after the secret one", user_id="alice")
        mem.search("qzxvwk", user_id="alice")
        mem.forget(doomed, user_id="alice")  # the logged search that found it goes too
        files = [p for p in tmp_path.iterdir() if p.name.startswith("gdpr.db")]
        assert not [p.name for p in files if b"qzxvwk" in p.read_bytes() or b"Diagnosis" in p.read_bytes()]
        assert mem.count(user_id="alice", scope="user:alice") == 1
    assert b"qzxvwk" not in path.read_bytes()
    # a later search is alice's own words, logged as such: this one, unlogged, finds nothing in the index
    with Memory.open(path, insight={"search_log": False}) as mem:
        assert mem.search("qzxvwk", user_id="alice", mode="bm25") == []
    assert b"qzxvwk" not in path.read_bytes()


def test_a_damaged_file_is_one_clear_error(damaged_db):
    with Memory.open(damaged_db) as mem:
        with pytest.raises(StorageError, match=r"^SQLite database .*damaged\.db is damaged: database disk image "
                                               r"is malformed \(`clawrecall doctor` checks it\)$"):
            mem.search("fox")


def test_integrity_problems_name_what_quick_check_and_the_full_text_checks_find(tmp_path, damaged_db):
    with Memory.open(tmp_path / "sound.db") as mem:
        mem.add("A sound store")
        assert mem._store.integrity_problems() == []
        # a full-text row with no memory behind it: every page is sound, the index is not
        mem._store.run("INSERT INTO memories_trgm (rowid, content) VALUES (99999, 'a ghost row')")
        assert mem._store.integrity_problems() == ["full-text index memories_trgm: database disk image is malformed"]
    with Memory.open(damaged_db) as mem:
        problems = mem._store.integrity_problems()
        assert problems[0] == "quick_check: database disk image is malformed"


def _hits(mem, query, user):
    from clawrecall import Caller

    return [(h.memory.id, h.score) for h in mem.search(query, caller=Caller(user, "main"), limit=10)]


def test_a_large_scope_runs_its_keyword_legs_on_a_reader_beside_the_vector_leg(tmp_path, monkeypatch):
    """The same hits as inline; inside a transaction inline, seeing its writes; on a closed store an error."""
    from clawrecall import Caller
    from clawrecall.storage import Filters, sqlite as backend

    with Memory.open(tmp_path / "m.db") as mem:
        alice = Caller("alice", "main")
        mem.add_many([{"content": f"Alice's note {i} about the harbour ferry timetable", "user_id": "alice"}
                      for i in range(60)], dedup=False)
        mem.add_many([{"content": f"Bob's note {i} about the harbour", "user_id": "bob"} for i in range(10)], dedup=False)
        inline = _hits(mem, "harbour ferry", "alice")
        threads = []
        text_candidates = mem._store.text_candidates
        monkeypatch.setattr(mem._store, "text_candidates", lambda *a: threads.append(threading.current_thread().name) or text_candidates(*a))
        assert _hits(mem, "harbour ferry", "alice") == inline and threads == ["MainThread"]  # 60 rows: inline
        monkeypatch.setattr(backend, "_BESIDE_ROWS", 50)
        assert _hits(mem, "harbour ferry", "alice") == inline
        assert threads[-1].startswith("clawrecall-sqlite")
        assert _hits(mem, "harbour", "bob")[0][0] in {m.id for m in mem.list(caller=Caller("bob", "main"))}
        assert threads[-1] == "MainThread"  # bob's 10 rows: inline
        with mem._store.transaction():
            mine = mem.add("Alice's uncommitted harbour ferry pass", caller=alice, dedup=False)
            assert mine.id in {h[0] for h in _hits(mem, "uncommitted ferry pass", "alice")}
            assert threads[-1] == "MainThread"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # the reader never writes
            mem._store._reader_call(lambda: mem._store.run("DELETE FROM memories"))
        assert mem.count(caller=alice) == 61
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):  # a closed store fails as it does for any call
        mem._store.beside(lambda: mem._store.memories.count(Filters()), Filters(scopes=["user:alice"])).result()
    assert not [t for t in threading.enumerate() if t.name.startswith("clawrecall-sqlite")]  # stopped on close


def test_a_small_scope_runs_its_keyword_legs_beside_a_slow_query_embedding(tmp_path, monkeypatch):
    """A model leaves the GIL while it embeds the query: the keyword legs, their hits' records and trigram shares
    are read meanwhile on the reader, whatever the scope's size; a query embedded at once (cached, or a fast
    embedder) keeps them inline. The same hits either way."""
    with Memory.open(tmp_path / "m.db", embedding={"query_cache_size": 0}) as mem:  # each query embedded anew
        mem.add_many([{"content": f"Alice's note {i} about the harbour ferry timetable", "user_id": "alice"}
                      for i in range(30)], dedup=False)
        inline = _hits(mem, "harbour ferry", "alice")
        threads: list[str] = []
        text_candidates = mem._store.text_candidates
        monkeypatch.setattr(mem._store, "text_candidates", lambda *a: threads.append(threading.current_thread().name) or text_candidates(*a))
        embedder = mem._embedding.embedder
        monkeypatch.setattr(embedder, "_query_ms", 8.0)  # what the local model's queries took lately
        assert embedder.query_ms(["harbour ferry"]) == 8.0
        assert _hits(mem, "harbour ferry", "alice") == inline and threads[-1].startswith("clawrecall-sqlite")
        monkeypatch.setattr(embedder, "_query_ms", 0.05)  # the hash embedder's
        assert _hits(mem, "harbour ferry", "alice") == inline and threads[-1] == "MainThread"


def test_the_reader_opens_the_stores_own_file_after_a_change_of_directory(tmp_path, monkeypatch):
    from clawrecall.storage import sqlite as backend

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.setattr(backend, "_BESIDE_ROWS", 10)
    with Memory.open("rel.db") as mem:
        mem.add_many([{"content": f"Note {i} on the night train to Vienna"} for i in range(20)], dedup=False)
        mem.search("night train", limit=3)  # loads the vector index: the next search runs beside
        monkeypatch.chdir(tmp_path / "b")
        assert len(mem.search("night train Vienna", limit=3)) == 3
        assert mem._store._reader is not None
    assert not (tmp_path / "b" / "rel.db").exists()


def test_the_keyword_leg_leaves_out_the_scope_clause_when_the_scopes_hold_most_rows(tmp_path, monkeypatch):
    """The answer is the same either way; only the cost differs."""
    with Memory.open(tmp_path / "m.db") as mem:
        mem.add_many([{"content": f"Carol's garden note {i}: tomatoes and basil", "user_id": "carol"} for i in range(40)],
                     dedup=False)
        mem.add_many([{"content": f"Dan's garden note {i}: basil only", "user_id": "dan"} for i in range(5)], dedup=False)
        mem.add("Global: the garden tap is off in winter")
        matches = []
        fts = mem._store._fts
        def bm25_fts(table, match, *a, every_match=None, first=None):
            if table == "memories_fts":
                matches.append(match)
                assert every_match is None or "scope_key" in every_match  # the fallback over every match still narrows
            return fts(table, match, *a, every_match=every_match, first=first)

        monkeypatch.setattr(mem._store, "_fts", bm25_fts)
        free = {u: _hits(mem, "garden basil tomatoes", u) for u in ("carol", "dan")}
        assert len(matches) == 2 and "scope_key" not in matches[0] and "scope_key" in matches[1]  # carol's: 41 of 46 rows
        monkeypatch.setattr(mem._store, "_indexed_rows", lambda scopes: 0)  # sizes unknown: the clause always
        matches.clear()
        assert {u: _hits(mem, "garden basil tomatoes", u) for u in ("carol", "dan")} == free
        assert len(matches) == 2 and all("scope_key" in m for m in matches)
        assert len(free["carol"]) == 10 and len(free["dan"]) == 6  # dan's five and the global one, never carol's


def test_the_bm25_leg_ranks_first_without_the_words_in_half_the_rows(tmp_path, monkeypatch):
    """FTS5 gives a word in at least half the rows an IDF of 10⁻⁶ but scores every row that has it: the leg
    ranks the other words' matches first, and finds the same rows, with the same scores but for 10⁻⁵, as
    ranking every word's matches; when fewer than asked have another word, it ranks them all, as before."""
    from clawrecall.storage import Filters

    with Memory.open(tmp_path / "m.db") as mem:
        items = [f"Release notes {i}: the release ships on time" for i in range(40)]
        items += [f"Release {i} of the amber build ships late" + " again" * i for i in range(8)]
        items += ["The amber falcon is a release name", "Falcon tests are flaky"]
        items += [f"Unrelated note {i} about lunch" for i in range(30)]
        added = mem.add_many([{"content": text} for text in items], dedup=False)
        store = mem._store
        ranked = []
        run = store.run
        def spy(sql, params=()):
            if "ORDER BY bm25" in sql:
                ranked.append(params[0])
            return run(sql, params)

        monkeypatch.setattr(store, "run", spy)
        query = "when does the amber falcon release ship?"
        pruned = {k: store.text_candidates(query, Filters(), k) for k in (5, 10, 30)}
        # for 5 and 10 the 10 rows with "amber" or "falcon" are ranked alone; fewer than 30 have them: every word at once
        assert len(ranked) == 3 and ranked[0] == ranked[1] and '"release"' in ranked[2]
        assert 'release' not in ranked[0] and 'ship' not in ranked[0] and '"amber" OR "falcon"' in ranked[0]
        # "lunch" is in 30 of 80 rows, "release" in 49, "ship" in 48 (stemmed: "ships"); only such words left, or
        # fewer rows with the others than asked: all kept
        assert store._ranking_terms(["lunch", "release"], 30) == ["lunch"]
        assert store._ranking_terms(["lunch", "release"], 31) == ["lunch", "release"]
        assert store._ranking_terms(["release", "ship"], 1) == ["release", "ship"]
        _same_as_every_word(store, monkeypatch, query, pruned)
        for record in added[40:43]:
            mem.delete(record.id)  # 7 rows with "amber" or "falcon" are left to find: too few for 10
        ranked.clear()
        pruned = {10: store.text_candidates(query, Filters(), 10)}
        assert len(ranked) == 2 and "release" not in ranked[0] and "release" in ranked[1]
        _same_as_every_word(store, monkeypatch, query, pruned)


def _same_as_every_word(store, monkeypatch, query, pruned):
    from clawrecall.storage import Filters

    with monkeypatch.context() as every_word:
        every_word.setattr(store, "_ranking_terms", lambda terms, k: terms)  # as before
        for k, hits in pruned.items():
            every = store.text_candidates(query, Filters(), k)
            assert [h.id for h in hits] == [h.id for h in every] and len(hits) == k
            assert all(abs(a.score - b.score) < 1e-5 for a, b in zip(hits, every))


def test_sqlite_exact_search_rows_reaches_the_vector_index(tmp_path):
    with Memory.open(tmp_path / "m.db", sqlite={"exact_search_rows": 100}) as mem:
        added = mem.add_many([{"content": f"Ledger line {i}: invoice {i * 7} paid by wire"} for i in range(1_200)],
                             dedup=False)
        assert mem.search("invoice 147 paid", mode="vector", limit=1)[0].memory.id == added[21].id
        assert mem.search("invoice 147 paid", mode="vector", limit=1)[0].memory.id == added[21].id
        index = mem._store._index
        index.clustering.join()  # the second search started clustering the scope (1,200 rows)
        assert index.exact_rows == 100 and index._parts["global"].lists is not None
        assert mem.search("invoice 147 paid", mode="vector", limit=1)[0].memory.id == added[21].id
    with Memory.open(tmp_path / "m.db") as mem:
        mem.search("invoice 147 paid", mode="vector", limit=1)
        assert mem._store._index.clustering is None  # under the default line: read whole


def test_filters_checked_in_sql_find_as_much_in_a_clustered_scope_as_in_an_exact_one(tmp_path):
    """A session's or a tag's rows may lie in clusters a search does not read: such a search reads every row."""
    from clawrecall.storage import Filters

    path = tmp_path / "m.db"
    words = ["harbour", "ledger", "violin", "compost", "glacier", "tram", "saffron", "kiln", "orbit", "lantern"]
    items = [{"content": f"{words[i % 10]} {words[i // 10 % 10]} {words[i // 100 % 10]} note {i}",
              "session_id": "s1" if i % 40 == 0 else None, "tags": ["audit"] if i % 50 == 0 else []} for i in range(1_200)]

    def leg(mem):
        query = mem._pipeline.embed_queries(["violin glacier note"])[0]
        found = [mem._store.vector_candidates(query, Filters(scopes=["global"], **f), k)  # most of the 30 / 24 rows
                 for f, k in (({"session_id": "s1"}, 25), ({"tags": ["audit"]}, 20))]
        return [({c.id for c in hits}, [round(c.score, 6) for c in hits]) for hits in found]  # rows of equal score may swap

    with Memory.open(path, sqlite={"exact_search_rows": 100}) as mem:
        mem.add_many(items, dedup=False)
        mem.search("note", mode="vector")
        mem.search("note", mode="vector")
        mem._store._index.clustering.join()
        assert mem._store._index._parts["global"].lists is not None
        got = leg(mem)
    with Memory.open(path) as exact:
        want = leg(exact)
    assert got == want and [len(g[1]) for g in got] == [25, 20]
