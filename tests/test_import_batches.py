"""How an import from another system handles its rows in bulk: each memory validated once, written as its
JSONL line and as one add each would be, vectors read in their binary form (pgvector's `vector_send`, a
LanceDB column as one array) and decoded to the same numbers as their text."""

from __future__ import annotations

import json
import uuid
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np
import psycopg
import pyarrow as pa
import pytest

from clawrecall import Memory
from clawrecall.embeddings.hashing import HashEmbedder
from clawrecall.engine import _validate
from clawrecall.errors import ValidationError
from clawrecall.importers import data, lancedb_pro
from clawrecall.importers.data import _NAMESPACE, stable_id, vector
from clawrecall.scopes import Caller

from conftest import _admin, with_database

HASH_DIMS = HashEmbedder("hashed-word-trigrams").dimensions  # the tests' store model (conftest)


def test_an_import_validates_each_line_once(db_path, monkeypatch):
    calls = []
    original = _validate.new_record

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_validate, "new_record", counted)
    monkeypatch.setattr("clawrecall.engine._writes.new_record", counted)
    monkeypatch.setattr("clawrecall.engine._transfer.new_record", counted, raising=False)  # where it was called too
    lines = [json.dumps({"id": str(uuid.UUID(int=i + 1)), "content": f"memory number {i} about topic {i % 7}"})
             for i in range(40)]
    with Memory.open(db_path) as mem:
        result = mem.import_jsonl(lines, on_duplicate="keep", chunk=16)
        assert result.created == 40
        assert len(calls) == 40  # was twice each: once to check every line, once more per batch written
        calls.clear()
        again = mem.import_jsonl(lines, on_duplicate="keep", chunk=16)
    assert again.created == 0 and again.skipped == 40


