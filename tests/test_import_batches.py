"""How an import from another system handles its rows in bulk: each memory validated once, vectors read
in their binary form (pgvector's `vector_send`, a LanceDB column as one array) and decoded to the same
numbers as their text."""

from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pyarrow as pa
import pytest

from clawrecall import Memory
from clawrecall.engine import _validate
from clawrecall.errors import ValidationError
from clawrecall.importers import lancedb_pro
from clawrecall.importers.data import vector

from conftest import _admin, with_database


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
