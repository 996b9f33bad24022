"""Backups: taken while writers write, restored into an empty store of either backend, checked."""

from __future__ import annotations

import io
import json
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from clawrecall import Caller, Memory
from clawrecall.cli import cli
from clawrecall.errors import ValidationError
from clawrecall.storage.backup import MANIFEST, backup, restore

ALICE = Caller("alice", "main", "s1")


def _fill(mem: Memory) -> None:
    """A store with every kind of row: memories (one superseded, one deleted), history, a conversation,
    startup entries, a second user's scope."""
    first = mem.add("Alice lives in Berlin", user_id="alice", category="fact")
    mem.supersede(first.id, "Alice moved to Lisbon in 2024", user_id="alice")
    gone = mem.add("Alice's old phone number is 555-0100", user_id="alice")
    mem.delete(gone.id, user_id="alice")
    mem.add("Bob writes Python and lints with ruff", user_id="bob", tags=["code"], importance=0.9)
    mem.conversations.log([{"role": "user", "content": "I adopted a cat named Miso"},
                           {"role": "assistant", "content": "Congratulations on Miso!"}], caller=ALICE)
    mem.startup.set("tone", "Answer briefly", user_id="alice")


def _tables(path: Path) -> dict[str, list[dict]]:
    """A backup's rows, per table."""
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(MANIFEST).read())
        return {name: [json.loads(line) for line in tar.extractfile(f"{name}.jsonl")] for name in manifest["tables"]}


def _same(a: dict[str, list[dict]], b: dict[str, list[dict]]) -> None:
    """Row by row equal; vectors to half precision (PostgreSQL keeps halfvec)."""
    assert a.keys() == b.keys()
    for name in a:
        assert len(a[name]) == len(b[name]), name
        for x, y in zip(a[name], b[name]):
            vx, vy = x.pop("embedding", None), y.pop("embedding", None)
            assert x == y, name
            assert (vx is None) == (vy is None)
            if vx is not None:
                import base64

                fx, fy = (np.frombuffer(base64.b64decode(v), dtype="<f4") for v in (vx, vy))
                assert np.allclose(fx, fy, atol=2e-3)


def test_backup_while_four_writers_write_restores_identical(db_target, tmp_path):
    mem = Memory.open(db_target)
    _fill(mem)
    stop = threading.Event()
    started = threading.Barrier(5)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        started.wait()
        i = 0
        while not stop.is_set() or i < 5:
            try:
                mem.add(f"writer {n} wrote note number {i} about topic {i * 7 + n}", user_id=f"w{n}")
            except BaseException as exc:  # reported below
                errors.append(exc)
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    started.wait()
    path = tmp_path / "store.tar"
    summary = backup(mem._store, path)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    taken = _tables(path)
    # one snapshot: every memory the backup holds has its history, and no history outlives its memory
    memories = {r["id"] for r in taken["memories"] if r["kind"] == "memory"}
    assert {r["memory_id"] for r in taken["history"]} == memories
    assert summary.tables["memories"] == len(taken["memories"]) > 5
    assert summary.tables["messages"] == 2 and summary.tables["startup"] == 1

    from clawrecall.storage import open_store

    target = open_store(tmp_path / "restored.db")
    restore(target, path)
    again = tmp_path / "again.tar"
    backup(target, again)
    target.close()
    _same(_tables(path), _tables(again))
    mem.close()


@pytest.fixture
def other_backend(db_target, tmp_path, request):
    """The backend db_target is not: a backup restores across."""
    if db_target.startswith("postgresql"):
        return str(tmp_path / "other.db")
    return request.getfixturevalue("other_pg_url")


