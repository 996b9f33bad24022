"""The change feed (`mem.changes`, REST `/v1/events`): every change to a memory, in commit order, told
only to those who may read the memory; resumed after the last event id; across server processes."""

from __future__ import annotations

import json
import queue
import threading
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawrecall import Caller, Memory, ScopeError
from clawrecall.server.spawn import spawn_server

ALICE, BOB, ADMIN = Caller("alice"), Caller("bob"), Caller()
WAIT_S = 60  # how long a test waits for an event before it fails (it goes on as soon as the event is there)


def _types(page) -> list[tuple[str, str]]:
    return [(e.type, e.memory_id) for e in page.events]


def test_every_kind_of_change_is_an_event_in_commit_order_for_those_who_read_it(db_target):
    with Memory.open(db_target) as mem:
        start = mem.changes.last()
        kept = mem.add("Alice keeps her passport in the desk", user_id="alice").id
        hers = mem.add("Alice is allergic to penicillin", user_id="alice").id
        his = mem.add("Bob's locker code is 4417", user_id="bob").id
        mem.update(kept, content="Alice keeps her passport in the safe", user_id="alice")
        mem.delete(kept, user_id="alice")
        mem.undelete(kept, user_id="alice")
        mem.forget(hers, user_id="alice")
        page = mem.changes.after(start, caller=ALICE)
        # a forgotten memory's earlier changes are erased with it: only that it is gone is told
        assert _types(page) == [("added", kept), ("updated", kept), ("deleted", kept), ("restored", kept), ("forgotten", hers)]
        assert [e.id for e in page.events] == sorted(e.id for e in page.events) and page.more is False
        forgotten = page.events[-1]
        assert forgotten.memory is None and forgotten.scope == "user:alice"  # where it was: nothing of what it said
        assert page.events[0].memory.content == "Alice keeps her passport in the safe"  # as it is now
        assert _types(mem.changes.after(start, caller=BOB)) == [("added", his)]
        assert len(mem.changes.after(start, caller=ADMIN).events) == 6
        assert page.cursor == mem.changes.last()  # bob's add, after alice's last event, is read past too
        assert mem.changes.after(page.cursor, caller=ALICE).events == []
        with pytest.raises(ScopeError):
            mem.changes.after(start, caller=BOB, scope="user:alice")


def test_a_page_stops_at_its_limit_and_reads_on_from_its_cursor(db_target):
    with Memory.open(db_target) as mem:
        start = mem.changes.last()
        ids = [r.id for r in mem.add_many([{"content": f"note {i}"} for i in range(5)], user_id="alice", dedup=False)]
        first = mem.changes.after(start, caller=ALICE, limit=3)
        rest = mem.changes.after(first.cursor, caller=ALICE, limit=3)
        assert (first.more, rest.more) == (True, False)
        assert [e.memory_id for e in first.events + rest.events] == ids


def test_an_agents_private_memory_is_no_event_for_another_agent_of_the_scope(db_target):
    with Memory.open(db_target) as mem:
        start = mem.changes.last()
        private = mem.add("The deploy key rotates on Fridays", user_id="alice", agent_id="ops", visibility="private").id
        shared = mem.add("Alice likes short answers", user_id="alice", agent_id="ops").id
        assert [e.memory_id for e in mem.changes.after(start, caller=Caller("alice", "ops")).events] == [private, shared]
        assert [e.memory_id for e in mem.changes.after(start, caller=Caller("alice", "chat")).events] == [shared]
        mem.forget(private, user_id="alice", agent_id="ops")
        assert [e.type for e in mem.changes.after(start, caller=Caller("alice", "chat")).events] == ["added"]


def test_erasing_a_person_leaves_no_event_that_names_where_their_memories_were(db_target):
    with Memory.open(db_target) as mem:
        start = mem.changes.last()
        gone = mem.add("Alice's old address", user_id="alice").id
        mem.forget(gone, user_id="alice")
        mem.add("Alice's new address", user_id="alice")
        assert [e.type for e in mem.changes.after(start, caller=ADMIN).events] == ["forgotten", "added"]
        mem.erase(user_id="alice")
        assert mem.changes.after(start, caller=ADMIN).events == []
        assert all("alice" not in json.dumps(h.after or {}) for h in mem._store.history.after(start, 100))


def test_on_postgresql_a_later_writer_commits_its_change_after_an_earlier_one_so_a_reader_misses_none(pg_url):
    """Ids are taken before commit: a writer that took a later id and committed first would be read past
    (the cursor moves beyond the earlier id before it is visible). It waits for the earlier one instead."""
    import psycopg

    with Memory.open(pg_url) as mem:
        mem.add("A first memory: the store's indexes are made", user_id="bob")
        start = mem.changes.last()
        written, release, second_done = threading.Event(), threading.Event(), threading.Event()

        def first() -> None:
            with mem._store.transaction():
                mem.add("The first change", user_id="alice")
                written.set()
                release.wait(WAIT_S)

        def second() -> None:
            mem.add("The second change", user_id="alice")
            second_done.set()

        one = threading.Thread(target=first)
        one.start()
        assert written.wait(WAIT_S)
        two = threading.Thread(target=second)
        two.start()
        with psycopg.connect(pg_url, autocommit=True) as conn:  # until the second waits for the lock, or is done
            while not second_done.is_set() and not conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                second_done.wait(0.01)
        assert not second_done.is_set()
        assert mem.changes.after(start, caller=ALICE).events == []  # nothing to read past yet
        release.set()
        one.join()
        two.join()
        assert [e.memory.content for e in mem.changes.after(start, caller=ALICE).events] == ["The first change", "The second change"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["alice", "bob"]), st.sampled_from(["add", "update", "delete", "forget"])),
                min_size=1, max_size=12))
