"""Background work and session state belong to the `Memory` that made them: two stores in one process
share neither, and `close()` writes what was queued before it returns."""

from __future__ import annotations

import threading
import time

import pytest

from hook_helpers import ctx, slow_adds, user

from clawrecall import Memory, ShuttingDownError
from clawrecall.hooks import agent_end, startup_context
from clawrecall.runtime import Runtime, WorkQueue

LOCKER = {"messages": [user("Remember that my locker code is 4711")]}


def contents(mem: Memory) -> list[str]:
    return [r.content for r in mem.list(user_id="alice")]


def test_two_stores_have_their_own_capture_writers(tmp_path):
    with Memory.open(tmp_path / "a.db") as a, Memory.open(tmp_path / "b.db") as b:
        gate = threading.Event()
        slow_adds(a, gate)
        assert agent_end(a, LOCKER, ctx())["queued"] == 1
        assert agent_end(b, LOCKER, ctx())["queued"] == 1
        # b's write does not wait behind a's blocked one
        assert b.upkeep.runtime.drain(30) and contents(b) == ["Remember that my locker code is 4711"]
        assert not a.upkeep.runtime.drain(0.1) and contents(a) == []
        gate.set()
        assert a.upkeep.runtime.drain(30) and contents(a) == ["Remember that my locker code is 4711"]


def test_two_memories_have_their_own_session_state(tmp_path):
    """The startup block is injected once per session: a session on one Memory says nothing about the other's."""
    path = tmp_path / "m.db"
    with Memory.open(path) as a, Memory.open(path) as b:
        a.startup.set("soul", "You are terse.")
        first = {"messages": [], "model": "gpt-4o"}
        assert startup_context(a, first, ctx())["prependContext"] is not None
        assert startup_context(a, {"messages": [user("hi")]}, ctx())["reason"] == "already_injected"
        assert startup_context(b, {"messages": [user("hi")]}, ctx())["prependContext"] is not None
        assert a.upkeep.runtime.sessions("startup", dict) is not b.upkeep.runtime.sessions("startup", dict)


def test_close_writes_the_captures_queued_before_it(tmp_path):
    path = tmp_path / "m.db"
    mem = Memory.open(path)
    gate = threading.Event()
    slow_adds(mem, gate)
    assert agent_end(mem, LOCKER, ctx())["queued"] == 1
    threading.Timer(0.3, gate.set).start()  # the write is still waiting when close() is called
    started = time.perf_counter()
    mem.close()
    assert time.perf_counter() - started >= 0.2
    with Memory.open(path) as again:
        assert contents(again) == ["Remember that my locker code is 4711"]


def test_a_closed_store_takes_no_more_background_work(tmp_path):
    mem = Memory.open(tmp_path / "m.db")
    mem.close()
    mem.close()  # twice is harmless
    with pytest.raises(ShuttingDownError, match="closed"):
        mem.upkeep.runtime.queue("capture")


def test_a_hook_during_shutdown_is_a_503_the_runtime_can_retry(tmp_path):
    """Between the server's drain and its exit a hook route may still be called: its queue refuses
    the work as `shutting_down` (503), not as an internal error (500)."""
    from fastapi.testclient import TestClient

    from clawrecall.auth import TokenStore
    from clawrecall.server import create_app

    with Memory.open(tmp_path / "m.db") as mem:
        app = create_app(mem, tokens=TokenStore(mem._store), allow_anonymous=True)
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        mem.upkeep.runtime.stop()
        headers = {"x-clawrecall-user": "alice", "x-clawrecall-agent": "main", "x-clawrecall-session": "s1"}
        for route, body in (
            ("agent_end", {"messages": [user("Remember that my locker code is 4711")]}),
            ("before_prompt_build", {"prompt": "What is my locker code?"}),
        ):
            response = client.post(f"/v1/hooks/{route}", json=body, headers=headers)
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "shutting_down"


def test_a_bounded_queue_refuses_rather_than_blocks():
    queue = WorkQueue("test", max_pending=1)
    gate = threading.Event()
    first = queue.submit(gate.wait, 10)
    assert first is not None and queue.submit(print, "never") is None
    assert not queue.drain(0.05)
    gate.set()
    assert queue.drain(10) and first.result() is True
    assert queue.submit(int, "7").result(10) == 7  # room again once the first is done
    assert queue.stop(10)


def test_stop_waits_for_queued_work_and_reports_what_overran():
    runtime = Runtime()
    done: list[int] = []
    writes = runtime.queue("writes")
    for i in range(3):
        writes.submit(lambda i=i: (time.sleep(0.05), done.append(i)))
    assert runtime.stop(10) and done == [0, 1, 2]
    stuck = Runtime()
    gate = threading.Event()
    stuck.queue("slow").submit(gate.wait, 10)
    assert stuck.stop(0.05) is False
    gate.set()


def test_a_delayed_call_starts_on_its_own_or_at_once_when_the_queue_is_drained():
    queue = WorkQueue("later")
    ran = threading.Event()
    queue.submit_later(0.05, ran.set)
    assert ran.wait(30)  # nobody waits for it: it starts after its delay
    done: list[int] = []
    queue.submit_later(3600, done.append, 1)
    assert queue.drain(30) and done == [1]  # drained: it starts at once, not in an hour
    queue.submit_later(3600, done.append, 2)
    assert queue.stop(30) and done == [1, 2]  # stopped: the same
