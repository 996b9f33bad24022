"""The engine's events (engine/_events.py): handlers registered by event name run on the event, the
engine's own wiring is listed by name, and `serve` and `worker` load the same `--handlers`."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from clawrecall import Caller, Memory, ValidationError
from clawrecall.cli import cli
from clawrecall.cli.commands import load_handlers
from clawrecall.engine._events import EVENTS, SegmentClosed, VectorsStored
from clawrecall.server.spawn import spawn_server

ALICE = Caller("alice")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

HANDLERS = '''
def register(mem):
    mem.upkeep.job("note", lambda job, lease: mem.add("noted " + job.subject_id, user_id="alice"))


def closes(mem):
    mem.upkeep.job("note", lambda job, lease: mem.add("noted by closes " + job.subject_id, user_id="alice"))
    mem.upkeep.on("segment_closed", lambda e: mem.jobs.enqueue("note", scope=e.segment.scope, subject_id=e.segment.id),
                  name="notes.on_close")
'''


def _turns(n: int, start: datetime) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about trains",
             "timestamp": (start + timedelta(seconds=i)).isoformat()} for i in range(n)]


def test_a_listener_registered_by_event_name_runs_on_the_event_with_its_payload(db_target):
    with Memory.open(db_target) as mem:
        closed, stored = [], []
        mem.upkeep.on("segment_closed", closed.append, name="test.closed")
        mem.upkeep.on("vectors_stored", stored.append, name="test.stored")
        result = mem.conversations.log(_turns(2, T0), caller=ALICE, session_id="s1", now=T0)
        mem.conversations.end("s1", caller=ALICE)
        mem._backfill.run()
        assert [type(e) for e in closed] == [SegmentClosed] and closed[0].segment.close_reason == "session_end"
        assert [type(e) for e in stored] == [VectorsStored] and set(result.ids) <= set(stored[0].ids)
        listed = mem.upkeep.handlers()
        assert listed.events["segment_closed"] == ["test.closed"]
        assert listed.events["vectors_stored"] == ["conversations.check_topics", "retrieval.warm", "test.stored"]


def test_the_engine_wires_extraction_by_name_when_an_llm_is_configured(db_target):
    with Memory.open(db_target, llm={"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}) as mem:
        listed = mem.upkeep.handlers()
    assert listed.events == {"segment_closed": ["extraction.queue"],
                             "vectors_stored": ["conversations.check_topics", "retrieval.warm"]}
    assert listed.jobs == {"extract": "clawrecall.engine._extraction.Extraction.extract",
                           "summarize": "clawrecall.engine._extraction.Extraction.summarize"}


def test_an_unknown_event_or_a_job_kind_named_as_an_event_is_a_clear_error(db_target):
    with Memory.open(db_target) as mem:
        with pytest.raises(ValidationError, match="unknown event 'segment_close': the events are segment_closed, vectors_stored"):
            mem.upkeep.on("segment_close", print)
        with pytest.raises(ValidationError, match="'segment_closed' is an event, not a job kind"):
            mem.upkeep.job("segment_closed", lambda job, lease: None)
        assert mem.upkeep.handlers().events["segment_closed"] == []
    assert set(EVENTS) == {"segment_closed", "vectors_stored"}


def test_worker_and_serve_refuse_the_same_bad_handlers_alike(tmp_path, monkeypatch):
    (tmp_path / "notes.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = str(tmp_path / "h.db")
    Memory.open(db).close()
    runner = CliRunner()
    for command in (["worker", "--once"], ["serve", "--port", "0"]):
        missing = runner.invoke(cli, ["--db", db, *command, "--handlers", "no_such_handlers", "--json"])
        assert missing.exit_code == 1, missing.output
        error = json.loads(missing.stdout)["error"]
        assert error["code"] == "config_error"
        assert error["message"].startswith("cannot import handlers module 'no_such_handlers': No module named")
        nameless = runner.invoke(cli, ["--db", db, *command, "--handlers", "notes:nowhere", "--json"])
        assert json.loads(nameless.stdout)["error"]["message"] == "handlers module 'notes' has no nowhere(mem) function"
        malformed = runner.invoke(cli, ["--db", db, *command, "--handlers", "notes handlers"])
        assert malformed.exit_code == 2 and "is not MODULE or MODULE:FUNCTION" in malformed.output


def test_worker_runs_what_a_named_function_of_a_handlers_module_registers(db_target, tmp_path, monkeypatch):
    """`notes:closes` queues a job as each segment closes (in the process that closes it) and handles its kind
    (in the worker): the same `--handlers` value in both."""
    (tmp_path / "notes.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    with Memory.open(db_target) as mem:
        mem.conversations.log(_turns(2, T0), caller=ALICE, session_id="s1", now=T0)
        mem.conversations.end("s1", caller=ALICE)  # no listener yet: nothing queued
        assert mem.jobs.list(caller=Caller()) == []
        load_handlers(mem, ("notes:closes",))
        assert mem.upkeep.handlers().events["segment_closed"] == ["notes.on_close"]
        mem.conversations.log(_turns(2, T0), caller=ALICE, session_id="s2", now=T0)
        closed = mem.conversations.end("s2", caller=ALICE)
        assert [j.subject_id for j in mem.jobs.list(caller=Caller())] == [closed.id]
    result = CliRunner().invoke(cli, ["--db", db_target, "worker", "--once", "--handlers", "notes:closes", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["status"] for line in result.stdout.splitlines()] == ["done"]
    with Memory.open(db_target) as mem:
        assert [m.content for m in mem.list(caller=ALICE)] == [f"noted by closes {closed.id}"]


def test_serve_runs_the_job_kinds_its_handlers_register_in_its_workers(tmp_path):
    (tmp_path / "notes.py").write_text(HANDLERS)
    db = tmp_path / "served.db"
    with Memory.open(db) as mem:
        mem.jobs.enqueue("note", scope="user:alice", subject_id="first")
    env = {"CLAWRECALL_HOME": str(tmp_path / "home"), "CLAWRECALL_JOBS__POLL_S": "0.05",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with spawn_server(db, args=["--handlers", "notes"], env=env):
        with Memory.open(db) as mem:
            deadline = time.monotonic() + 60
            while (job := mem.jobs.list(caller=Caller())[0]).status != "done" and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting for the server's worker to finish the job, not a fixed delay
            assert job.status == "done", job
            assert [m.content for m in mem.list(caller=ALICE)] == ["noted first"]