def test_two_users_each_hear_exactly_the_changes_to_memories_they_may_read(sqlite_mem, steps):
    mem = sqlite_mem
    start = mem.changes.last()
    owned: dict[str, list[str]] = {"alice": [], "bob": []}
    expected: dict[str, list[tuple[str, str]]] = {"alice": [], "bob": []}
    for n, (who, op) in enumerate(steps):
        mine = owned[who]
        if op == "add" or not mine:
            mid = mem.add(f"{who} note {n}", user_id=who, dedup=False).id
            mine.append(mid)
            expected[who].append(("added", mid))
        elif op == "update":
            mem.update(mine[-1], content=f"{who} note {n} changed", user_id=who)
            expected[who].append(("updated", mine[-1]))
        elif op == "delete":
            mem.delete(mine[-1], user_id=who)
            expected[who].append(("deleted", mine.pop()))  # left alone after: deleting again changes nothing
        else:
            gone = mine.pop()
            mem.forget(gone, user_id=who)
            expected[who] = [e for e in expected[who] if e[1] != gone] + [("forgotten", gone)]  # its past is erased
    for who in ("alice", "bob"):
        assert _types(mem.changes.after(start, caller=Caller(who))) == expected[who]


@pytest.fixture(scope="module")
def sqlite_mem(tmp_path_factory):
    with Memory.open(tmp_path_factory.mktemp("feed") / "feed.db") as mem:
        yield mem


# -- /v1/events over real sockets ------------------------------------------------------------------
class Stream:
    """An SSE client in a thread of its own: the events it got, as (id, type, data), waited for one by one."""

    def __init__(self, url: str, user: str, headers: dict[str, str] | None = None, params: dict | None = None):
        self.events: queue.Queue = queue.Queue()
        self.opened = threading.Event()
        self.status: int | None = None
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=None),
                                    headers={"x-clawrecall-user": user, **(headers or {})})
        self._params = params or {}
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self.opened.wait(WAIT_S), "the stream did not open"

    def _read(self) -> None:
        try:
            with self._client.stream("GET", "/v1/events", params=self._params) as response:
                self.status = response.status_code
                fields: dict[str, str] = {}
                for line in response.iter_lines():
                    if line.startswith("retry:"):
                        self.opened.set()  # the first line: the server subscribed before it sent it
                    elif line == "" and "data" in fields:
                        self.events.put((int(fields["id"]), fields["event"], json.loads(fields["data"])))
                        fields = {}
                    elif ":" in line and not line.startswith(":"):
                        name, _, value = line.partition(":")
                        fields[name] = value.strip()
                if self.status != 200:
                    self.opened.set()
        except httpx.HTTPError:
            pass
        finally:
            self.opened.set()

    def next(self) -> tuple[int, str, dict]:
        return self.events.get(timeout=WAIT_S)

    def close(self) -> None:
        self._client.close()
        self._thread.join(WAIT_S)


@contextmanager
def stream(url: str, user: str, **kwargs) -> Iterator[Stream]:
    s = Stream(url, user, **kwargs)
    try:
        yield s
    finally:
        s.close()


def _add(url: str, user: str, content: str) -> str:
    r = httpx.post(f"{url}/v1/memories", json={"content": content, "dedup": False}, headers={"x-clawrecall-user": user}, timeout=30)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def test_a_write_through_another_server_reaches_a_stream_of_the_first_and_only_its_readers(db_target, tmp_path):
    """Two server processes on one store (PostgreSQL: NOTIFY; SQLite: the poll of the log); a stream resumes
    after its last event id without loss or repeat."""
    quick = {"CLAWRECALL_INSIGHT__EVENTS_KEEPALIVE_S": "0.5"}  # a closed stream is noticed at the next keepalive
    with spawn_server(db_target, log_path=tmp_path / "one.log", env=quick) as one, \
            spawn_server(db_target, log_path=tmp_path / "two.log", env=quick) as two:
        with stream(one.url, "alice") as alice, stream(one.url, "bob") as bob:
            hers = _add(two.url, "alice", "Alice parks on level 3")
            his = _add(two.url, "bob", "Bob parks on level 5")
            mine = _add(one.url, "alice", "Alice's car is blue")  # through the stream's own server
            first, kind, data = alice.next()
            assert (kind, data["memory_id"], data["scope"], data["memory"]["content"]) == \
                ("added", hers, "user:alice", "Alice parks on level 3")
            assert alice.next()[2]["memory_id"] == mine
            assert bob.next()[2]["memory_id"] == his  # never alice's: her two came first
            assert alice.events.empty()
        later = [_add(two.url, "alice", f"Alice note {n}") for n in range(2)]
        with stream(one.url, "alice", headers={"Last-Event-ID": str(first)}) as again:
            assert [again.next()[2]["memory_id"] for _ in range(3)] == [mine, *later]
        with stream(one.url, "bob", params={"scope": "user:alice"}) as refused:
            assert refused.status == 403
        with stream(one.url, "alice", headers={"Last-Event-ID": "yesterday"}) as bad:
            assert bad.status == 400


def test_a_server_with_an_open_stream_stops_when_told(tmp_path):
    """A stream never ends by itself, and uvicorn waits for every response before it exits: the server ends them."""
    with spawn_server(tmp_path / "memory.db", log_path=tmp_path / "serve.log") as server:
        with stream(server.url, "alice") as alice:
            server.process.terminate()
            server.process.wait(WAIT_S)  # else TimeoutExpired: the server waited for the stream
            assert "Application shutdown complete" in server.log() and alice.events.empty()