def test_restore_into_the_other_backend_answers_the_same(db_target, other_backend, tmp_path):
    source = Memory.open(db_target)
    _fill(source)
    path = tmp_path / "store.tar.gz"
    backup(source._store, path)

    runner = CliRunner()
    result = runner.invoke(cli, ["--db", other_backend, "restore", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["tables"]["memories"] == len(_tables(path)["memories"])
    restored = Memory.open(other_backend)
    for query, user in (("where does Alice live", "alice"), ("cat", "alice"), ("Python ruff", "bob")):
        want = [(h.memory.id, h.memory.content) for h in source.search(query, user_id=user)]
        got = [(h.memory.id, h.memory.content) for h in restored.search(query, user_id=user)]
        assert got == want and want, query
    assert [e.content for e in restored.startup.list(user_id="alice")] == ["Answer briefly"]
    assert restored.stats().model_dump(exclude={"size_bytes", "backend", "location"}) == \
        source.stats().model_dump(exclude={"size_bytes", "backend", "location"})
    restored.close()
    source.close()


def test_restore_refuses_a_full_store_a_newer_schema_and_a_damaged_file(db_target, tmp_path):
    mem = Memory.open(db_target)
    _fill(mem)
    path = tmp_path / "store.tar"
    backup(mem._store, path)
    with pytest.raises(ValidationError, match="not empty"):
        restore(mem._store, path)
    mem.close()

    def rewritten(name: str, change) -> Path:
        out = tmp_path / name
        with tarfile.open(path) as src, tarfile.open(out, "w") as dst:
            for member in src.getmembers():
                data = change(member.name, src.extractfile(member).read())
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
        return out

    def newer(name: str, data: bytes) -> bytes:
        if name != MANIFEST:
            return data
        manifest = json.loads(data)
        manifest["migrations"]["core"].append("from-the-future")
        return json.dumps(manifest).encode()

    def damaged(name: str, data: bytes) -> bytes:
        return data.replace(b"Lisbon", b"Madrid") if name == "memories.jsonl" else data

    from clawrecall.storage import open_store

    for name, change, message in (("newer.tar", newer, "newer clawrecall"), ("damaged.tar", damaged, "damaged")):
        empty = open_store(tmp_path / f"{name}.db")
        with pytest.raises(ValidationError, match=message):
            restore(empty, rewritten(name, change))
        assert empty.run("SELECT count(*) FROM memories")[0][0] == 0
        empty.close()


def test_backup_cli_answers_in_json(tmp_path):
    db = tmp_path / "m.db"
    mem = Memory.open(db)
    _fill(mem)
    mem.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "backup", str(tmp_path / "b.tar"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["tables"]["memories"] >= 4 and data["backend"] == "sqlite" and data["bytes"] > 0


def test_scheduled_backups_come_when_due_and_keep_the_newest(tmp_path):
    from datetime import datetime, timedelta, timezone

    folder = tmp_path / "backups"
    mem = Memory.open(tmp_path / "m.db", backups={"dir": str(folder), "every_hours": 24, "keep": 2})
    _fill(mem)
    t0 = datetime(2026, 3, 1, 3, 0, tzinfo=timezone.utc)
    assert mem.upkeep.scheduled_backup(t0) is not None
    assert mem.upkeep.scheduled_backup(t0 + timedelta(hours=23)) is None  # not due yet
    for day in (1, 2, 3):
        assert mem.upkeep.scheduled_backup(t0 + timedelta(days=day)) is not None
    names = [p.name for p in mem.upkeep.saved_backups()]
    assert names == ["clawrecall-20260303T030000Z.tar.gz", "clawrecall-20260304T030000Z.tar.gz"]
    assert len(_tables(mem.upkeep.saved_backups()[-1])["memories"]) == mem._store.run("SELECT count(*) FROM memories")[0][0]
    mem.close()
    off = Memory.open(tmp_path / "off.db")
    assert off.upkeep.scheduled_backup(t0) is None and off.upkeep.saved_backups() == []
    off.close()


def test_the_sweep_purges_on_its_schedule_and_doctor_says_when(db_target, tmp_path):
    from datetime import timedelta

    from clawrecall._time import utcnow

    mem = Memory.open(db_target, writes={"retention_days": 0, "purge_every_hours": 1})
    assert mem.upkeep.last_purge() is None
    gone = mem.add("A note that was deleted", user_id="alice")
    mem.delete(gone.id, user_id="alice")
    mem.add("A reminder that expired", user_id="alice", expires_at=utcnow() - timedelta(minutes=1))
    kept = mem.add("A note that stays", user_id="alice")
    assert mem.upkeep.sweep().memories_purged == 2
    assert mem.upkeep.last_purge().purged == 2
    later = mem.add("Deleted after the purge", user_id="alice")
    mem.delete(later.id, user_id="alice")
    assert mem.upkeep.sweep().memories_purged == 0  # the next purge is an hour away
    assert [m.id for m in mem.list(user_id="alice", include_deleted=True)] == [later.id, kept.id]
    mem.close()

    config = tmp_path / "config.toml"
    config.write_text('[writes]\nretention_days = 0\n')
    result = CliRunner().invoke(cli, ["--db", db_target, "--config", str(config), "doctor", "--json"])
    upkeep = next(c for c in json.loads(result.output)["checks"] if c["name"] == "upkeep")
    assert "last purge just now (2 memories erased)" in upkeep["detail"]
    assert "scheduled backups off" in upkeep["detail"]
