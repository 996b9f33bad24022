"""mem0's Chroma vector store (`vector_store: {provider: "chroma", config: {path, collection_name}}`) imported
from a real Chroma folder, written here by chromadb as mem0 writes it (its payload in each record's metadata):
row by row through the mapping of its other stores, with its history, vectors reused only when made by the
store's model and of its dimensions, read in pages, a second run adds nothing, and the folder left untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from pathlib import Path

from clawrecall import Memory
from clawrecall.importers import mem0
from clawrecall.importers.data import stable_id

from test_import_conversations import EMPTY, LISBON, PLANNER, SMALL, _mem0_history
from test_import_systems import HASH, STORE_MODEL, _import, _is_vector_of, _stored, _vectors

CODER, BOB = (str(uuid.UUID(int=i)) for i in range(41, 43))


def _vec(text: str) -> list[float]:
    return [float(x) for x in HASH.embed([text], kind="passage")[0]]


def _chroma(folder: Path) -> None:
    """A Chroma folder as mem0's ChromaDB store leaves it: its client and collections made as mem0 makes them
    (no embedding function: mem0 hands the vectors over), a memory added then updated, one deleted, a
    collection of another model's size, and mem0's bookkeeping collection."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.Client(Settings(persist_directory=str(folder), is_persistent=True, anonymized_telemetry=False))
    memories = client.get_or_create_collection("mem0", embedding_function=None)
    memories.add(ids=[LISBON, PLANNER, CODER, EMPTY, BOB], embeddings=[
        _vec("Alice lives in Porto"), _vec("quartz lantern"), _vec("The repo uses pnpm"), _vec("nothing"),
        _vec("Bob's birthday is on May 3"),
    ], metadatas=[
        {"data": "Alice lives in Porto", "hash": "h-porto", "created_at": "2025-03-01T10:00:00-08:00", "user_id": "alice"},
        {"data": "Prefers aisle seats on long flights", "hash": "h-aisle", "created_at": "2025-04-02T08:00:00+00:00",
         "user_id": "alice", "agent_id": "planner", "run_id": "trip-7", "actor_id": "alice", "role": "user",
         "source": "chat"},
        {"data": "The repo uses pnpm", "hash": "h-pnpm", "created_at": "2025-05-05T12:00:00+00:00", "agent_id": "coder"},
        {"hash": "h-none", "created_at": "2025-05-05T12:00:00+00:00", "user_id": "alice"},
        {"data": "Bob's birthday is on May 3", "hash": "h-bob", "created_at": "2025-01-01T00:00:00+00:00",
         "user_id": "bob"},
    ])
    memories.update(ids=[LISBON], embeddings=[_vec("Alice lives in Lisbon")], metadatas=[{  # mem0's update
        "data": "Alice lives in Lisbon", "hash": "h-lisbon", "created_at": "2025-03-01T10:00:00-08:00",
        "updated_at": "2025-06-01T09:00:00+00:00", "user_id": "alice"}])
    memories.delete(ids=[BOB])
    client.get_or_create_collection("mem0_small", embedding_function=None).add(
        ids=[SMALL], embeddings=[[0.1, 0.2, 0.3, 0.4]],
        metadatas=[{"data": "Standup is at 9:30", "created_at": "2025-05-06T09:00:00+00:00", "user_id": "bob"}])
    client.get_or_create_collection("mem0migrations", embedding_function=None).add(
        ids=[str(uuid.UUID(int=99))], embeddings=[[0.0] * 127 + [1.0]], metadatas=[{"user_id": "telemetry-id"}])
    client.close()