@pytest.fixture
def vectors_pg(pg_server):
    name = "vec_" + uuid.uuid4().hex[:12]
    _admin(pg_server, f"CREATE DATABASE {name}")
    with psycopg.connect(with_database(pg_server, name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE t (id INT, v vector(4))")
        conn.execute("INSERT INTO t VALUES (1, '[0.5, -1.25, 3e-8, 1024]'), (2, NULL)")
        yield conn
    _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_pgvector_binary_vectors_decode_to_their_text(vectors_pg):
    rows = vectors_pg.execute("SELECT vector_send(v), v::text FROM t ORDER BY id").fetchall()
    binary, text = rows[0]
    assert isinstance(binary, bytes)
    decoded = vector(binary)
    assert decoded.dtype == np.float32
    assert np.array_equal(decoded, vector(text))
    assert decoded.tolist() == pytest.approx([0.5, -1.25, 3e-8, 1024])
    assert vector(rows[1][0]) is None
    with pytest.raises(ValidationError, match="binary form"):
        vector(binary[:-2])  # a value cut short is no vector


def test_a_sources_vectors_decode_at_once_as_each_alone(vectors_pg):
    """`vectors` decodes a column's binary vectors in one call, to what `vector` makes of each, in their
    order: of other lengths, as text, missing; and fails as `vector` does on one that is no vector."""
    vectors_pg.execute("INSERT INTO t VALUES (3, '[1, 2, 3, 4]'), (4, '[-0.0, 7.5, 0.125, -2]')")
    vectors_pg.execute("CREATE TABLE u (id INT, v vector(2))")
    vectors_pg.execute("INSERT INTO u VALUES (5, '[9, 8]')")
    binary = [r[0] for r in vectors_pg.execute("SELECT vector_send(v) FROM t ORDER BY id").fetchall()]
    values = [*binary, vectors_pg.execute("SELECT vector_send(v) FROM u").fetchone()[0], "[0.25, 0.5]", [1.0, 2.0]]
    decoded = data.vectors(values)
    assert [None if d is None else (d.dtype, d.tobytes()) for d in decoded] == \
        [None if v is None else (np.dtype(np.float32), vector(v).tobytes()) for v in values]
    assert decoded[1] is None and decoded[3].tolist() == [-0.0, 7.5, 0.125, -2] and decoded[4].tolist() == [9, 8]
    with pytest.raises(ValidationError, match="binary form"):
        data.vectors([binary[0], b"\0\5" + binary[2][2:]])  # as long as the others, but its head says otherwise
    with pytest.raises(ValidationError, match="binary form"):
        data.vectors([binary[0], binary[2][:-2]])


def test_a_lancedb_vector_column_reads_as_its_rows(tmp_path):
    dims = 3
    kind = pa.list_(pa.float32(), dims)
    chunks = [pa.array([[1, 2, 3], None, [4, 5, 6]], type=kind), pa.array([[7, 8, 9], [0, 0.5, -1]], type=kind)]
    column = pa.chunked_array(chunks).slice(1)  # chunked and offset, as a table read back can be
    got = lancedb_pro._vectors(column)
    want = column.to_pylist()
    assert [None if v is None else v.tolist() for v in got] == want
    assert got[0] is None and got[1].dtype == np.float32
    ragged = pa.chunked_array([pa.array([[1.0, 2.0], None], type=pa.list_(pa.float32()))])
    assert [None if v is None else v.tolist() for v in lancedb_pro._vectors(ragged)] == [[1.0, 2.0], None]


def test_import_from_a_system_honours_defer_index(vectors_pg, pg_url, monkeypatch):
    """`--defer-index` drops PostgreSQL's vector index for an import from another system too, and builds
    it once at the end: maintaining the graph row by row is most of a large import's time there."""
    from click.testing import CliRunner

    from clawrecall.cli import cli
    from clawrecall.engine._upkeep import Upkeep

    vectors_pg.execute("CREATE TABLE mem0 (id UUID PRIMARY KEY, vector vector(4), payload JSONB)")
    for i in range(3):
        vectors_pg.execute("INSERT INTO mem0 VALUES (%s, NULL, %s)",
                           (str(uuid.UUID(int=i + 1)), json.dumps({"data": f"fact number {i}", "user_id": "alice"})))
    source = f"postgresql:///{vectors_pg.info.dbname}?host={vectors_pg.info.host}&port={vectors_pg.info.port}" \
             f"&user={vectors_pg.info.user}"
    with Memory.open(pg_url) as mem:
        mem.add("already stored")
        assert mem._store.has_vector_index()
    deferred = []
    original = Upkeep.deferred_vector_index

    def spy(self, *, rebuild=False):
        deferred.append(rebuild)
        return original(self, rebuild=rebuild)

    monkeypatch.setattr(Upkeep, "deferred_vector_index", spy)
    result = CliRunner().invoke(cli, ["--db", pg_url, "import", "--from", "mem0", source, "--defer-index", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["imported"] == 3
    assert deferred == [True]
    with Memory.open(pg_url) as mem:
        assert mem.count() == 4 and mem._store.has_vector_index()
        assert mem._store.get_meta("vector_index_deferred") is None


# Items as readers of other systems make them: explicit times (so every store writes the same), a supersede
# chain, a soft delete, tags, metadata with text beyond ASCII, and vectors for some of them only.
_ITEMS = [
    {"id": str(uuid.UUID(int=1)), "content": "User's FTP was 250 W", "category": "preference", "user_id": "ann",
     "created_at": "2025-01-01T00:00:00+00:00", "valid_from": "2025-01-01T00:00:00+00:00",
     "updated_at": "2025-02-01T00:00:00+00:00", "valid_to": "2025-02-01T00:00:00+00:00",
     "superseded_by": str(uuid.UUID(int=2)), "source_type": "mem0", "source_id": "mem0:a"},
    {"id": str(uuid.UUID(int=2)), "content": "User's FTP is 262 W", "category": "preference", "user_id": "ann",
     "created_at": "2025-02-01T00:00:00+00:00", "valid_from": "2025-02-01T00:00:00+00:00",
     "updated_at": "2025-02-01T00:00:00+00:00", "supersedes": str(uuid.UUID(int=1)), "tags": ["bike", "fitness"],
     "metadata": {"mem0": {"hash": "h2", "city": "Zürich"}}, "source_type": "mem0", "source_id": "mem0:b"},
    {"id": str(uuid.UUID(int=3)), "content": "The team standup is at 9:30", "agent_id": "main",
     "created_at": "2025-03-01T08:00:00+00:00", "updated_at": "2025-03-02T08:00:00+00:00",
     "deleted_at": "2025-03-02T08:00:00+00:00", "importance": 0.4, "confidence": 0.8},
    {"id": str(uuid.UUID(int=4)), "content": "Prefers window seats on long flights", "scope": "global",
     "created_at": "2025-04-01T12:30:00+00:00", "updated_at": "2025-04-01T12:30:00+00:00", "title": "Seats"},
]


def _written(mem: Memory) -> tuple[dict, list, list]:
    """Every row (with its stored vector), every history row and the change feed, by what they say."""
    rows = {i: (r.model_dump(), v) for i, r, v in (
        (i, mem._store.memories.fetch([i])[i], v) for i, v in mem._store.run("SELECT id, embedding FROM memories"))}
    history = [(h.memory_id, h.action, h.before, h.after, h.at) for h in
               sorted((e for i in rows for e in mem.history(i)), key=lambda h: (h.memory_id, h.action))]
    events = [(e.memory_id, e.type, e.scope, e.at) for e in mem.changes.after(0, limit=100).events]
    return rows, history, sorted(events)


def test_items_an_import_holds_are_written_as_their_lines_and_as_one_add_each(tmp_path):
    vectors = {i["id"]: np.random.default_rng(n).standard_normal(HASH_DIMS).astype(np.float32)
               for n, i in enumerate(_ITEMS[:2])}  # the rest embedded by the store's model
    with Memory.open(tmp_path / "items.db") as mem:
        done = mem.import_items(_ITEMS, on_duplicate="keep", chunk=3, vectors=vectors)
        assert (done.created, done.read) == (4, 4)
        by_items = _written(mem)
        again = mem.import_items(_ITEMS, on_duplicate="keep", chunk=3, vectors=vectors)
        assert (again.created, again.skipped) == (0, 4)
        assert again.left_out[0] == {"item": 1, "reason": "id_exists", "id": _ITEMS[0]["id"]}
    with Memory.open(tmp_path / "lines.db") as mem:
        mem.import_jsonl([json.dumps(i) for i in _ITEMS], on_duplicate="keep", chunk=3, vectors=vectors)
        by_lines = _written(mem)
    with Memory.open(tmp_path / "adds.db") as mem:
        for i in _ITEMS:
            mem.add_many([i], dedup=False, embeddings=vectors[i["id"]][None, :] if i["id"] in vectors else None)
        by_adds = _written(mem)
    assert by_items == by_lines == by_adds
    rows, history, events = by_items
    assert rows[_ITEMS[1]["id"]][0]["metadata"] == {"mem0": {"hash": "h2", "city": "Zürich"}}
    assert rows[_ITEMS[0]["id"]][0]["superseded_by"] == _ITEMS[1]["id"]
    assert [h[1] for h in history] == ["add"] * 4 and [e[1] for e in events] == ["added"] * 4


def test_a_bad_item_is_named_by_its_place_and_nothing_is_written(tmp_path):
    with Memory.open(tmp_path / "memory.db") as mem:
        with pytest.raises(ValidationError, match="item 2: unknown category 'gossip'"):
            mem.import_items([{"content": "fine"}, {"content": "bad", "category": "gossip"}])
        with pytest.raises(ValidationError, match="item 3: metadata must not contain NUL"):
            mem.import_items([{"content": "a"}, {"content": "b"}, {"content": "c", "metadata": {"k": [{"v": "\x00"}]}}])
        assert mem.count() == 0


@pytest.mark.parametrize("metadata, stored", [
    ({"rows": [[], {}] * 40, "city": "Zürich"}, True),  # 160 brackets, 3 deep, escaped text without a NUL
    ({"path": "C:\\u0000\\dir"}, True),  # a backslash and a u are text, not an escape
    ({"k": ["ok", "\udc80"]}, False),  # a lone surrogate
])
def test_metadata_is_checked_by_what_it_holds_not_by_how_its_json_looks(tmp_path, metadata, stored):
    with Memory.open(tmp_path / "memory.db") as mem:
        if stored:
            assert mem.get(mem.add("x", metadata=metadata).id).metadata == metadata
        else:
            with pytest.raises(ValidationError, match="metadata is not valid Unicode"):
                mem.add("x", metadata=metadata)


def test_a_source_rows_id_is_uuid5_of_its_system_table_and_id():
    for row in ("1", "f1", "00000000-0000-0000-0000-000000000001", "zürich/ü€", "x" * 500):
        assert stable_id("mem0", "memories", row) == str(uuid.uuid5(_NAMESPACE, f"mem0:memories:{row}"))


def test_the_sqlite_writer_caches_what_a_large_stores_indexes_need(db_path):
    with Memory.open(db_path) as mem:
        assert mem._store.run("PRAGMA cache_size")[0][0] == -65_536


@pytest.mark.parametrize("with_vectors, steps", [(True, [4, 8, 10]), (False, [3, 6, 9, 10])])
def test_an_import_that_embeds_nothing_commits_in_larger_batches(db_path, monkeypatch, with_vectors, steps):
    """Every memory keeping the source's vector: `STORED_CHUNK` a transaction; any to embed: `EMBEDDED_CHUNK`
    (the sizes made small here; the progress bar moves once a transaction)."""
    monkeypatch.setattr(data, "STORED_CHUNK", 4)
    monkeypatch.setattr(data, "EMBEDDED_CHUNK", 3)
    rng = np.random.default_rng(5)

    def read(source: str, options: data.Options) -> data.Plan:
        plan = data.Plan(vector_model="hashed-word-trigrams")
        plan.items = [data.item("mem0", "t", n, f"memory {n} about topic {n}") for n in range(10)]
        if with_vectors:
            plan.vectors = {i["id"]: rng.standard_normal(HASH_DIMS).astype(np.float32) for i in plan.items}
        return plan

    seen: list[int] = []
    with Memory.open(db_path) as mem:
        done = data.run(mem, "mem0", read, "src", caller=Caller(), dry_run=False,
                        progress=lambda n, total: seen.append(n))
        assert done["imported"] == 10 and done["vectors"]["reused"] == (10 if with_vectors else 0)
        assert seen == steps
        seen.clear()
        data.run(mem, "mem0", read, "src", caller=Caller(), dry_run=False, chunk=5,
                 progress=lambda n, total: seen.append(n))  # an explicit --batch-size wins; nothing left to write
        assert seen == [] and mem.count() == 10


@pytest.mark.parametrize("text", [
    "12345678-1234-5678-9abc-123456789abc", "00000000-0000-0000-0000-000000000000", "123456781234567812341234567890ab",
    "{12345678-1234-5678-9abc-123456789abc}", "urn:uuid:12345678-1234-5678-9abc-123456789abc",
    "12345678-1234-5678-9abc-123456789abc\n", " 12345678-1234-5678-9abc-123456789abc", "12345678-1234-5678-9abc-123456789ab",
    "1234567-81234-5678-9abc-123456789abc", "12345678-1234-5678-9abc-123456789abg", "", "x" * 36,
    "12345678_1234_5678_9abc_123456789abc", "١٢٣٤٥٦٧٨-1234-5678-9abc-123456789abc",
])
def test_a_memory_id_is_checked_as_the_uuid_module_would(text):
    try:
        canonical = str(uuid.UUID(text)) == text
    except ValueError:
        canonical = False
    assert _validate._is_uuid(text) is canonical


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), (0, "1970-01-01T00:00:00+00:00"), (1735689600000, "2025-01-01T00:00:00+00:00"),
    (1735689600.5, "2025-01-01T00:00:00.500000+00:00"), ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00+00:00"),
    ("2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00+00:00"), ("2024-01-01", "2024-01-01T00:00:00+00:00"),
    (date(2024, 1, 2), "2024-01-02T00:00:00+00:00"), (datetime(2024, 1, 1), "2024-01-01T00:00:00+00:00"),
    (datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2))), "2023-12-31T22:00:00+00:00"),
    (datetime(2024, 1, 1, 5, tzinfo=ZoneInfo("UTC")), "2024-01-01T05:00:00+00:00"),
])
def test_a_source_time_becomes_iso_utc(value, expected):
    assert data.utc(value) == expected


