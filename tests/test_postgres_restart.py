"""A PostgreSQL server restart under an open store and under a running `clawrecall serve`: calls fail clearly
while it is down, then work again, and no acknowledged write is lost."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from clawrecall import Memory
from clawrecall.errors import StorageError
from clawrecall.server.spawn import spawn_server


@pytest.fixture
def own_server():
    """A PostgreSQL server of this test's own (the shared one must not be stopped under other tests)."""
    import pgserver

    home = Path(tempfile.mkdtemp(prefix="clawrecall-pg-restart-"))
    server = pgserver.get_server(home / "data", cleanup_mode="stop")
    yield home / "data", server
    try:
        pgserver.get_server(home / "data", cleanup_mode="delete").cleanup()
    finally:
        shutil.rmtree(home, ignore_errors=True)


#: how long a request waits for a connection here (`postgres.pool_timeout_s`, 10 s by default): the outage
#: that outlasts it need not last 10 s
POOL_TIMEOUT_S = 2.0


def test_the_pool_retries_a_lost_server_every_2_s_at_most(monkeypatch):
    """psycopg_pool alone doubles the delay without bound (1, 2, 4, 8, 16 s…): after a long outage it could
    stay idle for as long again."""
    from psycopg_pool import ConnectionPool

    from clawrecall.storage.postgres import _pool_class

    attempts = []
    monkeypatch.setattr(ConnectionPool, "_add_connection", lambda pool, attempt, growing=False: attempts.append(attempt))
    pool = object.__new__(_pool_class())  # no connections: only its attempts are asked for
    pool.reconnect_timeout = 300.0
    pool._add_connection(None)
    [attempt] = attempts
    delays = []
    for now in range(0, 60, 2):
        attempt.update_delay(float(now))
        delays.append(attempt.delay)
    assert max(delays) == 2.0 and delays[-1] == 2.0 and 0.8 < delays[0] < 1.2


def test_the_store_survives_a_server_restart(own_server):
    import pgserver

    data, server = own_server
    url = server.get_uri()
    with Memory.open(url, postgres={"pool_timeout_s": POOL_TIMEOUT_S}) as mem:
        mem.add("written before the restart", user_id="alice")
        server.cleanup()  # pg_ctl stop: every pooled connection dies

        started = time.monotonic()
        with pytest.raises(StorageError, match="PostgreSQL"):
            mem.count()
        assert time.monotonic() - started < 60  # a clear error once the pool's 2 s are out, not a hang

        restarted = pgserver.get_server(data, cleanup_mode="stop")
        assert restarted.get_uri() == url
        assert mem.count() == 1  # the pool reconnects on its own
        assert mem.add("Alice's cat is called Miso", user_id="alice").action == "created"
        assert [h.memory.content for h in mem.search("what is the cat's name?", user_id="alice", limit=1)] == [
            "Alice's cat is called Miso"
        ]


def test_a_server_waits_out_a_short_postgres_outage_answers_a_long_one_clearly_and_keeps_every_acknowledged_write(
        own_server, tmp_path):
    """A client adds memories back to back through `clawrecall serve` while PostgreSQL is stopped, until a
    request has been refused, and started again: the server stays up; a request waits up to the pool's timeout
    for a connection (an outage shorter than that is only a delay), then is a 503 `storage_error` (as is a
    request in flight when the server stops); adds succeed again after the restart, and every add answered 201
    is in the database."""
    import pgserver

    data, server = own_server
    url = server.get_uri()
    acked: dict[str, str] = {}
    answers: list[tuple[float, int, str | None, float]] = []  # (sent at, status, error code, seconds)
    stop = threading.Event()

    def wait_until(condition) -> None:
        """Until the writer's answers say so; the deadline only tells a hang from a wait."""
        deadline = time.monotonic() + 120
        while not condition(list(answers)) and time.monotonic() < deadline:
            time.sleep(0.05)

    env = {"CLAWRECALL_POSTGRES__POOL_TIMEOUT_S": str(POOL_TIMEOUT_S)}
    with spawn_server(url, log_path=tmp_path / "serve.log", env=env) as running:
        def stream() -> None:
            with httpx.Client(base_url=running.url, timeout=60, headers={"x-clawrecall-user": "alice"}) as client:
                n = 0
                while not stop.is_set():
                    content, sent = f"note {n} written around a restart", time.monotonic()
                    answer = client.post("/v1/memories", json={"content": content, "dedup": False})
                    body = answer.json()
                    answers.append((sent, answer.status_code, body.get("error", {}).get("code"), time.monotonic() - sent))
                    if answer.status_code == 201:
                        acked[body["id"]] = content
                    n += 1
                    time.sleep(0.02)

        writer = threading.Thread(target=stream)
        writer.start()
        wait_until(lambda seen: sum(status == 201 for _, status, *_ in seen) >= 3)
        server.cleanup()  # pg_ctl stop: every pooled connection of the server dies
        down = time.monotonic()
        # the outage lasts until a request sent after it has waited out the pool's timeout and been refused
        wait_until(lambda seen: any(sent > down and status == 503 for sent, status, *_ in seen))
        assert pgserver.get_server(data, cleanup_mode="stop").get_uri() == url
        restarted = time.monotonic()
        wait_until(lambda seen: sum(sent > restarted for sent, *_ in seen) >= 5)
        stop.set()
        writer.join(60)
        assert running.process.poll() is None  # the server lived through it
        assert all((status, code) in ((201, None), (503, "storage_error")) for _, status, code, _ in answers)
        refused = [(sent, seconds) for sent, status, _, seconds in answers if status == 503]
        # refused: a request that waited the pool's timeout, or one in flight while the server went down
        assert refused and all(sent < restarted and (seconds >= POOL_TIMEOUT_S or sent < down) for sent, seconds in refused), refused
        assert any(seconds >= POOL_TIMEOUT_S for _, seconds in refused)
        after = [status for sent, status, _, _ in answers if sent > restarted]
        # the pool tries again every 2 s at most (test_the_pool_retries_a_lost_server_every_2_s_at_most), so
        # adds succeed again soon after the restart
        assert len(after) >= 5 and set(after) == {201}
        some = next(iter(acked.values()))
        hits = httpx.post(f"{running.url}/v1/search", json={"query": some, "mode": "bm25", "limit": 1},
                          headers={"x-clawrecall-user": "alice"}).json()["results"]
        assert [h["memory"]["content"] for h in hits] == [some]
    with Memory.open(url) as mem:
        stored = mem._store.memories.fetch(list(acked))
        assert {i: r.content for i, r in stored.items()} == acked