def _history(path: Path) -> None:
    """mem0's history of the Qdrant folder's test (Lisbon's ADD and UPDATE, its last messages), and Bob's
    memory, added and deleted."""
    _mem0_history(path)
    db = sqlite3.connect(path)
    db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("h3", BOB, None, "Bob's birthday is on May 3", "ADD", "2025-01-01T00:00:00+00:00", None, 0, None, None),
        ("h4", BOB, "Bob's birthday is on May 3", None, "DELETE", "2025-01-01T00:00:00+00:00",
         "2025-02-01T00:00:00+00:00", 1, None, None),
    ])
    db.commit()
    db.close()


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_mem0_chroma_folder_arrives_row_by_row_and_is_left_untouched(db_target, tmp_path, monkeypatch):
    folder, history = tmp_path / "chroma", tmp_path / "history.db"
    _chroma(folder)
    _history(history)
    before = _files(folder)
    monkeypatch.setattr(mem0, "CHROMA_PAGE", 2)  # mem0's 4 records in three pages
    Memory.open(db_target).close()
    first = _import(db_target, "mem0", str(folder), "--history", str(history), "--vectors-from", STORE_MODEL)
    # Lisbon, its earlier text, the planner's, the coder's, bob's of another collection, Bob's deleted one
    assert first["imported"] == 6 and first["already_there"] == 0, first
    assert {(d["table"], d["id"]) for d in first["skipped"]} == {
        ("mem0", EMPTY), ("mem0migrations", None), ("messages", "x5")}  # x5: a role the record lacks
    assert first["conversations"]["messages"] == 4
    # the three of the collection of the store's size kept as they are; the 4-d one and the history's embedded
    assert (first["vectors"]["reused"], first["vectors"]["embedded"]) == (3, 3)
    again = _import(db_target, "mem0", str(folder), "--history", str(history), "--vectors-from", STORE_MODEL)
    assert (again["imported"], again["already_there"]) == (0, 6)
    assert _files(folder) == before  # chromadb read a copy: the folder it opens, it writes to

    got = _stored(db_target)
    assert len(got) == 6
    lisbon, porto, planner = got[f"mem0:{LISBON}"], got["history:h1"], got[f"mem0:{PLANNER}"]
    assert (lisbon.content, lisbon.user_id, lisbon.scope, lisbon.category) == (
        "Alice lives in Lisbon", "alice", "user:alice", "fact")
    assert lisbon.created_at.isoformat() == "2025-03-01T18:00:00+00:00"
    assert lisbon.updated_at.isoformat() == "2025-06-01T09:00:00+00:00"
    assert lisbon.metadata["mem0"] == {"hash": "h-lisbon"}
    assert (porto.content, porto.superseded_by, lisbon.supersedes) == ("Alice lives in Porto", lisbon.id, porto.id)
    assert porto.valid_to.isoformat() == "2025-06-01T09:00:00+00:00"
    assert (planner.user_id, planner.agent_id, planner.session_id, planner.scope) == (
        "alice", "planner", "trip-7", "user:alice")
    assert planner.metadata["mem0"] == {"actor_id": "alice", "role": "user", "hash": "h-aisle", "source": "chat"}
    coder = got[f"mem0:{CODER}"]
    assert (coder.content, coder.agent_id, coder.scope) == ("The repo uses pnpm", "coder", "agent:coder")
    small = got[f"mem0_small:{SMALL}"]
    assert (small.content, small.scope) == ("Standup is at 9:30", "user:bob")
    bob = got["history:h3"]
    assert bob.id == stable_id("mem0", "deleted", BOB) and bob.is_deleted and bob.content == "Bob's birthday is on May 3"
    assert bob.deleted_at.isoformat() == "2025-02-01T00:00:00+00:00"

    vectors = _vectors(db_target, [lisbon.id, planner.id, small.id])
    assert _is_vector_of(vectors[lisbon.id], "Alice lives in Lisbon")  # the update's vector, not the add's
    assert _is_vector_of(vectors[planner.id], "quartz lantern")  # reused as stored, not embedded again
    assert _is_vector_of(vectors[small.id], "Standup is at 9:30")  # 4-d: embedded


def test_a_chroma_folder_empty_or_broken_fails_clearly(db_path, tmp_path):
    import chromadb
    from chromadb.config import Settings

    Memory.open(db_path).close()
    empty = tmp_path / "empty"
    chromadb.PersistentClient(path=str(empty), settings=Settings(anonymized_telemetry=False)).close()
    assert "holds no collection" in _import(str(db_path), "mem0", str(empty), code=1)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "chroma.sqlite3").write_bytes(b"not a database")
    assert "cannot read the Chroma folder" in _import(str(db_path), "mem0", str(broken), code=1)
    unreadable = tmp_path / "unreadable"
    _chroma(unreadable)
    (unreadable / "segment.bin").symlink_to(tmp_path / "gone")  # a file that cannot be copied
    assert "cannot read the Chroma folder" in _import(str(db_path), "mem0", str(unreadable), code=1)
    assert not _stored(str(db_path))