@pytest.mark.parametrize("value", ["yesterday", [1], {"t": 1}])
def test_a_source_value_that_is_no_time_fails_clearly(value):
    with pytest.raises(ValidationError, match="is not a time"):
        data.utc(value)


def test_an_import_runs_without_the_cyclic_collector_and_resumes_it(db_path, monkeypatch):
    """Its records pile up until it ends: the collector, run every few hundred of them, would walk them all
    again and again. Paused for each door of the import (from a system, JSONL, items), resumed after, even
    when an import fails; an import inside another (or beside it) leaves resuming to the outer one."""
    import gc

    during: list[bool] = []
    original = _validate.new_record

    def watched(*args, **kwargs):
        during.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr("clawrecall.engine._writes.new_record", watched)

    def read(source: str, options: data.Options) -> data.Plan:
        during.append(gc.isenabled())
        return data.Plan(items=[data.item("mem0", "t", n, f"memory {n} about topic {n}") for n in range(3)])

    assert gc.isenabled()
    with Memory.open(db_path) as mem:
        data.run(mem, "mem0", read, "src", caller=Caller(), dry_run=False, progress=None)
        assert gc.isenabled()
        mem.import_jsonl([json.dumps({"content": "a line"})], on_duplicate="keep")
        assert gc.isenabled()
        mem.import_items([{"content": "an item"}], on_duplicate="keep")
        assert gc.isenabled()
        with pytest.raises(ValidationError, match="unknown category"):
            mem.import_items([{"content": "bad", "category": "gossip"}])
        assert gc.isenabled()
        gc.disable()  # paused by someone else: an import leaves it so
        try:
            mem.import_items([{"content": "another item"}], on_duplicate="keep")
            assert not gc.isenabled()
        finally:
            gc.enable()
    assert during and not any(during)


def test_a_batch_written_with_its_vectors_looks_its_ids_up_twice(db_path, monkeypatch):
    """Once to skip those stored already, once under the write lock (another import may have stored them
    since): nothing slow comes between, so the check that runs before embedding is not run again."""
    from clawrecall.storage.memories import Memories

    fetched: list[int] = []
    original = Memories.fetch

    def counted(self, ids, *args, **kwargs):
        fetched.append(len(ids))
        return original(self, ids, *args, **kwargs)

    monkeypatch.setattr(Memories, "fetch", counted)
    items = [data.item("mem0", "t", n, f"memory {n} about topic {n}") for n in range(10)]
    rng = np.random.default_rng(3)
    vectors = {i["id"]: rng.standard_normal(HASH_DIMS).astype(np.float32) for i in items}
    with Memory.open(db_path) as mem:
        done = mem.import_items(items, on_duplicate="keep", chunk=4, vectors=vectors)
        assert done.created == 10
    assert fetched == [10] + [4, 4, 4, 4, 2, 2]  # all of them first (what is left to do), then each batch twice
