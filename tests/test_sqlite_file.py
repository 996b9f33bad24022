"""The SQLite file: WAL checkpoints run on the store's own thread, never inside a commit, and stop
with the store; a write the file refuses, or a damaged file, is a clear error."""

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
    assert mem.store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WRITER_AUTOCHECKPOINT
    mem.add_many([{"content": f"Checkpointed note {i}"} for i in range(50)], dedup=False)
    deadline = time.monotonic() + 10
    while mem.store._checkpointer.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mem.store._checkpointer.runs >= 1
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
    while mem.store._checkpointer.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    mem.close()
    assert mem.store._checkpointer.runs >= 1
    assert not (tmp_path / "elsewhere" / "relative.db").exists()


def test_a_write_the_file_refuses_is_one_clear_error_and_the_store_stays_usable(tmp_path):
    with Memory.open(tmp_path / "m.db") as mem:
        kept = mem.add("A memory written before the file became read-only")
        mem.store._conn.execute("PRAGMA query_only = ON")  # SQLite refuses writes as for a read-only file
        with pytest.raises(StorageError, match=r"^cannot write to SQLite database .*m\.db: attempt to write a readonly database \(is the file, or its folder, read-only\?\)$"):
            mem.add("refused")
        assert [r.id for r in mem.list()] == [kept.id]
        mem.store._conn.execute("PRAGMA query_only = OFF")
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
        mem.forget(doomed, user_id="alice")
        files = [p for p in tmp_path.iterdir() if p.name.startswith("gdpr.db")]
        assert not [p.name for p in files if b"qzxvwk" in p.read_bytes() or b"Diagnosis" in p.read_bytes()]
        assert mem.search("qzxvwk", user_id="alice", mode="bm25") == []
        assert mem.count(user_id="alice", scope="user:alice") == 1
    assert b"qzxvwk" not in path.read_bytes()


def test_a_damaged_file_is_one_clear_error(damaged_db):
    with Memory.open(damaged_db) as mem:
        with pytest.raises(StorageError, match=r"^SQLite database .*damaged\.db is damaged: database disk image "
                                               r"is malformed \(`clawrecall doctor` checks it\)$"):
            mem.search("fox")


def test_integrity_problems_name_what_quick_check_and_the_full_text_checks_find(tmp_path, damaged_db):
    with Memory.open(tmp_path / "sound.db") as mem:
        mem.add("A sound store")
        assert mem.store.integrity_problems() == []
        # a full-text row with no memory behind it: every page is sound, the index is not
        mem.store._run("INSERT INTO memories_trgm (rowid, content) VALUES (99999, 'a ghost row')")
        assert mem.store.integrity_problems() == ["full-text index memories_trgm: database disk image is malformed"]
    with Memory.open(damaged_db) as mem:
        problems = mem.store.integrity_problems()
        assert problems[0] == "quick_check: database disk image is malformed"
